#!/bin/sh
# Installs the pinned Codex CLI (tests/codex/VERSION) from the npm registry into
# tests/.cache/agents/codex-<version>/ for tests/codex_e2e.rs (idempotent; the steps:
# tests/support/npm_agent.sh). The native binary comes from an optional per-platform
# dependency (an npm alias of @openai/codex@<version>-<platform>); there is no install script
# and no download. The link goes to the native binary: no node needed.
#
# Usage: tests/codex/setup.sh        (prints the path of the installed `codex`)
set -eu
installed() {
    "$link" --version 2>/dev/null | grep -q "^codex-cli $version\$"
}
. "$(dirname "$0")/../support/npm_agent.sh"
npm_agent_begin codex codex
npm_agent_install "@openai/codex@$version"
npm_agent_link "$(ls "$dir"/node_modules/@openai/codex-*/vendor/*/bin/codex \
    "$dir"/node_modules/@openai/codex/vendor/*/bin/codex 2>/dev/null | head -n 1 || true)"
