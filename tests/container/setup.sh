#!/bin/sh
# Installs what tests/floor_container.rs needs, if it is missing. Idempotent and quiet.
#
# - Docker's own defaults for a container, from the engine's source as Debian packages it
#   (golang-github-docker-docker-dev, the same moby 20.10 tree Debian's docker.io is built
#   from): the default seccomp profile (profiles/seccomp/default.json), the default
#   capability set (oci/caps/defaults.go) and the masked and read-only paths
#   (oci/defaults.go). The package is downloaded through apt (which checks it against the
#   archive's signed index) and unpacked into tests/.cache/container/: nothing is installed.
# - libseccomp's Python binding (python3-seccomp, from Debian), which compiles a profile into
#   the filter as the engine does (tests/container/launch.py), installed when missing (root).
set -eu
cd "$(dirname "$0")/../.cache" 2>/dev/null || { mkdir -p "$(dirname "$0")/../.cache"; cd "$(dirname "$0")/../.cache"; }
dest=container
if ! /usr/bin/python3 -c 'import seccomp' 2>/dev/null; then
  apt-get update -qq && apt-get install -y -qq python3-seccomp >/dev/null
fi
[ -f "$dest/moby/profiles/seccomp/default.json" ] && exit 0
rm -rf "$dest.part" && mkdir -p "$dest.part"
(cd "$dest.part" && apt-get download -qq golang-github-docker-docker-dev 2>/dev/null) || {
  apt-get update -qq && (cd "$dest.part" && apt-get download -qq golang-github-docker-docker-dev)
}
dpkg-deb -x "$dest.part"/golang-github-docker-docker-dev_*.deb "$dest.part/root"
dpkg-deb -f "$dest.part"/golang-github-docker-docker-dev_*.deb Version > "$dest.part/VERSION"
src=$dest.part/root/usr/share/gocode/src/github.com/docker/docker
mkdir -p "$dest.part/moby/profiles/seccomp" "$dest.part/moby/oci/caps"
cp "$src/profiles/seccomp/default.json" "$dest.part/moby/profiles/seccomp/"
cp "$src/oci/defaults.go" "$dest.part/moby/oci/"
cp "$src/oci/caps/defaults.go" "$dest.part/moby/oci/caps/"
rm -rf "$dest.part/root" "$dest.part"/*.deb
rm -rf "$dest" && mv "$dest.part" "$dest"
