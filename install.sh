#!/usr/bin/env bash
# Builds and installs ahp-wrap, its shims, shell completions and manual page; or removes them.
#
#   ./install.sh               build (a few minutes the first time) and install
#   ./install.sh --uninstall   remove what it installed
#
#   PREFIX   where to install (default: ~/.local):
#            $PREFIX/bin/ahp-wrap                  the wrapper
#            $PREFIX/bin/ahp-wrap-hook             what hooks and PATH shims run (statically linked
#                                                  on Linux with glibc: no dynamic loader per call)
#            $PREFIX/share/ahp-wrap/shims          each framework's shim files and notes
#            $PREFIX/share/man/man1/ahp-wrap.1     the manual page
#            $PREFIX/share/bash-completion/completions/ahp-wrap, zsh and fish completions
set -euo pipefail
cd "$(dirname "$0")"
PREFIX="${PREFIX:-$HOME/.local}"
say() { printf 'install.sh: %s\n' "$*" >&2; }

files=(
  "$PREFIX/bin/ahp-wrap"
  "$PREFIX/bin/ahp-wrap-hook"
  "$PREFIX/share/man/man1/ahp-wrap.1"
  "$PREFIX/share/bash-completion/completions/ahp-wrap"
  "$PREFIX/share/zsh/site-functions/_ahp-wrap"
  "$PREFIX/share/fish/vendor_completions.d/ahp-wrap.fish"
)

case "${1:-}" in
  --uninstall)
    for f in "${files[@]}"; do
      if [ -e "$f" ]; then rm -f "$f" && say "removed $f"; fi
    done
    if [ -d "$PREFIX/share/ahp-wrap" ]; then
      rm -rf "$PREFIX/share/ahp-wrap" && say "removed $PREFIX/share/ahp-wrap"
    fi
    if [ -f "$PREFIX/.crates.toml" ]; then
      # cargo's own record of the install, so that `cargo install --list` agrees.
      cargo uninstall --root "$PREFIX" ahp-wrap >/dev/null 2>&1 || true
    fi
    say "ahp-wrap is uninstalled (its logs in \${XDG_STATE_HOME:-~/.local/state}/ahp-wrap are kept)"
    exit 0
    ;;
  "") ;;
  *) say "unknown option $1 (usage: ./install.sh [--uninstall])"; exit 2 ;;
esac

command -v cargo >/dev/null || { say "cargo is needed (https://rustup.rs)"; exit 1; }
say "building ahp-wrap $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1) with $(cargo --version) (release; a few minutes the first time)…"
log=$(mktemp)
# A target directory of its own that is kept: a second install compiles only what changed, and
# the hook's static link below reuses what this build compiled.
tdir="${CARGO_TARGET_DIR:-$PWD/target}/install"
set +e
cargo install --locked --path . --root "$PREFIX" --force --target-dir "$tdir" 2>&1 | tee "$log" | awk '
  /^ *Compiling / { n++; if (n % 25 == 0) { printf "install.sh:   %d crates compiled…\n", n > "/dev/stderr"; fflush("/dev/stderr") } }
  /^ *Compiling ahp-wrap / { print "install.sh:   compiling ahp-wrap itself (the longest step)…" > "/dev/stderr"; fflush("/dev/stderr") }'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  tail -n 30 "$log" >&2
  rm -f "$log"
  say "the build failed (above: the end of cargo's output)"
  exit 1
fi
bin="$PREFIX/bin/ahp-wrap"
say "installed $bin"

# The hook starts on every tool call of every agent: linked statically (glibc's static-pie), it
# skips the dynamic loader, about a third of its cost (BENCHMARKS.md). Only the hook's own crate
# is compiled again; the dynamically linked one cargo installed stays where this cannot be done.
hook="$PREFIX/bin/ahp-wrap-hook"
static() { case $(ldd "$1" 2>&1 || true) in *"statically linked"* | *"not a dynamic"*) return 0 ;; esac; return 1; }
if getconf GNU_LIBC_VERSION >/dev/null 2>&1; then
  # cargo keeps one build of the hook's crate per profile: touched, it is compiled again (the
  # library is not) with the static link, whatever the last build of it was.
  touch src/bin/ahp-wrap-hook.rs
  if cargo rustc --locked --release --bin ahp-wrap-hook --target-dir "$tdir" \
      -- -C target-feature=+crt-static >"$log" 2>&1 &&
    static "$tdir/release/ahp-wrap-hook" &&
    cp "$tdir/release/ahp-wrap-hook" "$hook.new" && mv -f "$hook.new" "$hook"; then
    say "installed $hook (statically linked)"
  else
    rm -f "$hook.new"
    tail -n 5 "$log" >&2
    say "installed $hook (dynamically linked: the static link failed, above)"
  fi
else
  say "installed $hook"
fi
rm -f "$log"

mkdir -p "$PREFIX/share/ahp-wrap"
rm -rf "$PREFIX/share/ahp-wrap/shims"
cp -R shims "$PREFIX/share/ahp-wrap/shims"
say "installed $PREFIX/share/ahp-wrap/shims ($(ls shims | wc -l) frameworks)"

mkdir -p "$PREFIX/share/man/man1" "$PREFIX/share/bash-completion/completions" \
  "$PREFIX/share/zsh/site-functions" "$PREFIX/share/fish/vendor_completions.d"
"$bin" man > "$PREFIX/share/man/man1/ahp-wrap.1"
say "installed $PREFIX/share/man/man1/ahp-wrap.1"
for shell_file in "bash $PREFIX/share/bash-completion/completions/ahp-wrap" \
  "zsh $PREFIX/share/zsh/site-functions/_ahp-wrap" \
  "fish $PREFIX/share/fish/vendor_completions.d/ahp-wrap.fish"; do
  set -- $shell_file
  "$bin" completions "$1" > "$2"
  say "installed $2 ($1 completions)"
done

case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) say "note: $PREFIX/bin is not on your PATH (add it, or run $bin)" ;;
esac
say "done: try  $bin -- sh -c 'curl -s http://169.254.169.254/'  (the policy refuses it)"
