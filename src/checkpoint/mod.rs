//! Workspace checkpoints: before the agent starts, and before each tool call that may
//! write, the run keeps what changed in the workspace since the last checkpoint, so that
//! `ahp-wrap undo` can put it back and `ahp-wrap changes` can show what each call did.
//!
//! - [`gitindex`]: the files git tracks, read from the repository's index (git is never run
//!   on the agent's files: its configuration is the agent's to write).
//! - [`scan`]: the workspace's files and what tells a change; the manifest of a checkpoint.
//! - [`store`]: content-addressed objects, each run's log of checkpoints, the workspace's
//!   index (its manifest when its last run ended), retention.
//! - [`Checkpointer`]: one run's checkpoints. The first is taken before the agent starts;
//!   each next one while the gate decides the tool call it comes before (the hook waits for
//!   the decision anyway), the last when the run ends.
//!
//! Owns: what is kept and when. Must not touch: decisions (a checkpoint that fails is said
//! and the run goes on without them), the floor (which hides the store from the tree).

mod gitindex;
pub(crate) mod scan;
pub mod store;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use scan::{Changes, Manifest, Rules};
use store::{Line, Meta, Store, Tool};

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
    /// The time the checkpoints took, and how many there were.
    spent: (Duration, u64),
    /// Retention: how long runs are kept, and the most the store's objects may take.
    retention: (Duration, u64),
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
    /// The run's id.
    pub run: String,
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
        store
            .create()
            .map_err(|e| format!("the checkpoints' store {}: {e}", store.root().display()))?;
        let rules = Rules {
            exclude: spec.exclude.clone().unwrap_or_default(),
            tracked: scan::tracked(workspace),
            max_file: spec.max_file_mb.unwrap_or(16) << 20,
            max_files: spec.max_files.unwrap_or(200_000),
        };
        let started = Instant::now();
        let previous = store.index(workspace);
        let first = scan::manifest(workspace, &rules, &previous, &store).map_err(|e| match e {
            scan::ScanError::TooMany(n) => format!(
                "{} holds more than {n} files ([checkpoints] max_files): no checkpoints",
                workspace.display()
            ),
            scan::ScanError::Store(e) => format!("the checkpoints' store: {e}"),
        })?;
        let meta = Meta {
            run: run.to_owned(),
            workspace: workspace.to_owned(),
            started: crate::protocol::now_rfc3339(),
            agent: agent.to_owned(),
        };
        let mut log = store
            .begin(&meta)
            .map_err(|e| format!("the checkpoints' store: {e}"))?;
        let line = Line {
            n: 0,
            at: meta.started.clone(),
            tool: None,
            end: false,
            set: first.clone(),
            del: Vec::new(),
        };
        write_line(&mut log, &line).map_err(|e| format!("the checkpoints' store: {e}"))?;
        let _ = store.set_index(workspace, &first);
        let keep = Duration::from_secs(spec.keep_days.unwrap_or(14) * 86_400);
        Ok(Some(Checkpointer {
            state: Mutex::new(State {
                store,
                workspace: workspace.to_owned(),
                rules,
                run: run.to_owned(),
                log,
                current: first.clone(),
                first,
                next: 1,
                failed: None,
                spent: (started.elapsed(), 1),
                retention: (keep, spec.max_store_mb.unwrap_or(2048) << 20),
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

    /// Takes the run's last checkpoint and says what the run changed.
    pub fn end(&self) -> Option<Summary> {
        let mut s = self.state.lock().ok()?;
        let n = s.next;
        s.take(n, None, true);
        let _ = s.store.set_index(&s.workspace, &s.current);
        tracing::info!("checkpoints: {} taken in {:?}", s.spent.1, s.spent.0);
        Some(Summary {
            changes: scan::diff(&s.first, &s.current),
            too_large: s
                .current
                .iter()
                .filter(|(_, e)| e.kind == scan::Kind::TooLarge)
                .map(|(p, _)| p.clone())
                .collect(),
            failed: s.failed.clone(),
            run: s.run.clone(),
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
        let delta = match scan::scan(&self.workspace, &self.rules, &self.current, &self.store) {
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
        };
        if let Err(e) = write_line(&mut self.log, &line) {
            self.failed = Some(format!("the store: {e}"));
            return;
        }
        delta.apply(&mut self.current);
        self.spent.0 += started.elapsed();
        self.spent.1 += 1;
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
