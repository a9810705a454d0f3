//! The history's tests: real repositories made with git, a store beside each.

use super::restore::*;
use super::*;
use std::process::Command;

/// A repository made with git, and a store beside it.
struct Repo {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    store: Store,
    /// The store's directory, when on another file system.
    _elsewhere: Option<tempfile::TempDir>,
}

/// `git ARGS` in `ws`, its output; it must succeed.
fn git(ws: &Path, args: &[&str]) -> String {
    let (out, ok, err) = try_git(ws, args);
    assert!(ok, "git {args:?}: {err}");
    out
}

/// `git ARGS` in `ws`: its output, whether it succeeded, its errors.
fn try_git(ws: &Path, args: &[&str]) -> (String, bool, String) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .current_dir(ws)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether the object `id` is in the repository.
fn has(ws: &Path, id: &str) -> bool {
    Command::new("git")
        .args(["cat-file", "-e", id])
        .current_dir(ws)
        .status()
        .unwrap()
        .success()
}

/// Three commits on `main`, an unmerged branch `feature` of two more, a stash.
fn repo() -> Repo {
    repo_in(None)
}

/// [`repo`], its store in `elsewhere` when given.
fn repo_in(elsewhere: Option<tempfile::TempDir>) -> Repo {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let ws = dir.path().join("ws").canonicalize().unwrap();
    let store_dir = elsewhere.as_ref().map_or(dir.path(), |e| e.path());
    let store = Store::at(store_dir.join("store"));
    store.create().unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    for i in 1..=3 {
        std::fs::write(ws.join("a.txt"), format!("main {i}\n")).unwrap();
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-qm", &format!("main {i}")]);
    }
    git(&ws, &["checkout", "-qb", "feature"]);
    for i in 1..=2 {
        std::fs::write(ws.join("f.txt"), format!("feature {i}\n")).unwrap();
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-qm", &format!("feature {i}")]);
    }
    git(&ws, &["checkout", "-q", "main"]);
    std::fs::write(ws.join("a.txt"), "work in progress\n").unwrap();
    git(&ws, &["stash", "-q"]);
    Repo {
        _dir: dir,
        ws,
        store,
        _elsewhere: elsewhere,
    }
}

/// What the repository's history says: its refs, stash list, the feature branch's log and
/// each of its commits as git prints them.
fn state(ws: &Path) -> Vec<String> {
    let mut out = vec![
        git(ws, &["for-each-ref", "--format=%(refname) %(objectname)"]),
        git(ws, &["rev-parse", "HEAD"]),
        git(ws, &["stash", "list", "--format=%H %s"]),
    ];
    let log = try_git(ws, &["log", "--format=%H", "refs/heads/feature", "--"]).0;
    for id in log.lines() {
        out.push(git(ws, &["cat-file", "-p", id]));
    }
    out.push(log);
    out
}

/// `attack` after the history was started and taken once; then the start's snapshot put
/// back gives the history as it was, to the byte (refs and reflogs), every object there.
fn undone(attack: &[&[&str]]) {
    undone_in(repo(), attack);
}

fn undone_in(r: Repo, attack: &[&[&str]]) {
    let before = state(&r.ws);
    let files = current(&r.ws.join(".git")).unwrap();
    let ids: Vec<String> = git(&r.ws, &["rev-list", "--all", "--reflog"])
        .lines()
        .map(str::to_owned)
        .collect();
    let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
    let start = h.snapshot().to_owned();
    assert_eq!(h.take(None), None, "nothing changed");
    for args in attack {
        git(&r.ws, args);
    }
    assert_ne!(state(&r.ws), before, "the attack changed the history");
    let taken = h.take(None).expect("a new snapshot");
    assert_ne!(taken, start);

    let report = restore(&r.store, &r.ws, &start).unwrap();
    assert!(!report.is_empty(), "{report:?}");
    assert_eq!(state(&r.ws), before, "{}", report.line(true));
    assert_eq!(current(&r.ws.join(".git")).unwrap(), files);
    for id in &ids {
        assert!(has(&r.ws, id), "{id} is back");
    }
    git(&r.ws, &["fsck", "--no-dangling", "--no-progress"]);
    // Put back twice: nothing left to do.
    let again = plan(&r.store, &r.ws, &start, None, &|_| true).unwrap();
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn a_deleted_unmerged_branch_is_put_back() {
    undone(&[&["update-ref", "-d", "refs/heads/feature"]]);
}

#[test]
fn a_branch_deleted_by_force_when_packed_is_put_back() {
    let r = repo();
    git(&r.ws, &["pack-refs", "--all"]);
    let feature = git(&r.ws, &["rev-parse", "feature"]);
    let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
    let start = h.snapshot().to_owned();
    h.take(None);
    git(&r.ws, &["branch", "-D", "feature"]);
    assert!(h.take(None).is_some());
    let report = restore(&r.store, &r.ws, &start).unwrap();
    assert_eq!(report.refs, ["feature"], "{}", report.line(true));
    assert_eq!(git(&r.ws, &["rev-parse", "feature"]), feature);
}

#[test]
fn a_dropped_stash_is_put_back() {
    undone(&[&["stash", "drop", "-q"]]);
}

#[test]
fn a_hard_reset_is_put_back() {
    undone(&[&["reset", "-q", "--hard", "HEAD~2"]]);
}

#[test]
fn what_an_expired_reflog_and_a_pruning_gc_lost_after_a_reset_is_put_back() {
    undone(&[
        &["reset", "-q", "--hard", "HEAD~2"],
        &["update-ref", "-d", "refs/heads/feature"],
        &["stash", "clear"],
        &["reflog", "expire", "--expire=now", "--all"],
        &["gc", "-q", "--prune=now"],
    ]);
}

/// With the store on another file system (a memory one), the objects are copied, and
/// copied back.
#[test]
fn across_file_systems_the_objects_are_copied() {
    let Ok(shm) = tempfile::tempdir_in("/dev/shm") else {
        return;
    };
    let r = repo_in(Some(shm));
    let same = |a: &Path, b: &Path| {
        std::fs::metadata(a).unwrap().dev() == std::fs::metadata(b).unwrap().dev()
    };
    if same(&r.ws, r.store.root()) {
        return;
    }
    undone_in(
        r,
        &[
            &["reset", "-q", "--hard", "HEAD~2"],
            &["reflog", "expire", "--expire=now", "--all"],
            &["gc", "-q", "--prune=now"],
        ],
    );
}

/// A ref the run made is removed, a moved one moved back, the report names them.
#[test]
fn refs_made_since_are_removed_and_named() {
    let r = repo();
    let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
    let start = h.snapshot().to_owned();
    git(&r.ws, &["branch", "topic/new"]);
    git(&r.ws, &["tag", "v1"]);
    git(&r.ws, &["branch", "-f", "feature", "main"]);
    let taken = h.take(None).unwrap();
    assert_eq!(
        ref_changes(&r.store, &start, &taken),
        [
            "moved branch feature",
            "created branch topic/new",
            "created tag v1"
        ]
    );
    let report = restore(&r.store, &r.ws, &start).unwrap();
    assert_eq!(report.refs, ["feature"]);
    assert_eq!(report.removed, ["tag v1", "topic/new"]);
    assert!(
        !r.ws.join(".git/refs/heads/topic").exists(),
        "emptied, removed"
    );
    assert!(r.ws.join(".git/refs/heads").is_dir());
    let line = report.line(true);
    assert!(
        line.starts_with(
            "git: refs put back (feature), refs made since removed (tag v1, topic/new)"
        ),
        "{line}"
    );
}

/// Only what `changed` names is looked at: an empty list costs nothing and finds nothing;
/// the ref named is found.
#[test]
fn take_looks_only_at_what_it_is_told_changed() {
    let r = repo();
    let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
    h.take(Some(&[]));
    git(&r.ws, &["branch", "other"]);
    assert_eq!(h.take(Some(&[])), None, "not told: not seen");
    let told = [
        "refs/heads/other".to_owned(),
        "logs/refs/heads/other".to_owned(),
    ];
    let hash = h.take(Some(&told)).expect("told: seen");
    let snap = snapshot(&r.store, &hash).unwrap();
    assert!(snap.contains_key("refs/heads/other") && snap.contains_key("refs/heads/main"));
    assert_eq!(h.take(None), None, "a full look finds nothing more");
}

/// Hundreds of refs: a look at an unchanged repository reads none of them.
#[test]
fn an_unchanged_look_at_hundreds_of_refs_is_quick() {
    let r = repo();
    for i in 0..300 {
        git(&r.ws, &["update-ref", &format!("refs/heads/b{i}"), "HEAD"]);
    }
    let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
    h.take(None);
    // Once the stats are old enough to be trusted.
    std::thread::sleep(std::time::Duration::from_millis(60));
    h.take(None);
    let started = std::time::Instant::now();
    for _ in 0..10 {
        assert_eq!(h.take(None), None);
    }
    let each = started.elapsed() / 10;
    eprintln!("an unchanged look at 300 refs: {each:?}");
    assert!(each < std::time::Duration::from_millis(20), "{each:?}");
}

/// A link the agent planted in `.git` is never followed: not kept when it stands for an
/// object or a ref, refused (and said) on the way of a restore.
#[test]
fn a_link_planted_in_git_is_not_followed() {
    let r = repo();
    let outside = r.ws.parent().unwrap().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let secret = outside.join("secret");
    std::fs::write(&secret, "the person's").unwrap();
    let loose = "0".repeat(38);
    std::fs::create_dir_all(r.ws.join(".git/objects/ab")).unwrap();
    std::os::unix::fs::symlink(&secret, r.ws.join(".git/objects/ab").join(&loose)).unwrap();
    std::fs::write(outside.join(&loose), "the person's too").unwrap();
    std::os::unix::fs::symlink(&outside, r.ws.join(".git/objects/cd")).unwrap();
    std::os::unix::fs::symlink(&secret, r.ws.join(".git/refs/heads/evil")).unwrap();
    let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
    let start = h.snapshot().to_owned();
    h.take(None);
    let kept = r.store.git_objects(&r.ws);
    assert!(!kept.join("ab").join(&loose).exists());
    assert!(!kept.join("cd").exists());
    let snap = snapshot(&r.store, &start).unwrap();
    assert!(!snap.contains_key("refs/heads/evil"), "{snap:?}");
    assert!(snap.contains_key("refs/heads/feature"));

    // `refs/heads` made a link to a directory of the person's: the restore is refused.
    git(&r.ws, &["update-ref", "-d", "refs/heads/feature"]);
    std::fs::remove_file(r.ws.join(".git/refs/heads/evil")).unwrap();
    let heads = r.ws.join(".git/refs/heads");
    std::fs::rename(&heads, r.ws.join(".git/refs/heads-old")).unwrap();
    std::os::unix::fs::symlink(&outside, &heads).unwrap();
    let refused = restore(&r.store, &r.ws, &start).unwrap_err();
    assert!(refused.contains("symbolic link"), "{refused}");
    let mut names: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, [std::ffi::OsString::from(&loose), "secret".into()]);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "the person's");
}

/// A `.git` file (a worktree, a submodule) is not covered.
#[test]
fn a_git_file_is_not_covered() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".git"), "gitdir: /elsewhere\n").unwrap();
    let store = Store::at(dir.path().join("store"));
    assert!(History::start(dir.path(), &store).unwrap().is_none());
}
