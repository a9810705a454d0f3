#!/bin/sh
# Installs the pinned Kilo Code CLI (tests/kilo/VERSION), an OpenCode fork, from the npm registry into
# tests/.cache/agents/kilo-<version>/ for tests/kilo_e2e.rs. Idempotent: when the
# binary is already there and answers --version, it does nothing.
#
# Usage: tests/opencode/setup.sh        (prints the path of the installed `kilo`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/kilo-$version"
link="$dir/kilo"

if [ -x "$link" ] && [ "$("$link" --version 2>/dev/null)" = "$version" ]; then
    echo "$link"
    exit 0
fi

mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"ahp-wrap-e2e-kilo","private":true}' > package.json
# @kilocode/cli ships its native (Bun-compiled) binary in an optional per-platform dependency
# (@kilocode/cli-<os>-<arch>[-baseline][-musl]); its postinstall only links it, so scripts
# are skipped and the binary is found here.
npm install --no-audit --no-fund --no-save --loglevel=error --ignore-scripts "@kilocode/cli@$version" >&2

real=""
for candidate in "$dir"/node_modules/@kilocode/cli-linux-*/bin/kilo; do
    [ -x "$candidate" ] || continue
    # The first platform package whose binary runs here (baseline builds need no AVX2).
    if [ "$("$candidate" --version 2>/dev/null)" = "$version" ]; then
        real=$candidate
        break
    fi
done
if [ -z "$real" ]; then
    echo "setup: no runnable native kilo binary found under $dir/node_modules" >&2
    exit 1
fi
# A link named `kilo` to the native binary, so that ahp-wrap detects the framework by
# the executable name.
ln -sf "$real" "$link"
[ "$("$link" --version)" = "$version" ] || {
    echo "setup: $link --version does not say $version" >&2
    exit 1
}
echo "$link"
