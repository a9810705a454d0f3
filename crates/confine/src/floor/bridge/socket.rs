//! The caller's socket as the bridge sees it: a copy of its descriptor, its options and
//! flags, and the connections made on it (inside the tree's namespace).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::{raw_sockaddr, Askers};
pub(super) use ahp_wrap_process::fds::{cloexec as fd_cloexec, thread_group};

/// Binds a socket about to reach the proxy or the resolver (at `addr`) to a port of its own
/// first, if it has none, and notes in `askers` which process it is, for their events.
pub(super) fn note_asker(sock: &OwnedFd, addr: SocketAddr, tid: i32, askers: &Askers) {
    // SAFETY: bind and getsockname with buffers we own.
    let port = unsafe {
        let local_port = |sock: &OwnedFd| {
            let mut local: libc::sockaddr_storage = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            if libc::getsockname(sock.as_raw_fd(), (&raw mut local).cast(), &mut len) != 0 {
                return 0;
            }
            // sin_port and sin6_port lie at the same offset.
            let sin = &*(&raw const local).cast::<libc::sockaddr_in>();
            u16::from_be(sin.sin_port)
        };
        match local_port(sock) {
            0 => {
                let (any, len) = raw_sockaddr(SocketAddr::new(addr.ip(), 0));
                libc::bind(sock.as_raw_fd(), (&raw const any).cast(), len);
                local_port(sock)
            }
            port => port,
        }
    };
    if port == 0 {
        return;
    }
    if let Ok(mut askers) = askers.lock() {
        if askers.len() > 4096 {
            askers.clear();
        }
        askers.insert(port, thread_group(tid).unwrap_or(tid));
    }
}

/// Connects `sock` (the caller's, shared with us) to the address at `addr` (`len` bytes),
/// blocking for the while: on this machine a connection is made or refused at once.
pub(super) fn connect_blocking(
    sock: &OwnedFd,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own (its file description is the caller's).
    let status = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    let nonblocking = status >= 0 && status & libc::O_NONBLOCK != 0;
    if nonblocking {
        unsafe { libc::fcntl(fd, libc::F_SETFL, status & !libc::O_NONBLOCK) };
    }
    // SAFETY: connect with an address the caller of this function owns, `len` bytes long.
    let r = unsafe { libc::connect(fd, addr, len) };
    let err = io::Error::last_os_error();
    if nonblocking {
        unsafe { libc::fcntl(fd, libc::F_SETFL, status) };
    }
    match r {
        0 => Ok(()),
        _ => Err(err),
    }
}

/// Connects `tid`'s own socket (shared with us) to `addr` inside its namespace, blocking for
/// the while (a loopback connection is made or refused at once).
pub(super) fn connect_inside(sock: &OwnedFd, addr: SocketAddr) -> io::Result<()> {
    let (raw, len) = raw_sockaddr(addr);
    connect_blocking(sock, (&raw const raw).cast(), len)
}

/// A copy of `tid`'s descriptor `fd` (pidfd_getfd).
pub(super) fn their_fd(tid: i32, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open and pidfd_getfd return new descriptors we then own.
    unsafe {
        let mut pidfd = libc::syscall(libc::SYS_pidfd_open, tid, libc::PIDFD_THREAD);
        if pidfd < 0 {
            let tgid = thread_group(tid).unwrap_or(tid);
            pidfd = libc::syscall(libc::SYS_pidfd_open, tgid, 0);
        }
        if pidfd < 0 {
            return Err(io::Error::last_os_error());
        }
        let pidfd = OwnedFd::from_raw_fd(pidfd as RawFd);
        let theirs = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
        if theirs < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(theirs as RawFd))
    }
}

pub(super) fn nodelay(sock: &OwnedFd) -> bool {
    sockopt(sock, libc::IPPROTO_TCP, libc::TCP_NODELAY).is_some_and(|v| v != 0)
}

/// An integer socket option of `sock`.
pub(super) fn sockopt(
    sock: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
) -> Option<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int we own.
    let r =
        unsafe { libc::getsockopt(sock.as_raw_fd(), level, name, (&raw mut v).cast(), &mut len) };
    (r == 0).then_some(v)
}
