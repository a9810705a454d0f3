//! What changed in the workspace between two checkpoints, as the kernel reports it: an
//! inotify watch on each directory a checkpoint walks, made in the wrapper (outside the
//! agent's tree, which neither sees nor can remove it), so that a checkpoint looks only at
//! the paths named since the last one instead of walking the whole workspace.
//!
//! Nothing written between two checkpoints is missed: a directory is watched before it is
//! read (what is created in it after the read is reported), a directory created or moved in
//! is walked again whole (what was made in it before its watch is found by the walk), and
//! the events are read before the paths they name are looked at (a change after that look is
//! reported to the next checkpoint). When the kernel's queue overflowed, or a watch could not
//! be made (`fs.inotify.max_user_watches`), the checkpoint walks the whole workspace, and the
//! run says why ([`Changed::All`]).
//!
//! Not reported by the kernel, so not seen until a walk: a write through a shared memory
//! mapping (`mmap`) of a file that is not closed after it.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

/// What a checkpoint must look at.
#[derive(Debug)]
pub(crate) enum Changed {
    /// Only these paths (relative to the workspace, `/`-separated) may have changed: each a
    /// file, a link, or a directory to walk again (created, moved in, or gone).
    Paths(BTreeSet<String>),
    /// What changed is not known: walk the whole workspace (why).
    All(String),
}

/// The watches of one workspace.
pub(crate) struct Watch {
    inotify: Option<Inotify>,
    /// Each watched directory's relative path (`""`: the workspace).
    dirs: HashMap<WatchDescriptor, String>,
    /// The other way round, for the directories a move or a deletion takes away.
    paths: HashMap<String, WatchDescriptor>,
    /// Why the watches were given up (the next checkpoints walk the workspace).
    lost: Option<String>,
    /// How many watches at most (the kernel's limit else).
    limit: usize,
    /// A directory could not be watched since the last drain: walk the whole workspace
    /// once more (why).
    missed: Option<String>,
    /// The repository's paths (relative to `.git`) reported since [`Watch::git_changes`]
    /// was last asked, for its history ([`super::history`]).
    git: BTreeSet<String>,
    /// Whether a report about the repository may have been lost since.
    git_unknown: bool,
    /// The workspace, once [`Watch::add_git`] named it.
    root: Option<std::path::PathBuf>,
}

/// What a directory's watch reports: every change to its entries (not reads).
fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
        // IN_EXCL_UNLINK (inotify(7)), which nix does not name: no events for what is done
        // through a descriptor of an entry already unlinked.
        | AddWatchFlags::from_bits_retain(0x0400_0000)
}

impl Watch {
    /// Watches to come, at most `limit` of them (`None`: as many as the kernel lets the
    /// user have); a watch that cannot be made at all is said by [`Watch::drain`].
    pub(crate) fn new(limit: Option<usize>) -> Watch {
        let (inotify, lost) = match Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) {
            Ok(i) => (Some(i), None),
            Err(e) => (
                None,
                Some(format!(
                    "the kernel's change notifications are unavailable ({e})"
                )),
            ),
        };
        Watch {
            inotify,
            dirs: HashMap::new(),
            paths: HashMap::new(),
            lost,
            limit: limit.unwrap_or(usize::MAX),
            missed: None,
            git: BTreeSet::new(),
            git_unknown: false,
            root: None,
        }
    }

    /// How many directories are watched.
    pub(crate) fn count(&self) -> usize {
        self.dirs.len()
    }

    /// Why the watches were given up, if they were.
    pub(crate) fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    /// Watches the directory `path` (relative `rel`), before it is read. At the limit the
    /// watches are given up, and every later checkpoint walks the workspace.
    pub(crate) fn add(&mut self, path: &Path, rel: &str) {
        let Some(inotify) = &self.inotify else {
            return;
        };
        let why = if self.dirs.len() >= self.limit {
            format!(
                "the workspace has more than {} directories to watch",
                self.limit
            )
        } else {
            match inotify.add_watch(path, mask()) {
                Ok(wd) => {
                    if let Some(old) = self.dirs.insert(wd, rel.to_owned()) {
                        if old != rel {
                            self.paths.remove(&old);
                        }
                    }
                    self.paths.insert(rel.to_owned(), wd);
                    return;
                }
                // Gone or replaced (by a link, a file) since the walk listed it: whatever is
                // there now is reported to its parent's watch.
                Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP | Errno::EACCES) => return,
                // The limit of the user namespace the wrapper runs in (a container's own,
                // or the machine's `fs.inotify.max_user_watches`).
                Err(Errno::ENOSPC) => format!(
                    "the workspace's directories need more watches than the user may have \
                     (fs.inotify.max_user_watches = {}; {} made)",
                    [
                        "/proc/sys/user/max_inotify_watches",
                        "/proc/sys/fs/inotify/max_user_watches"
                    ]
                    .iter()
                    .find_map(|f| std::fs::read_to_string(f).ok())
                    .map_or_else(|| "?".into(), |s| s.trim().to_owned()),
                    self.dirs.len()
                ),
                Err(e) => format!("a directory could not be watched ({e})"),
            }
        };
        self.give_up(why);
    }

    /// The inotify instance's descriptor, taken out of this watch, which watches nothing
    /// after (a checkpoint after it walks the workspace). Closing the last descriptor of an
    /// instance that has watches waits for the kernel to retire them (a grace period of its
    /// sleepable read-copy-update: 15–22 ms in most runs on a 2-core machine, on the path to
    /// the wrapper's exit), so the run's end gives this one to the guardian, which outlives
    /// the wrapper, instead of closing it ([`Checkpointer::take_watch`]).
    ///
    /// [`Checkpointer::take_watch`]: super::Checkpointer::take_watch
    pub(crate) fn take_descriptor(&mut self) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        let inotify = self.inotify.take()?;
        // A second descriptor of the same instance: closing the first is then not the last.
        let fd = inotify.as_fd().try_clone_to_owned().ok();
        drop(inotify);
        self.dirs.clear();
        self.paths.clear();
        self.lost = Some("the run has ended".into());
        self.git_unknown = true;
        fd
    }

    fn give_up(&mut self, why: String) {
        tracing::info!("checkpoints: {why}: each checkpoint walks the workspace");
        self.inotify = None;
        self.dirs.clear();
        self.paths.clear();
        self.missed = Some(why.clone());
        self.git_unknown = true;
        self.lost = Some(why);
    }

    /// Watches the repository's directories whose changes its history follows (`.git`,
    /// and what is below its `refs`, `logs` and `objects`), in the workspace `root`.
    pub(crate) fn add_git(&mut self, root: &Path) {
        let git = root.join(".git");
        if !std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
            return;
        }
        self.root = Some(root.to_owned());
        self.add(&git, ".git");
        for sub in ["refs", "logs", "objects"] {
            self.add_tree(&git.join(sub), &format!(".git/{sub}"));
        }
    }

    /// Watches `dir` (relative `rel`) and every directory below it, each before it is read.
    fn add_tree(&mut self, dir: &Path, rel: &str) {
        let mut todo = vec![(dir.to_owned(), rel.to_owned())];
        while let Some((dir, rel)) = todo.pop() {
            self.add(&dir, &rel);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    if let Some(name) = e.file_name().to_str() {
                        todo.push((e.path(), format!("{rel}/{name}")));
                    }
                }
            }
        }
    }

    /// The repository's paths (relative to `.git`) reported since the last ask; `None` when
    /// some may have been lost (look at all of them).
    pub(crate) fn git_changes(&mut self) -> Option<Vec<String>> {
        let paths = std::mem::take(&mut self.git);
        if std::mem::take(&mut self.git_unknown) || self.inotify.is_none() {
            return None;
        }
        Some(paths.into_iter().collect())
    }

    /// Reads every change reported since the last drain: what the next checkpoint must
    /// look at. Cheap when nothing changed (one read the kernel answers at once).
    pub(crate) fn drain(&mut self) -> Changed {
        if let Some(why) = self.missed.take() {
            return Changed::All(why);
        }
        let Some(inotify) = &self.inotify else {
            return Changed::All(self.lost.clone().unwrap_or_default());
        };
        let mut changed = BTreeSet::new();
        let mut overflow = false;
        let mut gone: Vec<WatchDescriptor> = Vec::new();
        let mut moved: Vec<String> = Vec::new();
        let mut made_git: Vec<String> = Vec::new();
        loop {
            let events = match inotify.read_events() {
                Ok(events) if !events.is_empty() => events,
                Ok(_) | Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    let why = format!("the kernel's change notifications failed ({e})");
                    self.give_up(why.clone());
                    return Changed::All(why);
                }
            };
            for ev in events {
                if ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    overflow = true;
                    continue;
                }
                if ev.mask.contains(AddWatchFlags::IN_IGNORED) {
                    gone.push(ev.wd);
                    continue;
                }
                let (Some(dir), Some(name)) = (self.dirs.get(&ev.wd), ev.name.as_ref()) else {
                    continue;
                };
                let Some(name) = name.to_str() else {
                    continue;
                };
                let rel = if dir.is_empty() {
                    name.to_owned()
                } else {
                    format!("{dir}/{name}")
                };
                if let Some(in_git) = rel.strip_prefix(".git/") {
                    if ev.mask.contains(AddWatchFlags::IN_ISDIR)
                        && ev
                            .mask
                            .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
                    {
                        made_git.push(rel.clone());
                    }
                    self.git.insert(in_git.to_owned());
                    if !ev.mask.contains(AddWatchFlags::IN_ISDIR)
                        || !ev
                            .mask
                            .intersects(AddWatchFlags::IN_MOVED_FROM | AddWatchFlags::IN_DELETE)
                    {
                        continue;
                    }
                }
                if ev.mask.contains(AddWatchFlags::IN_ISDIR)
                    && ev
                        .mask
                        .intersects(AddWatchFlags::IN_MOVED_FROM | AddWatchFlags::IN_DELETE)
                {
                    moved.push(rel.clone());
                }
                changed.insert(rel);
            }
        }
        for wd in gone {
            if let Some(rel) = self.dirs.remove(&wd) {
                if self.paths.get(&rel) == Some(&wd) {
                    self.paths.remove(&rel);
                }
            }
        }
        // A directory moved away (or deleted) takes its watched subdirectories' names with
        // it: forgotten here, watched again under their new names by the walk of where they
        // went, if that is in the workspace.
        for rel in moved {
            let under = format!("{rel}/");
            let taken: Vec<String> = self
                .paths
                .keys()
                .filter(|p| **p == rel || p.starts_with(&under))
                .cloned()
                .collect();
            for p in taken {
                if let Some(wd) = self.paths.remove(&p) {
                    self.dirs.remove(&wd);
                }
            }
        }
        // A directory made in the repository: watched now, and its whole content looked at
        // by the history (what was made in it before its watch).
        if let Some(root) = self.root.clone() {
            for rel in made_git {
                self.add_tree(&root.join(&rel), &rel);
            }
        }
        if overflow {
            self.git_unknown = true;
            return Changed::All("the kernel's queue of changes overflowed".into());
        }
        Changed::Paths(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(c: Changed) -> Vec<String> {
        match c {
            Changed::Paths(p) => p.into_iter().collect(),
            Changed::All(why) => panic!("a walk: {why}"),
        }
    }

    /// A watched directory reports its entries' changes by name, and a directory moved
    /// away is forgotten (its new place is walked by the checkpoint, not reported here).
    #[test]
    fn changes_are_reported_by_name_and_a_moved_directory_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), "1").unwrap();
        let mut w = Watch::new(None);
        w.add(root, "");
        w.add(&root.join("a"), "a");
        w.add(&root.join("a/b"), "a/b");
        assert_eq!(w.count(), 3);
        assert!(paths(w.drain()).is_empty(), "nothing changed");
        std::fs::write(root.join("a/b/f"), "2").unwrap();
        std::fs::write(root.join("new"), "").unwrap();
        assert_eq!(paths(w.drain()), ["a/b/f", "new"]);
        std::fs::rename(root.join("a"), root.join("c")).unwrap();
        assert_eq!(paths(w.drain()), ["a", "c"]);
        assert_eq!(
            w.count(),
            1,
            "a and a/b are no longer watched under their old names"
        );
        std::fs::write(root.join("c/b/f"), "3").unwrap();
        assert!(
            paths(w.drain()).is_empty(),
            "the forgotten watches report nothing"
        );
    }

    /// At the limit of watches the watches are given up and every drain says so.
    #[test]
    fn past_the_limit_every_checkpoint_walks_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a")).unwrap();
        let mut w = Watch::new(Some(1));
        w.add(root, "");
        w.add(&root.join("a"), "a");
        assert!(w.lost().is_some());
        for _ in 0..2 {
            match w.drain() {
                Changed::All(why) => assert!(why.contains("more than 1 directories"), "{why}"),
                Changed::Paths(p) => panic!("paths after the limit: {p:?}"),
            }
        }
    }

    /// More changes than the kernel's queue holds: the drain asks for a walk.
    #[test]
    fn an_overflowed_queue_asks_for_a_walk() {
        let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(16384);
        let dir = tempfile::tempdir().unwrap();
        let mut w = Watch::new(None);
        w.add(dir.path(), "");
        // Each a distinct name: events the kernel does not merge.
        for i in 0..=max {
            std::fs::write(dir.path().join(i.to_string()), "").unwrap();
        }
        match w.drain() {
            Changed::All(why) => assert!(why.contains("overflowed"), "{why}"),
            Changed::Paths(p) => panic!("no overflow: {p:?}"),
        }
    }

    /// The repository's changes are told to its history by `.git`-relative path: a ref
    /// written, a ref made in a directory new since the last drain (watched from then on),
    /// and a new objects directory; a walk asked for (an overflow) makes the history look at
    /// everything.
    #[test]
    fn the_repositorys_changes_are_told_by_path_and_new_directories_watched() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [".git/refs/heads", ".git/logs/refs/heads", ".git/objects/ab"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let mut w = Watch::new(None);
        w.add(root, "");
        w.add_git(root);
        assert_eq!(
            w.count(),
            9,
            "the workspace, .git, refs, logs, objects and each directory below"
        );
        assert!(paths(w.drain()).is_empty());
        assert_eq!(w.git_changes(), Some(vec![]));
        std::fs::write(root.join(".git/refs/heads/main"), "1").unwrap();
        std::fs::create_dir_all(root.join(".git/refs/heads/topic")).unwrap();
        std::fs::create_dir_all(root.join(".git/objects/cd")).unwrap();
        assert!(
            paths(w.drain()).is_empty(),
            "nothing of the workspace's files"
        );
        assert_eq!(
            w.git_changes(),
            Some(vec![
                "objects/cd".to_owned(),
                "refs/heads/main".to_owned(),
                "refs/heads/topic".to_owned()
            ])
        );
        std::fs::write(root.join(".git/refs/heads/topic/x"), "2").unwrap();
        let _ = w.drain();
        assert_eq!(w.git_changes(), Some(vec!["refs/heads/topic/x".to_owned()]));
        w.git_unknown = true;
        assert_eq!(
            w.git_changes(),
            None,
            "after a lost report: look at everything"
        );
    }
}
