//! The caller, `ahp-wrap task submit`, on a real RabbitMQ (a private broker this test binary
//! starts): a task nobody offers is an error at once, and Ctrl-C aborts the task (the
//! agent's tree is gone, on disk and in /proc).

#[path = "support/agents.rs"]
#[allow(dead_code)] // what every agent suite shares; this suite uses a part
mod agents;
#[path = "support/fleet.rs"]
#[allow(dead_code)]
mod fleet;
#[path = "support/rabbitmq.rs"]
#[allow(dead_code)]
mod rabbitmq;

use std::process::Stdio;
use std::time::Duration;

use fleet::{read_pid, wait_file, wait_gone, Fleet};

const LIMIT: Duration = Duration::from_secs(90);

fn broker() -> Option<&'static rabbitmq::Broker> {
    if agents::skip("rabbitmq") {
        return None;
    }
    Some(rabbitmq::shared())
}

#[test]
fn a_task_nobody_offers_is_an_error_at_once() {
    let Some(broker) = broker() else { return };
    let f = Fleet::new();
    let r = f.submit(
        broker,
        &["--capability", "nobody-offers-this", "--intent", "x"],
        LIMIT,
    );
    r.check(r.code() == Some(2), "exit 2");
    r.check(
        r.run
            .stderr()
            .contains("no queue takes messages for \"nobody-offers-this\""),
        "says why",
    );
}

#[test]
fn ctrl_c_at_the_caller_aborts_the_task() {
    let Some(broker) = broker() else { return };
    let f = Fleet::new();
    let cap = f.capability(
        "interrupt",
        "name = \"interrupt\"\ndescription = \"d\"\nrisk_ceiling = \"R1\"\n",
    );
    let d = f.dir.path().display();
    let agent = f.script(
        "agent.sh",
        &format!("echo $$ > {d}/agent.pid\nsleep 60\necho finished > {d}/finished\n"),
    );
    let _w = f.worker(broker, &cap, "A", &[], &[agent.to_str().unwrap()]);
    let url = broker.url();
    let args = [
        "task",
        "submit",
        "--json",
        "--amqp",
        &url,
        "--timeout",
        "60",
    ];
    let mut cmd = f.command(&args);
    cmd.args(["--capability", "interrupt", "--intent", "x"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id() as i32;
    wait_file(&f.path("agent.pid"), Duration::from_secs(60));
    unsafe { libc::kill(pid, libc::SIGINT) };
    let r = fleet::finish(child, "task submit", LIMIT);
    r.check(
        r.output.status.code() == Some(123),
        "an aborted task exits 123",
    );
    r.check(
        r.stdout().contains("the caller pressed Ctrl-C"),
        "the result says why",
    );
    let agent_pid = read_pid(&f.path("agent.pid"));
    assert!(
        wait_gone(agent_pid, Duration::from_secs(15)),
        "the agent survived"
    );
    assert!(!f.path("finished").exists());
}
