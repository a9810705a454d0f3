//! The end of a run's floor for the files that make a tool run a program (the ecosystems'
//! kinds of [`floor::runfiles`], every agent's instruction files, git's control files, a
//! virtual environment's start-up, unchecked bytecode): one the agent's tree created or
//! changed anywhere in the workspace is kept aside, not left where its tool reads it; a
//! changed one is put back as it was (from the run's first checkpoint). Said, audited, and
//! noted beside the run's checkpoints for `ahp-wrap changes`; `ahp-wrap restore RECORD`
//! applies one. A kind the policy lets be (`[floor] run_files`) stays, and is said.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::json;

use super::super::{Run, RunGuard};
use crate::floor;
use crate::floor::runfiles::{Check, Kind};
use crate::protocol::EventType;

/// Directories a walk of the workspace never enters (what tools regenerate, or what the walks
/// below look at on their own).
const SKIPPED: &[&str] = &[
    "node_modules",
    "target",
    ".git",
    ".venv",
    "venv",
    "__pycache__",
];

/// How many files of the workspace a walk looks at, at most (without checkpoints).
const MAX_WALKED: usize = 200_000;

/// One file found.
struct Found {
    /// Relative to the workspace.
    rel: String,
    kind: Kind,
    /// Its content at the run's start, when it had one (and its permission bits).
    original: Option<(Vec<u8>, u32)>,
}

/// Every kind a run looks for: the ecosystems', each agent's instruction files, git's.
fn kinds() -> Vec<Kind> {
    let mut all = floor::runfiles::ECOSYSTEM.to_vec();
    for f in crate::frameworks::all() {
        let patterns = f.instruction_files();
        if !patterns.is_empty() {
            all.push(Kind {
                name: f.name(),
                patterns,
                what: "an agent's instructions (its later sessions obey them)",
                check: Check::Always,
            });
        }
    }
    all
}

/// The kind of the workspace's file `rel`, if it is one.
fn kind_of(kinds: &[Kind], rel: &str) -> Option<Kind> {
    kinds
        .iter()
        .find(|k| k.patterns.iter().any(|p| floor::runfiles::matches(p, rel)))
        .copied()
}

/// The kind of git's control files that ordinary git does not write.
const GIT: Kind = Kind {
    name: "git",
    patterns: &[],
    what: "git's control files (what git's configuration and objects are read from)",
    check: Check::Always,
};

/// Whether the inode of `path` (not followed) changed since `since`.
fn changed_since(path: &Path, since: SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    path.symlink_metadata()
        .is_ok_and(|m| m.ctime() * 1_000_000_000 + m.ctime_nsec() >= since)
}

/// The files of the workspace `ws` of a kind that changed since `since`, found without the
/// checkpoints: a walk (bounded; what tools regenerate left out).
fn walked(ws: &Path, kinds: &[Kind], since: SystemTime) -> Vec<Found> {
    let mut out = Vec::new();
    let mut dirs = vec![(ws.to_owned(), String::new())];
    let mut seen = 0;
    while let Some((dir, base)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_WALKED {
                return out;
            }
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let rel = match base.is_empty() {
                true => name.clone(),
                false => format!("{base}/{name}"),
            };
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if !SKIPPED.contains(&name.as_str()) {
                    dirs.push((e.path(), rel));
                }
            } else if let Some(kind) = kind_of(kinds, &rel) {
                if changed_since(&e.path(), since) {
                    out.push(Found {
                        rel,
                        kind,
                        original: None,
                    });
                }
            }
        }
    }
    out
}

/// The files of the workspace's virtual environments (a directory at its top, or a level
/// below, with a `pyvenv.cfg`) that Python runs at every start, changed since `since`.
fn venv_files(ws: &Path, kinds: &[Kind], since: SystemTime) -> Vec<Found> {
    let mut roots = Vec::new();
    let level = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect()
    };
    for d in level(ws) {
        if d.join("pyvenv.cfg").is_file() {
            roots.push(d);
        } else if d
            .file_name()
            .is_some_and(|n| n != "node_modules" && n != ".git")
        {
            roots.extend(
                level(&d)
                    .into_iter()
                    .filter(|s| s.join("pyvenv.cfg").is_file()),
            );
        }
    }
    let mut out = Vec::new();
    for venv in roots {
        let mut files = vec![venv.join("pyvenv.cfg"), venv.join("pip.conf")];
        for lib in ["lib", "lib64"] {
            for py in level(&venv.join(lib)) {
                let site = py.join("site-packages");
                files.extend(
                    std::fs::read_dir(&site)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.path()),
                );
            }
        }
        for f in files {
            let Ok(rel) = f.strip_prefix(ws) else {
                continue;
            };
            let rel = rel.to_string_lossy().into_owned();
            if let Some(kind) = kind_of(kinds, &rel) {
                if changed_since(&f, since) {
                    out.push(Found {
                        rel,
                        kind,
                        original: None,
                    });
                }
            }
        }
    }
    out
}

/// The compiled Python files beside the workspace's sources (`__pycache__` of each directory
/// that holds a `.py` file of `files`) written since `since`.
fn bytecode(ws: &Path, files: &[String], kinds: &[Kind], since: SystemTime) -> Vec<Found> {
    let mut dirs: Vec<&str> = files
        .iter()
        .filter(|f| f.ends_with(".py"))
        .map(|f| f.rsplit_once('/').map_or("", |(d, _)| d))
        .collect();
    dirs.sort_unstable();
    dirs.dedup();
    let mut out = Vec::new();
    for d in dirs {
        let cache = match d.is_empty() {
            true => "__pycache__".to_owned(),
            false => format!("{d}/__pycache__"),
        };
        for e in std::fs::read_dir(ws.join(&cache))
            .into_iter()
            .flatten()
            .flatten()
        {
            let rel = format!("{cache}/{}", e.file_name().to_string_lossy());
            if let Some(kind) = kind_of(kinds, &rel) {
                if changed_since(&e.path(), since) {
                    out.push(Found {
                        rel,
                        kind,
                        original: None,
                    });
                }
            }
        }
    }
    out
}

/// The entries of the workspace's git directory (`.git`, when it is one) that ordinary git
/// does not write, created or changed since `since` (a submodule's git directory is read
/// the same way; its `config` is kept aside when it names a program).
fn git_files(ws: &Path, since: SystemTime) -> Vec<Found> {
    let git = ws.join(".git");
    if !git.is_dir() || git.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut dirs = vec![(git.clone(), String::new())];
    while let Some((dir, base)) = dirs.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = match base.is_empty() {
                true => name.clone(),
                false => format!("{base}/{name}"),
            };
            let Ok(ft) = e.file_type() else { continue };
            // The objects themselves are data; only their `info/` redirects.
            if ft.is_dir() && rel != "objects" && rel != "hooks" {
                dirs.push((e.path(), rel.clone()));
                continue;
            }
            if ft.is_dir() && rel == "objects" {
                dirs.push((e.path().join("info"), "objects/info".into()));
                continue;
            }
            if ft.is_dir() || rel == "config" || !changed_since(&e.path(), since) {
                continue;
            }
            if !git_ordinary(&rel, &e.path()) {
                out.push(Found {
                    rel: format!(".git/{rel}"),
                    kind: GIT,
                    original: None,
                });
            }
        }
    }
    out
}

/// Whether the git directory's entry `rel` (at `path`) is one ordinary git writes: by the
/// list, in the repository's own git directory or a submodule's (`modules/<name>/…`), whose
/// `config` ordinary git writes too unless it names a program; a worktree's `commondir` as
/// `git worktree add` writes it.
fn git_ordinary(rel: &str, path: &Path) -> bool {
    let mut rel = rel;
    while let Some(rest) = rel.strip_prefix("modules/") {
        match rest.split_once('/') {
            Some((_, inner)) => rel = inner,
            None => return false,
        }
        if rel == "config" {
            return !names_a_program(path);
        }
    }
    if let Some(w) = rel.strip_prefix("worktrees/") {
        if w.split_once('/').is_some_and(|(_, f)| f == "commondir") {
            return std::fs::read_to_string(path).is_ok_and(|t| t.trim() == "../..");
        }
    }
    floor::runfiles::git_ordinary(rel)
}

/// Whether a git configuration file names a program git would run.
fn names_a_program(path: &Path) -> bool {
    const RUNS: &[&str] = &[
        "fsmonitor",
        "hookspath",
        "sshcommand",
        "askpass",
        "pager",
        "editor",
        "gitproxy",
        "helper",
        "textconv",
        "command",
        "clean",
        "smudge",
        "process",
        "include",
        "worktree",
    ];
    let Ok(text) = std::fs::read_to_string(path) else {
        return true;
    };
    text.lines().any(|l| {
        let l = l.trim().to_ascii_lowercase();
        let key = l.split('=').next().unwrap_or("").trim();
        RUNS.contains(&key) || l.starts_with('[') && l.contains("include") || l.contains("= !")
    })
}

impl Run<'_> {
    /// Keeps aside the run files the tree created or changed (see the module's doc).
    pub(in crate::run) async fn keep_run_files_aside(&mut self, held: &RunGuard<'_>) {
        let Some(Ok(floor)) = &held.floor else { return };
        let Some(ws) = floor.plan.writable.first().cloned() else {
            return;
        };
        let (since, let_be) = (floor.started, floor.run_files.clone());
        let checkpoints = self.gate.checkpoints.get().cloned();
        let found = tokio::task::spawn_blocking(move || {
            let kinds = kinds();
            let mut found: Vec<Found> = match &checkpoints {
                Some(cp) => cp
                    .changed_since(since, |p| kind_of(&kinds, p).is_some())
                    .into_iter()
                    .filter_map(|(rel, original)| {
                        Some(Found {
                            kind: kind_of(&kinds, &rel)?,
                            rel,
                            original,
                        })
                    })
                    .collect(),
                None => walked(&ws, &kinds, since),
            };
            let files = checkpoints.as_ref().map(|c| c.files()).unwrap_or_default();
            found.extend(venv_files(&ws, &kinds, since));
            found.extend(bytecode(&ws, &files, &kinds, since));
            found.extend(git_files(&ws, since));
            found.retain(|f| match f.kind.check {
                Check::Always => true,
                check => crate::beneath::open_file(&ws.join(&f.rel))
                    .ok()
                    .and_then(|file| {
                        use std::io::Read;
                        let mut bytes = Vec::new();
                        file.take(1 << 20).read_to_end(&mut bytes).ok()?;
                        Some(floor::runfiles::checked(check, &bytes))
                    })
                    .unwrap_or(false),
            });
            found.sort_by(|a, b| a.rel.cmp(&b.rel));
            found.dedup_by(|a, b| a.rel == b.rel);
            (ws, found, checkpoints)
        })
        .await;
        let Ok((ws, found, checkpoints)) = found else {
            return;
        };
        if found.is_empty() {
            return;
        }
        let quarantine = super::end::quarantine_dir();
        let mut kept = Vec::new();
        let mut left = Vec::new();
        let mut noted = Vec::new();
        for f in found {
            let path = ws.join(&f.rel);
            let shown = format!("{} ({})", f.rel, f.kind.what);
            if let_be.iter().any(|k| k == f.kind.name) {
                left.push(shown.clone());
                noted.push(json!({"path": f.rel, "kind": f.kind.name, "left": true}));
                continue;
            }
            let record = quarantine
                .as_deref()
                .ok_or_else(|| "no state directory for a quarantine".to_owned())
                .and_then(|q| {
                    crate::statefile::aside::keep_aside(&path, q, f.original.is_some())
                        .map_err(|e| e.to_string())
                });
            let record = match record {
                Ok(r) => r,
                Err(why) => {
                    let m = format!(
                        "floor: {shown} was created or changed during the run and is left in \
                         place: it could not be kept aside ({why})"
                    );
                    self.notes.push(format!("warning: {m}"));
                    let payload = json!({"source": "floor", "message": m, "path": f.rel});
                    self.gate.say(EventType::Error, payload).await;
                    continue;
                }
            };
            if let Some((bytes, mode)) = &f.original {
                if let Err(e) = crate::statefile::merge::write_atomic_as(&path, bytes, *mode) {
                    tracing::warn!("{}: not put back as it was: {e}", path.display());
                }
            }
            let how = match f.original.is_some() {
                true => "changed (put back as it was)",
                false => "created",
            };
            let payload = json!({
                "source": "floor",
                "message": format!("floor: {} was {how} during the run, where {} reads it; kept aside", f.rel, f.kind.what),
                "path": f.rel,
                "kind": f.kind.name,
                "record": record.display().to_string(),
            });
            self.gate.say(EventType::Error, payload).await;
            noted.push(json!({
                "path": f.rel,
                "kind": f.kind.name,
                "what": f.kind.what,
                "record": record.display().to_string(),
            }));
            kept.push(format!("{shown}: ahp-wrap restore {}", record.display()));
        }
        if let Some(cp) = &checkpoints {
            cp.note_kept_aside(&json!(noted));
        }
        if !kept.is_empty() {
            self.notes.push(format!(
                "warning: floor: {} file(s) that make a tool run a program were created or \
                 changed during the run and are kept aside, not where their tool reads them \
                 (each put back as it was, when it was there before): {}",
                kept.len(),
                kept.join("; ")
            ));
        }
        if !left.is_empty() {
            self.notes.push(format!(
                "floor: {} file(s) that make a tool run a program were created or changed during \
                 the run and left in place, as [floor] run_files says: {}",
                left.len(),
                left.join("; ")
            ));
        }
    }
}
