//! Addresses the bridge reads: what a stopped call names, from the caller's memory, and an
//! address as the kernel takes it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

/// An address a `connect(2)` names.
pub(super) enum Sockaddr {
    Inet(SocketAddr),
    /// A path Unix socket (not an abstract one).
    Unix(PathBuf),
    /// Anything else (an abstract Unix socket, netlink, `AF_UNSPEC`, too short to be one),
    /// its bytes as they were read: what the bridge hands the kernel itself, from its own
    /// copy (the caller could have changed its own by then).
    Other(Vec<u8>),
}

/// The address at `ptr` in `tid`'s memory; `None` when it cannot be read.
pub(super) fn read_sockaddr(tid: i32, ptr: u64, len: usize) -> Option<Sockaddr> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = [0u8; 110];
    let len = len.min(buf.len());
    if len < 2 {
        return Some(Sockaddr::Other(Vec::new()));
    }
    let n = read_memory(tid, ptr, &mut buf[..len]);
    if n < 2 {
        return None;
    }
    let n = n as usize;
    let family = u16::from_ne_bytes([buf[0], buf[1]]) as i32;
    let port = u16::from_be_bytes([buf[2], buf[3]]);
    match family {
        libc::AF_INET if n >= 8 => {
            let ip = Ipv4Addr::new(buf[4], buf[5], buf[6], buf[7]);
            Some(Sockaddr::Inet(SocketAddr::new(IpAddr::V4(ip), port)))
        }
        libc::AF_INET6 if n >= 24 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&buf[8..24]);
            let ip = IpAddr::V6(Ipv6Addr::from(octets));
            Some(Sockaddr::Inet(SocketAddr::new(ip, port)))
        }
        // sun_path: a path up to its first NUL; a first byte NUL names an abstract socket.
        libc::AF_UNIX if n > 2 && buf[2] != 0 => {
            let name = &buf[2..n];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            Some(Sockaddr::Unix(PathBuf::from(std::ffi::OsStr::from_bytes(
                &name[..end],
            ))))
        }
        _ => Some(Sockaddr::Other(buf[..n].to_vec())),
    }
}

/// Reads `buf.len()` bytes at `ptr` in `tid`'s memory into `buf`; returns how many were
/// read (negative: none). Through `/proc/PID/mem` where `process_vm_readv` is refused (a
/// container engine's seccomp profile refuses it without `CAP_SYS_PTRACE`).
pub(super) fn read_memory(tid: i32, ptr: u64, buf: &mut [u8]) -> isize {
    match vm_read(tid, ptr, buf) {
        n if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) => {
            use std::os::unix::fs::FileExt;
            std::fs::File::open(format!("/proc/{tid}/mem"))
                .and_then(|mem| mem.read_at(buf, ptr))
                .map_or(-1, |n| n as isize)
        }
        n => n,
    }
}

fn vm_read(tid: i32, ptr: u64, buf: &mut [u8]) -> isize {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: ptr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: reads at most `buf.len()` bytes into our buffer.
    unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) }
}

/// `addr` as the kernel takes it.
pub(super) fn raw_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data, large enough for either family.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = unsafe { &mut *(&raw mut st).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = unsafe { &mut *(&raw mut st).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_scope_id = a.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (st, len as libc::socklen_t)
}
