//! Forwarding the signals we receive to the agent, per the process-group policy.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

/// Where the agent lives among process groups. This is the one place that decides it.
///
/// - On a terminal, in its foreground group: the agent stays in *our* group, so it keeps
///   the terminal (reads, raw mode, resize) and the terminal delivers Ctrl-C, Ctrl-Z and
///   SIGWINCH to it directly. We must not deliver those a second time.
/// - Otherwise (pipes, CI, a background job): the agent gets its own group, and every
///   signal we receive is forwarded to that whole group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    /// We are the terminal's foreground group: the agent stays in our group and the
    /// terminal signals it directly.
    Foreground,
    /// The agent leads a process group of its own, and we forward signals to that group.
    OwnGroup,
}

impl GroupPolicy {
    /// Decides from the state of this process.
    pub fn detect() -> GroupPolicy {
        let Ok(tty) = std::fs::File::open("/dev/tty") else {
            return GroupPolicy::OwnGroup;
        };
        match nix::unistd::tcgetpgrp(&tty) {
            Ok(fg) if fg == nix::unistd::getpgrp() => GroupPolicy::Foreground,
            _ => GroupPolicy::OwnGroup,
        }
    }
}

/// The signals we take over from their default action and pass on.
pub(crate) const FORWARDED: [i32; 7] =
    [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2];

/// Forwards signals to the agent from a dedicated thread.
pub struct Forwarder {
    /// 0: no agent yet; > 0: a pid; < 0: a process group.
    target: Arc<AtomicI32>,
    /// A terminating signal that arrived before the agent started.
    early: Arc<AtomicI32>,
}

impl Forwarder {
    /// Installs the handlers. From here on SIGINT and friends no longer kill us.
    pub fn install(policy: GroupPolicy) -> std::io::Result<Forwarder> {
        let target = Arc::new(AtomicI32::new(0));
        let early = Arc::new(AtomicI32::new(0));
        let mut signals = SignalsInfo::<WithOrigin>::new(FORWARDED)?;
        let (t, e) = (target.clone(), early.clone());
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for origin in signals.forever() {
                    // The terminal already delivered its own signals to an agent that
                    // shares our foreground group; only pass on what someone sent us.
                    let from_terminal = matches!(origin.cause, Cause::Kernel);
                    if policy == GroupPolicy::Foreground && from_terminal {
                        continue;
                    }
                    let to = t.load(Ordering::SeqCst);
                    if to == 0 {
                        if origin.signal != SIGWINCH {
                            e.store(origin.signal, Ordering::SeqCst);
                        }
                        continue;
                    }
                    if let Ok(sig) = Signal::try_from(origin.signal) {
                        tracing::debug!(signal = %sig, to, "forwarding a signal to the agent");
                        let _ = kill(Pid::from_raw(to), sig);
                    }
                }
            })?;
        Ok(Forwarder { target, early })
    }

    /// A terminating signal received before the agent started, if any.
    pub fn early_signal(&self) -> Option<i32> {
        match self.early.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// From now on, signals go to `target`: a pid, or a process group's id negated.
    pub fn set_target(&self, target: i32) {
        self.target.store(target, Ordering::SeqCst);
        if let Some(sig) = self.early_signal() {
            if let Ok(sig) = Signal::try_from(sig) {
                let _ = kill(Pid::from_raw(target), sig);
            }
        }
    }

    /// The agent is gone: stop forwarding (its pid may be reused).
    pub fn clear_target(&self) {
        self.target.store(0, Ordering::SeqCst);
    }
}
