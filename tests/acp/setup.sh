#!/bin/sh
# Installs the pinned official ACP client library (tests/acp/package.json, locked by
# package-lock.json: @agentclientprotocol/sdk and its zod peer, at the locked versions) from
# the npm registry into tests/.cache/acp-<hash>/ for the editor of tests/acp_proxy.rs
# (tests/support/acp_editor.mjs) and tests/acp_codex.rs. The agents are the Gemini CLI of
# tests/gemini/setup.sh and codex-acp of tests/codex-acp/setup.sh.
# Idempotent: when the library is there, it does nothing.
#
# Usage: tests/acp/setup.sh        (prints the directory holding node_modules/)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# The directory is named after the lock file, so a new pin installs next to the old one.
hash=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-12)
dir="$root/tests/.cache/acp-$hash"

installed() {
    [ -f "$dir/node_modules/@agentclientprotocol/sdk/package.json" ] &&
        [ -f "$dir/node_modules/zod/package.json" ]
}

if ! installed; then
    mkdir -p "$dir"
    cp "$here/package.json" "$here/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    installed || {
        echo "setup: the ACP client library is not under $dir/node_modules after npm ci" >&2
        exit 1
    }
fi
# A stable name the tests look for, whatever the hash.
ln -sfn "$dir" "$root/tests/.cache/acp"
echo "$dir"
