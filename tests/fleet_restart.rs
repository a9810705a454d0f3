//! A worker survives a restart of its broker (a private RabbitMQ this test starts and
//! restarts): it reconnects with backoff, the task that was running when the broker went
//! away (durable queue, persistent message) is given out again and finished once, and new
//! tasks are taken by the same worker.

use ahp_wrap_testkit::fleet;
use ahp_wrap_testkit::rabbitmq;

use std::time::Duration;

use fleet::{wait_file, Fleet};

const LIMIT: Duration = Duration::from_secs(90);

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn a_broker_restart_is_survived() {
    let broker = rabbitmq::Broker::start();
    let f = Fleet::new();
    let cap = f.capability(
        "restart",
        "name = \"restart\"\ndescription = \"d\"\nrisk_ceiling = \"R1\"\n",
    );
    let d = f.dir.path().display();
    let agent = f.script(
        "agent.sh",
        &format!(
            "read -r intent\n[ \"$intent\" = slow ] || {{ echo quick; exit 0; }}\n\
             echo \"$HCP_TASK_ID\" >> {d}/started.log\nsleep 4\necho \"$HCP_TASK_ID\" >> {d}/done.log\n"
        ),
    );
    let w = f.worker(&broker, &cap, "A", &[], &[agent.to_str().unwrap()]);
    let first = f.submit(
        &broker,
        &["--capability", "restart", "--intent", "quick"],
        LIMIT,
    );
    first.check(first.code() == Some(0), "the first task completes");

    // The broker goes away while a task runs: its caller loses its reply queue (exclusive),
    // but the task itself is durable.
    std::thread::scope(|s| {
        let slow = s.spawn(|| {
            f.submit(
                &broker,
                &[
                    "--capability",
                    "restart",
                    "--intent",
                    "slow",
                    "--id",
                    "slow-1",
                ],
                LIMIT,
            )
        });
        wait_file(&f.path("started.log"), Duration::from_secs(60));
        broker.restart();
        let r = slow.join().unwrap();
        r.check(r.code() != Some(0), "the caller lost its broker: no result");
    });
    w.wait_log("reconnected", Duration::from_secs(60));
    wait_file(&f.path("done.log"), Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(1));
    let started = std::fs::read_to_string(f.path("started.log")).unwrap();
    let done = std::fs::read_to_string(f.path("done.log")).unwrap();
    assert_eq!(
        started, "slow-1\nslow-1\n",
        "stopped at the restart, run again after it"
    );
    assert_eq!(done, "slow-1\n", "finished exactly once:\n{}", w.log_text());

    let after = f.submit(
        &broker,
        &["--capability", "restart", "--intent", "quick"],
        LIMIT,
    );
    after.check(
        after.code() == Some(0),
        "a task after the restart completes",
    );
    assert_eq!(after.result()["summary"], "quick");
    assert_eq!(
        after.result()["worker"],
        first.result()["worker"],
        "the same worker"
    );
    assert_eq!(broker.queue_counts("hcp.task.restart"), (0, 1));
}
