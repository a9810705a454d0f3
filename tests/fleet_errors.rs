//! The fleet commands' errors that need no broker: a broker that is not there when a worker
//! or a caller starts, and a capability file that does not parse. Each is a clear message
//! and exit 2, at once.

use ahp_wrap_testkit::agents;
use ahp_wrap_testkit::fleet;

use std::time::Duration;

use fleet::Fleet;

const CAPABILITY: &str = "name = \"down\"\ndescription = \"d\"\nrisk_ceiling = \"R2\"\n";

fn capability(_name: &str) -> String {
    CAPABILITY.to_owned()
}

#[test]
fn a_broker_down_at_start_is_a_clear_error() {
    let f = Fleet::new();
    let cap = f.capability("down", &capability("down"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("amqp://127.0.0.1:{port}/%2f");
    let mut cmd = f.command(&[
        "worker",
        "--amqp",
        &url,
        "--connect-timeout",
        "3",
        "--capability",
        cap.to_str().unwrap(),
        "--",
        "true",
    ]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let r = agents::run_within(cmd, Duration::from_secs(30));
    r.check(r.output.status.code() == Some(2), "exit 2");
    r.check(
        r.stderr()
            .contains("cannot connect to the broker at 127.0.0.1:"),
        "says why",
    );
    let mut cmd = f.command(&[
        "task",
        "submit",
        "--amqp",
        &url,
        "--connect-timeout",
        "3",
        "--capability",
        "down",
        "--intent",
        "x",
    ]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let r = agents::run_within(cmd, Duration::from_secs(30));
    r.check(r.output.status.code() == Some(2), "exit 2");
    r.check(
        r.stderr().contains("cannot connect to the broker"),
        "says why",
    );
}

#[test]
fn a_bad_capability_file_is_refused_before_connecting() {
    let f = Fleet::new();
    let misspelt = capability("bad").replace("risk_ceiling", "risk_cieling");
    let cap = f.capability("bad", &misspelt);
    let mut cmd = f.command(&[
        "worker",
        "--amqp",
        "amqp://127.0.0.1:1/%2f",
        "--capability",
        cap.to_str().unwrap(),
        "--",
        "true",
    ]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let r = agents::run_within(cmd, Duration::from_secs(30));
    r.check(r.output.status.code() == Some(2), "exit 2");
    r.check(
        r.stderr().contains("risk_cieling") && r.stderr().contains("bad.toml"),
        "names the field and file",
    );
}
