//! The agent's user and network namespaces, made ahead of it: creating a network namespace is
//! the dearest step of a start (about 0.35 ms of kernel work, 0.45 ms with the user namespace),
//! and the agent's process used to take it between `fork` and `exec`, while the wrapper
//! waited. Made at start-up instead, by a process the guardian starts (on the other processor,
//! while the wrapper prepares the run), the agent's process only joins them (`setns`) and
//! makes its mount namespace.
//!
//! The maker sends the two namespaces back as descriptors (`/proc/self/ns/user` and
//! `/proc/self/ns/net`, over a socket pair) and exits: the descriptors keep them alive, and
//! no process but the agent's tree ever lives in them. The maker does what the agent's
//! process did: the same uid and gid mapped to themselves, `setgroups` denied, loopback up.
//! When anything fails, the maker says why and the agent's process makes its namespaces
//! itself, as before (and says so, should that fail too).

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::kernel::fail;
use super::namespaces::{id_map, write_file};

/// The argument that tells the guardian to make the namespaces first (its standard output
/// is then the maker's socket).
pub const MAKE_NAMESPACES_ARG: &str = "namespaces";

/// The longest the wrapper waits for the namespaces when it needs them (they are made in
/// under a millisecond, while the wrapper prepares the run for longer than that).
const WAIT: Duration = Duration::from_secs(2);

/// The wrapper's end: where the namespaces arrive.
#[derive(Debug)]
pub struct NamespaceReceiver {
    socket: UnixStream,
}

/// The maker's end, for the process that starts it (the guardian).
#[derive(Debug)]
pub struct NamespaceMaker {
    socket: UnixStream,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// A user namespace and a network namespace (with loopback up) made for the agent to join.
#[derive(Debug)]
pub(crate) struct NamespaceFds {
    pub user: OwnedFd,
    pub net: OwnedFd,
}

/// The two ends, when the run may use namespaces (the floor on, and this system allowing
/// unprivileged user namespaces); `None` otherwise.
pub fn wanted(floor: super::Mode) -> Option<(NamespaceReceiver, NamespaceMaker)> {
    if floor == super::Mode::Off || super::kernel::namespaces_possible().is_err() {
        return None;
    }
    let (ours, theirs) = UnixStream::pair().ok()?;
    Some((
        NamespaceReceiver { socket: ours },
        NamespaceMaker::new(theirs.into()),
    ))
}

impl NamespaceMaker {
    /// The maker's end of the socket pair [`wanted`] made, in the process that starts the
    /// maker (the guardian, which got it as its standard output).
    pub(crate) fn new(socket: OwnedFd) -> NamespaceMaker {
        NamespaceMaker {
            socket: socket.into(),
            uid_map: id_map(nix::unistd::geteuid().as_raw()),
            gid_map: id_map(nix::unistd::getegid().as_raw()),
        }
    }

    /// The maker's end in the guardian, whose standard output the wrapper made the maker's
    /// socket; that descriptor is the maker's from then on (closed when the maker is done).
    pub fn from_stdout() -> NamespaceMaker {
        use std::os::fd::FromRawFd;
        // SAFETY: our standard output is the maker's socket (the wrapper set it so), and
        // nothing else in the guardian uses descriptor 1.
        NamespaceMaker::new(unsafe { OwnedFd::from_raw_fd(1) })
    }

    /// The socket, to hand to the process that will start the maker.
    pub fn into_socket(self) -> OwnedFd {
        self.socket.into()
    }

    /// Starts the maker and waits for it. Call it in a single-threaded process (the
    /// guardian, first thing). The maker shares this process's memory and runs while
    /// this process waits ([`vfork`](crate::vfork)): no page tables copied.
    pub fn make(self) {
        let mut maker = || match self.in_child() {
            Ok(()) => 0,
            Err(_) => 1,
        };
        // SAFETY: the maker makes only system calls on what `self` holds (no allocation)
        // and exits.
        if let Ok(pid) = unsafe { crate::vfork::run(&mut maker) } {
            let mut status = 0;
            // SAFETY: reaps the child just started.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
    }

    /// In the maker: the namespaces, then their descriptors sent to the wrapper; or,
    /// when a step fails, its name and the error number.
    fn in_child(&self) -> std::io::Result<()> {
        let socket = self.socket.as_raw_fd();
        let step = |what: &'static [u8]| {
            move |e: std::io::Error| {
                say_failure(socket, what, &e);
                e
            }
        };
        let last = std::io::Error::last_os_error;
        // SAFETY: plain system calls on values we own; nothing allocates.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                return Err(step(b"unshare")(last()));
            }
            write_file(c"/proc/self/setgroups", b"deny").map_err(step(b"setgroups"))?;
            write_file(c"/proc/self/uid_map", &self.uid_map).map_err(step(b"uid_map"))?;
            write_file(c"/proc/self/gid_map", &self.gid_map).map_err(step(b"gid_map"))?;
            super::netns::set_loopback_up().map_err(step(b"loopback"))?;
            let user = libc::open(
                c"/proc/self/ns/user".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            let net = libc::open(
                c"/proc/self/ns/net".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            if user < 0 || net < 0 {
                return Err(step(b"open /proc/self/ns")(last()));
            }
            super::netns::send_fds(socket, &[user, net]).map_err(step(b"send"))
        }
    }
}

/// Tells the wrapper which step failed and why: the error number (4 bytes, little-endian),
/// then the step's name, in one message from a stack buffer (no allocation).
fn say_failure(socket: std::os::fd::RawFd, step: &[u8], e: &std::io::Error) {
    let mut why = [0u8; 64];
    let n = (4 + step.len()).min(why.len());
    why[..4].copy_from_slice(&e.raw_os_error().unwrap_or(0).to_le_bytes());
    why[4..n].copy_from_slice(&step[..n - 4]);
    // SAFETY: a write of our own buffer.
    unsafe { libc::write(socket, why.as_ptr().cast(), n) };
}

impl NamespaceReceiver {
    /// The namespaces, once made; or why there are none (the agent's process then makes its
    /// own).
    pub(crate) fn take(self) -> Result<NamespaceFds, String> {
        self.socket
            .set_read_timeout(Some(WAIT))
            .map_err(|e| e.to_string())?;
        let mut text = [0u8; 64];
        let (n, fds) = super::netns::receive_fds(self.socket.as_raw_fd(), &mut text, 0)
            .map_err(|e| format!("no namespaces made premade: {e}"))?;
        match <[OwnedFd; 2]>::try_from(fds) {
            Ok([user, net]) => Ok(NamespaceFds { user, net }),
            Err(_) if n < 4 => Err("the namespaces' maker ended without a word".into()),
            Err(_) => {
                let code = i32::from_le_bytes([text[0], text[1], text[2], text[3]]);
                Err(format!(
                    "the namespaces' maker failed at {}: {}",
                    String::from_utf8_lossy(&text[4..n]),
                    std::io::Error::from_raw_os_error(code)
                ))
            }
        }
    }
}

impl NamespaceFds {
    /// In the agent's process: joins the user namespace, then the network namespace.
    ///
    /// # Safety
    /// For a pre-exec step: no allocation.
    pub(super) unsafe fn join(&self) -> std::io::Result<()> {
        if libc::setns(self.user.as_raw_fd(), libc::CLONE_NEWUSER) != 0 {
            return fail(b"ahp-wrap: floor: cannot join the user namespace made for the agent\n");
        }
        if libc::setns(self.net.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
            return fail(
                b"ahp-wrap: floor: cannot join the network namespace made for the agent\n",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_makers_failure_reaches_the_wrapper_with_its_step_and_error() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let error = std::io::Error::from_raw_os_error(libc::EPERM);
        say_failure(theirs.as_raw_fd(), b"uid_map", &error);
        let why = NamespaceReceiver { socket: ours }.take().unwrap_err();
        assert!(why.contains("failed at uid_map"), "{why}");
        assert!(why.contains(&error.to_string()), "{why}");
    }

    #[test]
    fn a_maker_that_ends_without_a_word_is_said() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        drop(theirs);
        let why = NamespaceReceiver { socket: ours }.take().unwrap_err();
        assert!(why.contains("without a word"), "{why}");
    }
}
