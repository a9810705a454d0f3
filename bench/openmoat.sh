#!/usr/bin/env bash
# OpenMoat's own benchmark (MoatBench, bundled with openmoat 0.12.1) answered by our hook under
# a live wrapper: bench/openmoat.sh [--host HOST] [--floor on|off] [--format text|json]
#
# The bench sends each scenario's hook payloads, as the host (default claude-code) sends them,
# to a hook command line in a throwaway home; nothing the scenarios name is run. Here that
# command is `ahp-wrap hook <framework> <event>` under `ahp-wrap --framework generic`, so the
# wrapper's gate and embedded default policy answer, as in a real run (a run on the network
# floor leaves the hosts commands contact to its egress proxy; `--floor off` is a run without
# it, where the policy judges them). openmoat is installed once from the crates registry into
# the same cache bench/run.sh uses, outside the project. Never part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
host=claude-code floor=off format=text
while [ $# -gt 0 ]; do
  case $1 in
    --host) host=${2:?}; shift ;;
    --floor) floor=${2:?}; shift ;;
    --format) format=${2:?}; shift ;;
    *) echo "usage: bench/openmoat.sh [--host HOST] [--floor on|off] [--format text|json]" >&2; exit 2 ;;
  esac
  shift
done
case $host in
  claude-code) framework=claude-code ;;
  codex) framework=codex ;;
  gemini-cli) framework=gemini ;;
  copilot-cli) framework=copilot ;;
  opencode) framework=opencode ;;
  *) echo "bench/openmoat.sh: no shim of ours for the host $host" >&2; exit 2 ;;
esac
peer_root=${AHP_BENCH_PEER_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/ahp-wrap-bench/openmoat-0.12.1}
peer=$peer_root/bin/openmoat
if [ ! -x "$peer" ]; then
  (cd /tmp && cargo install -q openmoat --version 0.12.1 --locked --root "$peer_root")
fi
cargo build --locked -q --bins
wrap=$PWD/target/debug/ahp-wrap
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The hook the bench runs: the payload's event name picks the hook, as the host's settings
# would (Claude-style payloads name it in hook_event_name).
cat > "$work/hook.py" <<'EOF'
import json, os, subprocess, sys
data = sys.stdin.buffer.read()
try:
    payload = json.loads(data)
except ValueError:
    payload = {}
name = payload.get("hook_event_name") or payload.get("hookEventName") or os.environ["DEFAULT_HOOK"]
sys.exit(subprocess.run([os.environ["AHP_WRAP_BIN"], "hook", os.environ["FRAMEWORK"], name],
                        input=data).returncode)
EOF
# The bench gives each hook a clean environment: the wrapper's variables go on its command
# line.
cat > "$work/inner.sh" <<'EOF'
#!/bin/sh
vars=$(env | grep -E '^AHP_WRAP_[A-Z_]*=' | sed "s/'/'\\\\''/g; s/=\(.*\)/='\1'/" | tr '\n' ' ')
exec "$PEER" bench --hook "env $vars FRAMEWORK=$FRAMEWORK DEFAULT_HOOK=$DEFAULT_HOOK python3 $WORK/hook.py" \
  --host "$HOST" --format "$FORMAT"
EOF
chmod +x "$work/inner.sh"
case $framework in
  gemini) default_hook=BeforeTool ;;
  copilot) default_hook=preToolUse ;;
  opencode) default_hook=tool.execute.before ;;
  *) default_hook=PreToolUse ;;
esac
floor_args=()
[ "$floor" = off ] && floor_args=(--floor off)
PEER=$peer WORK=$work HOST=$host FORMAT=$format FRAMEWORK=$framework DEFAULT_HOOK=$default_hook \
  "$wrap" --framework generic --no-intercept --summary never "${floor_args[@]}" -- "$work/inner.sh"
