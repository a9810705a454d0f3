#!/bin/sh
# Installs Prometheus (Debian's prometheus package: the server and promtool) for
# tests/telemetry_prometheus.rs, if it is missing. Idempotent and quiet. The test starts its
# own server on a free loopback port with its own data directory; nothing here starts or
# configures the system service (the package's service is stopped and disabled if it came up).
set -eu
command -v prometheus >/dev/null && command -v promtool >/dev/null && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "tests/prometheus/setup.sh: prometheus is not installed; as root: apt-get install prometheus" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# The package starts a system server on :9090 where systemd runs; the test needs none.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
command -v prometheus >/dev/null && command -v promtool >/dev/null || {
  echo "tests/prometheus/setup.sh: prometheus installed, but prometheus or promtool is not on PATH" >&2
  exit 1
}
