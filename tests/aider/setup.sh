#!/bin/sh
# Installs the pinned aider (tests/aider/VERSION, the `aider-chat` package) from PyPI into a
# virtual environment under tests/.cache/agents/aider-<version>/ for tests/aider_e2e.rs.
# Idempotent: when aider is already there and answers --version, it does nothing.
#
# Usage: tests/aider/setup.sh        (prints the path of the installed `aider`)
#        PYTHON=python3.12 tests/aider/setup.sh   (aider 0.86 wants Python 3.10-3.12)
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

python=${PYTHON:-python3}
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
