#!/bin/sh
# Installs the pinned Kilo Code CLI (tests/kilo/VERSION), a fork of OpenCode, from the npm
# registry into tests/.cache/agents/kilo-<version>/ for tests/kilo_e2e.rs (idempotent; the
# steps: tests/support/npm_agent.sh). @kilocode/cli ships its native (Bun-compiled) binary in
# an optional per-platform dependency (@kilocode/cli-<os>-<arch>[-baseline][-musl]); its
# postinstall only links it, so scripts are skipped and the binary is found here.
#
# Usage: tests/kilo/setup.sh        (prints the path of the installed `kilo`)
set -eu
. "$(dirname "$0")/../support/npm_agent.sh"
npm_agent_begin kilo kilo
npm_agent_install "@kilocode/cli@$version" --ignore-scripts
npm_agent_link "$(npm_agent_first_runnable "$dir"/node_modules/@kilocode/cli-linux-*/bin/kilo)"
