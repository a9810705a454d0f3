//! Listeners of the tree: a TCP socket of the tree that listens on its loopback (or on every
//! address of its namespace, which has only loopback) is told to the run, which publishes it
//! on the user's loopback through the porter (see [`Porter`]).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use super::{sockopt, their_fd, thread_group, Answer, Bridge, SyscallReply};
use crate::floor::porter::Porter;
use crate::floor::Unavailable;

/// A listener of the tree, as the bridge saw it made.
#[derive(Debug)]
pub struct Listening {
    /// Where it listens, in the tree's namespace (a loopback or unspecified address).
    pub addr: SocketAddr,
    /// The listening process.
    pub pid: i32,
    /// The porter that makes sockets in the tree's namespace, or why there is none.
    pub porter: Result<Arc<Porter>, Unavailable>,
    /// The listening process's `listen(2)`, answered (success) when this is dropped: once
    /// the listener is published, or not. Held for that drop only: never read.
    _answer: Answer,
}

/// What the bridge needs to publish listeners.
pub struct Publish {
    /// The program a porter runs as.
    program: PathBuf,
    /// Told the porter's pid as soon as it runs.
    register: fn(i32),
    /// Told of each listener, on the bridge's thread.
    tell: Box<dyn Fn(Listening) + Send>,
    /// The run's porter, started at the first listener.
    porter: Option<Result<Arc<Porter>, Unavailable>>,
    /// The tree's network namespace (its cookie): a listener in a namespace nested in it
    /// (a wrapper started inside the tree) is that wrapper's to publish.
    tree: Option<u64>,
}

/// `SO_NETNS_COOKIE` (Linux 5.14): the network namespace a socket belongs to.
const SO_NETNS_COOKIE: libc::c_int = 71;

/// The cookie of the network namespace `socket` belongs to, where the kernel says it.
pub(super) fn netns_cookie(socket: &impl AsRawFd) -> Option<u64> {
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: getsockopt into a u64 we own.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&raw mut v).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

impl Publish {
    /// `tree`: a socket of the tree's network namespace (the proxy's), to tell its listeners
    /// from those of a namespace nested in it.
    pub fn new(
        program: PathBuf,
        register: fn(i32),
        tree: &impl AsRawFd,
        tell: Box<dyn Fn(Listening) + Send>,
    ) -> Publish {
        Publish {
            tree: netns_cookie(tree),
            program,
            register,
            tell,
            porter: None,
        }
    }

    fn porter(&mut self, tid: i32) -> Result<Arc<Porter>, Unavailable> {
        let (program, register) = (&self.program, self.register);
        self.porter
            .get_or_insert_with(|| {
                Porter::start(program, tid, register)
                    .map(Arc::new)
                    .map_err(|e| Unavailable::Porter {
                        program: program.to_owned(),
                        source: e,
                    })
            })
            .clone()
    }
}

impl Bridge {
    /// `listen(2)` on the caller's socket `fd`. It is done here, on the caller's own socket
    /// (the same call on the same socket), so that the port is known once it returns (an
    /// unbound socket gets one now); a TCP listener on the tree's loopback is then told to
    /// the run, which answers the caller once the port is published (a login that prints its
    /// callback's address once it listens finds it reachable). Anything else is the kernel's
    /// to do.
    pub(super) fn listen(
        &mut self,
        tid: i32,
        fd: i32,
        backlog: i32,
        (notify, id): (&Arc<OwnedFd>, u64),
    ) -> SyscallReply {
        let Some(publish) = self.publish.as_mut() else {
            return SyscallReply::Continue;
        };
        let Ok(theirs) = their_fd(tid, fd) else {
            return SyscallReply::Continue;
        };
        let inet = matches!(
            sockopt(&theirs, libc::SOL_SOCKET, libc::SO_DOMAIN),
            Some(libc::AF_INET | libc::AF_INET6)
        );
        if !inet || sockopt(&theirs, libc::SOL_SOCKET, libc::SO_TYPE) != Some(libc::SOCK_STREAM) {
            return SyscallReply::Continue;
        }
        // A listener of a namespace nested in the tree's is its own wrapper's to publish.
        if publish.tree.is_some() && netns_cookie(&theirs) != publish.tree {
            return SyscallReply::Continue;
        }
        // SAFETY: listen on a socket we hold (the caller's, shared).
        if unsafe { libc::listen(theirs.as_raw_fd(), backlog) } != 0 {
            let e = std::io::Error::last_os_error();
            return SyscallReply::Error(e.raw_os_error().unwrap_or(libc::EINVAL));
        }
        // Our copy is closed once read: the caller's socket stays the only one.
        let Ok(addr) = std::net::TcpListener::from(theirs).local_addr() else {
            return SyscallReply::Value(0);
        };
        let ip = crate::floor::hosts::canonical(addr.ip());
        if ip.is_loopback() || ip.is_unspecified() {
            let porter = publish.porter(tid);
            (publish.tell)(Listening {
                addr,
                pid: thread_group(tid).unwrap_or(tid),
                porter,
                _answer: Answer::new(notify, id),
            });
            return SyscallReply::Later;
        }
        SyscallReply::Value(0)
    }
}
