#!/bin/sh
# Installs the pinned OpenAI Codex CLI (tests/codex/VERSION) from the npm registry into
# tests/.cache/agents/codex-<version>/ for tests/codex_e2e.rs. Idempotent: when the binary
# is already there and answers --version, it does nothing.
#
# Usage: tests/codex/setup.sh        (prints the path of the installed `codex`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/codex-$version"
link="$dir/codex"

if [ -x "$link" ] && "$link" --version 2>/dev/null | grep -q "^codex-cli $version\$"; then
    echo "$link"
    exit 0
fi

mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"ahp-wrap-e2e-codex","private":true}' > package.json
# The native binary comes from an optional per-platform dependency (an npm alias of
# @openai/codex@<version>-<platform>); there is no install script and no download.
npm install --no-audit --no-fund --no-save --loglevel=error "@openai/codex@$version" >&2

real=$(ls "$dir"/node_modules/@openai/codex-*/vendor/*/bin/codex \
          "$dir"/node_modules/@openai/codex/vendor/*/bin/codex 2>/dev/null | head -n 1 || true)
if [ -z "$real" ] || [ ! -x "$real" ]; then
    echo "setup: no native codex binary found under $dir/node_modules" >&2
    exit 1
fi
# A link named `codex` to the native binary (no node needed), so that ahp-wrap detects the
# framework by the executable name.
ln -sf "$real" "$link"
"$link" --version | grep -q "^codex-cli $version\$" || {
    echo "setup: $link --version does not say codex-cli $version" >&2
    exit 1
}
echo "$link"
