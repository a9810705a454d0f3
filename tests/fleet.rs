//! HCP over a real RabbitMQ (a private broker this test binary starts, see
//! the testkit's `rabbitmq`): `ahp-wrap worker` processes take tasks from a capability's queue,
//! `ahp-wrap task submit` / `task abort` are the caller. The agent is a shell script; each
//! test proves its point on disk (markers, pids) and by the broker's state.

use ahp_wrap_testkit::agents;
use ahp_wrap_testkit::fleet;
use ahp_wrap_testkit::rabbitmq;

use std::collections::BTreeSet;
use std::time::Duration;

use fleet::{alive, read_pid, wait_file, wait_gone, Fleet};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(90);

fn capability(name: &str) -> String {
    format!(
        r#"
name = "{name}"
description = "The test agent"
risk_ceiling = "R2"
input_schema = {{ type = "object", properties = {{ repo = {{ type = "string" }} }} }}
[constraints]
max_data_class = "T2"
hazards = ["filesystem-write"]
"#
    )
}

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn two_workers_share_one_queue_and_each_task_runs_once() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability("once", &capability("once"));
    let log = f.path("runs.log");
    let agent = f.script(
        "agent.sh",
        &format!(
            "read -r intent\necho \"$HCP_TASK_ID $TAG\" >> {}\nsleep 0.3\necho \"did: $intent\"\n",
            log.display()
        ),
    );
    let agent = agent.to_str().unwrap();
    let _a = f.worker(broker, &cap, "A", &[], &[agent]);
    let _b = f.worker(broker, &cap, "B", &[], &[agent]);
    let submits: Vec<[String; 6]> = (0..8)
        .map(|i| {
            [
                "--capability",
                "once",
                "--intent",
                &format!("job {i}"),
                "--id",
                &format!("once-{i}"),
            ]
            .map(String::from)
        })
        .collect();
    let results: Vec<fleet::Submitted> = std::thread::scope(|s| {
        let handles: Vec<_> = submits
            .iter()
            .map(|args| {
                let f = &f;
                s.spawn(move || {
                    let a: Vec<&str> = args.iter().map(String::as_str).collect();
                    f.submit(broker, &a, LIMIT)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, r) in results.iter().enumerate() {
        r.check(r.code() == Some(0), "every task completes");
        assert_eq!(r.result()["status"], "complete");
        assert_eq!(r.result()["summary"], format!("did: job {i}"));
        let events: Vec<&str> = r
            .events()
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        r.check(
            events.first() == Some(&"accepted"),
            "the first event is accepted",
        );
    }
    // On disk: every task ran exactly once, and both workers took some.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "8 runs, not {}:\n{text}", lines.len());
    let ids: BTreeSet<&str> = lines.iter().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(ids.len(), 8, "a task ran twice:\n{text}");
    let tags: BTreeSet<&str> = lines.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(
        tags,
        BTreeSet::from(["A", "B"]),
        "both workers take tasks:\n{text}"
    );
    // The broker: nothing left in the queue, both workers still consuming.
    assert_eq!(broker.queue_counts("hcp.task.once"), (0, 2));
}

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn a_refused_task_never_starts_the_agent() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability("refuse", &capability("refuse"));
    let agent = f.script(
        "agent.sh",
        &format!(
            "touch {}/ran-$HCP_TASK_ID\necho ran\n",
            f.dir.path().display()
        ),
    );
    let _w = f.worker(broker, &cap, "A", &[], &[agent.to_str().unwrap()]);
    let cases: [(&[&str], &str); 5] = [
        (&["--risk", "R4"], "above the capability's ceiling R2"),
        (
            &["--data-class", "T3"],
            "data class T3 is above the capability's limit T2",
        ),
        (
            &["--hazard", "explosives"],
            "hazard category \"explosives\"",
        ),
        (&["--input", "[1]"], "the input must be a JSON object"),
        (
            &["--input", r#"{"repo": 5}"#],
            "$.repo is not of type string",
        ),
    ];
    for (i, (extra, why)) in cases.iter().enumerate() {
        let id = format!("refused-{i}");
        let mut args = vec!["--capability", "refuse", "--intent", "do it", "--id", &id];
        args.extend_from_slice(extra);
        let r = f.submit(broker, &args, LIMIT);
        r.check(r.code() == Some(121), "a refused task exits 121");
        let result = r.result();
        assert_eq!(result["status"], "refused", "{result}");
        assert!(result["reason"].as_str().unwrap().contains(why), "{result}");
        assert_eq!(result["exit_code"], Value::Null);
        assert!(r.events().is_empty(), "a refused task has no events");
        assert!(
            !f.path(&format!("ran-{id}")).exists(),
            "the agent ran for {id}"
        );
    }
    // A message that is no task is answered (refused, with why) and dropped, never run.
    let reply = fleet::raw_task(broker, "refuse", b"{\"type\":\"task\", not json", "raw-1");
    assert_eq!(reply["status"], "refused", "{reply}");
    assert!(
        reply["reason"]
            .as_str()
            .unwrap()
            .contains("not an HCP task"),
        "{reply}"
    );
    // The same worker runs an acceptable task: the marker is what a run leaves.
    let ok = f.submit(
        broker,
        &["--capability", "refuse", "--intent", "x", "--id", "fine-1"],
        LIMIT,
    );
    ok.check(ok.code() == Some(0), "an acceptable task runs");
    assert!(f.path("ran-fine-1").exists());
    let ran: Vec<_> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("ran-"))
        .collect();
    assert_eq!(ran.len(), 1, "only the acceptable task ran: {ran:?}");
    assert_eq!(broker.queue_counts("hcp.task.refuse"), (0, 1));
}

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn a_worker_killed_mid_task_leaves_it_to_another() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability("redeliver", &capability("redeliver"));
    let d = f.dir.path().display();
    let agent = f.script(
        "agent.sh",
        &format!(
            "echo \"$(readlink /proc/self/ns/pid) $$\" > {d}/agent-$TAG.pid\necho started > {d}/started-$TAG\nsleep 3\n\
             echo \"$HCP_TASK_ID $TAG\" >> {d}/done.log\necho \"finished by $TAG\"\n"
        ),
    );
    let agent = agent.to_str().unwrap();
    let mut a = f.worker(broker, &cap, "A", &[], &[agent]);
    let r = std::thread::scope(|s| {
        let submit = s.spawn(|| {
            f.submit(
                broker,
                &[
                    "--capability",
                    "redeliver",
                    "--intent",
                    "x",
                    "--id",
                    "moved-1",
                ],
                LIMIT,
            )
        });
        wait_file(&f.path("started-A"), Duration::from_secs(60));
        let b = f.worker(broker, &cap, "B", &[], &[agent]);
        a.kill();
        let r = submit.join().unwrap();
        drop(b);
        r
    });
    r.check(r.code() == Some(0), "the other worker finishes the task");
    let result = r.result();
    assert_eq!(result["summary"], "finished by B", "{result}");
    assert_eq!(result["redelivered"], true, "{result}");
    // A's run died with A: its agent is gone and never finished.
    let a_agent = read_pid(&f.path("agent-A.pid"));
    assert!(
        wait_gone(a_agent, Duration::from_secs(15)),
        "A's agent {a_agent} outlived A"
    );
    std::thread::sleep(Duration::from_secs(1));
    let done = std::fs::read_to_string(f.path("done.log")).unwrap();
    assert_eq!(done, "moved-1 B\n", "the task finished exactly once, by B");
    assert_eq!(broker.queue_counts("hcp.task.redeliver").0, 0);
}

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn an_abort_stops_the_agents_whole_tree() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability("abort", &capability("abort"));
    let d = f.dir.path().display();
    // It ignores SIGTERM, so the stop must go on to SIGKILL.
    let agent = f.script(
        "agent.sh",
        &format!(
            "trap '' TERM\necho \"$(readlink /proc/self/ns/pid) $$\" > {d}/agent.pid\nsleep 60 &\necho \"$(readlink /proc/self/ns/pid) $!\" > {d}/sleep.pid\nwait\n\
             echo finished > {d}/finished\n"
        ),
    );
    let _w = f.worker(broker, &cap, "A", &[], &[agent.to_str().unwrap()]);
    let r = std::thread::scope(|s| {
        let submit = s.spawn(|| {
            f.submit(
                broker,
                &["--capability", "abort", "--intent", "x", "--id", "stop-me"],
                LIMIT,
            )
        });
        wait_file(&f.path("sleep.pid"), Duration::from_secs(60));
        // Found from here while they run (the pids the tree wrote are its namespace's).
        for pid_file in ["agent.pid", "sleep.pid"] {
            assert!(
                alive(read_pid(&f.path(pid_file))),
                "{pid_file} not found running"
            );
        }
        let mut abort = f.command(&[
            "task",
            "abort",
            "--amqp",
            &broker.url(),
            "stop-me",
            "--reason",
            "the test says stop",
        ]);
        abort
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let a = agents::run_within(abort, Duration::from_secs(30));
        a.check(a.output.status.success(), "task abort succeeds");
        submit.join().unwrap()
    });
    r.check(r.code() == Some(123), "an aborted task exits 123");
    let result = r.result();
    assert_eq!(result["status"], "aborted", "{result}");
    assert!(
        result["reason"]
            .as_str()
            .unwrap()
            .contains("the test says stop"),
        "{result}"
    );
    for pid_file in ["agent.pid", "sleep.pid"] {
        let pid = read_pid(&f.path(pid_file));
        assert!(
            wait_gone(pid, Duration::from_secs(15)),
            "{pid_file} {pid} survived the abort"
        );
    }
    assert!(
        !f.path("finished").exists(),
        "the agent went on after the abort"
    );
    assert!(!alive(read_pid(&f.path("agent.pid"))));
}

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn the_runs_ahp_events_reach_the_caller() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability("events", &capability("events"));
    let victim = f.path("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    // `rm` goes through a PATH shim; the default policy blocks deleting a tree outside
    // the workspace.
    let agent = f.script(
        "agent.sh",
        &format!("rm -r {}\necho \"rm said $?\"\n", victim.display()),
    );
    let _w = f.worker(broker, &cap, "A", &[], &[agent.to_str().unwrap()]);
    let r = f.submit(broker, &["--capability", "events", "--intent", "x"], LIMIT);
    r.check(r.code() == Some(0), "the agent ends normally");
    assert!(victim.join("inner").exists(), "the blocked rm ran");
    let events = r.events();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "seq counts up: {seqs:?}"
    );
    let blocked: Vec<_> = events.iter().filter(|e| e["event"] == "warning").collect();
    r.check(blocked.len() == 1, "one warning: the blocked rm");
    let ahp = &blocked[0]["ahp"];
    assert_eq!(ahp["event_type"], "pre_action", "{ahp}");
    assert_eq!(ahp["decision"], "block", "{ahp}");
    assert!(
        ahp["reason"]
            .as_str()
            .unwrap()
            .contains("recursive deletion"),
        "{ahp}"
    );
    let types: Vec<&str> = events
        .iter()
        .filter_map(|e| e["ahp"]["event_type"].as_str())
        .collect();
    assert_eq!(types.first(), Some(&"session_start"), "{types:?}");
    assert_eq!(types.last(), Some(&"session_end"), "{types:?}");
    assert!(
        r.result()["summary"]
            .as_str()
            .unwrap()
            .starts_with("rm said "),
        "{}",
        r.result()
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn a_frozen_worker_is_dropped_by_heartbeats_and_its_task_moves_on() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability("frozen", &capability("frozen"));
    let d = f.dir.path().display();
    let agent = f.script(
        "agent.sh",
        &format!("echo started > {d}/started-$TAG\nsleep 2\necho \"finished by $TAG\"\n"),
    );
    let agent = agent.to_str().unwrap();
    let beat = ["--amqp-heartbeat", "1"];
    let a = f.worker(broker, &cap, "A", &beat, &[agent]);
    let r = std::thread::scope(|s| {
        let submit =
            s.spawn(|| f.submit(broker, &["--capability", "frozen", "--intent", "x"], LIMIT));
        wait_file(&f.path("started-A"), Duration::from_secs(60));
        // A stops answering (its socket stays open): only missed heartbeats tell the broker.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(a.child.id() as i32),
            nix::sys::signal::Signal::SIGSTOP,
        );
        let _b = f.worker(broker, &cap, "B", &beat, &[agent]);
        let r = submit.join().unwrap();
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(a.child.id() as i32),
            nix::sys::signal::Signal::SIGCONT,
        );
        r
    });
    r.check(r.code() == Some(0), "B finishes the task");
    assert_eq!(r.result()["summary"], "finished by B", "{}", r.result());
    assert_eq!(r.result()["redelivered"], true);
    assert!(f.path("started-B").exists());
    // A, thawed, finds its connection gone and reconnects.
    a.wait_log("reconnected", Duration::from_secs(60));
}

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn a_stopping_worker_gives_its_task_back() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability("handback", &capability("handback"));
    let d = f.dir.path().display();
    let agent = f.script(
        "agent.sh",
        &format!("echo \"$(readlink /proc/self/ns/pid) $$\" > {d}/agent-$TAG.pid\nsleep 2\necho \"finished by $TAG\"\n"),
    );
    let agent = agent.to_str().unwrap();
    let mut a = f.worker(broker, &cap, "A", &[], &[agent]);
    let r = std::thread::scope(|s| {
        let submit = s.spawn(|| {
            f.submit(
                broker,
                &["--capability", "handback", "--intent", "x"],
                LIMIT,
            )
        });
        wait_file(&f.path("agent-A.pid"), Duration::from_secs(60));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(a.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let status = a.child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{}", a.log_text());
        // Given back at once (nacked with requeue), not when a connection times out.
        assert_eq!(broker.queue_counts("hcp.task.handback"), (1, 0));
        let _b = f.worker(broker, &cap, "B", &[], &[agent]);
        submit.join().unwrap()
    });
    r.check(r.code() == Some(0), "B finishes the task");
    assert_eq!(r.result()["summary"], "finished by B");
    let a_agent = read_pid(&f.path("agent-A.pid"));
    assert!(
        wait_gone(a_agent, Duration::from_secs(15)),
        "A's agent outlived A"
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "rabbitmq",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the rabbitmq setup"
)]
fn the_workers_policy_can_refuse_every_intent() {
    let broker = rabbitmq::shared();
    let f = Fleet::new();
    let cap = f.capability("frozen-policy", &capability("frozen-policy"));
    let policy = f.path("freeze.toml");
    std::fs::write(
        &policy,
        "version = 1\n[[rule]]\nid = \"freeze\"\ndecision = \"block\"\n\
         reason = \"change freeze until Monday\"\nevents = [\"pre_prompt\"]\n",
    )
    .unwrap();
    let agent = f.script(
        "agent.sh",
        &format!("touch {}/ran\n", f.dir.path().display()),
    );
    let args = ["--policy", policy.to_str().unwrap()];
    let _w = f.worker(broker, &cap, "A", &args, &[agent.to_str().unwrap()]);
    let r = f.submit(
        broker,
        &["--capability", "frozen-policy", "--intent", "x"],
        LIMIT,
    );
    r.check(r.code() == Some(121), "refused");
    let why = r.result()["reason"].as_str().unwrap().to_owned();
    assert!(
        why.contains("change freeze until Monday") && why.contains("freeze"),
        "{why}"
    );
    assert!(!f.path("ran").exists(), "the agent ran");
}
