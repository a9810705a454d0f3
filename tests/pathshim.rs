//! PATH shims: an agent without hooks runs destructive commands by name — directly, through
//! `bash -c`, `xargs`, `env`, with a false `argv[0]` — and each is checked by the wrapper
//! before it runs. What happened is read from the disk and the audit log.

use ahp_wrap_testkit::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Runs `script` as a generic agent (sh) in the workspace `ws`, with `args` before `--`.
fn agent(ws: &Path, args: &[&str], script: &str) -> std::process::Output {
    run(
        Command::new(wrap_bin())
            .args(args)
            .arg("--")
            .args(["sh", "-c", script])
            .current_dir(ws),
        Duration::from_secs(60),
    )
}

fn records(audit: &Path) -> Vec<Value> {
    std::fs::read_to_string(audit)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The audited `exec` decisions, as (decision, argv).
fn execs(audit: &Path) -> Vec<(String, Vec<String>)> {
    records(audit)
        .iter()
        .filter(|r| r["payload"]["tool_name"] == "exec")
        .map(|r| {
            let argv = r["payload"]["arguments"]["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            (r["decision"].as_str().unwrap().to_owned(), argv)
        })
        .collect()
}

#[test]
fn destructive_commands_run_by_name_are_stopped_however_they_are_started() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("precious"), "x").unwrap();
    std::fs::write(ws.path().join("junk"), "x").unwrap();
    let audit = ws.path().join("audit.jsonl");
    let v = victim.display();
    let script = format!(
        r#"rm -rf '{v}'; echo $? > rc_direct
bash -c "rm -rf '{v}'"; echo $? > rc_bash
echo '{v}' | xargs rm -rf; echo $? > rc_xargs
env rm -rf '{v}'; echo $? > rc_env
bash -c "exec -a innocent rm -rf '{v}'"; echo $? > rc_argv0
rm junk; echo $? > rc_allowed
"#
    );
    let out = agent(
        ws.path(),
        &["--audit-log", audit.to_str().unwrap()],
        &script,
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        victim.join("precious").exists(),
        "the victim was deleted: {}",
        show(&out)
    );
    for (file, want) in [
        ("rc_direct", "126"),
        ("rc_bash", "126"),
        ("rc_xargs", "123"), // xargs: a command exited 1-125 or 126
        ("rc_env", "126"),
        ("rc_argv0", "126"),
        ("rc_allowed", "0"),
    ] {
        assert_eq!(read(ws.path(), file).trim(), want, "{file}: {}", show(&out));
    }
    assert!(
        !ws.path().join("junk").exists(),
        "the allowed rm did not run"
    );
    let execs = execs(&audit);
    let blocked: Vec<_> = execs.iter().filter(|(d, _)| d == "block").collect();
    assert_eq!(blocked.len(), 5, "{execs:?}");
    assert!(blocked
        .iter()
        .all(|(_, argv)| argv[0] == "rm" && argv[1] == "-rf"));
    assert!(
        execs
            .iter()
            .any(|(d, argv)| d == "allow" && argv == &["rm", "junk"]),
        "{execs:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("rm: blocked: recursive deletion"),
        "{}",
        show(&out)
    );
}

#[test]
fn the_event_names_the_processes_that_ran_the_command() {
    let ws = tempfile::tempdir().unwrap();
    let audit = ws.path().join("audit.jsonl");
    let script = "bash -c 'GIT_DIR=/elsewhere git --version' > /dev/null";
    let out = agent(ws.path(), &["--audit-log", audit.to_str().unwrap()], script);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let all = records(&audit);
    let git = all
        .iter()
        .find(|r| r["payload"]["tool_name"] == "exec")
        .expect("the git call is audited");
    let ctx = &git["payload"]["context"];
    let chain = ctx["process_ancestry"].as_array().unwrap();
    let argvs: Vec<String> = chain.iter().map(|p| p["argv"].to_string()).collect();
    assert!(
        argvs[0].contains("bash") && argvs[0].contains("GIT_DIR"),
        "{argvs:?}"
    );
    assert!(
        argvs.last().unwrap().contains("\"sh\""),
        "ends at the agent: {argvs:?}"
    );
    assert_eq!(ctx["env_changed"]["GIT_DIR"], "/elsewhere", "{ctx}");
    assert_eq!(
        ctx["working_directory"],
        ws.path().canonicalize().unwrap().display().to_string()
    );
}

/// A scripted stdio harness answering every `exec` with `decision`.
fn harness(dir: &Path, decision: Value) -> String {
    let rules = serde_json::json!({
        "rules": [{"event": "pre_action", "contains": "\"exec\"", "decision": decision}],
    });
    script_harness(dir, rules)
}

#[test]
fn a_changed_command_runs_as_changed() {
    let ws = tempfile::tempdir().unwrap();
    let changed = ws.path().join("changed");
    std::fs::write(ws.path().join("keep"), "x").unwrap();
    let decision = serde_json::json!({"decision": "modify", "modified_payload": {
        "tool_name": "exec", "arguments": {"command": ["touch", changed]}}});
    let spec = harness(ws.path(), decision);
    let out = agent(ws.path(), &["--harness", &spec], "rm keep; echo $? > rc");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(read(ws.path(), "rc").trim(), "0");
    assert!(ws.path().join("keep").exists(), "the original command ran");
    assert!(changed.exists(), "the changed command did not run");
}

#[test]
fn a_harness_that_is_down_fails_closed() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("keep"), "x").unwrap();
    let out = agent(
        ws.path(),
        &[
            "--harness",
            "unix:/nonexistent/ahp.sock",
            "--timeout",
            "500",
        ],
        "rm keep; echo $? > rc",
    );
    assert_eq!(read(ws.path(), "rc").trim(), "126", "{}", show(&out));
    assert!(
        ws.path().join("keep").exists(),
        "rm ran with the harness down"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fail mode: closed"),
        "{}",
        show(&out)
    );
}

#[test]
fn the_command_set_follows_the_command_line() {
    let ws = tempfile::tempdir().unwrap();
    let list = "ls \"$AHP_WRAP_PATHSHIM_DIR\" > shims; echo \"$PATH\" > path";
    let out = agent(
        ws.path(),
        &["--no-intercept", "rm,git", "--intercept", "make"],
        list,
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let shims = read(ws.path(), "shims");
    let names: Vec<&str> = shims.lines().collect();
    assert!(
        names.contains(&"make") && names.contains(&"curl"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"rm") && !names.contains(&"git"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"bash") && !names.contains(&"python3"),
        "{names:?}"
    );
    // No PATH shims at all.
    let out = agent(
        ws.path(),
        &["--no-intercept"],
        "echo \"${AHP_WRAP_PATHSHIM_DIR:-none}\" > dir; echo \"$PATH\" > path",
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(read(ws.path(), "dir").trim(), "none");
    assert_eq!(
        read(ws.path(), "path").trim(),
        std::env::var("PATH").unwrap()
    );
}

/// The shim directory is kept between runs (one per hook executable and command set), the
/// floor keeps the agent from changing it, and a run that finds it changed makes it again
/// before the agent starts: a link replaced while the floor was off does not outlive that run.
#[test]
fn the_kept_shim_directory_is_protected_and_made_again_when_changed() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("precious"), "x").unwrap();
    std::fs::write(
        ws.path().join("fake"),
        "#!/bin/sh\ntouch \"$PWD/ran_fake\"\n",
    )
    .unwrap();
    // A command set of this test's own: its directory is no other test's.
    let own = ["--intercept", "kept-dir-test"];
    let swap = r#"ln -sf "$PWD/fake" "$AHP_WRAP_PATHSHIM_DIR/rm"; echo $? > rc_swap"#;
    // On the floor: the swap is refused.
    let out = agent(
        ws.path(),
        &own,
        &format!(r#"echo "$AHP_WRAP_PATHSHIM_DIR" > dir_a; {swap}"#),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_ne!(read(ws.path(), "rc_swap").trim(), "0", "{}", show(&out));
    // Without it, the agent swaps the link for a program of its own...
    let out = agent(
        ws.path(),
        &[own[0], own[1], "--floor", "off"],
        &format!(r#"echo "$AHP_WRAP_PATHSHIM_DIR" > dir_b; {swap}"#),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(read(ws.path(), "rc_swap").trim(), "0", "{}", show(&out));
    let dir = read(ws.path(), "dir_a").trim().to_owned();
    assert_eq!(
        read(ws.path(), "dir_b").trim(),
        dir,
        "the directory is kept"
    );
    assert!(
        Path::new(&dir)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("ahp-wrap-shims-"),
        "{dir}"
    );
    let rm = Path::new(&dir).join("rm");
    assert_eq!(std::fs::read_link(&rm).unwrap(), ws.path().join("fake"));
    // ...which the next run replaces before its agent runs `rm`.
    let out = agent(
        ws.path(),
        &own,
        &format!(
            r#"echo "$AHP_WRAP_PATHSHIM_DIR" > dir_c; rm -rf '{}'"#,
            victim.display()
        ),
    );
    assert_eq!(read(ws.path(), "dir_c").trim(), dir, "{}", show(&out));
    assert!(
        victim.join("precious").exists(),
        "the victim was deleted: {}",
        show(&out)
    );
    assert!(!ws.path().join("ran_fake").exists(), "{}", show(&out));
    assert_eq!(
        std::fs::canonicalize(&rm).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_ahp-wrap-hook")).unwrap(),
        "the link is the hook again"
    );
}

#[test]
fn a_shim_outside_a_run_refuses_to_run_anything() {
    // The shim directory's entry is the hook executable under another name; started
    // without a wrapper to ask, it runs nothing.
    let dir = tempfile::tempdir().unwrap();
    let hook = wrap_bin().with_file_name("ahp-wrap-hook");
    let rm = dir.path().join("rm");
    std::os::unix::fs::symlink(&hook, &rm).unwrap();
    std::fs::write(dir.path().join("keep"), "x").unwrap();
    let out = run(
        Command::new(&rm)
            .arg(dir.path().join("keep"))
            .env_remove("AHP_WRAP_SOCKET"),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(126), "{}", show(&out));
    assert!(dir.path().join("keep").exists());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fail closed"),
        "{}",
        show(&out)
    );
}

#[test]
fn an_exec_request_in_a_run_without_path_shims_is_refused() {
    // The agent makes its own entry (a link named rm to the hook executable) in a run that
    // serves no exec requests: the control socket refuses it, and rm does not run.
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("victim")).unwrap();
    let script = r#"ln -s "$AHP_WRAP_HOOK_BIN" ./rm; ./rm -rf victim 2> err; echo $? > rc"#;
    let out = agent(ws.path(), &["--no-intercept"], script);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(read(ws.path(), "rc").trim(), "126", "{}", show(&out));
    assert!(ws.path().join("victim").exists(), "rm ran");
    assert!(
        read(ws.path(), "err").contains("serves no exec requests"),
        "{}",
        read(ws.path(), "err")
    );
}
