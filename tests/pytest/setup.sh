#!/bin/sh
# Downloads the pinned pytest (tests/pytest/VERSION) and the wheels it needs from PyPI into
# tests/.cache/wheels/pytest-<version>/, for tests/floor.rs (a venv inside the floor installs
# it from there with --no-index, and runs a test: the tests themselves never reach a registry).
# Idempotent: when the wheels are there, it does nothing.
#
# Usage: tests/pytest/setup.sh        (prints the directory of the wheels)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/wheels/pytest-$version"

if [ -f "$dir/.complete" ]; then
    echo "$dir"
    exit 0
fi
# A throwaway venv for its pip (Debian's python3 may come without one; python3-venv gives it).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
rm -rf "$dir" && mkdir -p "$dir"
"$tmp/venv/bin/python" -m pip download --quiet --no-cache-dir --disable-pip-version-check \
    --only-binary=:all: -d "$dir" "pytest==$version" >&2
touch "$dir/.complete"
echo "$dir"
