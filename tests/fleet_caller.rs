//! How a task is stopped or refused by the caller's side and the capability's limits, on a
//! real RabbitMQ (a private broker this test binary starts): a task nobody offers is an
//! error at once, Ctrl-C at `task submit` aborts the task, and a task past the capability's
//! time limit is stopped (each time the agent is gone, checked in /proc and on disk).

use ahp_wrap_testkit::fleet;
use ahp_wrap_testkit::rabbitmq;

use std::process::Stdio;
use std::time::Duration;

use ahp_wrap_testkit::common::alive;
use fleet::{read_pid, wait_file, wait_gone, Fleet};

const LIMIT: Duration = Duration::from_secs(90);

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn a_task_nobody_offers_is_an_error_at_once() {
    let broker = rabbitmq::shared();
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
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn ctrl_c_at_the_caller_aborts_the_task() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability(
        "interrupt",
        "name = \"interrupt\"\ndescription = \"d\"\nrisk_ceiling = \"R1\"\n",
    );
    let d = f.dir.path().display();
    let agent = f.script(
        "agent.sh",
        &format!("echo \"$(readlink /proc/self/ns/pid) $$\" > {d}/agent.pid\nsleep 60\necho finished > {d}/finished\n"),
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
    assert!(
        alive(read_pid(&f.path("agent.pid"))),
        "the agent is found running"
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGINT,
    );
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

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn a_task_past_the_capabilitys_time_limit_is_stopped() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability(
        "limited",
        "name = \"limited\"\ndescription = \"d\"\nrisk_ceiling = \"R1\"\n\
         [constraints]\nmax_duration_secs = 1\n",
    );
    let d = f.dir.path().display();
    let agent = f.script(
        "agent.sh",
        &format!("echo \"$(readlink /proc/self/ns/pid) $$\" > {d}/agent.pid\nsleep 60\necho finished > {d}/finished\n"),
    );
    let _w = f.worker(broker, &cap, "A", &[], &[agent.to_str().unwrap()]);
    let r = f.submit(broker, &["--capability", "limited", "--intent", "x"], LIMIT);
    r.check(r.code() == Some(123), "stopped: aborted");
    let reason = r.result()["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains("time limit of 1 s"), "{reason}");
    let agent_pid = read_pid(&f.path("agent.pid"));
    assert!(
        wait_gone(agent_pid, Duration::from_secs(15)),
        "the agent survived"
    );
    assert!(!f.path("finished").exists());
}
