#!/bin/sh
# Installs the pinned Factory droid CLI (tests/droid/VERSION) from the npm registry into
# tests/.cache/agents/droid-<version>/ for tests/droid_e2e.rs (idempotent; the steps:
# tests/support/npm_agent.sh). droid is one native binary per platform, published as
# `@factory/cli-<platform>` (what the `@factory/cli` launcher package depends on); the
# platform package is installed directly, so that the launcher's own version need not match.
#
# Usage: tests/droid/setup.sh        (prints the path of the installed `droid`)
set -eu
. "$(dirname "$0")/../support/npm_agent.sh"
case "$(uname -m)" in
    x86_64) platform=linux-x64 ;;
    aarch64) platform=linux-arm64 ;;
    *) echo "setup: no droid build for $(uname -m)" >&2; exit 1 ;;
esac
npm_agent_begin droid droid
npm_agent_install "@factory/cli-$platform@$version"
npm_agent_link "$dir/node_modules/@factory/cli-$platform/bin/droid"
