#!/bin/sh
# Installs what tests/approvals_page.rs needs: a headless browser, Debian's `chromium`
# package (from apt; the test drives it over its DevTools protocol). Idempotent and quiet:
# when /usr/bin/chromium is there and answers --version, it does nothing.
#
# Usage: tests/approvals/setup.sh        (prints the path of the browser)
set -eu
bin=/usr/bin/chromium
if [ -x "$bin" ] && "$bin" --headless --no-sandbox --version >/dev/null 2>&1; then
    echo "$bin"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "tests/approvals/setup.sh: no apt-get here; install Chromium at $bin (or set AHP_WRAP_CHROMIUM)" >&2
    exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends chromium; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "tests/approvals/setup.sh: could not install chromium with apt-get" >&2
    exit 1
fi
rm -f "$log"
"$bin" --headless --no-sandbox --version >/dev/null
echo "$bin"
