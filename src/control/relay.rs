//! The shim side of the control socket: `ahp-wrap hook <framework> <hook>`.
//!
//! This runs once per hook call of the agent, so it stays small: no async runtime, no JSON
//! parsing, one connection. Whatever goes wrong, it answers in the framework's own deny
//! form (fail closed) rather than letting the agent proceed.

use std::io::{BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::{endpoint, wire};
use super::{ENV_BUDGET, ENV_PARENT_PID, ENV_SOCKET, ENV_TOKEN};
use crate::frameworks::{self, HookContext, Rendered};
use crate::jsonrpc::framing::{self, LineError};
use crate::protocol::Verdict;

/// Exit code when the framework itself is unknown (no deny form to render).
const EXIT_UNKNOWN_FRAMEWORK: i32 = 2;
/// Budget when the wrapper did not say.
const DEFAULT_BUDGET_MS: u64 = 30_000;
/// How much of the payload one read asks for (a pipe holds 64 KiB; most payloads are small).
const READ_CHUNK: usize = 16 * 1024;

/// Runs one hook call; returns the exit code for the hook process.
pub fn run_hook(framework: &str, hook: &str) -> i32 {
    let Some(fw) = frameworks::find(framework) else {
        eprintln!("ahp-wrap: unknown framework {framework:?}; blocking");
        return EXIT_UNKNOWN_FRAMEWORK;
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let rendered = match relay(framework, hook, &cwd) {
        Ok(r) => r,
        Err(cause) => {
            let cx = HookContext {
                hook,
                cwd: &cwd,
                interactive: false,
            };
            let reason = format!("ahp-wrap blocked this because {cause} (the hook fails closed)");
            fw.render(&cx, None, &Verdict::Block { reason })
        }
    };
    emit(&rendered)
}

fn emit(r: &Rendered) -> i32 {
    // A reader that went away is not our failure; the exit code still says it all.
    let _ = std::io::stdout().lock().write_all(&r.stdout);
    let _ = std::io::stderr().lock().write_all(&r.stderr);
    r.exit_code
}

fn relay(framework: &str, hook: &str, cwd: &std::path::Path) -> Result<Rendered, String> {
    if !wire::is_word(hook) {
        return Err(format!("the hook name {hook:?} is not a plain word"));
    }
    let socket = std::env::var_os(ENV_SOCKET)
        .ok_or("the hook is not running under ahp-wrap (AHP_WRAP_SOCKET is not set)")?;
    let token = std::env::var(ENV_TOKEN)
        .map_err(|_| "the hook has no wrapper token (AHP_WRAP_TOKEN is not set)")?;
    let budget = std::env::var(ENV_BUDGET)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_BUDGET_MS);
    let deadline = Instant::now() + Duration::from_millis(budget);

    let payload = read_stdin(deadline)?;
    let cwd = cwd.as_os_str().as_bytes();
    let mut stream = endpoint::connect(&socket).map_err(|e| {
        format!(
            "the wrapper cannot be reached at {}: {e}",
            PathBuf::from(&socket).display()
        )
    })?;
    // Before the payload leaves: whoever answers must be the wrapper itself.
    let parent: i32 = std::env::var(ENV_PARENT_PID)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or("the hook does not know its wrapper's pid (AHP_WRAP_PARENT_PID is not set)")?;
    endpoint::check_listener(&stream, parent)?;
    let header = wire::request_header(&token, framework, hook, cwd.len(), payload.len());
    stream
        .set_write_timeout(Some(left(deadline)?))
        .map_err(|e| e.to_string())?;
    let mut request = Vec::with_capacity(header.len() + cwd.len() + payload.len());
    request.extend_from_slice(header.as_bytes());
    request.extend_from_slice(cwd);
    request.extend_from_slice(&payload);
    // On failure, a refusal may still be waiting to be read: it names the cause better.
    let sent = stream
        .write_all(&request)
        .map_err(|e| format!("the wrapper did not take the hook call: {e}"));

    stream
        .set_read_timeout(Some(left(deadline)?))
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    let timed_out = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("the wrapper gave no answer within {budget} ms")
        }
        _ => format!("the wrapper's answer broke off: {e}"),
    };
    let read = framing::read_line(&mut reader, wire::MAX_HEADER, &mut line);
    // Even a cut line may be a refusal: the parent closes right after it.
    if let Some(why) = framing::text(&line).ok().and_then(wire::parse_refusal) {
        return Err(format!("the wrapper answered \"refused: {why}\""));
    }
    sent?;
    match read.map_err(timed_out)?.check(wire::MAX_HEADER) {
        Ok(true) => {}
        Ok(false) | Err(LineError::Cut) => {
            return Err("the wrapper closed the connection without an answer".into())
        }
        Err(e) => return Err(format!("the wrapper answered with {e}")),
    }
    let line = framing::text(&line).map_err(|_| "the wrapper's answer is garbled")?;
    let (exit_code, out_len, err_len) = wire::parse_response_header(line)?;
    let mut stdout = vec![0; out_len];
    let mut stderr = vec![0; err_len];
    reader.read_exact(&mut stdout).map_err(timed_out)?;
    reader.read_exact(&mut stderr).map_err(timed_out)?;
    Ok(Rendered {
        stdout,
        stderr,
        exit_code,
    })
}

fn left(deadline: Instant) -> Result<Duration, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err("the hook's time ran out".into())
    } else {
        Ok(left)
    }
}

/// Reads the whole hook payload from stdin, bounded in size and time.
fn read_stdin(deadline: Instant) -> Result<Vec<u8>, String> {
    let stdin = std::io::stdin();
    let mut lock = stdin.lock();
    // Read straight into the payload: a big zeroed buffer on the stack costs more (memset,
    // page faults) than the rest of this process's own work.
    let mut payload = Vec::new();
    loop {
        let wait = left(deadline).map_err(|_| "the hook payload did not arrive in time")?;
        let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("cannot read the hook payload: {e}")),
        }
        let len = payload.len();
        if len > wire::MAX_PAYLOAD {
            return Err(format!(
                "the hook payload is over {} bytes",
                wire::MAX_PAYLOAD
            ));
        }
        // One byte more than the limit may be read, to tell "at the limit" from "over it".
        payload.resize((len + READ_CHUNK).min(wire::MAX_PAYLOAD + 1), 0);
        let read = lock.read(&mut payload[len..]);
        payload.truncate(len + *read.as_ref().unwrap_or(&0));
        match read {
            Ok(0) => return Ok(payload),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read the hook payload: {e}")),
        }
    }
}
