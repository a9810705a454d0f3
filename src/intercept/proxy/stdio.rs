//! Our own stdin and stdout as async streams the reactor drives: a pipe or a Unix socket
//! is registered with epoll (tokio's `Stdin`/`Stdout` hand every read and write to a
//! blocking thread, which costs more than the proxy's own work per frame); anything else
//! (a file, a terminal) falls back to tokio's.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::pin::Pin;

use nix::sys::stat::{fstat, SFlag};
use tokio::io::{AsyncRead, AsyncWrite};

/// What kind of file a descriptor is, as far as the reactor cares.
enum Kind {
    Pipe,
    Socket,
    Other,
}

fn kind(fd: &OwnedFd) -> Kind {
    let Ok(st) = fstat(fd.as_raw_fd()) else {
        return Kind::Other;
    };
    match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFIFO => Kind::Pipe,
        SFlag::S_IFSOCK => Kind::Socket,
        _ => Kind::Other,
    }
}

fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(std).ok()
}

/// The pipe capacity asked for on each pipe the proxy reads or writes: the kernel's default
/// (64 KiB) makes a busy stream cost one wake-up of each side per 64 KiB; 1 MiB is the
/// default `/proc/sys/fs/pipe-max-size`. Best effort: a pipe keeps its size if refused.
const PIPE_CAPACITY: i32 = 1 << 20;

/// Asks for a larger capacity on `fd` when it is a pipe (see [`PIPE_CAPACITY`]).
pub(super) fn grow_pipe(fd: &impl AsFd) {
    let _ = nix::fcntl::fcntl(
        fd.as_fd().as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY),
    );
}

/// Our stdin, as a reader the reactor drives where it can be.
pub(super) fn stdin() -> Pin<Box<dyn AsyncRead + Send>> {
    if let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() {
        match kind(&fd) {
            Kind::Pipe => {
                grow_pipe(&fd);
                let file = std::fs::File::from(fd);
                if let Ok(rx) = tokio::net::unix::pipe::Receiver::from_file(file) {
                    return Box::pin(rx);
                }
            }
            Kind::Socket => {
                if let Some(s) = socket(fd) {
                    return Box::pin(s);
                }
            }
            Kind::Other => {}
        }
    }
    Box::pin(tokio::io::stdin())
}

/// Our stdout, as a writer the reactor drives where it can be.
pub(super) fn stdout() -> Pin<Box<dyn AsyncWrite + Send>> {
    if let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() {
        match kind(&fd) {
            Kind::Pipe => {
                grow_pipe(&fd);
                let file = std::fs::File::from(fd);
                if let Ok(tx) = tokio::net::unix::pipe::Sender::from_file(file) {
                    return Box::pin(tx);
                }
            }
            Kind::Socket => {
                if let Some(s) = socket(fd) {
                    return Box::pin(s);
                }
            }
            Kind::Other => {}
        }
    }
    Box::pin(tokio::io::stdout())
}
