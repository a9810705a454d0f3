//! An agent CLI on a real pseudo-terminal, driven as a person would (`pty_steps.py`): what
//! the interactive parity suites (`tests/*_state.rs`) share.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::agents;

/// Runs `cmd` (its program, arguments, directory and environment) on a fresh pty through
/// `steps`: pairs of what to wait for and what to type (`pty_steps.py` says how). Returns the
/// screen with its escape sequences and all white space taken out (agents draw words apart
/// with cursor moves, not spaces), and the exit code (99: `limit` reached).
pub fn on_terminal(cmd: &Command, steps: &[&str], limit: Duration) -> (String, Option<i32>) {
    let mut pty = Command::new("python3");
    pty.arg(agents::root().join("tests/support/pty_steps.py"))
        .args(["--limit", &limit.as_secs().to_string()])
        .args(steps)
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        pty.current_dir(dir);
    }
    pty.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            pty.env(k, v);
        }
    }
    pty.env("TERM", "xterm-256color")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let r = agents::run_within(pty, limit + Duration::from_secs(30));
    (squeezed(&r.output.stdout), r.output.status.code())
}

/// `screen` without escape sequences (CSI and OSC) and carriage returns: its text, as the
/// terminal's lines showed it.
pub fn plain(screen: &[u8]) -> String {
    let text = String::from_utf8_lossy(screen);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                Some('[') => {
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() || c == '~' {
                            break;
                        }
                    }
                }
                // An OSC ends with BEL or with ST (ESC \\).
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\x07' || (c == '\x1b' && chars.next() == Some('\\')) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// [`plain`], and without white space.
pub fn squeezed(screen: &[u8]) -> String {
    plain(screen)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}
