//! The porter: a small process of the wrapper's that lives in the tree's user and network
//! namespaces and makes TCP sockets there on request. A socket belongs to the network
//! namespace it was made in for its whole life, wherever its descriptor goes; the wrapper
//! cannot enter the tree's namespace itself (`setns` into a network namespace asks for a
//! capability in the caller's own user namespace, which an unprivileged wrapper lacks). With
//! a socket the porter made, the wrapper connects to a server of the tree from its own
//! process: that is how a listener of the tree is published on the user's loopback.
//!
//! Started the first time a process of the tree listens (nothing at start-up): the wrapper's
//! small executable, `porter` its argument, joins the namespaces of that process (their
//! descriptors on 3 and 4) before its `exec`, and serves on its standard input, a Unix socket
//! pair whose other end the wrapper holds. One byte asks (`4` or `6`: the address family),
//! one descriptor answers (`d`: a socket-diagnostics socket, to read what the tree listens on). When the wrapper's end closes (the run ended, or the wrapper was
//! killed), the porter reads the end of the stream and exits. It is not in the tree's
//! Landlock domain, so no process of the tree may trace or (with Landlock's signal scope)
//! signal it; it holds nothing but its socket.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

/// `NS_GET_USERNS` (`_IO(0xb7, 0x1)`): the user namespace owning a namespace.
const NS_GET_USERNS: libc::c_ulong = 0xb701;

/// The argument that makes the small executable (or the wrapper) a porter.
pub const PORTER_ARG: &str = "porter";

/// The wrapper's handle on its porter.
#[derive(Debug)]
pub struct Porter {
    channel: Mutex<UnixStream>,
    pid: i32,
}

impl Porter {
    /// Starts a porter in the user and network namespaces of the process `tid` (a process of
    /// the tree, stopped in a system call while this runs), as `program porter`. The new
    /// process shares our memory until its `exec` ([`crate::vfork`]): nothing of the
    /// wrapper is copied. `register` is told its pid at once (the wrapper's children that are
    /// not the agent's are recorded as such).
    pub(crate) fn start(program: &Path, tid: i32, register: fn(i32)) -> io::Result<Porter> {
        use std::os::unix::ffi::OsStrExt;
        let open = |ns: &str| -> io::Result<OwnedFd> {
            Ok(std::fs::File::open(format!("/proc/{tid}/ns/{ns}"))?.into())
        };
        // The user namespace that owns the network namespace, not the process's own: a
        // tree whose mounts are sealed lives in a user namespace nested in the floor's, which
        // has no capability over the network namespace.
        let net = open("net")?;
        // SAFETY: an ioctl on a descriptor we hold; a new descriptor is returned.
        let user = unsafe { libc::ioctl(net.as_raw_fd(), NS_GET_USERNS) };
        let user = match user {
            // SAFETY: the ioctl's new descriptor, owned by nothing else.
            fd if fd >= 0 => unsafe { OwnedFd::from_raw_fd(fd) },
            _ => open("user")?,
        };
        let (ours, theirs) = UnixStream::pair()?;
        let path = CString::new(program.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?;
        let arg = CString::new(PORTER_ARG).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an argument")
        })?;
        let argv = [path.as_ptr(), arg.as_ptr(), std::ptr::null()];
        let env: [*const libc::c_char; 1] = [std::ptr::null()];
        let (user_fd, net_fd, channel) = (user.as_raw_fd(), net.as_raw_fd(), theirs.as_raw_fd());
        let error = AtomicI32::new(0);
        let mut child = || {
            // SAFETY: system calls only, on what was made above; no allocation. The user
            // namespace first: it gives the capability joining the network namespace asks.
            unsafe {
                crate::vfork::defaults_for_handled_signals();
                let failed = (|| -> io::Error {
                    if libc::setns(user_fd, libc::CLONE_NEWUSER) != 0
                        || libc::setns(net_fd, libc::CLONE_NEWNET) != 0
                        || libc::dup2(channel, 0) < 0
                    {
                        return io::Error::last_os_error();
                    }
                    let none: libc::sigset_t = std::mem::zeroed();
                    libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                    libc::execve(path.as_ptr(), argv.as_ptr(), env.as_ptr());
                    io::Error::last_os_error()
                })();
                error.store(
                    failed.raw_os_error().unwrap_or(libc::EINVAL),
                    Ordering::Relaxed,
                );
                127
            }
        };
        // SAFETY: the function above makes system calls only, and ends in `exec` or a return.
        let pid = unsafe { crate::vfork::run(&mut child) }?;
        register(pid);
        drop((user, net, theirs));
        let porter = Porter {
            channel: Mutex::new(ours),
            pid,
        };
        match error.load(Ordering::Relaxed) {
            0 => Ok(porter),
            // It has exited; dropping the handle reaps it.
            code => Err(io::Error::from_raw_os_error(code)),
        }
    }

    /// A new TCP socket of the tree's network namespace (IPv6 when `v6`), close-on-exec.
    pub fn socket(&self, v6: bool) -> io::Result<OwnedFd> {
        self.ask(if v6 { b'6' } else { b'4' })
    }

    /// The socket that `kind` asks for.
    fn ask(&self, kind: u8) -> io::Result<OwnedFd> {
        use std::io::Write;
        let mut channel = self
            .channel
            .lock()
            .map_err(|_| io::Error::other("the porter's channel is poisoned"))?;
        channel.write_all(&[kind])?;
        let mut byte = [0u8; 1];
        let (n, fds) = super::sys::receive_fds(channel.as_raw_fd(), &mut byte, 0)?;
        match (n, fds.into_iter().next()) {
            (1, Some(fd)) => Ok(fd),
            (0, _) => Err(io::Error::other("the porter has ended")),
            _ => Err(io::Error::other(format!(
                "the porter could not make a socket (error {})",
                byte[0]
            ))),
        }
    }

    /// A socket-diagnostics socket of the tree's network namespace
    /// ([`ahp_wrap_process::sockets::listeners_through`] reads what the tree listens on with it).
    pub fn diagnostics(&self) -> io::Result<OwnedFd> {
        self.ask(b'd')
    }

    /// The porter's process id (its `/proc/<pid>/net` is the tree's network namespace's).
    pub fn pid(&self) -> i32 {
        self.pid
    }
}

impl Drop for Porter {
    fn drop(&mut self) {
        // Closing our end ends it.
        if let Ok(channel) = self.channel.get_mut() {
            let _ = channel.shutdown(std::net::Shutdown::Both);
        }
        let mut status = 0;
        // SAFETY: reaps our own child, which ends at the end of its stream.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

/// The porter's own loop (in the porter's process): a socket for each byte read, until the
/// end of the stream. Its standard input is the channel.
pub fn serve() -> i32 {
    let channel = 0;
    loop {
        let mut byte = [0u8; 1];
        // SAFETY: a read into our own byte.
        let n = unsafe { libc::read(channel, byte.as_mut_ptr().cast(), 1) };
        if n == 0 {
            return 0;
        }
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return 1;
        }
        let (family, kind, protocol) = match byte[0] {
            b'6' => (libc::AF_INET6, libc::SOCK_STREAM, 0),
            b'd' => (libc::AF_NETLINK, libc::SOCK_DGRAM, libc::NETLINK_SOCK_DIAG),
            _ => (libc::AF_INET, libc::SOCK_STREAM, 0),
        };
        // SAFETY: plain system calls; the socket is closed once sent.
        unsafe {
            let fd = libc::socket(family, kind | libc::SOCK_CLOEXEC, protocol);
            if fd < 0 {
                let code = io::Error::last_os_error().raw_os_error().unwrap_or(1);
                let why = [u8::try_from(code).unwrap_or(1)];
                if libc::write(channel, why.as_ptr().cast(), 1) != 1 {
                    return 1;
                }
                continue;
            }
            let sent = super::sys::send_fds(channel, &[fd]);
            libc::close(fd);
            if sent.is_err() {
                return 1;
            }
        }
    }
}
