//! Helpers shared by the integration tests: paths, a gated agent, and processes with a
//! time limit that print everything when they fail (`process.rs`, which the agent
//! end-to-end suites share).

use std::path::{Path, PathBuf};
use std::process::Command;

pub mod dirs;
pub mod process;
pub mod workspace;
pub use dirs::{outside_temp, outside_tree};
pub use process::{alive, eventually, free_port, pid_from, run, say_pid, show, without_audit_read};
pub use workspace::{git, snapshot};

pub use crate::wrap_bin;

/// An example program, next to the binary. Plain `cargo test` builds examples there;
/// `cargo test --all-targets` builds them as tests instead, so build it when missing.
pub fn example(name: &str) -> PathBuf {
    let p = wrap_bin().parent().unwrap().join("examples").join(name);
    if !p.exists() {
        static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = BUILD.lock().unwrap();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--example", name])
            .current_dir(crate::root())
            .status()
            .unwrap();
        assert!(status.success(), "cannot build the example {name}");
    }
    assert!(p.exists(), "{} is not built", p.display());
    p
}

/// A file under tests/support.
pub fn support(name: &str) -> PathBuf {
    crate::root().join("tests/support").join(name)
}

/// A shell agent that asks the wrapper, through the generic hook, whether it may run a
/// command, and runs it only if allowed. It leaves in `dir`: `hook_rc` (the hook's exit
/// code), `decision.json` (its stdout), `reason.txt` (its stderr) and, if allowed,
/// `ran`. It exits with `exit_code`.
pub fn gated_agent(dir: &Path, payload: &str, exit_code: i32) -> Vec<String> {
    let script = format!(
        r#"cd '{dir}'
printf '%s' '{payload}' | "$AHP_WRAP_BIN" hook generic pre_action > decision.json 2> reason.txt
rc=$?
echo $rc > hook_rc
if [ $rc = 0 ]; then touch ran; fi
exit {exit_code}"#,
        dir = dir.display()
    );
    vec!["sh".into(), "-c".into(), script]
}

/// Reads a file the agent left, or "" when it is missing.
pub fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

/// The JSON lines of the file at `path` (none when it does not exist).
pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The JSON lines of `dir/name` (none when it does not exist).
pub fn json_lines(dir: &Path, name: &str) -> Vec<serde_json::Value> {
    read_jsonl(&dir.join(name))
}

/// Every event a scripted harness logged to `dir/harness.jsonl`, single or batched.
pub fn harness_events(dir: &Path) -> Vec<serde_json::Value> {
    logged_events(&dir.join("harness.jsonl"))
}

/// Every event the scripted harness logged to `log` (`ahp/event` params and the events of
/// batches).
pub fn logged_events(log: &Path) -> Vec<serde_json::Value> {
    read_jsonl(log)
        .into_iter()
        .flat_map(|m| match m["method"].as_str() {
            Some("ahp/event") => vec![m["params"].clone()],
            Some("ahp/batch") => m["params"]["events"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            _ => vec![],
        })
        .collect()
}

/// The scripted stdio harness (`tests/support/script_harness.py`) with these `rules` (a
/// JSON object; its `log` is set to `dir/harness.jsonl`), as a `--harness` spec.
pub fn script_harness(dir: &Path, rules: serde_json::Value) -> String {
    script_harness_logging_to(dir, &dir.join("harness.jsonl"), rules)
}

/// [`script_harness`], its rules in `dir/rules.json`, logging every message to `log`.
pub fn script_harness_logging_to(dir: &Path, log: &Path, rules: serde_json::Value) -> String {
    script_harness_in(&crate::root().join("tests/support"), dir, log, rules)
}

/// [`script_harness_logging_to`], the script taken from `scripts` (a copy of
/// `tests/support/` another user can reach, say).
pub fn script_harness_in(
    scripts: &Path,
    dir: &Path,
    log: &Path,
    mut rules: serde_json::Value,
) -> String {
    rules["log"] = log.display().to_string().into();
    let file = dir.join("rules.json");
    std::fs::write(&file, rules.to_string()).unwrap();
    format!(
        "stdio:python3 '{}' '{}'",
        scripts.join("script_harness.py").display(),
        file.display()
    )
}
