//! Running a process in a test, the one way every suite does it: stdout and stderr are
//! drained on threads while it runs (a chatty process never blocks on a full pipe), the
//! wait has a time limit, and a failure prints the command, its status and all its output.
//!
//! Loaded as `common::process` by the suites and as `agents::process` by the agent
//! end-to-end suites (`#[path]`), so there is one copy of it.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long output may keep coming after the process exited (a grandchild may hold the
/// pipes) before the test fails, when the time limit itself is shorter.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// A finished run.
pub struct Run {
    pub output: Output,
    pub elapsed: Duration,
    pub shown: String,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// Panics with everything about the run when `ok` is false.
    #[track_caller]
    pub fn check(&self, ok: bool, what: &str) {
        assert!(ok, "{what}\n{self}");
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "command: {}\nstatus: {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.shown,
            self.output.status,
            self.elapsed,
            self.stdout(),
            self.stderr()
        )
    }
}

/// One output pipe, read to its end on a thread; what came so far is kept for a failure.
struct Drain {
    buf: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Drain {
    fn start(pipe: Option<impl Read + Send + 'static>) -> Drain {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        if let Some(mut pipe) = pipe {
            let buf = Arc::clone(&buf);
            std::thread::spawn(move || {
                let mut chunk = [0u8; 16 * 1024];
                loop {
                    match pipe.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => buf.lock().unwrap().extend_from_slice(&chunk[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                let _ = tx.send(());
            });
        }
        // Without a pipe the sender is gone already: `finish` answers at once.
        Drain { buf, done }
    }

    /// Waits until the pipe is closed or `deadline`; whether it was closed.
    fn finish(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        !matches!(self.done.recv_timeout(left), Err(RecvTimeoutError::Timeout))
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.buf.lock().unwrap())
    }
}

/// Waits for `child` until `deadline`; `None` past it.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `cmd` (with the stdio it was given) to the end within `limit`. Past the limit the
/// process is killed and the test fails, showing the command and everything it printed.
pub fn run_within(mut cmd: Command, limit: Duration) -> Run {
    run_command(&mut cmd, limit)
}

/// [`run_within`] for a borrowed command.
pub fn run_command(cmd: &mut Command, limit: Duration) -> Run {
    run_fed(cmd, None, limit)
}

/// Runs `cmd` with `input` on its stdin and its output captured, within `limit` (see
/// [`run_within`]). The input is written on a thread, so it may be larger than a pipe.
pub fn run_with_input(cmd: &mut Command, input: &[u8], limit: Duration) -> Run {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_fed(cmd, Some(input.to_vec()), limit)
}

fn run_fed(cmd: &mut Command, input: Option<Vec<u8>>, limit: Duration) -> Run {
    let shown = format!("{cmd:?}");
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A process that exits without reading all of it is not an error here.
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, &input);
        });
    }
    let out = Drain::start(child.stdout.take());
    let err = Drain::start(child.stderr.take());
    let status = wait_until(&mut child, start + limit);
    let (status, why) = match status {
        Some(status) => {
            let deadline = (start + limit).max(Instant::now() + DRAIN_GRACE);
            let closed = out.finish(deadline) && err.finish(deadline);
            let why = (!closed).then_some(
                "exited, but its output stayed open (a process it left holds the pipes)",
            );
            (status, why)
        }
        None => {
            let _ = child.kill();
            let status = child.wait().unwrap();
            let grace = Instant::now() + Duration::from_secs(1);
            let _ = out.finish(grace) && err.finish(grace);
            (status, Some("did not finish in time and was killed"))
        }
    };
    let run = Run {
        output: Output {
            status,
            stdout: out.take(),
            stderr: err.take(),
        },
        elapsed: start.elapsed(),
        shown,
    };
    if let Some(why) = why {
        panic!("the process {why} (limit {limit:?})\n{run}");
    }
    run
}

/// Runs `cmd` with no stdin and its output captured, within `limit` (see [`run_within`]).
pub fn run(cmd: &mut Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_command(cmd, limit).output
}

/// Everything about a finished process, for assertion messages.
pub fn show(out: &Output) -> String {
    format!(
        "status: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Whether process `pid` is alive (a zombie counts as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// What a process of an agent's tree says of itself for a test to find it from here: its PID
/// namespace and its pid there (on the floor the tree has a PID namespace of its own, whose
/// pids mean nothing outside it). A shell line that writes it to FILE.
pub fn say_pid(var: &str, file: &str) -> String {
    format!("echo \"$(readlink /proc/self/ns/pid) {var}\" > {file}")
}

/// The pid, as this process sees it, of the process [`say_pid`]'s `text` names (a pid alone:
/// that pid): the process in that PID namespace whose last `NSpid` is the pid written.
pub fn pid_from(text: &str) -> Option<i32> {
    let mut fields = text.split_whitespace();
    let (first, second) = (fields.next()?, fields.next());
    let Some(inner) = second else {
        return first.parse().ok();
    };
    let ours = std::fs::read_link("/proc/self/ns/pid").ok()?;
    if ours.to_string_lossy() == first {
        return inner.parse().ok();
    }
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let ns = std::fs::read_link(e.path().join("ns/pid")).ok()?;
        if ns.to_string_lossy() != first {
            return None;
        }
        let status = std::fs::read_to_string(e.path().join("status")).ok()?;
        let nspid = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
        (nspid.split_whitespace().last()? == inner).then_some(pid)
    })
}

/// Whether `what` comes true within `limit`, looked at every 10 ms.
pub fn eventually(mut what: impl FnMut() -> bool, limit: Duration) -> bool {
    let start = Instant::now();
    while !what() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// A free TCP port of this machine's loopback (free a moment ago: another process may take
/// it before the caller binds it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `cmd` started by `setpriv` without `CAP_AUDIT_READ` (root's other capabilities kept): the
/// kernel's audit log cannot be read by it, whatever the audit subsystem's state. Its
/// environment is ours with `cmd`'s settings over it, or (`clear`) `cmd`'s settings alone.
pub fn without_audit_read(cmd: &Command, clear: bool) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--inh-caps=-audit_read", "--bounding-set=-audit_read"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if clear {
        c.env_clear();
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => c.env(key, v),
            None => c.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        c.current_dir(dir);
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}
