//! Asking a person on the controlling terminal, for `escalate` decisions that the agent's
//! own dialog cannot take (a connection, a path socket, a PATH shim's command, a hook of an
//! agent that cannot ask).
//!
//! Owns: the terminal question, its time limit, and the agent's tree held still while it is
//! asked ([`terminal`]). Must not touch: what the answer means (the gate turns it into a
//! decision) or the agent's own use of the terminal outside a question.

mod terminal;

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::gate::{Approval, Approver, BoxFuture, Escalation};
use crate::protocol::Event;
use terminal::Answer;

/// Asks on `/dev/tty`, one question at a time, the agent's tree paused meanwhile.
#[derive(Clone)]
pub(crate) struct Asker {
    timeout: Duration,
    lock: Arc<tokio::sync::Mutex<()>>,
    hold: Arc<Hold>,
    /// The `tmux` to ask about the pane, found before the agent ran.
    tmux: Option<PathBuf>,
}

/// The agent a question holds still, and whether it has ended: a question pending when it
/// ends is withdrawn, and none is asked after (the terminal is the shell's again).
pub(crate) struct Hold {
    /// The agent's tree, once it runs.
    agent: Mutex<Option<Tree>>,
    gone: AtomicBool,
    /// Readable once the agent has ended: wakes a question waiting for a key.
    wake: (OwnedFd, OwnedFd),
    /// The terminal's modes before the agent started, put back if it is killed (a killed
    /// program cannot restore what it changed: raw mode, no echo).
    modes: Mutex<Option<(std::fs::File, nix::sys::termios::Termios)>>,
    /// Held while a question has the terminal: the modes are put back after it has put back
    /// its own (the agent's), never before.
    asking: Mutex<()>,
}

impl Hold {
    pub(crate) fn new() -> std::io::Result<Hold> {
        let wake = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok(Hold {
            agent: Mutex::new(None),
            gone: AtomicBool::new(false),
            wake,
            modes: Mutex::new(None),
            asking: Mutex::new(()),
        })
    }

    /// Notes the terminal's modes, before the agent starts.
    pub(crate) fn save_terminal(&self) {
        let Ok(tty) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        else {
            return;
        };
        if let Ok(modes) = nix::sys::termios::tcgetattr(tty.as_fd()) {
            *self.modes.lock().unwrap_or_else(|e| e.into_inner()) = Some((tty, modes));
        }
    }

    /// Puts back the terminal's modes noted before the agent started (it was killed), once
    /// a question that was pending has ended (it puts back the agent's modes as it ends).
    pub(crate) fn restore_terminal(&self) {
        let _after_the_question = self.asking.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((tty, modes)) = self.modes.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let how = nix::sys::termios::SetArg::TCSANOW;
            if let Err(e) = nix::sys::termios::tcsetattr(tty.as_fd(), how, &modes) {
                tracing::debug!("cannot restore the terminal's modes: {e}");
            }
        }
    }

    /// The agent's tree runs from `root` (and everything below it), in `cgroup` when it has
    /// one; `agent` is the agent's own process.
    pub(crate) fn agent_started(&self, root: i32, agent: i32, cgroup: Option<PathBuf>) {
        let Some(start) = crate::child::procfs::stat(agent).map(|st| st.start) else {
            return;
        };
        let tree = Tree {
            root,
            agent: (agent, start),
            cgroup,
        };
        *self.agent.lock().unwrap_or_else(|e| e.into_inner()) = Some(tree);
    }

    /// The agent has ended: a pending question is withdrawn, none is asked after.
    pub(crate) fn agent_gone(&self) {
        if !self.gone.swap(true, Ordering::SeqCst) {
            let _ = nix::unistd::write(&self.wake.1, b"x");
        }
    }
}

/// The agent's tree as a question holds it.
#[derive(Clone)]
struct Tree {
    /// The root of the tree (the wrapper's child).
    root: i32,
    /// The agent's own process (the root, or in a PID namespace of the floor's the one
    /// running the agent's program), with its start time: its end withdraws a question even
    /// while the tree is held (the helpers that would report it are held too).
    agent: (i32, u64),
    /// The tree's cgroup v2 directory, when it has one (frozen rather than stopped).
    cgroup: Option<PathBuf>,
}

/// The agent's tree, paused for a question.
struct TreePause {
    tree: Option<Tree>,
    paused: Option<crate::child::tree::Paused>,
}

impl terminal::Pause for TreePause {
    fn breathe(&mut self) {
        match (self.paused.as_mut(), &self.tree) {
            (Some(p), Some(t)) => p.breathe(t.root, Duration::from_millis(40)),
            _ => std::thread::sleep(Duration::from_millis(40)),
        }
    }

    fn agent_ended(&self) -> bool {
        self.tree.as_ref().is_some_and(|t| {
            let (pid, start) = t.agent;
            crate::child::procfs::stat(pid)
                .is_none_or(|st| st.start != start || matches!(st.state, b'Z' | b'X'))
        })
    }
}

impl Asker {
    /// An asker if this process has a controlling terminal it can open; `hold` is told of
    /// the agent once it runs.
    pub(crate) fn for_terminal(timeout: Duration, hold: Arc<Hold>) -> Option<Asker> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        Some(Asker {
            timeout,
            lock: Arc::default(),
            hold,
            tmux: terminal::tmux_program(),
        })
    }

    /// Asks whether to allow `event`.
    async fn ask(
        &self,
        event: &Event,
        reason: &str,
        target: Option<&str>,
    ) -> Result<Answer, String> {
        // Held by the question itself: if this ask is abandoned (its call was cancelled),
        // the next one still waits until the terminal is free.
        let one_at_a_time = self.lock.clone().lock_owned().await;
        let mut question = String::from(
            "ahp-wrap: the agent is paused while you decide (it goes on once you answer).\n\n",
        );
        question.push_str(&format!("The harness asks a person to decide: {reason}"));
        if let Some(t) = target {
            question.push_str(&format!(" (for {t})"));
        }
        question.push_str(&format!(
            "\n\n  {}\n\nAllow it? Type y and Enter to allow; anything else refuses [y/N] ",
            describe(event)
        ));
        let (timeout, hold, tmux) = (self.timeout, self.hold.clone(), self.tmux.clone());
        tokio::task::spawn_blocking(move || {
            let _one_at_a_time = one_at_a_time;
            prompt(&question, timeout, &hold, tmux.as_deref())
        })
        .await
        .map_err(|e| format!("the prompt task failed: {e}"))?
    }
}

impl Approver for Asker {
    fn approve<'a>(&'a self, e: Escalation<'a>) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            match self.ask(e.event, e.reason, e.target).await {
                Ok(Answer::Yes) => Approval::Allow { by: None },
                Ok(Answer::No) => Approval::Deny {
                    by: None,
                    reason: format!("declined at the terminal ({})", e.reason),
                },
                Ok(Answer::Unanswered) => Approval::Unanswered(format!(
                    "escalated to a person ({}), and nobody answered at the terminal within {} s",
                    e.reason,
                    self.timeout.as_secs()
                )),
                Ok(Answer::Withdrawn) => Approval::Unanswered(format!(
                    "escalated to a person ({}); the agent ended with the question pending, \
                     which was withdrawn",
                    e.reason
                )),
                Err(why) => Approval::Unanswered(format!(
                    "escalated to a person ({}), and the terminal prompt failed: {why}",
                    e.reason
                )),
            }
        })
    }
}

/// One question: the agent's tree paused (when it runs), the terminal held, the answer read.
fn prompt(
    question: &str,
    timeout: Duration,
    hold: &Hold,
    tmux: Option<&std::path::Path>,
) -> Result<Answer, String> {
    let _asking = hold.asking.lock().unwrap_or_else(|e| e.into_inner());
    if hold.gone.load(Ordering::SeqCst) {
        return Ok(Answer::Withdrawn);
    }
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|e| format!("cannot open the terminal: {e}"))?;
    let tree = hold.agent.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut pause = TreePause {
        paused: tree
            .as_ref()
            .map(|t| crate::child::tree::pause(t.root, t.cgroup.as_deref())),
        tree,
    };
    let asked = terminal::ask(
        &mut tty,
        question,
        timeout,
        &mut pause,
        hold.wake.0.as_fd(),
        tmux,
    )?;
    // The tree runs again before it is made to redraw: a held process takes the two size
    // changes as one, after both, and sees no change.
    drop(pause);
    if asked.redraw && !hold.gone.load(Ordering::SeqCst) {
        terminal::redraw(&tty);
    }
    Ok(asked.answer)
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
