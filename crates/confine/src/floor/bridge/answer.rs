//! How a stopped call is answered: at once by the bridge's thread ([`SyscallReply`]), or
//! later by another one ([`Answer`]), with a socket of ours put in the caller's place first
//! where it connects.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// What the bridge's thread answers a stopped call with.
pub(super) enum SyscallReply {
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

/// Answers the notification `id` of the listener `notify` as `reply` says (nothing for
/// [`SyscallReply::Later`]).
pub(super) fn respond(notify: RawFd, id: u64, reply: SyscallReply) {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: 0,
    };
    match reply {
        SyscallReply::Continue => resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        SyscallReply::Done => {}
        SyscallReply::Value(v) => resp.val = v,
        SyscallReply::Error(e) => resp.error = -e,
        SyscallReply::Later => return,
    }
    // SAFETY: a response to a notification received from `notify`; ENOENT (the caller is
    // gone) needs nothing.
    unsafe { libc::ioctl(notify, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut resp) };
}

/// Puts `socket` in place of the descriptor `fd` of the caller stopped in notification `id`
/// (close-on-exec as `cloexec` says), before it is answered.
pub(super) fn add_fd(
    notify: RawFd,
    id: u64,
    socket: &impl AsRawFd,
    fd: i32,
    cloexec: bool,
) -> io::Result<()> {
    let addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SETFD as u32,
        srcfd: socket.as_raw_fd() as u32,
        newfd: fd as u32,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: installs our socket at `fd` in the caller, for the notification `id`.
    let r = unsafe { libc::ioctl(notify, libc::SECCOMP_IOCTL_NOTIF_ADDFD as _, &addfd) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The answer to a stopped call given by another thread, when it is dropped: success, or
/// the error set.
#[derive(Debug)]
pub(crate) struct Answer {
    notify: Arc<OwnedFd>,
    id: u64,
    /// The errno to answer with (0: success).
    error: i32,
}

impl Answer {
    pub(super) fn new(notify: &Arc<OwnedFd>, id: u64) -> Answer {
        Answer {
            notify: notify.clone(),
            id,
            error: 0,
        }
    }

    /// Answers with `errno` instead of success.
    pub(crate) fn fail(mut self, errno: i32) {
        self.error = errno;
    }

    /// Puts `socket` in place of the caller's descriptor `fd` (see [`add_fd`]).
    pub(super) fn install(&self, socket: &impl AsRawFd, fd: i32, cloexec: bool) -> io::Result<()> {
        add_fd(self.notify.as_raw_fd(), self.id, socket, fd, cloexec)
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        let reply = match self.error {
            0 => SyscallReply::Done,
            e => SyscallReply::Error(e),
        };
        respond(self.notify.as_raw_fd(), self.id, reply);
    }
}
