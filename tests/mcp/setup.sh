#!/bin/sh
# Installs the pinned MCP servers (tests/mcp/package.json, locked by package-lock.json:
# @modelcontextprotocol/server-filesystem and server-everything, and mcp-fetch-server, with
# every transitive dependency at the locked version) from the npm registry into
# tests/.cache/mcp-<hash>/ for tests/mcp_proxy.rs and tests/mcp_claude_e2e.rs. Idempotent:
# when every server is there, it does nothing.
#
# Usage: tests/mcp/setup.sh        (prints the directory holding node_modules/)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# The directory is named after the lock file, so a new pin installs next to the old one.
hash=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-12)
dir="$root/tests/.cache/mcp-$hash"
servers="@modelcontextprotocol/server-filesystem @modelcontextprotocol/server-everything mcp-fetch-server"

installed() {
    for s in $servers; do
        [ -f "$dir/node_modules/$s/dist/index.js" ] || return 1
    done
}

if ! installed; then
    mkdir -p "$dir"
    cp "$here/package.json" "$here/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    installed || {
        echo "setup: the MCP servers are not under $dir/node_modules after npm ci" >&2
        exit 1
    }
fi
# A stable name the tests look for, whatever the hash.
ln -sfn "$dir" "$root/tests/.cache/mcp"
echo "$dir"
