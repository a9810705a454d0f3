#!/usr/bin/env bash
# The whole test suite: installs what the tests need (tests/setup-all.sh: the pinned agent
# CLIs from the npm registry, ...), then runs every test. This is the command the README
# gives and CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/setup-all.sh
exec cargo test --locked "$@"
