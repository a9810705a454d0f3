#!/bin/sh
# Installs the OpenTelemetry protocol's Python bindings (the `opentelemetry-proto` package
# from PyPI, pinned in tests/otlp/VERSION) into a virtual environment under
# tests/.cache/otlp-<version>/ for tests/telemetry_otlp.rs, whose OTLP/HTTP receiver
# (tests/otlp/receiver.py) decodes what the wrapper exports with the real schema.
# Idempotent: when the environment already imports it, it does nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/otlp-$version"
python="$dir/venv/bin/python"
if [ -x "$python" ] && "$python" -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
  echo "$python"
  exit 0
fi
python3 -c 'import venv' 2>/dev/null || {
  echo "tests/otlp/setup.sh: python3 has no venv module (Debian: apt-get install python3-venv)" >&2
  exit 1
}
mkdir -p "$dir"
python3 -m venv --clear "$dir/venv"
"$python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
  "opentelemetry-proto==$version" >&2
echo "$python"
