//! The floor on Linux: what this kernel offers, and the confinement the agent's process
//! applies to itself between `fork` and `exec`.
//!
//! Everything that allocates, opens paths or may fail for a reason worth a sentence is done
//! in the parent ([`Prepared::new`]); the child ([`Prepared::apply`]) only makes system
//! calls with what was prepared, as a pre-exec step must (async-signal-safe).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

use super::{FloorError, Plan, Report, ENV_FLOOR};

/// What this kernel offers the floor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// Whether the agent can be given a user and mount namespace of its own; else why not.
    pub namespaces: Result<(), String>,
}

impl Support {
    /// Asks the kernel (one system call and a few sysctl reads; no process is started).
    pub fn probe() -> Support {
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only
        // returns the ABI version (or an error).
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                1u32,
            )
        };
        Support {
            landlock_abi: abi.max(0) as i32,
            namespaces: namespaces_possible(),
        }
    }

    /// What a run with `plan` gets from this kernel, and what it lacks.
    pub fn report(&self, plan: &Plan) -> Report {
        let mut r = Report::default();
        if self.landlock_abi < 1 {
            r.gaps.push(
                "files: not confined (the kernel offers no Landlock: Linux 5.13 or later with \
                 Landlock enabled is needed)"
                    .into(),
            );
        } else {
            r.enforced.push(format!(
                "files: written only beneath {} directories (the workspace, the temp \
                 directories, the agent's own state, package caches) (Landlock ABI {})",
                plan.writable.len(),
                self.landlock_abi
            ));
            if self.landlock_abi < 3 {
                r.gaps.push(
                    "files: truncate(2) is not confined (Landlock ABI 3, Linux 6.2, is needed)"
                        .into(),
                );
            }
            if self.landlock_abi >= 6 {
                r.enforced.push(
                    "signals: the agent's tree cannot signal the wrapper or anything outside \
                     the tree (ptrace neither)"
                        .into(),
                );
            } else {
                r.gaps.push(
                    "signals: the agent's tree can signal the wrapper (Landlock ABI 6, Linux \
                     6.12, is needed; ptrace is still refused)"
                        .into(),
                );
            }
        }
        match (&plan.net, &self.namespaces) {
            (None, _) => r
                .gaps
                .push("network: not confined ([floor.net] enabled = false)".into()),
            (Some(_), Ok(())) => r.enforced.push(
                "network: a namespace of its own with only loopback; out only through the \
                 egress proxy, each connection decided by the gate; direct connections and \
                 DNS refused"
                    .into(),
            ),
            (Some(_), Err(why)) if std::env::var_os(ENV_FLOOR).is_some() => {
                r.enforced.push(format!("network: {why}"))
            }
            (Some(_), Err(why)) => r.gaps.push(format!("network: not confined: {why}")),
        }
        match &self.namespaces {
            Ok(()) => r.enforced.push(format!(
                "protected paths: {} bound read-only, {} secret location(s) hidden (user and \
                 mount namespace)",
                plan.read_only.len(),
                plan.hidden.len()
            )),
            Err(why) => r.gaps.push(format!(
                "protected paths beneath writable directories ({}) and secrets ({}) are not \
                 enforced by the kernel: {why}",
                plan.read_only.len(),
                plan.hidden.len()
            )),
        }
        r
    }
}

/// Whether unshare(CLONE_NEWUSER | CLONE_NEWNS) can work here, judged without trying.
fn namespaces_possible() -> Result<(), String> {
    if std::env::var_os(ENV_FLOOR).is_some() {
        return Err(
            "inherited: this run is inside another run's floor, whose namespace and \
                    binds hold here too"
                .into(),
        );
    }
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
    };
    if read("/proc/sys/user/max_user_namespaces") == Some(0) {
        return Err("user namespaces are disabled (user.max_user_namespaces = 0)".into());
    }
    let root = nix::unistd::geteuid().is_root();
    if !root && read("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
        return Err("unprivileged user namespaces are disabled \
                    (kernel.unprivileged_userns_clone = 0)"
            .into());
    }
    if !root && read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == Some(1) {
        return Err("AppArmor restricts unprivileged user namespaces \
                    (kernel.apparmor_restrict_unprivileged_userns = 1)"
            .into());
    }
    Ok(())
}

/// One mount the child makes in its own mount namespace.
#[derive(Debug)]
enum Mount {
    /// `path` bound onto itself, then (`Some(flags)`) remounted with `flags`: read-only or
    /// writable, with the flags its mount already has (a user namespace may not clear them).
    Bind {
        path: CString,
        remount: Option<libc::c_ulong>,
    },
    /// An empty, read-only tmpfs over a directory.
    Empty { path: CString },
    /// The empty file `src` bound read-only over a file.
    EmptyFile {
        src: CString,
        path: CString,
        flags: libc::c_ulong,
    },
}

/// The confinement, ready to apply in the agent's process.
#[derive(Debug)]
pub struct Prepared {
    landlock: Option<OwnedFd>,
    namespaces: Option<Namespaces>,
    net: Option<NetChild>,
}

/// What the network part of the floor needs from the wrapper: the loopback port the egress
/// proxy listens on inside the tree's namespace, and the control socket's abstract name (it
/// must exist there too, for the agent's hooks).
#[derive(Debug, Clone)]
pub struct NetRequest {
    pub proxy_port: u16,
    pub control: Option<Vec<u8>>,
}

/// The agent's side of the network part: a network namespace with only loopback, the proxy
/// and control sockets bound in it (the wrapper listens on them), a seccomp filter that
/// stops every `connect(2)` for the wrapper's [`super::bridge`], and the channel the three
/// descriptors go back to the wrapper over.
#[derive(Debug)]
struct NetChild {
    channel: OwnedFd,
    proxy: libc::sockaddr_in,
    control: Option<(libc::sockaddr_un, libc::socklen_t)>,
    filter: Vec<libc::sock_filter>,
}

/// The wrapper's side of the channel: what the agent's process sends before `exec`.
#[derive(Debug)]
pub struct NetPeer {
    channel: OwnedFd,
    has_control: bool,
}

/// The descriptors the agent's process made in its namespace, listening.
#[derive(Debug)]
pub struct NetReceived {
    pub proxy: std::net::TcpListener,
    pub control: Option<std::os::unix::net::UnixListener>,
    /// The seccomp notification listener, for [`super::bridge::Bridge::spawn`].
    pub notify: OwnedFd,
}

#[derive(Debug)]
struct Namespaces {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    mounts: Vec<Mount>,
}

impl Prepared {
    /// Builds the Landlock ruleset for `plan` and the namespace steps `support` allows.
    /// `scratch` is a private directory of the run's (for the empty file bound over secret
    /// files).
    /// With `net`, the tree also gets a network namespace of its own (where namespaces are
    /// possible); the wrapper's end of the channel comes back with it.
    pub fn new(
        plan: &Plan,
        support: &Support,
        scratch: &Path,
        net: Option<&NetRequest>,
    ) -> Result<(Prepared, Option<NetPeer>), FloorError> {
        if support.landlock_abi < 1 {
            return Err(FloorError::Unsupported);
        }
        let landlock = Some(ruleset(plan, ABI::from(support.landlock_abi))?);
        let namespaces = match support.namespaces {
            Ok(()) => Some(Namespaces::new(plan, scratch)?),
            Err(_) => None,
        };
        let (net, peer) = match (net, &namespaces) {
            (Some(request), Some(_)) => {
                let (child, peer) = NetChild::new(request)?;
                (Some(child), Some(peer))
            }
            _ => (None, None),
        };
        Ok((
            Prepared {
                landlock,
                namespaces,
                net,
            },
            peer,
        ))
    }

    /// Applies the floor to the calling process. For a pre-exec step: only system calls on
    /// what [`Prepared::new`] made, and a short static line on stderr when one fails.
    pub fn apply(&self) -> std::io::Result<()> {
        if let Some(ns) = &self.namespaces {
            ns.enter(self.net.is_some())?;
        }
        // SAFETY: plain system calls on values we own.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return fail(b"ahp-wrap: floor: cannot set no_new_privs\n");
            }
            if let Some(fd) = &self.landlock {
                let r = libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32);
                if r != 0 {
                    return fail(b"ahp-wrap: floor: landlock_restrict_self failed\n");
                }
            }
        }
        if let Some(net) = &self.net {
            net.apply()?;
        }
        Ok(())
    }
}

/// `BPF_LD | BPF_W | BPF_ABS`, `BPF_JMP | BPF_JEQ | BPF_K`, `BPF_RET | BPF_K`.
const BPF_LD_ABS: u16 = 0x20;
const BPF_JEQ: u16 = 0x15;
const BPF_RET: u16 = 0x06;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

/// The filter: `connect(2)` of this architecture waits for the wrapper; everything else
/// (including other architectures' calls, which then stay inside the namespace) goes on.
fn connect_filter() -> Vec<libc::sock_filter> {
    let op = |code, k, jt, jf| libc::sock_filter { code, jt, jf, k };
    vec![
        // seccomp_data: nr at offset 0, arch at offset 4.
        op(BPF_LD_ABS, 4, 0, 0),
        op(BPF_JEQ, AUDIT_ARCH, 1, 0),
        op(BPF_RET, libc::SECCOMP_RET_ALLOW, 0, 0),
        op(BPF_LD_ABS, 0, 0, 0),
        op(BPF_JEQ, libc::SYS_connect as u32, 0, 1),
        op(BPF_RET, libc::SECCOMP_RET_USER_NOTIF, 0, 0),
        op(BPF_RET, libc::SECCOMP_RET_ALLOW, 0, 0),
    ]
}

impl NetChild {
    fn new(request: &NetRequest) -> Result<(NetChild, NetPeer), FloorError> {
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
                control,
                filter: connect_filter(),
            },
            NetPeer {
                channel: ours.into(),
                has_control: request.control.is_some(),
            },
        ))
    }

    /// In the agent's process, inside its new namespaces: binds the two sockets, installs
    /// the filter and sends the three descriptors to the wrapper.
    fn apply(&self) -> std::io::Result<()> {
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
            let mut fds = [proxy, -1, -1];
            let mut count = 1;
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
            let prog = libc::sock_fprog {
                len: self.filter.len() as libc::c_ushort,
                filter: self.filter.as_ptr().cast_mut(),
            };
            let notify = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &raw const prog,
            );
            if notify < 0 {
                return fail(b"ahp-wrap: floor: cannot install the connect filter (seccomp)\n");
            }
            fds[count] = notify as libc::c_int;
            count += 1;
            send_fds(self.channel.as_raw_fd(), &fds[..count])?;
            for fd in &fds[..count] {
                libc::close(*fd);
            }
        }
        Ok(())
    }
}

/// Sends `fds` over the Unix socket `channel` (SCM_RIGHTS), with a stack buffer.
///
/// # Safety
/// For a pre-exec step: no allocation.
unsafe fn send_fds(channel: libc::c_int, fds: &[libc::c_int]) -> std::io::Result<()> {
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
        return fail(
            b"ahp-wrap: floor: cannot hand the network namespace's sockets to the wrapper\n",
        );
    }
    Ok(())
}

impl NetPeer {
    /// Takes what the agent's process sent before `exec` (it is there once the agent runs),
    /// and listens on the sockets.
    pub fn receive(&self) -> std::io::Result<NetReceived> {
        use std::os::fd::FromRawFd;
        let mut space = [0u64; 8];
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        // SAFETY: recvmsg into buffers we own; the descriptors received are then ours.
        let fds = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = space.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&space) as _;
            let n = libc::recvmsg(
                self.channel.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            );
            if n != 1 {
                return Err(std::io::Error::other(
                    "the agent's process sent no sockets from its network namespace",
                ));
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
            fds
        };
        let want = if self.has_control { 3 } else { 2 };
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
        let proxy = fds.next().expect("counted");
        listen(&proxy)?;
        let control = match self.has_control {
            true => {
                let c = fds.next().expect("counted");
                listen(&c)?;
                Some(std::os::unix::net::UnixListener::from(c))
            }
            false => None,
        };
        Ok(NetReceived {
            proxy: std::net::TcpListener::from(proxy),
            control,
            notify: fds.next().expect("counted"),
        })
    }
}

/// The Landlock ruleset: write access only beneath the plan's writable directories (and to
/// its device files); no signals out of the domain from ABI 6.
fn ruleset(plan: &Plan, abi: ABI) -> Result<OwnedFd, FloorError> {
    let lerr = |e: landlock::RulesetError| FloorError::Ruleset(e.to_string());
    // Device ioctls are left alone: terminals need them, and they write no file.
    let handled = AccessFs::from_write(abi) & !AccessFs::IoctlDev & !AccessFs::ResolveUnix;
    let mut ruleset = Ruleset::default().handle_access(handled).map_err(lerr)?;
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::Signal).map_err(lerr)?;
    }
    let mut created = ruleset.create().map_err(lerr)?;
    let rule = |path: &Path, access| {
        let fd = PathFd::new(path).map_err(|e| FloorError::Rule {
            path: path.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok::<_, FloorError>(PathBeneath::new(fd, access))
    };
    for dir in &plan.writable {
        created = created.add_rule(rule(dir, handled)?).map_err(lerr)?;
    }
    for file in &plan.devices {
        let access = handled & AccessFs::from_file(abi);
        created = created.add_rule(rule(file, access)?).map_err(lerr)?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or(FloorError::Unsupported)
}

impl Namespaces {
    fn new(plan: &Plan, scratch: &Path) -> Result<Namespaces, FloorError> {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        let mut mounts = Vec::new();
        for dir in &plan.pinned {
            mounts.push(Mount::Bind {
                path: cstring(dir)?,
                remount: None,
            });
        }
        for path in &plan.read_only {
            mounts.push(Mount::Bind {
                path: cstring(path)?,
                remount: Some(libc::MS_RDONLY | locked_flags(path)),
            });
        }
        for dir in &plan.reopened {
            // A bind inherits the read-only flag of the mount it is taken from.
            mounts.push(Mount::Bind {
                path: cstring(dir)?,
                remount: Some(locked_flags(dir) & !libc::MS_RDONLY),
            });
        }
        let mut empty_file = None;
        for path in &plan.hidden {
            if path.is_dir() {
                mounts.push(Mount::Empty {
                    path: cstring(path)?,
                });
                continue;
            }
            let src = match &empty_file {
                Some(src) => src,
                None => empty_file.insert(make_empty_file(scratch)?),
            };
            mounts.push(Mount::EmptyFile {
                src: cstring(src)?,
                path: cstring(path)?,
                flags: locked_flags(path),
            });
        }
        Ok(Namespaces {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            mounts,
        })
    }

    /// A user namespace (the same uid and gid, mapped to themselves) and a mount namespace,
    /// with the plan's binds and empty mounts.
    fn enter(&self, net: bool) -> std::io::Result<()> {
        // SAFETY: plain system calls on values we own; nothing allocates.
        unsafe {
            let flags = match net {
                true => libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWNET,
                false => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
            };
            if libc::unshare(flags) != 0 {
                return fail(b"ahp-wrap: floor: cannot create a user and mount namespace (run with --floor off, or see docs/floor.md)\n");
            }
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", &self.uid_map)?;
            write_proc(c"/proc/self/gid_map", &self.gid_map)?;
            if net {
                loopback_up()?;
            }
            let none = std::ptr::null::<libc::c_char>();
            if libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return fail(b"ahp-wrap: floor: cannot make the mounts private\n");
            }
            for m in &self.mounts {
                let ok = match m {
                    Mount::Bind { path, remount } => {
                        let p = path.as_ptr();
                        libc::mount(p, p, none, libc::MS_BIND | libc::MS_REC, std::ptr::null()) == 0
                            && remount.is_none_or(|flags| {
                                let f = libc::MS_REMOUNT | libc::MS_BIND | flags;
                                libc::mount(none, p, none, f, std::ptr::null()) == 0
                            })
                    }
                    Mount::Empty { path } => {
                        let f =
                            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                        libc::mount(
                            c"tmpfs".as_ptr(),
                            path.as_ptr(),
                            c"tmpfs".as_ptr(),
                            f,
                            c"size=4k,mode=0555".as_ptr().cast(),
                        ) == 0
                    }
                    Mount::EmptyFile { src, path, flags } => {
                        let p = path.as_ptr();
                        libc::mount(src.as_ptr(), p, none, libc::MS_BIND, std::ptr::null()) == 0
                            && {
                                let f = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags;
                                libc::mount(none, p, none, f, std::ptr::null()) == 0
                            }
                    }
                };
                if !ok {
                    return fail(b"ahp-wrap: floor: a protecting mount failed\n");
                }
            }
        }
        Ok(())
    }
}

/// Brings `lo` up in the new network namespace (SIOCSIFFLAGS).
///
/// # Safety
/// For a pre-exec step: no allocation.
unsafe fn loopback_up() -> std::io::Result<()> {
    let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if s < 0 {
        return fail(b"ahp-wrap: floor: cannot open a socket in the network namespace\n");
    }
    // struct ifreq: the name, then the flags (a short) at offset 16.
    let mut ifr = [0u8; 40];
    ifr[0] = b'l';
    ifr[1] = b'o';
    let flags = (libc::IFF_UP | libc::IFF_RUNNING) as i16;
    ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
    let r = libc::ioctl(s, libc::SIOCSIFFLAGS as _, ifr.as_mut_ptr());
    libc::close(s);
    if r != 0 {
        return fail(b"ahp-wrap: floor: cannot bring loopback up in the network namespace\n");
    }
    Ok(())
}

/// Writes `data` to a /proc file with plain system calls.
///
/// # Safety
/// For a pre-exec step: no allocation.
unsafe fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return fail(b"ahp-wrap: floor: cannot open a /proc/self map\n");
    }
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    libc::close(fd);
    if n != data.len() as isize {
        return fail(b"ahp-wrap: floor: cannot write a /proc/self map\n");
    }
    Ok(())
}

/// Says `what` on stderr and returns the error in `errno`.
fn fail(what: &[u8]) -> std::io::Result<()> {
    let e = std::io::Error::last_os_error();
    // SAFETY: write(2) of a static buffer.
    unsafe { libc::write(2, what.as_ptr().cast(), what.len()) };
    Err(e)
}

/// The flags of the mount `path` is on that a read-only remount must keep.
fn locked_flags(path: &Path) -> libc::c_ulong {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return 0;
    };
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs into a zeroed struct we own.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let f = st.f_flag;
    let mut out = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f & st_flag != 0 {
            out |= ms_flag;
        }
    }
    out
}

fn make_empty_file(dir: &Path) -> Result<PathBuf, FloorError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("floor-empty");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o444)
        .open(&path)
        .map_err(|source| FloorError::Prepare {
            what: "the empty file in",
            path: dir.display().to_string(),
            source,
        })?;
    Ok(path)
}

fn cstring(path: &Path) -> Result<CString, FloorError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| FloorError::Prepare {
        what: "a path with a NUL byte:",
        path: path.display().to_string(),
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernel_reports_what_it_offers() {
        let s = Support::probe();
        let plan = Plan {
            net: Some(super::super::plan::NetPlan { loopback: true }),
            ..Plan::default()
        };
        let r = s.report(&plan);
        assert_eq!(r.enforced.is_empty(), s.landlock_abi < 1);
        if s.landlock_abi >= 6 && s.namespaces.is_ok() {
            assert!(r.complete(), "{r:?}");
        }
    }
}
