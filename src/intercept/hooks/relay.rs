//! The hook side: `ahp-wrap hook <framework> <hook>`, what an agent's hook system runs.
//!
//! This runs once per hook call of the agent, so it stays small: no async runtime, no JSON
//! parsing, one connection (through the control socket's blocking client). Whatever goes
//! wrong, it answers in the framework's own deny form (fail closed) rather than letting the
//! agent proceed.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::control::client::Caller;
use crate::control::wire::{self, Kind};
use crate::frameworks::{self, CallerReply, HookContext};
use crate::protocol::Final;

/// Exit code when the framework itself is unknown (no deny form to render).
const EXIT_UNKNOWN_FRAMEWORK: i32 = 2;
/// How much of the payload one read asks for (a pipe holds 64 KiB; most payloads are small).
const READ_CHUNK: usize = 16 * 1024;

/// Runs one hook call; returns the exit code for the hook process.
pub fn run_hook(framework: &str, hook: &str) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let rendered = match relay(framework, hook, &cwd) {
        Ok(r) => r,
        // Only now is the framework looked up: loading the shims (some are manifests to
        // parse) is no cost of a call the wrapper answers.
        Err(cause) => {
            let Some(fw) = frameworks::find(framework) else {
                eprintln!("ahp-wrap: unknown framework {framework:?}; blocking");
                return EXIT_UNKNOWN_FRAMEWORK;
            };
            let cx = HookContext {
                hook,
                cwd: &cwd,
                interactive: false,
            };
            let reason = format!("ahp-wrap blocked this because {cause} (the hook fails closed)");
            fw.render(&cx, None, &Final::Block { reason })
        }
    };
    emit(&rendered)
}

fn emit(r: &CallerReply) -> i32 {
    // A reader that went away is not our failure; the exit code still says it all.
    let _ = std::io::stdout().lock().write_all(&r.stdout);
    let _ = std::io::stderr().lock().write_all(&r.stderr);
    r.exit_code
}

fn relay(framework: &str, hook: &str, cwd: &Path) -> Result<CallerReply, String> {
    let caller = Caller::from_env().map_err(|e| e.to_string())?;
    let payload = read_stdin(&caller)?;
    caller
        .call(Kind::Hook, framework, hook, cwd, &payload)
        .map_err(|e| e.to_string())
}

/// Reads the whole hook payload from stdin, bounded in size and time.
fn read_stdin(caller: &Caller) -> Result<Vec<u8>, String> {
    let stdin = std::io::stdin();
    let mut lock = stdin.lock();
    // Read straight into the payload: a big zeroed buffer on the stack costs more (memset,
    // page faults) than the rest of this process's own work.
    let mut payload = Vec::new();
    loop {
        let wait = caller
            .left()
            .map_err(|_| "the hook payload did not arrive in time")?;
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
