#!/bin/sh
# Installs the pinned Qwen Code CLI (tests/qwen/VERSION) from the npm registry into
# tests/.cache/agents/qwen-<version>/ for tests/qwen_e2e.rs (idempotent; the steps:
# tests/support/npm_agent.sh). The optional native deps (sharp, node-pty, clipboard, audio)
# are not needed headless.
#
# Usage: tests/qwen/setup.sh        (prints the path of the installed `qwen`)
set -eu
. "$(dirname "$0")/../support/npm_agent.sh"
npm_agent_begin qwen qwen
npm_agent_install "@qwen-code/qwen-code@$version" --omit=optional
npm_agent_link "$dir/node_modules/.bin/qwen"
