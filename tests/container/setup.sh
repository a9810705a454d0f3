#!/bin/sh
# Installs what tests/floor_container.rs needs, if it is missing. Idempotent and quiet.
#
# - Docker's own defaults for a container, from the engine's source as Debian packages it
#   (golang-github-docker-docker-dev, the same moby 20.10 tree Debian's docker.io is built
#   from): the default seccomp profile (profiles/seccomp/default.json), the default
#   capability set (oci/caps/defaults.go) and the masked and read-only paths
#   (oci/defaults.go). The package is downloaded through apt (which checks it against the
#   archive's signed index) and unpacked into tests/.cache/container/: nothing is installed.
# - Podman's defaults, from containers-common as Debian packages it
#   (golang-github-containers-common): its default seccomp profile (seccomp.json) and its
#   default capabilities (containers.conf), downloaded and unpacked the same way.
# - libseccomp's Python binding (python3-seccomp, from Debian), which compiles a profile into
#   the filter as the engine does (tests/container/launch.py), installed when missing (root).
set -eu
cd "$(dirname "$0")/../.cache" 2>/dev/null || { mkdir -p "$(dirname "$0")/../.cache"; cd "$(dirname "$0")/../.cache"; }
dest=container
if ! /usr/bin/python3 -c 'import seccomp' 2>/dev/null; then
  apt-get update -qq && apt-get install -y -qq python3-seccomp >/dev/null
fi
[ -f "$dest/moby/profiles/seccomp/default.json" ] && [ -f "$dest/containers-common/seccomp.json" ] && exit 0
rm -rf "$dest.part" && mkdir -p "$dest.part"
packages="golang-github-docker-docker-dev golang-github-containers-common"
# (apt-get download as root says it downloads unsandboxed: nothing to act on.)
(cd "$dest.part" && apt-get download -qq $packages 2>/dev/null) || {
  apt-get update -qq && (cd "$dest.part" && apt-get download -qq $packages)
}
for deb in "$dest.part"/*.deb; do
  dpkg-deb -x "$deb" "$dest.part/root"
  echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)" >> "$dest.part/VERSIONS"
done
mkdir -p "$dest.part/containers-common"
cp "$dest.part/root/usr/share/containers/seccomp.json" "$dest.part/root/usr/share/containers/containers.conf" "$dest.part/containers-common/"
src=$dest.part/root/usr/share/gocode/src/github.com/docker/docker
mkdir -p "$dest.part/moby/profiles/seccomp" "$dest.part/moby/oci/caps"
cp "$src/profiles/seccomp/default.json" "$dest.part/moby/profiles/seccomp/"
cp "$src/oci/defaults.go" "$dest.part/moby/oci/"
cp "$src/oci/caps/defaults.go" "$dest.part/moby/oci/caps/"
rm -rf "$dest.part/root" "$dest.part"/*.deb
rm -rf "$dest" && mv "$dest.part" "$dest"
