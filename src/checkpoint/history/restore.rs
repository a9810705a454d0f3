//! Putting a refs snapshot back: the plan (what `undo` writes, removes and puts back, and
//! what changed since the run ended), and its carrying out, never through a link.

use super::*;

/// The snapshot the store keeps under `hash`.
pub(crate) fn snapshot(store: &Store, hash: &str) -> Result<Snapshot, String> {
    let bytes = store
        .read(hash)
        .map_err(|e| format!("the refs snapshot {hash}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("the refs snapshot {hash}: {e}"))
}

/// The refs and reflogs of the repository `git` now, as a snapshot would name them (their
/// contents hashed, not kept).
pub(super) fn current(git: &Path) -> Result<Snapshot, String> {
    let mut now = Snapshot::new();
    for root in REFS {
        walk(git, root, &mut |rel, _| {
            let Ok(mut file) = crate::beneath::open_file(&git.join(&rel)) else {
                return Ok(());
            };
            let mut hasher = Sha256::new();
            std::io::copy(&mut file, &mut hasher).map_err(|e| format!("{rel}: {e}"))?;
            now.insert(rel, hex::encode(hasher.finalize()));
            Ok(())
        })?;
    }
    Ok(now)
}

/// What putting a snapshot back does to a repository: the refs and reflogs it writes and
/// removes, the kept objects it puts back, and what changed since the run ended.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// `.git`-relative paths written as the snapshot has them, with their content's hash.
    write: Vec<(String, String)>,
    /// `.git`-relative paths removed (not in the snapshot).
    remove: Vec<String>,
    /// Kept objects missing from the repository (relative to `objects/`).
    objects: Vec<String>,
    /// The refs (short names) put back or moved back, and those removed.
    refs: (Vec<String>, Vec<String>),
    /// Paths (`.git/…`) that changed after the run ended: putting them back would lose that.
    pub(crate) conflicts: Vec<String>,
}

/// What [`Plan::apply`] did.
#[derive(Debug, Default)]
pub(crate) struct RestoreReport {
    /// Refs (short names) put back or moved back.
    pub refs: Vec<String>,
    /// Refs removed (the snapshot did not have them).
    pub removed: Vec<String>,
    /// Reflogs written or removed.
    pub logs: usize,
    /// Objects put back.
    pub objects: usize,
    /// What could not be done, each with why.
    pub failed: Vec<String>,
}

/// Plans putting the snapshot `target` back in the repository of `workspace`, for the
/// `.git`-relative paths `want` takes; `end` (the snapshot when the run ended) tells the
/// paths changed since, the conflicts. The kept objects missing are put back with any ref.
pub(crate) fn plan(
    store: &Store,
    workspace: &Path,
    target: &str,
    end: Option<&str>,
    want: &dyn Fn(&str) -> bool,
) -> Result<Plan, String> {
    let git = workspace.join(".git");
    if let Err(e) = crate::beneath::kind(&git) {
        return Err(e.to_string());
    }
    let target = snapshot(store, target)?;
    let end = end.map(|e| snapshot(store, e)).transpose()?;
    let now = current(&git)?;
    let mut plan = Plan::default();
    let paths: BTreeSet<&String> = target.keys().chain(now.keys()).collect();
    for path in paths.into_iter().filter(|p| want(p)) {
        let (t, n) = (target.get(path), now.get(path));
        if t == n {
            continue;
        }
        if end.as_ref().is_some_and(|e| e.get(path) != n) {
            plan.conflicts.push(format!(".git/{path}"));
        }
        match t {
            Some(hash) => plan.write.push((path.clone(), hash.clone())),
            None => plan.remove.push(path.clone()),
        }
    }
    if !plan.write.is_empty() || want("objects") {
        plan.objects = missing(&store.git_objects(workspace), &git);
    }
    // The refs as they are now and as they would be, each read as git does (a loose ref
    // over the packed one).
    let mut after = now.clone();
    for (p, h) in &plan.write {
        after.insert(p.clone(), h.clone());
    }
    for p in &plan.remove {
        after.remove(p);
    }
    let read_now = |p: &str| {
        crate::beneath::open_file(&git.join(p))
            .ok()
            .and_then(read_all)
    };
    let read_after = |p: &str| match now.get(p) == after.get(p) {
        true => read_now(p),
        false => after.get(p).and_then(|h| store.read(h).ok()),
    };
    let (before, then) = (refs(&now, read_now), refs(&after, read_after));
    for (name, value) in &then {
        if before.get(name) != Some(value) {
            plan.refs.0.push(short(name));
        }
    }
    plan.refs.1 = before
        .keys()
        .filter(|n| !then.contains_key(*n))
        .map(|n| short(n))
        .collect();
    plan.refs.0.sort();
    plan.refs.1.sort();
    Ok(plan)
}

fn read_all(mut f: std::fs::File) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    f.read_to_end(&mut out).ok().map(|_| out)
}

/// The refs a snapshot's files say: each ref's name to what it holds (an object id, or
/// `ref: …`), `packed-refs` read first and the loose refs over it, as git reads them.
fn refs(files: &Snapshot, read: impl Fn(&str) -> Option<Vec<u8>>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if files.contains_key("packed-refs") {
        let packed = read("packed-refs").unwrap_or_default();
        for line in String::from_utf8_lossy(&packed).lines() {
            if line.starts_with('#') || line.starts_with('^') {
                continue;
            }
            if let Some((id, name)) = line.split_once(' ') {
                out.insert(name.to_owned(), id.to_owned());
            }
        }
    }
    for p in files
        .keys()
        .filter(|p| *p == "HEAD" || p.starts_with("refs/"))
    {
        if let Some(v) = read(p) {
            out.insert(p.clone(), String::from_utf8_lossy(&v).trim().to_owned());
        }
    }
    out
}

/// How the refs moved from the snapshot `before` to `after`, for a person: `deleted branch
/// feature`, `moved branch main`, `created tag v1`, `changed the stash`, `moved HEAD`.
pub(crate) fn ref_changes(store: &Store, before: &str, after: &str) -> Vec<String> {
    let (Ok(a), Ok(b)) = (snapshot(store, before), snapshot(store, after)) else {
        return Vec::new();
    };
    let read = |s: &Snapshot, p: &str| s.get(p).and_then(|h| store.read(h).ok());
    let (was, now) = (refs(&a, |p| read(&a, p)), refs(&b, |p| read(&b, p)));
    let label = |name: &str| match name {
        "refs/stash" => "the stash".to_owned(),
        "HEAD" => "HEAD".to_owned(),
        n if n.starts_with("refs/heads/") => format!("branch {}", short(n)),
        n => short(n),
    };
    let mut out = Vec::new();
    for (name, v) in &now {
        match was.get(name) {
            None => out.push(format!("created {}", label(name))),
            Some(w) if w != v && name == "refs/stash" => out.push("changed the stash".into()),
            Some(w) if w != v => out.push(format!("moved {}", label(name))),
            Some(_) => {}
        }
    }
    for name in was.keys().filter(|n| !now.contains_key(*n)) {
        out.push(format!("deleted {}", label(name)));
    }
    out
}

/// A ref's name as a person says it: `feature`, `tag v1`, `stash`, `origin/main`.
fn short(name: &str) -> String {
    if let Some(b) = name.strip_prefix("refs/heads/") {
        return b.to_owned();
    }
    if let Some(t) = name.strip_prefix("refs/tags/") {
        return format!("tag {t}");
    }
    let name = name.strip_prefix("refs/remotes/").unwrap_or(name);
    name.strip_prefix("refs/").unwrap_or(name).to_owned()
}

/// The objects kept in `kept` that the repository `git` is missing (relative to
/// `objects/`).
fn missing(kept: &Path, git: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let names = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect()
    };
    for dir in names(kept).into_iter().filter(|d| is_objects_dir(d)) {
        let rel = format!("objects/{dir}");
        let there: HashSet<String> = names(&git.join(&rel)).into_iter().collect();
        for name in names(&kept.join(&dir)) {
            if is_object(&rel, &name) && !there.contains(&name) {
                out.push(format!("{dir}/{name}"));
            }
        }
    }
    out.sort();
    out
}

impl Plan {
    /// Whether it does nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.write.is_empty() && self.remove.is_empty() && self.objects.is_empty()
    }

    /// What it would do, as [`RestoreReport`] says what it did.
    pub(crate) fn report(&self) -> RestoreReport {
        RestoreReport {
            refs: self.refs.0.clone(),
            removed: self.refs.1.clone(),
            logs: self.logs(),
            objects: self.objects.len(),
            failed: Vec::new(),
        }
    }

    fn logs(&self) -> usize {
        let writes = self.write.iter().map(|(p, _)| p);
        writes
            .chain(&self.remove)
            .filter(|p| p.starts_with("logs/"))
            .count()
    }

    /// Puts the snapshot back in the repository of `workspace`: first the objects missing
    /// (a hard link from the store, else a copy, read-only), then the refs and reflogs, each
    /// written beside itself and renamed over it, those the snapshot does not have removed
    /// (regular files only). Nothing on the way is followed: a link where a directory of
    /// `.git` was is refused and said. The index and the working tree are left alone.
    pub(crate) fn apply(&self, store: &Store, workspace: &Path) -> RestoreReport {
        let git = workspace.join(".git");
        let mut report = self.report();
        report.objects = 0;
        let kept = store.git_objects(workspace);
        for rel in &self.objects {
            let to = Path::new(".git/objects").join(rel);
            match put_object(&kept.join(rel), workspace, &to) {
                Ok(()) => report.objects += 1,
                Err(e) => report.failed.push(format!("{}: {e}", to.display())),
            }
        }
        for rel in &self.remove {
            if let Err(e) = remove_ref(&git, rel) {
                report.failed.push(format!(".git/{rel}: {e}"));
            }
        }
        for (rel, hash) in &self.write {
            let written = make_dirs(workspace, &Path::new(".git").join(rel))
                .and_then(|()| clear_empty_dir(&git.join(rel)))
                .and_then(|()| store.read(hash))
                .and_then(|bytes| {
                    crate::statefile::merge::write_atomic_as(&git.join(rel), &bytes, 0o644)
                        .map_err(std::io::Error::other)
                });
            if let Err(e) = written {
                report.failed.push(format!(".git/{rel}: {e}"));
            }
        }
        report
    }
}

/// Puts back every kept object the repository of `workspace` is missing, and makes its refs,
/// `HEAD`, `packed-refs` and reflogs exactly those of the snapshot `snapshot` ([`Plan::apply`]).
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "undo plans first, for its conflicts and paths")
)]
pub(crate) fn restore(
    store: &Store,
    workspace: &Path,
    snapshot: &str,
) -> Result<RestoreReport, String> {
    let plan = plan(store, workspace, snapshot, None, &|_| true)?;
    let report = plan.apply(store, workspace);
    match report.failed.is_empty() {
        true => Ok(report),
        false => Err(report.failed.join("; ")),
    }
}

/// Makes each directory of the workspace-relative `rel`'s parent that is missing, never
/// through a link.
fn make_dirs(workspace: &Path, rel: &Path) -> std::io::Result<()> {
    let mut dir = workspace.to_owned();
    for part in rel.parent().into_iter().flat_map(Path::components) {
        dir.push(part);
        let at = At::of(&dir).map_err(crate::beneath::Refused::into_io)?;
        match at.kind().map_err(crate::beneath::Refused::into_io)? {
            Some(FileType::Directory) => {}
            None => at.make_dir(0o755)?,
            Some(FileType::Symlink) => {
                let link = crate::beneath::Refused::Link(dir.clone());
                return Err(std::io::Error::other(link.to_string()));
            }
            Some(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a directory",
                    dir.display()
                )))
            }
        }
    }
    Ok(())
}

/// Removes the directory at `path` when it is an empty one (a branch `a/b` removed leaves
/// `refs/heads/a`, where the ref `a` is written back).
fn clear_empty_dir(path: &Path) -> std::io::Result<()> {
    let at = At::of(path).map_err(crate::beneath::Refused::into_io)?;
    if at.kind().map_err(crate::beneath::Refused::into_io)? == Some(FileType::Directory) {
        at.remove()
            .map_err(|_| std::io::Error::other("a directory is there now"))?;
    }
    Ok(())
}

/// Puts the kept object `from` back at the workspace-relative `to`: a hard link, else a
/// copy, read-only.
fn put_object(from: &Path, workspace: &Path, to: &Path) -> std::io::Result<()> {
    if !std::fs::symlink_metadata(from)?.is_file() {
        return Err(std::io::Error::other("not a file in the store"));
    }
    make_dirs(workspace, to)?;
    let refused = crate::beneath::Refused::into_io;
    let dest = At::of(&workspace.join(to)).map_err(refused)?;
    match At::of(from).map_err(refused)?.hard_link_to(&dest) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(_) => copy_into(&mut std::fs::File::open(from)?, &workspace.join(to)),
    }
}

/// Removes the ref or reflog file `rel` (a regular file, never a link's target), then the
/// directories it leaves empty below `refs/x` or `logs/x`.
fn remove_ref(git: &Path, rel: &str) -> std::io::Result<()> {
    let refused = crate::beneath::Refused::into_io;
    let at = At::of(&git.join(rel)).map_err(refused)?;
    match at.kind().map_err(refused)? {
        None => return Ok(()),
        Some(FileType::RegularFile) => at.remove()?,
        Some(_) => return Err(std::io::Error::other("not a regular file: left alone")),
    }
    let mut dir = Path::new(rel).parent();
    while let Some(d) = dir.filter(|d| d.components().count() > 2) {
        let emptied = At::of(&git.join(d))
            .map_err(refused)
            .and_then(|e| e.remove());
        if emptied.is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

impl RestoreReport {
    /// Whether it did (or would do) nothing.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.refs.is_empty() && self.removed.is_empty() && self.logs == 0 && self.objects == 0
    }

    /// Its line for a person: `git: refs put back (feature, stash), 12 object(s) put back`
    /// (`would be put back` when `done` is false).
    pub(crate) fn line(&self, done: bool) -> String {
        let verb = |what: &str| match done {
            true => what.to_owned(),
            false => format!("would be {what}"),
        };
        let mut parts = Vec::new();
        if !self.refs.is_empty() {
            parts.push(format!(
                "refs {} ({})",
                verb("put back"),
                self.refs.join(", ")
            ));
        }
        if !self.removed.is_empty() {
            parts.push(format!(
                "refs made since {} ({})",
                verb("removed"),
                self.removed.join(", ")
            ));
        }
        if self.logs > 0 {
            parts.push(format!("{} reflog(s) {}", self.logs, verb("put back")));
        }
        if self.objects > 0 {
            parts.push(format!("{} object(s) {}", self.objects, verb("put back")));
        }
        if parts.is_empty() {
            parts.push("HEAD and refs as they were".to_owned());
        }
        format!("git: {}", parts.join(", "))
    }
}
