//! The wrapper's side of the network floor: every `connect(2)` of the agent's tree stops in
//! the kernel (a seccomp user notification) until this thread answers it.
//!
//! The tree's network namespace has only loopback, so whatever this thread lets the kernel
//! carry out cannot leave it. What it does itself:
//! - a TCP connection to loopback is tried inside the namespace first, on the caller's own
//!   socket (the proxy, or a server the tree runs); one that nobody there listens on goes to this machine's
//!   loopback (local dev servers, a local model server): the wrapper connects from its own
//!   namespace and puts that socket in place of the caller's (`SECCOMP_IOCTL_NOTIF_ADDFD`);
//!   the address it connects to is the one it read, so a caller that changes it afterwards
//!   gains nothing. Port 53 is never bridged (the tree's resolver is the run's, inside
//!   its namespace);
//! - a TCP connection to an address the tree's resolver gave a name is handed to the run
//!   ([`Carry`]), which decides it by name and carries it out (`carry`);
//! - a connection to any other address is answered `EACCES` and reported (the first one to
//!   each destination), so that a refused direct connection is an audited decision;
//! - a path Unix socket (one in the file system: tmux's, Docker's, D-Bus's) may reach a
//!   service outside the tree, which would run what it is told with none of the floor's
//!   limits: it is connected only when a process of the tree bound it (it is listed in the
//!   tree's own network namespace) or the policy allows its path; anything else is answered
//!   `EACCES` and reported. Abstract sockets belong to the network namespace: the tree
//!   reaches only its own;
//! - a datagram sent to an address outside (`sendto(2)`: a DNS query to the machine's
//!   resolver, a UDP exfiltration, a TCP Fast Open) is answered `EACCES` and reported like a
//!   direct connection, where the namespace would only have found no route;
//! - a TCP `listen(2)` on the tree's loopback is done here and told to the run, which
//!   publishes the port on this machine's loopback (`listen`);
//! - a datagram sent to a path Unix socket (`sendto(2)` with an address: the journal's
//!   socket, `/dev/log`, a service's notify socket) is decided the same way, and sent here,
//!   through the file decided on, when it may. `sendmsg(2)` is not stopped (the filter cannot
//!   see its address, and stopping every `sendmsg` would cost each stream write that uses it).

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

mod addr;
mod carry;
mod listen;
mod unix;

use addr::{raw_sockaddr, read_memory, read_sockaddr, Sockaddr};

pub use carry::{start_connect, Carry};
pub use listen::{Listening, Publish};

/// Where a refused connection was going.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dest {
    /// An Internet address.
    Inet(SocketAddr),
    /// A Unix socket's path, as the caller named it.
    Unix(PathBuf),
}

/// A direct connection the floor refused.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub dest: Dest,
    /// The calling thread's process (thread group) id.
    pub pid: i32,
    pub why: &'static str,
}

/// What the bridge did, for the run's summary.
#[derive(Debug, Default)]
pub struct Counts {
    /// Connections carried to this machine's loopback.
    pub bridged: AtomicU64,
    /// Direct connections refused.
    pub refused: AtomicU64,
}

/// Which process opened each connection to the proxy, by its local port (for the proxy's
/// events).
pub type Askers = Arc<Mutex<HashMap<u16, i32>>>;

/// How the bridge answers.
pub struct Bridge {
    /// Whether loopback TCP reaches this machine's services.
    pub loopback: bool,
    /// The proxy's port in the namespace, and where its callers are noted.
    pub proxy_port: u16,
    pub askers: Askers,
    pub counts: Arc<Counts>,
    /// Told of each refusal to a new destination.
    pub report: Box<dyn Fn(Refusal) + Send>,
    /// Path sockets the tree may connect to although nothing of it bound them: a path, or a
    /// directory and everything beneath.
    pub unix_allow: Vec<PathBuf>,
    /// Where the tree's listeners are told, to be published on this machine's loopback;
    /// `None`: they stay inside its namespace.
    pub publish: Option<Publish>,
    /// The names the tree's resolver gave addresses to, and where a connection to one is
    /// handed (`None`: refused, there is no resolver).
    pub names: Arc<crate::floor::names::Names>,
    pub carry: Option<Box<dyn Fn(Carry) + Send>>,
    /// Which process asks the tree's resolver, by the UDP port it asks from.
    pub dns_askers: Askers,
}

impl Bridge {
    /// Answers the notifications of `listener` on a thread of its own, until the tree is gone.
    pub fn spawn(self, listener: OwnedFd) -> io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("ahp-wrap-net".into())
            .spawn(move || self.serve(listener))
    }

    fn serve(mut self, listener: OwnedFd) {
        let listener = Arc::new(listener);
        let fd = listener.as_raw_fd();
        let mut seen = HashSet::new();
        loop {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on one fd we own.
            let n = unsafe { libc::poll(&mut pfd, 1, -1) };
            if n < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if pfd.revents & libc::POLLIN == 0 {
                // POLLHUP: no process uses the filter any more.
                return;
            }
            // SAFETY: the kernel fills a zeroed seccomp_notif.
            let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            let r = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) };
            if r != 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                    _ => return,
                }
            }
            let answer = self.answer(&listener, &req, &mut seen);
            let mut resp = libc::seccomp_notif_resp {
                id: req.id,
                val: 0,
                error: 0,
                flags: 0,
            };
            match answer {
                SyscallReply::Continue => {
                    resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
                }
                SyscallReply::Done => {}
                SyscallReply::Value(v) => resp.val = v,
                SyscallReply::Error(e) => resp.error = -e,
                SyscallReply::Later => continue,
            }
            // SAFETY: a response to the notification we received; ENOENT (the caller is
            // gone) needs nothing.
            unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut resp) };
        }
    }

    fn answer(
        &mut self,
        notify: &Arc<OwnedFd>,
        req: &libc::seccomp_notif,
        seen: &mut HashSet<Dest>,
    ) -> SyscallReply {
        let listener = notify.as_raw_fd();
        let tid = req.pid as i32;
        if i64::from(req.data.nr) == libc::SYS_sendto {
            let a = &req.data.args;
            return match read_sockaddr(tid, a[4], a[5] as usize) {
                Some(Sockaddr::Unix(path)) => {
                    let data = Datagram {
                        fd: a[0] as i32,
                        buf: a[1],
                        len: a[2] as usize,
                        flags: a[3] as i32,
                    };
                    self.unix_send(tid, path, data, seen)
                }
                Some(Sockaddr::Inet(addr))
                    if crate::floor::names::is_given(crate::floor::hosts::canonical(addr.ip())) =>
                {
                    self.refuse(
                        addr,
                        tid,
                        seen,
                        "a datagram (or a TCP Fast Open) to a name's address (only TCP \
                         connections to a name are carried out)",
                    )
                }
                Some(Sockaddr::Inet(addr))
                    if addr.port() == 53
                        && crate::floor::hosts::canonical(addr.ip()).is_loopback() =>
                {
                    self.note_resolver_asker(tid, a[0] as i32, addr);
                    SyscallReply::Continue
                }
                // A datagram (or a TCP Fast Open) to the outside: it would find no route;
                // refused here instead, so that it is an audited decision with its process.
                Some(Sockaddr::Inet(addr))
                    if !crate::floor::hosts::canonical(addr.ip()).is_loopback()
                        && !addr.ip().is_unspecified() =>
                {
                    self.refuse(
                        addr,
                        tid,
                        seen,
                        "a datagram to the outside (only TCP leaves the tree, by name or \
                         through the proxy)",
                    )
                }
                // Anything else stays inside the namespace.
                _ => SyscallReply::Continue,
            };
        }
        if i64::from(req.data.nr) == libc::SYS_listen {
            let (fd, backlog) = (req.data.args[0] as i32, req.data.args[1] as i32);
            return self.listen(tid, fd, backlog, (notify, req.id));
        }
        if i64::from(req.data.nr) != libc::SYS_connect {
            return SyscallReply::Continue;
        }
        let (fd, ptr, len) = (req.data.args[0] as i32, req.data.args[1], req.data.args[2]);
        let addr = match read_sockaddr(tid, ptr, len as usize) {
            Some(Sockaddr::Inet(addr)) => addr,
            Some(Sockaddr::Unix(path)) => return self.unix(fd, tid, path, seen),
            // An abstract Unix socket (the namespace's own), netlink, …, or unreadable: the
            // kernel does it, inside the namespace.
            None => return SyscallReply::Continue,
        };
        let ip = crate::floor::hosts::canonical(addr.ip());
        if crate::floor::names::is_given(ip) {
            return match self.names.name_of(ip) {
                Some(name) => self.carry(tid, fd, (name, addr.port()), (notify, req.id)),
                None => self.refuse(
                    addr,
                    tid,
                    seen,
                    "an address the tree's resolver never gave out",
                ),
            };
        }
        // Connecting to 0.0.0.0 or :: reaches loopback.
        let addr = match ip {
            IpAddr::V4(v4) if v4.is_unspecified() => {
                SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port())
            }
            IpAddr::V6(v6) if v6.is_unspecified() => {
                SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port())
            }
            _ => addr,
        };
        if !addr.ip().is_loopback() && !ip.is_loopback() {
            return self.refuse(
                addr,
                tid,
                seen,
                "a direct connection to an address (the tree reaches the outside by name or through the proxy)",
            );
        }
        let theirs = match their_fd(tid, fd) {
            Ok(t) => t,
            Err(e) => return SyscallReply::Error(e.raw_os_error().unwrap_or(libc::EACCES)),
        };
        if sockopt(&theirs, libc::SOL_SOCKET, libc::SO_TYPE) != Some(libc::SOCK_STREAM) {
            // UDP and the rest stay inside the namespace (a resolver's question to the
            // tree's own is noted, for its refusals).
            if addr.port() == 53 {
                note_asker(&theirs, addr, tid, &self.dns_askers);
            }
            return SyscallReply::Continue;
        }
        if addr.port() == self.proxy_port {
            note_asker(&theirs, addr, tid, &self.askers);
        }
        // Inside the namespace first: the proxy, or a server the tree runs itself.
        match connect_inside(&theirs, addr) {
            Ok(()) => return SyscallReply::Done,
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
            Err(e) => return SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
        }
        if addr.port() == 53 {
            return self.refuse(
                addr,
                tid,
                seen,
                "DNS on loopback (names are resolved by the proxy)",
            );
        }
        if !self.loopback {
            return self.refuse(
                addr,
                tid,
                seen,
                "loopback is closed ([floor.net] loopback = false)",
            );
        }
        match bridge(listener, req.id, tid, fd, addr, &theirs) {
            Ok(()) => {
                self.counts.bridged.fetch_add(1, Ordering::Relaxed);
                SyscallReply::Done
            }
            Err(e) => SyscallReply::Error(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
        }
    }

    /// Notes which process sends a datagram to port 53 of loopback on its socket `fd`.
    fn note_resolver_asker(&self, tid: i32, fd: i32, addr: SocketAddr) {
        if let Ok(theirs) = their_fd(tid, fd) {
            note_asker(&theirs, addr, tid, &self.dns_askers);
        }
    }

    fn refuse(
        &self,
        dest: impl Into<Dest>,
        tid: i32,
        seen: &mut HashSet<Dest>,
        why: &'static str,
    ) -> SyscallReply {
        let dest = dest.into();
        self.counts.refused.fetch_add(1, Ordering::Relaxed);
        if seen.len() < 4096 && seen.insert(dest.clone()) {
            (self.report)(Refusal {
                dest,
                pid: thread_group(tid).unwrap_or(tid),
                why,
            });
        }
        SyscallReply::Error(libc::EACCES)
    }
}

impl From<SocketAddr> for Dest {
    fn from(addr: SocketAddr) -> Dest {
        Dest::Inet(addr)
    }
}

/// Binds a socket about to reach the proxy or the resolver (at `addr`) to a port of its own
/// first, if it has none, and notes in `askers` which process it is, for their events.
fn note_asker(sock: &OwnedFd, addr: SocketAddr, tid: i32, askers: &Askers) {
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
fn connect_blocking(
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

enum SyscallReply {
    /// The kernel carries the call out (inside the namespace).
    Continue,
    /// Answered with success.
    Done,
    /// Answered with this errno.
    Error(i32),
    /// Answered with this return value (bytes sent).
    Value(i64),
    /// Answered later, by another thread (see [`Answer`]).
    Later,
}

/// The answer to a stopped call given by another thread, when it is dropped: success, or
/// the error set.
#[derive(Debug)]
pub struct Answer {
    notify: Arc<OwnedFd>,
    id: u64,
    /// The errno to answer with (0: success).
    error: i32,
}

impl Answer {
    fn new(notify: &Arc<OwnedFd>, id: u64) -> Answer {
        Answer {
            notify: notify.clone(),
            id,
            error: 0,
        }
    }

    /// Answers with `errno` instead of success.
    pub fn fail(mut self, errno: i32) {
        self.error = errno;
    }

    /// Puts `socket` in place of the caller's descriptor `fd` (close-on-exec as `cloexec`
    /// says), before the answer.
    fn install(&self, socket: &impl AsRawFd, fd: i32, cloexec: bool) -> io::Result<()> {
        let addfd = libc::seccomp_notif_addfd {
            id: self.id,
            flags: libc::SECCOMP_ADDFD_FLAG_SETFD as u32,
            srcfd: socket.as_raw_fd() as u32,
            newfd: fd as u32,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: installs our socket at `fd` in the caller, for the notification `id`.
        let r = unsafe {
            libc::ioctl(
                self.notify.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD as _,
                &addfd,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        let mut resp = libc::seccomp_notif_resp {
            id: self.id,
            val: 0,
            error: -self.error,
            flags: 0,
        };
        // SAFETY: a response to a notification the bridge received and left to us; ENOENT
        // (the caller is gone) needs nothing.
        unsafe {
            libc::ioctl(
                self.notify.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND as _,
                &mut resp,
            )
        };
    }
}

/// A `sendto(2)`'s arguments but its address.
struct Datagram {
    fd: i32,
    /// Where its bytes lie in the caller's memory.
    buf: u64,
    len: usize,
    flags: i32,
}

/// Connects `tid`'s own socket (shared with us) to `addr` inside its namespace, blocking for
/// the while (a loopback connection is made or refused at once).
fn connect_inside(sock: &OwnedFd, addr: SocketAddr) -> io::Result<()> {
    let (raw, len) = raw_sockaddr(addr);
    connect_blocking(sock, (&raw const raw).cast(), len)
}

/// `tid`'s thread group id.
fn thread_group(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Connects to `addr` from the wrapper's namespace and puts the socket in place of `tid`'s
/// stream socket `fd` (`theirs`).
fn bridge(
    listener: RawFd,
    id: u64,
    tid: i32,
    fd: i32,
    addr: SocketAddr,
    theirs: &OwnedFd,
) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    let status = unsafe { libc::fcntl(theirs.as_raw_fd(), libc::F_GETFL) };
    let nonblocking = status >= 0 && status & libc::O_NONBLOCK != 0;
    let stream = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))?;
    let _ = stream.set_nodelay(nodelay(theirs));
    stream.set_nonblocking(nonblocking)?;
    let cloexec = fd_cloexec(tid, fd);
    let addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SETFD as u32,
        srcfd: stream.as_raw_fd() as u32,
        newfd: fd as u32,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: installs our socket at `fd` in the caller, for the notification `id`.
    let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD as _, &addfd) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A copy of `tid`'s descriptor `fd` (pidfd_getfd).
fn their_fd(tid: i32, fd: i32) -> io::Result<OwnedFd> {
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

fn nodelay(sock: &OwnedFd) -> bool {
    sockopt(sock, libc::IPPROTO_TCP, libc::TCP_NODELAY).is_some_and(|v| v != 0)
}

/// An integer socket option of `sock`.
fn sockopt(sock: &OwnedFd, level: libc::c_int, name: libc::c_int) -> Option<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int we own.
    let r =
        unsafe { libc::getsockopt(sock.as_raw_fd(), level, name, (&raw mut v).cast(), &mut len) };
    (r == 0).then_some(v)
}

/// Whether `tid`'s `fd` is close-on-exec (its fdinfo's flags).
fn fd_cloexec(tid: i32, fd: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{tid}/fdinfo/{fd}"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|v| i64::from_str_radix(v.trim(), 8).ok())
        })
        .is_some_and(|flags| flags & i64::from(libc::O_CLOEXEC) != 0)
}
