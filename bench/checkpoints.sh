#!/bin/sh
# What workspace checkpoints cost, on a real project of about 10,000 files: Tabler Icons
# 3.24.0 (9,821 files) from the npm registry, unpacked and committed to a git repository of
# its own, with a store of its own (BENCHMARKS.md, "Checkpoints"). Never part of `cargo test`.
#   bench/checkpoints.sh [PACKAGE@VERSION]
set -eu
cd "$(dirname "$0")/.."
pkg="${1:-@tabler/icons@3.24.0}"
work=$(mktemp -d /var/tmp/bench-checkpoints-XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack "$pkg" -q >/dev/null && mkdir repo && tar xzf ./*.tgz -C repo --strip-components 1)
git -C "$work/repo" init -q
git -C "$work/repo" add -A
git -C "$work/repo" -c user.email=b@b -c user.name=b commit -qm "$pkg"
echo "$pkg: $(find "$work/repo" -path "$work/repo/.git" -prune -o -type f -print | wc -l) files, $(du -sh --exclude=.git "$work/repo" | cut -f1)"
mkdir "$work/state"
AHP_WRAP_BENCH_REPO="$work/repo" XDG_STATE_HOME="$work/state" cargo bench --bench checkpoints 2>/dev/null
