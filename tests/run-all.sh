#!/usr/bin/env bash
# The whole test suite: installs what the tests need (the pinned agent CLIs from the npm
# registry), then runs every test. This is the command the README gives and CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# AHP_WRAP_SKIP_AGENT_E2E (setup names, comma-separated, or `all`) skips those setups on
# purpose, and their end-to-end tests skip with a message; CI never sets it.
skip=",${AHP_WRAP_SKIP_AGENT_E2E:-},"
for setup in tests/*/setup.sh; do
  [ -e "$setup" ] || continue
  name=$(basename "$(dirname "$setup")")
  case "$skip" in
    *,all,*|*",$name,"*) echo "run-all: skipping the $name setup ($AHP_WRAP_SKIP_AGENT_E2E)" >&2; continue ;;
  esac
  sh "$setup" >/dev/null
done
exec cargo test --locked "$@"
