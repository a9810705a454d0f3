//! Gemini CLI supervised for a user who is not root, through the system settings file root
//! installs once (`ahp-wrap setup gemini`). The suite runs as root: it makes an unprivileged
//! user (`useradd`), installs the file into a directory of its own
//! (`AHP_WRAP_SYSTEM_DIR`), and runs the real Gemini CLI as that user under `ahp-wrap`,
//! with the scripted model server. What ran is read from disk; what the model saw, from
//! the model server. The user's runs start the wrapper, Gemini and the harness where that
//! user reaches them (copies of root's, where the checkout lies in a home only root can
//! pass: `ahp_wrap_testkit::reach`).

use ahp_wrap_testkit::llm_agents as support;
use ahp_wrap_testkit::reach;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use support::{shell, Agent, FakeLlm, World};

const PROMPT: &str = "please do the task";
/// The unprivileged user the suite runs Gemini as.
const USER: &str = "ahpwrap-gemini";

/// The user's uid and gid, the user made first if the machine has none by that name.
fn unprivileged_user() -> (u32, u32) {
    static MADE: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *MADE.get_or_init(|| {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this suite makes a user and installs a root-owned file: run it as root"
        );
        let id = |flag: &str| {
            let out = Command::new("id").args([flag, USER]).output().unwrap();
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u32>()
                .ok()
        };
        if id("-u").is_none() {
            let made = Command::new("useradd")
                .args([
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    "--user-group",
                    USER,
                ])
                .status()
                .unwrap();
            assert!(made.success(), "useradd {USER} failed");
        }
        (id("-u").unwrap(), id("-g").unwrap())
    })
}

/// A world for `user`: its files theirs, a PATH without root's own directories, the
/// installed files looked for in `system_dir`, what it runs where it reaches it.
fn world_for(user: (u32, u32), system_dir: &Path) -> World {
    let mut world = World::new(Agent::Gemini);
    world.for_others();
    let status = Command::new("chown")
        .args(["-R", &format!("{}:{}", user.0, user.1)])
        .arg(world.dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    world.user = Some(user);
    world.env = vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("AHP_WRAP_SYSTEM_DIR".into(), system_dir.into()),
    ];
    world
}

/// A directory for installed files that only root can write, as Gemini requires, and that
/// the user can read.
fn system_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("ahp-wrap-system-")
        .tempdir_in(reach::base())
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `ahp-wrap setup gemini [args]` as root, into `system_dir`: the wrapper the user's runs
/// start, whose hook the file names.
fn setup(system_dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(reach::wrapper_for_others())
        .args(["setup", "gemini"])
        .args(args)
        .env("AHP_WRAP_SYSTEM_DIR", system_dir)
        .output()
        .unwrap()
}

fn installed(system_dir: &Path) -> PathBuf {
    system_dir.join("gemini/settings.json")
}

/// A run of the user that must be refused before Gemini starts, with `why` in its message:
/// the model server never asked, the tool's marker never made.
fn refused(world: &World, why: &str) {
    refused_with(world, &[], why);
}

/// [`refused`], with `wrapper` options.
fn refused_with(world: &World, wrapper: &[&str], why: &str) {
    let marker = world.ws().join("refused-marker");
    // A model server of its own for each refusal.
    let dir = tempfile::tempdir_in(world.dir.path()).unwrap();
    let llm = FakeLlm::start(
        dir.path(),
        json!([shell(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let r = world.wrapped(&llm, wrapper, PROMPT, &[]);
    r.check(
        r.output.status.code() == Some(125),
        "the run was not refused",
    );
    r.check(
        r.stderr().contains(why),
        &format!("the refusal does not say {why:?}"),
    );
    r.check(
        llm.main_bodies().is_empty() && !marker.exists(),
        "Gemini ran without supervision",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn a_user_who_is_not_root_is_supervised_through_the_installed_file() {
    let user = unprivileged_user();
    let system = system_dir();
    let world = world_for(user, system.path());

    // Nothing installed: refused, with the one command that installs it.
    refused(&world, "setup gemini");

    let done = setup(system.path(), &[]);
    assert!(done.status.success(), "{done:?}");
    let file = installed(system.path());
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(
        (
            meta.permissions().mode() & 0o777,
            std::os::unix::fs::MetadataExt::uid(&meta)
        ),
        (0o644, 0)
    );

    // Every event, block and allow, as a root run.
    let (r, llm) = support::one_blocked_one_allowed(&world, shell, PROMPT);
    support::check_reason_then_output(&r, &llm);
    // The floor without namespaces (in one, Gemini would find no file of root's and run
    // with no hooks at all), and said.
    r.check(
        r.stderr()
            .contains("Gemini CLI run by a user who is not root gets no namespaces"),
        "the run does not say what the floor lacks, and why",
    );
    r.check(
        world.harness_saw("pre_prompt").len() >= 2 && world.harness_saw("post_action").len() == 1,
        "the prompt and the tool's result were not seen",
    );
    // The run was the user's: its files are.
    let home_state = world.dir.path().join("home/.gemini");
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&home_state).unwrap()),
        user.0
    );

    // A modified command is the one that runs.
    let world = world_for(user, system.path());
    let (r, _llm, new) = support::modified_call(&world, shell, PROMPT, |new| {
        json!([{"event": "pre_action", "contains": "orig", "decision": {"decision": "modify",
            "modified_payload": {"command": format!("touch {}", new.display())}}}])
    });
    r.check(new.exists(), "the modified command did not run");

    // Without a network namespace each connection is decided (docs/floor.md, "In a
    // container"): Gemini reaches its model server on loopback, and a connection of its
    // shell to an address the policy does not name is refused and audited, with its process.
    let world = world_for(user, system.path());
    let (probe, outcome) = (world.ws().join("probe.py"), world.ws().join("outcome"));
    std::fs::write(
        &probe,
        "import socket\ntry:\n    socket.create_connection(('192.0.2.7', 80), timeout=5)\n    \
         print('connected')\nexcept OSError as e:\n    print(e.errno)\n",
    )
    .unwrap();
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([
            shell(&format!("python3 {} > {}", probe.display(), outcome.display())),
            {"text": "All done."}
        ]),
    );
    let harness = world.harness(json!({"rules": []}));
    let audit = world.dir.path().join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap();
    let r = world.wrapped(
        &llm,
        &["--harness", &harness, "--audit-log", audit_arg],
        PROMPT,
        &[],
    );
    let said = std::fs::read_to_string(&outcome).unwrap_or_default();
    r.check(
        said.trim() == libc::EACCES.to_string(),
        &format!("the connection was not refused: {said:?}"),
    );
    let audit = std::fs::read_to_string(&audit).unwrap_or_default();
    r.check(
        audit.lines().any(|l| {
            l.contains("\"decision\":\"block\"")
                && l.contains("192.0.2.7:80")
                && l.contains("probe.py")
        }),
        &format!("the refusal is not in the audit log:\n{audit}"),
    );
    // Each hook call's process is the one the kernel vouched for to the bridge, which made
    // its connection to the control socket: one of the agent's tree.
    let hooks: Vec<serde_json::Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["source"] == "harness" && e["peer"].is_object())
        .collect();
    r.check(
        hooks.len() >= 4
            && hooks
                .iter()
                .all(|e| e["peer"]["descends_from_agent"] == true),
        &format!("a hook call is not the tree's: {hooks:?}"),
    );

    // The harness gone: blocked.
    let world = world_for(user, system.path());
    let (r, llm) = support::harness_goes_down(&world, shell, PROMPT);
    r.check(
        llm.main_bodies().len() == 1 && r.stdout().contains("fail mode: closed"),
        "the command was not refused with the reason",
    );

    // What the floor lacks is refused where the whole floor is required.
    let world = world_for(user, system.path());
    let marker = world.ws().join("required-marker");
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([shell(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let r = world.wrapped(&llm, &["--require-floor"], PROMPT, &[]);
    r.check(
        r.output.status.code() == Some(125) && r.stderr().contains("--require-floor"),
        "an incomplete floor was not refused",
    );
    r.check(
        llm.main_bodies().is_empty() && !marker.exists(),
        "Gemini ran",
    );

    // The file removed: gone, with the directory it was in.
    let removed = setup(system.path(), &["--remove"]);
    assert!(removed.status.success(), "{removed:?}");
    assert!(
        !system.path().join("gemini").exists(),
        "the emptied directory stays"
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn an_old_or_tampered_installed_file_is_refused_with_the_reason() {
    let user = unprivileged_user();
    let system = system_dir();
    let world = world_for(user, system.path());
    assert!(setup(system.path(), &[]).status.success());
    let file = installed(system.path());
    let original = std::fs::read(&file).unwrap();

    // An earlier version's (or one edited): other hooks than this build's.
    let old = String::from_utf8(original.clone())
        .unwrap()
        .replace("\"timeout\": 3600000", "\"timeout\": 60000");
    assert_ne!(old.as_bytes(), original);
    std::fs::write(&file, old).unwrap();
    refused(&world, "is not what this ahp-wrap installs");
    let doctor = Command::new(reach::wrapper_for_others())
        .args(["doctor", "--json"])
        .env("AHP_WRAP_SYSTEM_DIR", system.path())
        .env(
            "PATH",
            format!(
                "{}:/usr/bin:/bin",
                support::Agent::Gemini.bin().parent().unwrap().display()
            ),
        )
        .output()
        .unwrap();
    let doctor: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let gemini = doctor["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["framework"] == "gemini")
        .unwrap();
    assert!(
        gemini["system_file"]["state"]
            .as_str()
            .unwrap()
            .contains("OUT OF DATE"),
        "{gemini}"
    );
    assert!(setup(system.path(), &[]).status.success());
    assert_eq!(
        std::fs::read(&file).unwrap(),
        original,
        "setup did not update it"
    );
    // A hook budget past the file's timeout, after which Gemini would let the call through.
    refused_with(&world, &["--timeout", "3600000"], "hook budget");

    // Writable by others: Gemini would skip it, and anyone could have put hooks there.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    refused(&world, "writable by others");
    // The user's own.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(&file, Some(user.0), Some(user.1)).unwrap();
    refused(&world, "not owned by root");
}

/// This build's two executables, linked (not copied) into a new directory of `mode` under
/// the target directory: `current_exe` then names them there.
fn install_linked(mode: u32) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("ahp-wrap-install-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let wrapper = ahp_wrap_testkit::wrap_bin();
    for name in ["ahp-wrap", "ahp-wrap-hook"] {
        std::fs::hard_link(wrapper.with_file_name(name), dir.path().join(name)).unwrap();
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

#[test]
fn setup_is_roots_refuses_a_hook_a_user_could_replace_and_removes_only_its_own() {
    let user = unprivileged_user();
    let system = system_dir();
    let file = installed(system.path());
    let said = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();

    // Not root: refused, with the command that works.
    let mut as_user = Command::new(reach::wrapper_for_others());
    as_user
        .args(["setup", "gemini"])
        .env("AHP_WRAP_SYSTEM_DIR", system.path());
    std::os::unix::process::CommandExt::uid(&mut as_user, user.0);
    let out = as_user.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(said(&out).contains("run `sudo "), "{}", said(&out));
    assert!(!file.exists());

    // An install a user could change: the file would make every run call what they put there.
    let open = install_linked(0o777);
    let out = Command::new(open.path().join("ahp-wrap"))
        .args(["setup", "gemini"])
        .env("AHP_WRAP_SYSTEM_DIR", system.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        said(&out).contains("can be changed by a user other than root"),
        "{}",
        said(&out)
    );
    assert!(
        !file.exists(),
        "a file naming a replaceable hook was written"
    );

    // `setup --remove` (what install.sh --uninstall runs) leaves another install's file.
    assert!(setup(system.path(), &[]).status.success());
    let other = install_linked(0o755);
    let out = Command::new(other.path().join("ahp-wrap"))
        .args(["setup", "--remove"])
        .env("AHP_WRAP_SYSTEM_DIR", system.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert!(file.exists(), "another install's file was removed");
    let out = Command::new(reach::wrapper_for_others())
        .args(["setup", "--remove"])
        .env("AHP_WRAP_SYSTEM_DIR", system.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert!(!file.exists(), "this install's file stayed");
}
