//! Workspace checkpoints: before the agent starts, and before each tool call that may
//! write, the run keeps what changed in the workspace since the last checkpoint, so that
//! `ahp-wrap undo` can put it back and `ahp-wrap changes` can show what each call did.
//!
//! - [`history`]: the repository's refs, reflogs and objects (`.git`), kept beside the files.
//! - [`gitindex`]: the files git tracks, read from the repository's index (git is never run
//!   on the agent's files: its configuration is the agent's to write).
//! - [`scan`]: the workspace's files and what tells a change; the manifest of a checkpoint.
//! - [`store`]: content-addressed objects, each run's log of checkpoints, the workspace's
//!   index (its manifest when its last run ended), retention.
//! - [`watch`]: what changed between two checkpoints, as the kernel reports it, so that a
//!   checkpoint looks only at that (a walk of the whole workspace only when it cannot know).
//! - [`cover`]: whether the checkpoints keep everything a command may discard (the calls a
//!   `reversible` rule escalates are allowed when they do).
//! - [`Checkpointer`]: one run's checkpoints. The first is taken before the agent starts;
//!   each next one while the gate decides the tool call it comes before (the hook waits for
//!   the decision anyway), the last when the run ends.
//!
//! Owns: what is kept and when. Must not touch: decisions (a checkpoint that fails is said
//! and the run goes on without them), the floor (which hides the store from the tree).

mod cover;
mod gitindex;
pub(crate) mod history;
pub use cover::Reversed;
mod reach;
pub(crate) mod scan;
pub mod store;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use scan::{Changes, Manifest, Rules};
use store::{Line, Meta, Store, Tool};
use watch::{Changed, Watch};

/// Tools that only read: no checkpoint before them.
const READ_ONLY_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "LS",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "read_file",
    "read_many_files",
    "list_directory",
    "glob",
    "search_file_content",
    "google_web_search",
    "web_fetch",
    "view",
    "read",
    "grep",
    "list",
    "net",
];

/// Files git does not track larger than this are kept by the first checkpoint in the
/// background, not before the agent starts (the first writing call waits for them).
const AT_ONCE: u64 = 16 << 20;

/// The first checkpoint's large files, being kept.
type Deferred = std::thread::JoinHandle<Vec<(String, scan::Entry)>>;

/// What a workspace that is no project is: the home directory or the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAProject {
    /// The user's home directory (`$HOME`).
    Home,
    /// `/`, the whole file system.
    Root,
}

/// Whether `workspace` is the home directory (`$HOME`) or `/`, which hold far more than a
/// project: no checkpoints are kept there (copying a home at every tool call would take
/// minutes and gigabytes).
pub fn not_a_project(workspace: &Path) -> Option<NotAProject> {
    let same = |a: &Path, b: &Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
    };
    if same(workspace, Path::new("/")) {
        return Some(NotAProject::Root);
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    same(workspace, Path::new(&home)).then_some(NotAProject::Home)
}

/// One run's checkpoints.
pub struct Checkpointer {
    state: Mutex<State>,
}

struct State {
    store: Store,
    workspace: PathBuf,
    rules: Rules,
    run: String,
    log: std::fs::File,
    /// The first checkpoint's manifest (what `undo` goes back to).
    first: Manifest,
    /// The latest checkpoint's manifest.
    current: Manifest,
    /// The next checkpoint's number.
    next: u64,
    /// Why checkpoints stopped (said once at the end).
    failed: Option<String>,
    /// What changed since the last checkpoint, as the kernel reports it.
    watch: Watch,
    /// The first checkpoint's large files, being kept on a thread of their own.
    deferred: Option<Deferred>,
    /// The left-out directories the checkpoints met (relative paths).
    left_out: std::collections::BTreeSet<String>,
    /// When the run started (ns since the epoch, the clock of inodes' change times).
    since: i64,
    /// The checkpoints that walked the whole workspace after the first, and the last
    /// reason (said at the end).
    walks: (u64, Option<String>),
    /// The time the checkpoints took, and how many there were.
    spent: (Duration, u64),
    /// Retention: how long runs are kept, and the most the store's objects may take.
    retention: (Duration, u64),
    /// The repository's history (refs, reflogs, objects), when `.git` is a directory.
    history: Option<history::History>,
    /// The calls allowed as reversible, for the summary.
    reversed: Vec<cover::Reversed>,
}

/// What the run did to the workspace, for its summary.
#[derive(Debug, Default)]
pub struct Summary {
    /// Created, changed and deleted paths from the first checkpoint to the last.
    pub changes: Changes,
    /// Files not kept (too large), by path.
    pub too_large: Vec<String>,
    /// Why the checkpoints stopped, if they did.
    pub failed: Option<String>,
    /// What the run did in the directories left out of the checkpoints.
    pub left_out: Vec<scan::LeftOut>,
    /// The files created or changed inside left-out directories that the checkpoints keep
    /// anyway (a package's executables, a virtual environment's start-up files).
    pub run_later: Vec<String>,
    /// How many checkpoints walked the whole workspace since they could not know what
    /// changed, and why the last did.
    pub walks: (u64, Option<String>),
    /// The run's id.
    pub run: String,
    /// The calls allowed because the checkpoints keep what they discard.
    pub reversed: Vec<cover::Reversed>,
}

impl Checkpointer {
    /// Takes the first checkpoint of the run `run` in `workspace` (blocking); `None` (and
    /// why) when the policy turns checkpoints off or the workspace cannot be kept.
    pub fn start(
        spec: &crate::policy::CheckpointSpec,
        workspace: &Path,
        run: &str,
        agent: &str,
    ) -> Result<Option<Checkpointer>, String> {
        if spec.enabled == Some(false) {
            return Ok(None);
        }
        // Said at the start, once, with what it means (`run::floor::workspace_warning`).
        if not_a_project(workspace).is_some() {
            return Ok(None);
        }
        let store = Store::open().ok_or("no state directory for the checkpoints")?;
        Checkpointer::start_in(store, spec, workspace, run, agent)
    }

    /// [`Checkpointer::start`] with its store at `store`.
    fn start_in(
        store: Store,
        spec: &crate::policy::CheckpointSpec,
        workspace: &Path,
        run: &str,
        agent: &str,
    ) -> Result<Option<Checkpointer>, String> {
        store
            .create()
            .map_err(|e| format!("the checkpoints' store {}: {e}", store.root().display()))?;
        let rules = Rules {
            exclude: spec.exclude.clone().unwrap_or_default(),
            tracked: scan::tracked(workspace),
            max_file: spec.max_file_mb.unwrap_or(256) << 20,
            at_once: AT_ONCE,
            max_files: spec.max_files.unwrap_or(200_000),
        };
        let started = Instant::now();
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let previous = store.index(workspace);
        let mut watch = Watch::new(None);
        let walk = scan::scan(workspace, &rules, &previous, &store, Some(&mut watch)).map_err(
            |e| match e {
                scan::ScanError::TooMany(n) => format!(
                    "{} holds more than {n} files ([checkpoints] max_files): no checkpoints",
                    workspace.display()
                ),
                scan::ScanError::Store(e) => format!("the checkpoints' store: {e}"),
            },
        )?;
        let mut first = previous;
        walk.apply(&mut first);
        let deferred = first
            .values()
            .any(|e| e.kind == scan::Kind::TooLarge && e.size <= rules.max_file)
            .then(|| {
                let (root, store, first) = (workspace.to_owned(), store.clone(), first.clone());
                let rules = Rules {
                    exclude: Vec::new(),
                    tracked: Default::default(),
                    max_file: rules.max_file,
                    at_once: u64::MAX,
                    max_files: rules.max_files,
                };
                std::thread::Builder::new()
                    .name("checkpoint-large".into())
                    .spawn(move || scan::keep_deferred(&root, &rules, &first, &store))
                    .ok()
            })
            .flatten();
        let meta = Meta {
            run: run.to_owned(),
            workspace: workspace.to_owned(),
            started: crate::protocol::now_rfc3339(),
            agent: agent.to_owned(),
        };
        let mut log = store
            .begin(&meta)
            .map_err(|e| format!("the checkpoints' store: {e}"))?;
        // The repository's history: its refs now, its objects on a thread of its own; its
        // directories watched first, so that what changes after the look is reported.
        watch.add_git(workspace);
        let history = history::History::start(workspace, &store).unwrap_or_else(|e| {
            tracing::warn!("checkpoints: the repository's history not kept: {e}");
            None
        });
        let line = Line {
            n: 0,
            at: meta.started.clone(),
            tool: None,
            end: false,
            set: first.clone(),
            del: Vec::new(),
            git: history.as_ref().map(|h| h.snapshot().to_owned()),
        };
        write_line(&mut log, &line).map_err(|e| format!("the checkpoints' store: {e}"))?;
        let _ = store.set_index(workspace, &first);
        let keep = Duration::from_secs(spec.keep_days.unwrap_or(14) * 86_400);
        Ok(Some(Checkpointer {
            state: Mutex::new(State {
                store,
                workspace: workspace.to_owned(),
                rules: Rules {
                    at_once: u64::MAX,
                    ..rules
                },
                run: run.to_owned(),
                log,
                current: first.clone(),
                first,
                next: 1,
                failed: None,
                watch,
                deferred,
                left_out: walk.left_out,
                since,
                walks: (0, None),
                spent: (started.elapsed(), 1),
                retention: (keep, spec.max_store_mb.unwrap_or(2048) << 20),
                history,
                reversed: Vec::new(),
            }),
        }))
    }

    /// Forgets the store's old runs ([`Store::prune`]) on a thread of its own, once the
    /// agent has started: it reads every run's log and every object's size, which neither
    /// the agent's start nor the run's end waits for (a sweep cut short by the wrapper's
    /// exit leaves nothing half-removed, and the next one an hour later goes on).
    pub(crate) fn prune_in_background(&self) {
        let Ok(s) = self.state.lock() else {
            return;
        };
        let (store, run, (keep, max_bytes)) = (s.store.clone(), s.run.clone(), s.retention);
        let _ = std::thread::Builder::new()
            .name("checkpoint-retention".into())
            .spawn(move || store.prune(keep, max_bytes, &run));
    }

    /// Whether a call of `tool` gets a checkpoint before it.
    pub(crate) fn wanted(tool: &str) -> bool {
        !READ_ONLY_TOOLS.contains(&tool)
    }

    /// Takes the checkpoint before a call of `tool` (`summary`: what it was asked); its
    /// number. Blocking: run it beside the decision.
    pub fn before(&self, tool: &str, summary: String) -> Option<u64> {
        let mut s = self.state.lock().ok()?;
        let n = s.next;
        s.next += 1;
        let tool = Some(Tool {
            name: tool.to_owned(),
            summary,
        });
        s.take(n, tool, false);
        Some(n)
    }

    /// The descriptor of the checkpoints' watches, once the last checkpoint is taken, for a
    /// process that outlives the wrapper to close (see `Watch::take_descriptor`).
    pub fn take_watch(&self) -> Option<std::os::fd::OwnedFd> {
        self.state.lock().ok()?.watch.take_descriptor()
    }

    /// Takes the run's last checkpoint and says what the run changed.
    pub fn end(&self) -> Option<Summary> {
        let mut s = self.state.lock().ok()?;
        let n = s.next;
        s.take(n, None, true);
        let _ = s.store.set_index(&s.workspace, &s.current);
        tracing::info!(
            "checkpoints: {} taken in {:?}, {} directories watched, {} walks",
            s.spent.1,
            s.spent.0,
            s.watch.count(),
            s.walks.0
        );
        let changes = scan::diff(&s.first, &s.current);
        let left_out = scan::left_out(&s.workspace, &s.left_out, s.since, &s.current);
        if !left_out.is_empty() {
            let _ = s.store.note(
                &s.run,
                "left-out.json",
                &serde_json::to_value(&left_out).unwrap_or_default(),
            );
        }
        let inside = |p: &String| {
            s.left_out.iter().any(|d| {
                p.len() > d.len() && p.starts_with(d.as_str()) && p.as_bytes()[d.len()] == b'/'
            })
        };
        let run_later = changes
            .created
            .iter()
            .chain(&changes.changed)
            .filter(|p| inside(p))
            .cloned()
            .collect();
        Some(Summary {
            left_out,
            run_later,
            changes,
            too_large: s
                .current
                .iter()
                .filter(|(_, e)| e.kind == scan::Kind::TooLarge)
                .map(|(p, _)| p.clone())
                .collect(),
            failed: s.failed.clone(),
            walks: s.walks.clone(),
            run: s.run.clone(),
            reversed: s.reversed.clone(),
        })
    }
}

/// A file's content and permission bits at the first checkpoint.
pub(crate) type Original = (Vec<u8>, u32);

impl Checkpointer {
    /// The workspace's files (relative paths) that the last checkpoint found created or
    /// changed since `since` (their inode's change time: what no program of the tree can set
    /// back), those `want` takes; with each one's content at the first checkpoint, when it had
    /// one (content and permission bits).
    pub(crate) fn changed_since(
        &self,
        since: std::time::SystemTime,
        want: impl Fn(&str) -> bool,
    ) -> Vec<(String, Option<Original>)> {
        let Ok(s) = self.state.lock() else {
            return Vec::new();
        };
        let since = since
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        s.current
            .iter()
            .filter(|(p, e)| e.stat.1 >= since && want(p))
            .filter(|(p, e)| s.first.get(*p).is_none_or(|f| !f.same_as(e)))
            .map(|(p, _)| {
                let original = s.first.get(p).and_then(|f| match &f.kind {
                    scan::Kind::File(hash) => s.store.read(hash).ok().map(|b| (b, f.mode)),
                    _ => None,
                });
                (p.clone(), original)
            })
            .collect()
    }

    /// The files git does not track that no checkpoint keeps ([`scan::Rules::max_file`]),
    /// with their sizes: said before the agent starts.
    pub fn not_kept(&self) -> Vec<(String, u64)> {
        self.state
            .lock()
            .map(|s| {
                s.first
                    .iter()
                    .filter(|(_, e)| e.kind == scan::Kind::TooLarge && e.size > s.rules.max_file)
                    .map(|(p, e)| (p.clone(), e.size))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every file of the workspace the last checkpoint saw (relative paths).
    pub(crate) fn files(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.current.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Keeps, beside the run's checkpoints, what its end kept aside (for `ahp-wrap changes`).
    pub(crate) fn note_kept_aside(&self, kept: &serde_json::Value) {
        if let Ok(s) = self.state.lock() {
            let _ = s.store.note(&s.run, "kept-aside.json", kept);
        }
    }
}

impl State {
    fn take(&mut self, n: u64, tool: Option<Tool>, end: bool) {
        if self.failed.is_some() {
            return;
        }
        let started = Instant::now();
        if let Some(deferred) = self.deferred.take() {
            self.finish_first(deferred);
        }
        // The kernel's report first, then the look at what it names: a change after the
        // report is in the next one.
        let (root, rules, current, store) =
            (&self.workspace, &self.rules, &self.current, &self.store);
        let delta = match self.watch.drain() {
            Changed::Paths(paths) => {
                scan::rescan(root, rules, current, store, &paths, Some(&mut self.watch))
            }
            Changed::All(why) => {
                self.walks.0 += 1;
                self.walks.1 = Some(why);
                let watch = self.watch.lost().is_none().then_some(&mut self.watch);
                scan::scan(root, rules, current, store, watch)
            }
        };
        let delta = match delta {
            Ok(d) => d,
            Err(e) => {
                let why = match e {
                    scan::ScanError::TooMany(n) => format!("the workspace grew past {n} files"),
                    scan::ScanError::Store(e) => format!("the store: {e}"),
                };
                tracing::warn!("checkpoints stopped: {why}");
                self.failed = Some(why);
                return;
            }
        };
        let line = Line {
            n,
            at: crate::protocol::now_rfc3339(),
            tool,
            end,
            set: delta.set.iter().cloned().collect(),
            del: delta.deleted.clone(),
            // The refs snapshot, when they changed since the last checkpoint.
            git: {
                let changed = self.watch.git_changes();
                self.history
                    .as_mut()
                    .and_then(|h| h.take(changed.as_deref()))
            },
        };
        if let Err(e) = write_line(&mut self.log, &line) {
            self.failed = Some(format!("the store: {e}"));
            return;
        }
        self.account_reversed(n, &delta);
        delta.apply(&mut self.current);
        self.left_out.extend(delta.left_out);
        if self.current.len() as u64 > self.rules.max_files {
            self.failed = Some(format!(
                "the workspace grew past {} files",
                self.rules.max_files
            ));
        }
        self.spent.0 += started.elapsed();
        self.spent.1 += 1;
    }
}

impl State {
    /// Puts the first checkpoint's large files, once kept, into it: a line of the first
    /// checkpoint's own (number 0), read as part of it. A file that changed since is left to
    /// this checkpoint, which keeps it as it is now.
    fn finish_first(&mut self, deferred: Deferred) {
        let kept: std::collections::BTreeMap<String, scan::Entry> = deferred
            .join()
            .unwrap_or_default()
            .into_iter()
            .filter(|(p, e)| self.current.get(p).is_some_and(|c| c.stat == e.stat))
            .collect();
        if kept.is_empty() {
            return;
        }
        let line = Line {
            n: 0,
            at: crate::protocol::now_rfc3339(),
            tool: None,
            end: false,
            set: kept.clone(),
            del: Vec::new(),
            git: None,
        };
        if let Err(e) = write_line(&mut self.log, &line) {
            self.failed = Some(format!("the store: {e}"));
            return;
        }
        for (p, e) in kept {
            self.first.insert(p.clone(), e.clone());
            self.current.insert(p, e);
        }
    }
}

fn write_line(log: &mut std::fs::File, line: &Line) -> std::io::Result<()> {
    use std::io::Write;
    let mut bytes = serde_json::to_vec(line)?;
    bytes.push(b'\n');
    log.write_all(&bytes)
}

/// What a tool call was asked, shortened for a person: its command, path or URL.
pub fn summary(arguments: Option<&serde_json::Value>) -> String {
    let Some(args) = arguments else {
        return String::new();
    };
    let text = ["command", "file_path", "path", "url", "pattern"]
        .iter()
        .find_map(|k| args.get(*k))
        .map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(words) => words
                .iter()
                .map(|w| w.as_str().map_or_else(|| w.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(" "),
            other => other.to_string(),
        })
        .unwrap_or_else(|| args.to_string());
    let mut short: String = text.chars().take(200).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}
