#!/usr/bin/env bash
# What a tool call costs with checkpoints on, by the workspace's size (BENCHMARKS.md,
# "Checkpoints per tool call"): a loop of N calls of the hook (`ahp-wrap-hook hook claude-code
# PreToolUse`, a Bash `ls -la`) inside `ahp-wrap -q -- sh loop.sh`, against `/bin/true` in the
# same loop, in two git repositories: this project's tracked files, and one of 100,000 small
# source files (20 a directory, 5,000 directories). Each with checkpoints on (the default
# policy) and off (`[checkpoints] enabled = false`). With --peer, OpenMoat's hook (installed
# as bench/run.sh installs it) in the same loop, in the same repositories. Never part of
# `cargo test`.
#   bench/checkpoint_calls.sh [--calls N] [--files N] [--peer]
set -euo pipefail
cd "$(dirname "$0")/.."
calls=200 files=100000 peer=
while [ $# -gt 0 ]; do
  case $1 in
    --calls) calls=${2:?}; shift ;;
    --files) files=${2:?}; shift ;;
    --peer) peer=yes ;;
    *) echo "usage: bench/checkpoint_calls.sh [--calls N] [--files N] [--peer]" >&2; exit 2 ;;
  esac
  shift
done
target=${CARGO_TARGET_DIR:-target}
cargo build --locked -q --release --bin ahp-wrap --bin ahp-wrap-hook
wrap=$(realpath "$target/release/ahp-wrap") hook=$(realpath "$target/release/ahp-wrap-hook")
work=$(mktemp -d /var/tmp/bench-checkpoint-calls-XXXXXX)
trap 'rm -rf "$work"' EXIT
commit() { git -C "$1" init -q && git -C "$1" add -A && git -C "$1" -c user.email=b@b -c user.name=b commit -qm bench; }
mkdir "$work/small"
git archive HEAD | tar x -C "$work/small"
commit "$work/small"
python3 - "$work/large" "$files" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per_dir, per_top = 20, 100
for i in range(n):
    d = os.path.join(root, f"pkg{i // (per_dir * per_top)}", f"mod{(i // per_dir) % per_top}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.rs"), "w") as f:
        f.write(f"pub fn f{i}() -> u32 {{ {i} }}\n")
EOF
commit "$work/large"
printf '[checkpoints]\nenabled = false\n' > "$work/off.toml"
payload='{"session_id":"bench","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls -la"},"cwd":"."}'
# The loop: N calls of a command fed the payload, its wall time in ns on stdout.
cat > "$work/loop.sh" <<'EOF'
n=$1; shift
start=$(date +%s%N); i=0
while [ $i -lt "$n" ]; do printf '%s' "$PAYLOAD" | "$@" >/dev/null 2>&1; i=$((i+1)); done
echo $(( $(date +%s%N) - start ))
EOF
# One measure: the loop of the hook and of /bin/true under one run; ms added per call.
measure() { # repo, then wrapper options
  local repo=$1; shift
  local out
  out=$(cd "$repo" && XDG_STATE_HOME="$work/state" PAYLOAD=$payload "$wrap" -q --summary never "$@" -- \
    sh -c "sh '$work/loop.sh' $calls /bin/true; sh '$work/loop.sh' $calls '$hook' hook claude-code PreToolUse" )
  set -- $out
  python3 -c "print(f'{($2 - $1) / $calls / 1e6:.2f}')" 2>/dev/null ||
    echo "?"
}
row() { # repo, label
  local on off best_on=999 best_off=999
  for _ in 1 2 3; do
    on=$(measure "$1") off=$(measure "$1" --policy "$work/off.toml")
    best_on=$(python3 -c "print(min($best_on, $on))") best_off=$(python3 -c "print(min($best_off, $off))")
  done
  printf '| %s | %s ms | %s ms |\n' "$2" "$best_on" "$best_off"
}
# How many watches the checkpoints make in each repository: from a run's own log.
watches() {
  (cd "$1" && XDG_STATE_HOME="$work/state" "$wrap" -q --summary never --log info \
    --log-file "$work/watches.log" -- true 2>/dev/null)
  grep -o '[0-9]* directories watched' "$work/watches.log" | tail -1
}
n_small=$(git -C "$work/small" ls-files | wc -l)
echo "watches: this project's files: $(watches "$work/small"); $files files: $(watches "$work/large")"
echo "| workspace | added per call, checkpoints on | checkpoints off |"
echo "|---|---|---|"
row "$work/small" "this project's tracked files ($n_small)"
row "$work/large" "$files small source files, 5,000 directories"
if [ -n "$peer" ]; then
  peer_root=${AHP_BENCH_PEER_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/ahp-wrap-bench/openmoat-0.12.1}
  om=$peer_root/bin/openmoat
  if [ ! -x "$om" ]; then
    (cd /tmp && cargo install -q openmoat --version 0.12.1 --locked --root "$peer_root")
  fi
  # OpenMoat's hook as its init installs it for Claude Code (`openmoat guard --host
  # claude-code`, its default policy and audit log set up by `openmoat init --yes` in a home
  # of its own), fed the same payload, in the same loop, in both repositories; no wrapper.
  ph=$work/peer-home
  mkdir -p "$ph/.claude"
  (cd "$ph" && HOME=$ph MOAT_HOME=$ph/.moat CLAUDE_CONFIG_DIR=$ph/.claude "$om" init --yes --hosts claude-code </dev/null >/dev/null)
  for repo in "$work/small" "$work/large"; do
    t=$(cd "$repo" && HOME=$ph MOAT_HOME=$ph/.moat CLAUDE_CONFIG_DIR=$ph/.claude PAYLOAD=$payload sh -c \
      "sh '$work/loop.sh' $calls /bin/true; sh '$work/loop.sh' $calls '$om' guard --host claude-code")
    set -- $t
    printf '| OpenMoat 0.12.1 `openmoat guard`, %s | %s ms | |\n' "$(basename "$repo")" \
      "$(python3 -c "print(f'{($2 - $1) / $calls / 1e6:.2f}')")"
  done
fi
