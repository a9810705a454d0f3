//! `ahp-wrap undo` and `ahp-wrap changes`: a run's checkpoints read back (docs/undo.md).
//!
//! `undo` compares three states of each path: the checkpoint it goes back to (the run's
//! start, or the one before tool call N), the run's end, and the workspace now. A path that
//! is now as it was then is left alone; one that is as the run left it is put back; one
//! that changed after the run ended (or was created since) is a conflict: it would be lost,
//! so nothing is done unless `--force`. A file is put back atomically (written beside it,
//! its mode set, renamed over it); a symbolic link is made again; a file the run created is
//! deleted, and the directories it leaves empty with it. The repository's history (its refs,
//! reflogs and objects) goes back with the files, by the same three states
//! ([`crate::checkpoint::history`]).

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::checkpoint::history;
use crate::checkpoint::scan::{self, Entry, Kind, Manifest, Rules};
use crate::checkpoint::store::{replay, Line, Meta, Store};
use crate::cli::{ChangesArgs, UndoArgs};
use crate::exit::{CommandResult, Exit, Failure};

/// Text files larger than this are summed up, not diffed.
const MAX_DIFF: usize = 1 << 20;

fn fail(m: String) -> Failure {
    Failure::new(Exit::Problem, m)
}

/// The run a command reads: `--run` (an id or its start), else the last one in the
/// workspace (`--workspace`, else the current directory or the workspace it lies in).
fn pick(store: &Store, run: Option<&str>, workspace: Option<&Path>) -> Result<Meta, Failure> {
    let runs = store.runs();
    if let Some(id) = run {
        let found: Vec<&Meta> = runs.iter().filter(|m| m.run.starts_with(id)).collect();
        return match found.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(fail(format!("no run {id} in {}", store.root().display()))),
            _ => Err(fail(format!(
                "{id} names more than one run: give more of it"
            ))),
        };
    }
    let here = match workspace {
        Some(w) => w.to_owned(),
        None => std::env::current_dir().map_err(|e| fail(e.to_string()))?,
    };
    let here = here.canonicalize().unwrap_or(here);
    runs.into_iter()
        .rev()
        .find(|m| here.starts_with(&m.workspace))
        .ok_or_else(|| {
            fail(format!(
                "no run with checkpoints in {} (or a directory above it)",
                here.display()
            ))
        })
}

/// The run's checkpoints and their manifests.
fn load(store: &Store, meta: &Meta) -> Result<(Vec<Line>, Vec<Manifest>), Failure> {
    let mut lines = store
        .lines(&meta.run)
        .map_err(|e| fail(format!("the run {}'s checkpoints: {e}", meta.run)))?;
    // The first checkpoint's own later lines (its large files, kept in the background) are
    // part of it.
    while lines.len() > 1 && lines[1].n == 0 && !lines[1].end {
        let more = lines.remove(1);
        for path in &more.del {
            lines[0].set.remove(path);
        }
        lines[0].set.extend(more.set);
        if more.git.is_some() {
            lines[0].git = more.git;
        }
    }
    if lines.is_empty() {
        return Err(fail(format!("the run {} has no checkpoint", meta.run)));
    }
    let manifests = replay(&lines);
    Ok((lines, manifests))
}

/// One thing `undo` does.
enum Step<'a> {
    Restore(&'a str, &'a Entry),
    Delete(&'a str),
}

/// `ahp-wrap undo`.
pub fn undo(args: &UndoArgs) -> CommandResult {
    let store = Store::open().ok_or_else(|| fail("no state directory".into()))?;
    let meta = pick(&store, args.run.as_deref(), args.workspace.as_deref())?;
    let (lines, manifests) = load(&store, &meta)?;
    let at = match args.to {
        None => 0,
        Some(n) => lines
            .iter()
            .position(|l| l.n == n && l.tool.is_some())
            .ok_or_else(|| {
                fail(format!(
                    "the run {} has no checkpoint before tool call {n} (`ahp-wrap changes` lists them)",
                    meta.run
                ))
            })?,
    };
    let target = &manifests[at];
    let end = manifests.last().unwrap_or(target);
    let ws = &meta.workspace;
    let only = selected(&args.paths, ws)?;
    let spec = crate::policy::checkpoint_spec(None).map_err(|e| fail(e.to_string()))?;
    let rules = Rules {
        exclude: spec.exclude.unwrap_or_default(),
        tracked: scan::tracked(ws),
        max_file: u64::MAX,
        at_once: u64::MAX,
        max_files: u64::MAX,
    };
    let now = scan::manifest(ws, &rules, end, &store, None)
        .map_err(|e| fail(format!("cannot read the workspace {}: {e:?}", ws.display())))?;
    let same = |a: Option<&Entry>, b: Option<&Entry>| match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.same_as(b),
        _ => false,
    };
    let paths: BTreeSet<&String> = target.keys().chain(now.keys()).collect();
    let mut steps = Vec::new();
    let mut conflicts = Vec::new();
    let mut lost = Vec::new();
    for path in paths {
        if !within(&only, path) {
            continue;
        }
        let (t, n) = (target.get(path), now.get(path));
        if same(t, n) {
            continue;
        }
        if !same(n, end.get(path)) {
            conflicts.push(path.as_str());
        }
        match t {
            Some(e) if e.kind == Kind::TooLarge => lost.push(path.as_str()),
            Some(e) => steps.push(Step::Restore(path, e)),
            None => steps.push(Step::Delete(path)),
        }
    }
    let git = git_plan(&store, &lines[..=at], &lines, ws, &only)?;
    let git = git.filter(|g| !g.is_empty());
    let git_conflicts = git.as_ref().map_or(&[][..], |g| &g.conflicts[..]);
    let when = match args.to {
        None => format!("when the run {} started", short(&meta.run)),
        Some(n) => format!("before tool call {n} of the run {}", short(&meta.run)),
    };
    if steps.is_empty() && lost.is_empty() && git.is_none() {
        crate::exit::print(&format!(
            "{} is as it was {when}: nothing to undo\n",
            ws.display()
        ));
        return Ok(Exit::OK);
    }
    let conflicted = conflicts.len() + git_conflicts.len();
    if conflicted > 0 && !args.force {
        let mut m = format!(
            "refusing to undo: {} path(s) changed after the run ended, and undoing would lose \
             that (--force undoes them anyway; a path argument leaves them out):\n",
            conflicted
        );
        for c in conflicts
            .iter()
            .copied()
            .chain(git_conflicts.iter().map(String::as_str))
        {
            m.push_str(&format!("  {c}\n"));
        }
        return Err(fail(m.trim_end().to_owned()));
    }
    let verb = |restore: bool| match (args.dry_run, restore) {
        (true, true) => "would restore",
        (true, false) => "would delete",
        (false, true) => "restored",
        (false, false) => "deleted",
    };
    let mut out = String::new();
    let mut failed = Vec::new();
    for step in &steps {
        let (path, restore) = match step {
            Step::Restore(p, _) => (*p, true),
            Step::Delete(p) => (*p, false),
        };
        if !args.dry_run {
            let done = match step {
                Step::Restore(p, e) => put_back(&store, ws, p, e),
                Step::Delete(p) => delete(ws, p, target),
            };
            if let Err(e) = done {
                failed.push(format!("{path}: {e}"));
                continue;
            }
        }
        out.push_str(&format!("{} {path}\n", verb(restore)));
    }
    for p in &lost {
        out.push_str(&format!(
            "not kept (larger than [checkpoints] max_file_mb when it was taken): {p}\n"
        ));
    }
    if let Some(g) = &git {
        let report = match args.dry_run {
            true => g.report(),
            false => g.apply(&store, ws),
        };
        out.push_str(&format!("{}\n", report.line(!args.dry_run)));
        failed.extend(report.failed);
    }
    let done = if args.dry_run { "would be" } else { "is" };
    out.push_str(&format!("{} {done} as it was {when}\n", ws.display()));
    crate::exit::print(&out);
    if !failed.is_empty() {
        return Err(fail(format!("not undone: {}", failed.join("; "))));
    }
    Ok(Exit::OK)
}

/// Whether `path` (relative to the workspace) is one the path arguments `only` take.
fn within(only: &[String], path: &str) -> bool {
    only.iter()
        .any(|o| o.is_empty() || path == o || path.starts_with(&format!("{o}/")))
}

/// Putting the repository's history back as it was at the last of `upto`'s checkpoints (the
/// latest refs snapshot at or before it), with what changed after the run's end (the last
/// snapshot of `lines`) as conflicts; `None` when the run kept no history.
fn git_plan(
    store: &Store,
    upto: &[Line],
    lines: &[Line],
    ws: &Path,
    only: &[String],
) -> Result<Option<history::Plan>, Failure> {
    let latest = |ls: &[Line]| ls.iter().rev().find_map(|l| l.git.clone());
    let Some(target) = latest(upto) else {
        return Ok(None);
    };
    let end = latest(lines);
    let want = |p: &str| within(only, &format!(".git/{p}"));
    history::plan(store, ws, &target, end.as_deref(), &want)
        .map(Some)
        .map_err(|e| fail(format!("the repository's history in {}: {e}", ws.display())))
}

/// The path arguments, relative to the workspace (an empty one: all of it).
fn selected(paths: &[PathBuf], ws: &Path) -> Result<Vec<String>, Failure> {
    if paths.is_empty() {
        return Ok(vec![String::new()]);
    }
    let cwd = std::env::current_dir().map_err(|e| fail(e.to_string()))?;
    paths
        .iter()
        .map(|p| {
            let abs = cwd.join(p);
            let abs = normalize(&abs);
            abs.strip_prefix(ws)
                .map(|r| r.to_string_lossy().trim_end_matches('/').to_owned())
                .map_err(|_| {
                    fail(format!(
                        "{} is not in the workspace {}",
                        p.display(),
                        ws.display()
                    ))
                })
        })
        .collect()
}

/// `path` without `.` and `..` (it may not exist any more: not canonicalized).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Puts `entry` back at `rel`, atomically: a file as the state files are written (beside
/// it, its mode set, synced, renamed over it), a link made beside it and renamed over it.
/// Nothing on the way is followed: a link the agent's tree left where a directory of the
/// workspace was is refused, never written through ([`crate::beneath`]).
fn put_back(store: &Store, ws: &Path, rel: &str, entry: &Entry) -> std::io::Result<()> {
    use crate::beneath::{Entry as At, Refused};
    let dest = ws.join(rel);
    let mut dir = ws.to_owned();
    for part in Path::new(rel)
        .parent()
        .into_iter()
        .flat_map(Path::components)
    {
        dir.push(part);
        At::of(&dir).map_err(Refused::into_io)?.make_dir(0o755)?;
    }
    let at = At::of(&dest).map_err(Refused::into_io)?;
    if at.kind().map_err(Refused::into_io)? == Some(crate::beneath::FileType::Directory) {
        return Err(std::io::Error::other("a directory is there now"));
    }
    match &entry.kind {
        Kind::File(hash) => {
            let bytes = store.read(hash)?;
            crate::statefile::merge::write_atomic_as(&dest, &bytes, entry.mode)
                .map_err(std::io::Error::other)
        }
        Kind::Link(target) => {
            let name = dest.file_name().unwrap_or_default().to_string_lossy();
            let tmp = format!(".{name}.ahp-wrap-undo-{}", crate::random_hex(4));
            let tmp = at.sibling(std::ffi::OsStr::new(&tmp))?;
            tmp.make_link(Path::new(target))?;
            tmp.rename_to(&at).inspect_err(|_| {
                let _ = tmp.remove();
            })
        }
        Kind::TooLarge => Err(std::io::Error::other("not kept")),
    }
}

/// Deletes `rel` (a file or a link, never what a link points at), then the directories
/// above it it leaves empty (none that `target` has a file beneath).
fn delete(ws: &Path, rel: &str, target: &Manifest) -> std::io::Result<()> {
    use crate::beneath::{Entry as At, Refused};
    let at = At::of(&ws.join(rel)).map_err(Refused::into_io)?;
    if at.kind().map_err(Refused::into_io)? == Some(crate::beneath::FileType::Directory) {
        return Err(std::io::Error::other("a directory is there now"));
    }
    at.remove()?;
    let mut dir = Path::new(rel).parent();
    while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
        let prefix = format!("{}/", d.display());
        if target
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
        {
            break;
        }
        let removed = At::of(&ws.join(d))
            .map_err(Refused::into_io)
            .and_then(|e| e.remove());
        if removed.is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

fn short(run: &str) -> &str {
    run.get(..8).unwrap_or(run)
}

/// `ahp-wrap changes`.
pub fn changes(args: &ChangesArgs) -> CommandResult {
    let store = Store::open().ok_or_else(|| fail("no state directory".into()))?;
    let meta = pick(&store, args.run.as_deref(), args.workspace.as_deref())?;
    let (lines, manifests) = load(&store, &meta)?;
    // The refs snapshot in force at each checkpoint, and how the refs moved from one to the
    // next.
    let snapshots: Vec<Option<&str>> = lines
        .iter()
        .scan(None, |at, l| {
            *at = l.git.as_deref().or(*at);
            Some(*at)
        })
        .collect();
    let mut steps = Vec::new();
    for k in 1..lines.len() {
        let c = scan::diff(&manifests[k - 1], &manifests[k]);
        let refs = match (snapshots[k - 1], snapshots[k]) {
            (Some(a), Some(b)) if a != b => history::ref_changes(&store, a, b),
            _ => Vec::new(),
        };
        if c.is_empty() && refs.is_empty() {
            continue;
        }
        steps.push((k, c, refs));
    }
    if args.json {
        let calls: Vec<_> = steps
            .iter()
            .map(|(k, c, refs)| {
                let after = &lines[k - 1];
                json!({
                    "after_tool_call": after.tool.as_ref().map(|_| after.n),
                    "tool": after.tool.as_ref().map(|t| json!({"name": t.name, "summary": t.summary})),
                    "created": c.created,
                    "changed": c.changed,
                    "deleted": c.deleted,
                    "git": refs,
                })
            })
            .collect();
        let doc = json!({
            "run": meta.run,
            "workspace": meta.workspace,
            "started": meta.started,
            "agent": meta.agent,
            "changes": calls,
            "kept_aside": store.noted(&meta.run, "kept-aside.json"),
            "left_out": store.noted(&meta.run, "left-out.json").unwrap_or_else(|| json!([])),
        });
        crate::exit::print(&format!("{doc:#}\n"));
        return Ok(Exit::OK);
    }
    let mut out = format!(
        "run {} in {} (started {}): {}\n",
        meta.run,
        meta.workspace.display(),
        meta.started,
        meta.agent
    );
    if steps.is_empty() {
        out.push_str("no change to the workspace\n");
    }
    for (k, c, refs) in &steps {
        let after = &lines[k - 1];
        match &after.tool {
            Some(t) => out.push_str(&format!(
                "\nafter tool call {} ({}: {}):\n",
                after.n, t.name, t.summary
            )),
            None => out.push_str(
                "\nbefore the first tool call (the agent itself, or a run without hooks):\n",
            ),
        }
        let (before, now) = (&manifests[k - 1], &manifests[*k]);
        for p in &c.created {
            out.push_str(&format!("  created {p} ({})\n", size(&store, &now[p])));
        }
        for p in &c.deleted {
            out.push_str(&format!("  deleted {p} ({})\n", size(&store, &before[p])));
        }
        for p in &c.changed {
            out.push_str(&format!("  changed {p}\n"));
            out.push_str(&diff(&store, p, &before[p], &now[p]));
        }
        for r in refs {
            out.push_str(&format!("  git: {r}\n"));
        }
    }
    // What the run's end kept aside (files that make a tool run a program), or let be.
    if let Some(serde_json::Value::Array(kept)) = store.noted(&meta.run, "kept-aside.json") {
        out.push_str("\nfiles that make a tool run a program, created or changed by the run:\n");
        for k in &kept {
            let path = k["path"].as_str().unwrap_or("?");
            match k["record"].as_str() {
                Some(r) => out.push_str(&format!(
                    "  kept aside {path} ({}): ahp-wrap restore {r}\n",
                    k["what"].as_str().unwrap_or("")
                )),
                None => out.push_str(&format!("  left in place {path} ([floor] run_files)\n")),
            }
        }
    }
    // What the run did where the checkpoints do not look.
    let left_out: Vec<scan::LeftOut> = store
        .noted(&meta.run, "left-out.json")
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    if !left_out.is_empty() {
        out.push_str(
            "
left out of the checkpoints ([checkpoints] exclude), so not undone:
",
        );
        for l in &left_out {
            out.push_str(&format!(
                "  {}: {}{} file(s) created or changed
",
                l.dir,
                if l.at_least { "at least " } else { "" },
                l.count
            ));
            for n in &l.named {
                out.push_str(&format!(
                    "    {n} (an executable or a start-up file)
"
                ));
            }
        }
    }
    // Through the pager on a terminal it overflows, as `audit show` pages.
    let height = std::io::stdout()
        .is_terminal()
        .then(terminal_size::terminal_size)
        .flatten()
        .map(|(_, h)| usize::from(h.0));
    crate::audit::show::page(&out, height);
    Ok(Exit::OK)
}

/// What a path held, in a few words.
fn size(store: &Store, e: &Entry) -> String {
    match &e.kind {
        Kind::Link(t) => format!("a link to {t}"),
        Kind::TooLarge => format!("{} bytes, not kept", e.size),
        Kind::File(h) => match store.read(h).ok().and_then(|b| String::from_utf8(b).ok()) {
            Some(text) if !text.contains('\0') => format!("{} line(s)", text.lines().count()),
            _ => format!("{} bytes", e.size),
        },
    }
}

/// A change as a unified diff (text), or in a line (binary, links, modes).
fn diff(store: &Store, path: &str, a: &Entry, b: &Entry) -> String {
    let text = |e: &Entry| match &e.kind {
        Kind::File(h) => store
            .read(h)
            .ok()
            .filter(|b| b.len() <= MAX_DIFF)
            .and_then(|b| String::from_utf8(b).ok())
            .filter(|t| !t.contains('\0')),
        _ => None,
    };
    let mut out = String::new();
    if a.mode != b.mode {
        out.push_str(&format!("    mode {:o} -> {:o}\n", a.mode, b.mode));
    }
    if a.kind == b.kind {
        return out;
    }
    match (text(a), text(b)) {
        (Some(x), Some(y)) => {
            let d = similar::TextDiff::from_lines(&x, &y);
            let unified = d
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{path}"), &format!("b/{path}"))
                .to_string();
            for l in unified.lines() {
                out.push_str(&format!("    {l}\n"));
            }
        }
        _ => out.push_str(&format!("    {} -> {}\n", size(store, a), size(store, b))),
    }
    out
}
