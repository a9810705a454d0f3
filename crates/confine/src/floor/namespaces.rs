//! The agent's user and mount namespaces (and network namespace, with the floor's network
//! part), on Linux: what [`Prepared`](super::Prepared) makes of a plan's binds, empty mounts
//! and id maps in the parent, and the step that enters them in the agent's process (joining
//! the user and network namespaces [made ahead](super::premade) when they were).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::netns;
use super::sys::fail;
use super::{FloorError, Plan, Writes};

mod resolv;

/// One mount the child makes in its own mount namespace.
#[derive(Debug)]
enum Mount {
    /// An overlay over the cache `path` (its own lower layer), with the run's layer for it;
    /// then a Landlock rule on its root (a rule holds on an inode, and the overlay's root is
    /// not the cache's).
    Overlay { path: CString, options: CString },
    /// A writable root beneath a cache, `src`, bound onto an empty directory of the run's
    /// before the overlay covers it...
    Stage { src: CString, stage: CString },
    /// ...and that bind moved over the overlay's view of it, `path`.
    Unstage { stage: CString, path: CString },
    /// `path` bound onto itself, then (`Some(flags)`) remounted with `flags`: read-only or
    /// writable, with the flags its mount already has (a user namespace may not clear them).
    Bind {
        path: CString,
        remount: Option<libc::c_ulong>,
    },
    /// An empty, read-only tmpfs over a directory.
    Empty { path: CString },
    /// The run's private copy `src` of a mixed state file bound over it, then remounted
    /// with `flags` (writable: the copy's mount may be read-only, as the run directory is).
    Copy {
        src: CString,
        path: CString,
        flags: libc::c_ulong,
    },
    /// A file of the run's, `src` (the empty file, the tree's resolver settings), bound
    /// read-only over a file.
    File {
        src: CString,
        path: CString,
        flags: libc::c_ulong,
    },
    /// A writable root bound onto itself (and what is mounted beneath it), to be made
    /// writable again once everything is read-only.
    Root { path: CString },
    /// Every mount of the namespace made read-only (`mount_setattr`, recursive): the writes
    /// outside the writable roots refused by the mounts themselves, not by Landlock, so that
    /// a sandbox of the tree's own can mount in a namespace of its own (Landlock refuses
    /// every mount to a process it confines the files of).
    AllReadOnly,
    /// One mount made writable again: a writable root, a cache's overlay, `/proc` (where a
    /// nested sandbox writes its user namespace's id maps).
    Writable { path: CString },
}

#[derive(Debug)]
pub(super) struct Namespaces {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    mounts: Vec<Mount>,
    /// The user and network namespaces made ahead, to join instead of making them.
    pub(super) made: Option<NamespaceFds>,
    /// The mount namespace made ahead holds the plan's overlays: joined instead of made,
    /// and the overlays not mounted again.
    pub(super) premounted: bool,
    /// The working directory, entered again by its path once in the mount namespace made
    /// ahead (joining one leaves a process at its root); `None` when it has none (removed
    /// before the start: the agent then starts at the root).
    cwd: Option<CString>,
}

impl Namespaces {
    pub(super) fn new(
        plan: &Plan,
        scratch: &Path,
        writes: Writes,
    ) -> Result<Namespaces, FloorError> {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        let mut mounts = Vec::new();
        // A writable root beneath a cache is bound aside first, and moved over the overlay's
        // view of it once the overlay is there.
        let mut unstage = Vec::new();
        if !plan.overlays.is_empty() {
            for (i, dir) in plan.through.iter().enumerate() {
                let stage = scratch.join(format!("through-{i}"));
                std::fs::create_dir(&stage).map_err(|source| FloorError::Prepare {
                    what: "cannot make a directory to stage a bind in:",
                    path: stage.display().to_string(),
                    source,
                })?;
                let (stage, path) = (cstring(&stage)?, cstring(dir)?);
                mounts.push(Mount::Stage {
                    src: path.clone(),
                    stage: stage.clone(),
                });
                unstage.push(Mount::Unstage { stage, path });
            }
        }
        for o in &plan.overlays {
            mounts.push(Mount::Overlay {
                path: cstring(&o.cache)?,
                options: CString::new(o.options()).map_err(|_| nul(&o.cache))?,
            });
        }
        mounts.extend(unstage);
        if writes == Writes::Mounts {
            let caches: Vec<&PathBuf> = plan.overlays.iter().map(|o| &o.cache).collect();
            for dir in plan.writable.iter().filter(|w| !caches.contains(w)) {
                mounts.push(Mount::Root {
                    path: cstring(dir)?,
                });
            }
            mounts.push(Mount::AllReadOnly);
            let proc_ = Path::new("/proc").to_owned();
            let again = plan.writable.iter().chain(std::iter::once(&proc_));
            for dir in again.filter(|d| d.is_dir()) {
                mounts.push(Mount::Writable {
                    path: cstring(dir)?,
                });
            }
        }
        for dir in &plan.pinned {
            mounts.push(Mount::Bind {
                path: cstring(dir)?,
                remount: None,
            });
        }
        for copy in &plan.copies {
            mounts.push(Mount::Copy {
                src: cstring(&copy.copy)?,
                path: cstring(&copy.file)?,
                flags: locked_flags(&copy.copy) & !libc::MS_RDONLY,
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
            mounts.push(Mount::File {
                src: cstring(src)?,
                path: cstring(path)?,
                flags: locked_flags(path),
            });
        }
        let cwd = std::env::current_dir().ok().and_then(|d| cstring(&d).ok());
        Ok(Namespaces {
            uid_map: id_map(uid),
            gid_map: id_map(gid),
            mounts,
            made: None,
            premounted: false,
            cwd,
        })
    }

    /// Takes the namespaces made ahead; their mount namespace is joined when it holds the
    /// overlays of `plan` (and nothing is staged beneath a cache, which must happen before
    /// its overlay covers it); else it is let go and the agent's process makes its own.
    pub(super) fn take_made(&mut self, mut made: NamespaceFds, plan: &Plan) {
        self.premounted =
            made.mnt.is_some() && made.overlays == plan.overlays && plan.through.is_empty();
        if !self.premounted && made.mnt.take().is_some() {
            tracing::debug!("floor: the overlays made ahead are not the plan's; made again");
        }
        self.made = Some(made);
    }

    /// A user namespace (the same uid and gid, mapped to themselves) and a mount namespace,
    /// with the plan's overlays, binds and empty mounts. `landlock` is the ruleset (and the
    /// access it handles) that each overlay's root is added to, writable.
    pub(super) fn enter(&self, net: bool, landlock: Option<(i32, u64)>) -> std::io::Result<()> {
        // SAFETY: plain system calls on values we own; nothing allocates.
        unsafe {
            match &self.made {
                Some(made) => {
                    made.join()?;
                    match made.mnt.as_ref() {
                        Some(mnt) if self.premounted => {
                            use std::os::fd::AsRawFd;
                            if libc::setns(mnt.as_raw_fd(), libc::CLONE_NEWNS) != 0 {
                                return fail(b"ahp-wrap: floor: cannot join the mount namespace made for the agent\n");
                            }
                            // (A working directory removed before the start: the root.)
                            if self
                                .cwd
                                .as_ref()
                                .is_some_and(|cwd| libc::chdir(cwd.as_ptr()) != 0)
                            {
                                return fail(b"ahp-wrap: floor: cannot enter the working directory again in the agent's mount namespace\n");
                            }
                        }
                        _ => {
                            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                                return fail(b"ahp-wrap: floor: cannot create a mount namespace (run with --floor off, or see docs/floor.md)\n");
                            }
                        }
                    }
                }
                None => {
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
                        netns::loopback_up()?;
                    }
                }
            }
            let none = std::ptr::null::<libc::c_char>();
            if !make_mounts_private() {
                return fail(b"ahp-wrap: floor: cannot make the mounts private\n");
            }
            for m in &self.mounts {
                let ok = match m {
                    // A cache whose overlay cannot be mounted here (its file system refuses to
                    // be a layer) stays as it is, written in place: the wrapper sees the mount
                    // missing from the agent's mount table and says so.
                    Mount::Overlay { path, options } => {
                        // Mounted ahead, or mounted now.
                        let mounted = self.premounted || mount_overlay(path, options);
                        let ruled = landlock.is_none_or(|(ruleset, access)| {
                            writable_rule(ruleset, access, path).is_ok()
                        });
                        if mounted && !ruled {
                            libc::umount2(path.as_ptr(), libc::MNT_DETACH);
                        }
                        true
                    }
                    Mount::Stage { src, stage } => {
                        let f = libc::MS_BIND | libc::MS_REC;
                        libc::mount(src.as_ptr(), stage.as_ptr(), none, f, std::ptr::null()) == 0
                    }
                    Mount::Unstage { stage, path } => {
                        let f = libc::MS_MOVE;
                        libc::mount(stage.as_ptr(), path.as_ptr(), none, f, std::ptr::null()) == 0
                    }
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
                    Mount::Copy { src, path, flags } => {
                        let p = path.as_ptr();
                        libc::mount(src.as_ptr(), p, none, libc::MS_BIND, std::ptr::null()) == 0
                            && {
                                let f = libc::MS_REMOUNT | libc::MS_BIND | flags;
                                libc::mount(none, p, none, f, std::ptr::null()) == 0
                            }
                    }
                    Mount::Root { path } => {
                        let (p, f) = (path.as_ptr(), libc::MS_BIND | libc::MS_REC);
                        libc::mount(p, p, none, f, std::ptr::null()) == 0
                    }
                    Mount::AllReadOnly => set_read_only(c"/", true, true),
                    // Not fatal: a cache whose overlay the kernel refused is no mount to clear
                    // (it stays read-only, and the run says its overlay is missing).
                    Mount::Writable { path } => {
                        set_read_only(path, false, false);
                        true
                    }
                    Mount::File { src, path, flags } => {
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
            // The working directory entered again by its path: a bind made over it (the
            // workspace as a writable root) is not the directory the process was in.
            if let Some(cwd) = &self.cwd {
                libc::chdir(cwd.as_ptr());
            }
        }
        Ok(())
    }
}

impl Namespaces {
    /// With the writes refused by mounts: the calling process (the agent's, its mounts made)
    /// moves into a user and mount namespace of its own, nested in the floor's. The floor's
    /// mounts are copied into a less privileged namespace there, and so locked: no process of
    /// the tree can unmount, move or remount them, even as root (which it is, inside, with
    /// every capability, for the sandboxes it starts). Without this, a root in the floor's own
    /// user namespace could undo them: Landlock, which refuses every mount, does not then.
    /// The network namespace stays the floor's, owned by its user namespace: nothing of the
    /// tree has a capability over it either.
    ///
    /// # Safety
    /// For a pre-exec step: system calls only, no allocation.
    pub(super) unsafe fn seal(&self) -> std::io::Result<()> {
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
            return fail(b"ahp-wrap: floor: cannot seal the floor's mounts in a user namespace\n");
        }
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", &self.uid_map)?;
        write_proc(c"/proc/self/gid_map", &self.gid_map)?;
        if let Some(cwd) = &self.cwd {
            libc::chdir(cwd.as_ptr());
        }
        Ok(())
    }
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `MOUNT_ATTR_RDONLY`.
const MOUNT_ATTR_RDONLY: u64 = 1;

/// Sets (`on`) or clears the read-only attribute of the mount at `path` (and, `recursive`,
/// of every mount beneath it).
///
/// # Safety
/// For a pre-exec step: a system call, no allocation.
unsafe fn set_read_only(path: &std::ffi::CStr, on: bool, recursive: bool) -> bool {
    let attr = MountAttr {
        attr_set: if on { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if on { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    libc::syscall(
        libc::SYS_mount_setattr,
        libc::AT_FDCWD,
        path.as_ptr(),
        flags as libc::c_uint,
        std::ptr::addr_of!(attr),
        std::mem::size_of::<MountAttr>(),
    ) == 0
}

/// Makes every mount of this mount namespace private (none propagates to another).
///
/// # Safety
/// For a pre-exec step: a system call, no allocation.
pub(super) unsafe fn make_mounts_private() -> bool {
    let none = std::ptr::null::<libc::c_char>();
    let flags = libc::MS_REC | libc::MS_PRIVATE;
    libc::mount(none, c"/".as_ptr(), none, flags, std::ptr::null()) == 0
}

/// Mounts an overlay over `path` with `options` (an overlay's
/// [`options`](super::plan::Overlay::options)).
///
/// # Safety
/// For a pre-exec step: a system call, no allocation.
pub(super) unsafe fn mount_overlay(path: &std::ffi::CStr, options: &std::ffi::CStr) -> bool {
    let overlay = c"overlay".as_ptr();
    libc::mount(overlay, path.as_ptr(), overlay, 0, options.as_ptr().cast()) == 0
}

/// Landlock's `struct landlock_path_beneath_attr` (packed, as the kernel's).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Adds `dir` to the Landlock `ruleset`, with `access` beneath it.
///
/// # Safety
/// For a pre-exec step: no allocation.
unsafe fn writable_rule(ruleset: i32, access: u64, dir: &std::ffi::CStr) -> std::io::Result<()> {
    let fd = libc::open(
        dir.as_ptr(),
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
    );
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: fd,
    };
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;
    let r = libc::syscall(
        libc::SYS_landlock_add_rule,
        ruleset,
        LANDLOCK_RULE_PATH_BENEATH,
        std::ptr::addr_of!(attr),
        0,
    );
    let e = std::io::Error::last_os_error();
    libc::close(fd);
    if r != 0 {
        return Err(e);
    }
    Ok(())
}

/// A `uid_map` or `gid_map` line that maps `id` to itself, and nothing else.
pub(super) fn id_map(id: u32) -> Vec<u8> {
    format!("{id} {id} 1\n").into_bytes()
}

/// Writes `data` to a /proc file with plain system calls, or says why not.
///
/// # Safety
/// For a pre-exec step: no allocation.
unsafe fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    if write_file(path, data).is_err() {
        return fail(b"ahp-wrap: floor: cannot write a /proc/self map\n");
    }
    Ok(())
}

/// Writes `data` to a file in one `write(2)`, silently.
///
/// # Safety
/// For a pre-exec step: no allocation.
pub(super) unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    let e = std::io::Error::last_os_error();
    libc::close(fd);
    if n != data.len() as isize {
        return Err(e);
    }
    Ok(())
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
    CString::new(path.as_os_str().as_bytes()).map_err(|_| nul(path))
}

fn nul(path: &Path) -> FloorError {
    FloorError::Prepare {
        what: "a path with a NUL byte:",
        path: path.display().to_string(),
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    }
}
/// A user namespace and a network namespace (with loopback up) made for the agent to join,
/// and the mount namespace with the caches' overlays, when some were asked.
#[derive(Debug)]
pub(crate) struct NamespaceFds {
    pub user: OwnedFd,
    pub net: OwnedFd,
    pub mnt: Option<OwnedFd>,
    /// The overlays mounted (or tried) in `mnt`.
    pub overlays: Vec<super::plan::Overlay>,
}

impl NamespaceFds {
    /// In the agent's process: joins the user namespace, then the network namespace.
    ///
    /// # Safety
    /// For a pre-exec step: no allocation.
    pub(super) unsafe fn join(&self) -> std::io::Result<()> {
        if libc::setns(self.user.as_raw_fd(), libc::CLONE_NEWUSER) != 0 {
            return fail(b"ahp-wrap: floor: cannot join the user namespace made for the agent\n");
        }
        if libc::setns(self.net.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
            return fail(
                b"ahp-wrap: floor: cannot join the network namespace made for the agent\n",
            );
        }
        Ok(())
    }
}
