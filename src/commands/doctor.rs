//! `ahp-wrap doctor`: what a run on this machine would get, said before any run. For each
//! agent with a shim that is on PATH: its version, and whether it is the version the shim is
//! proven on; whether its hooks could be injected here; the shim manifests of the user's
//! (loaded, or refused with their line and field); which parts of the floor this kernel
//! enforces; where the logs go.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::exit::{self, Exit};
use crate::frameworks::{self, Framework, Installed};

/// How long an agent may take to print its version.
const VERSION_WAIT: Duration = Duration::from_secs(10);

/// What doctor says of an installed file that is this build's.
const CURRENT: &str = "installed and current";

/// One agent, as found.
struct Found {
    framework: &'static str,
    executable: &'static str,
    path: Option<PathBuf>,
    version: Option<String>,
    proven: frameworks::Proven,
    refused: Option<String>,
    /// The file root installs for users who are not root, if the agent needs one: where,
    /// and what is there.
    installed: Option<(PathBuf, &'static str)>,
    /// The hosts its shim names as the agent's own (its model and service): the floor lets
    /// any process of the run reach them without a question.
    hosts: &'static [&'static str],
}

impl Found {
    fn status(&self) -> &'static str {
        match (&self.path, &self.version) {
            (None, _) => "not found",
            (Some(_), None) => "version unknown",
            (Some(_), Some(v)) if self.proven.contains(v) => "proven",
            (Some(_), Some(_)) => "not proven",
        }
    }

    /// Found, and either not proven or not injectable: what makes doctor exit 1.
    fn problem(&self) -> bool {
        self.path.is_some() && (self.status() != "proven" || self.refused.is_some())
    }

    fn to_json(&self) -> Value {
        json!({
            "framework": self.framework,
            "executable": self.executable,
            "path": self.path.as_ref().map(|p| p.display().to_string()),
            "version": self.version,
            "proven": self.proven.to_string(),
            "status": self.status(),
            "hooks": match (&self.path, &self.refused) {
                (None, _) => Value::Null,
                (Some(_), None) => "injected for each run".into(),
                (Some(_), Some(why)) => format!("refused: {why}").into(),
            },
            "system_file": self.installed.as_ref().map(|(path, state)| json!({
                "path": path.display().to_string(),
                "state": state,
            })),
            "hosts": self.hosts,
        })
    }
}

/// `ahp-wrap doctor [--json]`: exits 0 when every agent found is on its proven version and
/// its hooks could be injected, 1 otherwise.
pub fn doctor(as_json: bool) -> Exit {
    let self_exe = std::env::current_exe().unwrap_or_else(|_| "ahp-wrap".into());
    let hook_exe = crate::run::hook_executable(&self_exe);
    let agents: Vec<Found> = frameworks::all()
        .iter()
        .filter_map(|&f| f.proven().map(|p| find(f, p, &hook_exe)))
        .collect();
    let (mut enforced, mut missing) = floor();
    #[cfg(target_os = "linux")]
    match nested(&self_exe) {
        Ok(said) => enforced.push(said),
        Err(said) => missing.push(said),
    }
    let logs = logs();
    let manifests = manifests();
    let ok = !agents.iter().any(Found::problem) && manifests.iter().all(|m| m["error"].is_null());
    if as_json {
        let out = json!({
            "agents": agents.iter().map(Found::to_json).collect::<Vec<_>>(),
            "manifests": manifests,
            "floor": {"enforced": enforced, "missing": missing},
            "logs": logs,
            "ok": ok,
        });
        exit::print(&format!("{out:#}\n"));
    } else {
        exit::print(&text(&agents, &manifests, &enforced, &missing, &logs, ok));
    }
    if ok {
        Exit::OK
    } else {
        Exit::Problem
    }
}

/// The first of `f`'s executables on PATH, and its version.
fn find(f: &'static dyn Framework, proven: frameworks::Proven, hook_exe: &Path) -> Found {
    let found = f
        .executables()
        .iter()
        .find_map(|exe| which::which(exe).ok().map(|p| (*exe, p)));
    let (executable, path) = match found {
        Some((exe, path)) => (exe, Some(path)),
        None => (f.executables().first().copied().unwrap_or(""), None),
    };
    Found {
        framework: f.name(),
        executable,
        // What it says it is, else what its package says.
        version: path
            .as_deref()
            .and_then(|p| version(p).or_else(|| frameworks::installed_version(f, p))),
        refused: path.as_ref().and_then(|_| f.injection_refused(hook_exe)),
        installed: f.system_file(hook_exe).and_then(Result::ok).map(|file| {
            let state = match file.state() {
                Installed::Current => CURRENT,
                Installed::Absent => "not installed",
                Installed::Unsafe(_) => "UNSAFE: a user other than root could change it",
                Installed::Stale => "OUT OF DATE: not what this ahp-wrap installs",
            };
            (file.path, state)
        }),
        path,
        proven,
        hosts: f.model_hosts(),
    }
}

/// What `program --version` prints, as its first `N.N[.N]`.
#[allow(clippy::expect_used, reason = "a literal pattern of ours")]
fn version(program: &Path) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + VERSION_WAIT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    let re = regex::Regex::new(r"\d+\.\d+(?:\.\d+)?").expect("a valid pattern");
    re.find(&out).map(|m| m.as_str().to_owned())
}

/// The shim manifests from files (`AHP_WRAP_SHIM`, the user's directory): each file, and
/// the framework it names or why it does not load (what makes doctor exit 1: a run leaves
/// it out).
fn manifests() -> Vec<Value> {
    frameworks::manifest::files()
        .into_iter()
        .map(|file| match frameworks::manifest::load(&file) {
            Ok(m) => json!({"file": file.display().to_string(), "name": m.name, "error": null}),
            Err(e) => {
                json!({"file": file.display().to_string(), "name": null, "error": e.to_string()})
            }
        })
        .collect()
}

/// The floor a run of an agent here would get, with the default policy: what is enforced,
/// what is missing.
fn floor() -> (Vec<String>, Vec<String>) {
    let spec = match crate::policy::floor_spec(None) {
        Ok(s) => s,
        Err(e) => return (Vec::new(), vec![crate::error_chain(&e)]),
    };
    let generic = frameworks::generic();
    let here = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let (_, report) = super::floor_here(&spec, generic, here);
    // Whether a run allows nested sandboxes depends on its agent: checked apart (`nested`).
    let apart = |l: &String| !l.starts_with("nested sandboxes:");
    (
        report.enforced.into_iter().filter(apart).collect(),
        report.gaps.into_iter().filter(apart).collect(),
    )
}

/// An empty directory of the check's, removed with it.
#[cfg(target_os = "linux")]
struct Scratch(PathBuf);

#[cfg(target_os = "linux")]
impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("ahp-wrap-doctor-{}", std::process::id()));
        std::fs::create_dir(&dir)?;
        Ok(Scratch(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

#[cfg(target_os = "linux")]
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How long the nested-sandbox check may take.
#[cfg(target_os = "linux")]
const NESTED_WAIT: Duration = Duration::from_secs(20);

/// Whether a process of a run's tree can make a user namespace of its own, map its ids and
/// mount in it (what bubblewrap and the agents' own sandboxes do), checked by a real run of
/// `unshare -Urm` on this floor (`--nested-sandboxes on`, an empty workspace, no audit log).
#[cfg(target_os = "linux")]
fn nested(self_exe: &Path) -> Result<String, String> {
    const OK: &str = "nested-sandbox-ok";
    if which::which("unshare").is_err() {
        return Err("nested sandboxes: not checked (no unshare(1) on PATH)".into());
    }
    let dir = Scratch::new()
        .map_err(|e| format!("nested sandboxes: not checked (no temp directory: {e})"))?;
    let mut child = Command::new(self_exe)
        .args([
            "--no-intercept",
            "--summary",
            "never",
            "--audit-log",
            "none",
        ])
        .args(["--nested-sandboxes", "on", "--workspace"])
        .arg(dir.path())
        .args(["--", "unshare", "-Urm", "sh", "-c"])
        .arg(format!("mount -t tmpfs none /tmp && echo {OK}"))
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("nested sandboxes: not checked (cannot run a floor: {e})"))?;
    let start = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if start.elapsed() > NESTED_WAIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "nested sandboxes: not checked (a run of `unshare -Urm` on the floor took over \
                 {}s)",
                NESTED_WAIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("nested sandboxes: not checked ({e})"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.contains(OK) {
        return Ok(
            "nested sandboxes: a process of a run's tree can make a user namespace of \
                   its own, map its ids and mount there (checked: `unshare -Urm` on this \
                   floor); runs of an agent that starts a sandbox of its own allow it \
                   (`--nested-sandboxes`)"
                .into(),
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let why = stderr
        .lines()
        .find(|l| !l.starts_with("ahp-wrap:") && !l.trim().is_empty())
        .unwrap_or("no output");
    Err(format!(
        "nested sandboxes: a process of a run's tree cannot make a user namespace of its own \
         and mount there ({why}): the agents' own sandboxes (Codex's, Claude Code's) fail inside \
         the floor here; docs/floor.md, \"Sandboxes inside the floor\""
    ))
}

/// Where a run's audit records go, as the environment has it.
fn audit_log() -> String {
    let retention = match std::env::var("AHP_WRAP_AUDIT_RETENTION") {
        Ok(r) => match r.parse::<crate::audit::trail::Retention>() {
            Ok(kept) => format!("{kept} (AHP_WRAP_AUDIT_RETENTION)"),
            Err(e) => format!("AHP_WRAP_AUDIT_RETENTION is unreadable: {e}"),
        },
        Err(_) => crate::audit::trail::Retention::default().to_string(),
    };
    match std::env::var("AHP_WRAP_AUDIT_LOG")
        .ok()
        .filter(|p| !p.is_empty())
    {
        Some(none) if none == "none" => {
            "none (AHP_WRAP_AUDIT_LOG=none: runs keep no audit log)".to_owned()
        }
        Some(path) => format!("{path} (AHP_WRAP_AUDIT_LOG)"),
        None => match crate::audit::trail::default_dir() {
            Some(dir) => format!(
                "a file per run in {}, kept {retention}; `ahp-wrap audit show` reads it, \
                 --audit-log none turns it off",
                dir.display()
            ),
            None => "none: no state directory (set HOME or XDG_STATE_HOME), or --audit-log PATH"
                .to_owned(),
        },
    }
}

/// Where ahp-wrap's own log and the audit log go.
fn logs() -> Value {
    let state = crate::termlog::state_dir();
    json!({
        "log": match &state {
            Some(dir) => format!(
                "stderr; while the agent has the terminal, a new file in {} (or --log-file)",
                dir.display()
            ),
            None => "stderr (no state directory: set HOME or XDG_STATE_HOME)".to_owned(),
        },
        "audit_log": audit_log(),
        "audit_heads": crate::audit::head::default_dir().map(|d| d.display().to_string()),
    })
}

fn text(
    agents: &[Found],
    manifests: &[Value],
    enforced: &[String],
    missing: &[String],
    logs: &Value,
    ok: bool,
) -> String {
    let mut out = String::from("Agents (proven: the version its shim's end-to-end suite runs):\n");
    for a in agents {
        let line = match (&a.path, &a.version) {
            (None, _) => format!("  {:<9} not found on PATH\n", a.executable),
            (Some(path), version) => {
                let version = version.as_deref().unwrap_or("?");
                let status = match a.status() {
                    "proven" => "proven".to_owned(),
                    "not proven" => format!(
                        "NOT PROVEN: the shim is proven on {} (it may work; report what does not)",
                        a.proven
                    ),
                    _ => format!("version unknown (the shim is proven on {})", a.proven),
                };
                let mut hooks = match &a.refused {
                    None => String::new(),
                    Some(why) => format!("\n            hooks would be refused: {why}"),
                };
                if !a.hosts.is_empty() {
                    hooks.push_str(&format!(
                        "\n            its own hosts, reached without a question: {}",
                        a.hosts.join(", ")
                    ));
                }
                if let Some((file, state)) = &a.installed {
                    let fix = match *state {
                        CURRENT => String::new(),
                        _ => format!(" (`sudo ahp-wrap setup {}`)", a.framework),
                    };
                    hooks.push_str(&format!(
                        "\n            for users who are not root: {} {state}{fix}",
                        file.display(),
                    ));
                }
                format!(
                    "  {:<9} {version:<10} {status}  {}{hooks}\n",
                    a.executable,
                    path.display()
                )
            }
        };
        out.push_str(&line);
    }
    if !manifests.is_empty() {
        out.push_str("\nShim manifests from files:\n");
        for m in manifests {
            match (m["name"].as_str(), m["error"].as_str()) {
                (Some(name), _) => out.push_str(&format!(
                    "  {name:<9} {}\n",
                    m["file"].as_str().unwrap_or("")
                )),
                (_, Some(error)) => out.push_str(&format!("  NOT LOADED: {error}\n")),
                _ => {}
            }
        }
    }
    out.push_str("\nThe floor here (default policy, this directory as the workspace):\n");
    for e in enforced {
        out.push_str(&format!("  enforced: {e}\n"));
    }
    for m in missing {
        out.push_str(&format!("  missing:  {m}\n"));
    }
    out.push_str("\nLogs:\n");
    out.push_str(&format!(
        "  ahp-wrap's log: {}\n",
        logs["log"].as_str().unwrap_or_default()
    ));
    out.push_str(&format!(
        "  audit log: {}\n",
        logs["audit_log"].as_str().unwrap_or_default()
    ));
    if let Some(heads) = logs["audit_heads"].as_str() {
        out.push_str(&format!("  audit logs' commit heads: {heads}\n"));
    }
    let found = agents.iter().any(|a| a.path.is_some());
    out.push_str(match (ok, found) {
        (true, true) => {
            "\nok: every agent found is on its proven version, with hooks that can be injected\n"
        }
        (true, false) => "\nok: no agent with a shim is on PATH (generic agents need none)\n",
        (false, _) => "\nnot ok: see above (exit 1)\n",
    });
    out
}
