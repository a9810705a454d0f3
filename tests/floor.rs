//! The floor: a program under the wrapper commits forbidden acts by means no hook and no
//! PATH shim sees (an absolute path, a copied binary, an interpreter's file API, a
//! redirection, a script written then run, a Makefile target, an npm script, a setsid'd
//! grandchild). Each act fails and its target is unchanged, read from the disk; the same act
//! with `--floor off` does its damage, which shows that each test can fail. Ordinary
//! development in the workspace keeps working.
//!
//! Each test's world lives under the target directory, not under /tmp: the temp directories
//! are writable on the floor, so a victim there would prove nothing.

use ahp_wrap_testkit::common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use common::*;

/// A workspace, a home with a secret and a start-up file, and a victim outside both.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let (dir, root) = outside_tree(
            "floor-",
            &["ws"],
            &[
                ("home/.ssh/id_rsa", "PRIVATE KEY\n"),
                ("home/.bashrc", "# rc\n"),
                ("victim/file", "precious\n"),
                ("victim/sub/deep", "precious\n"),
            ],
        );
        World { _dir: dir, root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    fn victim(&self) -> PathBuf {
        self.root.join("victim")
    }

    /// Whether the victim is whole: both files there with their content.
    fn victim_intact(&self) -> bool {
        ["file", "sub/deep"].iter().all(|f| {
            std::fs::read_to_string(self.victim().join(f)).is_ok_and(|s| s == "precious\n")
        })
    }

    /// The wrapper with `args` before `--` and `script` (sh) as an agent without hooks or
    /// PATH shims, in the workspace, outside any floor of the test's own.
    fn command(&self, args: &[&str], script: &str) -> Command {
        let mut cmd = Command::new(wrap_bin());
        cmd.args(["--no-intercept", "--summary", "never"])
            .args(args)
            .args(["--", "sh", "-c", script])
            .current_dir(self.ws())
            .env("HOME", self.root.join("home"))
            .env("VICTIM", self.victim())
            .env_remove("AHP_WRAP_FLOOR");
        cmd
    }

    /// Runs `script` on the floor or (`floor` false) with `--floor off`.
    fn run(&self, floor: bool, script: &str) -> Output {
        let args: &[&str] = if floor { &[] } else { &["--floor", "off"] };
        run(&mut self.command(args, script), Duration::from_secs(60))
    }
}

/// `script` damages the victim without the floor and cannot with it.
fn destroys_only_without_the_floor(script: &str) {
    let w = World::new();
    let out = w.run(true, script);
    assert!(
        w.victim_intact(),
        "the floor let `{script}` through:\n{}",
        show(&out)
    );
    let w = World::new();
    let out = w.run(false, script);
    assert!(
        !w.victim_intact(),
        "without the floor `{script}` should have done its damage (else this test proves \
         nothing):\n{}",
        show(&out)
    );
}

#[test]
fn an_absolute_rm_cannot_delete_outside_the_workspace() {
    destroys_only_without_the_floor(r#"/bin/rm -rf "$VICTIM""#);
}

#[test]
fn a_copied_binary_cannot_delete_outside_the_workspace() {
    destroys_only_without_the_floor(r#"cp /bin/rm ./zap && ./zap -rf "$VICTIM""#);
}

#[test]
fn python_perl_and_node_file_apis_cannot_write_outside_the_workspace() {
    destroys_only_without_the_floor(
        r#"python3 -c 'import os,shutil; shutil.rmtree(os.environ["VICTIM"])'"#,
    );
    destroys_only_without_the_floor(r#"perl -e 'unlink "$ENV{VICTIM}/file" or die "$!"'"#);
    destroys_only_without_the_floor(
        r#"node -e 'require("fs").writeFileSync(process.env.VICTIM + "/file", "gone")'"#,
    );
}

#[test]
fn truncation_by_redirection_leaves_the_file_whole() {
    destroys_only_without_the_floor(r#": > "$VICTIM/file""#);
}

#[test]
fn a_script_written_then_run_cannot_delete_outside_the_workspace() {
    destroys_only_without_the_floor(
        r#"printf 'rm -rf "$VICTIM"\n' > clean.sh && chmod +x clean.sh && ./clean.sh"#,
    );
}

#[test]
fn a_makefile_target_cannot_delete_outside_the_workspace() {
    destroys_only_without_the_floor(
        r#"printf 'clean:\n\trm -rf "$$VICTIM"\n' > Makefile && make -s clean"#,
    );
}

#[test]
fn an_npm_script_cannot_delete_outside_the_workspace() {
    destroys_only_without_the_floor(
        r#"printf '{"name":"x","version":"1.0.0","scripts":{"clean":"rm -rf \\"$VICTIM\\""}}' > package.json && npm run -s clean"#,
    );
}

#[test]
fn a_setsid_grandchild_is_confined_too() {
    destroys_only_without_the_floor(
        r#"setsid -f sh -c 'rm -rf "$VICTIM"; touch "$PWD/grandchild-ran"'; for i in $(seq 50); do [ -e grandchild-ran ] && break; sleep 0.1; done"#,
    );
}

/// Runs `script` on and off the floor; returns what `check` says of each world.
fn on_and_off(script: &str, check: impl Fn(&World) -> bool) -> (bool, bool, String) {
    let w = World::new();
    let out = w.run(true, script);
    let on = check(&w);
    let shown = show(&out);
    let w = World::new();
    w.run(false, script);
    (on, check(&w), shown)
}

#[test]
fn secrets_are_not_read() {
    let stolen = |w: &World| {
        std::fs::read_to_string(w.ws().join("stolen")).is_ok_and(|s| s.contains("PRIVATE KEY"))
    };
    let (on, off, shown) = on_and_off("cat ~/.ssh/id_rsa > stolen", stolen);
    assert!(!on, "the key was read on the floor:\n{shown}");
    assert!(off, "without the floor the key should have been read");
    // Another process's environment (the wrapper's holds this test's HOME).
    let environ = |w: &World| {
        std::fs::read_to_string(w.ws().join("environ")).is_ok_and(|s| s.contains("HOME="))
    };
    let (on, off, shown) = on_and_off("cat /proc/$PPID/environ > environ", environ);
    assert!(
        !on,
        "the wrapper's environment was read on the floor:\n{shown}"
    );
    assert!(
        off,
        "without the floor the environment should have been read"
    );
}

#[test]
fn shell_start_up_files_and_git_hooks_are_not_written() {
    let rc_changed = |w: &World| {
        std::fs::read_to_string(w.root.join("home/.bashrc")).is_ok_and(|s| s.contains("evil"))
    };
    let (on, off, shown) = on_and_off("echo evil >> ~/.bashrc", rc_changed);
    assert!(!on, "~/.bashrc was changed on the floor:\n{shown}");
    assert!(off);

    // Inside the workspace, which is writable: the hook is bound read-only, and the .git
    // above it cannot be renamed away and replaced.
    let hook = r#"echo evil > .git/hooks/pre-commit;
        mv .git .git-old && git init -q . && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit"#;
    let hooked = |w: &World| {
        std::fs::read_to_string(w.ws().join(".git/hooks/pre-commit"))
            .is_ok_and(|s| s.contains("evil"))
    };
    let w = repo();
    let out = w.run(true, hook);
    assert!(
        !hooked(&w),
        "a git hook was written on the floor:\n{}",
        show(&out)
    );
    assert!(
        w.ws().join(".git/HEAD").exists() && !w.ws().join(".git-old").exists(),
        ".git was renamed away on the floor:\n{}",
        show(&out)
    );
    let w = repo();
    w.run(false, hook);
    assert!(
        hooked(&w),
        "without the floor the hook should have been written"
    );
}

/// A world whose workspace is a git repository with a hooks directory.
fn repo() -> World {
    let w = World::new();
    let status = Command::new("git")
        .args(["init", "-q"])
        .current_dir(w.ws())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::create_dir_all(w.ws().join(".git/hooks")).unwrap();
    w
}

#[test]
fn an_interpreter_cannot_rewrite_the_agents_project_settings() {
    let script = r#"python3 -c 'open(".claude/settings.json","w").write("{\"hooks\":{}}")'"#;
    let changed = |w: &World| {
        std::fs::read_to_string(w.ws().join(".claude/settings.json")).is_ok_and(|s| s != "{}")
    };
    let setup = |w: &World| {
        std::fs::create_dir_all(w.ws().join(".claude")).unwrap();
        std::fs::write(w.ws().join(".claude/settings.json"), "{}").unwrap();
    };
    let w = World::new();
    setup(&w);
    let out = w.run(true, script);
    assert!(
        !changed(&w),
        "settings rewritten on the floor:\n{}",
        show(&out)
    );
    let w = World::new();
    setup(&w);
    w.run(false, script);
    assert!(
        changed(&w),
        "without the floor the settings should have been rewritten"
    );
}

#[test]
fn the_agent_cannot_kill_the_wrapper() {
    // On the floor the signal is refused and the run ends with the agent's own code.
    let w = World::new();
    let out = w.run(true, "kill -KILL $PPID; exit 7");
    assert_eq!(out.status.code(), Some(7), "{}", show(&out));
    let w = World::new();
    let out = w.run(false, "kill -KILL $PPID; sleep 5; exit 7");
    assert_eq!(
        out.status.code(),
        None,
        "without the floor the wrapper dies: {}",
        show(&out)
    );
}

#[test]
fn ordinary_development_in_the_workspace_works() {
    let w = World::new();
    let remote = tempfile::tempdir().unwrap();
    let remote = remote.path().join("remote.git");
    let wheels = pytest_wheels();
    let script = format!(
        r#"set -e
git init -q -b main . && git config user.email a@b.c && git config user.name a
git init -q --bare '{remote}'
echo 'print("ok")' > app.py && git add app.py && git commit -qm one
git remote add origin '{remote}' && git push -q origin main
python3 -m venv .venv && .venv/bin/python app.py > venv-ran
.venv/bin/python - <<'EOF'
import zipfile
with zipfile.ZipFile("hello-0.1-py3-none-any.whl", "w") as z:
    z.writestr("hello/__init__.py", "")
    z.writestr("hello-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: hello\nVersion: 0.1\n")
    z.writestr("hello-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("hello-0.1.dist-info/RECORD", "")
EOF
.venv/bin/pip install -q --no-index ./hello-0.1-py3-none-any.whl && .venv/bin/python -c 'import hello' && echo > pip-ran
.venv/bin/pip install -q --no-index --find-links '{wheels}' pytest
printf 'import hello\n\ndef test_sum():\n    assert 1 + 1 == 2\n\ndef test_hello():\n    assert hello.__name__ == "hello"\n' > test_app.py
.venv/bin/python -m pytest -q --junitxml=pytest.xml test_app.py
mkdir -p pkgs/left app && echo '{{"name":"left","version":"1.0.0","main":"index.js"}}' > pkgs/left/package.json
echo 'module.exports = "left"' > pkgs/left/index.js && echo '{{"name":"app","version":"1.0.0"}}' > app/package.json
(cd app && npm install -q --no-audit --no-fund ../pkgs/left && node -e 'require("left")') && echo > npm-ran
mkdir -p crate/src && printf '[package]\nname = "floorcheck"\nversion = "0.1.0"\nedition = "2021"\n' > crate/Cargo.toml
echo 'fn main() {{ println!("built"); }}' > crate/src/main.rs
cargo build -q --offline --manifest-path crate/Cargo.toml
./crate/target/debug/floorcheck > built-ran
printf 'test:\n\techo made > made\n' > Makefile && make -s test
echo done > all-done"#,
        remote = remote.display(),
        wheels = wheels.display()
    );
    let mut cmd = Command::new(wrap_bin());
    cmd.args([
        "--no-intercept",
        "--summary",
        "never",
        "--",
        "sh",
        "-c",
        &script,
    ])
    .current_dir(w.ws())
    .env("HOME", w.root.join("home"))
    .env_remove("AHP_WRAP_FLOOR");
    // The toolchain stays where it is installed (rustup and cargo find it through these).
    for var in ["CARGO_HOME", "RUSTUP_HOME"] {
        if std::env::var_os(var).is_none() {
            let real = dirs_home().join(if var == "CARGO_HOME" {
                ".cargo"
            } else {
                ".rustup"
            });
            cmd.env(var, real);
        }
    }
    let out = run(&mut cmd, Duration::from_secs(240));
    assert!(w.ws().join("all-done").exists(), "{}", show(&out));
    assert_eq!(
        std::fs::read_to_string(w.ws().join("venv-ran")).unwrap(),
        "ok\n"
    );
    assert!(w.ws().join("built-ran").exists());
    assert!(w.ws().join("pip-ran").exists() && w.ws().join(".venv/lib").exists());
    assert!(w.ws().join("npm-ran").exists() && w.ws().join("app/node_modules/left").exists());
    // pytest's own report: two tests collected and passed, its cache written in the workspace.
    let report = std::fs::read_to_string(w.ws().join("pytest.xml")).unwrap();
    assert!(
        report.contains(r#"tests="2""#) && report.contains(r#"failures="0""#),
        "{report}"
    );
    assert!(w.ws().join(".pytest_cache").is_dir());
    let log = Command::new("git")
        .args([
            "--git-dir",
            &remote.display().to_string(),
            "log",
            "--oneline",
            "main",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("one"),
        "the push did not land: {log:?}"
    );
}

/// The pinned pytest's wheels, downloaded by `tests/pytest/setup.sh` (which `tests/run-all.sh`
/// runs), or a failure that says how to get them.
fn pytest_wheels() -> PathBuf {
    let version =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pytest/VERSION"))
            .unwrap();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/.cache/wheels")
        .join(format!("pytest-{}", version.trim()));
    assert!(
        dir.join(".complete").exists(),
        "pytest {} is not downloaded to {}: run tests/pytest/setup.sh first (it downloads the \
         wheels from PyPI)",
        version.trim(),
        dir.display()
    );
    dir
}

/// The home directory of the user running the tests.
fn dirs_home() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
}

/// Runs the wrapper with `args` and `script` (see [`World::command`]).
fn wrapped(w: &World, args: &[&str], script: &str) -> Output {
    run(&mut w.command(args, script), Duration::from_secs(60))
}

/// The audit log's `error` events from the floor.
fn floor_errors(audit: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(audit)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["event_type"] == "error" && r["payload"]["source"] == "floor")
        .collect()
}

#[test]
fn a_temp_file_is_made_written_and_removed_on_the_floor() {
    let w = World::new();
    let out = wrapped(
        &w,
        &[],
        r#"f=$(mktemp) && echo x > "$f" && rm "$f" && test ! -e "$f" && echo TEMP-OK"#,
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("TEMP-OK"),
        "{}",
        show(&out)
    );
}

#[test]
fn running_without_the_floor_is_said_and_audited() {
    let w = World::new();
    let audit = w.root.join("audit.jsonl");
    let out = wrapped(
        &w,
        &["--floor", "off", "--audit-log", audit.to_str().unwrap()],
        "true",
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the floor is off"),
        "{}",
        show(&out)
    );
    let errors = floor_errors(&audit);
    assert_eq!(errors.len(), 1, "{errors:?}");
    // On the floor, with everything this kernel offers, nothing is said.
    let w = World::new();
    let audit = w.root.join("audit.jsonl");
    wrapped(&w, &["--audit-log", audit.to_str().unwrap()], "true");
    let complete = Command::new(wrap_bin())
        .args(["policy", "floor"])
        .output()
        .unwrap();
    if complete.status.success() {
        assert!(
            floor_errors(&audit).is_empty(),
            "{:?}",
            floor_errors(&audit)
        );
    }
}

#[test]
fn require_floor_refuses_to_start_where_a_part_is_missing() {
    // A run inside another run's floor gets no namespaces of its own: a gap.
    let w = World::new();
    let audit = w.root.join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let nested = |args: &[&str]| {
        let mut cmd = w.command(args, "touch ran");
        cmd.env("AHP_WRAP_FLOOR", "1");
        run(&mut cmd, Duration::from_secs(60))
    };
    let out = nested(&["--require-floor", "--audit-log", &audit_arg]);
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    assert!(!w.ws().join("ran").exists(), "the agent started");
    assert_eq!(floor_errors(&audit).len(), 1);
    // Without --require-floor the gap is said and the agent runs.
    let out = nested(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(w.ws().join("ran").exists());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("floor: not enforced here"),
        "{}",
        show(&out)
    );
}

#[test]
fn a_protected_path_created_during_the_run_is_moved_aside_said_and_audited() {
    let w = World::new();
    let audit = w.root.join("audit.jsonl");
    let out = wrapped(
        &w,
        &["--audit-log", audit.to_str().unwrap()],
        r#"echo '{"mcpServers":{}}' > .mcp.json"#,
    );
    let mcp = w.ws().join(".mcp.json");
    assert!(!mcp.exists(), "left in place: {}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&mcp.display().to_string()),
        "{}",
        show(&out)
    );
    let errors = floor_errors(&audit);
    let moved = errors
        .iter()
        .find(|e| e["payload"]["path"] == mcp.display().to_string())
        .unwrap_or_else(|| panic!("not audited: {errors:?}"));
    let record = moved["payload"]["record"].as_str().unwrap();
    assert!(
        stderr.contains(&format!("ahp-wrap restore {record}")),
        "{stderr}"
    );
    let mut restore = Command::new(wrap_bin());
    restore.args(["restore", record]);
    let out = run(&mut restore, Duration::from_secs(30));
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        std::fs::read_to_string(&mcp).unwrap(),
        "{\"mcpServers\":{}}\n"
    );
}

#[test]
fn an_mcp_server_behind_ahp_wrap_mcp_is_confined_too() {
    let mcp = |w: &World, floor: &[&str]| {
        let mut cmd = Command::new(wrap_bin());
        cmd.args(["mcp", "--name", "srv"])
            .args(floor)
            .args(["--", "sh", "-c", r#"rm -rf "$VICTIM"; cat > /dev/null"#])
            .current_dir(w.ws())
            .env("HOME", w.root.join("home"))
            .env("VICTIM", w.victim())
            .env_remove("AHP_WRAP_FLOOR");
        run(&mut cmd, Duration::from_secs(60))
    };
    let w = World::new();
    let out = mcp(&w, &[]);
    assert!(w.victim_intact(), "{}", show(&out));
    let w = World::new();
    mcp(&w, &["--floor", "off"]);
    assert!(
        !w.victim_intact(),
        "without the floor the server should have deleted it"
    );
}

#[test]
fn policy_floor_prints_what_a_run_here_gets() {
    let w = World::new();
    let out = Command::new(wrap_bin())
        .args([
            "policy",
            "floor",
            "--framework",
            "claude-code",
            "--workspace",
        ])
        .arg(w.ws())
        .env("HOME", w.root.join("home"))
        .env("GITHUB_TOKEN", "exported-for-gh")
        .env("SOME_DEPLOY_TOKEN", "exported-for-deploys")
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let ws = w.ws().display().to_string();
    let section = |title: &str| -> Vec<String> {
        text.split(&format!("{title}:\n"))
            .nth(1)
            .unwrap_or("")
            .lines()
            .take_while(|l| l.starts_with("  "))
            .map(|l| l.trim().to_owned())
            .collect()
    };
    assert!(
        section("writable (and everything beneath)").contains(&ws),
        "{text}"
    );
    assert!(
        section("never read (hidden)").contains(&w.root.join("home/.ssh").display().to_string()),
        "{text}"
    );
    // The network's plan, from the default policy's [floor.net].
    let net = text
        .lines()
        .find(|l| l.starts_with("network: "))
        .unwrap_or_else(|| panic!("no network line: {text}"));
    assert!(
        net.contains("allowed host pattern(s)")
            && net.contains("unknown hosts: ask (a person answers)")
            && net.contains("loopback services reached"),
        "{net}"
    );
    // The environment, the path sockets and `keep`, as the default policy and Claude's shim
    // say (the token's name, never its value).
    let env = text
        .lines()
        .find(|l| l.starts_with("environment: "))
        .unwrap_or_else(|| panic!("no environment line: {text}"));
    assert!(
        env.contains("of this one: SOME_DEPLOY_TOKEN;") && env.contains("CLAUDE_CODE_OAUTH_TOKEN"),
        "{env}"
    );
    // A token the default policy declares is given as a placeholder, not removed.
    assert!(
        text.contains("  GITHUB_TOKEN -> github.com, api.github.com")
            && text.contains("set here (GITHUB_TOKEN)"),
        "{text}"
    );
    assert!(!text.contains("exported-for-"), "{text}");
    assert!(
        text.contains("path Unix sockets: those the tree binds"),
        "{text}"
    );
    assert!(text.contains("([floor] keep): none"), "{text}");
    // Printing creates nothing: Claude's state directory is listed only once it exists.
    assert!(!w.root.join("home/.claude").exists());
    assert_eq!(out.status.success(), !text.contains("missing:"), "{text}");
}

/// The agent's script: a datagram to the service outside the tree, then one to a socket of
/// its own in the workspace; what became of each, printed.
const DATAGRAMS: &str = r#"
import os, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.sendto(b'evil', os.environ['SVC'])
    print('sent')
except OSError as e:
    print('refused', e.errno)
own = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
own.bind(os.path.abspath('own.sock'))
s.sendto(b'hello', os.path.abspath('own.sock'))
print(own.recv(16).decode())
"#;

#[test]
fn a_datagram_to_a_socket_outside_the_tree_is_refused_and_its_own_arrive() {
    for floor in [true, false] {
        let w = World::new();
        // A service outside the tree, as the journal's socket or /dev/log is: it keeps
        // what it receives.
        let svc = w.root.join("svc.sock");
        let got = w.root.join("svc-got");
        let server = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket, sys\n\
                 s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1])\n\
                 open(sys.argv[2] + '.ready', 'w').close()\n\
                 while True:\n\
                 \x20   d = s.recv(64)\n\
                 \x20   with open(sys.argv[2], 'ab') as f: f.write(d)\n",
            ])
            .arg(&svc)
            .arg(&got)
            .spawn()
            .unwrap();
        let ready = got.with_extension("ready");
        let _ = eventually(|| ready.exists(), Duration::from_secs(10));
        std::fs::write(w.ws().join("dgram.py"), DATAGRAMS).unwrap();
        let audit = w.root.join("audit.jsonl");
        let audit_arg = audit.display().to_string();
        let on = ["--audit-log", audit_arg.as_str()];
        let args: &[&str] = if floor { &on } else { &["--floor", "off"] };
        let mut cmd = w.command(args, "python3 dgram.py");
        cmd.env("SVC", &svc);
        let out = run(&mut cmd, Duration::from_secs(60));
        let mut server = server;
        std::thread::sleep(Duration::from_millis(200));
        let _ = server.kill();
        let _ = server.wait();
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(printed.contains("hello"), "its own socket: {}", show(&out));
        let received = std::fs::read_to_string(&got).unwrap_or_default();
        if floor {
            assert!(printed.contains("refused 13"), "{}", show(&out));
            assert_eq!(received, "", "the datagram reached the service");
            let log = std::fs::read_to_string(&audit).unwrap();
            let svc_url = format!("unix:{}", svc.display());
            assert!(
                log.lines().any(|l| l.contains(&svc_url)),
                "the refusal is audited with the socket's path: {log}"
            );
        } else {
            assert!(printed.contains("sent"), "{}", show(&out));
            assert_eq!(received, "evil", "without the floor it arrives");
        }
    }
}

/// The directories beneath `root`, each relative to it.
fn dirs_beneath(root: &std::path::Path) -> std::collections::BTreeSet<PathBuf> {
    let mut found = std::collections::BTreeSet::new();
    let mut todo = vec![root.to_owned()];
    while let Some(d) = todo.pop() {
        // A directory gone while this walks (the run's own, which its guardian removes once
        // the wrapper has exited) is not left behind.
        let entries = match std::fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{}: {e}", d.display()),
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                found.insert(e.path().strip_prefix(root).unwrap().to_owned());
                todo.push(e.path());
            }
        }
    }
    found
}

/// A run in a fresh home leaves no directory the user did not have but the wrapper's own
/// state: those the floor made for the agent's state and the caches (so that a rule has one
/// to hold on to) go when the run left them empty; one the user had stays.
#[test]
fn a_run_leaves_no_empty_directory_the_user_did_not_have() {
    let (_dir, root) = outside_tree("floor-made-", &["ws", "home/.cache"], &[]);
    let home = root.join("home");
    let before = dirs_beneath(&home);
    let out = run(
        Command::new(wrap_bin())
            .args(["-q", "--", "sh", "-c", "ls -a ~ ~/.cache"])
            .current_dir(root.join("ws"))
            .env("HOME", &home)
            .env_remove("XDG_STATE_HOME")
            .env_remove("XDG_CACHE_HOME"),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(
        seen.lines().any(|l| l == ".npm"),
        "the floor made a cache for the run: {}",
        show(&out)
    );
    let ours = std::path::Path::new(".local/state/ahp-wrap");
    let new: Vec<PathBuf> = dirs_beneath(&home)
        .difference(&before)
        .filter(|d| !d.starts_with(ours) && !ours.starts_with(d))
        .cloned()
        .collect();
    assert!(new.is_empty(), "left behind: {new:?}\n{}", show(&out));
    assert!(home.join(".cache").is_dir(), "the user's own stays");
}
