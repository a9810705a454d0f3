//! The judgement of what the checkpoints keep, on real repositories and a real store: what
//! it covers, and each way it fails closed.

use super::*;
use std::process::Command;

/// `git ARGS` in `ws`, which must succeed.
fn git(ws: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.email=t@t", "-c", "user.name=t"])
        .args(args)
        .current_dir(ws)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository with a commit, an uncommitted edit and an untracked file; its checkpoints
/// (with `spec`), the checkpoint before a first call taken.
struct Repo {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    ws: PathBuf,
    checkpoints: Checkpointer,
}

fn repo_with(spec: crate::policy::CheckpointSpec, make: impl Fn(&Path)) -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "one"]);
    std::fs::write(ws.join("src/main.rs"), "fn main() { work() }\n").unwrap();
    std::fs::write(ws.join("src/draft.rs"), "draft\n").unwrap();
    make(&ws);
    let spec = crate::policy::CheckpointSpec {
        exclude: Some(vec!["node_modules".into()]),
        ..spec
    };
    let checkpoints = Checkpointer::start_in(
        crate::checkpoint::store::Store::at(store.path().join("checkpoints")),
        &spec,
        &ws,
        "run-1",
        "test",
    )
    .unwrap()
    .expect("checkpoints");
    assert_eq!(checkpoints.before("Bash", "git clean -fd".into()), Some(1));
    Repo {
        _dirs: (dir, store),
        ws,
        checkpoints,
    }
}

fn repo() -> Repo {
    repo_with(Default::default(), |_| {})
}

fn reach(effects: Vec<Effect>) -> Reach {
    Reach { effects }
}

fn clean(ws: &Path, root: &str) -> Reach {
    reach(vec![Effect::WorkTree {
        cwd: ws.to_owned(),
        root: ws.join(root),
        tracked_only: false,
    }])
}

fn checkout(ws: &Path, root: &str) -> Reach {
    reach(vec![Effect::WorkTree {
        cwd: ws.to_owned(),
        root: ws.join(root),
        tracked_only: true,
    }])
}

#[track_caller]
fn not_covered(r: &Repo, reach: &Reach, why: &str) {
    match r.checkpoints.covers(reach) {
        Ok(()) => panic!("{reach:?} should not be covered ({why})"),
        Err(e) => assert!(e.contains(why), "{reach:?}: {e:?} should say {why:?}"),
    }
}

#[test]
fn what_the_checkpoint_holds_as_the_disk_does_is_covered() {
    let r = repo();
    let ws = &r.ws;
    assert_eq!(r.checkpoints.covers(&clean(ws, "")), Ok(()));
    assert_eq!(r.checkpoints.covers(&checkout(ws, "src")), Ok(()));
    assert_eq!(
        r.checkpoints.covers(&reach(vec![
            Effect::Tree(ws.join("src")),
            Effect::Refs {
                cwd: ws.join("src")
            },
            // Nothing there to discard.
            Effect::Tree(ws.join("gone")),
        ])),
        Ok(())
    );
}

#[test]
fn a_file_written_since_the_checkpoint_looked_is_not_covered() {
    let r = repo();
    std::fs::write(r.ws.join("src/new.rs"), "written after\n").unwrap();
    not_covered(&r, &clean(&r.ws, ""), "src/new.rs is in no checkpoint yet");
    std::fs::write(r.ws.join("src/draft.rs"), "rewritten after\n").unwrap();
    not_covered(
        &r,
        &clean(&r.ws, "src"),
        "changed since the checkpoint looked",
    );
}

#[test]
fn a_file_too_large_to_keep_is_not_covered_where_the_command_reaches_it() {
    let r = repo_with(
        crate::policy::CheckpointSpec {
            max_file_mb: Some(0),
            ..Default::default()
        },
        |_| {},
    );
    // src/draft.rs is untracked and over 0 MiB: not kept.
    not_covered(&r, &clean(&r.ws, ""), "src/draft.rs is too large to keep");
    // Restoring what git tracks does not touch it.
    assert_eq!(r.checkpoints.covers(&checkout(&r.ws, "")), Ok(()));
}

#[test]
fn a_left_out_directory_is_not_covered_unless_only_tracked_files_are_reached() {
    let r = repo_with(Default::default(), |ws| {
        std::fs::write(ws.join("package.json"), "{}\n").unwrap();
        std::fs::create_dir_all(ws.join("node_modules/x")).unwrap();
        std::fs::write(ws.join("node_modules/x/index.js"), "1\n").unwrap();
    });
    not_covered(&r, &clean(&r.ws, ""), "it reaches node_modules");
    not_covered(
        &r,
        &clean(&r.ws, "node_modules/x"),
        "it reaches node_modules",
    );
    // No file git tracks lies there.
    assert_eq!(r.checkpoints.covers(&checkout(&r.ws, "")), Ok(()));
}

#[test]
fn the_repository_its_own_git_and_the_workspace_itself_are_not_covered() {
    let r = repo_with(Default::default(), |ws| {
        std::fs::create_dir_all(ws.join("vendor/lib")).unwrap();
        git(&ws.join("vendor/lib"), &["init", "-q"]);
    });
    let ws = &r.ws;
    not_covered(
        &r,
        &reach(vec![Effect::Tree(ws.clone())]),
        "the workspace itself",
    );
    not_covered(
        &r,
        &reach(vec![Effect::Tree(ws.join(".git/refs"))]),
        "in the repository's .git",
    );
    // A nested repository is not kept, and git run in it acts on it.
    not_covered(
        &r,
        &clean(ws, "vendor"),
        "a repository the checkpoints do not keep",
    );
    not_covered(
        &r,
        &reach(vec![Effect::Refs {
            cwd: ws.join("vendor/lib"),
        }]),
        "another repository",
    );
}

#[test]
fn what_lies_outside_the_workspace_is_not_covered_however_it_is_reached() {
    let outside = tempfile::tempdir().unwrap();
    let out = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::write(out.join("data.txt"), "elsewhere\n").unwrap();
    let r = repo_with(Default::default(), |ws| {
        std::os::unix::fs::symlink(&out, ws.join("link")).unwrap();
    });
    let ws = &r.ws;
    not_covered(
        &r,
        &reach(vec![Effect::Tree(out.clone())]),
        "outside the workspace",
    );
    not_covered(
        &r,
        &reach(vec![Effect::Tree(ws.join("link/data.txt"))]),
        "outside the workspace",
    );
    not_covered(
        &r,
        &reach(vec![Effect::Refs { cwd: out.clone() }]),
        "outside the workspace",
    );
    // `rm -r link` removes the link, which the checkpoint keeps.
    assert_eq!(
        r.checkpoints
            .covers(&reach(vec![Effect::Tree(ws.join("link"))])),
        Ok(())
    );
}

#[test]
fn without_a_repository_git_history_is_not_covered() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let checkpoints = Checkpointer::start_in(
        crate::checkpoint::store::Store::at(store.path().join("checkpoints")),
        &Default::default(),
        &ws,
        "run-1",
        "test",
    )
    .unwrap()
    .expect("checkpoints");
    checkpoints.before("Bash", String::new());
    let e = checkpoints
        .covers(&reach(vec![Effect::Refs { cwd: ws.clone() }]))
        .unwrap_err();
    assert!(e.contains(".git is not a directory"), "{e}");
    assert_eq!(
        checkpoints.covers(&reach(vec![Effect::Tree(ws.join("a.txt"))])),
        Ok(())
    );
}
