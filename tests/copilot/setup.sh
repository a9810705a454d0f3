#!/bin/sh
# Installs the pinned GitHub Copilot CLI (tests/copilot/VERSION) from the npm registry into
# tests/.cache/agents/copilot-<version>/ for tests/copilot_e2e.rs. Idempotent: when the CLI
# is already there and answers --version, it does nothing. The native binary ships inside
# the npm package (@github/copilot-linux-x64); nothing else is downloaded.
#
# Usage: tests/copilot/setup.sh        (prints the path of the installed `copilot`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(tr -d ' \n' < "$here/VERSION")
dir="$root/tests/.cache/agents/copilot-$version"
link="$dir/copilot"

answers() {
    "$link" --version 2>/dev/null | grep -q "CLI $version\\."
}

if [ -x "$link" ] && answers; then
    echo "$link"
    exit 0
fi

mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"ahp-wrap-e2e-copilot","private":true}' > package.json
npm install --no-audit --no-fund --no-save --loglevel=error "@github/copilot@$version" >&2
# A link named `copilot`, so that ahp-wrap detects the framework by the executable name.
ln -sf "$dir/node_modules/.bin/copilot" "$link"
answers || {
    echo "setup: $link --version does not say $version" >&2
    exit 1
}
echo "$link"
