//! Path Unix sockets: the bridge's decision on a connect or a datagram to one (where the
//! socket a caller names really lies, whether the tree bound it), and connecting or sending
//! on the caller's socket through the file decided on.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use ahp_wrap_process::fds::{bound_in_table, bound_in_tree, caller_path};

use super::{their_fd, Bridge, Datagram, Dest, SyscallReply};

impl Bridge {
    /// A connection to the path socket `path`. The file it names is opened (`O_PATH`, through
    /// the caller's root and working directory) and decided on where it really lies: made
    /// here, on the caller's socket, through that open file, when a process of the tree
    /// bound it or the policy allows it, so that a link swapped after the decision gains
    /// nothing; refused otherwise. Nothing there: the kernel answers as it would.
    pub(super) fn unix(
        &self,
        fd: i32,
        tid: i32,
        path: PathBuf,
        seen: &mut HashSet<Dest>,
        notify: (&std::sync::Arc<OwnedFd>, u64),
    ) -> SyscallReply {
        let target = match self.decide_unix(tid, path, seen) {
            Ok(target) => target,
            Err(reply) => return reply,
        };
        if self.host.is_some() {
            return self.unix_host(tid, fd, &target, notify);
        }
        let theirs = match their_fd(tid, fd) {
            Ok(t) => t,
            Err(e) => return SyscallReply::Error(e.raw_os_error().unwrap_or(libc::EACCES)),
        };
        // Named for the caller, unless it has a name already (see `as_read`).
        let _ = super::host::name_for(&theirs, tid);
        match connect_unix(&theirs, &target) {
            Ok(()) => SyscallReply::Done,
            Err(e) => SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
        }
    }

    /// A datagram to the path socket `path`: decided as a connection is, then sent here,
    /// through the file decided on, with the caller's bytes as they were when it asked.
    pub(super) fn unix_send(
        &self,
        tid: i32,
        path: PathBuf,
        data: Datagram,
        seen: &mut HashSet<Dest>,
    ) -> SyscallReply {
        let target = match self.decide_unix(tid, path, seen) {
            Ok(target) => target,
            Err(reply) => return reply,
        };
        // Without a namespace, from a socket of ours (the caller's cannot be taken).
        let theirs = match self.host {
            Some(_) => super::host::own_socket(libc::AF_UNIX, libc::SOCK_DGRAM),
            None => their_fd(tid, data.fd),
        };
        let theirs = match theirs {
            Ok(t) => t,
            Err(e) => return SyscallReply::Error(e.raw_os_error().unwrap_or(libc::EBADF)),
        };
        let (un, alen) = via(&target);
        let to = ((&raw const un).cast(), alen);
        match send_unix(tid, &theirs, to, data.buf, data.len, data.flags) {
            Ok(n) => SyscallReply::Value(n as i64),
            Err(e) => SyscallReply::Error(e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }

    /// The socket file a caller names at `path`, opened, when the tree may reach it; else
    /// the answer: refused (and reported), or what opening it met (nothing there: `ENOENT`).
    /// Never the kernel's to carry out: the caller could name another path by then.
    fn decide_unix(
        &self,
        tid: i32,
        path: PathBuf,
        seen: &mut HashSet<Dest>,
    ) -> Result<OwnedFd, SyscallReply> {
        let Some(full) = caller_path(tid, &path) else {
            return Err(SyscallReply::Error(libc::EACCES));
        };
        let root = PathBuf::from(format!("/proc/{tid}/root"));
        let target = open_path(&root.join(full.strip_prefix("/").unwrap_or(&full)))
            .map_err(|e| SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ENOENT)))?;
        // Where it lies, as the caller's root sees it.
        let real = std::fs::read_link(format!("/proc/self/fd/{}", target.as_raw_fd()))
            .map(|r| match std::fs::read_link(&root) {
                Ok(base) if base != Path::new("/") => r
                    .strip_prefix(&base)
                    .map_or(r.clone(), |p| Path::new("/").join(p)),
                _ => r,
            })
            .unwrap_or_else(|_| full.clone());
        let bound = || match &self.host {
            Some(host) => bound_in_table(tid, &root, &real)
                .into_iter()
                .any(|inode| (host.tree_holds)(inode)),
            None => bound_in_tree(tid, &root, &real),
        };
        let allowed = self.unix_allow.iter().any(|a| real.starts_with(a)) || bound();
        if !allowed {
            return Err(self.refuse(
                Dest::Unix(real),
                tid,
                seen,
                "a Unix socket no process of the tree bound (a service outside the tree; \
                 [floor.unix] allow names the ones it may reach)",
            ));
        }
        Ok(target)
    }
}

/// `path`, opened to name it only (`O_PATH`), its links followed.
pub(super) fn open_path(path: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open with a NUL-terminated path; the descriptor is ours.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Connects the caller's socket (shared with us) to the socket file `target` names, through
/// `/proc/self/fd`: the file decided on, whatever its path names by now.
pub(super) fn connect_unix(sock: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    let (un, len) = via(target);
    super::connect_blocking(sock, (&raw const un).cast(), len)
}

/// The largest datagram sent on a caller's behalf (a path socket's default limit is about
/// 208 KiB; larger is `EMSGSIZE`, as the kernel would say past its own).
const MAX_DATAGRAM: usize = 256 * 1024;

/// Sends the `len` bytes at `buf` in `tid`'s memory on its socket `sock` (shared with us, or
/// ours in its place) to the address `to` (the socket file decided on, through
/// `/proc/self/fd`, or the bytes of another address as the bridge read them), with `flags`. Never blocks the bridge for long: a full
/// receiver is waited for a second at most, then `EAGAIN`.
pub(super) fn send_unix(
    tid: i32,
    sock: &OwnedFd,
    (to, alen): (*const libc::sockaddr, libc::socklen_t),
    buf: u64,
    len: usize,
    flags: i32,
) -> io::Result<usize> {
    if len > MAX_DATAGRAM {
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    let mut data = vec![0u8; len];
    if len > 0 && super::read_memory(tid, buf, &mut data) != len as isize {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let send = || {
        // SAFETY: sendto from our buffer to an address we built.
        let n = unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                data.as_ptr().cast(),
                data.len(),
                flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                to,
                alen,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    };
    match send() {
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && flags & libc::MSG_DONTWAIT == 0 => {
            let mut pfd = libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: poll on one descriptor we hold.
            unsafe { libc::poll(&mut pfd, 1, 1000) };
            send()
        }
        other => other,
    }
}

/// `/proc/self/fd/N` of `target` as a Unix socket address.
fn via(target: &OwnedFd) -> (libc::sockaddr_un, libc::socklen_t) {
    use std::os::unix::ffi::OsStrExt;
    let via = format!("/proc/self/fd/{}", target.as_raw_fd());
    // SAFETY: sockaddr_un is plain data; the path fits (a short /proc name).
    let mut un: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    un.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in un
        .sun_path
        .iter_mut()
        .zip(std::ffi::OsStr::new(&via).as_bytes())
    {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + via.len() + 1;
    (un, len as libc::socklen_t)
}

impl Bridge {
    /// A `connect(2)` or addressed `sendto(2)` of `tid`'s socket `fd` to an address the
    /// bridge does not decide on (an abstract socket, `AF_UNSPEC`, netlink): made here, on
    /// the caller's socket, with the bytes as they were read, never handed back to the
    /// kernel to read again (another thread could have made them a path socket's by then).
    pub(super) fn as_read(
        &self,
        tid: i32,
        fd: i32,
        raw: &[u8],
        send: Option<Datagram>,
    ) -> SyscallReply {
        let sock = match self.host {
            // Without a namespace the caller's socket cannot be taken: a datagram is sent
            // from one of ours (a connection is `host`'s).
            Some(_) => super::host::own_socket(libc::AF_UNIX, libc::SOCK_DGRAM),
            None => their_fd(tid, fd),
        };
        let sock = match sock {
            Ok(s) => s,
            Err(e) => return SyscallReply::Error(e.raw_os_error().unwrap_or(libc::EBADF)),
        };
        let to = (raw.as_ptr().cast(), raw.len() as libc::socklen_t);
        match send {
            Some(d) => match send_unix(tid, &sock, to, d.buf, d.len, d.flags) {
                Ok(n) => SyscallReply::Value(n as i64),
                Err(e) => SyscallReply::Error(e.raw_os_error().unwrap_or(libc::EIO)),
            },
            None => {
                // The caller's socket named for it, unless it has a name already (for a
                // server of the wrapper's: the kernel vouches for the wrapper, which connects).
                if raw.get(..2) == Some(&(libc::AF_UNIX as u16).to_ne_bytes()[..]) {
                    let _ = super::host::name_for(&sock, tid);
                }
                match super::connect_blocking(&sock, to.0, to.1) {
                    Ok(()) => SyscallReply::Done,
                    Err(e) => SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
                }
            }
        }
    }
}
