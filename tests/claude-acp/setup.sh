#!/bin/sh
# Installs the pinned claude-agent-acp, Zed's ACP adapter for Claude Code
# (tests/claude-acp/VERSION), from the npm registry into
# tests/.cache/agents/claude-acp-<version>/ for tests/acp_claude.rs (the editor's ACP client
# library comes from tests/acp/setup.sh). The adapter runs the Claude Code that its Agent SDK
# bundles, in node: no native binary, no install script, no download. Idempotent: when the
# adapter is already there at the pinned version, it does nothing.
#
# Usage: tests/claude-acp/setup.sh        (prints the path of the installed `claude-agent-acp`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/claude-acp-$version"
link="$dir/claude-agent-acp"
# The adapter has no --version: the installed package says which version it is.
manifest="$dir/node_modules/@zed-industries/claude-agent-acp/package.json"

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
[ -f package.json ] || echo '{"name":"ahp-wrap-e2e-claude-acp","private":true}' > package.json
npm install --no-audit --no-fund --no-save --loglevel=error "@zed-industries/claude-agent-acp@$version" >&2
ln -sf "$dir/node_modules/.bin/claude-agent-acp" "$link"
pinned || {
    echo "setup: $manifest does not say version $version" >&2
    exit 1
}
echo "$link"
