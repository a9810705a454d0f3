//! The system calls every step of the kernel's part shares, at the bottom of its layers: a
//! failure said on stderr between `fork` and `exec` (where nothing may allocate), and
//! descriptors passed over a Unix socket (the namespaces' maker, the porter, the agent's
//! process handing its network namespace's sockets to the wrapper).

use std::os::fd::OwnedFd;

/// Says `what` on stderr and returns the error in `errno`.
pub(super) fn fail(what: &[u8]) -> std::io::Result<()> {
    let e = std::io::Error::last_os_error();
    // SAFETY: write(2) of a static buffer.
    unsafe { libc::write(2, what.as_ptr().cast(), what.len()) };
    Err(e)
}

/// Sends `fds` over the Unix socket `channel` (SCM_RIGHTS) with one byte, from stack buffers.
///
/// # Safety
/// For a pre-exec step: no allocation.
pub(super) unsafe fn send_fds(channel: libc::c_int, fds: &[libc::c_int]) -> std::io::Result<()> {
    let mut space = [0u64; 8];
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let data_len = std::mem::size_of_val(fds) as libc::c_uint;
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = libc::CMSG_SPACE(data_len) as _;
    let cmsg = libc::CMSG_FIRSTHDR(&msg);
    (*cmsg).cmsg_level = libc::SOL_SOCKET;
    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
    (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
    std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), fds.len());
    if libc::sendmsg(channel, &msg, 0) != 1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Receives one message on the Unix socket `channel` into `data` (waiting for it unless
/// `flags` holds `MSG_DONTWAIT`): how many bytes came, and the descriptors sent with them
/// (close-on-exec).
pub(super) fn receive_fds(
    channel: libc::c_int,
    data: &mut [u8],
    flags: libc::c_int,
) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    use std::os::fd::FromRawFd;
    let mut space = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: recvmsg into buffers we own; the descriptors received are then ours.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&space) as _;
        let n = libc::recvmsg(channel, &mut msg, flags | libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut fds = Vec::new();
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
                for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                    fds.push(OwnedFd::from_raw_fd(*data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        Ok((n as usize, fds))
    }
}
