//! What the run's checkpoints fully keep is decided as reversible, on the real Claude Code CLI
//! under the default policy, headless (`-p`, where an escalation is a refusal): `git checkout
//! -- .` and `git clean -fd` in a workspace with uncommitted edits and untracked files run,
//! the run's summary names the `ahp-wrap undo` that brings each back, `audit show` marks them
//! `allow (reversible)`, and that undo restores every file byte for byte; `git branch -D` and
//! `git stash drop` run and undo puts the branch and the stash back. What the checkpoints do
//! not keep is refused as before: `rm -rf ~/other-project`, `git clean -fdx` where it would
//! remove a `node_modules`, and any of them with `[checkpoints] enabled = false`.

use ahp_wrap_testkit::claude_code::{bash, run, FakeApi, World};
use ahp_wrap_testkit::common::{git, snapshot};
use ahp_wrap_testkit::{agents, wrap_bin};

use std::path::Path;
use std::process::Command;

use serde_json::json;

/// Claude Code's own permissions stay at their default but for Bash, which headless Claude
/// (`-p`, no one to ask) would otherwise refuse before the wrapper sees the call: allowed as a
/// person running it headless allows it. Its sandbox is as it ships (off).
const BASH_ALLOWED: [&str; 2] = ["--allowedTools", "Bash"];

/// `git ARGS` in `ws`: what it printed.
fn git_out(ws: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with a commit, then a morning's work nobody committed: an edited tracked
/// file, a deleted one, untracked files and directories, an ignored `.env`.
fn workspace_with_changes(ws: &Path) {
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn one() {}\n").unwrap();
    std::fs::write(ws.join("README.md"), "# project\n").unwrap();
    std::fs::write(ws.join(".gitignore"), ".env\n").unwrap();
    git(ws, &["init", "-q", "-b", "main"]);
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-qm", "one"]);
    std::fs::write(
        ws.join("src/main.rs"),
        "fn main() {\n    println!(\"a morning of work\");\n}\n",
    )
    .unwrap();
    std::fs::remove_file(ws.join("README.md")).unwrap();
    std::fs::write(ws.join("src/draft.rs"), "pub fn draft() {}\n").unwrap();
    std::fs::create_dir_all(ws.join("notes/2026")).unwrap();
    std::fs::write(ws.join("notes/2026/ideas.md"), "- only copy\n").unwrap();
    std::fs::write(ws.join(".env"), "TOKEN=only-copy\n").unwrap();
}

/// The undo commands the run's summary names, in order.
fn undos(stderr: &str) -> Vec<Vec<String>> {
    stderr
        .split('`')
        .filter(|s| s.starts_with("ahp-wrap undo --run "))
        .map(|s| s.split(' ').skip(1).map(str::to_owned).collect())
        .collect()
}

/// The run's one audit log in `home`'s trail, as records, once `audit verify` holds it whole.
fn audit_records(home: &Path) -> Vec<serde_json::Value> {
    let trail: Vec<_> = std::fs::read_dir(home.join(".local/state/ahp-wrap/audit"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(trail.len(), 1, "{trail:?}");
    let verify = agents::run_captured(
        Command::new(wrap_bin())
            .args(["audit", "verify"])
            .arg(&trail[0]),
        std::time::Duration::from_secs(30),
    );
    assert!(
        verify.status.success(),
        "audit verify: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
    agents::read_jsonl(&trail[0])
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn discarding_changes_and_cleaning_run_and_undo_brings_them_back() {
    let world = World::new();
    let ws = world.ws();
    workspace_with_changes(&ws);
    let before = snapshot(&ws);

    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash("git checkout -- ."),
            bash("git clean -fd"),
            {"text": "Back to the last commit."}
        ]),
    );
    // The wrapper's policy is the default one; Claude's permissions as BASH_ALLOWED says.
    let r = run(world.command(
        &api,
        Some(&["--summary", "never"]),
        &[
            "-p",
            "throw my changes away",
            BASH_ALLOWED[0],
            BASH_ALLOWED[1],
        ],
    ));
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    let results = api.tool_results();
    r.check(results.len() == 2, "two tool results reach the model");
    r.check(
        results.iter().all(|t| t["is_error"] != true),
        &format!("neither command is refused: {results:#?}"),
    );
    // Both ran, on disk.
    r.check(
        std::fs::read_to_string(ws.join("src/main.rs")).unwrap() == "fn main() {}\n",
        "git checkout -- . discarded the edit",
    );
    r.check(
        ws.join("README.md").exists(),
        "and brought the deleted file back",
    );
    r.check(
        !ws.join("src/draft.rs").exists() && !ws.join("notes").exists(),
        "git clean -fd removed the untracked files",
    );
    r.check(ws.join(".env").exists(), "and left the ignored .env alone");

    let stderr = String::from_utf8_lossy(&r.output.stderr).into_owned();
    let undo = undos(&stderr);
    r.check(
        undo.len() == 2 && stderr.contains("reversible: tool call"),
        "the summary has a line for each reversible call, naming its undo",
    );
    r.check(
        stderr.contains("deleted 2 (") && stderr.contains("notes/2026/ideas.md"),
        "the clean's line says what it deleted",
    );

    // The audit record and `audit show` say it.
    let home = world.dir.path().join("home");
    let records = audit_records(&home);
    let reversible: Vec<_> = records
        .iter()
        .filter(|r| r["event_type"] == "pre_action" && r["payload"]["tool_name"] == "Bash")
        .collect();
    assert_eq!(reversible.len(), 2, "{records:#?}");
    for (rec, undo) in reversible.iter().zip(&undo) {
        assert_eq!(rec["decision"], "allow", "{rec}");
        assert_eq!(rec["source"], "policy:git-discard-work", "{rec}");
        assert_eq!(
            rec["reversible"]["undo"].as_str(),
            Some(format!("ahp-wrap {}", undo.join(" ")).as_str()),
            "{rec}"
        );
    }
    let show = agents::run_captured(
        Command::new(wrap_bin())
            .args(["audit", "show"])
            .env_clear()
            .env("HOME", &home)
            .env("COLUMNS", "1000"),
        std::time::Duration::from_secs(30),
    );
    let shown = String::from_utf8_lossy(&show.stdout);
    assert_eq!(
        shown.matches("allow (reversible)").count(),
        2,
        "audit show marks both: {shown}"
    );

    // The first call's undo (back to before `git checkout -- .`) brings everything back.
    let args: Vec<&str> = undo[0].iter().map(String::as_str).collect();
    let out = world.wrap(&args);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{args:?}: {said}");
    assert_eq!(snapshot(&ws), before, "every file byte for byte: {said}");
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_deleted_branch_and_a_dropped_stash_run_and_undo_puts_them_back() {
    let world = World::new();
    let ws = world.ws();
    std::fs::write(ws.join("main.txt"), "main\n").unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "main"]);
    git(&ws, &["checkout", "-qb", "feature"]);
    std::fs::write(ws.join("feature.txt"), "a week of work\n").unwrap();
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "feature"]);
    git(&ws, &["checkout", "-q", "main"]);
    std::fs::write(ws.join("main.txt"), "stashed work\n").unwrap();
    git(&ws, &["stash", "-q"]);
    let history = || {
        [
            git_out(&ws, &["for-each-ref", "--format=%(refname) %(objectname)"]),
            git_out(&ws, &["stash", "list", "--format=%H %gd %s"]),
            git_out(&ws, &["log", "--format=%H %s", "refs/heads/feature"]),
        ]
    };
    let before = history();

    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash("git branch -D feature"),
            bash("git stash drop"),
            {"text": "Pruned."}
        ]),
    );
    let r = run(world.command(
        &api,
        Some(&["--summary", "never"]),
        &[
            "-p",
            "prune branches and stashes",
            BASH_ALLOWED[0],
            BASH_ALLOWED[1],
        ],
    ));
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    r.check(
        api.tool_results().iter().all(|t| t["is_error"] != true),
        &format!("neither is refused: {:#?}", api.tool_results()),
    );
    r.check(
        git_out(&ws, &["branch", "--list", "feature"]).is_empty()
            && git_out(&ws, &["stash", "list"]).is_empty(),
        "the branch and the stash are gone",
    );
    let stderr = String::from_utf8_lossy(&r.output.stderr).into_owned();
    let undo = undos(&stderr);
    r.check(undo.len() == 2, "the summary names each call's undo");

    let args: Vec<&str> = undo[0].iter().map(String::as_str).collect();
    let out = world.wrap(&args);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        history(),
        before,
        "the branch and the stash are back: {said}"
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn what_the_checkpoints_do_not_keep_is_still_refused() {
    let world = World::new();
    let ws = world.ws();
    let home = world.dir.path().join("home");
    let other = home.join("other-project");
    std::fs::create_dir_all(other.join("src")).unwrap();
    std::fs::write(other.join("src/main.rs"), "fn main() {}\n").unwrap();
    workspace_with_changes(&ws);
    // A package's dependencies, which the checkpoints leave out and `git clean -fdx`
    // removes.
    std::fs::write(ws.join("package.json"), "{\"name\": \"p\"}\n").unwrap();
    std::fs::create_dir_all(ws.join("node_modules/left-pad")).unwrap();
    std::fs::write(
        ws.join("node_modules/left-pad/index.js"),
        "module.exports = 1;\n",
    )
    .unwrap();
    let before = snapshot(&ws);

    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash("rm -rf ~/other-project"),
            bash("git clean -fdx"),
            {"text": "Could not."}
        ]),
    );
    let r = run(world.command(
        &api,
        Some(&["--summary", "never"]),
        &["-p", "clean everything", BASH_ALLOWED[0], BASH_ALLOWED[1]],
    ));
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    let results = api.tool_results();
    r.check(
        results.len() == 2 && results.iter().all(|t| t["is_error"] == true),
        &format!("both are refused: {results:#?}"),
    );
    let said = |i: usize| results[i]["content"].to_string();
    r.check(
        said(0).contains("outside the workspace"),
        "the delete outside is refused for what it is",
    );
    r.check(
        said(1).contains("not reversible") && said(1).contains("node_modules"),
        &format!(
            "the clean's refusal says why it is not reversible: {}",
            said(1)
        ),
    );
    r.check(
        other.join("src/main.rs").exists(),
        "the other project is intact",
    );
    r.check(snapshot(&ws) == before, "the workspace is untouched");
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn without_checkpoints_discarding_work_is_refused_as_before() {
    let world = World::new();
    let ws = world.ws();
    workspace_with_changes(&ws);
    let before = snapshot(&ws);
    let policy = world.dir.path().join("no-checkpoints.toml");
    std::fs::write(
        &policy,
        "extends = \"default\"\n\n[checkpoints]\nenabled = false\n",
    )
    .unwrap();
    let policy = policy.display().to_string();

    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash("git clean -fd"), {"text": "Could not."}]),
    );
    let r = run(world.command(
        &api,
        Some(&["--summary", "never", "--policy", &policy]),
        &["-p", "clean up", BASH_ALLOWED[0], BASH_ALLOWED[1]],
    ));
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    let results = api.tool_results();
    r.check(
        results.len() == 1 && results[0]["is_error"] == true,
        &format!("the clean is refused: {results:#?}"),
    );
    let said = results[0]["content"].to_string();
    r.check(
        said.contains("discards uncommitted work") && !said.contains("reversible"),
        &format!("with today's reason: {said}"),
    );
    r.check(snapshot(&ws) == before, "the workspace is untouched");
}
