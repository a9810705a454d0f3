//! The agent's user and network namespaces, made ahead of it: creating a network namespace is
//! the dearest step of a start (about 0.35 ms of kernel work, 0.45 ms with the user namespace),
//! and the agent's process used to take it between `fork` and `exec`, while the wrapper
//! waited. Made at start-up instead, by a process the guardian starts (on the other processor,
//! while the wrapper prepares the run), the agent's process only joins them (`setns`) and
//! makes its mount namespace.
//!
//! The maker sends the namespaces back as descriptors (`/proc/self/ns/user`,
//! `/proc/self/ns/net` and, with overlays, `/proc/self/ns/mnt`, over a socket pair) and
//! exits: the descriptors keep them alive (the wrapper's, and the guardian's, which shares
//! the maker's table of descriptors and holds them until the wrapper has exited, so that
//! their tear-down is off the run's path), and no process but the agent's tree ever lives
//! in them. The maker does what the agent's process did: the same uid and gid mapped to
//! themselves, `setgroups` denied, loopback up.
//! When anything fails, the maker says why and the agent's process makes its namespaces
//! itself, as before (and says so, should that fail too).
//!
//! The caches' overlays are mounted ahead too: each takes the kernel 0.2–0.6 ms (it checks
//! the overlay's work directory by making a directory, a temporary file and an extended
//! attribute there), four of them most of the agent's start on the floor. The wrapper tells
//! the maker, as soon as it has spawned it, which overlays the run's plan will most likely
//! hold ([`NamespaceReceiver::ask_overlays`]); the maker mounts them in a mount namespace of
//! its own and sends it with the other two. The agent's process joins it when the plan's
//! overlays are those (the usual case), and makes its own as before when they are not (a
//! policy given later that names other caches); a cache whose overlay the maker could not
//! mount is found missing from the agent's mount table after the start, as one the agent's
//! process could not mount was.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::caches::{Laid, Layers};
use super::namespaces::{id_map, make_mounts_private, mount_overlay, write_file, NamespaceFds};
use super::plan::Overlay;
use super::sys::{receive_fds, send_fds};
use super::Unavailable;

/// The argument that tells the guardian to make the namespaces first (its standard output
/// is then the maker's socket).
pub const MAKE_NAMESPACES_ARG: &str = "namespaces";

/// The longest the wrapper waits for the namespaces when it needs them (they are made in
/// under a millisecond, while the wrapper prepares the run for longer than that).
const WAIT: Duration = Duration::from_secs(2);

/// The longest the maker waits for the list of overlays (the wrapper sends it right after
/// spawning the guardian; the guardian guards nothing while its maker waits).
const WAIT_FOR_OVERLAYS_MS: i32 = 1000;

/// The largest list of overlays the maker takes (each cache's mount point, layers and options; a
/// longer list is not mounted ahead).
const MAX_OVERLAYS: usize = 16 * 1024;

/// The wrapper's end: where the namespaces arrive.
#[derive(Debug)]
pub struct NamespaceReceiver {
    socket: UnixStream,
    /// The overlays the maker was asked to mount, and the layers made for them.
    asked: Option<Asked>,
    /// What the maker sent, once received.
    received: Option<Result<NamespaceFds, Unavailable>>,
}

/// The caches' overlays asked of the maker.
#[derive(Debug)]
struct Asked {
    /// The caches, as [`caches_ahead`](super::plan::caches_ahead) found them.
    caches: Vec<std::path::PathBuf>,
    /// Their overlays (until the run takes them).
    overlays: Vec<Overlay>,
    /// The run's directory of layers (until the run takes it).
    layers: Option<Layers>,
    /// Caches left in place (their path cannot be named in an overlay's options).
    gaps: Vec<String>,
}

/// The maker's end, for the process that starts it (the guardian).
#[derive(Debug)]
pub struct NamespaceMaker {
    socket: UnixStream,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// The two ends, when the run may use namespaces (the floor on, and this system allowing
/// unprivileged user namespaces); `None` otherwise.
pub fn wanted(floor: super::Mode) -> Option<(NamespaceReceiver, NamespaceMaker)> {
    if floor == super::Mode::Off || super::apparmor::namespaces_possible().is_err() {
        return None;
    }
    let (ours, theirs) = UnixStream::pair().ok()?;
    Some((
        NamespaceReceiver::new(ours),
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

    /// Starts the maker and waits for it; answers the namespaces it made, which this
    /// process then holds (the guardian, until after the wrapper has exited: the last
    /// holder of a mount namespace takes its mounts down, which then happens off the run's
    /// path). Call it in a single-threaded process (the guardian, first thing). The maker
    /// shares this process's memory and descriptors and runs while this process waits
    /// ([`vfork`](crate::vfork)): no page tables copied.
    pub fn make(self) -> Vec<OwnedFd> {
        let mut held: [libc::c_int; 3] = [-1; 3];
        let mut maker = || match self.in_child(&mut held) {
            Ok(()) => 0,
            Err(_) => 1,
        };
        // SAFETY: the maker makes only system calls on what `self` holds (no allocation)
        // and exits; the descriptors it opens are ours (CLONE_FILES).
        if let Ok(pid) = unsafe { crate::vfork::run_with(&mut maker, libc::CLONE_FILES) } {
            let mut status = 0;
            // SAFETY: reaps the child just started.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
        use std::os::fd::FromRawFd;
        held.iter()
            .filter(|fd| **fd >= 0)
            // SAFETY: descriptors the maker opened in our table, and nothing else holds.
            .map(|fd| unsafe { OwnedFd::from_raw_fd(*fd) })
            .collect()
    }

    /// In the maker: the namespaces, then their descriptors sent to the wrapper (and left
    /// open, in `held`); or, when a step fails, its name and the error number.
    fn in_child(&self, held: &mut [libc::c_int; 3]) -> std::io::Result<()> {
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
            held[0] = user;
            held[1] = net;
            if user < 0 || net < 0 {
                return Err(step(b"open /proc/self/ns")(last()));
            }
            let mut list = [0u8; MAX_OVERLAYS];
            let n = read_list(socket, &mut list);
            match mount_overlays(&list[..n]) {
                Some(mnt) => {
                    held[2] = mnt;
                    send_fds(socket, &[user, net, mnt])
                }
                None => send_fds(socket, &[user, net]),
            }
            .map_err(step(b"send"))
        }
    }
}

/// The wrapper's list of overlays (a length, 4 bytes little-endian, then the list), read
/// into `buf`: its length, 0 when there is none, it is too long, or it does not come in
/// time.
///
/// # Safety
/// For the maker: system calls on a stack buffer, no allocation.
unsafe fn read_list(socket: libc::c_int, buf: &mut [u8]) -> usize {
    let read_exact = |into: &mut [u8]| {
        let mut got = 0;
        while got < into.len() {
            let mut pfd = libc::pollfd {
                fd: socket,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut pfd, 1, WAIT_FOR_OVERLAYS_MS) != 1 {
                return false;
            }
            let n = libc::read(socket, into[got..].as_mut_ptr().cast(), into.len() - got);
            if n <= 0 {
                return false;
            }
            got += n as usize;
        }
        true
    };
    let mut len = [0u8; 4];
    if !read_exact(&mut len) {
        return 0;
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > buf.len() || !read_exact(&mut buf[..len]) {
        return 0;
    }
    len
}

/// Mounts the overlays of `list` (each a mount point then its options, each ended by a
/// NUL) in a mount namespace of the maker's own, whose descriptor it answers; `None` when
/// the list is empty or no namespace could be made. An overlay that cannot be mounted is
/// left out: the wrapper finds it missing from the agent's mount table.
///
/// # Safety
/// For the maker: system calls on `list`, no allocation.
unsafe fn mount_overlays(list: &[u8]) -> Option<libc::c_int> {
    if list.is_empty() {
        return None;
    }
    if libc::unshare(libc::CLONE_NEWNS) != 0 || !make_mounts_private() {
        return None;
    }
    // Each overlay's mount point, upper and work directories (made here), and options.
    let mut rest = list;
    let mut next = || {
        let part = std::ffi::CStr::from_bytes_until_nul(rest).ok()?;
        rest = &rest[part.to_bytes().len() + 1..];
        Some(part)
    };
    while let (Some(target), Some(upper), Some(work), Some(options)) =
        (next(), next(), next(), next())
    {
        if libc::mkdir(upper.as_ptr(), 0o777) == 0 && libc::mkdir(work.as_ptr(), 0o777) == 0 {
            mount_overlay(target, options);
        }
    }
    let mnt = libc::open(
        c"/proc/self/ns/mnt".as_ptr(),
        libc::O_RDONLY | libc::O_CLOEXEC,
    );
    (mnt >= 0).then_some(mnt)
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
    /// The wrapper's end of `socket`, nothing asked or received yet.
    fn new(socket: UnixStream) -> NamespaceReceiver {
        NamespaceReceiver {
            socket,
            asked: None,
            received: None,
        }
    }

    /// Asks the maker to mount the overlays of `caches` (found by
    /// [`caches_ahead`](super::plan::caches_ahead)) ahead, over the layers made for them in
    /// `dir`; an empty list when there are none, which the maker waits for: call it once,
    /// as soon as the guardian is spawned, whatever the floor turns out to be.
    pub fn ask_overlays(&mut self, caches: Vec<std::path::PathBuf>, dir: Option<&std::path::Path>) {
        use std::io::Write;
        let made = match (caches.is_empty(), dir) {
            (false, Some(dir)) if super::caches::possible().is_ok() => {
                super::caches::lay_out(&caches, dir)
                    .inspect_err(|e| tracing::debug!("floor: no layers made ahead: {e}"))
                    .ok()
            }
            _ => None,
        };
        let mut list = Vec::new();
        if let Some((_, overlays, _)) = &made {
            for o in overlays {
                for part in [&o.cache, &o.upper, &o.work] {
                    list.extend(part.as_os_str().as_encoded_bytes());
                    list.push(0);
                }
                list.extend(o.options());
                list.push(0);
            }
        }
        if list.len() > MAX_OVERLAYS {
            list.clear();
        }
        let mut message = u32::try_from(list.len())
            .unwrap_or(0)
            .to_le_bytes()
            .to_vec();
        message.extend(&list);
        if let Err(e) = (&self.socket).write_all(&message) {
            tracing::debug!("floor: the namespaces' maker cannot be asked for overlays: {e}");
        }
        self.asked = made
            .filter(|_| !list.is_empty())
            .map(|(layers, overlays, gaps)| Asked {
                caches,
                overlays,
                layers: Some(layers),
                gaps,
            });
    }

    /// The layers and overlays made ahead for `caches` (the run's plan's), when they are the
    /// ones asked of the maker and it sent the mount namespace they are mounted in: the run
    /// keeps them, and the agent's process joins that namespace (which it must then do:
    /// the maker's overlays hold the layers, which no second overlay may use). `None`
    /// otherwise: the run makes layers of its own.
    pub fn overlays_for(&mut self, caches: &[std::path::PathBuf]) -> Option<Laid> {
        self.receive().as_ref().ok()?.mnt.as_ref()?;
        let asked = self.asked.as_mut().filter(|a| a.caches == caches)?;
        Some((
            asked.layers.take()?,
            asked.overlays.clone(),
            asked.gaps.clone(),
        ))
    }

    /// The namespaces, once made; or why there are none (the agent's process then makes its
    /// own).
    pub(crate) fn take(mut self) -> Result<NamespaceFds, Unavailable> {
        self.received.take().unwrap_or_else(|| self.read())
    }

    /// What the maker sent, received once.
    fn receive(&mut self) -> &Result<NamespaceFds, Unavailable> {
        let received = self.received.take().unwrap_or_else(|| self.read());
        self.received.insert(received)
    }

    /// Receives what the maker sends (waiting at most [`WAIT`]; a signal that interrupts the
    /// wait does not end it).
    fn read(&self) -> Result<NamespaceFds, Unavailable> {
        let not_received = |source| Unavailable::NotReceived { source };
        self.socket
            .set_read_timeout(Some(WAIT))
            .map_err(not_received)?;
        let mut text = [0u8; 64];
        let (n, fds) = loop {
            match receive_fds(self.socket.as_raw_fd(), &mut text, 0) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.map_err(not_received)?,
            }
        };
        let overlays = self
            .asked
            .as_ref()
            .map(|a| a.overlays.clone())
            .unwrap_or_default();
        let mut fds = fds.into_iter();
        match (fds.next(), fds.next(), fds.next()) {
            (Some(user), Some(net), mnt) => Ok(NamespaceFds {
                user,
                net,
                overlays: if mnt.is_some() { overlays } else { Vec::new() },
                mnt,
            }),
            _ if n < 4 => Err(Unavailable::MakerSilent),
            _ => {
                let code = i32::from_le_bytes([text[0], text[1], text[2], text[3]]);
                Err(Unavailable::MakerFailed {
                    step: String::from_utf8_lossy(&text[4..n]).into_owned(),
                    source: std::io::Error::from_raw_os_error(code),
                })
            }
        }
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
        let why = NamespaceReceiver::new(ours).take().unwrap_err();
        assert!(why.to_string().contains("failed at uid_map"), "{why}");
        assert!(why.to_string().contains(&error.to_string()), "{why}");
    }

    /// A signal that comes while the wrapper waits for the maker (a child's end, a window's
    /// size: the wrapper handles several) does not end the wait: what the maker sends next
    /// is what the run gets. (A socket with a receive timeout answers EINTR to a signal
    /// even under `SA_RESTART`.)
    #[test]
    fn a_signal_during_the_wait_for_the_maker_does_not_end_it() {
        extern "C" fn noted(_: libc::c_int) {}
        let sig = libc::SIGRTMIN() + 3;
        // SAFETY: a handler that does nothing, for a signal nothing else in this process uses.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = noted as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiting = std::thread::spawn(move || {
            // SAFETY: this thread's own id.
            tx.send(unsafe { libc::pthread_self() }).unwrap();
            NamespaceReceiver::new(ours).take()
        });
        let thread = rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: a signal to a thread of ours that is still running (it waits up to 2 s).
        unsafe { libc::pthread_kill(thread, sig) };
        std::thread::sleep(Duration::from_millis(100));
        let error = std::io::Error::from_raw_os_error(libc::EPERM);
        say_failure(theirs.as_raw_fd(), b"uid_map", &error);
        let why = waiting.join().unwrap().unwrap_err();
        assert!(why.to_string().contains("failed at uid_map"), "{why}");
    }

    #[test]
    fn a_maker_that_ends_without_a_word_is_said() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        drop(theirs);
        let why = NamespaceReceiver::new(ours).take().unwrap_err();
        assert!(why.to_string().contains("without a word"), "{why}");
    }
}
