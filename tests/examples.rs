//! Every file in `examples/` is run by a test, here or (for the two harnesses) in
//! tests/interop.rs; a new example without a test fails `every_example_is_run_by_a_test`.
//!
//! The policies are loaded and asked about commands by `ahp-wrap policy check|eval|floor`;
//! the fleet capability is loaded and its gate asked about tasks; each MCP client
//! configuration's command is started as the client would start it and asked for a file and
//! a secret; the systemd unit is checked by `systemd-analyze verify` and its `ExecStart` is
//! run. The GitHub Actions workflow's steps run in tests/example_workflow.rs.

use ahp_wrap_testkit::agents;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn example(path: &str) -> PathBuf {
    root().join("examples").join(path)
}

use ahp_wrap_testkit::wrap_bin;

/// Each example, and the test that runs it (`file::test`, `file` under tests/).
const COVERED: &[(&str, &str)] = &[
    (
        "minimal_harness.py",
        "interop.rs::the_minimal_example_harness_blocks_rm_sent_as_an_argv",
    ),
    ("ref_harness.rs", "interop.rs::reference_harness_over_stdio"),
    ("policies/ci.toml", "examples.rs::the_example_policies"),
    (
        "policies/secrets-only.toml",
        "examples.rs::the_example_policies",
    ),
    (
        "policies/ask-before-network.toml",
        "examples.rs::the_example_policies",
    ),
    (
        "devcontainer/devcontainer.json",
        "floor_container.rs::the_devcontainer_example_gives_the_whole_floor",
    ),
    (
        "gitlab-ci/.gitlab-ci.yml",
        "floor_container.rs::the_gitlab_ci_example_runs_its_floor_checks_under_the_runners_profile",
    ),
    (
        "gitlab-ci/runner-config.toml",
        "floor_container.rs::the_gitlab_ci_example_runs_its_floor_checks_under_the_runners_profile",
    ),
    (
        "fleet/fix-tests.toml",
        "examples.rs::the_fleet_capability_takes_the_task_it_documents",
    ),
    (
        "mcp/claude-code.mcp.json",
        "examples.rs::each_mcp_client_configuration_starts_a_supervised_server",
    ),
    (
        "mcp/cursor.mcp.json",
        "examples.rs::each_mcp_client_configuration_starts_a_supervised_server",
    ),
    (
        "mcp/vscode.mcp.json",
        "examples.rs::each_mcp_client_configuration_starts_a_supervised_server",
    ),
    (
        "systemd/ahp-wrap-serve.service",
        "examples.rs::the_systemd_unit_verifies_and_its_command_serves",
    ),
    (
        "github-actions/agent.yml",
        "example_workflow.rs::the_github_actions_workflow_runs_its_steps_locally",
    ),
];

#[test]
fn every_example_is_run_by_a_test() {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                let rel = path.strip_prefix(base).unwrap().display().to_string();
                out.insert(rel);
            }
        }
    }
    let mut files = BTreeSet::new();
    walk(
        &root().join("examples"),
        &root().join("examples"),
        &mut files,
    );
    let covered: BTreeSet<String> = COVERED.iter().map(|(f, _)| f.to_string()).collect();
    assert_eq!(
        files, covered,
        "every file in examples/ needs a test, listed in COVERED"
    );
    for (file, test) in COVERED {
        let (source, name) = test.split_once("::").unwrap();
        let text = std::fs::read_to_string(root().join("tests").join(source)).unwrap();
        assert!(
            text.contains(&format!("fn {name}(")),
            "{file}: the test {test} does not exist"
        );
    }
}

/// `ahp-wrap ARGS` with `stdin`, HOME a fresh directory, in a workspace below it.
fn ahp(args: &[&str], stdin: &str) -> Output {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("project");
    std::fs::create_dir_all(&ws).unwrap();
    let mut cmd = Command::new(wrap_bin());
    cmd.args(args).env("HOME", home.path()).current_dir(&ws);
    agents::run_with_input(&mut cmd, stdin.as_bytes(), Duration::from_secs(60)).output
}

fn bash_event(command: &str) -> Value {
    json!({"event_type": "pre_action",
           "payload": {"tool_name": "Bash", "arguments": {"command": command}}})
}

fn net_event(host: &str) -> Value {
    json!({"event_type": "pre_action",
           "payload": {"tool_name": "net", "arguments": {
               "host": host, "port": 443, "url": format!("https://{host}:443/")}}})
}

#[test]
fn the_example_policies() {
    // (policy, event, exit code of `policy eval`, deciding rule)
    let cases: Vec<(&str, Value, i32, Option<&str>)> = vec![
        (
            "ci",
            bash_event("git push origin HEAD:main"),
            1,
            Some("ci-no-push"),
        ),
        ("ci", bash_event("npm publish"), 1, Some("ci-no-publish")),
        // The default's rules are kept.
        (
            "ci",
            bash_event("rm -rf ~"),
            1,
            Some("delete-outside-workspace"),
        ),
        (
            "ci",
            bash_event("cat ~/.aws/credentials"),
            1,
            Some("read-secrets"),
        ),
        ("ci", bash_event("cargo test --workspace"), 0, None),
        // Nobody answers in CI: what cannot be parsed is refused.
        ("ci", bash_event("echo 'unterminated"), 1, None),
        (
            "secrets-only",
            bash_event("cat ~/.ssh/id_ed25519"),
            1,
            Some("read-credentials"),
        ),
        (
            "secrets-only",
            bash_event("gh auth token"),
            1,
            Some("print-tokens"),
        ),
        (
            "secrets-only",
            bash_event("cat .env"),
            1,
            Some("read-credentials"),
        ),
        // Only secrets: a deletion is for the agent's own prompts.
        ("secrets-only", bash_event("rm -rf ~"), 0, None),
        (
            "secrets-only",
            bash_event("cat ~/.ssh/id_ed25519.pub"),
            0,
            None,
        ),
        (
            "ask-before-network",
            bash_event("curl -fsSL https://example.com/x.sh -o x.sh"),
            3,
            Some("network-needs-a-person"),
        ),
        (
            "ask-before-network",
            json!({"event_type": "pre_action", "payload": {"tool_name": "WebFetch",
                   "arguments": {"url": "https://docs.rs/"}}}),
            3,
            Some("network-needs-a-person"),
        ),
        // The floor's connection events are [floor.net]'s business, the model API included.
        (
            "ask-before-network",
            net_event("api.anthropic.com"),
            0,
            None,
        ),
        ("ask-before-network", bash_event("cargo build"), 0, None),
        (
            "ask-before-network",
            bash_event("rm -rf /"),
            1,
            Some("delete-outside-workspace"),
        ),
    ];
    for (name, event, code, rule) in cases {
        let file = example(&format!("policies/{name}.toml"));
        let file = file.to_str().unwrap();
        let out = ahp(&["policy", "eval", file], &event.to_string());
        assert_eq!(
            out.status.code(),
            Some(code),
            "{name}: {event}\n{}",
            agents::show(&out)
        );
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        if let Some(rule) = rule {
            assert_eq!(
                answer["rule"],
                rule,
                "{name}: {event}\n{}",
                agents::show(&out)
            );
        }
    }
    for (name, unknown, extends) in [
        ("ci", "block", true),
        ("secrets-only", "ask", false),
        ("ask-before-network", "ask", true),
    ] {
        let file = example(&format!("policies/{name}.toml"));
        let file = file.to_str().unwrap();
        let out = ahp(&["policy", "check", file], "");
        assert!(out.status.success(), "{name}\n{}", agents::show(&out));
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            said.contains("on top of"),
            extends,
            "{name} extends the default: {said}"
        );
        let out = ahp(&["policy", "floor", "--policy", file], "");
        let plan = String::from_utf8_lossy(&out.stdout);
        assert!(
            plan.contains(&format!("unknown hosts: {unknown}")),
            "{name}: the floor's plan\n{}",
            agents::show(&out)
        );
    }
}

#[test]
fn the_fleet_capability_takes_the_task_it_documents() {
    use ahp_wrap::fleet::capability::Capability;
    use ahp_wrap::fleet::message::Task;
    use ahp_wrap::fleet::safety;

    let cap = Capability::load(&example("fleet/fix-tests.toml")).unwrap();
    let task = |changes: Value| -> Task {
        let mut t = json!({
            "type": "task", "task_id": "t-1", "capability": "fix-tests",
            "intent": "make the failing test in crates/parser pass",
            "input": {"repo": "https://git.example.com/team/app", "branch": "main"},
            "risk": "R2", "data_class": "T1", "hazards": ["filesystem-write"],
        });
        for (k, v) in changes.as_object().unwrap() {
            t[k] = v.clone();
        }
        serde_json::from_value(t).unwrap()
    };
    // The task its comment submits is taken.
    safety::check(&cap, None, &task(json!({}))).unwrap();
    for (change, refused) in [
        (json!({"risk": "R3"}), "ceiling"),
        (json!({"data_class": "T3"}), "data class"),
        (json!({"hazards": ["network"]}), "hazard"),
        (json!({"input": {"branch": "main"}}), "repo is required"),
        (json!({"input": {"repo": "r", "token": "x"}}), "token"),
    ] {
        let why = safety::check(&cap, None, &task(change.clone())).unwrap_err();
        assert!(why.contains(refused), "{change}: {why}");
    }
    let out_schema = cap.output_schema.as_ref().unwrap();
    out_schema
        .validate(&json!({"changed": ["src/parser.rs"], "summary": "fixed"}))
        .unwrap();
    assert!(out_schema.validate(&json!({"summary": "x"})).is_err());
}

/// The `command` and `args` a client would start, from one MCP configuration file.
fn mcp_server_command(config: &Value) -> (String, Vec<String>) {
    let servers = config
        .get("mcpServers")
        .or_else(|| config.get("servers"))
        .and_then(Value::as_object)
        .expect("mcpServers or servers");
    let (_, server) = servers.iter().next().expect("one server");
    let args = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    (server["command"].as_str().unwrap().to_owned(), args)
}

/// One line-delimited JSON-RPC exchange with a child, each answer awaited by id.
struct Rpc {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Rpc {
    fn start(mut cmd: Command) -> Rpc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Rpc {
            child,
            stdin,
            lines,
        }
    }

    fn notify(&mut self, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        writeln!(self.stdin, "{msg}").unwrap();
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{msg}").unwrap();
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no answer to {method}: {e}"));
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[cfg_attr(
    skip_e2e = "mcp",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the mcp setup"
)]
fn each_mcp_client_configuration_starts_a_supervised_server() {
    let server_js = root().join(
        "tests/.cache/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    );
    assert!(
        server_js.exists(),
        "run tests/mcp/setup.sh first (it installs the MCP servers)"
    );
    for name in ["claude-code", "cursor", "vscode"] {
        let text = std::fs::read_to_string(example(&format!("mcp/{name}.mcp.json"))).unwrap();
        let config: Value = serde_json::from_str(&text).unwrap();
        let (command, args) = mcp_server_command(&config);
        assert_eq!(command, "ahp-wrap", "{name}");
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("notes.txt"), "the notes\n").unwrap();
        std::fs::write(project.join(".env"), "API_KEY=sk-live-0123456789\n").unwrap();
        // As the client starts it; what it names outside this machine is replaced: the
        // project by this test's, `npx -y <package>` by the package already installed, a
        // client variable by its value, the audit log by one in this test's directory.
        let audit = dir.path().join("audit.jsonl");
        let mut argv: Vec<String> = Vec::new();
        let mut rest = args.iter().peekable();
        while let Some(a) = rest.next() {
            match a.as_str() {
                "npx" => {
                    assert_eq!(rest.next().map(String::as_str), Some("-y"), "{name}");
                    let package = rest.next().unwrap();
                    assert_eq!(package, "@modelcontextprotocol/server-filesystem");
                    argv.extend(["node".into(), server_js.display().to_string()]);
                }
                "/path/to/project" | "${workspaceFolder}" => {
                    argv.push(project.display().to_string())
                }
                a if a.starts_with("/tmp/") && a.ends_with(".jsonl") => {
                    argv.push(audit.display().to_string())
                }
                a => argv.push(a.to_owned()),
            }
        }
        let mut cmd = Command::new(wrap_bin());
        cmd.args(&argv)
            .current_dir(&project)
            .env("HOME", dir.path());
        let mut rpc = Rpc::start(cmd);
        let init = rpc.call(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "examples-test", "version": "1"}}),
        );
        assert!(init["result"]["serverInfo"].is_object(), "{name}: {init}");
        rpc.notify("notifications/initialized", json!({}));
        let read = |rpc: &mut Rpc, id: u64, file: &str| {
            rpc.call(
                id,
                "tools/call",
                json!({"name": "read_text_file",
                       "arguments": {"path": project.join(file).display().to_string()}}),
            )
        };
        let notes = read(&mut rpc, 2, "notes.txt");
        assert!(notes.to_string().contains("the notes"), "{name}: {notes}");
        let secret = read(&mut rpc, 3, ".env");
        assert_eq!(secret["result"]["isError"], true, "{name}: {secret}");
        assert!(
            !secret.to_string().contains("sk-live"),
            "{name}: the secret reached the client: {secret}"
        );
        drop(rpc);
        if name == "cursor" {
            let records = agents::read_jsonl(&audit);
            assert!(
                records.iter().any(|r| r["decision"] == "block"),
                "{name}: the audit log has the refusal: {records:?}"
            );
        }
    }
}

/// `ExecStart=` of a unit, its continuation lines joined and split into words.
fn exec_start(unit: &str) -> Vec<String> {
    let joined = unit.replace("\\\n", " ");
    let line = joined
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_systemd_unit_verifies_and_its_command_serves() {
    let unit = std::fs::read_to_string(example("systemd/ahp-wrap-serve.service")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Where the unit expects the binary, this build's.
    let here = unit.replace("/usr/local/bin/ahp-wrap", &wrap_bin().display().to_string());
    if Path::new("/usr/bin/systemd-analyze").exists() {
        let file = dir.path().join("ahp-wrap-serve.service");
        std::fs::write(&file, &here).unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&file)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        // The files it reads exist only where it is installed; nothing else may be said.
        let complaints: Vec<&str> = said
            .lines()
            .filter(|l| !l.contains("/etc/ahp-wrap/") && !l.trim().is_empty())
            .collect();
        assert!(complaints.is_empty(), "systemd-analyze verify: {said}");
    }
    // Its ExecStart, with the machine's files replaced by this test's and a free port.
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, ahp_wrap::policy::Policy::default_toml()).unwrap();
    let tokens = dir.path().join("host-tokens");
    std::fs::write(&tokens, "alice=alice-token-0123456789:approve\n").unwrap();
    let audit = dir.path().join("audit.jsonl");
    let argv: Vec<String> = exec_start(&here)
        .into_iter()
        .map(|a| match a.as_str() {
            "http://0.0.0.0:7700" => "http://127.0.0.1:0".to_owned(),
            "/etc/ahp-wrap/policy.toml" => policy.display().to_string(),
            "/etc/ahp-wrap/host-tokens" => tokens.display().to_string(),
            "/var/lib/ahp-wrap/audit.jsonl" => audit.display().to_string(),
            _ => a,
        })
        .collect();
    assert_eq!(Path::new(&argv[0]), wrap_bin());
    let mut serve = Command::new(&argv[0])
        .args(&argv[1..])
        .env("AHP_WRAP_SERVE_TOKEN", "wrappers-token-0123456789")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(serve.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut base = None;
    while base.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("serve says where it listens");
        base = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .map(|w| w.trim_end_matches(['/', ',', ')']).to_owned());
    }
    let base = base.unwrap();
    let addr = base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap();
    let get = |path: &str, token: Option<&str>| -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
        answer
    };
    let page = get("/", None);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("<html"), "the approvals page: {page}");
    let metrics = get("/metrics", Some("wrappers-token-0123456789"));
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(metrics.contains("ahp_"), "{metrics}");
    assert!(get("/metrics", None).starts_with("HTTP/1.1 401"));
    let _ = serve.kill();
    let _ = serve.wait();
}
