//! Where the control socket listens, and how a shim reaches it and makes sure the process
//! at the other end is its wrapper.
//!
//! On Linux the socket is an abstract-namespace name (`@ahp-wrap-<random>` in the
//! agent's environment): it has no file, so nobody can unlink, rename or replace it while
//! the parent holds it, and a shim checks the listener's pid and uid (`SO_PEERCRED`)
//! against the wrapper it was told about. Elsewhere (or with `AHP_WRAP_CONTROL=path`) it
//! is a path in the private run directory, which a same-user process could still replace:
//! the parent then watches the path's inode and ends the run when it changes.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Set to `path` in the wrapper's environment to use a path socket even where an abstract
/// one is possible (to exercise the fallback; the peer check still applies on Linux).
pub(crate) const ENV_KIND: &str = "AHP_WRAP_CONTROL";

/// How an abstract address is written in the environment (as `ss` and systemd write it).
const ABSTRACT_PREFIX: u8 = b'@';

/// A bound listener and the address the agent's hooks use.
pub(super) struct Bound {
    pub listener: UnixListener,
    pub address: OsString,
    /// The path socket's identity, for [`Watched::check`]; `None` for an abstract socket.
    pub watched: Option<Watched>,
}

/// Binds the control socket: abstract where possible, else `control.sock` in `dir`.
pub(super) fn bind(dir: &Path) -> io::Result<Bound> {
    let want_path = std::env::var_os(ENV_KIND).is_some_and(|v| v == "path");
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if !want_path {
        match bind_abstract() {
            Ok(bound) => return Ok(bound),
            Err(e) => tracing::warn!(
                "no abstract control socket ({e}); using a path socket, watched for replacement"
            ),
        }
    }
    let _ = want_path;
    let path = dir.join("control.sock");
    let listener = UnixListener::bind(&path)?;
    let watched = Watched::new(path.clone())?;
    Ok(Bound {
        listener,
        address: path.into_os_string(),
        watched: Some(watched),
    })
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn bind_abstract() -> io::Result<Bound> {
    #[cfg(target_os = "android")]
    use std::os::android::net::SocketAddrExt;
    #[cfg(target_os = "linux")]
    use std::os::linux::net::SocketAddrExt;
    // 128 random bits: the name cannot be guessed, and a clash is an error, not a takeover.
    let name = format!("ahp-wrap-{}", crate::random_hex(16));
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let listener = UnixListener::bind_addr(&addr)?;
    let mut address = OsString::from("@");
    address.push(&name);
    Ok(Bound {
        listener,
        address,
        watched: None,
    })
}

/// Connects to `address` as the agent's environment gives it (`@name` or a path).
pub(crate) fn connect(address: &OsStr) -> io::Result<UnixStream> {
    match address.as_bytes().split_first() {
        Some((&ABSTRACT_PREFIX, name)) => connect_abstract(name),
        _ => UnixStream::connect(address),
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn connect_abstract(name: &[u8]) -> io::Result<UnixStream> {
    #[cfg(target_os = "android")]
    use std::os::android::net::SocketAddrExt;
    #[cfg(target_os = "linux")]
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    UnixStream::connect_addr(&addr)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn connect_abstract(_: &[u8]) -> io::Result<UnixStream> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract sockets do not exist on this system",
    ))
}

/// Why the listener on the wrapper's address is not taken to be the wrapper.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ListenerError {
    /// The peer's credentials could not be read (`SO_PEERCRED`, else `getpeereid`).
    #[error("the control socket's owner cannot be checked ({0})")]
    Unchecked(nix::errno::Errno),
    /// The listener runs as a user other than the caller's; the listener's uid.
    #[error("the control socket is served by user {0} rather than by the wrapper")]
    User(u32),
    /// The listener is not the wrapper's process (Linux and Android only: elsewhere the
    /// peer's pid is not known).
    #[error(
        "the control socket is served by process {pid} rather than by the wrapper (pid \
         {parent}): it was taken over"
    )]
    Process {
        /// The listening process's pid.
        pid: i32,
        /// The wrapper's pid, as `AHP_WRAP_PARENT_PID` gave it.
        parent: i32,
    },
}

/// Makes sure the process listening at the other end of `stream` is the wrapper `parent`
/// (pid) and runs as our user. A mismatch means someone else answers on the wrapper's
/// address: the shim must not take its word.
pub(crate) fn check_listener(stream: &UnixStream, parent: i32) -> Result<(), ListenerError> {
    let me = nix::unistd::geteuid().as_raw();
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let cred = getsockopt(stream, PeerCredentials).map_err(ListenerError::Unchecked)?;
        if cred.uid() != me {
            return Err(ListenerError::User(cred.uid()));
        }
        // Pid 0: the listener is outside the caller's PID namespace (the floor's own, where
        // only the agent's tree lives): the wrapper, which no process of the tree can be.
        if cred.pid() != parent && cred.pid() != 0 {
            return Err(ListenerError::Process {
                pid: cred.pid(),
                parent,
            });
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        // No peer pid here: the uid only; the parent watches its socket's inode instead.
        let _ = parent;
        let (uid, _) = nix::unistd::getpeereid(stream).map_err(ListenerError::Unchecked)?;
        if uid.as_raw() != me {
            return Err(ListenerError::User(uid.as_raw()));
        }
    }
    Ok(())
}

/// A path socket's identity (device and inode), to notice it being removed or replaced.
#[derive(Debug, Clone)]
pub(crate) struct Watched {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

/// The path control socket was removed or replaced while the agent ran.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the control socket {} was {what} while the agent ran: its hooks can no longer reach the wrapper, so the run ends", path.display())]
pub(crate) struct TakenOver {
    /// The socket's path (`control.sock` in the run directory).
    pub path: PathBuf,
    /// `removed` or `replaced`.
    pub what: &'static str,
}

impl Watched {
    fn new(path: PathBuf) -> io::Result<Watched> {
        let m = std::fs::symlink_metadata(&path)?;
        Ok(Watched {
            path,
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    /// Whether the socket file is still the one we bound.
    pub(crate) fn check(&self) -> Result<(), TakenOver> {
        let what = match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.dev() == self.dev && m.ino() == self.ino => return Ok(()),
            Ok(_) => "replaced",
            Err(_) => "removed",
        };
        Err(TakenOver {
            path: self.path.clone(),
            what,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shim_accepts_only_the_wrapper_it_was_told_about() {
        let dir = tempfile::tempdir().unwrap();
        let bound = bind(dir.path()).unwrap();
        let stream = connect(&bound.address).unwrap();
        let me = std::process::id() as i32;
        assert_eq!(check_listener(&stream, me), Ok(()));
        let err = check_listener(&stream, me + 1).unwrap_err().to_string();
        assert!(err.contains("rather than by the wrapper"), "{err}");
    }

    #[test]
    fn a_path_socket_that_is_removed_or_replaced_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _first = UnixListener::bind(&path).unwrap();
        let watched = Watched::new(path.clone()).unwrap();
        assert!(watched.check().is_ok());
        std::fs::rename(&path, dir.path().join("moved.sock")).unwrap();
        assert_eq!(watched.check().unwrap_err().what, "removed");
        let _second = UnixListener::bind(&path).unwrap();
        assert_eq!(watched.check().unwrap_err().what, "replaced");
    }
}
