#!/bin/sh
# Installs the pinned aider (tests/aider/VERSION, the `aider-chat` package) from PyPI into a
# virtual environment under tests/.cache/agents/aider-<version>/ for tests/aider_e2e.rs.
# Idempotent: when aider is already there and answers --version, it does nothing.
#
# Usage: tests/aider/setup.sh        (prints the path of the installed `aider`)
#        PYTHON=python3.12 tests/aider/setup.sh   (the interpreter to use)
#
# aider-chat 0.86 requires Python >=3.10,<3.13: without PYTHON, the first of python3.12,
# python3.11, python3.10 and python3 in that range is used. It needs the venv module
# (Debian: the python3-venv package).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/aider-$version"
link="$dir/aider"

if [ -x "$link" ] && [ "$("$link" --version 2>/dev/null)" = "aider $version" ]; then
    echo "$link"
    exit 0
fi

fits() { "$1" -c 'import sys, venv; sys.exit(not (3, 10) <= sys.version_info[:2] < (3, 13))' 2>/dev/null; }
python=${PYTHON:-}
if [ -z "$python" ]; then
    for p in python3.12 python3.11 python3.10 python3; do
        if command -v "$p" >/dev/null 2>&1 && fits "$p"; then python=$p; break; fi
    done
fi
if [ -z "$python" ] || ! fits "$python"; then
    echo "setup: aider $version needs Python 3.10 to 3.12 with the venv module; none found (set PYTHON)" >&2
    exit 1
fi
mkdir -p "$dir"
"$python" -m venv --clear "$dir/venv"
"$dir/venv/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
    "aider-chat==$version" >&2
# A link named `aider`, so that ahp-wrap detects the framework by the executable name.
ln -sf "$dir/venv/bin/aider" "$link"
[ "$("$link" --version)" = "aider $version" ] || {
    echo "setup: $link --version does not say aider $version" >&2
    exit 1
}
echo "$link"
