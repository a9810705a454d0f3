//! The floor's refusals, counted and audited where the kernel's audit log can be read.
//!
//! Landlock reports a denial only to the kernel's audit subsystem, readable with
//! `CAP_AUDIT_READ` while the subsystem is on. Run as root, this suite turns it on for its
//! own runs (and back to what it was after; it is a binary of its own, so no other suite
//! runs meanwhile) and checks, from the audit log on disk and the victim on disk, that each
//! refusal of the run's own tree is recorded and counted, and that a refusal of another
//! wrapper's tree running at the same time is not. Where the audit log cannot be read (the
//! subsystem off; or, as root, the wrapper started by `setpriv` without `CAP_AUDIT_READ`;
//! or another user), nothing is counted and `policy floor` says why.

use ahp_wrap_testkit::common;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

const AUDIT_GET: u16 = 1000;
const AUDIT_SET: u16 = 1001;

/// One request to the audit subsystem; the answer of type `want` (or the ack).
fn audit_request(ty: u16, payload: &[u8], want: u16) -> Vec<u8> {
    use nix::sys::socket::{
        recv, send, socket, AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType,
    };
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkAudit,
    )
    .expect("an audit socket");
    let len = 16 + payload.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&ty.to_ne_bytes());
    msg.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(payload);
    let sent = send(fd.as_raw_fd(), &msg, MsgFlags::empty()).expect("the audit request sent");
    assert_eq!(sent, msg.len(), "audit request");
    let mut buf = vec![0u8; 8192];
    loop {
        let got = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()).expect("an audit answer");
        assert!(got >= 16, "audit answer of {got} bytes");
        let t = u16::from_ne_bytes([buf[4], buf[5]]);
        if t == want {
            return buf[..got].to_vec();
        }
        if t == libc::NLMSG_ERROR as u16 {
            let err = i32::from_ne_bytes(buf[16..20].try_into().unwrap());
            assert_eq!(err, 0, "the audit subsystem refused the request");
            if want == libc::NLMSG_ERROR as u16 {
                return buf[..got].to_vec();
            }
        }
    }
}

fn audit_enabled() -> bool {
    let answer = audit_request(AUDIT_GET, &[], AUDIT_GET);
    u32::from_ne_bytes(answer[20..24].try_into().unwrap()) != 0
}

fn set_audit_enabled(on: bool) {
    // struct audit_status: mask (AUDIT_STATUS_ENABLED), enabled, then seven more u32.
    let mut status = [0u8; 36];
    status[0..4].copy_from_slice(&1u32.to_ne_bytes());
    status[4..8].copy_from_slice(&u32::from(on).to_ne_bytes());
    audit_request(AUDIT_SET, &status, libc::NLMSG_ERROR as u16);
    assert_eq!(audit_enabled(), on);
}

/// The audit subsystem on for the test, back to what it was when dropped.
struct AuditOn {
    was: bool,
}

impl AuditOn {
    fn new() -> AuditOn {
        let was = audit_enabled();
        set_audit_enabled(true);
        AuditOn { was }
    }
}

impl Drop for AuditOn {
    fn drop(&mut self) {
        set_audit_enabled(self.was);
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A workspace and a victim outside every writable place of the floor.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let (dir, root) = outside_tree("refusals-", &["ws"], &[("victim/file", "precious\n")]);
        World { _dir: dir, root }
    }

    fn victim(&self) -> PathBuf {
        self.root.join("victim/file")
    }

    fn audit_log(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// The wrapper around `sh -c script`, writing its audit log to `log`.
    fn command(&self, log: &str, script: &str) -> Command {
        let mut cmd = Command::new(wrap_bin());
        cmd.args(["--no-intercept", "--summary", "always", "--audit-log"])
            .arg(self.audit_log(log))
            .args(["--", "sh", "-c", script])
            .current_dir(self.root.join("ws"))
            .env("VICTIM", self.victim())
            .env_remove("AHP_WRAP_FLOOR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }
}

/// The floor's refusals in an audit log: (tool, access, path).
fn floor_records(log: &Path) -> Vec<(String, String, String, Value)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["payload"]["context"]["interceptor"] == "floor")
        .map(|r| {
            assert_eq!(r["decision"], "block", "{r}");
            assert_eq!(r["event_type"], "pre_action", "{r}");
            let p = &r["payload"];
            (
                p["tool_name"].as_str().unwrap_or_default().to_owned(),
                p["arguments"]["access"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["arguments"]["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["context"]["process"].clone(),
            )
        })
        .collect()
}

fn policy_floor(cmd: impl FnOnce(Command) -> Command) -> String {
    let mut floor = Command::new(wrap_bin());
    floor.args(["policy", "floor"]).env_remove("AHP_WRAP_FLOOR");
    let out = run(&mut cmd(floor), Duration::from_secs(30));
    assert!(out.status.success(), "{}", show(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn as_is(cmd: Command) -> Command {
    cmd
}

/// `cmd` unable to read the kernel's audit log (see the testkit's `without_audit_read`).
fn without_audit_read(cmd: Command) -> Command {
    common::without_audit_read(&cmd, false)
}

#[test]
fn the_kernels_refusals_of_the_runs_own_tree_are_counted_and_audited() {
    let w = World::new();
    // Writes the victim (a redirection no hook sees), then deletes it with an absolute path,
    // while another wrapper's agent, at the same time, writes a file of its own.
    let script = "sleep 0.3; echo gone > \"$VICTIM\"; /bin/rm -f \"$VICTIM\"; sleep 0.3";
    let other_victim = w.root.join("victim/other");
    std::fs::write(&other_victim, "other\n").unwrap();
    let other_script = format!(
        "sleep 0.3; echo gone > {}; sleep 0.3",
        other_victim.display()
    );

    if !is_root() {
        // Without CAP_AUDIT_READ nothing can be read: the run and policy floor say so.
        let said = policy_floor(as_is);
        assert!(
            said.contains("not counted") && said.contains("CAP_AUDIT_READ"),
            "policy floor must say why refusals are not counted:\n{said}"
        );
        let out = run(&mut w.command("a.jsonl", script), Duration::from_secs(60));
        assert_eq!(
            std::fs::read_to_string(w.victim()).unwrap(),
            "precious\n",
            "{}",
            show(&out)
        );
        assert!(floor_records(&w.audit_log("a.jsonl")).is_empty());
        return;
    }

    // Off (this machine's default, and many others'): said, nothing counted.
    let audit = AuditOn::new();
    set_audit_enabled(false);
    let said = policy_floor(as_is);
    assert!(
        said.contains("not counted") && said.contains("audit subsystem is off"),
        "policy floor must say the audit subsystem is off:\n{said}"
    );
    let out = run(&mut w.command("off.jsonl", script), Duration::from_secs(60));
    assert_eq!(
        std::fs::read_to_string(w.victim()).unwrap(),
        "precious\n",
        "{}",
        show(&out)
    );
    assert!(floor_records(&w.audit_log("off.jsonl")).is_empty());

    // On: every refusal of this run's tree, and none of the other's.
    set_audit_enabled(true);
    let said = policy_floor(as_is);
    assert!(said.contains("counted and audited"), "{said}");
    // Without CAP_AUDIT_READ, even with the subsystem on: said, nothing counted.
    let said = policy_floor(without_audit_read);
    assert!(
        said.contains("not counted") && said.contains("CAP_AUDIT_READ"),
        "policy floor must say why refusals are not counted:\n{said}"
    );
    let out = run(
        &mut without_audit_read(w.command("nocap.jsonl", script)),
        Duration::from_secs(60),
    );
    assert_eq!(
        std::fs::read_to_string(w.victim()).unwrap(),
        "precious\n",
        "{}",
        show(&out)
    );
    assert!(floor_records(&w.audit_log("nocap.jsonl")).is_empty());
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("the kernel refused"),
        "{}",
        show(&out)
    );
    let other = w.command("other.jsonl", &other_script).spawn().unwrap();
    let out = run(&mut w.command("on.jsonl", script), Duration::from_secs(60));
    let other = other.wait_with_output().unwrap();
    drop(audit);

    assert_eq!(
        std::fs::read_to_string(w.victim()).unwrap(),
        "precious\n",
        "the floor must hold: {}",
        show(&out)
    );
    assert_eq!(std::fs::read_to_string(&other_victim).unwrap(), "other\n");

    let victim = w.victim().display().to_string();
    let dir = w.root.join("victim").display().to_string();
    let records = floor_records(&w.audit_log("on.jsonl"));
    let write = records
        .iter()
        .find(|r| r.0 == "file" && r.1 == "fs.write_file" && r.2 == victim)
        .unwrap_or_else(|| panic!("the refused write is audited: {records:?}\n{}", show(&out)));
    assert_eq!(
        write.3["comm"], "sh",
        "the refused process is named: {write:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r.1 == "fs.remove_file" && r.2 == dir && r.3["comm"] == "rm"),
        "the refused removal is audited with rm as its process: {records:?}"
    );
    assert!(
        records.iter().all(|r| !r.2.contains("other")),
        "another wrapper's refusal is not this run's: {records:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("floor: the kernel refused 2 act(s)") && stderr.contains(&victim),
        "the run's summary counts them: {}",
        show(&out)
    );

    let other_records = floor_records(&w.audit_log("other.jsonl"));
    assert!(
        other_records
            .iter()
            .any(|r| r.1 == "fs.write_file" && r.2 == other_victim.display().to_string()),
        "the other run audits its own: {other_records:?}\n{}",
        show(&other)
    );
    assert!(
        other_records.iter().all(|r| r.2 != victim),
        "and not this one's: {other_records:?}"
    );

    // The audit log with its floor records still verifies.
    let verify = run(
        Command::new(wrap_bin())
            .args(["audit", "verify"])
            .arg(w.audit_log("on.jsonl")),
        Duration::from_secs(30),
    );
    assert!(verify.status.success(), "{}", show(&verify));
}
