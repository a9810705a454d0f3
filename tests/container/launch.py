#!/usr/bin/python3
"""Runs a command as a container engine runs a container's process, for tests/floor_container.rs.

    launch.py [--caps CONTAINERS_CONF] PROFILE.json ENGINE_SOURCE_DIR OUTSIDE_LOG -- COMMAND...

What Docker (moby 20.10, Debian's docker.io) applies to a container by default, each part read
from the engine's own source (Debian's golang-github-docker-docker-dev, unpacked by
tests/container/setup.sh into ENGINE_SOURCE_DIR), none of it written here by hand:

- a mount namespace of its own, with the masked paths (an empty read-only tmpfs over a
  directory, /dev/null over a file) and the read-only paths (/proc/sys, ...) of
  oci/defaults.go;
- a network namespace of its own, with loopback; on it 198.51.100.1 (a documentation address)
  stands for the world outside the container: a TCP server there appends what reaches it to
  OUTSIDE_LOG (and its pid to OUTSIDE_LOG.pid);
- the capability set of oci/caps/defaults.go (bounding, effective and permitted; no
  inheritable or ambient ones), as root;
- no_new_privs (`--security-opt no-new-privileges`);
- the seccomp profile PROFILE.json (the engine's default.json, or a profile derived from it),
  compiled into a filter by libseccomp as the engine does (runc's libseccomp-golang): an entry
  is kept when its `includes` hold for this architecture, kernel and capability set and its
  `excludes` do not; a name libseccomp does not know is skipped, as runc skips it.

With `--caps`, the capability set is Podman's instead (`default_capabilities` of
containers-common's containers.conf, the package that also ships Podman's seccomp.json); the
masked and read-only paths stay Docker's (Podman's own lists are in its Go source, not in
that package, and hold the same /proc paths).

The engine's other parts (cgroups, a PID, UTS and IPC namespace, the image's root file system)
change nothing the floor uses: they are not made here. Nor is AppArmor, which this kernel
does not enforce (docs/floor.md, "In a container", says what it adds on an Ubuntu host).
"""

import ctypes
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys

import seccomp

libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4

# The kernel's numbers for the capabilities (include/uapi/linux/capability.h).
CAPS = """CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE
SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME
SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG
WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF CHECKPOINT_RESTORE""".split()
CAP_NUMBER = {"CAP_" + name: n for n, name in enumerate(CAPS)}


def check(r, what):
    if r != 0:
        e = ctypes.get_errno()
        sys.exit(f"launch.py: {what}: {os.strerror(e)}")


def mount(src, target, fstype, flags, data=None):
    return libc.mount(
        src.encode() if src else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )


def go_strings(path, block):
    """The strings of the Go composite literal that follows `block` in `path`."""
    text = open(path).read()
    start = text.index(block)
    end = text.index("}", start)
    return re.findall(r'"([^"]+)"', text[start:end])


def container_mounts(source):
    check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
    check(mount(None, "/", None, MS_REC | MS_PRIVATE), "private mounts")
    defaults = os.path.join(source, "oci/defaults.go")
    for path in go_strings(defaults, "MaskedPaths:"):
        if not os.path.exists(path):
            continue
        if os.path.isdir(path):
            check(mount("tmpfs", path, "tmpfs", MS_RDONLY), f"mask {path}")
        else:
            check(mount("/dev/null", path, None, MS_BIND), f"mask {path}")
    for path in go_strings(defaults, "ReadonlyPaths:"):
        if not os.path.exists(path):
            continue
        check(mount(path, path, None, MS_BIND | MS_REC), f"bind {path}")
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
        check(mount(path, path, None, flags), f"read-only {path}")


def outside_server(log):
    """A TCP server on 198.51.100.1:80 in the container's network namespace, in a process of
    its own that ends with the launcher's (its death signal): each connection's first bytes
    are appended to `log`."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", "198.51.100.1/24", "dev", "lo"], check=True)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("198.51.100.1", 80))
    server.listen(16)
    pid = os.fork()
    if pid == 0:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        while True:
            conn, peer = server.accept()
            conn.settimeout(2)
            try:
                data = conn.recv(4096)
            except OSError:
                data = b""
            with open(log, "ab") as f:
                f.write(b"connection: " + data.replace(b"\n", b" ") + b"\n")
            conn.close()
    with open(log + ".pid", "w") as f:
        f.write(f"{pid}\n")
    server.close()


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_capabilities(keep):
    numbers = {CAP_NUMBER[c] for c in keep}
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for n in range(last + 1):
        if n not in numbers:
            check(libc.prctl(PR_CAPBSET_DROP, n, 0, 0, 0), f"drop capability {n}")
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient capabilities")
    mask = sum(1 << n for n in numbers)
    header = CapHeader(0x20080522, 0)
    data = (CapData * 2)()
    for i in range(2):
        word = (mask >> (32 * i)) & 0xFFFFFFFF
        data[i].effective = data[i].permitted = word
        data[i].inheritable = 0
    check(libc.capset(ctypes.byref(header), data), "capset")


def kernel_version():
    return tuple(int(x) for x in re.findall(r"\d+", platform.release())[:2])


def holds(condition, caps, arch, kernel):
    if not condition:
        return True
    if condition.get("arches") and arch not in condition["arches"]:
        return False
    if any(c not in caps for c in condition.get("caps") or []):
        return False
    minimum = condition.get("minKernel")
    if minimum and kernel < tuple(int(x) for x in minimum.split(".")[:2]):
        return False
    return True


def excluded(condition, caps, arch):
    if not condition:
        return False
    if arch in (condition.get("arches") or []):
        return True
    return any(c in caps for c in condition.get("caps") or [])


def action(name, errno_ret, default_errno):
    return {
        "SCMP_ACT_ALLOW": seccomp.ALLOW,
        "SCMP_ACT_ERRNO": seccomp.ERRNO(errno_ret if errno_ret is not None else default_errno),
        "SCMP_ACT_KILL": seccomp.KILL,
        "SCMP_ACT_KILL_PROCESS": seccomp.KILL_PROCESS,
        "SCMP_ACT_TRAP": seccomp.TRAP,
        "SCMP_ACT_LOG": seccomp.LOG,
    }[name]


OPS = {
    "SCMP_CMP_NE": seccomp.NE,
    "SCMP_CMP_LT": seccomp.LT,
    "SCMP_CMP_LE": seccomp.LE,
    "SCMP_CMP_EQ": seccomp.EQ,
    "SCMP_CMP_GE": seccomp.GE,
    "SCMP_CMP_GT": seccomp.GT,
    "SCMP_CMP_MASKED_EQ": seccomp.MASKED_EQ,
}


def seccomp_filter(profile, caps):
    """The engine's filter for `profile` and `caps` on this machine (x86-64: the profile's
    arches `amd64`, `x32`, `x86`; its sub-architectures added as the engine adds them)."""
    arch = "amd64"
    kernel = kernel_version()
    default_errno = profile.get("defaultErrnoRet", 1)  # EPERM, as runc's default
    f = seccomp.SyscallFilter(defaction=action(profile["defaultAction"], None, default_errno))
    for entry in profile.get("archMap") or []:
        if entry["architecture"] == "SCMP_ARCH_X86_64":
            for sub in entry.get("subArchitectures") or []:
                f.add_arch({"SCMP_ARCH_X86": seccomp.Arch.X86, "SCMP_ARCH_X32": seccomp.Arch.X32}[sub])
    for call in profile["syscalls"]:
        if not holds(call.get("includes"), caps, arch, kernel):
            continue
        if excluded(call.get("excludes"), caps, arch):
            continue
        act = action(call["action"], call.get("errnoRet"), default_errno)
        args = [
            seccomp.Arg(a["index"], OPS[a["op"]], a["value"], a.get("valueTwo", 0))
            for a in call.get("args") or []
        ]
        names = call.get("names") or [call.get("name")]
        for name in names:
            try:
                f.add_rule(act, name, *args)
            except (RuntimeError, ValueError):
                # A name this libseccomp does not know: runc skips it too.
                pass
    return f


def podman_caps(conf):
    """The `default_capabilities` list of a containers.conf."""
    text = open(conf).read()
    start = text.index("\ndefault_capabilities = [")
    end = text.index("]", start)
    return ["CAP_" + c for c in re.findall(r'"([A-Z_]+)"', text[start:end])]


def main():
    args = sys.argv[1:]
    caps_conf = None
    if args[0] == "--caps":
        caps_conf, args = args[1], args[2:]
    profile_path, source, log = args[0:3]
    command = args[4:] if args[3] == "--" else sys.exit("launch.py: -- COMMAND expected")
    profile = json.load(open(profile_path))
    if caps_conf:
        caps = podman_caps(caps_conf)
    else:
        caps = go_strings(os.path.join(source, "oci/caps/defaults.go"), "return []string{")
    container_mounts(source)
    outside_server(log)
    filt = seccomp_filter(profile, caps)
    drop_capabilities(caps)
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    filt.load()
    os.execvp(command[0], command)


main()
