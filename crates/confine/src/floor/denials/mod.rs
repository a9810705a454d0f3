//! What the kernel refused the agent's tree, read back from the kernel's audit log.
//!
//! Landlock (ABI 7, Linux 6.15 on) reports a denial only to the audit subsystem, and only for
//! a domain restricted with `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` once it has `exec`'d.
//! Its records reach a process through the audit netlink socket's read-only multicast group,
//! which needs `CAP_AUDIT_READ`, and only while the audit subsystem is on. So a [`Reader`] is
//! opened before the agent starts, where both hold; the floor then asks Landlock to log, and
//! the run counts and audits each refusal of its own domain (told apart from other wrappers'
//! by the pid that made the domain: the agent's).
//!
//! Records of one audit event share a serial, in this order for a denied system call:
//! `LANDLOCK_ACCESS` (what was refused: `domain=… blockers=fs.write_file path="…"`),
//! `LANDLOCK_DOMAIN` the first time a domain denies (`status=allocated … pid=…`), `SYSCALL`
//! (the process: `pid=… comm="…" exe="…"`), then `EOE`. A domain's end is a record of its own
//! (`status=deallocated denials=N`), with the kernel's count, which holds even when records
//! were lost to the audit backlog.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{Feature, Unavailable};

pub use ahp_wrap_floor::denials::{keep, messages, said, Collector, Denial};

const NETLINK_AUDIT: libc::c_int = 9;
/// The read-only multicast group (`AUDIT_NLGRP_READLOG`).
const READLOG_GROUP: u32 = 1;
const AUDIT_GET: u16 = 1000;
const NLMSG_HDRLEN: usize = 16;

/// The audit log's read-only multicast socket, opened before the agent starts.
#[derive(Debug)]
pub struct Reader {
    fd: OwnedFd,
}

impl Reader {
    /// Opens the audit log's read-only group where this kernel and this process allow it;
    /// else says why file refusals cannot be counted here.
    pub fn open(landlock_abi: i32) -> Result<Reader, Unavailable> {
        if landlock_abi < 7 {
            return Err(Unavailable::KernelTooOld(Feature::LandlockDenials {
                abi: landlock_abi,
            }));
        }
        let fd = netlink()?;
        let addr = sockaddr(READLOG_GROUP);
        // SAFETY: bind with a sockaddr_nl we own, of its size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r != 0 {
            let source = std::io::Error::last_os_error();
            return Err(Unavailable::AuditRead { source });
        }
        if audit_enabled() == Some(false) {
            return Err(Unavailable::AuditOff);
        }
        Ok(Reader { fd })
    }

    /// Reads the records queued now, without waiting: each `(type, text)` to `each`.
    /// Returns how many were read.
    pub fn read_ready(&self, mut each: impl FnMut(u16, &str)) -> usize {
        let mut buf = vec![0u8; 64 * 1024];
        let mut n = 0;
        loop {
            // SAFETY: recv into a buffer we own, of its length.
            let got = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if got < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) {
                // The socket overran and records were dropped (the kernel's count at the
                // domain's end still holds): read on.
                continue;
            }
            if got <= 0 {
                // EAGAIN: nothing more now; anything else ends the pass.
                return n;
            }
            for (ty, text) in messages(&buf[..got as usize]) {
                each(ty, text);
                n += 1;
            }
        }
    }
}

impl Reader {
    /// The reader, registered with the running tokio runtime's reactor (call it inside one).
    pub fn into_async(self) -> std::io::Result<tokio::io::unix::AsyncFd<Reader>> {
        // SAFETY: the reader owns its descriptor, which stays open and the same until the
        // AsyncFd (which owns the reader) is dropped.
        unsafe { tokio::io::unix::AsyncFd::register(self) }.map_err(|e| e.into_parts().1)
    }
}

impl AsRawFd for Reader {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

fn netlink() -> Result<OwnedFd, Unavailable> {
    // SAFETY: socket(2); the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        let source = std::io::Error::last_os_error();
        return Err(Unavailable::AuditSocket { source });
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr(groups: u32) -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain data; all zero is its empty value.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    addr
}

/// Whether the audit subsystem is on (`AUDIT_GET`), when we may ask (`CAP_AUDIT_CONTROL`).
fn audit_enabled() -> Option<bool> {
    let fd = netlink().ok()?;
    let mut req = [0u8; NLMSG_HDRLEN];
    req[0..4].copy_from_slice(&(NLMSG_HDRLEN as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&AUDIT_GET.to_ne_bytes());
    req[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    let addr = sockaddr(0);
    // SAFETY: sendto with a buffer and an address we own.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return None;
    }
    // The kernel answers from a thread of its own: wait for it, briefly.
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one pollfd we own.
    if unsafe { libc::poll(&mut pfd, 1, 200) } != 1 {
        return None;
    }
    let mut buf = [0u8; 1024];
    // SAFETY: recv into a buffer we own.
    let got = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if got < (NLMSG_HDRLEN + 8) as isize || u16::from_ne_bytes([buf[4], buf[5]]) != AUDIT_GET {
        return None; // an error answer: not allowed to ask
    }
    // struct audit_status { u32 mask; u32 enabled; ... }
    let enabled = u32::from_ne_bytes(buf[20..24].try_into().ok()?);
    Some(enabled != 0)
}
