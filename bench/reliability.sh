#!/usr/bin/env bash
# Reliability figures: bench/reliability.sh [--quick] [--write]
#
#   --quick   a smaller storm and soak (a smoke run; the soak then shows less)
#   --write   also write the table into CONTRIBUTING.md and BENCHMARKS.md (their
#             <!-- reliability:begin --> … <!-- reliability:end --> blocks)
#
# Builds the release binaries, then runs bench/reliability.py: a storm of concurrent hook
# processes, a soak of 100,000 events on the control socket (RSS per 100k events), every
# harness fault of tests/support/fault_harness.py, SIGKILL of the wrapper and death of the
# harness mid-run, and each kind of audit tampering through `audit verify`. A few minutes
# on a 2-core machine. Never part of `cargo test`; no figure here is a pass/fail test.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
# The durable audit logs go to the project's disk, not a tmpfs.
export AHP_BENCH_TMPDIR=${AHP_BENCH_TMPDIR:-$target}
mkdir -p "$AHP_BENCH_TMPDIR"

args=()
while [ $# -gt 0 ]; do
  case $1 in
    --quick) args+=(--storm 50 --soak 20000) ;;
    --write) write=1 ;;
    *) echo "usage: bench/reliability.sh [--quick] [--write]" >&2; exit 2 ;;
  esac
  shift
done
[ -n "${write:-}" ] && args+=(--write CONTRIBUTING.md BENCHMARKS.md)

cargo build --release --locked --bins
python3 bench/reliability.py "$target/release/ahp-wrap" ${args[@]+"${args[@]}"}
