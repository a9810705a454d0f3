//! Paths the wrapper acts on for the agent outside its floor (moving a protected path aside,
//! merging a cache's additions, restoring a checkpoint, reading a file into the checkpoints),
//! resolved without following a symbolic link.
//!
//! Each such path is recorded resolved, with its links followed, before the agent starts (the
//! floor's plan, a checkpoint's workspace), so a link anywhere in it afterwards is one the
//! agent's tree made, or one it could have made: followed with the person's full authority, it
//! would aim a move, a merge or a restore at any file of theirs (`proj/.claude` linked to
//! `~/.claude`, and "moving aside the created `proj/.claude/settings.json`" takes the user's
//! own). So every component is opened with `openat2(RESOLVE_NO_SYMLINKS)` (per component with
//! `O_NOFOLLOW` on a kernel before 5.6), and a link where a directory or a file was expected is
//! refused, naming the link.

#![forbid(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;

/// What an entry is (a directory, a file, a link, …).
pub use rustix::fs::FileType;

/// Why a path was not acted on.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// A component of the path is a symbolic link.
    #[error("{0} is a symbolic link where a directory or a file was expected (not followed)")]
    Link(PathBuf),
    /// The path is not absolute, or ends in `..`.
    #[error("{0} is not an absolute path to an entry")]
    NotAbsolute(PathBuf),
    /// Something is not what it must be (a FIFO where a file was expected).
    #[error("{path} is {what}")]
    NotA {
        /// The path.
        path: PathBuf,
        /// What it is instead, as a phrase.
        what: &'static str,
    },
    /// The system call failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

impl Refused {
    /// Whether the path (or one of its directories) is not there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Refused::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// As an I/O error (a link refused reads as one too, with its sentence).
    pub fn into_io(self) -> std::io::Error {
        match self {
            Refused::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        }
    }

    fn io(path: &Path, e: Errno) -> Refused {
        Refused::Io {
            path: path.to_owned(),
            source: e.into(),
        }
    }
}

/// The flags that refuse any link on the way (magic links of `/proc` included).
fn no_links() -> ResolveFlags {
    ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// Opens `path` (absolute) with `flags`, following no link anywhere in it.
fn open(path: &Path, flags: OFlags) -> Result<OwnedFd, Refused> {
    if !path.is_absolute() {
        return Err(Refused::NotAbsolute(path.to_owned()));
    }
    let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    match rustix::fs::openat2(CWD, path, flags, Mode::empty(), no_links()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOSYS) => open_by_components(path, flags),
        // A link on the way (`ELOOP`), or as the last component where a directory was asked
        // for (`ENOTDIR`: `O_NOFOLLOW` opened the link itself).
        Err(e @ (Errno::LOOP | Errno::NOTDIR)) => match first_link(path) {
            Some(link) => Err(Refused::Link(link)),
            None => Err(Refused::io(path, e)),
        },
        Err(e) => Err(Refused::io(path, e)),
    }
}

/// [`open`] on a kernel without `openat2`: each directory opened from the one before with
/// `O_NOFOLLOW`.
fn open_by_components(path: &Path, flags: OFlags) -> Result<OwnedFd, Refused> {
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut at =
        rustix::fs::open("/", dir_flags, Mode::empty()).map_err(|e| Refused::io(path, e))?;
    let mut walked = PathBuf::from("/");
    let parts: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    for (i, name) in parts.iter().enumerate() {
        walked.push(name);
        let last = i + 1 == parts.len();
        let f = if last { flags } else { dir_flags };
        let next = rustix::fs::openat(&at, *name, f, Mode::empty());
        at = match next {
            Ok(fd) => fd,
            Err(Errno::LOOP | Errno::NOTDIR) if is_link(&at, name) => {
                return Err(Refused::Link(walked));
            }
            Err(e) => return Err(Refused::io(&walked, e)),
        };
    }
    Ok(at)
}

fn is_link(dir: &impl AsFd, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

/// The first component of `path` that is a symbolic link, if any.
pub fn first_link(path: &Path) -> Option<PathBuf> {
    let mut walked = PathBuf::new();
    for c in path.components() {
        walked.push(c);
        if matches!(c, Component::Normal(_)) && walked.symlink_metadata().ok()?.is_symlink() {
            return Some(walked);
        }
    }
    None
}

/// An open directory, reached without following a link, and the name of an entry in it: the
/// place one path's last component is acted on.
#[derive(Debug)]
pub struct Entry {
    dir: OwnedFd,
    name: OsString,
    path: PathBuf,
}

impl Entry {
    /// The directory `path`'s last component lies in, opened without following a link (the
    /// last component itself may be one: it is acted on, never followed).
    pub fn of(path: &Path) -> Result<Entry, Refused> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Refused::NotAbsolute(path.to_owned()));
        };
        let dir = open(parent, OFlags::PATH | OFlags::DIRECTORY)?;
        Ok(Entry {
            dir,
            name: name.to_owned(),
            path: path.to_owned(),
        })
    }

    /// The path this entry was opened for.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What is there (the entry itself, not a link's target), or `None`.
    pub fn kind(&self) -> Result<Option<FileType>, Refused> {
        match rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(FileType::from_raw_mode(st.st_mode))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(Refused::io(&self.path, e)),
        }
    }

    /// Renames the entry to `to` (the destination's directory opened without following a
    /// link too). `EXDEV` comes back as it is: across file systems, the caller copies.
    pub fn rename_to(&self, to: &Entry) -> std::io::Result<()> {
        rustix::fs::renameat(&self.dir, &self.name, &to.dir, &to.name).map_err(Into::into)
    }

    /// Makes `to` a hard link to the entry (the destination's directory opened without
    /// following a link too). A link is linked itself, never its target: the caller looks at
    /// [`Entry::kind`] first, or at what it made after. `EXDEV` comes back as it is: across
    /// file systems, the caller copies.
    pub fn hard_link_to(&self, to: &Entry) -> std::io::Result<()> {
        rustix::fs::linkat(&self.dir, &self.name, &to.dir, &to.name, AtFlags::empty())
            .map_err(Into::into)
    }

    /// Removes the entry: a file or a link (never its target), or an empty directory.
    pub fn remove(&self) -> std::io::Result<()> {
        let dir = self.kind().map_err(Refused::into_io)? == Some(FileType::Directory);
        let flags = if dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        rustix::fs::unlinkat(&self.dir, &self.name, flags).map_err(Into::into)
    }

    /// Makes the entry a directory with `mode`; an existing directory is fine.
    pub fn make_dir(&self, mode: u32) -> std::io::Result<()> {
        match rustix::fs::mkdirat(&self.dir, &self.name, Mode::from_raw_mode(mode)) {
            Err(Errno::EXIST) if self.kind().ok().flatten() == Some(FileType::Directory) => Ok(()),
            other => other.map_err(Into::into),
        }
    }

    /// Makes the entry a symbolic link to `target` (it must not exist).
    pub fn make_link(&self, target: &Path) -> std::io::Result<()> {
        rustix::fs::symlinkat(target, &self.dir, &self.name).map_err(Into::into)
    }

    /// Creates the entry as a new file with `mode` (it must not exist), for writing.
    pub fn create(&self, mode: u32) -> std::io::Result<File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        let fd = rustix::fs::openat(
            &self.dir,
            &self.name,
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )?;
        Ok(File::from(fd))
    }

    /// Syncs the directory the entry lies in (a rename in it made durable).
    pub fn sync_dir(&self) -> std::io::Result<()> {
        let dir = rustix::fs::openat(
            &self.dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        rustix::fs::fsync(dir).map_err(Into::into)
    }

    /// The entry's target, when it is a symbolic link.
    pub fn link_target(&self) -> std::io::Result<PathBuf> {
        let t = rustix::fs::readlinkat(&self.dir, &self.name, Vec::new())?;
        Ok(PathBuf::from(OsStr::from_bytes(t.as_bytes())))
    }

    /// A sibling of the entry, in the same open directory.
    pub fn sibling(&self, name: &OsStr) -> std::io::Result<Entry> {
        Ok(Entry {
            dir: self.dir.try_clone()?,
            name: name.to_owned(),
            path: self.path.with_file_name(name),
        })
    }
}

/// Opens the regular file `path` for reading, following no link on the way (nor a FIFO, a
/// socket or a device, which `O_NONBLOCK` keeps from blocking the open).
pub fn open_file(path: &Path) -> Result<File, Refused> {
    let fd = open(path, OFlags::RDONLY | OFlags::NONBLOCK)?;
    let st = rustix::fs::fstat(&fd).map_err(|e| Refused::io(path, e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Refused::NotA {
            path: path.to_owned(),
            what: "not a regular file",
        });
    }
    // Reads block again as on any file.
    let flags = rustix::fs::fcntl_getfl(&fd).map_err(|e| Refused::io(path, e))?;
    rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK).map_err(|e| Refused::io(path, e))?;
    Ok(File::from(fd))
}

/// Whether a directory can be reached at `path` without following a link.
pub fn is_dir(path: &Path) -> Result<bool, Refused> {
    match open(path, OFlags::PATH | OFlags::DIRECTORY) {
        Ok(_) => Ok(true),
        Err(Refused::Io { source, .. })
            if matches!(
                source.raw_os_error(),
                Some(libc::ENOENT) | Some(libc::ENOTDIR)
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// What is at `path` (the entry itself), reached without following a link; `None` when
/// nothing is.
pub fn kind(path: &Path) -> Result<Option<FileType>, Refused> {
    match Entry::of(path) {
        Ok(e) => e.kind(),
        Err(e) if e.is_not_found() => Ok(None),
        Err(Refused::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOTDIR) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = crate::test_dir();
        let (ws, home) = (t.path().join("ws"), t.path().join("home"));
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::write(home.join(".claude/settings.json"), "user's").unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::os::unix::fs::symlink(home.join(".claude"), ws.join(".claude")).unwrap();
        (t, ws, home)
    }

    #[test]
    fn a_link_on_the_way_is_refused_and_named() {
        let (_t, ws, home) = world();
        let through = ws.join(".claude/settings.json");
        match Entry::of(&through) {
            Err(Refused::Link(link)) => assert_eq!(link, ws.join(".claude")),
            other => panic!("refused as a link: {other:?}"),
        }
        assert!(matches!(open_file(&through), Err(Refused::Link(_))));
        assert!(matches!(kind(&through), Err(Refused::Link(_))));
        // The same without the kernel's openat2: component by component.
        assert!(matches!(
            open_by_components(&through, OFlags::RDONLY),
            Err(Refused::Link(l)) if l == ws.join(".claude")
        ));
        assert_eq!(
            std::fs::read_to_string(home.join(".claude/settings.json")).unwrap(),
            "user's"
        );
    }

    #[test]
    fn the_last_component_is_acted_on_never_followed() {
        let (_t, ws, home) = world();
        let link = Entry::of(&ws.join(".claude")).unwrap();
        assert_eq!(link.kind().unwrap(), Some(FileType::Symlink));
        assert_eq!(link.link_target().unwrap(), home.join(".claude"));
        link.remove().unwrap();
        assert!(
            home.join(".claude/settings.json").exists(),
            "the target stays"
        );
        assert_eq!(kind(&ws.join(".claude")).unwrap(), None);
        let dir = Entry::of(&ws.join(".claude")).unwrap();
        dir.make_dir(0o755).unwrap();
        let f = Entry::of(&ws.join(".claude/x")).unwrap();
        use std::io::Write;
        f.create(0o644).unwrap().write_all(b"x").unwrap();
        assert!(f.create(0o644).is_err(), "never over something");
        let mut read = String::new();
        use std::io::Read;
        open_file(&ws.join(".claude/x"))
            .unwrap()
            .read_to_string(&mut read)
            .unwrap();
        assert_eq!(read, "x");
    }

    #[test]
    fn a_fifo_is_not_opened_as_a_file() {
        let (_t, ws, _home) = world();
        let fifo = ws.join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(open_file(&fifo), Err(Refused::NotA { .. })));
    }
}
