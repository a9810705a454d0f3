#!/bin/sh
# Installs the pinned claude-agent-acp, Zed's ACP adapter for Claude Code
# (tests/claude-acp/VERSION), from the npm registry into
# tests/.cache/agents/claude-acp-<version>/ for tests/acp_claude.rs (idempotent; the steps:
# tests/support/npm_agent.sh; the editor's ACP client library comes from tests/acp/setup.sh).
# The adapter runs the Claude Code that its Agent SDK bundles, in node: no native binary, no
# install script, no download.
#
# Usage: tests/claude-acp/setup.sh        (prints the path of the installed `claude-agent-acp`)
set -eu
# The adapter has no --version: the installed package says which version it is.
installed() {
    node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
        "$dir/node_modules/@zed-industries/claude-agent-acp/package.json" "$version" 2>/dev/null
}
. "$(dirname "$0")/../support/npm_agent.sh"
npm_agent_begin claude-acp claude-agent-acp
npm_agent_install "@zed-industries/claude-agent-acp@$version"
npm_agent_link "$dir/node_modules/.bin/claude-agent-acp"
