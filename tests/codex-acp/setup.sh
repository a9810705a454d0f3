#!/bin/sh
# Installs the pinned codex-acp, Zed's ACP adapter for Codex (tests/codex-acp/VERSION), from
# the npm registry into tests/.cache/agents/codex-acp-<version>/ for tests/acp_codex.rs (the
# editor's ACP client library comes from tests/acp/setup.sh). Idempotent: when the binary is
# already there at the pinned version, it does nothing.
#
# Usage: tests/codex-acp/setup.sh        (prints the path of the installed `codex-acp`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/codex-acp-$version"
link="$dir/codex-acp"
# The binary has no --version: the installed package says which version it is.
manifest="$dir/node_modules/@zed-industries/codex-acp/package.json"

pinned() {
    [ -x "$link" ] && [ -f "$manifest" ] &&
        node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
            "$manifest" "$version"
}

if pinned; then
    echo "$link"
    exit 0
fi

mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"ahp-wrap-e2e-codex-acp","private":true}' > package.json
# The native binary comes from an optional per-platform dependency
# (@zed-industries/codex-acp-<platform>@<version>); there is no install script and no download.
npm install --no-audit --no-fund --no-save --loglevel=error "@zed-industries/codex-acp@$version" >&2

real=$(ls "$dir"/node_modules/@zed-industries/codex-acp-*/bin/codex-acp 2>/dev/null | head -n 1 || true)
if [ -z "$real" ] || [ ! -x "$real" ]; then
    echo "setup: no native codex-acp binary found under $dir/node_modules" >&2
    exit 1
fi
# A link to the native binary (no node needed to run it).
ln -sf "$real" "$link"
pinned || {
    echo "setup: $manifest does not say version $version" >&2
    exit 1
}
echo "$link"
