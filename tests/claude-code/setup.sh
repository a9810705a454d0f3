#!/bin/sh
# Installs the pinned Claude Code CLI (tests/claude-code/VERSION) from the npm registry into
# tests/.cache/agents/claude-code-<version>/ for the Claude Code suites (idempotent; the
# steps: tests/support/npm_agent.sh). The native binary comes from an optional per-platform
# dependency; the postinstall only links it over a placeholder, so install scripts may be on
# or off.
#
# Usage: tests/claude-code/setup.sh        (prints the path of the installed `claude`)
set -eu
installed() {
    "$link" --version 2>/dev/null | grep -q "^$version "
}
. "$(dirname "$0")/../support/npm_agent.sh"
npm_agent_begin claude-code claude
npm_agent_install "@anthropic-ai/claude-code@$version"
real="$dir/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
# bin/claude.exe stays a small shell stub when install scripts did not run: then use the
# platform package's binary directly.
if [ ! -f "$real" ] || [ "$(wc -c < "$real")" -lt 100000 ]; then
    real=$(ls "$dir"/node_modules/@anthropic-ai/claude-code-*/claude 2>/dev/null | head -n 1 || true)
fi
npm_agent_link "$real"
