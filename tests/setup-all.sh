#!/usr/bin/env bash
# Installs what the tests need: runs every tests/<name>/setup.sh (the pinned agent CLIs from
# the npm registry, aider from PyPI, ...). Each is idempotent: one that finds its install
# returns at once. tests/run-all.sh runs it before the tests; .ci/run also runs it first,
# beside its checks (.ci/checks), since the setups wait on the network and the checks on
# the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# AHP_WRAP_SKIP_AGENT_E2E (setup names, comma-separated, or `all`) skips those setups on
# purpose, and their end-to-end tests skip with a message; CI never sets it.
skip=",${AHP_WRAP_SKIP_AGENT_E2E:-},"
for setup in tests/*/setup.sh; do
  [ -e "$setup" ] || continue
  name=$(basename "$(dirname "$setup")")
  case "$skip" in
    *,all,*|*",$name,"*) echo "setup-all: skipping the $name setup ($AHP_WRAP_SKIP_AGENT_E2E)" >&2; continue ;;
  esac
  sh "$setup" >/dev/null
done
