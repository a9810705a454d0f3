//! The real Claude Code CLI with its own sandbox turned on (`{"sandbox":{"enabled":true}}`,
//! a setting its makers recommend), inside the floor. Its Bash calls run under bubblewrap in
//! a user and network namespace of their own, their traffic through Claude Code's proxy
//! (outside that namespace, reached through socat and a Unix socket): under the wrapper as
//! without it (before, every call failed with `bwrap: setting up uid map: Permission
//! denied`). And each sandbox still holds inside the other: a file outside the working
//! directory that ours lets the tree write (the temp directory) stays unwritten, a host its
//! rules do not name stays unreached although ours carries it, and what ours refuses (a port
//! the run does not name) stays refused whatever its rules say. (Commands ask for Claude Code's
//! proxy by hand, `--noproxy ''`: its sandbox leaves `localhost` out of the proxy, and its own
//! network namespace has nothing there.)

use ahp_wrap_testkit::claude_code as support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use support::{bash, run, FakeApi, World};

/// A server on this machine's loopback answering every request with `body`; counts them.
struct Local {
    port: u16,
    served: Arc<AtomicUsize>,
}

impl Local {
    fn start(body: &'static str) -> Local {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = Arc::new(AtomicUsize::new(0));
        let count = served.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Local { port, served }
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

/// The servers of a test: `named` by both sandboxes' rules, `ours` by the run's only
/// (`--loopback-port`), `theirs` by Claude Code's only (`allowedDomains`).
struct Servers {
    named: Local,
    ours: Local,
    theirs: Local,
}

/// What one Bash call saw, in a fresh world with Claude Code's sandbox `enabled` or not,
/// wrapped or not.
struct Seen {
    output: String,
    in_workspace: bool,
    in_temp: bool,
    stderr: String,
}

fn one_call(enabled: bool, wrapped: bool, servers: &Servers) -> Seen {
    let Servers {
        named,
        ours,
        theirs,
    } = servers;
    let world = World::new();
    let settings = json!({"sandbox": {
        "enabled": enabled,
        "network": {"allowedDomains": [
            format!("localhost:{}", named.port),
            format!("localhost:{}", theirs.port),
        ]},
    }});
    std::fs::write(
        world.config_dir().join("settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let temp = world.dir.path().join("outside.txt");
    let command = format!(
        "echo sandboxed-$((6 * 7)); echo hi > in-workspace.txt; echo hi > {temp}; \
         curl --noproxy '' -sS -m 10 http://localhost:{named}/; echo; \
         curl --noproxy '' -sS -m 10 http://localhost:{ours}/; echo; \
         curl --noproxy '' -sS -m 10 http://localhost:{theirs}/; echo; echo end",
        temp = temp.display(),
        named = named.port,
        ours = ours.port,
        theirs = theirs.port,
    );
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&command), {"text": "Done."}]),
    );
    let ports = [
        "--loopback-port".to_string(),
        named.port.to_string(),
        "--loopback-port".to_string(),
        ours.port.to_string(),
        "--summary".to_string(),
        "always".to_string(),
    ];
    let ports: Vec<&str> = ports.iter().map(String::as_str).collect();
    let r = run(world.command(
        &api,
        wrapped.then_some(&ports[..]),
        &["-p", "run the step", "--allowedTools", "Bash"],
    ));
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    let results = api.tool_results();
    r.check(results.len() == 1, "one tool result reaches the model");
    let output = results[0]["content"].to_string();
    Seen {
        output,
        in_workspace: world.ws().join("in-workspace.txt").exists(),
        in_temp: temp.exists(),
        stderr: String::from_utf8_lossy(&r.output.stderr).into_owned(),
    }
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
#[cfg_attr(
    skip_e2e = "bubblewrap",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the bubblewrap setup"
)]
fn claude_codes_sandbox_runs_bash_on_the_floor_as_without_it_and_both_hold() {
    let _ = support::claude_bin();
    let servers = Servers {
        named: Local::start("named-server-answered"),
        ours: Local::start("ours-only-answered"),
        theirs: Local::start("theirs-only-answered"),
    };
    for wrapped in [false, true] {
        let theirs_before = servers.theirs.served();
        let seen = one_call(true, wrapped, &servers);
        let context = format!("wrapped {wrapped}: {}\n{}", seen.output, seen.stderr);
        assert!(
            seen.output.contains("sandboxed-42") && !seen.output.contains("uid map"),
            "the command did not run in Claude Code's sandbox: {context}"
        );
        assert!(seen.output.contains("end"), "{context}");
        assert!(
            seen.in_workspace,
            "the workspace was not writable: {context}"
        );
        // Claude Code's sandbox: the working directory only.
        assert!(
            !seen.in_temp,
            "Claude Code's sandbox let a write outside its directory: {context}"
        );
        // Its proxy, behind ours: the host both name is reached, the one its rules do not
        // name is not.
        assert!(
            seen.output.contains("named-server-answered"),
            "the host both allow was not reached through Claude Code's proxy: {context}"
        );
        assert!(
            !seen.output.contains("ours-only-answered"),
            "a host Claude Code's rules do not name was reached: {context}"
        );
        // What its rules allow and ours does not: reached only without ours.
        let theirs_reached = servers.theirs.served() > theirs_before;
        assert_eq!(
            theirs_reached, !wrapped,
            "the port only Claude Code's rules name: {context}"
        );
        if wrapped {
            assert!(
                !seen
                    .stderr
                    .contains("a Unix socket no process of the tree bound"),
                "the floor refused Claude Code's proxy socket: {context}"
            );
        }
    }
    assert_eq!(
        servers.ours.served(),
        0,
        "Claude Code's proxy let through a host it does not name"
    );

    // Without Claude Code's sandbox, on the floor: what ours allows is written and
    // reached, and what ours refuses stays refused.
    let seen = one_call(false, true, &servers);
    let context = format!("{}\n{}", seen.output, seen.stderr);
    assert!(
        seen.in_temp,
        "the floor lets the tree write its temp directory: {context}"
    );
    assert!(
        seen.output.contains("ours-only-answered"),
        "the floor carries the ports the run names: {context}"
    );
    assert!(
        !seen.output.contains("theirs-only-answered"),
        "the floor let through a port the run does not name: {context}"
    );
}
