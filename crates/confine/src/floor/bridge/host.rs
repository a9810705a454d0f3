//! The bridge without a network namespace of the tree's own (a container's engine refuses
//! one): the tree shares this machine's network, so nothing the kernel carries out for it
//! is held in. A stopped call is never let go on to the kernel but to name nothing outside;
//! what the bridge allows it makes itself, on a socket of its own put in the caller's place
//! (`ADDFD`), to the address it read: the caller's own socket cannot be taken here (a
//! container's seccomp profile refuses `pidfd_getfd`), what it is is read from `/proc`.
//!
//! - TCP to loopback: the egress proxy (the caller noted by the port our socket has), a
//!   server the tree runs itself, and this machine's ports as the rules of loopback say;
//!   anything else is refused and reported, as a connection by address is;
//! - a socket of another kind (UDP, raw, packet: the filter stops only those) is refused
//!   and reported;
//! - a path Unix socket is decided as with a namespace, whether the tree bound it read from
//!   which process holds the socket listed there.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use ahp_wrap_process::fds;

use super::addr::{read_sockaddr, Sockaddr};
use super::answer::{add_fd, SyscallReply};
use super::carry::Caller;
use super::{Answer, Bridge, Dest};

/// The connections named so far.
static NAMED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The sockets (inodes) put in callers' places, to answer a `connect` asked again on one.
pub(super) type Placed = Arc<Mutex<HashSet<u64>>>;

/// What the bridge asks of the run without a network namespace: which processes are the
/// tree's.
pub struct HostNet {
    /// Whether a process of the tree listens on this TCP port of this machine's loopback.
    pub tree_listens: Box<dyn Fn(u16) -> bool + Send>,
    /// Whether a process of the tree holds the socket with this inode.
    pub tree_holds: Box<dyn Fn(u64) -> bool + Send>,
    /// Whether Landlock refuses the tree's own TCP connections (ABI 4): else a `connect`
    /// let go on to the kernel must be on a Unix socket, so that an address rewritten after
    /// it was read reaches nothing outside.
    kernel_refuses_tcp: bool,
    pub(super) placed: Placed,
}

impl HostNet {
    /// With the run's two readings of the tree, and whether this kernel's Landlock refuses
    /// the tree's own TCP connections (ABI 4).
    pub fn new(
        tree_listens: Box<dyn Fn(u16) -> bool + Send>,
        tree_holds: Box<dyn Fn(u64) -> bool + Send>,
        kernel_refuses_tcp: bool,
    ) -> HostNet {
        HostNet {
            tree_listens,
            tree_holds,
            kernel_refuses_tcp,
            placed: Placed::default(),
        }
    }
}

impl Bridge {
    /// One stopped call, without a network namespace.
    pub(super) fn answer_host(
        &mut self,
        notify: &Arc<OwnedFd>,
        req: &libc::seccomp_notif,
        seen: &mut HashSet<Dest>,
    ) -> SyscallReply {
        let tid = req.pid as i32;
        let a = &req.data.args;
        match i64::from(req.data.nr) {
            libc::SYS_socket => {
                let kind = fds::socket_kind(a[0] as i32, a[1] as i32);
                self.refuse(
                    Dest::Socket(kind),
                    tid,
                    seen,
                    "a socket of a kind that leaves without a connection (without a network \
                     namespace of its own, the tree has Unix, netlink and TCP sockets only)",
                )
            }
            libc::SYS_sendto => match read_sockaddr(tid, a[4], a[5] as usize) {
                Some(Sockaddr::Unix(path)) => {
                    let data = super::Datagram::of(a);
                    self.unix_send(tid, path, data, seen)
                }
                // A Unix socket's datagram to an abstract name: sent from one of ours, as
                // read.
                Some(Sockaddr::Other(raw)) if unix_kind(tid, a[0] as i32).is_some() => {
                    let data = super::Datagram::of(a);
                    self.as_read(tid, a[0] as i32, &raw, Some(data))
                }
                // On a TCP or netlink socket the address cannot be made a path socket's (a
                // Fast Open never gets here).
                Some(_) => SyscallReply::Continue,
                None => SyscallReply::Error(libc::EFAULT),
            },
            libc::SYS_connect => {
                let (fd, ptr, len) = (a[0] as i32, a[1], a[2] as usize);
                match read_sockaddr(tid, ptr, len) {
                    Some(Sockaddr::Inet(addr)) => {
                        self.inet_host(tid, fd, addr, (notify, req.id), seen)
                    }
                    Some(Sockaddr::Unix(path)) => self.unix(fd, tid, path, seen, (notify, req.id)),
                    Some(Sockaddr::Other(raw)) => match unix_kind(tid, fd) {
                        Some(kind) => self.other_host(tid, fd, kind, &raw, (notify, req.id)),
                        // The one call let go on to the kernel (netlink, a TCP socket's
                        // `AF_UNSPEC`): only where Landlock refuses the tree's own TCP
                        // connections, should another thread rewrite the address meanwhile.
                        None if self.host.as_ref().is_some_and(|h| h.kernel_refuses_tcp) => {
                            SyscallReply::Continue
                        }
                        None => SyscallReply::Error(libc::EACCES),
                    },
                    // Unreadable: nothing is let through that was not read.
                    None => SyscallReply::Error(libc::EACCES),
                }
            }
            _ => SyscallReply::Continue,
        }
    }

    /// A TCP `connect(2)` of `tid`'s socket `fd` to `addr`.
    fn inet_host(
        &mut self,
        tid: i32,
        fd: i32,
        addr: SocketAddr,
        (notify, id): (&Arc<OwnedFd>, u64),
        seen: &mut HashSet<Dest>,
    ) -> SyscallReply {
        let ip = crate::floor::hosts::canonical(addr.ip());
        let addr = super::reached(addr);
        if !addr.ip().is_loopback() && !ip.is_loopback() {
            return self.refuse(
                addr,
                tid,
                seen,
                "a direct connection to an address (without a network namespace of its own, \
                 the tree reaches the outside through the proxy)",
            );
        }
        // A socket put in place already, asked again (a non-blocking client): answered as
        // the kernel would on it.
        let inode = fds::socket_inode(tid, fd);
        let placed = self.host.as_ref().map(|h| h.placed.clone());
        if let (Some(inode), Some(placed)) = (inode, &placed) {
            if placed.lock().is_ok_and(|p| p.contains(&inode)) {
                return again(tid, inode);
            }
        }
        let tree_listens = self
            .host
            .as_ref()
            .is_some_and(|h| (h.tree_listens)(addr.port()));
        let direct = addr.port() == self.proxy_port || tree_listens;
        if !direct {
            match self.loopback_rule(addr.port()) {
                super::Loopback::Refused(why) => return self.refuse(addr, tid, seen, why),
                super::Loopback::Decided => {
                    let caller = Caller {
                        v6: addr.is_ipv6(),
                        nonblocking: fds::nonblocking(tid, fd),
                        nodelay: false,
                        keepalive: false,
                    };
                    let target = (addr.ip().to_string(), addr.port(), Some(addr));
                    return self.hand_over(tid, fd, target, Answer::new(notify, id), caller);
                }
                super::Loopback::Named => {}
            }
        }
        let family = if addr.is_ipv6() {
            libc::AF_INET6
        } else {
            libc::AF_INET
        };
        let own = match own_socket(family, libc::SOCK_STREAM) {
            Ok(own) => own,
            Err(e) => return SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ENOBUFS)),
        };
        // The caller is noted by our socket's port before the proxy can accept it.
        if addr.port() == self.proxy_port && !tree_listens {
            super::note_asker(&own, addr, tid, &self.askers);
        } else {
            self.counts
                .bridged
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if let Err(e) = super::connect_inside(&own, addr) {
            return SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ECONNREFUSED));
        }
        self.place(notify.as_raw_fd(), id, tid, fd, own)
    }

    /// A connection of `tid`'s Unix socket `fd` to the socket file `target`, decided on:
    /// made on a socket of ours of the caller's type, put in its place.
    pub(super) fn unix_host(
        &self,
        tid: i32,
        fd: i32,
        target: &OwnedFd,
        (notify, id): (&Arc<OwnedFd>, u64),
    ) -> SyscallReply {
        let kind = unix_kind(tid, fd).unwrap_or(libc::SOCK_STREAM);
        let made = named_for(tid, kind)
            .and_then(|own| super::unix::connect_unix(&own, target).map(|()| own));
        match made {
            Ok(own) => self.place(notify.as_raw_fd(), id, tid, fd, own),
            Err(e) => SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
        }
    }

    /// A connection of `tid`'s Unix socket `fd` to an address read as `raw` (an abstract
    /// name): made on a socket of ours of the caller's type, put in its place.
    fn other_host(
        &self,
        tid: i32,
        fd: i32,
        kind: i32,
        raw: &[u8],
        (notify, id): (&Arc<OwnedFd>, u64),
    ) -> SyscallReply {
        let made = named_for(tid, kind).and_then(|own| {
            let to = (raw.as_ptr().cast(), raw.len() as libc::socklen_t);
            super::connect_blocking(&own, to.0, to.1).map(|()| own)
        });
        match made {
            Ok(own) => self.place(notify.as_raw_fd(), id, tid, fd, own),
            Err(e) => SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
        }
    }

    /// Puts our connected `socket` in place of `tid`'s `fd`, non-blocking and close-on-exec
    /// as the caller's was, and answers its `connect` done.
    fn place(&self, notify: i32, id: u64, tid: i32, fd: i32, socket: OwnedFd) -> SyscallReply {
        // The caller's descriptor's flags, read once.
        let flags = fds::flags(tid, fd).unwrap_or(0);
        if flags & i64::from(libc::O_NONBLOCK) != 0 {
            // SAFETY: fcntl on a descriptor we own.
            unsafe {
                let flags = libc::fcntl(socket.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(socket.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        let cloexec = flags & i64::from(libc::O_CLOEXEC) != 0;
        match add_fd(notify, id, &socket, fd, cloexec) {
            Ok(()) => {
                if let Some(host) = &self.host {
                    note_placed(&host.placed, &socket);
                }
                SyscallReply::Done
            }
            Err(e) => SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
        }
    }
}

/// Notes `socket` as put in a caller's place.
pub(super) fn note_placed(placed: &Placed, socket: &impl AsRawFd) {
    let st = nix::sys::stat::fstat(socket.as_raw_fd());
    if let (Ok(st), Ok(mut placed)) = (st, placed.lock()) {
        if placed.len() > 65536 {
            placed.clear();
        }
        placed.insert(st.st_ino);
    }
}

/// `connect` asked again on a socket we put in place: `EISCONN` once it is connected,
/// `EALREADY` while it connects, else the refusal it met.
fn again(tid: i32, inode: u64) -> SyscallReply {
    let state = ahp_wrap_process::sockets::table(Some(tid))
        .into_iter()
        .find(|r| r.inode == inode)
        .map(|r| r.state);
    SyscallReply::Error(match state {
        Some(1) => libc::EISCONN,
        Some(2) => libc::EALREADY,
        _ => libc::ECONNREFUSED,
    })
}

/// A new socket of ours (close-on-exec).
pub(super) fn own_socket(family: i32, kind: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: socket(2); the descriptor is owned at once.
    let fd = unsafe { libc::socket(family, kind | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The type of `tid`'s `fd` when it is a Unix socket (one read of the Unix socket table).
fn unix_kind(tid: i32, fd: i32) -> Option<i32> {
    let inode = fds::socket_inode(tid, fd)?;
    fds::unix_sockets(tid).remove(&inode).map(|(kind, _)| kind)
}

/// A Unix socket of ours of type `kind`, to connect for `tid`: bound to a name that says
/// whom it stands for, so that a server of the wrapper's (the control socket) reads the
/// caller where the kernel vouches only for the wrapper (`SO_PEERCRED`).
fn named_for(tid: i32, kind: i32) -> std::io::Result<OwnedFd> {
    let own = own_socket(libc::AF_UNIX, kind)?;
    name_for(&own, tid)?;
    Ok(own)
}

/// Binds the Unix socket `sock`, which the bridge connects for `tid`, to the name that says
/// whom it stands for (see `fds::caller_named`).
pub(super) fn name_for(sock: &OwnedFd, tid: i32) -> std::io::Result<()> {
    let pid = fds::thread_group(tid).unwrap_or(tid);
    let n = NAMED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("{}{pid}-{}-{n}", fds::CALLER_PREFIX, std::process::id());
    let addr = nix::sys::socket::UnixAddr::new_abstract(name.as_bytes())?;
    Ok(nix::sys::socket::bind(sock.as_raw_fd(), &addr)?)
}
