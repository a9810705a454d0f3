#!/bin/sh
# Installs the pinned OpenCode CLI (tests/opencode/VERSION) from the npm registry into
# tests/.cache/agents/opencode-<version>/ for tests/opencode_e2e.rs (idempotent; the steps:
# tests/support/npm_agent.sh). opencode-ai ships its native (Bun-compiled) binary in an
# optional per-platform dependency (opencode-<os>-<arch>[-baseline][-musl]); its postinstall
# only links it, so scripts are skipped and the binary is found here.
#
# Usage: tests/opencode/setup.sh        (prints the path of the installed `opencode`)
set -eu
. "$(dirname "$0")/../support/npm_agent.sh"
npm_agent_begin opencode opencode
npm_agent_install "opencode-ai@$version" --ignore-scripts
npm_agent_link "$(npm_agent_first_runnable "$dir"/node_modules/opencode-linux-*/bin/opencode)"
