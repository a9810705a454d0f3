//! Connections to a name: a TCP `connect(2)` to an address the tree's resolver gave a name
//! ([`Names`](crate::floor::names::Names)) is handed to the run, which decides it by name
//! and, when it may go, connects from its own namespace and puts that socket in the
//! caller's place ([`Carry::put`]). The caller waits in `connect` until then.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::{fd_cloexec, nodelay, sockopt, their_fd, thread_group, Answer, Bridge, SyscallReply};

/// A connection to a name, waiting for the run.
#[derive(Debug)]
pub struct Carry {
    /// The name, as the tree's resolver answered it (for a loopback connection, the address).
    pub name: String,
    /// A connection to this machine's loopback, at a port no rule names: to be decided as
    /// one (and made to this address).
    pub loopback: Option<std::net::SocketAddr>,
    /// The TCP port the caller connects to.
    pub port: u16,
    /// The connecting process.
    pub pid: i32,
    /// The caller's socket is IPv6 (an IPv4 host is then reached through a mapped address).
    pub v6: bool,
    /// The caller's socket is non-blocking: it is answered `EINPROGRESS` once the
    /// connection is under way, and finds it made (or not) as its own would be.
    pub nonblocking: bool,
    /// `TCP_NODELAY` and `SO_KEEPALIVE` as the caller set them, for the socket put in its
    /// place.
    pub nodelay: bool,
    /// `SO_KEEPALIVE` as the caller set it (see `nodelay`).
    pub keepalive: bool,
    fd: i32,
    cloexec: bool,
    answer: Answer,
    /// Without a network namespace: where the socket put in place is noted (see `host`).
    placed: Option<super::host::Placed>,
}

impl Carry {
    /// Refuses the connection with `errno`.
    pub fn refuse(self, errno: i32) {
        self.answer.fail(errno);
    }

    /// Puts `socket` (connected, or connecting: `EINPROGRESS`) in the caller's place and
    /// answers its `connect` with `result` (0 or an errno).
    pub fn put(self, socket: &impl AsRawFd, result: i32) -> io::Result<()> {
        if let Err(e) = self.answer.install(socket, self.fd, self.cloexec) {
            self.answer
                .fail(e.raw_os_error().unwrap_or(libc::ECONNREFUSED));
            return Err(e);
        }
        if let Some(placed) = &self.placed {
            super::host::note_placed(placed, socket);
        }
        if result != 0 {
            self.answer.fail(result);
        }
        Ok(())
    }
}

impl Bridge {
    /// A `connect(2)` of `tid`'s socket `fd` to `port` of a name's address: handed to the
    /// run for a stream socket; anything else (a UDP socket a resolver connects to find a
    /// source address) goes on to the kernel, which finds no route.
    pub(super) fn carry(
        &self,
        tid: i32,
        fd: i32,
        (name, port, loopback): (String, u16, Option<std::net::SocketAddr>),
        (notify, id): (&Arc<OwnedFd>, u64),
    ) -> SyscallReply {
        let theirs: OwnedFd = match their_fd(tid, fd) {
            Ok(t) => t,
            Err(e) => return SyscallReply::Error(e.raw_os_error().unwrap_or(libc::EACCES)),
        };
        if sockopt(&theirs, libc::SOL_SOCKET, libc::SO_TYPE) != Some(libc::SOCK_STREAM) {
            return SyscallReply::Continue;
        }
        // A socket already put in place (a client that calls `connect` again to learn how
        // its non-blocking one went): the kernel answers, on our socket, as for its own
        // (`EALREADY`, `EISCONN`).
        if tcp_state(&theirs) != Some(TCP_CLOSE) {
            return SyscallReply::Continue;
        }
        // SAFETY: fcntl on a descriptor we own (its file description is the caller's).
        let status = unsafe { libc::fcntl(theirs.as_raw_fd(), libc::F_GETFL) };
        let caller = Caller {
            v6: sockopt(&theirs, libc::SOL_SOCKET, libc::SO_DOMAIN) == Some(libc::AF_INET6),
            nonblocking: status >= 0 && status & libc::O_NONBLOCK != 0,
            nodelay: nodelay(&theirs),
            keepalive: sockopt(&theirs, libc::SOL_SOCKET, libc::SO_KEEPALIVE)
                .is_some_and(|v| v != 0),
        };
        self.hand_over(
            tid,
            fd,
            (name, port, loopback),
            Answer::new(notify, id),
            caller,
        )
    }

    /// Hands `tid`'s connection of its socket `fd` to the run, to decide and answer.
    pub(super) fn hand_over(
        &self,
        tid: i32,
        fd: i32,
        (name, port, loopback): (String, u16, Option<std::net::SocketAddr>),
        answer: Answer,
        caller: Caller,
    ) -> SyscallReply {
        (self.carry)(Carry {
            name,
            loopback,
            port,
            pid: thread_group(tid).unwrap_or(tid),
            v6: caller.v6,
            nonblocking: caller.nonblocking,
            nodelay: caller.nodelay,
            keepalive: caller.keepalive,
            fd,
            cloexec: fd_cloexec(tid, fd),
            answer,
            placed: self.host.as_ref().map(|h| h.placed.clone()),
        });
        SyscallReply::Later
    }
}

/// What of the caller's socket a socket put in its place keeps.
pub(super) struct Caller {
    pub(super) v6: bool,
    pub(super) nonblocking: bool,
    pub(super) nodelay: bool,
    pub(super) keepalive: bool,
}

/// `TCP_CLOSE`: a TCP socket neither connected nor connecting (nor listening).
const TCP_CLOSE: u8 = 7;

/// The state of TCP socket `sock` (`tcpi_state`, the first byte of `TCP_INFO`).
fn tcp_state(sock: &OwnedFd) -> Option<u8> {
    let mut info = [0u8; 8];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: getsockopt into a buffer we own; the kernel copies at most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (r == 0 && len >= 1).then_some(info[0])
}

/// Starts a non-blocking connection to `addr` from the wrapper's namespace, with
/// `TCP_NODELAY` and `SO_KEEPALIVE` as `options` say: the socket (close-on-exec,
/// non-blocking), and 0 if it is made already, else `EINPROGRESS`.
pub fn start_connect(
    addr: std::net::SocketAddr,
    (nodelay, keepalive): (bool, bool),
) -> io::Result<(OwnedFd, i32)> {
    use std::os::fd::FromRawFd;
    let family = match addr {
        std::net::SocketAddr::V4(_) => libc::AF_INET,
        std::net::SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: a new socket we then own; connect with an address we own.
    unsafe {
        let fd = libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let socket = OwnedFd::from_raw_fd(fd);
        for (level, name, on) in [
            (libc::IPPROTO_TCP, libc::TCP_NODELAY, nodelay),
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE, keepalive),
        ] {
            let v = libc::c_int::from(on);
            libc::setsockopt(
                fd,
                level,
                name,
                (&raw const v).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        let (raw, len) = super::addr::raw_sockaddr(addr);
        if libc::connect(fd, (&raw const raw).cast(), len) == 0 {
            return Ok((socket, 0));
        }
        match io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok((socket, libc::EINPROGRESS)),
            e => Err(e),
        }
    }
}
