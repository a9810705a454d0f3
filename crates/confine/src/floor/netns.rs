//! The network part of the floor, on the agent's side and the wrapper's: a network namespace
//! with only loopback, the proxy and control sockets bound in it (the wrapper listens on
//! them), a seccomp filter that stops every `connect(2)` for the wrapper's
//! [`bridge`](super::bridge), and the channel the descriptors go back to the wrapper over.
//! As in [`kernel`](super::kernel), what runs in the agent's process only makes system calls
//! on what was prepared (async-signal-safe).

use std::os::fd::{AsRawFd, OwnedFd};

use super::sys::{fail, receive_fds, send_fds};
use super::FloorError;

/// What the network part of the floor needs from the wrapper: the loopback port the egress
/// proxy listens on inside the tree's namespace, and the control socket's abstract name (it
/// must exist there too, for the agent's hooks).
#[derive(Debug, Clone)]
pub struct NetRequest {
    /// The TCP port on the namespace's 127.0.0.1 where the egress proxy's listener is bound.
    pub proxy_port: u16,
    /// The control socket's abstract name, without the leading NUL (`@`); `None` when the
    /// control socket is no abstract one.
    pub control: Option<Vec<u8>>,
}

/// The agent's side of the network part: a network namespace with only loopback, the proxy,
/// resolver and control sockets bound in it (the wrapper serves them), a seccomp filter that
/// stops every `connect(2)` for the wrapper's [`super::bridge`], and the channel the
/// descriptors go back to the wrapper over.
#[derive(Debug)]
pub(super) struct NetChild {
    channel: OwnedFd,
    proxy: libc::sockaddr_in,
    /// Port 53 of the namespace's loopback.
    dns: libc::sockaddr_in,
    control: Option<(libc::sockaddr_un, libc::socklen_t)>,
    filter: Vec<libc::sock_filter>,
    /// No namespace of the tree's own: the filter alone, and no socket bound for it.
    host: bool,
}

/// The wrapper's side of the channel: what the agent's process sends before `exec`.
#[derive(Debug)]
pub struct NetPeer {
    channel: OwnedFd,
    has_control: bool,
    host: bool,
}

/// The descriptors the agent's process made in its namespace, listening.
#[derive(Debug)]
pub struct NetReceived {
    /// The egress proxy's socket: TCP, on [`NetRequest::proxy_port`] of the namespace's
    /// 127.0.0.1 (`None` without a namespace: the wrapper listens on its own loopback).
    pub proxy: Option<std::net::TcpListener>,
    /// The tree's resolver's socket: UDP, on port 53 of its loopback (its `resolv.conf`
    /// names it); `None` without a namespace (the tree then has no resolver).
    pub dns: Option<std::net::UdpSocket>,
    /// The control socket, bound under its abstract name in the namespace, for the agent's
    /// hooks; `None` when [`NetRequest::control`] was.
    pub control: Option<std::os::unix::net::UnixListener>,
    /// The seccomp notification listener, for [`super::bridge::Bridge::spawn`].
    pub notify: OwnedFd,
}

impl NetChild {
    /// `host`: the tree has no network namespace of its own (see [`super::Support`]'s
    /// `net_without_namespace`), and gets the filter that decides each connection without.
    pub(super) fn new(request: &NetRequest, host: bool) -> Result<(NetChild, NetPeer), FloorError> {
        let prepare = |source| FloorError::Prepare {
            what: "the network namespace's channel",
            path: String::new(),
            source,
        };
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(prepare)?;
        // SAFETY: sockaddr_in is plain data.
        let mut proxy: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        proxy.sin_family = libc::AF_INET as libc::sa_family_t;
        proxy.sin_port = request.proxy_port.to_be();
        proxy.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let mut dns = proxy;
        dns.sin_port = 53u16.to_be();
        let control = match &request.control {
            Some(name) => {
                // SAFETY: sockaddr_un is plain data.
                let mut un: libc::sockaddr_un = unsafe { std::mem::zeroed() };
                un.sun_family = libc::AF_UNIX as libc::sa_family_t;
                if name.len() + 1 > un.sun_path.len() {
                    return Err(prepare(std::io::Error::from(
                        std::io::ErrorKind::InvalidInput,
                    )));
                }
                for (i, b) in name.iter().enumerate() {
                    un.sun_path[i + 1] = *b as libc::c_char;
                }
                let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
                Some((un, len as libc::socklen_t))
            }
            None => None,
        };
        Ok((
            NetChild {
                channel: theirs.into(),
                proxy,
                dns,
                control,
                filter: match host {
                    true => ahp_wrap_floor::seccomp::host_filter(),
                    false => ahp_wrap_floor::seccomp::connect_filter(),
                },
                host,
            },
            NetPeer {
                channel: ours.into(),
                has_control: request.control.is_some() && !host,
                host,
            },
        ))
    }

    /// In the agent's process, inside its new namespaces: binds the sockets, installs the
    /// filter and sends the descriptors to the wrapper.
    pub(super) fn apply(&self) -> std::io::Result<()> {
        if self.host {
            // SAFETY: plain system calls on values we own; nothing allocates.
            return unsafe { self.install(&mut [-1, -1, -1, -1], 0) };
        }
        // SAFETY: plain system calls on values we own; nothing allocates.
        unsafe {
            let proxy = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if proxy < 0 {
                return fail(b"ahp-wrap: floor: cannot make the proxy socket\n");
            }
            let one: libc::c_int = 1;
            libc::setsockopt(
                proxy,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&raw const one).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            if libc::bind(
                proxy,
                (&raw const self.proxy).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ) != 0
            {
                return fail(b"ahp-wrap: floor: cannot bind the proxy socket\n");
            }
            let dns = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            if dns < 0
                || libc::bind(
                    dns,
                    (&raw const self.dns).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                ) != 0
            {
                return fail(b"ahp-wrap: floor: cannot bind the resolver's socket (port 53 of the namespace's loopback)\n");
            }
            let mut fds = [proxy, dns, -1, -1];
            let mut count = 2;
            if let Some((addr, len)) = &self.control {
                let control =
                    libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
                if control < 0
                    || libc::bind(control, (addr as *const libc::sockaddr_un).cast(), *len) != 0
                {
                    return fail(b"ahp-wrap: floor: cannot bind the control socket in the network namespace\n");
                }
                fds[count] = control;
                count += 1;
            }
            self.install(&mut fds, count)
        }
    }

    /// Installs the filter and sends the first `count` of `fds` with its listener to the
    /// wrapper, then closes them.
    ///
    /// # Safety
    /// For a pre-exec step: no allocation.
    unsafe fn install(&self, fds: &mut [libc::c_int; 4], mut count: usize) -> std::io::Result<()> {
        unsafe {
            let prog = libc::sock_fprog {
                len: self.filter.len() as libc::c_ushort,
                filter: self.filter.as_ptr().cast_mut(),
            };
            // A stopped call waits for its answer through any signal but a fatal one (Linux
            // 5.19): a decision that takes a while is not asked again when the caller's
            // `connect` is restarted after a signal handler ran.
            let mut notify = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
                    | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
                &raw const prog,
            );
            if notify < 0 && *libc::__errno_location() == libc::EINVAL {
                notify = libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                    &raw const prog,
                );
            }
            if notify < 0 {
                return fail(b"ahp-wrap: floor: cannot install the connect filter (seccomp)\n");
            }
            fds[count] = notify as libc::c_int;
            count += 1;
            if send_fds(self.channel.as_raw_fd(), &fds[..count]).is_err() {
                return fail(
                    b"ahp-wrap: floor: cannot hand the network namespace's sockets to the wrapper\n",
                );
            }
            for fd in &fds[..count] {
                libc::close(*fd);
            }
        }
        Ok(())
    }
}

impl NetPeer {
    /// Takes what the agent's process sent before `exec` (it is there once the agent runs),
    /// and listens on the sockets.
    #[allow(
        clippy::expect_used,
        reason = "the descriptors were counted when they were received"
    )]
    pub fn receive(&self) -> std::io::Result<NetReceived> {
        let mut byte = [0u8; 1];
        let fds = match receive_fds(self.channel.as_raw_fd(), &mut byte, libc::MSG_DONTWAIT) {
            Ok((1, fds)) => fds,
            _ => {
                return Err(std::io::Error::other(
                    "the agent's process sent no sockets from its network namespace",
                ))
            }
        };
        let want = match (self.host, self.has_control) {
            (true, _) => 1,
            (false, true) => 4,
            (false, false) => 3,
        };
        if fds.len() != want {
            return Err(std::io::Error::other(format!(
                "the agent's process sent {} descriptors instead of {want}",
                fds.len()
            )));
        }
        let mut fds = fds.into_iter();
        let listen = |fd: &OwnedFd| {
            // SAFETY: listen on a socket we own (its credentials become ours: a hook checks
            // that the wrapper answers).
            if unsafe { libc::listen(fd.as_raw_fd(), 1024) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        };
        if self.host {
            return Ok(NetReceived {
                proxy: None,
                dns: None,
                control: None,
                notify: fds.next().expect("counted"),
            });
        }
        let proxy = fds.next().expect("counted");
        listen(&proxy)?;
        let dns = Some(std::net::UdpSocket::from(fds.next().expect("counted")));
        let control = match self.has_control {
            true => {
                let c = fds.next().expect("counted");
                listen(&c)?;
                Some(std::os::unix::net::UnixListener::from(c))
            }
            false => None,
        };
        Ok(NetReceived {
            proxy: Some(std::net::TcpListener::from(proxy)),
            dns,
            control,
            notify: fds.next().expect("counted"),
        })
    }
}

/// Brings `lo` up in the new network namespace (SIOCSIFFLAGS), or says why not.
///
/// # Safety
/// For a pre-exec step: no allocation.
pub(super) unsafe fn loopback_up() -> std::io::Result<()> {
    if set_loopback_up().is_err() {
        return fail(b"ahp-wrap: floor: cannot bring loopback up in the network namespace\n");
    }
    Ok(())
}

/// Brings `lo` up in the calling process's network namespace (SIOCSIFFLAGS), silently.
///
/// # Safety
/// For a pre-exec step: no allocation.
pub(super) unsafe fn set_loopback_up() -> std::io::Result<()> {
    let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if s < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // struct ifreq: the name, then the flags (a short) at offset 16.
    let mut ifr = [0u8; 40];
    ifr[0] = b'l';
    ifr[1] = b'o';
    let flags = (libc::IFF_UP | libc::IFF_RUNNING) as i16;
    ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
    let r = libc::ioctl(s, libc::SIOCSIFFLAGS as _, ifr.as_mut_ptr());
    let e = std::io::Error::last_os_error();
    libc::close(s);
    if r != 0 {
        return Err(e);
    }
    Ok(())
}
