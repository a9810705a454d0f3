#!/bin/sh
# Installs the pinned Gemini CLI (tests/gemini/VERSION) from the npm registry into
# tests/.cache/agents/gemini-<version>/ for tests/gemini_e2e.rs. Idempotent: when the CLI is
# already there and answers --version, it does nothing.
#
# Usage: tests/gemini/setup.sh        (prints the path of the installed `gemini`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/gemini-$version"
link="$dir/gemini"

if [ -x "$link" ] && [ "$("$link" --version 2>/dev/null)" = "$version" ]; then
    echo "$link"
    exit 0
fi

mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"ahp-wrap-e2e-gemini","private":true}' > package.json
# Pure JavaScript (bundle/); its optional native deps (node-pty, keytar) are not needed headless.
npm install --no-audit --no-fund --no-save --loglevel=error "@google/gemini-cli@$version" >&2
# A link named `gemini`, so that ahp-wrap detects the framework by the executable name.
ln -sf "$dir/node_modules/.bin/gemini" "$link"
[ "$("$link" --version)" = "$version" ] || {
    echo "setup: $link --version does not say $version" >&2
    exit 1
}
echo "$link"
