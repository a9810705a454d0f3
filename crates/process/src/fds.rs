//! A process's descriptors as `/proc` shows them, for the floor's connect bridge when it may
//! not take the descriptor itself (a container's seccomp profile refuses `pidfd_getfd`): a
//! descriptor's flags and socket, a socket's kind and state, a thread's process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `tid`'s thread group id (its process).
pub fn thread_group(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The flags of `tid`'s descriptor `fd` (`O_NONBLOCK`, `O_CLOEXEC`, …, as its fdinfo gives
/// them).
pub fn flags(tid: i32, fd: i32) -> Option<i64> {
    let info = std::fs::read_to_string(format!("/proc/{tid}/fdinfo/{fd}")).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|v| i64::from_str_radix(v.trim(), 8).ok())
}

/// Whether `tid`'s `fd` is close-on-exec.
pub fn cloexec(tid: i32, fd: i32) -> bool {
    flags(tid, fd).is_some_and(|f| f & i64::from(nix::libc::O_CLOEXEC) != 0)
}

/// Whether `tid`'s `fd` is non-blocking.
pub fn nonblocking(tid: i32, fd: i32) -> bool {
    flags(tid, fd).is_some_and(|f| f & i64::from(nix::libc::O_NONBLOCK) != 0)
}

/// The inode of the socket `tid`'s `fd` is (`socket:[N]`), if it is one.
pub fn socket_inode(tid: i32, fd: i32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{tid}/fd/{fd}")).ok()?;
    link.to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The Unix sockets of `pid`'s network namespace by inode: each one's type
/// (`SOCK_STREAM`, `SOCK_DGRAM`, `SOCK_SEQPACKET`) and the path it is bound to, if any.
pub fn unix_sockets(pid: i32) -> HashMap<u64, (i32, Option<String>)> {
    let Ok(table) = std::fs::read_to_string(format!("/proc/{pid}/net/unix")) else {
        return HashMap::new();
    };
    parse_unix(&table)
}

/// The rows of a `/proc/net/unix` table (Num RefCount Protocol Flags Type St Inode Path).
fn parse_unix(table: &str) -> HashMap<u64, (i32, Option<String>)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let kind = i32::from_str_radix(f.get(4)?, 16).ok()?;
            let inode = f.get(6)?.parse().ok()?;
            Some((inode, (kind, f.get(7).map(|p| (*p).to_owned()))))
        })
        .collect()
}

/// `path` as `tid` names it, made absolute against its working directory.
pub fn caller_path(tid: i32, path: &Path) -> Option<PathBuf> {
    if path.is_absolute() {
        return Some(path.to_owned());
    }
    let cwd = std::fs::read_link(format!("/proc/{tid}/cwd")).ok()?;
    Some(cwd.join(path))
}

/// Whether the socket at `real` (where it lies, as the caller's root `root` sees it) was
/// bound by a process of the tree: in the caller's network namespace, or in one of its
/// ancestors' up to the first in the wrapper's own (the tree's processes are the only ones
/// in the tree's namespace and in those it made: a sandbox of the tree's own, bubblewrap's
/// `--unshare-net`, reaches its parent's proxy through a socket bound outside its namespace).
pub fn bound_in_tree(tid: i32, root: &Path, real: &Path) -> bool {
    if !bound_in_table(tid, root, real).is_empty() {
        return true;
    }
    let net = |pid: i32| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
    let (Some(ours), Some(mut last)) = (net(std::process::id() as i32), net(tid)) else {
        return false;
    };
    let mut pid = tid;
    // A bound on the walk: a chain of namespaces deeper than this is nobody's sandbox.
    for _ in 0..32 {
        let Some(parent) = crate::procfs::stat(pid).map(|s| s.ppid).filter(|&p| p > 0) else {
            return false;
        };
        pid = parent;
        let Some(ns) = net(pid) else { return false };
        if ns == ours {
            return false;
        }
        if ns != last {
            if !bound_in_table(pid, root, real).is_empty() {
                return true;
            }
            last = ns;
        }
    }
    false
}

/// The sockets (inodes) listed at `real` in the Unix socket table of `pid`'s network
/// namespace, which lists the paths bound there as their binders named them (resolved here
/// against the caller's root `root`; a relative one against nothing we know is skipped).
pub fn bound_in_table(pid: i32, root: &Path, real: &Path) -> Vec<u64> {
    let table = unix_sockets(pid);
    let bound = || {
        table
            .iter()
            .filter_map(|(inode, (_, path))| Some((*inode, Path::new(path.as_deref()?))))
    };
    let mut found: Vec<u64> = bound()
        .filter(|(_, b)| *b == real)
        .map(|(i, _)| i)
        .collect();
    if !found.is_empty() {
        return found;
    }
    // Bound under another name for the same place (a link on the way).
    let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    if let Ok(real) = std::fs::canonicalize(inside(real)) {
        found.extend(
            bound()
                .filter(|(_, b)| {
                    b.is_absolute() && std::fs::canonicalize(inside(b)).is_ok_and(|c| c == real)
                })
                .map(|(i, _)| i),
        );
    }
    found
}

/// A socket's family and type as a person reads them.
pub fn socket_kind(family: i32, kind: i32) -> String {
    let family = match family {
        nix::libc::AF_INET => "IPv4",
        nix::libc::AF_INET6 => "IPv6",
        nix::libc::AF_PACKET => "packet",
        _ => return format!("family {family}"),
    };
    match kind & 0xf {
        nix::libc::SOCK_DGRAM => format!("{family} datagram (UDP, ICMP)"),
        nix::libc::SOCK_RAW => format!("{family} raw"),
        nix::libc::SOCK_STREAM => format!("{family} stream of a protocol other than TCP"),
        other => format!("{family} type {other}"),
    }
}

/// The abstract name a Unix socket the floor's bridge connects for a caller is bound to: this, its pid, the
/// wrapper's and a count.
pub const CALLER_PREFIX: &str = "ahp-wrap-for-";

/// The caller a connection made by the floor's bridge stands for, from the abstract name it is bound
/// to; for a server that checked the connection is the wrapper's own (`SO_PEERCRED`).
pub fn caller_named(name: &[u8]) -> Option<i32> {
    let rest = std::str::from_utf8(name)
        .ok()?
        .strip_prefix(CALLER_PREFIX)?;
    rest.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unix_table_gives_each_socket_its_type_and_path() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                     0000000000000000: 00000002 00000000 00010000 0001 01 4412 /run/x.sock\n\
                     0000000000000000: 00000002 00000000 00000000 0002 01 4413\n\
                     0000000000000000: 00000003 00000000 00000000 0005 03 4414 @abs\n";
        let rows = parse_unix(table);
        assert_eq!(
            rows[&4412],
            (nix::libc::SOCK_STREAM, Some("/run/x.sock".into()))
        );
        assert_eq!(rows[&4413], (nix::libc::SOCK_DGRAM, None));
        assert_eq!(
            rows[&4414],
            (nix::libc::SOCK_SEQPACKET, Some("@abs".into()))
        );
    }

    #[test]
    fn a_name_the_bridge_binds_says_whom_it_stands_for() {
        assert_eq!(caller_named(b"ahp-wrap-for-4242-17-0"), Some(4242));
        assert_eq!(caller_named(b"ahp-wrap-1f7f"), None);
        assert_eq!(caller_named(b"ahp-wrap-for-x-17-0"), None);
    }

    #[test]
    fn our_own_descriptors_are_read_from_proc() {
        let me = std::process::id() as i32;
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        use std::os::fd::AsRawFd;
        let fd = socket.as_raw_fd();
        assert!(nonblocking(me, fd));
        assert!(cloexec(me, fd));
        assert!(socket_inode(me, fd).is_some());
        let (pipe, _other) = nix::unistd::pipe().unwrap();
        assert_eq!(socket_inode(me, pipe.as_raw_fd()), None);
        assert_eq!(thread_group(me), Some(me));
    }
}
