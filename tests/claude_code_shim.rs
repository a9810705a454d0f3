//! The Claude Code shim's hook process on its own (no CLI needed): when the wrapper cannot
//! be reached, a hook call fails closed in Claude's own deny form.

use ahp_wrap_testkit::common;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

fn hook(event: &str, sample: &str) -> std::process::Output {
    let payload = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("shims/claude-code/samples")
            .join(format!("{sample}.json")),
    )
    .unwrap();
    let mut hook = Command::new(ahp_wrap_testkit::wrap_bin());
    hook.args(["hook", "claude-code", event])
        .env("AHP_WRAP_SOCKET", "/nonexistent/ahp-wrap.sock")
        .env("AHP_WRAP_TOKEN", "t")
        .env("AHP_WRAP_HOOK_TIMEOUT_MS", "2000");
    common::process::run_with_input(&mut hook, &payload, Duration::from_secs(30)).output
}

#[test]
fn an_unreachable_wrapper_denies_the_tool_call() {
    let out = hook("PreToolUse.print", "PreToolUse");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let o = &v["hookSpecificOutput"];
    assert_eq!(o["permissionDecision"], "deny");
    let reason = o["permissionDecisionReason"].as_str().unwrap();
    assert!(reason.contains("cannot be reached"), "{reason}");
}

#[test]
fn an_unreachable_wrapper_blocks_the_prompt_and_the_permission() {
    let out = hook("UserPromptSubmit", "UserPromptSubmit");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["decision"], "block");
    let out = hook("PermissionRequest", "PermissionRequest");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["decision"]["behavior"], "deny");
}

#[test]
fn an_unreachable_wrapper_does_not_make_stop_continue() {
    // A `decision: block` on Stop would make Claude go on; a hook error does not.
    let out = hook("Stop", "Stop");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}

/// Every malformed hook command line is refused in the deny form Claude Code and the other
/// hosts read (exit 2, the reason on stderr), by both executables: a usage error's exit
/// code (125, 101 for a panic) would let the tool call run.
#[test]
fn a_malformed_hook_command_line_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    let not_utf8 = std::ffi::OsStr::from_bytes(b"claude-\xff");
    let lines: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec!["hook".as_ref()],
        vec!["hook".as_ref(), "claude-code".as_ref()],
        vec![
            "hook".as_ref(),
            "claude-code".as_ref(),
            "PreToolUse".as_ref(),
            "x".as_ref(),
        ],
        vec!["hook".as_ref(), not_utf8, "PreToolUse".as_ref()],
        vec!["hook".as_ref(), "claude-code".as_ref(), not_utf8],
        vec![
            "hook".as_ref(),
            "--bogus".as_ref(),
            "PreToolUse".as_ref(),
            "y".as_ref(),
        ],
        vec!["hook".as_ref(), "".as_ref()],
    ];
    let small = ahp_wrap_testkit::wrap_bin().with_file_name("ahp-wrap-hook");
    for exe in [ahp_wrap_testkit::wrap_bin(), small] {
        for line in &lines {
            let mut cmd = Command::new(&exe);
            cmd.args(line)
                .env("AHP_WRAP_SOCKET", "/nonexistent/ahp-wrap.sock")
                .env("AHP_WRAP_TOKEN", "t");
            let out = common::process::run_with_input(&mut cmd, b"{}", Duration::from_secs(30));
            let o = &out.output;
            assert_eq!(
                o.status.code(),
                Some(2),
                "{} {line:?}: must deny (exit 2)\n{out}",
                exe.display()
            );
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(
                stderr.contains("refused") || stderr.contains("denied") || stderr.contains("block"),
                "{} {line:?}: says why: {stderr}",
                exe.display()
            );
        }
    }
}
