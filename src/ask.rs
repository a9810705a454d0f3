//! Asking a person on the controlling terminal, for `escalate` decisions.
//!
//! Owns: the terminal prompt and its time limit. Must not touch: what the answer means (the
//! gate turns it into a decision) or the agent's own use of the terminal outside a prompt.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::gate::{Approval, Approver, BoxFuture, Escalation};
use crate::protocol::Event;

/// Prompts on `/dev/tty`, one question at a time.
#[derive(Clone)]
pub(crate) struct Asker {
    timeout: Duration,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Asker {
    /// An asker if this process has a controlling terminal it can open.
    pub(crate) fn for_terminal(timeout: Duration) -> Option<Asker> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        Some(Asker {
            timeout,
            lock: Arc::default(),
        })
    }

    /// Asks whether to allow `event`; `Ok(false)` unless the person typed `y`.
    pub(crate) async fn ask(
        &self,
        event: &Event,
        reason: &str,
        target: Option<&str>,
    ) -> Result<bool, String> {
        // Held by the prompt itself: if this ask is abandoned (its call was cancelled), the
        // next one still waits until the terminal is free.
        let one_at_a_time = self.lock.clone().lock_owned().await;
        let mut question = format!("\r\nahp-wrap: the harness asks a person to decide: {reason}");
        if let Some(t) = target {
            question.push_str(&format!(" (for {t})"));
        }
        question.push_str(&format!("\r\n  {}\r\nAllow it? [y/N] ", describe(event)));
        let timeout = self.timeout;
        tokio::task::spawn_blocking(move || {
            let _one_at_a_time = one_at_a_time;
            prompt(&question, timeout)
        })
        .await
        .map_err(|e| format!("the prompt task failed: {e}"))?
    }
}

impl Approver for Asker {
    fn approve<'a>(&'a self, e: Escalation<'a>) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            match self.ask(e.event, e.reason, e.target).await {
                Ok(true) => Approval::Allow { by: None },
                Ok(false) => Approval::Deny {
                    by: None,
                    reason: format!("declined at the terminal ({})", e.reason),
                },
                Err(why) => Approval::Unanswered(format!(
                    "escalated to a person ({}), and the terminal prompt failed: {why}",
                    e.reason
                )),
            }
        })
    }
}

fn prompt(question: &str, timeout: Duration) -> Result<bool, String> {
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|e| format!("cannot open the terminal: {e}"))?;
    tty.write_all(question.as_bytes())
        .map_err(|e| format!("cannot write to the terminal: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = tty.write_all(b"\r\n(no answer: no)\r\n");
            return Err(format!("no answer within {} s", timeout.as_secs()));
        }
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(tty.as_fd(), PollFlags::POLLIN)];
        let ready = poll(&mut fds, PollTimeout::from(ms)).map_err(|e| e.to_string())?;
        if ready == 0 {
            continue;
        }
        let mut byte = [0u8; 1];
        match tty.read(&mut byte) {
            Ok(0) => return Ok(false),
            Ok(_) => {
                let yes = matches!(byte[0], b'y' | b'Y');
                // On a line-buffered terminal the answer comes with the rest of its line:
                // take it, so that the agent does not read it as input.
                if !matches!(byte[0], b'\n' | b'\r') {
                    drain_line(&mut tty);
                }
                let _ = tty.write_all(if yes { b"yes\r\n" } else { b"no\r\n" });
                return Ok(yes);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read the terminal: {e}")),
        }
    }
}

/// Reads what is already typed up to the end of the line, without waiting.
fn drain_line(tty: &mut std::fs::File) {
    let mut byte = [0u8; 1];
    loop {
        let mut fds = [PollFd::new(tty.as_fd(), PollFlags::POLLIN)];
        if !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0) {
            return;
        }
        match tty.read(&mut byte) {
            Ok(1) if !matches!(byte[0], b'\n' | b'\r') => continue,
            _ => return,
        }
    }
}

/// A one-line description of what an event wants to do.
pub(crate) fn describe(event: &Event) -> String {
    let p = &event.payload;
    let tool = p.get("tool_name").and_then(|v| v.as_str());
    let args = p.get("arguments");
    let detail = args
        .and_then(|a| a.get("command").or_else(|| a.get("cmd")))
        .or_else(|| args.and_then(|a| a.get("file_path").or_else(|| a.get("path"))))
        // A connection through the network floor's proxy: `http://host:port/`.
        .or_else(|| args.and_then(|a| a.get("url")))
        .or_else(|| p.get("prompt"))
        .map(|v| match v.as_str() {
            Some(s) => s.to_owned(),
            None => v.to_string(),
        });
    let mut s = match (tool, detail) {
        (Some(t), Some(d)) => format!("{}: {t} {d}", event.event_type),
        (Some(t), None) => format!("{}: {t}", event.event_type),
        (None, Some(d)) => format!("{}: {d}", event.event_type),
        (None, None) => event.event_type.to_string(),
    };
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s.replace(['\r', '\n'], " ")
}
