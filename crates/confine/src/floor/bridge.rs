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
//!   reaches only its own, connected here on the caller's socket with the address as read
//!   (handed back to the kernel, it would be read again, and another thread could have made
//!   it a path by then); a socket connected here is bound to a name that says whom it
//!   stands for, since the kernel vouches for the wrapper (`ahp_wrap_process::fds::caller_named`);
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
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

mod addr;
mod answer;
mod carry;
mod host;
mod listen;
mod socket;
mod unix;

use addr::{raw_sockaddr, read_memory, read_sockaddr, Sockaddr};
use answer::{add_fd, respond, SyscallReply};
use socket::{
    connect_blocking, connect_inside, fd_cloexec, nodelay, note_asker, sockopt, their_fd,
    thread_group,
};

pub(crate) use answer::Answer;
pub use carry::{start_connect, Carry};
pub use host::HostNet;
pub use listen::{Listening, Publish};

/// Where a refused connection was going.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dest {
    /// An Internet address.
    Inet(SocketAddr),
    /// A Unix socket's path, as the caller named it.
    Unix(PathBuf),
    /// No destination yet: a socket of a kind refused without a network namespace (its
    /// family and type, as a person reads them).
    Socket(String),
}

/// A direct connection the floor refused.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// Where it was going (loopback already put for `0.0.0.0` or `::`).
    pub dest: Dest,
    /// The calling thread's process (thread group) id.
    pub pid: i32,
    /// Why the floor refused it, as a phrase for the person (e.g. "loopback is closed").
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
    /// The ports of this machine's loopback carried at once; a connection to any other is
    /// handed to the run to be decided (`carry`), as one to a name is.
    pub loopback_ports: Vec<u16>,
    /// The proxy's port in the namespace, and where its callers are noted.
    pub proxy_port: u16,
    /// Where the process behind each connection to the proxy is noted, by its local port.
    pub askers: Askers,
    /// Running totals of bridged and refused connections, shared with the run.
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
    /// handed, to be decided and made.
    pub names: Arc<crate::floor::names::Names>,
    /// Given each stream connection to a name's address, to decide and answer; the caller
    /// waits in `connect` until it does.
    pub carry: Box<dyn Fn(Carry) + Send>,
    /// Which process asks the tree's resolver, by the UDP port it asks from.
    pub dns_askers: Askers,
    /// The tree has no network namespace of its own: what the bridge asks of the run then
    /// (see `host`); `None` with one.
    pub host: Option<HostNet>,
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
            let reply = self.answer(&listener, &req, &mut seen);
            respond(fd, req.id, reply);
        }
    }

    fn answer(
        &mut self,
        notify: &Arc<OwnedFd>,
        req: &libc::seccomp_notif,
        seen: &mut HashSet<Dest>,
    ) -> SyscallReply {
        if self.host.is_some() {
            return self.answer_host(notify, req, seen);
        }
        let listener = notify.as_raw_fd();
        let tid = req.pid as i32;
        if i64::from(req.data.nr) == libc::SYS_sendto {
            let a = &req.data.args;
            return match read_sockaddr(tid, a[4], a[5] as usize) {
                Some(Sockaddr::Unix(path)) => {
                    let data = Datagram::of(a);
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
                // An abstract socket (the namespace's own), netlink: sent here as read.
                Some(Sockaddr::Other(raw)) => {
                    let data = Datagram::of(a);
                    self.as_read(tid, a[0] as i32, &raw, Some(data))
                }
                None => SyscallReply::Error(libc::EFAULT),
                // Anything else stays inside the namespace (an Internet socket cannot be
                // made to send to a path).
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
            Some(Sockaddr::Unix(path)) => return self.unix(fd, tid, path, seen, (notify, req.id)),
            // An abstract Unix socket (the namespace's own), netlink, …: made here, inside
            // the namespace (the caller's socket is of it), as read.
            Some(Sockaddr::Other(raw)) => return self.as_read(tid, fd, &raw, None),
            None => return SyscallReply::Error(libc::EFAULT),
        };
        let ip = crate::floor::hosts::canonical(addr.ip());
        if crate::floor::names::is_given(ip) {
            return match self.names.name_of(ip) {
                Some(name) => self.carry(tid, fd, (name, addr.port(), None), (notify, req.id)),
                None => self.refuse(
                    addr,
                    tid,
                    seen,
                    "an address the tree's resolver never gave out",
                ),
            };
        }
        let addr = reached(addr);
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
        match self.loopback_rule(addr.port()) {
            Loopback::Refused(why) => return self.refuse(addr, tid, seen, why),
            Loopback::Decided => {
                let ip = addr.ip().to_string();
                return self.carry(tid, fd, (ip, addr.port(), Some(addr)), (notify, req.id));
            }
            Loopback::Named => {}
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

/// What the rules of loopback say of a TCP connection to a port of this machine's loopback
/// that neither the proxy nor the tree serves.
enum Loopback {
    /// Refused, and why.
    Refused(&'static str),
    /// A port no rule names (a debugger, a database, an admin port of the person's):
    /// decided by the run, as a connection to a name is.
    Decided,
    /// A port the rules name: carried at once.
    Named,
}

impl Bridge {
    fn loopback_rule(&self, port: u16) -> Loopback {
        if port == 53 {
            return Loopback::Refused("DNS on loopback (names are resolved by the proxy)");
        }
        if !self.loopback {
            return Loopback::Refused("loopback is closed ([floor.net] loopback = false)");
        }
        match self.loopback_ports.contains(&port) {
            true => Loopback::Named,
            false => Loopback::Decided,
        }
    }
}

/// Where a connection to `addr` goes: to `0.0.0.0` or `::`, loopback.
fn reached(addr: SocketAddr) -> SocketAddr {
    match crate::floor::hosts::canonical(addr.ip()) {
        IpAddr::V4(v4) if v4.is_unspecified() => {
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port())
        }
        IpAddr::V6(v6) if v6.is_unspecified() => {
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port())
        }
        _ => addr,
    }
}

impl From<SocketAddr> for Dest {
    fn from(addr: SocketAddr) -> Dest {
        Dest::Inet(addr)
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

impl Datagram {
    /// Of a stopped `sendto(2)`'s arguments.
    fn of(a: &[u64; 6]) -> Datagram {
        Datagram {
            fd: a[0] as i32,
            buf: a[1],
            len: a[2] as usize,
            flags: a[3] as i32,
        }
    }
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
    add_fd(listener, id, &stream, fd, fd_cloexec(tid, fd))
}
