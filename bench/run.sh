#!/usr/bin/env bash
# Every benchmark, one table: bench/run.sh [--quick] [--write] [--compare OTHER-AHP-WRAP]
#                                         [--pathshim] [--telemetry] [--fleet] [--repeat N]
#
#   --quick     fewer calls and shorter criterion runs (a smoke run; the figures are rougher)
#   --write     also write the table into BENCHMARKS.md's results block
#   --compare   also time another build's hook process in the same run (before/after; by
#               default the dynamically linked hook, beside the static one install.sh installs)
#   --pathshim  only the PATH-shim rows (a command through its shim under --framework path,
#               against the bare command), no criterion; --write puts them in their own block
#   --telemetry only the telemetry rows (the hook with spans exported to a live collector, to
#               one that is down, and without export, in alternated runs); --write puts them
#               in their own block
#   --fleet     only the HCP fleet rows (benches/fleet.rs: tasks/s through a private RabbitMQ
#               broker, latency per task against the same run started directly)
#   --repeat N  the whole-process benches N times (the criterion ones once), each table kept
#               in $target/bench-runs/, then their spread (bench/spread.py: min / median /
#               max of every row); --write puts the spread in its own block, and the last
#               run's table in the results block
#
# Builds the release (bench-profile) binaries, runs the criterion benches (benches/inproc.rs:
# harness client, audit log, the parent's share of a hook), then the whole-process benches
# (benches/wrapper.rs: hook calls, start-up, memory, pass-through), which print the table
# with the criterion figures folded in, then the stream proxy's (benches/proxy.rs) into their
# own block. Never part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
export CRITERION_HOME=${CRITERION_HOME:-$target/criterion}
# The durable audit benches write here: the project's disk, not a tmpfs.
export AHP_BENCH_TMPDIR=${AHP_BENCH_TMPDIR:-$target}
mkdir -p "$AHP_BENCH_TMPDIR"

quick=() write=() crit=() compare=() only=() fleet= repeat=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=(--quick) crit=(--warm-up-time 1 --measurement-time 1) ;;
    --write) write=(--write BENCHMARKS.md) ;;
    --compare) compare=(--compare "$(realpath "${2:?--compare needs a path}")"); shift ;;
    --pathshim) only=(--only pathshim) ;;
    --telemetry) only=(--only telemetry) ;;
    --fleet) fleet=only ;;
    --repeat) repeat=${2:?--repeat needs a count}; shift ;;
    *) echo "usage: bench/run.sh [--quick] [--write] [--compare OTHER-AHP-WRAP] [--pathshim] [--telemetry] [--fleet] [--repeat N]" >&2; exit 2 ;;
  esac
  shift
done

# What install.sh installs, built by install.sh itself (its own target directory): the wrapper
# with the code a run executes laid out first, its hook linked statically where it can be
# (Linux with glibc). The benches run that (AHP_BENCH_WRAP); unless --compare names another,
# the dynamically linked hook cargo builds is timed beside it in the same run.
inst=$target/bench-install
./install.sh --build-into "$inst"
cargo build --locked -q --profile bench --bins
if [ ${#compare[@]} -eq 0 ]; then
  mkdir -p "$target/bench-dynamic-hook"
  cp "$target/release/ahp-wrap-hook" "$target/bench-dynamic-hook/"
  compare=(--compare "$target/bench-dynamic-hook/ahp-wrap-hook")
fi
export AHP_BENCH_WRAP=$inst/ahp-wrap
# The closest peer, timed beside the hook on the same payload (issue 23): OpenMoat, pinned,
# installed once from the crates registry outside this project (its init refuses a binary
# inside the project it is run from, which an agent could replace).
peer_root=${AHP_BENCH_PEER_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/ahp-wrap-bench/openmoat-0.12.1}
peer=$peer_root/bin/openmoat
if [ ! -x "$peer" ] && [ ${#only[@]} -eq 0 ] && [ "$fleet" != only ]; then
  echo "installing the peer, OpenMoat 0.12.1, into $peer_root (once; a few minutes)…" >&2
  cargo install -q openmoat --version 0.12.1 --locked --root "$peer_root" ||
    echo "the peer could not be installed: its rows are left out" >&2
fi
if [ -x "$peer" ]; then export AHP_BENCH_PEER=$peer; fi

if [ "$fleet" = only ]; then
  exec cargo bench --locked --bench fleet -- ${quick[@]+"${quick[@]}"} ${write[@]+"${write[@]}"}
fi
if [ ${#only[@]} -gt 0 ]; then
  exec cargo bench --locked --bench wrapper -- "${only[@]}" ${quick[@]+"${quick[@]}"} \
    ${write[@]+"${write[@]}"} ${compare[@]+"${compare[@]}"}
fi
cargo bench --locked --bench inproc --bench wrapper --bench proxy --bench fleet --no-run
log=$target/bench-inproc.log
echo "in-process benches (criterion; full output in $log)…" >&2
cargo bench --locked --bench inproc -- ${crit[@]+"${crit[@]}"} >"$log"
grep -E '^[a-z_]+/[a-z_]+ +time:|^[a-z_]+/[a-z_]+$|^ +time:' "$log" >&2 || true
if [ -n "$repeat" ]; then
  runs=$target/bench-runs
  rm -rf "$runs" && mkdir -p "$runs"
  for i in $(seq "$repeat"); do
    echo "whole-process benches, run $i of $repeat…" >&2
    # The last run also writes the results block (the latest run), as a single run does.
    last=()
    if [ "$i" = "$repeat" ]; then last=(${write[@]+"${write[@]}"}); fi
    cargo bench --locked --bench wrapper -- ${quick[@]+"${quick[@]}"} ${last[@]+"${last[@]}"} \
      ${compare[@]+"${compare[@]}"} | tee "$runs/run-$i.md"
  done
  spread=()
  if [ ${#write[@]} -gt 0 ]; then spread=(--write BENCHMARKS.md); fi
  exec python3 bench/spread.py "$runs"/run-*.md ${spread[@]+"${spread[@]}"}
fi
cargo bench --locked --bench wrapper -- ${quick[@]+"${quick[@]}"} ${write[@]+"${write[@]}"} \
  ${compare[@]+"${compare[@]}"}
# The MCP stream proxy: pass-through, an intercepted call, memory over a long stream.
cargo bench --locked --bench proxy -- ${quick[@]+"${quick[@]}"} ${write[@]+"${write[@]}"}
# The HCP fleet on a private RabbitMQ broker (skipped, saying so, when none is installed).
cargo bench --locked --bench fleet -- ${quick[@]+"${quick[@]}"} ${write[@]+"${write[@]}"}
