#!/bin/sh
# Installs the pinned Claude Code CLI (tests/claude-code/VERSION) from the npm registry into
# tests/.cache/agents/claude-code-<version>/ for tests/claude_code_e2e.rs. Idempotent: when
# the binary is already there and answers --version, it does nothing.
#
# Usage: tests/claude-code/setup.sh        (prints the path of the installed `claude`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/claude-code-$version"
link="$dir/claude"

if [ -x "$link" ] && "$link" --version 2>/dev/null | grep -q "^$version "; then
    echo "$link"
    exit 0
fi

mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"ahp-wrap-e2e-claude-code","private":true}' > package.json
# The native binary comes from an optional per-platform dependency; the postinstall only
# links it over a placeholder, so install scripts may be on or off.
npm install --no-audit --no-fund --no-save --loglevel=error "@anthropic-ai/claude-code@$version" >&2

pkg="$dir/node_modules/@anthropic-ai/claude-code"
real="$pkg/bin/claude.exe"
# bin/claude.exe stays a small shell stub when install scripts did not run: then use the
# platform package's binary directly.
if [ ! -f "$real" ] || [ "$(wc -c < "$real")" -lt 100000 ]; then
    real=$(ls "$dir"/node_modules/@anthropic-ai/claude-code-*/claude 2>/dev/null | head -n 1 || true)
fi
if [ -z "$real" ] || [ ! -x "$real" ]; then
    echo "setup: no native claude binary found under $dir/node_modules" >&2
    exit 1
fi
# A link named `claude`, so that ahp-wrap detects the framework by the executable name.
ln -sf "$real" "$link"
"$link" --version | grep -q "^$version " || {
    echo "setup: $link --version does not say $version" >&2
    exit 1
}
echo "$link"
