//! Namespaces of the tree's own on the floor: a process of the tree makes a user namespace
//! and maps its ids in it (what bubblewrap, `unshare -Ur`, Chromium's sandbox and the agents'
//! own sandboxes do), and nothing it does there takes it off the floor. Each attack runs in
//! a nested namespace and fails as it fails without nesting; each does its damage with
//! `--floor off`, which shows that each test can fail.
//!
//! Each test's world lives under the target directory, not under /tmp: the temp directories
//! are writable on the floor, so a victim there would prove nothing.

use ahp_wrap_testkit::common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use common::*;

/// A workspace that is a git repository, a home with a key and a start-up file.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let (dir, root) = outside_tree(
            "nested-",
            &["ws/.git/hooks"],
            &[
                ("home/.ssh/id_rsa", "PRIVATE KEY\n"),
                ("home/.bashrc", "# rc\n"),
            ],
        );
        let status = Command::new("git")
            .args(["init", "-q"])
            .current_dir(root.join("ws"))
            .status()
            .unwrap();
        assert!(status.success());
        World { _dir: dir, root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// Runs `script` (sh) as an agent without hooks, in the workspace, on the floor with
    /// sandboxes of the tree's own allowed (`--nested-sandboxes on`: a shell's shim does not
    /// say it starts one) or (`floor` false) with `--floor off`.
    fn run(&self, floor: bool, script: &str) -> Output {
        let mut cmd = Command::new(wrap_bin());
        cmd.args(["--no-intercept", "--summary", "never"]);
        match floor {
            true => cmd.args(["--nested-sandboxes", "on"]),
            false => cmd.args(["--floor", "off"]),
        };
        cmd.args(["--", "sh", "-c", script])
            .current_dir(self.ws())
            .env("HOME", self.root.join("home"))
            .env_remove("AHP_WRAP_FLOOR");
        run(&mut cmd, Duration::from_secs(60))
    }

    fn rc_written(&self) -> bool {
        std::fs::read_to_string(self.root.join("home/.bashrc")).is_ok_and(|s| s.contains("evil"))
    }

    fn hook_written(&self) -> bool {
        std::fs::read_to_string(self.ws().join(".git/hooks/pre-commit"))
            .is_ok_and(|s| s.contains("evil"))
    }

    fn key_stolen(&self) -> bool {
        std::fs::read_to_string(self.ws().join("stolen")).is_ok_and(|s| s.contains("PRIVATE KEY"))
    }
}

/// `script` does what `damage` sees without the floor, and not with it.
fn only_without_the_floor(script: &str, damage: impl Fn(&World) -> bool) {
    let w = World::new();
    let out = w.run(true, script);
    assert!(
        !damage(&w),
        "the floor let `{script}` through:\n{}",
        show(&out)
    );
    let w = World::new();
    let out = w.run(false, script);
    assert!(
        damage(&w),
        "without the floor `{script}` should have done its damage (else this test proves \
         nothing):\n{}",
        show(&out)
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "bubblewrap",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the bubblewrap setup"
)]
fn a_nested_user_namespace_maps_its_ids_and_mounts_in_its_own_namespace() {
    let w = World::new();
    // What bubblewrap does first: a user namespace with the caller's ids mapped as root,
    // then a mount namespace of its own, a tmpfs in it, and a fresh /proc in a new pid
    // namespace.
    let script = "unshare -Urm sh -c 'id -u; mount -t tmpfs none /mnt && echo mounted' > out 2>&1;
        unshare -Urmpf --mount-proc sh -c 'echo pid-$$' >> out 2>&1;
        bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent \
            sh -c 'echo bwrap-ran' >> out 2>&1";
    let out = w.run(true, script);
    let said = std::fs::read_to_string(w.ws().join("out")).unwrap_or_default();
    for expected in ["0\n", "mounted\n", "pid-1\n", "bwrap-ran\n"] {
        assert!(
            said.contains(expected),
            "{expected:?} missing from what the nested namespaces said:\n{said}\n{}",
            show(&out)
        );
    }
}

#[test]
fn unmounting_a_hidden_path_in_a_nested_namespace_does_not_uncover_it() {
    only_without_the_floor(
        "unshare -Urm sh -c 'umount ~/.ssh || umount -l ~/.ssh; cat ~/.ssh/id_rsa' > stolen",
        World::key_stolen,
    );
}

#[test]
fn unmounting_a_read_only_bind_in_a_nested_namespace_leaves_it_read_only() {
    // The hooks directory is bound read-only inside the writable workspace: beneath the
    // bind it is writable.
    only_without_the_floor(
        "unshare -Urm sh -c 'umount -l .git/hooks; echo evil > .git/hooks/pre-commit'",
        World::hook_written,
    );
    // A bind of the workspace without what is mounted in it would show the directory
    // beneath the hooks' bind.
    only_without_the_floor(
        "unshare -Urm sh -c 'mkdir -p /tmp/nested-$$ && mount --bind . /tmp/nested-$$ && \
             echo evil > /tmp/nested-$$/.git/hooks/pre-commit'",
        World::hook_written,
    );
}

#[test]
fn remounting_writable_in_a_nested_namespace_is_refused() {
    only_without_the_floor(
        "unshare -Urm sh -c 'mount -o remount,rw /; mount -o remount,rw \"$HOME\"; \
             mount -o remount,bind,rw \"$HOME\"; echo evil >> ~/.bashrc'",
        World::rc_written,
    );
    only_without_the_floor(
        "unshare -Urm sh -c 'mount -o remount,bind,rw .git/hooks; echo evil > .git/hooks/pre-commit'",
        World::hook_written,
    );
}

#[test]
fn a_new_proc_in_a_nested_namespace_shows_no_other_process() {
    // A process of the test's, outside the tree, with a secret in its environment.
    let mut victim = Command::new("sleep")
        .arg("60")
        .env("VICTIM_SECRET", "hunter2")
        .spawn()
        .unwrap();
    let pid = victim.id();
    // Through a /proc mounted in a nested namespace (in a PID namespace of its own too),
    // then through the tree's own /proc: without the floor the last one reads it (a nested
    // user namespace may not read a process outside it even there).
    let script = format!(
        "unshare -Urm sh -c 'mount -t proc proc /proc; cat /proc/{pid}/environ' > environ;
         unshare -Urmpf sh -c 'mount -t proc proc /proc; cat /proc/{pid}/environ' >> environ;
         unshare -Urmpf --mount-proc sh -c 'cat /proc/*/environ' >> environ;
         cat /proc/{pid}/environ >> environ"
    );
    let read = |w: &World| {
        std::fs::read(w.ws().join("environ"))
            .is_ok_and(|s| String::from_utf8_lossy(&s).contains("hunter2"))
    };
    only_without_the_floor(&script, read);
    let _ = victim.kill();
    let _ = victim.wait();
}

#[test]
#[cfg_attr(
    skip_e2e = "bubblewrap",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the bubblewrap setup"
)]
fn bubblewrap_binding_the_root_writable_cannot_write_a_start_up_file() {
    only_without_the_floor(
        "bwrap --bind / / --dev /dev --proc /proc --unshare-user --die-with-parent \
             sh -c 'echo evil >> ~/.bashrc'",
        World::rc_written,
    );
    only_without_the_floor(
        "bwrap --bind / / --dev /dev --unshare-user --die-with-parent \
             sh -c 'echo evil > .git/hooks/pre-commit'",
        World::hook_written,
    );
}

#[test]
fn a_nested_namespace_cannot_reach_an_address_the_policy_does_not_name() {
    // A server on this machine's loopback, on a port the run does not name.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    server.set_nonblocking(true).unwrap();
    let connect = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\""
    );
    // In a user namespace of its own (the tree's network), and in a network namespace of
    // its own with its loopback up (its own network, with nothing in it).
    let script = format!(
        "unshare -Ur {connect} > reached 2>&1; unshare -Urn sh -c 'ip link set lo up; {connect}' >> reached 2>&1"
    );
    let reached = |_: &World| {
        std::thread::sleep(Duration::from_millis(100));
        let mut got = false;
        while server.accept().is_ok() {
            got = true;
        }
        got
    };
    only_without_the_floor(&script, reached);
}

#[test]
fn the_trees_own_root_cannot_undo_the_floors_mounts() {
    // Where the tree may nest sandboxes, its writes are refused by mounts rather than by
    // Landlock (which refuses every mount): run as root (what the tests are on CI), a process
    // of the tree has every capability in its user namespace, and must still find the
    // floor's mounts locked.
    only_without_the_floor(
        "umount ~/.ssh; umount -l ~/.ssh; cat ~/.ssh/id_rsa > stolen",
        World::key_stolen,
    );
    only_without_the_floor(
        "umount -l .git/hooks; mount -o remount,bind,rw .git/hooks; \
         echo evil > .git/hooks/pre-commit",
        World::hook_written,
    );
    only_without_the_floor(
        "mount -o remount,rw /; mount -o remount,bind,rw \"$HOME\"; \
         python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); \
             a = (ctypes.c_uint64 * 4)(0, 1, 0, 0); \
             print(l.syscall(442, -100, os.environ[\"HOME\"].encode(), 0x8000, a, 32))'; \
         echo evil >> ~/.bashrc",
        World::rc_written,
    );
}
