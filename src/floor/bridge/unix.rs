//! Path Unix sockets: where the socket a caller names really lies, whether the tree bound
//! it, and connecting the caller's socket through the file decided on.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// `path` as `tid` names it, made absolute against its working directory.
pub(super) fn caller_path(tid: i32, path: &Path) -> Option<PathBuf> {
    if path.is_absolute() {
        return Some(path.to_owned());
    }
    let cwd = std::fs::read_link(format!("/proc/{tid}/cwd")).ok()?;
    Some(cwd.join(path))
}

/// Whether the socket at `real` (where it lies, as the caller's root `root` sees it) was
/// bound in the caller's network namespace, which only the tree's processes share: its
/// table lists the paths bound there, as their binders named them (resolved here the same
/// way; a relative one against nothing we know is skipped).
pub(super) fn bound_in_tree(tid: i32, root: &Path, real: &Path) -> bool {
    let Ok(table) = std::fs::read_to_string(format!("/proc/{tid}/net/unix")) else {
        return false;
    };
    // Num RefCount Protocol Flags Type St Inode Path
    let bound = || {
        table
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().nth(7).map(Path::new))
    };
    if bound().any(|b| b == real) {
        return true;
    }
    // Bound under another name for the same place (a link on the way).
    let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    let Ok(real) = std::fs::canonicalize(inside(real)) else {
        return false;
    };
    bound().any(|b| b.is_absolute() && std::fs::canonicalize(inside(b)).is_ok_and(|c| c == real))
}

/// `path`, opened to name it only (`O_PATH`), its links followed.
pub(super) fn open_path(path: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open with a NUL-terminated path; the descriptor is ours.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Connects the caller's socket (shared with us) to the socket file `target` names, through
/// `/proc/self/fd`: the file decided on, whatever its path names by now.
pub(super) fn connect_unix(sock: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    let (un, len) = via(target);
    super::connect_blocking(sock, (&raw const un).cast(), len)
}

/// The largest datagram sent on a caller's behalf (a path socket's default limit is about
/// 208 KiB; larger is `EMSGSIZE`, as the kernel would say past its own).
const MAX_DATAGRAM: usize = 256 * 1024;

/// Sends the `len` bytes at `buf` in `tid`'s memory on its socket `sock` (shared with us) to
/// the socket file `target` names, with `flags`. Never blocks the bridge for long: a full
/// receiver is waited for a second at most, then `EAGAIN`.
pub(super) fn send_unix(
    tid: i32,
    sock: &OwnedFd,
    target: &OwnedFd,
    buf: u64,
    len: usize,
    flags: i32,
) -> io::Result<usize> {
    if len > MAX_DATAGRAM {
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    let mut data = vec![0u8; len];
    if len > 0 && super::read_memory(tid, buf, &mut data) != len as isize {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let (un, alen) = via(target);
    let send = || {
        // SAFETY: sendto from our buffer to an address we built.
        let n = unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                data.as_ptr().cast(),
                data.len(),
                flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                (&raw const un).cast(),
                alen,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    };
    match send() {
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && flags & libc::MSG_DONTWAIT == 0 => {
            let mut pfd = libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: poll on one descriptor we hold.
            unsafe { libc::poll(&mut pfd, 1, 1000) };
            send()
        }
        other => other,
    }
}

/// `/proc/self/fd/N` of `target` as a Unix socket address.
fn via(target: &OwnedFd) -> (libc::sockaddr_un, libc::socklen_t) {
    use std::os::unix::ffi::OsStrExt;
    let via = format!("/proc/self/fd/{}", target.as_raw_fd());
    // SAFETY: sockaddr_un is plain data; the path fits (a short /proc name).
    let mut un: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    un.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in un
        .sun_path
        .iter_mut()
        .zip(std::ffi::OsStr::new(&via).as_bytes())
    {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + via.len() + 1;
    (un, len as libc::socklen_t)
}
