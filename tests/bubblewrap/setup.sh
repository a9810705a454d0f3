#!/bin/sh
# Installs bubblewrap and socat (Debian's bubblewrap and socat), if they are missing, for the
# suites that run sandboxes inside the floor: tests/floor_nested.rs (bwrap) and
# tests/claude_code_sandbox.rs (Claude Code's sandbox runs each Bash call under bwrap and
# reaches its proxy through socat). Idempotent and quiet.
set -eu
command -v bwrap >/dev/null && command -v socat >/dev/null && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "tests/bubblewrap/setup.sh: bwrap or socat is not installed; as root: apt-get install bubblewrap socat" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends bubblewrap socat >/dev/null
command -v bwrap >/dev/null && command -v socat >/dev/null || {
  echo "tests/bubblewrap/setup.sh: bubblewrap and socat installed, but bwrap or socat is not on PATH" >&2
  exit 1
}
