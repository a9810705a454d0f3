//! Undoing what the real Claude Code CLI did to a repository's history, under the default
//! wrapper with its rule that asks about discarding work left out (as when a person approved
//! each call): in a git workspace with an unmerged branch and a stash, the model deletes the
//! branch with `git update-ref -d`, drops the stash, resets `main` two commits back, then
//! expires every reflog and runs a pruning `gc`, which deletes the objects none of that left
//! reachable. After the run, `ahp-wrap undo` puts the branch, the stash and the commits back:
//! the same ids, each object's content byte for byte, the branch's log as it was; `ahp-wrap
//! changes` names the ref each call moved or deleted.

use ahp_wrap_testkit::claude_code::{bash, run, FakeApi, World};
use ahp_wrap_testkit::common::git;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

/// `git ARGS` in `ws`: its output, and whether it succeeded.
fn git_out(ws: &Path, args: &[&str]) -> (String, bool) {
    let out = Command::new("git")
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        out.status.success(),
    )
}

/// Every object `ids` names, as `git cat-file --batch` prints them (ids, types, contents).
fn objects(ws: &Path, ids: &str) -> Vec<u8> {
    let mut child = Command::new("git")
        .args(["cat-file", "--batch"])
        .current_dir(ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{ids}\n").as_bytes())
        .unwrap();
    child.wait_with_output().unwrap().stdout
}

/// What the history says: each ref and what it names, the stash list, the feature branch's
/// log.
fn history(ws: &Path) -> Vec<String> {
    [
        &["for-each-ref", "--format=%(refname) %(objectname)"][..],
        &["rev-parse", "HEAD"],
        &["stash", "list", "--format=%H %gd %s"],
        &["log", "--format=%H %s", "refs/heads/feature"],
    ]
    .iter()
    .map(|args| git_out(ws, args).0)
    .collect()
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_deleted_branch_a_dropped_stash_and_a_pruned_reset_are_undone() {
    let world = World::new();
    let ws = world.ws();
    git(&ws, &["init", "-q", "-b", "main"]);
    for i in 1..=4 {
        std::fs::write(ws.join("main.txt"), format!("main {i}\n")).unwrap();
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-qm", &format!("main {i}")]);
    }
    git(&ws, &["checkout", "-qb", "feature"]);
    for i in 1..=2 {
        std::fs::write(ws.join("feature.txt"), format!("a week of work {i}\n")).unwrap();
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-qm", &format!("feature {i}")]);
    }
    git(&ws, &["checkout", "-q", "main"]);
    std::fs::write(ws.join("main.txt"), "work in progress, stashed\n").unwrap();
    git(&ws, &["stash", "-q"]);
    let before = history(&ws);
    let ids = git_out(&ws, &["rev-list", "--all", "--reflog", "--objects"]).0;
    let ids: String = ids
        .lines()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let contents = objects(&ws, &ids);
    let feature = git_out(&ws, &["rev-parse", "feature"]).0;

    let policy = world.dir.path().join("approved.toml");
    std::fs::write(
        &policy,
        "extends = \"default\"\ndisable = [\"git-discard-work\"]\n",
    )
    .unwrap();
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash("git update-ref -d refs/heads/feature"),
            bash("git stash drop"),
            bash("git reset --hard HEAD~2"),
            bash("git reflog expire --expire=now --all && git gc --prune=now"),
            {"text": "Cleaned up."}
        ]),
    );
    let policy = policy.display().to_string();
    // Claude Code's own permissions at their default, but for Bash, allowed as a person
    // running it headless allows it (`-p` cannot ask; without it every call is refused and
    // nothing is there to undo). Its sandbox is left as it ships (off).
    let r = run(world.command(
        &api,
        Some(&["--summary", "never", "--policy", &policy]),
        &["-p", "clean the repository up", "--allowedTools", "Bash"],
    ));
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    r.check(
        !git_out(&ws, &["rev-parse", "--verify", "-q", "refs/heads/feature"]).1,
        "the agent deleted the branch",
    );
    r.check(
        git_out(&ws, &["stash", "list"]).0.is_empty(),
        "the agent dropped the stash",
    );
    r.check(
        !git_out(&ws, &["cat-file", "-e", &feature]).1,
        "the gc pruned the branch's commits",
    );

    let wrap = |args: &[&str]| world.wrap(args);
    let changes = wrap(&["changes"]);
    let shown = String::from_utf8_lossy(&changes.stdout).into_owned();
    let after = |call: &str| {
        shown
            .split("\nafter tool call ")
            .find(|s| s.contains(call))
            .unwrap_or("")
            .to_owned()
    };
    assert!(
        after("git update-ref -d").contains("git: deleted branch feature"),
        "{shown}"
    );
    assert!(
        after("git stash drop").contains("git: deleted the stash"),
        "{shown}"
    );
    assert!(
        after("git reset --hard").contains("git: moved branch main"),
        "{shown}"
    );

    let undo = wrap(&["undo"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&undo.stdout),
        String::from_utf8_lossy(&undo.stderr)
    );
    assert!(undo.status.success(), "{said}");
    assert!(
        said.contains("git: refs put back (") && said.contains("feature"),
        "undo says what it put back: {said}"
    );
    assert_eq!(history(&ws), before, "{said}");
    assert_eq!(
        objects(&ws, &ids),
        contents,
        "every object is back, byte for byte: {said}"
    );
    let (_, whole) = git_out(&ws, &["fsck", "--no-dangling", "--no-progress"]);
    assert!(whole, "the repository is whole again: {said}");
}
