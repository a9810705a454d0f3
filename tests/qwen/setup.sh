#!/bin/sh
# Installs the pinned Qwen Code CLI (tests/qwen/VERSION) from the npm registry into
# tests/.cache/agents/qwen-<version>/ for tests/qwen_e2e.rs. Idempotent: when the CLI is
# already there and answers --version, it does nothing.
#
# Usage: tests/qwen/setup.sh        (prints the path of the installed `qwen`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/qwen-$version"
link="$dir/qwen"

if [ -x "$link" ] && [ "$("$link" --version 2>/dev/null)" = "$version" ]; then
    echo "$link"
    exit 0
fi

mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"ahp-wrap-e2e-qwen","private":true}' > package.json
# The optional native deps (sharp, node-pty, clipboard, audio) are not needed headless.
npm install --no-audit --no-fund --no-save --loglevel=error --omit=optional "@qwen-code/qwen-code@$version" >&2
# A link named `qwen`, so that ahp-wrap detects the framework by the executable name.
ln -sf "$dir/node_modules/.bin/qwen" "$link"
[ "$("$link" --version)" = "$version" ] || {
    echo "setup: $link --version does not say $version" >&2
    exit 1
}
echo "$link"
