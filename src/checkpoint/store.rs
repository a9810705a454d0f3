//! The checkpoints' store, in the user's state directory (`checkpoints/`):
//!
//! - `objects/ab/cdef…`: each content kept once, named by its SHA-256 (read-only files);
//! - `runs/<run id>/meta.json` (the workspace, when the run started, the agent's command)
//!   and `runs/<run id>/log.jsonl`: one line per checkpoint, the first with the whole
//!   manifest, each next one with what changed since (and the tool call it comes before);
//! - `index/<workspace key>.json`: the workspace's manifest when its last run ended, so that
//!   the next run's first checkpoint reads only the files that changed since;
//! - `git/<workspace key>/objects/`: the git objects of the workspace's repository, each file
//!   of its `.git/objects` kept once ([`super::history`]).
//!
//! Retention: runs older than `keep_days`, then the oldest while the store is over
//! `max_store_mb`, are removed, and the objects no run names with them (at most once an hour);
//! a workspace's git objects go with its last run.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::scan::{Entry, Manifest};

/// The store.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// A run's description.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    /// The run's id (its session id in the audit log).
    pub run: String,
    /// The workspace, absolute.
    pub workspace: PathBuf,
    /// When it started (RFC 3339).
    pub started: String,
    /// The agent's command line.
    pub agent: String,
}

/// One line of a run's log: a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Line {
    /// Its number: 0 when the run started, N before tool call N, the last when it ended.
    pub n: u64,
    /// When it was taken (RFC 3339).
    pub at: String,
    /// The tool call it comes before (none for the first and the last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<Tool>,
    /// The run's end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end: bool,
    /// Paths set since the checkpoint before (all of them in the first).
    #[serde(default)]
    pub set: BTreeMap<String, Entry>,
    /// Paths gone since the checkpoint before.
    #[serde(default)]
    pub del: Vec<String>,
    /// The repository's refs snapshot, when it changed since the checkpoint before (always
    /// in the first, when the workspace has a `.git` directory): its hash
    /// ([`super::history`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<String>,
}

/// A tool call, as a person reads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Tool {
    /// The tool's name.
    pub name: String,
    /// What it was asked (a command, a path), shortened.
    pub summary: String,
}

impl Store {
    /// The store in the user's state directory.
    pub fn open() -> Option<Store> {
        crate::termlog::state_dir().map(|d| Store {
            root: d.join("checkpoints"),
        })
    }

    /// The store at `root` (tests).
    #[cfg(test)]
    pub(crate) fn at(root: PathBuf) -> Store {
        Store { root }
    }

    /// Where it lies.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Makes its directories (private to the user); one `stat` when they are there.
    pub(crate) fn create(&self) -> std::io::Result<()> {
        if self.root.join("index").is_dir() {
            return Ok(());
        }
        for d in ["objects", "runs", "index"] {
            std::fs::create_dir_all(self.root.join(d))?;
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&self.root, std::fs::Permissions::from_mode(0o700))
    }

    fn object(&self, hash: &str) -> PathBuf {
        self.root.join("objects").join(&hash[..2]).join(&hash[2..])
    }

    /// Keeps the content of the file at `path`; its hash. Read once: hashed while copied
    /// into a temporary object, named by its hash once read (dropped when already kept).
    #[cfg(test)]
    pub(crate) fn keep(&self, path: &Path) -> std::io::Result<String> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        self.keep_file(file, len)
    }

    /// Keeps the first `len` bytes `src` holds (its length when the walk saw it); its hash.
    /// A file the tree keeps appending to (a log written as fast as it is read) is kept as
    /// it was then, not read for as long as it grows: the next checkpoint sees it changed.
    pub(crate) fn keep_file(&self, src: std::fs::File, len: u64) -> std::io::Result<String> {
        self.keep_from(&mut src.take(len))
    }

    /// Keeps `bytes`; their hash.
    pub(crate) fn keep_bytes(&self, mut bytes: &[u8]) -> std::io::Result<String> {
        self.keep_from(&mut bytes)
    }

    /// Keeps what `src` reads to its end; its hash.
    fn keep_from(&self, src: &mut impl Read) -> std::io::Result<String> {
        let tmp_path = self
            .root
            .join("objects")
            .join(format!("tmp-{}", crate::random_hex(8)));
        let mut tmp = Temp::create(tmp_path)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = src.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            tmp.file.write_all(&buf[..n])?;
        }
        let hash = hex::encode(hasher.finalize());
        let dest = self.object(&hash);
        if dest.exists() {
            return Ok(hash);
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        use std::os::unix::fs::PermissionsExt;
        tmp.file
            .set_permissions(std::fs::Permissions::from_mode(0o400))?;
        std::fs::rename(&tmp.path, &dest)?;
        tmp.kept = true;
        Ok(hash)
    }

    /// The content kept under `hash`.
    pub(crate) fn read(&self, hash: &str) -> std::io::Result<Vec<u8>> {
        std::fs::read(self.object(hash))
    }

    /// Writes `doc` as `name` in the run's directory (what its end adds to its checkpoints).
    pub(crate) fn note(
        &self,
        run: &str,
        name: &str,
        doc: &serde_json::Value,
    ) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(doc).map_err(std::io::Error::other)?;
        std::fs::write(self.run_dir(run).join(name), bytes)
    }

    /// What `note` wrote as `name` for the run, if anything.
    pub(crate) fn noted(&self, run: &str, name: &str) -> Option<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(self.run_dir(run).join(name)).ok()?).ok()
    }

    fn run_dir(&self, run: &str) -> PathBuf {
        self.root.join("runs").join(run)
    }

    /// Starts a run's record.
    pub(crate) fn begin(&self, meta: &Meta) -> std::io::Result<std::fs::File> {
        let dir = self.run_dir(&meta.run);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("meta.json"), serde_json::to_vec(meta)?)?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("log.jsonl"))
    }

    /// Every run of the store, oldest first.
    pub fn runs(&self) -> Vec<Meta> {
        let Ok(dirs) = std::fs::read_dir(self.root.join("runs")) else {
            return Vec::new();
        };
        let mut out: Vec<Meta> = dirs
            .flatten()
            .filter_map(|d| std::fs::read(d.path().join("meta.json")).ok())
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect();
        out.sort_by(|a, b| a.started.cmp(&b.started));
        out
    }

    /// The checkpoints of `run`, in order.
    pub(crate) fn lines(&self, run: &str) -> std::io::Result<Vec<Line>> {
        let f = std::fs::File::open(self.run_dir(run).join("log.jsonl"))?;
        Ok(std::io::BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect())
    }

    /// The manifest a workspace had when its last run ended.
    pub(crate) fn index(&self, workspace: &Path) -> Manifest {
        std::fs::read(self.index_file(workspace))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Records `manifest` as the workspace's latest.
    pub(crate) fn set_index(&self, workspace: &Path, manifest: &Manifest) -> std::io::Result<()> {
        let file = self.index_file(workspace);
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(manifest)?)?;
        std::fs::rename(tmp, file)
    }

    fn index_file(&self, workspace: &Path) -> PathBuf {
        self.root
            .join("index")
            .join(format!("{}.json", workspace_key(workspace)))
    }

    /// Where the git objects of the repository in `workspace` are kept.
    pub(crate) fn git_objects(&self, workspace: &Path) -> PathBuf {
        self.root
            .join("git")
            .join(workspace_key(workspace))
            .join("objects")
    }

    /// Removes the git objects kept for workspaces no run of the store names any more.
    fn forget_git(&self) {
        let Ok(dirs) = std::fs::read_dir(self.root.join("git")) else {
            return;
        };
        let named: HashSet<String> = self
            .runs()
            .iter()
            .map(|m| workspace_key(&m.workspace))
            .collect();
        for d in dirs.flatten() {
            if !named.contains(d.file_name().to_string_lossy().as_ref()) {
                let _ = std::fs::remove_dir_all(d.path());
            }
        }
    }

    /// Forgets runs older than `keep`, then the oldest while the store's objects take more
    /// than `max_bytes` (never `current`), and the objects no run left names; at most once
    /// an hour. Each object is read for its size once and each run's log once. A run is
    /// moved out of `runs/` before it is removed, so that a sweep cut short (the wrapper
    /// exiting) leaves no run half there; the next sweep empties what it moved.
    pub(crate) fn prune(&self, keep: Duration, max_bytes: u64, current: &str) {
        if !crate::termlog::due_hourly(&self.root.join("pruned"), "") {
            return;
        }
        let _ = std::fs::remove_dir_all(self.root.join("trash"));
        let now = SystemTime::now();
        let mut runs: Vec<String> = Vec::new();
        for m in self.runs().into_iter().filter(|m| m.run != current) {
            let at = std::fs::metadata(self.run_dir(&m.run).join("meta.json"))
                .and_then(|f| f.modified())
                .unwrap_or(now);
            if now.duration_since(at).is_ok_and(|age| age > keep) {
                self.forget(&m.run);
            } else {
                runs.push(m.run);
            }
        }
        // What each run left names, and how many runs name each object.
        let named: Vec<HashSet<String>> = runs.iter().map(|r| self.named(r)).collect();
        let mut count: HashMap<String, usize> = HashMap::new();
        for h in named.iter().flatten().chain(&self.named(current)) {
            *count.entry(h.clone()).or_default() += 1;
        }
        let objects = self.objects();
        let mut total: u64 = objects.values().map(|o| o.size).sum();
        let remove = |hash: &str, total: &mut u64| {
            if let Some(o) = objects.get(hash).filter(|o| !o.young) {
                if std::fs::remove_file(&o.path).is_ok() {
                    *total -= o.size;
                }
            }
        };
        for hash in objects.keys().filter(|h| !count.contains_key(*h)) {
            remove(hash, &mut total);
        }
        for (run, hashes) in runs.iter().zip(&named) {
            if total <= max_bytes {
                break;
            }
            self.forget(run);
            for h in hashes {
                let Some(c) = count.get_mut(h) else { continue };
                *c -= 1;
                if *c == 0 {
                    remove(h, &mut total);
                }
            }
        }
        self.forget_git();
    }

    /// Removes a run's record: moved out of `runs/` first (at once), then deleted.
    fn forget(&self, run: &str) {
        let trash = self.root.join("trash");
        let _ = std::fs::create_dir_all(&trash);
        let moved = trash.join(run);
        if std::fs::rename(self.run_dir(run), &moved).is_ok() {
            let _ = std::fs::remove_dir_all(moved);
        }
    }

    /// The objects `run`'s checkpoints name.
    fn named(&self, run: &str) -> HashSet<String> {
        let mut named = HashSet::new();
        for line in self.lines(run).unwrap_or_default() {
            named.extend(line.set.into_values().filter_map(|e| match e.kind {
                super::scan::Kind::File(h) => Some(h),
                _ => None,
            }));
            // A refs snapshot, and the contents it names.
            if let Some(git) = line.git {
                if let Ok(snapshot) = super::history::snapshot(self, &git) {
                    named.extend(snapshot.into_values());
                }
                named.insert(git);
            }
        }
        named
    }

    /// The objects kept, by hash: where, their size, and whether they are young (an hour
    /// old at most: a run may have kept one and not logged it yet, so it is never removed).
    fn objects(&self) -> HashMap<String, Object> {
        let mut out = HashMap::new();
        let Ok(fans) = std::fs::read_dir(self.root.join("objects")) else {
            return out;
        };
        for fan in fans.flatten() {
            let prefix = fan.file_name().to_string_lossy().into_owned();
            let Ok(objects) = std::fs::read_dir(fan.path()) else {
                continue;
            };
            for o in objects.flatten() {
                let Ok(meta) = o.metadata() else { continue };
                let young = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_none_or(|age| age < Duration::from_secs(3600));
                let hash = format!("{prefix}{}", o.file_name().to_string_lossy());
                let (path, size) = (o.path(), meta.len());
                out.insert(hash, Object { path, size, young });
            }
        }
        out
    }
}

/// The key a workspace's files are kept under in `index/` and `git/`: its path's hash.
fn workspace_key(workspace: &Path) -> String {
    let key = hex::encode(Sha256::digest(workspace.as_os_str().as_encoded_bytes()));
    key[..24].to_owned()
}

/// An object of the store, as retention sees it.
struct Object {
    path: PathBuf,
    size: u64,
    young: bool,
}

/// The manifests of a run's checkpoints, in order, from its log.
pub(crate) fn replay(lines: &[Line]) -> Vec<Manifest> {
    let mut out = Vec::with_capacity(lines.len());
    let mut current = Manifest::new();
    for line in lines {
        for path in &line.del {
            current.remove(path);
        }
        current.extend(line.set.iter().map(|(k, v)| (k.clone(), v.clone())));
        out.push(current.clone());
    }
    out
}

/// A temporary object, removed unless kept.
struct Temp {
    path: PathBuf,
    file: std::fs::File,
    kept: bool,
}

impl Temp {
    fn create(path: PathBuf) -> std::io::Result<Temp> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Temp {
            path,
            file,
            kept: false,
        })
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::scan::Kind;

    /// A run `id` started at `started`, naming the content of `file`.
    fn run(store: &Store, id: &str, started: &str, file: &Path) -> String {
        let hash = store.keep(file).unwrap();
        let meta = Meta {
            run: id.into(),
            workspace: "/w".into(),
            started: started.into(),
            agent: "a".into(),
        };
        let mut log = store.begin(&meta).unwrap();
        let entry = Entry {
            kind: Kind::File(hash.clone()),
            mode: 0o644,
            size: 1,
            stat: (0, 0, 0),
        };
        let line = Line {
            n: 0,
            at: started.into(),
            tool: None,
            end: false,
            set: [("f".to_owned(), entry)].into(),
            del: Vec::new(),
            git: None,
        };
        let mut bytes = serde_json::to_vec(&line).unwrap();
        bytes.push(b'\n');
        log.write_all(&bytes).unwrap();
        hash
    }

    /// A store in a directory of its own (files to keep go beside it).
    fn fresh() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("store"));
        store.create().unwrap();
        (dir, store)
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn age(path: &Path, by: Duration) {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - by).unwrap();
    }

    /// A file appended to after the walk saw it is kept as the walk saw it: a log the tree
    /// writes as fast as it is read would otherwise be read for as long as it grows.
    #[test]
    fn a_file_that_grows_while_it_is_kept_is_kept_as_it_was() {
        use std::io::Write;
        let (dir, store) = fresh();
        let path = write(dir.path(), "log", "first line\n");
        let file = std::fs::File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"written after\n")
            .unwrap();
        let hash = store.keep_file(file, len).unwrap();
        assert_eq!(store.read(&hash).unwrap(), b"first line\n");
    }

    /// Runs older than `keep` go, then the oldest while over the size, with the contents no
    /// run names (never a young one: a run may not have logged it yet); at most once an hour.
    #[test]
    fn old_runs_and_what_only_they_named_are_forgotten_then_the_oldest_over_the_size() {
        let (dir, store) = fresh();
        let file = |name: &str, text: &str| write(dir.path(), name, text);
        let old = run(&store, "old", "2026-01-01", &file("a", "old run's"));
        let kept = run(&store, "kept", "2026-11-01", &file("b", "kept run's"));
        let current = run(&store, "current", "2026-11-29", &file("c", "this run's"));
        let orphan = store.keep(&file("d", "nobody's")).unwrap();
        let young = store.keep(&file("e", "not logged yet")).unwrap();
        age(
            &store.run_dir("old").join("meta.json"),
            Duration::from_secs(30 * 86_400),
        );
        for h in [&old, &kept, &current, &orphan] {
            age(&store.object(h), Duration::from_secs(2 * 3600));
        }
        store.prune(Duration::from_secs(14 * 86_400), u64::MAX, "current");
        let ids: Vec<String> = store.runs().into_iter().map(|m| m.run).collect();
        assert_eq!(ids, ["kept", "current"]);
        assert!(store.read(&old).is_err() && store.read(&orphan).is_err());
        assert!(store.read(&kept).is_ok() && store.read(&current).is_ok());
        assert!(store.read(&young).is_ok(), "a young object is never swept");

        // Within the hour: nothing is done again.
        store.prune(Duration::ZERO, 0, "current");
        assert_eq!(store.runs().len(), 2);
        // Later, over the size: the oldest run goes, never the current one.
        age(&store.root().join("pruned"), Duration::from_secs(2 * 3600));
        store.prune(Duration::from_secs(14 * 86_400), 0, "current");
        let ids: Vec<String> = store.runs().into_iter().map(|m| m.run).collect();
        assert_eq!(ids, ["current"]);
        assert!(store.read(&kept).is_err() && store.read(&current).is_ok());
    }

    /// Over the size, the oldest runs go until it fits, and of their content only what no
    /// run left names; what an earlier sweep moved out and did not remove is removed.
    #[test]
    fn content_another_run_names_stays_and_a_sweep_cut_short_is_finished() {
        let (dir, store) = fresh();
        let file = |name: &str, text: &str| write(dir.path(), name, text);
        let shared = run(&store, "a0", "2026-11-01", &file("s", "two runs' content"));
        let only = run(
            &store,
            "a1",
            "2026-11-02",
            &file("o", "the second run's own"),
        );
        run(&store, "b", "2026-11-03", &file("s2", "two runs' content"));
        run(&store, "c", "2026-11-04", &file("c", "a later run's"));
        run(&store, "current", "2026-11-29", &file("n", "now"));
        let cut_short = store.root().join("trash/gone");
        std::fs::create_dir_all(&cut_short).unwrap();
        std::fs::write(cut_short.join("meta.json"), b"{}").unwrap();
        for h in store.objects().keys() {
            age(&store.object(h), Duration::from_secs(2 * 3600));
        }
        let total: u64 = store.objects().values().map(|o| o.size).sum();
        // Room for all but the second run's own content: a0 goes (its content is b's
        // too, and stays), then a1 with its own; b and c stay.
        store.prune(
            Duration::MAX,
            total - "the second run's own".len() as u64,
            "current",
        );
        let ids: Vec<String> = store.runs().into_iter().map(|m| m.run).collect();
        assert_eq!(ids, ["b", "c", "current"]);
        assert!(
            store.read(&only).is_err(),
            "the removed run's own content goes"
        );
        assert_eq!(store.read(&shared).unwrap(), b"two runs' content");
        assert!(
            !cut_short.exists(),
            "what a sweep cut short left is removed"
        );
    }

    /// The refs snapshots a run's log names, and the contents they name, stay with the run;
    /// a workspace's git objects go with its last run.
    #[test]
    fn a_runs_refs_snapshots_stay_and_git_objects_go_with_its_workspaces_last_run() {
        let (dir, store) = fresh();
        let old = run(&store, "old", "2026-01-01", &write(dir.path(), "a", "old"));
        let content = store.keep_bytes(b"0123abcd\n").unwrap();
        let snap = BTreeMap::from([("refs/heads/x".to_owned(), content.clone())]);
        let snap = store
            .keep_bytes(&serde_json::to_vec(&snap).unwrap())
            .unwrap();
        let meta = Meta {
            run: "kept".into(),
            workspace: "/w2".into(),
            started: "2026-11-01".into(),
            agent: "a".into(),
        };
        let mut log = store.begin(&meta).unwrap();
        let line = Line {
            n: 0,
            at: "2026-11-01".into(),
            tool: None,
            end: false,
            set: BTreeMap::new(),
            del: Vec::new(),
            git: Some(snap.clone()),
        };
        writeln!(log, "{}", serde_json::to_string(&line).unwrap()).unwrap();
        for w in ["/w", "/w2"] {
            let objects = store.git_objects(Path::new(w)).join("ab");
            std::fs::create_dir_all(&objects).unwrap();
            std::fs::write(objects.join("c".repeat(38)), "an object").unwrap();
        }
        for h in [&old, &content, &snap] {
            age(&store.object(h), Duration::from_secs(2 * 3600));
        }
        age(
            &store.run_dir("old").join("meta.json"),
            Duration::from_secs(30 * 86_400),
        );
        store.prune(Duration::from_secs(14 * 86_400), u64::MAX, "none");
        assert!(store.read(&old).is_err(), "the old run's content goes");
        assert!(store.read(&snap).is_ok() && store.read(&content).is_ok());
        assert!(!store.git_objects(Path::new("/w")).exists());
        assert!(store.git_objects(Path::new("/w2")).exists());
    }
}
