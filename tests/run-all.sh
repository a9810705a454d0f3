#!/usr/bin/env bash
# The whole test suite: installs what the tests need (the pinned agent CLIs from the npm
# registry), then runs every test. This is the command the README gives and CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
for setup in tests/*/setup.sh; do
  [ -e "$setup" ] || continue
  sh "$setup" >/dev/null
done
exec cargo test --locked "$@"
