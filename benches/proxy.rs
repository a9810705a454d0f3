//! The MCP stream proxy's figures (`ahp-wrap mcp -- <server>`), each against the same
//! server without the proxy, interleaved run by run:
//!
//! - pass-through: 256 MiB of non-intercepted JSON-RPC notifications (1 KiB lines) written
//!   into the proxy in front of `cat` (which sends them back, so every line crosses the
//!   proxy twice) and read back, first byte out to last; then the same with answers of
//!   64 KiB (large tool results), which the proxy reads for their id;
//! - an intercepted call: `tools/call` one at a time to a server that answers at once (this
//!   binary's responder role), the embedded policy deciding each, p50 and p95;
//! - memory: the proxy's peak RSS (VmHWM) after 1 GiB streamed through it.
//!
//! Run through `bench/run.sh` (with `--write`, the table goes into BENCHMARKS.md); alone:
//! `cargo bench --bench proxy [-- --quick]`. Under `cargo test` it does nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench or test may stop at the first failure

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

const AHP_WRAP: &str = env!("CARGO_BIN_EXE_ahp-wrap");
const BEGIN: &str = "<!-- bench:proxy:begin -->";
const END: &str = "<!-- bench:proxy:end -->";
/// argv[1] that turns this binary into an MCP server answering every request at once.
const ROLE_RESPONDER: &str = "__ahp_bench_mcp_responder";
/// argv[1] that turns this binary into a relay: it runs the rest of its arguments as a
/// child and copies bytes both ways without looking at them (the floor of any process
/// placed in a stream).
const ROLE_RELAY: &str = "__ahp_bench_relay";
/// The same relay, asking for the 1 MiB pipe capacity the proxy asks for on each pipe it
/// reads or writes (fewer wake-ups per byte): the same topology and the same pipes.
const ROLE_WIDE_RELAY: &str = "__ahp_bench_wide_relay";

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some(ROLE_RESPONDER) => return responder(),
        Some(ROLE_RELAY) => return relay(false),
        Some(ROLE_WIDE_RELAY) => return relay(true),
        _ => {}
    }
    if !support::benchmarking() {
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let write = args
        .iter()
        .position(|a| a == "--write")
        .and_then(|i| args.get(i + 1).cloned());
    let mut rows = Vec::new();
    eprintln!("proxy pass-through…");
    rows.extend(passthrough(if quick { 3 } else { 7 }));
    rows.push(answers(if quick { 3 } else { 7 }));
    eprintln!("proxy intercepted calls…");
    rows.extend(intercepted(if quick { 200 } else { 1000 }));
    eprintln!("proxy memory over 1 GiB…");
    rows.push(memory(if quick { 256 << 20 } else { 1 << 30 }));
    let mut table = String::from(
        "| Figure | ahp-wrap mcp | Baseline (same run) | Overhead | Target | Meets |\n|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        table.push_str(r);
        table.push('\n');
    }
    let machine = support::table::machine(env!("CARGO_MANIFEST_DIR"));
    println!("\n{machine}\n\n{table}");
    if let Some(path) = write {
        let body = format!("{machine}\n\n{table}");
        support::table::write_block(std::path::Path::new(&path), BEGIN, END, &body);
    }
}

/// A server that answers every request with a small tool result, and ignores the rest.
fn responder() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if let Some(id) = msg.get("id") {
            let answer = serde_json::json!({"jsonrpc": "2.0", "id": id,
                "result": {"content": [{"type": "text", "text": "ok"}]}});
            let _ = writeln!(out, "{answer}");
            let _ = out.flush();
        }
    }
}

/// Runs argv[2..] and copies our stdin to its stdin and its stdout to our stdout, 64 KiB at
/// a time, until each side ends; with `wide`, on 1 MiB pipes.
fn relay(wide: bool) {
    let argv: Vec<String> = std::env::args().skip(2).collect();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut to_child = child.stdin.take().expect("piped");
    let mut from_child = child.stdout.take().expect("piped");
    if wide {
        use std::os::fd::{AsRawFd, RawFd};
        let grow = |fd: RawFd| {
            nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20))
                .expect("a 1 MiB pipe")
        };
        for fd in [0, 1, to_child.as_raw_fd(), from_child.as_raw_fd()] {
            grow(fd);
        }
    }
    let up = std::thread::spawn(move || copy(&mut std::io::stdin().lock(), &mut to_child));
    copy(&mut from_child, &mut std::io::stdout().lock());
    let _ = up.join();
    let _ = child.wait();
}

fn copy(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) if to.write_all(&buf[..n]).is_err() => return,
            Ok(_) => {}
        }
    }
}

fn relayed(role: &str, server: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("this bench"));
    cmd.arg(role).args(server);
    cmd
}

fn proxied(server: &[&str]) -> Command {
    let mut cmd = Command::new(AHP_WRAP);
    cmd.args(["mcp", "--name", "bench", "--summary", "never", "--"])
        .args(server);
    cmd
}

fn spawn(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn")
}

/// One notification line of about 1 KiB.
fn notification() -> Vec<u8> {
    let data = "a".repeat(1000);
    let mut line =
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"{data}"}}}}"#)
            .into_bytes();
    line.push(b'\n');
    line
}

/// One answer line of about 64 KiB: a large tool result. Its id answers no request (`cat`
/// sends it back), which the proxy passes on as it passes a late answer.
fn answer() -> Vec<u8> {
    let text = "a".repeat(64_000);
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
    )
    .into_bytes();
    line.push(b'\n');
    line
}

/// Streams `size` bytes of `frame`s through `child` and back; returns MB/s (first byte out
/// to last) and, before closing its stdin, the VmHWM of the child in KiB.
fn stream(mut child: Child, size: usize, frame: Vec<u8>) -> (f64, u64) {
    let count = size / frame.len();
    let total = count * frame.len();
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = child.stdout.take().expect("piped");
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let chunk = frame.repeat(64);
        let mut left = count;
        while left > 0 {
            let n = left.min(64);
            stdin.write_all(&chunk[..n * frame.len()]).expect("write");
            left -= n;
        }
        // Keep stdin open until the reader has everything back (then measure memory).
        let _ = done_rx.recv();
        drop(stdin);
    });
    let mut buf = vec![0u8; 256 << 10];
    let (mut got, mut first, mut last) = (0, None, Instant::now());
    while got < total {
        let n = stdout.read(&mut buf).expect("read");
        assert!(n > 0, "the stream ended after {got} of {total} bytes");
        if first.is_none() {
            first = Some((Instant::now(), n));
        }
        got += n;
        last = Instant::now();
    }
    let hwm = vm_hwm(child.id());
    let _ = done_tx.send(());
    writer.join().expect("writer");
    let _ = child.wait();
    let (t0, n0) = first.expect("some output");
    ((total - n0) as f64 / (last - t0).as_secs_f64() / 1e6, hwm)
}

fn vm_hwm(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// The pass-through against three baselines, interleaved: the bare pipe to `cat` (no
/// process in between), a relay that copies without looking (the same topology as the
/// proxy), and that relay on the proxy's 1 MiB pipes (the same topology and pipes).
fn passthrough(n: usize) -> Vec<String> {
    let (mut ours, mut bare, mut relay, mut wide) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let through = |cmd| stream(spawn(cmd), 256 << 20, notification()).0;
        bare.push(through(command(&["cat"])));
        relay.push(through(relayed(ROLE_RELAY, &["cat"])));
        wide.push(through(relayed(ROLE_WIDE_RELAY, &["cat"])));
        ours.push(through(proxied(&["cat"])));
    }
    let w = support::median(&mut ours);
    let what =
        format!("256 MiB of 1 KiB notifications, there and back through `cat`, median of {n}");
    [
        ("no process in between", "`cat`", &mut bare),
        ("a relay that copies without looking", "relay", &mut relay),
        (
            "the same relay on 1 MiB pipes, as the proxy's",
            "relay, 1 MiB pipes,",
            &mut wide,
        ),
    ]
    .into_iter()
    .map(|(against, name, runs)| {
        let base = support::median(runs);
        let meets = if w >= 0.95 * base { "yes" } else { "**no**" };
        format!(
            "| Pass-through of non-intercepted frames ({what}), against {against} | {w:.0} MB/s | {name} {base:.0} MB/s | {:.0} % | ≥ 95 % | {meets} |",
            100.0 * w / base
        )
    })
    .collect()
}

/// Large answers, which the proxy reads for their id (the light look) before passing them
/// on, against the relay on the same 1 MiB pipes. No target: answers come one per request,
/// so a stream of them is a worst case, shown to keep the parsed path in sight.
fn answers(n: usize) -> String {
    let (mut ours, mut wide) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let through = |cmd| stream(spawn(cmd), 256 << 20, answer()).0;
        wide.push(through(relayed(ROLE_WIDE_RELAY, &["cat"])));
        ours.push(through(proxied(&["cat"])));
    }
    let (w, base) = (support::median(&mut ours), support::median(&mut wide));
    format!(
        "| Pass-through of answers, each read for its id (256 MiB of 64 KiB tool results, there and back through `cat`, median of {n}), against the relay on 1 MiB pipes | {w:.0} MB/s | relay, 1 MiB pipes, {base:.0} MB/s | {:.0} % | — | — |",
        100.0 * w / base
    )
}

fn command(argv: &[&str]) -> Command {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

/// `calls` sequential `tools/call` round trips; nanoseconds each.
fn round_trips(child: &mut Child, calls: usize) -> Vec<u64> {
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut times = Vec::with_capacity(calls);
    let mut line = String::new();
    for i in 0..calls {
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"src/lib.rs"}}}}}}"#
        );
        let t = Instant::now();
        writeln!(stdin, "{call}").expect("write");
        stdin.flush().expect("flush");
        line.clear();
        stdout.read_line(&mut line).expect("read");
        times.push(t.elapsed().as_nanos() as u64);
        assert!(line.contains("\"result\""), "not a result: {line}");
    }
    drop(stdin);
    let _ = child.wait();
    times
}

fn intercepted(calls: usize) -> Vec<String> {
    let me = std::env::current_exe().expect("current exe");
    let me = me.to_str().expect("utf-8 path");
    let (mut ours, mut bare) = (Vec::new(), Vec::new());
    // Interleaved in rounds, so load swings hit both alike.
    for _ in 0..5 {
        bare.extend(round_trips(
            &mut spawn(command(&[me, ROLE_RESPONDER])),
            calls / 5,
        ));
        ours.extend(round_trips(
            &mut spawn(proxied(&[me, ROLE_RESPONDER])),
            calls / 5,
        ));
    }
    let ms = |ns: u64| format!("{:.3} ms", ns as f64 / 1e6);
    let mut rows = Vec::new();
    for (p, target) in [(0.5, Some(1_000_000u64)), (0.95, None)] {
        let (o, b) = (
            support::percentile(&mut ours, p),
            support::percentile(&mut bare, p),
        );
        let added = o.saturating_sub(b);
        let (t, meets) = match target {
            Some(t) => ("< +1 ms", if added < t { "yes" } else { "**no**" }),
            None => ("—", "—"),
        };
        rows.push(format!(
            "| Intercepted `tools/call` round trip p{:.0}, embedded policy ({calls} calls) | {} | direct {} | +{} | {t} | {meets} |",
            p * 100.0,
            ms(o),
            ms(b),
            ms(added)
        ));
    }
    rows
}

fn memory(size: usize) -> String {
    let (_, hwm) = stream(spawn(proxied(&["cat"])), size, notification());
    let mib = hwm as f64 / 1024.0;
    let meets = if mib < 64.0 { "yes" } else { "**no**" };
    format!(
        "| Peak RSS of `ahp-wrap mcp` after {} MiB streamed through it | {mib:.1} MiB | — | — | bounded (< 64 MiB) | {meets} |",
        size >> 20
    )
}
