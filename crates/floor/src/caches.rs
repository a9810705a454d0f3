//! The package caches, add-only: each cache is the lower layer of an overlay the agent's
//! tree sees in its place (mounted in its mount namespace, the floor's `namespaces` module),
//! whose upper layer lies in the user's state directory, out of the tree's reach. At the
//! end of the run, once the tree has ended, [`merge`] walks the upper layer: an entry the
//! cache did not have is moved into it (the next build finds it warm); a change to an
//! entry the cache had (its content, or its removal) is not applied: it is kept aside with
//! a record that `ahp-wrap restore` applies once the person has read it. Content rewritten
//! the same (a lock file opened for writing) is no change.
//!
//! This module makes the layers' directories and merges them; it never mounts.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::Overlay;
use super::{Feature, Unavailable};

mod kinds;
use kinds::Kind;
pub use kinds::Verified;

/// The kernel release from which an overlay can be mounted in a user namespace (5.11).
const OVERLAY_IN_USERNS: (u32, u32) = (5, 11);

/// Whether this kernel mounts overlays in a user namespace, or why not.
pub fn possible() -> Result<(), Unavailable> {
    let (major, minor) = kernel();
    if (major, minor) >= OVERLAY_IN_USERNS {
        Ok(())
    } else {
        Err(Unavailable::KernelTooOld(Feature::OverlayInUserNamespace {
            release: (major, minor),
        }))
    }
}

/// Whether the file system of `dir` can hold an overlay's upper layer (extended attributes
/// in the `user.` namespace, whiteouts, `O_TMPFILE`), or why not: another overlay (a
/// container's root file system), a network or FUSE file system, a tmpfs before Linux 6.6.
pub(crate) fn upper_possible(dir: &Path) -> Result<(), Unavailable> {
    use nix::sys::statfs::{
        FsType, FUSE_SUPER_MAGIC, NFS_SUPER_MAGIC, OVERLAYFS_SUPER_MAGIC, TMPFS_MAGIC,
    };
    let st = nix::sys::statfs::statfs(dir).map_err(|errno| Unavailable::Statfs {
        dir: dir.to_owned(),
        errno,
    })?;
    // SMB's (CIFS and SMB2) are in neither nix nor libc.
    let smb = |magic: u32| st.filesystem_type() == FsType(magic.into());
    let kind = match st.filesystem_type() {
        OVERLAYFS_SUPER_MAGIC => "an overlay (a container's root file system?)",
        NFS_SUPER_MAGIC => "NFS",
        FUSE_SUPER_MAGIC => "a FUSE file system",
        _ if smb(0xff53_4d42) || smb(0xfe53_4d42) => "an SMB share",
        TMPFS_MAGIC if kernel() < (6, 6) => "a tmpfs before Linux 6.6",
        _ => return Ok(()),
    };
    Err(Unavailable::UpperLayerOn {
        dir: dir.to_owned(),
        kind,
    })
}

/// This kernel's release, as (major, minor).
fn kernel() -> (u32, u32) {
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor)
}

/// The caches whose overlay is missing from the mount table of the process `pid` (its
/// mount could not be made there): they are written in place.
pub fn unmounted(pid: i32, overlays: &[Overlay]) -> Vec<PathBuf> {
    let Ok(table) = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")) else {
        return Vec::new(); // gone already: nothing to tell
    };
    let overlaid: Vec<PathBuf> = super::mountinfo::parse(&table)
        .filter(|m| m.fstype == "overlay")
        .map(|m| PathBuf::from(m.point))
        .collect();
    overlays
        .iter()
        .filter(|o| !overlaid.contains(&o.cache))
        .map(|o| o.cache.clone())
        .collect()
}

/// The layers made for a run's caches ([`make`]), their overlays, and the caches an overlay
/// cannot name (written in place, said in the run's report).
pub type Laid = (Layers, Vec<Overlay>, Vec<String>);

/// One run's directory of layers, locked while the run lasts and removed with what is left
/// in it when dropped (a run that never reached its end merges nothing: a file half
/// written when it was killed must not land in a cache).
#[derive(Debug)]
pub struct Layers {
    dir: PathBuf,
    _lock: std::fs::File,
    /// Another process removes the directory once the run is over ([`Layers::hand_over`]).
    handed: bool,
}

impl Layers {
    /// The directory, for a process that removes it after the wrapper has exited (the
    /// guardian): nothing is left to do when this is dropped.
    pub fn hand_over(&mut self) -> &Path {
        self.handed = true;
        &self.dir
    }

    /// Removed when dropped after all (the other process could not be told).
    pub fn take_back(&mut self) {
        self.handed = false;
    }
}

impl Drop for Layers {
    /// Renames the directory to a name [`sweep`] removes (one rename now; removing a tree
    /// of directories is many synchronous file-system writes, done by a later run's sweep),
    /// unless it was handed over.
    fn drop(&mut self) {
        if self.handed {
            return;
        }
        let trash = self.dir.with_file_name(format!(
            "{TRASH}{}",
            self.dir.file_name().unwrap_or_default().to_string_lossy()
        ));
        if std::fs::rename(&self.dir, &trash).is_err() {
            let _ = crate::rundir::remove_all(&self.dir);
        }
    }
}

/// The prefix of a finished run's layers, left for [`sweep`].
const TRASH: &str = ".done-";

/// Removes the directories of layers in `dir` whose run is over: finished (renamed), or
/// killed before its end (no process holds their lock). On a thread of its own: nothing
/// waits for it.
pub fn sweep(dir: &Path) {
    let dir = dir.to_owned();
    let _ = std::thread::Builder::new()
        .name("ahp-wrap-sweep".into())
        .spawn(move || {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let done = entry.file_name().to_string_lossy().starts_with(TRASH);
                let unheld = || std::fs::File::open(&path).is_ok_and(|f| f.try_lock().is_ok());
                if done || unheld() {
                    tracing::debug!("floor: removing the layers of a run: {}", path.display());
                    let _ = crate::rundir::remove_all(&path);
                }
            }
        });
}

/// Makes a layer (`<i>-upper` and `<i>-work`, private) for each cache in `dir`, which must not
/// exist. A cache whose path the overlay's options cannot carry (a `,`, `:` or `\`) gets
/// none: it is written in place, which the second list says.
pub fn make(caches: &[PathBuf], dir: &Path) -> std::io::Result<Laid> {
    let laid = lay_out(caches, dir)?;
    for o in &laid.1 {
        std::fs::create_dir(&o.upper)?;
        std::fs::create_dir(&o.work)?;
    }
    Ok(laid)
}

/// As [`make`], each layer's two directories named but not made: for the maker of the mount
/// namespace made ahead, which makes them itself, on the other processor, before it mounts
/// their overlay (ten directories on a journaled file system took the wrapper's start
/// 0.4 ms). One it cannot make leaves its overlay unmounted, as any overlay the maker cannot
/// mount is: missing from the agent's mount table after the start.
pub fn lay_out(caches: &[PathBuf], dir: &Path) -> std::io::Result<Laid> {
    use std::os::unix::fs::DirBuilderExt;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true).mode(0o700);
    builder.create(dir)?;
    upper_possible(dir).map_err(std::io::Error::other)?;
    // Where it really lies: the end of the run checks the layers are still there.
    let dir = &dir.canonicalize()?;
    let lock = std::fs::File::open(dir)?;
    lock.try_lock().map_err(std::io::Error::other)?;
    let layers = Layers {
        dir: dir.to_owned(),
        _lock: lock,
        handed: false,
    };
    let mut made = Vec::new();
    let mut gaps = Vec::new();
    for (i, cache) in caches.iter().enumerate() {
        let awkward = |p: &Path| {
            p.as_os_str()
                .as_encoded_bytes()
                .iter()
                .any(|b| b",:\\".contains(b))
        };
        // Side by side in `dir` (two directories a cache, no third to hold them: each
        // costs a journaled write on ext4).
        let (upper, work) = (
            dir.join(format!("{i}-upper")),
            dir.join(format!("{i}-work")),
        );
        if awkward(cache) || awkward(&upper) {
            gaps.push(format!(
                "the cache {} is written in place: an overlay cannot name it",
                cache.display()
            ));
            continue;
        }
        made.push(Overlay {
            cache: cache.clone(),
            upper,
            work,
        });
    }
    Ok((layers, made, gaps))
}

/// What the end of a run made of one cache's layer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Merged {
    /// Entries (files, directories with all they hold, links) added to the cache.
    pub added: usize,
    /// Changes to entries the cache had, kept aside, not applied.
    pub kept: Vec<Change>,
    /// The record of the kept changes, where they were kept.
    pub record: Option<PathBuf>,
    /// Entries that could be neither added nor kept (and why).
    pub lost: Vec<String>,
    /// Entries added that a later tool would trust without a check: not added, left in the
    /// run's layer (relative to the cache, with why).
    pub held: Vec<(PathBuf, &'static str)>,
}

/// One change to an entry a cache had before the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The entry, relative to the cache.
    pub path: PathBuf,
    /// The tree removed it (else it rewrote or replaced it: what it wrote is held).
    pub removed: bool,
}

/// The record of one cache's kept changes (`….cache.json` in the quarantine).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The cache.
    pub cache: PathBuf,
    /// What the tree wrote, at each change's relative path.
    pub held: PathBuf,
    /// Each entry the cache had before the run that the tree rewrote, replaced or removed.
    pub changes: Vec<Change>,
}

/// Moves the new entries of `overlay`'s upper layer that their tool checks before use into
/// its cache (a `.crate` file when its checksum is one `verified` knows), holds the others in
/// the layer (the `kinds` module), and keeps the changes to existing ones in `quarantine` (when
/// given; else they are lost, and said so). Run only when no process sees the overlay any
/// more.
pub fn merge(
    overlay: &Overlay,
    quarantine: Option<&Path>,
    verified: &Verified,
) -> std::io::Result<Merged> {
    // Made canonical: a layer that is no longer the directory it was (a link put in its
    // place) is not read, let alone moved from.
    let real = overlay.upper.canonicalize()?;
    if real != overlay.upper || !overlay.upper.symlink_metadata()?.is_dir() {
        return Err(std::io::Error::other(format!(
            "its layer {} was replaced during the run",
            overlay.upper.display()
        )));
    }
    let mut walk = Walk {
        verified,
        added: 0,
        kept: Vec::new(),
        lost: Vec::new(),
        held: Vec::new(),
    };
    walk.dir(&overlay.cache, &overlay.upper, Path::new(""))?;
    let mut merged = Merged {
        added: walk.added,
        lost: walk.lost,
        held: walk.held,
        ..Merged::default()
    };
    if !walk.kept.is_empty() {
        match quarantine {
            Some(q) => {
                let base = crate::statefile::aside::new_name(q, &overlay.cache)?;
                let held = q.join(&base);
                for (change, from) in &walk.kept {
                    let Some(from) = from else { continue };
                    let to = held.join(&change.path);
                    if let Some(parent) = to.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    crate::statefile::aside::relocate(from, &to)?;
                }
                let record = q.join(format!("{base}.cache.json"));
                let changes = walk.kept.iter().map(|(c, _)| c.clone()).collect();
                let text = serde_json::to_vec_pretty(&Record {
                    cache: overlay.cache.clone(),
                    held,
                    changes,
                })
                .map_err(std::io::Error::other)?;
                std::fs::write(&record, text)?;
                merged.record = Some(record);
            }
            None => merged.lost.push(format!(
                "{} change(s) to existing entries: no state directory for a quarantine",
                walk.kept.len()
            )),
        }
        merged.kept = walk.kept.into_iter().map(|(c, _)| c).collect();
    }
    Ok(merged)
}

/// Applies a record's changes to its cache: each entry the tree rewrote replaces the
/// cache's, each one it removed is removed. What the cache held is moved beside the held
/// changes (`….before`), not deleted. Removes the record.
pub fn apply(record_path: &Path, record: &Record) -> std::io::Result<()> {
    let before = record.held.with_extension("before");
    for change in &record.changes {
        let target = record.cache.join(&change.path);
        if crate::beneath::kind(&target)
            .map_err(crate::beneath::Refused::into_io)?
            .is_some()
        {
            let aside = before.join(&change.path);
            if let Some(parent) = aside.parent() {
                std::fs::create_dir_all(parent)?;
            }
            crate::statefile::aside::relocate(&target, &aside)?;
        }
        if !change.removed {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            crate::statefile::aside::relocate(&record.held.join(&change.path), &target)?;
        }
    }
    std::fs::remove_file(record_path)
}

struct Walk<'a> {
    verified: &'a Verified,
    added: usize,
    /// Each change, with what the tree wrote (none for a removal).
    kept: Vec<(Change, Option<PathBuf>)>,
    lost: Vec<String>,
    held: Vec<(PathBuf, &'static str)>,
}

impl Walk<'_> {
    /// `upper` is the layer's view of the cache's directory `lower`; `rel` their path.
    fn dir(&mut self, lower: &Path, upper: &Path, rel: &Path) -> std::io::Result<()> {
        for entry in std::fs::read_dir(upper)? {
            let name = entry?.file_name();
            let (up, low, rel) = (upper.join(&name), lower.join(&name), rel.join(&name));
            let um = up.symlink_metadata()?;
            let lm = low.symlink_metadata().ok();
            let kind = um.file_type();
            if kind.is_char_device() && um.rdev() == 0 {
                // A whiteout: the tree removed what the cache has there.
                if lm.is_some() {
                    self.kept.push((
                        Change {
                            path: rel,
                            removed: true,
                        },
                        None,
                    ));
                }
                continue;
            }
            match lm {
                None if kind.is_dir() || kind.is_file() || kind.is_symlink() => {
                    self.new_entry(&up, &low, rel, kind)?;
                }
                None => {} // a socket or a FIFO: nothing a cache keeps
                Some(lm) if kind.is_dir() && lm.is_dir() && !opaque(&up) => {
                    self.dir(&low, &up, &rel)?;
                }
                Some(lm) if kind.is_file() && lm.is_file() && same(&up, &low)? => {}
                Some(_) => self.kept.push((
                    Change {
                        path: rel,
                        removed: false,
                    },
                    Some(up),
                )),
            }
        }
        Ok(())
    }
}

impl Walk<'_> {
    /// The entry `up` the cache does not have at `low`: added, held, or (a directory above
    /// entries of several kinds) made and walked.
    fn new_entry(
        &mut self,
        up: &Path,
        low: &Path,
        rel: PathBuf,
        file_type: std::fs::FileType,
    ) -> std::io::Result<()> {
        let merge = match kinds::kind(low) {
            Kind::Merge => true,
            Kind::Hold(why) => {
                self.held.push((rel, why));
                false
            }
            Kind::Crate => {
                let known = file_type.is_file() && self.crate_known(up, low);
                if !known {
                    self.held.push((
                        rel,
                        "a .crate file whose checksum neither the registry's index nor the \
                         workspace's Cargo.lock recorded before the run",
                    ));
                }
                known
            }
            Kind::Descend if file_type.is_dir() => {
                let mode = up.symlink_metadata()?.permissions().mode();
                match std::fs::create_dir(low) {
                    Ok(()) => {
                        let _ =
                            std::fs::set_permissions(low, std::fs::Permissions::from_mode(mode));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => {
                        self.lost.push(format!("{}: {e}", low.display()));
                        return Ok(());
                    }
                }
                return self.dir(low, up, &rel);
            }
            Kind::Descend => {
                self.held.push((rel, kinds::UNKNOWN));
                false
            }
        };
        if merge {
            match add(up, low) {
                Ok(()) => self.added += 1,
                Err(e) => self.lost.push(format!("{}: {e}", low.display())),
            }
        }
        Ok(())
    }

    /// Whether the `.crate` file `up` (to land at `low`) has a checksum recorded before the run.
    fn crate_known(&self, up: &Path, low: &Path) -> bool {
        use sha2::Digest;
        let (Some(registry), Some(file), Some(lower)) = (
            low.parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str()),
            low.file_name().and_then(|n| n.to_str()),
            low.ancestors().nth(3),
        ) else {
            return false;
        };
        let Ok(mut f) = crate::beneath::open_file(up) else {
            return false;
        };
        let mut hasher = sha2::Sha256::new();
        if std::io::copy(&mut f, &mut hasher).is_err() {
            return false;
        }
        let sum: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.verified.knows(lower, registry, file, &sum)
    }
}

/// Moves the new entry `up` to `low`, where nothing may be (what appeared there since, from
/// outside the tree, stays). A directory the user may not write (Go's module directories)
/// is made writable for the move.
fn add(up: &Path, low: &Path) -> std::io::Result<()> {
    use nix::libc;
    let rename = || {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        renameat_with(CWD, up, CWD, low, RenameFlags::NOREPLACE).map_err(std::io::Error::from)
    };
    match rename() {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EACCES) && up.symlink_metadata()?.is_dir() => {
            let mode = up.symlink_metadata()?.permissions().mode();
            std::fs::set_permissions(up, std::fs::Permissions::from_mode(mode | 0o700))?;
            rename()?;
            std::fs::set_permissions(low, std::fs::Permissions::from_mode(mode))
        }
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            crate::statefile::aside::relocate(up, low)
        }
        Err(e) => Err(e),
    }
}

/// Whether the overlay marked the directory `up` as replacing the lower one (the tree
/// removed the cache's directory and made one of the same name).
fn opaque(up: &Path) -> bool {
    xattr(up, c"user.overlay.opaque").is_some_and(|v| v == b"y")
}

fn xattr(path: &Path, name: &std::ffi::CStr) -> Option<Vec<u8>> {
    let mut buf = [0u8; 16];
    let n = rustix::fs::lgetxattr(path, name, &mut buf[..]).ok()?;
    Some(buf[..n].to_vec())
}

/// Whether the two files hold the same bytes.
fn same(a: &Path, b: &Path) -> std::io::Result<bool> {
    let (ma, mb) = (a.metadata()?, b.metadata()?);
    if ma.len() != mb.len() {
        return Ok(false);
    }
    let (mut fa, mut fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = read_full(&mut fa, &mut ba)?;
        let m = read_full(&mut fb, &mut bb)?;
        if n != m || ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests;
