//! A policy file given with `--policy`: checked before the agent starts (a file that does
//! not hold stops the run, and the agent never runs), its default rules compiled once the
//! agent has started, from the text read at the start: a hookless agent that rewrites the
//! file to allow everything is still refused what the file said when the run started. What
//! happened is read from the disk.

use ahp_wrap_testkit::common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::*;

/// `cp` refused, the default policy's rules kept.
const POLICY: &str = r#"extends = "default"

[[rule]]
id = "no-cp"
decision = "block"
reason = "this job copies nothing"
command.program = ["cp"]
"#;

/// `script` as a hookless agent under the wrapper with the policy file `policy`, in `ws`.
fn agent(ws: &Path, policy: &Path, script: &str) -> Output {
    run(
        Command::new(wrap_bin())
            .arg("--policy")
            .arg(policy)
            .args(["--summary", "never", "--", "sh", "-c", script])
            .current_dir(ws),
        Duration::from_secs(60),
    )
}

#[test]
fn a_policy_file_that_does_not_hold_stops_the_run_before_the_agent_starts() {
    let (_dir, ws) = outside_tree("policy-file-", &[], &[]);
    let policy = ws.join("policy.toml");
    std::fs::write(
        &policy,
        format!("{POLICY}\n# a default rule that does not exist\n").replace(
            "extends = \"default\"\n",
            "extends = \"default\"\ndisable = [\"no-such-rule\"]\n",
        ),
    )
    .unwrap();
    let out = agent(&ws, &policy, "touch ran");
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no-such-rule"),
        "{}",
        show(&out)
    );
    assert!(!ws.join("ran").exists(), "the agent never ran");
}

#[test]
fn what_the_file_said_at_the_start_decides_whatever_the_agent_writes_into_it() {
    let (_dir, ws) = outside_tree("policy-file-", &[], &[]);
    std::fs::write(ws.join("a"), "a file\n").unwrap();
    let policy = ws.join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    // The policy is built on the agent's first command asked about, after this rewrite.
    let out = agent(
        &ws,
        &policy,
        "printf 'extends = \"default\"\\n' > policy.toml; cp a b; echo $? > cp-exit",
    );
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        std::fs::read_to_string(&policy).unwrap(),
        "extends = \"default\"\n",
        "the agent rewrote the file"
    );
    assert_ne!(
        std::fs::read_to_string(ws.join("cp-exit")).unwrap().trim(),
        "0",
        "{}",
        show(&out)
    );
    assert!(!ws.join("b").exists(), "the refused copy never happened");
}
