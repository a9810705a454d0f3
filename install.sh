#!/usr/bin/env bash
# Builds and installs ahp-wrap, its shims, shell completions and manual page; or removes them.
#
#   ./install.sh               build (a few minutes the first time) and install
#   ./install.sh --uninstall   remove what it installed (and the PATH shim directories its
#                              runs kept, where they keep them)
#   ./install.sh --build-into DIR   only build the two executables as installed, into DIR
#
#   PREFIX   where to install (default: ~/.local):
#            $PREFIX/bin/ahp-wrap                  the wrapper (with lld: the code a run
#                                                  executes laid out first, less of it resident;
#                                                  statically linked on Linux with glibc)
#            $PREFIX/bin/ahp-wrap-hook             what hooks and PATH shims run (statically linked
#                                                  on Linux with glibc: no dynamic loader per call)
#            $PREFIX/share/ahp-wrap/shims          each framework's shim files and notes
#            $PREFIX/share/man/man1/ahp-wrap.1     the manual page
#            $PREFIX/share/bash-completion/completions/ahp-wrap, zsh and fish completions
set -euo pipefail
cd "$(dirname "$0")"
PREFIX="${PREFIX:-$HOME/.local}"
say() { printf 'install.sh: %s\n' "$*" >&2; }
static() { case $(ldd "$1" 2>&1 || true) in *"statically linked"* | *"not a dynamic"*) return 0 ;; esac; return 1; }

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
    # The PATH shim directories runs keep beside their own directories (see rundir.rs and
    # src/intercept/pathshim) whose links lead to this install: first, while they resolve.
    hook=$(readlink -f "$PREFIX/bin/ahp-wrap-hook" || true)
    wrap=$(readlink -f "$PREFIX/bin/ahp-wrap" || true)
    for base in "${XDG_RUNTIME_DIR:-}" /run "${TMPDIR:-/tmp}"; do
      [ -n "$base" ] && [ -d "$base" ] || continue
      for d in "$base"/ahp-wrap-shims-"$(id -u)"-*; do
        [ -d "$d" ] && [ ! -L "$d" ] || continue
        for l in "$d"/*; do
          t=$(readlink -f "$l" 2>/dev/null || true)
          if [ -L "$l" ] && [ -n "$t" ] && { [ "$t" = "$hook" ] || [ "$t" = "$wrap" ]; }; then
            rm -rf "$d" && say "removed $d"
            break
          fi
        done
      done
    done
    # As root: what `ahp-wrap setup` installed for this install (Gemini CLI's system settings
    # whose hooks run its executables, the AppArmor profile written for its path).
    if [ "$(id -u)" = 0 ] && [ -x "$PREFIX/bin/ahp-wrap" ]; then
      "$PREFIX/bin/ahp-wrap" setup --remove | while read -r line; do say "$line"; done || true
    fi
    for f in "${files[@]}"; do
      if [ -e "$f" ]; then rm -f "$f" && say "removed $f"; fi
    done
    if [ -d "$PREFIX/share/ahp-wrap" ]; then
      rm -rf "$PREFIX/share/ahp-wrap" && say "removed $PREFIX/share/ahp-wrap"
    fi
    if [ -f "$PREFIX/.crates.toml" ]; then
      # cargo's own record of an install by `cargo install` (install.sh used it before), so
      # that `cargo install --list` agrees.
      cargo uninstall --root "$PREFIX" ahp-wrap >/dev/null 2>&1 || true
    fi
    say "ahp-wrap is uninstalled (its logs in \${XDG_STATE_HOME:-~/.local/state}/ahp-wrap are kept)"
    exit 0
    ;;
  --build-into)
    # For bench/run.sh: build the two executables as installed, into ${2}, and stop.
    into=${2:?--build-into needs a directory}
    ;;
  "") ;;
  *) say "unknown option $1 (usage: ./install.sh [--uninstall | --build-into DIR])"; exit 2 ;;
esac

command -v cargo >/dev/null || { say "cargo is needed (https://rustup.rs)"; exit 1; }
say "building ahp-wrap $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1) with $(cargo --version) (release; a few minutes the first time)…"
log=$(mktemp)
probe=$(mktemp -d)
trap 'rm -rf "$log" "$probe"' EXIT
# A target directory of its own that is kept: a second install compiles only what changed, and
# the hook's link below reuses what the wrapper's build compiled.
tdir="${CARGO_TARGET_DIR:-$PWD/target}/install"
# Whether this toolchain's linker takes the flags, tried on an empty program (a second): each
# executable is linked with them where it does, else as cargo links it.
links() {
  printf 'fn main() {}\n' > "$probe/main.rs"
  rustc --edition 2021 -o "$probe/main" "$probe/main.rs" "$@" >/dev/null 2>&1 && "$probe/main"
}
# cargo rustc BIN FLAGS...: one executable, the flags given to its link only. Touched, the
# executable's crate is compiled again (cargo keeps one build of it per profile).
build() {
  local bin=$1 src=src/main.rs
  shift
  [ "$bin" = ahp-wrap-hook ] && src=src/bin/ahp-wrap-hook.rs
  touch "$src"
  cargo rustc --locked --release --bin "$bin" --target-dir "$tdir" -- "$@" 2>&1 | tee "$log" | awk '
    /^ *Compiling / { n++; if (n % 25 == 0) { printf "install.sh:   %d crates compiled…\n", n > "/dev/stderr"; fflush("/dev/stderr") } }
    /^ *Compiling ahp-wrap / { print "install.sh:   compiling ahp-wrap itself (the longest step)…" > "/dev/stderr"; fflush("/dev/stderr") }'
  return "${PIPESTATUS[0]}"
}
failed() {
  tail -n 30 "$log" >&2
  say "the build failed (above: the end of cargo's output)"
  exit 1
}

# The wrapper: the functions a run executes laid out together at the start of its code
# (bench/hot-functions.txt, lld's symbol ordering; a page fault on code maps the 64 KiB
# around it, so scattered code keeps most of the 13 MB executable resident), and its
# relocations packed (DT_RELR: glibc 2.36 reads 9 KB of them at start instead of 700 KB).
# BENCHMARKS.md has the figures.
wrap_flags=(-C "link-arg=-Wl,--symbol-ordering-file=$PWD/bench/hot-functions.txt"
  -C link-arg=-Wl,--no-warn-symbol-ordering -C link-arg=-Wl,-z,pack-relative-relocs)
wrap_how="its hot code first"
if ! links "${wrap_flags[@]}"; then
  wrap_flags=()
  wrap_how="linked as cargo links it: this linker lacks lld's --symbol-ordering-file or DT_RELR"
fi
# Linked statically where glibc is, as a position-independent executable (ASLR kept): no
# dynamic loader at each start (a start costs 0.6 ms less; BENCHMARKS.md). Its user lookups
# read /etc/passwd and its name lookups /etc/hosts and DNS with glibc's own code; other
# sources in nsswitch.conf (systemd, LDAP) are loaded from the system's glibc at run time,
# which must then be the version it was built with: install again after a glibc upgrade.
wrap_static=()
if getconf GNU_LIBC_VERSION >/dev/null 2>&1 && links "${wrap_flags[@]}" -C target-feature=+crt-static; then
  wrap_static=(-C target-feature=+crt-static)
fi
if [ ${#wrap_static[@]} -gt 0 ] && build ahp-wrap "${wrap_flags[@]}" "${wrap_static[@]}" &&
  static "$tdir/release/ahp-wrap"; then
  wrap_how="$wrap_how, statically linked"
else
  [ ${#wrap_static[@]} -gt 0 ] && { tail -n 5 "$log" >&2; wrap_how="$wrap_how, dynamically linked: the static link failed, above"; }
  build ahp-wrap "${wrap_flags[@]}" || failed
fi
# The hook, started on every tool call: linked statically where glibc is (no dynamic loader's
# work per call), which its code allows (no name-service lookups).
hook_how="dynamically linked"
if getconf GNU_LIBC_VERSION >/dev/null 2>&1; then
  if links -C target-feature=+crt-static && build ahp-wrap-hook -C target-feature=+crt-static &&
    static "$tdir/release/ahp-wrap-hook"; then
    hook_how="statically linked"
  else
    tail -n 5 "$log" >&2
    hook_how="dynamically linked: the static link failed, above"
    build ahp-wrap-hook || failed
  fi
else
  build ahp-wrap-hook || failed
fi

dest=${into:-$PREFIX/bin}
mkdir -p "$dest"
bin="$dest/ahp-wrap"
hook="$dest/ahp-wrap-hook"
for f in ahp-wrap ahp-wrap-hook; do
  cp "$tdir/release/$f" "$dest/$f.new" && mv -f "$dest/$f.new" "$dest/$f"
done
say "installed $bin ($wrap_how)"
say "installed $hook ($hook_how)"
if [ -n "${into:-}" ]; then exit 0; fi

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
