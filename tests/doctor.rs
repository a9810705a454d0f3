//! `ahp-wrap doctor` against fake agents on PATH (small scripts printing a version, as the
//! real CLIs do): one on its proven version, one on another, one whose version cannot be
//! read, one whose hooks would be refused, and the rest missing. Read from its JSON and its
//! exit code.

use ahp_wrap_testkit::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{run, show, wrap_bin};
use serde_json::Value;

/// A fake agent `name` in `bin` that prints `says` for `--version`.
fn fake(bin: &Path, name: &str, says: &str) {
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\necho '{says}'\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn doctor(bin: &Path, env: &[(&str, &str)]) -> (Option<i32>, Value) {
    let mut cmd = Command::new(wrap_bin());
    cmd.args(["doctor", "--json"]).env("PATH", bin);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd, Duration::from_secs(60));
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}", show(&out)));
    (out.status.code(), report)
}

fn agent<'a>(report: &'a Value, executable: &str) -> &'a Value {
    report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["executable"] == executable)
        .unwrap_or_else(|| panic!("no {executable} in {report:#}"))
}

fn pinned(setup: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(setup)
        .join("VERSION");
    std::fs::read_to_string(file).unwrap().trim().to_owned()
}

#[test]
fn doctor_tells_a_proven_agent_from_an_unproven_one_and_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path();
    fake(
        bin,
        "claude",
        &format!("{} (Claude Code)", pinned("claude-code")),
    );
    // Only the proven one installed: ok, exit 0; the others are missing, which is no fault.
    let (code, report) = doctor(bin, &[]);
    assert_eq!(code, Some(0), "{report:#}");
    let claude = agent(&report, "claude");
    assert_eq!(claude["status"], "proven", "{report:#}");
    assert_eq!(claude["version"], pinned("claude-code"));
    assert_eq!(claude["hooks"], "injected for each run");
    assert_eq!(agent(&report, "codex")["status"], "not found");
    assert!(agent(&report, "codex")["path"].is_null());
    assert_eq!(report["ok"], true);
    assert!(report["floor"]["enforced"].is_array(), "{report:#}");

    // A Codex older than the one its shim is proven on: not proven, exit 1.
    fake(bin, "codex", "codex-cli 0.100.0");
    // A Qwen that prints no version.
    fake(bin, "qwen", "qwen, no version here");
    let (code, report) = doctor(bin, &[]);
    assert_eq!(code, Some(1), "{report:#}");
    let codex = agent(&report, "codex");
    assert_eq!(codex["status"], "not proven", "{report:#}");
    assert_eq!(codex["version"], "0.100.0");
    assert_eq!(codex["proven"], pinned("codex"));
    assert_eq!(agent(&report, "qwen")["status"], "version unknown");
    assert_eq!(report["ok"], false);
}

#[test]
fn doctor_says_when_an_agents_hooks_would_be_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path();
    fake(bin, "opencode", &pinned("opencode"));
    let (code, report) = doctor(bin, &[]);
    assert_eq!(code, Some(0), "{report:#}");
    // OPENCODE_PURE turns OpenCode's plugins off, so a run would refuse: doctor says so first.
    let (code, report) = doctor(bin, &[("OPENCODE_PURE", "1")]);
    assert_eq!(code, Some(1), "{report:#}");
    let opencode = agent(&report, "opencode");
    assert_eq!(opencode["status"], "proven");
    assert!(
        opencode["hooks"]
            .as_str()
            .is_some_and(|h| h.starts_with("refused: OPENCODE_PURE is set")),
        "{report:#}"
    );
}

/// An agent installed from its npm package at a version its shim is not proven on: a run
/// says so before the agent starts (read from the package, without running the agent), the
/// first time only; doctor reads the same version.
#[test]
fn a_run_warns_once_about_an_agent_on_an_unproven_version() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let package = dir
        .path()
        .join("lib/node_modules/@anthropic-ai/claude-code");
    std::fs::create_dir_all(package.join("bin")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        package.join("package.json"),
        r#"{"name": "@anthropic-ai/claude-code", "version": "2.0.1", "bin": {"claude": "bin/claude"}}"#,
    )
    .unwrap();
    // It prints no version (so that only its package can tell), and does nothing.
    let exe = package.join("bin/claude");
    std::fs::write(&exe, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(&exe, bin.join("claude")).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let wrapped = || {
        let mut cmd = Command::new(wrap_bin());
        cmd.args(["--summary", "never", "--", "claude", "-p", "hi"])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("HOME", &home)
            .env_remove("XDG_STATE_HOME");
        run(&mut cmd, Duration::from_secs(60))
    };
    let first = wrapped();
    let said = String::from_utf8_lossy(&first.stderr).into_owned();
    assert!(
        said.contains("2.0.1 is not the version ahp-wrap's claude-code shim is proven on (")
            && said.contains(&pinned("claude-code")),
        "{}",
        show(&first)
    );
    let second = wrapped();
    assert!(
        !String::from_utf8_lossy(&second.stderr).contains("is not the version"),
        "said twice:\n{}",
        show(&second)
    );
    // doctor reads the package when the agent says no version.
    let (code, report) = doctor(&bin, &[("HOME", home.to_str().unwrap())]);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(agent(&report, "claude")["version"], "2.0.1", "{report:#}");
    assert_eq!(agent(&report, "claude")["status"], "not proven");
}

/// A manifest of the user's for an agent nobody compiled in: doctor finds that agent on
/// PATH by the manifest and holds its version against the manifest's range; a manifest
/// that does not load is named with its line and field, and makes doctor exit 1.
#[test]
fn doctor_checks_the_users_own_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let shims = dir.path().join("config/ahp-wrap/shims");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&shims).unwrap();
    let manifest = std::fs::read_to_string(common::support("toy_shim.toml")).unwrap();
    std::fs::write(shims.join("toy.toml"), &manifest).unwrap();
    fake(&bin, "toy-agent", "toy-agent 1.3.1");
    let config = dir.path().join("config");
    let env = [("XDG_CONFIG_HOME", config.to_str().unwrap())];
    let (code, report) = doctor(&bin, &env);
    assert_eq!(code, Some(0), "{report:#}");
    let toy = agent(&report, "toy-agent");
    assert_eq!(toy["framework"], "toy", "{report:#}");
    assert_eq!(toy["status"], "proven", "{report:#}");
    assert_eq!(toy["proven"], "1.2.0 to 1.4.0");
    assert_eq!(report["manifests"][0]["name"], "toy", "{report:#}");

    fake(&bin, "toy-agent", "toy-agent 1.5.0");
    let broken = manifest.replace("timeout_unit = \"ms\"", "timeout_unit = \"minutes\"");
    let line = broken
        .lines()
        .position(|l| l.contains("\"minutes\""))
        .unwrap()
        + 1;
    std::fs::write(shims.join("zz-broken.toml"), broken).unwrap();
    let (code, report) = doctor(&bin, &env);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(agent(&report, "toy-agent")["status"], "not proven");
    let error = report["manifests"][1]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("zz-broken.toml:{line}: timeout_unit: "))
            && error.contains("minutes"),
        "{report:#}"
    );
}

#[test]
fn doctor_checks_that_a_nested_sandbox_can_start_on_the_floor() {
    let lines = |report: &Value, key: &str| -> Vec<String> {
        report["floor"][key]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l.as_str())
            .filter(|l| l.starts_with("nested sandboxes:"))
            .map(str::to_owned)
            .collect()
    };
    // The real unshare(1), on this machine's floor: it makes its namespaces and mounts.
    let path = std::env::var("PATH").unwrap();
    let (_, report) = doctor(Path::new(&path), &[]);
    let enforced = lines(&report, "enforced");
    assert!(
        enforced.len() == 1 && enforced[0].contains("checked: `unshare -Urm` on this floor"),
        "{report:#}"
    );
    // One that fails as it did on the floor before nested sandboxes were allowed: said, with
    // its error, as missing.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path();
    std::fs::write(
        bin.join("unshare"),
        "#!/bin/sh\necho 'unshare: cannot open /proc/self/uid_map: Permission denied' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(bin.join("unshare"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (_, report) = doctor(Path::new(&format!("{}:{path}", bin.display())), &[]);
    let missing = lines(&report, "missing");
    assert!(
        missing.len() == 1 && missing[0].contains("/proc/self/uid_map: Permission denied"),
        "{report:#}"
    );
    assert!(lines(&report, "enforced").is_empty(), "{report:#}");
}
