#!/bin/sh
# Installs the pinned GitHub Copilot CLI (tests/copilot/VERSION) from the npm registry into
# tests/.cache/agents/copilot-<version>/ for tests/copilot_e2e.rs (idempotent; the steps:
# tests/support/npm_agent.sh). The native binary ships inside the npm package
# (@github/copilot-linux-x64); nothing else is downloaded.
#
# Usage: tests/copilot/setup.sh        (prints the path of the installed `copilot`)
set -eu
installed() {
    "$link" --version 2>/dev/null | grep -q "CLI $version\\."
}
. "$(dirname "$0")/../support/npm_agent.sh"
npm_agent_begin copilot copilot
npm_agent_install "@github/copilot@$version"
npm_agent_link "$dir/node_modules/.bin/copilot"
