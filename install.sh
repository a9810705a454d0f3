#!/usr/bin/env bash
# Builds and installs ahp-wrap and its shims.
#   PREFIX   where to install (default: ~/.local): $PREFIX/bin/ahp-wrap and
#            $PREFIX/share/ahp-wrap/shims
set -euo pipefail
cd "$(dirname "$0")"
PREFIX="${PREFIX:-$HOME/.local}"
command -v cargo >/dev/null || { echo "install.sh: cargo is needed (https://rustup.rs)" >&2; exit 1; }
cargo install --quiet --locked --path . --root "$PREFIX" --force
mkdir -p "$PREFIX/share/ahp-wrap"
rm -rf "$PREFIX/share/ahp-wrap/shims"
cp -R shims "$PREFIX/share/ahp-wrap/shims"
echo "installed $PREFIX/bin/ahp-wrap and $PREFIX/share/ahp-wrap/shims" >&2
case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) echo "note: $PREFIX/bin is not on your PATH" >&2 ;;
esac
