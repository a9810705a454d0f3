#!/bin/sh
# Installs AppArmor's parser for tests/floor_apparmor.rs, into tests/.cache/apparmor/, if it is
# missing. Idempotent and quiet.
#
# The profile `ahp-wrap setup apparmor` writes uses the `userns` rule and `abi <abi/4.0>`,
# which Ubuntu 24.04's parser (AppArmor 4.0) reads and bookworm's (3.0.8) does not. So this
# takes Debian's own AppArmor 4 package (trixie's `apparmor`), with trixie's C library for it
# to run on (it needs glibc 2.38), from the Debian archive, checked against the archive's
# signed index checksums, and unpacks both here: nothing is installed on the system. The
# test runs the parser parse-only (`-Q`), through trixie's dynamic loader.
set -eu
cd "$(dirname "$0")/../.cache" 2>/dev/null || { mkdir -p "$(dirname "$0")/../.cache"; cd "$(dirname "$0")/../.cache"; }
dest=apparmor
[ -x "$dest/parser" ] && exit 0
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
rm -rf "$dest.part" && mkdir -p "$dest.part"
python3 - "$mirror" "$dest.part" <<'PY'
import hashlib, lzma, sys, urllib.request
mirror, dest = sys.argv[1], sys.argv[2]
index = lzma.decompress(urllib.request.urlopen(f"{mirror}/dists/trixie/main/binary-amd64/Packages.xz", timeout=120).read()).decode()
want = {"apparmor": None, "libc6": None}
for stanza in index.split("\n\n"):
    fields = dict(l.split(": ", 1) for l in stanza.splitlines() if ": " in l and not l.startswith(" "))
    if fields.get("Package") in want and fields.get("Architecture") == "amd64":
        want[fields["Package"]] = fields
for name, fields in want.items():
    if fields is None:
        sys.exit(f"tests/apparmor/setup.sh: {name} is not in trixie's index")
    data = urllib.request.urlopen(f"{mirror}/{fields['Filename']}", timeout=300).read()
    if hashlib.sha256(data).hexdigest() != fields["SHA256"]:
        sys.exit(f"tests/apparmor/setup.sh: {fields['Filename']} does not match the index's SHA256")
    open(f"{dest}/{name}.deb", "wb").write(data)
    print(f"{name} {fields['Version']}", file=open(f"{dest}/VERSIONS", "a"))
PY
for deb in "$dest.part"/*.deb; do dpkg-deb -x "$deb" "$dest.part/root"; done
rm -f "$dest.part"/*.deb
root=$(pwd)/$dest/root
cat > "$dest.part/parser" <<SH
#!/bin/sh
# AppArmor 4's parser, on trixie's C library (see tests/apparmor/setup.sh).
exec "$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$root/usr/lib/x86_64-linux-gnu" "$root/usr/sbin/apparmor_parser" --base "$root/etc/apparmor.d" "\$@"
SH
chmod +x "$dest.part/parser"
rm -rf "$dest" && mv "$dest.part" "$dest"
"$dest/parser" --version >/dev/null
