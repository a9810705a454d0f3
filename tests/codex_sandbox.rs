//! The real Codex CLI in its own sandbox, inside the floor: `codex exec` with `--sandbox
//! read-only`, `--sandbox workspace-write` and `--approve-for-me` (what became of
//! `--full-auto`, which Codex 0.169 no longer takes) runs the model's command under the
//! wrapper as it does without it (before, every command failed with `bwrap: setting up uid
//! map: Permission denied`: Landlock refused the nested user namespace's id maps, and any
//! mount). And Codex's sandbox still holds inside ours: what ours allows and Codex's
//! refuses stays refused (a file written in `/tmp`, which our floor lets the tree write, in
//! read-only mode; a connection to a port of this machine's loopback the run names, which
//! ours carries, from `workspace-write`, whose network is off), as it is without ours.

use ahp_wrap_testkit::codex::{codex_bin, run, shell, FakeApi, Sandbox, World};

use serde_json::json;

const PROMPT: &str = "please do the task";

/// The model's command, run by Codex in `sandbox`, wrapped (with `extra` wrapper arguments)
/// or not: the command's output as the model got it.
fn ran_with(
    world: &World,
    sandbox: Sandbox,
    (wrapped, extra): (bool, &[&str]),
    command: &str,
) -> String {
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([shell(command), {"text": "All done."}]),
    );
    let wrapper: Vec<&str> = ["--summary", "never"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let cmd = world.command_in(sandbox, &api, wrapped.then_some(&wrapper[..]), &[], PROMPT);
    let r = run(cmd);
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    let outputs = api.tool_outputs();
    r.check(outputs.len() == 1, &format!("one tool result: {outputs:?}"));
    outputs[0].clone()
}

fn ran(world: &World, sandbox: Sandbox, wrapped: bool, command: &str) -> String {
    ran_with(world, sandbox, (wrapped, &[]), command)
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn codex_runs_commands_in_each_of_its_sandboxes_on_the_floor_as_without_it() {
    let _ = codex_bin();
    // And without Codex's sandbox, the one case of the suites that bypasses it.
    for sandbox in [
        Sandbox::ReadOnly,
        Sandbox::WorkspaceWrite,
        Sandbox::ApproveForMe,
        Sandbox::Bypassed,
    ] {
        for wrapped in [false, true] {
            let world = World::new();
            let out = ran(&world, sandbox, wrapped, "echo sandboxed-$((6 * 7))");
            assert!(
                out.contains("sandboxed-42") && !out.contains("uid map"),
                "{sandbox:?}, wrapped {wrapped}: {out}"
            );
            if sandbox != Sandbox::ReadOnly {
                let world = World::new();
                let out = ran(
                    &world,
                    sandbox,
                    wrapped,
                    "echo written > in-workspace.txt && echo ok",
                );
                assert!(
                    world.ws().join("in-workspace.txt").exists(),
                    "{sandbox:?}, wrapped {wrapped}: {out}"
                );
            }
        }
    }
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn codexs_sandbox_still_refuses_what_ours_allows() {
    // Writing in /tmp: our floor lets the tree; Codex's read-only sandbox does not.
    for wrapped in [false, true] {
        let world = World::new();
        let target = format!("/tmp/ahp-codex-ro-{}-{wrapped}", std::process::id());
        let _ = std::fs::remove_file(&target);
        let out = ran(
            &world,
            Sandbox::ReadOnly,
            wrapped,
            &format!("echo x > {target}; echo rc=$?"),
        );
        assert!(
            !std::path::Path::new(&target).exists(),
            "wrapped {wrapped}: Codex's read-only sandbox let the write through: {out}"
        );
    }
    // A server on this machine's loopback whose port the run names (`--loopback-port`: our
    // floor carries it): Codex's workspace-write sandbox has no network.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    server.set_nonblocking(true).unwrap();
    for wrapped in [false, true] {
        let world = World::new();
        let port_arg = port.to_string();
        let out = ran_with(
            &world,
            Sandbox::WorkspaceWrite,
            (wrapped, &["--loopback-port", &port_arg]),
            &format!("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\"; echo done"),
        );
        assert!(
            server.accept().is_err(),
            "wrapped {wrapped}: the server was reached: {out}"
        );
        assert!(!out.contains("connected"), "wrapped {wrapped}: {out}");
    }
    // Ours alone (Codex's sandbox bypassed) carries that connection and lets the tree write
    // in /tmp: what Codex's refused above, ours allows.
    let world = World::new();
    let port_arg = port.to_string();
    let target = format!("/tmp/ahp-codex-ours-{}", std::process::id());
    let out = ran_with(
        &world,
        Sandbox::Bypassed,
        (true, &["--loopback-port", &port_arg]),
        &format!("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\"; echo x > {target}"),
    );
    assert!(
        out.contains("connected"),
        "ours refused the named port: {out}"
    );
    assert!(
        std::path::Path::new(&target).exists(),
        "ours refused /tmp: {out}"
    );
    let _ = std::fs::remove_file(&target);
}
