#!/bin/sh
# Installs the pinned Gemini CLI (tests/gemini/VERSION) from the npm registry into
# tests/.cache/agents/gemini-<version>/ for tests/gemini_e2e.rs (idempotent; the steps:
# tests/support/npm_agent.sh). Pure JavaScript (bundle/); its optional native deps (node-pty,
# keytar) are not needed headless.
#
# Usage: tests/gemini/setup.sh        (prints the path of the installed `gemini`)
set -eu
. "$(dirname "$0")/../support/npm_agent.sh"
npm_agent_begin gemini gemini
npm_agent_install "@google/gemini-cli@$version"
npm_agent_link "$dir/node_modules/.bin/gemini"
