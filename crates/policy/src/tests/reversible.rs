//! `reversible = true`: what the policy says a command discards, for the run to judge against
//! its checkpoints; and the escalations that carry no reach, so that the rule's decision
//! stands whatever the checkpoints keep.

use super::*;

/// The reach of `command` in the sandbox's workspace, asserting it is escalated by
/// `git-discard-work`.
fn reach(s: &Sandbox, command: &str) -> Option<Reach> {
    let d = s.bash(command);
    assert!(
        matches!(d.verdict, Verdict::Escalate { .. })
            && d.rule.as_deref() == Some("git-discard-work"),
        "{command:?} should be escalated by git-discard-work, got {d:?}"
    );
    d.reversible
}

fn work_tree(s: &Sandbox, root: &str, tracked_only: bool) -> Effect {
    Effect::WorkTree {
        cwd: s.ws.clone(),
        root: match root {
            "" => s.ws.clone(),
            root => s.ws.join(root),
        },
        tracked_only,
    }
}

#[test]
fn discarding_changes_and_cleaning_reach_the_work_tree_below_their_paths() {
    let s = Sandbox::new();
    let cases = [
        ("git clean -fd", vec![work_tree(&s, "", false)]),
        ("git clean -fdx", vec![work_tree(&s, "", false)]),
        (
            "git clean -f -d -e '*.keep' src",
            vec![work_tree(&s, "src", false)],
        ),
        (
            "git clean -fdX -- src/deep",
            vec![work_tree(&s, "src/deep", false)],
        ),
        ("git checkout -- .", vec![work_tree(&s, "", true)]),
        ("git checkout .", vec![work_tree(&s, "", true)]),
        (
            "git checkout -- . 'src/*.rs'",
            vec![work_tree(&s, "", true), work_tree(&s, "src", true)],
        ),
        ("git restore .", vec![work_tree(&s, "", true)]),
        (
            "git restore --worktree -- . src",
            vec![work_tree(&s, "", true), work_tree(&s, "src", true)],
        ),
        // From another tree, a file of it is written over an untracked one.
        (
            "git restore --source=HEAD~1 .",
            vec![work_tree(&s, "", false)],
        ),
        ("git stash drop", vec![Effect::Refs { cwd: s.ws.clone() }]),
        ("git stash clear", vec![Effect::Refs { cwd: s.ws.clone() }]),
        (
            "git branch -D feature",
            vec![Effect::Refs { cwd: s.ws.clone() }],
        ),
    ];
    for (command, effects) in cases {
        assert_eq!(reach(&s, command), Some(Reach { effects }), "{command}");
    }
    // Two commands matched, both read; a command beside them that no rule asks about needs
    // no reach.
    let both = reach(&s, "git stash drop && git clean -fd && ls").expect("a reach");
    assert_eq!(both.effects.len(), 2, "{both:?}");
}

#[test]
fn what_writes_the_index_or_is_not_read_exactly_carries_no_reach() {
    let s = Sandbox::new();
    for command in [
        // The index is not kept.
        "git reset --hard",
        "git reset --hard HEAD~3",
        "git checkout main -- .",
        "git checkout -f",
        "git restore --staged .",
        "git restore -SW .",
        // The repository git acts on, or where, is not the command's cwd.
        "git -C /tmp/elsewhere clean -fd",
        "git --work-tree=/tmp/x clean -fd",
        "GIT_WORK_TREE=/tmp/x git clean -fd",
        "GIT_DIR=/tmp/x/.git git checkout -- .",
        "cd \"$D\" && git clean -fd",
        // Values known only at run time, and options not read.
        "git clean -fd \"$X\"",
        "git clean -fdi",
        "git clean -fd --interactive",
        "git clean -fd :^src",
        "sudo git clean -fd",
        "git clean -fd > /tmp/cleaned.txt",
        "git stash drop --index stash@{0}",
        "git branch -D -m x y",
    ] {
        assert_eq!(reach(&s, command), None, "{command}");
    }
}

#[test]
fn another_rule_deciding_beside_a_reversible_one_keeps_its_decision() {
    let s = Sandbox::new();
    // A block wins and carries no reach.
    let d = s.bash("git clean -fd && rm -rf ~");
    assert!(matches!(d.verdict, Verdict::Block { .. }), "{d:?}");
    assert_eq!(d.reversible, None);
    // An escalation by a rule that is not reversible.
    let d = s.bash("git clean -fd && git push --force");
    assert!(matches!(d.verdict, Verdict::Escalate { .. }), "{d:?}");
    assert_eq!(d.reversible, None, "{d:?}");
    // A command the parser cannot read.
    let d = s.bash("git clean -fd && echo $(");
    assert_eq!(d.reversible, None, "{d:?}");
}

#[test]
fn a_recursive_delete_a_reversible_rule_asks_about_reaches_its_trees() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let toml = r#"
[[rule]]
id = "ask-before-deleting"
decision = "escalate"
reason = "deleting a tree"
reversible = true
match = ["rm -rf build"]
no_match = ["rm build.log"]
command.deletes = { where = ["inside_workspace"] }
"#;
    let policy = Policy::from_toml_str(toml).unwrap().with_workspace(&ws);
    let bash = |command: &str| {
        policy.evaluate(&pre_action(json!({
            "tool_name": "Bash",
            "arguments": { "command": command },
            "context": { "working_directory": ws },
        })))
    };
    let d = bash("rm -rf build dist");
    assert!(matches!(d.verdict, Verdict::Escalate { .. }), "{d:?}");
    assert_eq!(
        d.reversible,
        Some(Reach {
            effects: vec![
                Effect::Tree(ws.join("build")),
                Effect::Tree(ws.join("dist"))
            ]
        })
    );
    // Code that deletes is not read as a tree alone.
    let d = bash("python3 -c \"import shutil; shutil.rmtree('build')\"");
    assert_eq!(d.reversible, None, "{d:?}");
}

#[test]
fn only_an_escalation_may_be_reversible() {
    let toml = r#"
[[rule]]
id = "no-clean"
decision = "block"
reason = "no"
reversible = true
command.program = ["git"]
"#;
    let err = Policy::from_toml_str(toml).unwrap_err().to_string();
    assert!(
        err.contains("only an escalate rule may be reversible"),
        "{err}"
    );
}
