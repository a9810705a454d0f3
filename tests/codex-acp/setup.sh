#!/bin/sh
# Installs the pinned codex-acp, Zed's ACP adapter for Codex (tests/codex-acp/VERSION), from
# the npm registry into tests/.cache/agents/codex-acp-<version>/ for tests/acp_codex.rs
# (idempotent; the steps: tests/support/npm_agent.sh; the editor's ACP client library comes
# from tests/acp/setup.sh). The native binary comes from an optional per-platform dependency
# (@zed-industries/codex-acp-<platform>@<version>); there is no install script and no download.
#
# Usage: tests/codex-acp/setup.sh        (prints the path of the installed `codex-acp`)
set -eu
# The binary has no --version: the installed package says which version it is.
installed() {
    node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
        "$dir/node_modules/@zed-industries/codex-acp/package.json" "$version" 2>/dev/null
}
. "$(dirname "$0")/../support/npm_agent.sh"
npm_agent_begin codex-acp codex-acp
npm_agent_install "@zed-industries/codex-acp@$version"
# A link to the native binary (no node needed to run it).
npm_agent_link "$(ls "$dir"/node_modules/@zed-industries/codex-acp-*/bin/codex-acp 2>/dev/null | head -n 1 || true)"
