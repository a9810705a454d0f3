#!/bin/sh
# Installs the pinned Factory droid CLI (tests/droid/VERSION) from the npm registry into
# tests/.cache/agents/droid-<version>/ for tests/droid_e2e.rs. Idempotent: when the CLI is
# already there and answers --version, it does nothing.
#
# droid is one native binary per platform, published as `@factory/cli-<platform>` (what the
# `@factory/cli` launcher package depends on); the platform package is installed directly,
# so that the launcher's own version need not match.
#
# Usage: tests/droid/setup.sh        (prints the path of the installed `droid`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/droid-$version"
link="$dir/droid"

if [ -x "$link" ] && [ "$("$link" --version 2>/dev/null)" = "$version" ]; then
    echo "$link"
    exit 0
fi

case "$(uname -m)" in
    x86_64) platform=linux-x64 ;;
    aarch64) platform=linux-arm64 ;;
    *) echo "setup: no droid build for $(uname -m)" >&2; exit 1 ;;
esac
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"ahp-wrap-e2e-droid","private":true}' > package.json
npm install --no-audit --no-fund --no-save --loglevel=error "@factory/cli-$platform@$version" >&2
# A link named `droid`, so that ahp-wrap detects the framework by the executable name.
ln -sf "$dir/node_modules/@factory/cli-$platform/bin/droid" "$link"
[ "$("$link" --version)" = "$version" ] || {
    echo "setup: $link --version does not say $version" >&2
    exit 1
}
echo "$link"
