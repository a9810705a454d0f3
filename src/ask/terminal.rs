//! The terminal, held for one question: the agent's tree is paused first (its cgroup frozen,
//! or each process stopped), so that no keystroke meant for the agent is taken as an answer
//! and no answer reaches the agent; what the person had typed for the agent and the agent had
//! not read yet is left to it (the tree runs a moment until it has read it, else it is put
//! back). The question is asked on the alternate screen, over the agent's, with the
//! terminal's modes saved; then the screen and the modes are restored, and an agent that
//! draws on the alternate screen itself is made to redraw once it runs again.
//!
//! Which screen the agent is on: tmux says of its pane (`#{alternate_on}`); another terminal
//! answers DEC private mode queries (`CSI ? 1049 $ p`), fenced by a device attributes query
//! that every terminal answers, read here among the keys while the tree is paused. See
//! docs/approvals.md.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// How long the tree may run to read what was typed for it before the question.
const TYPEAHEAD_WAIT: Duration = Duration::from_millis(600);
/// How long the terminal has to answer the mode queries before the question is drawn.
const REPORT_WAIT: Duration = Duration::from_millis(300);
/// How long the smaller window is held when an agent is made to redraw.
const REDRAW_HOLD: Duration = Duration::from_millis(300);
/// The longest answer read (`yes` and a few slips).
const MAX_ANSWER: usize = 16;

/// What ended a question.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// `y` or `yes`, then Enter.
    Yes,
    /// Anything else, then Enter; Ctrl-C, Ctrl-D, Escape.
    No,
    /// Nothing before the time limit.
    Unanswered,
    /// The agent ended while the question was pending: withdrawn.
    Withdrawn,
}

/// A question's end.
pub(crate) struct Asked {
    pub(crate) answer: Answer,
    /// The agent's screen was covered: call [`redraw`] once the tree runs again.
    pub(crate) redraw: bool,
}

/// A DEC private mode as the terminal reported it (`CSI ? mode ; value $ y`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Unknown,
    Set,
    Reset,
}

/// What the terminal said of the agent's screen.
#[derive(Debug, Clone, Copy)]
struct Screen {
    /// The alternate screen (mode 1049).
    alternate: Mode,
    /// The cursor shown (mode 25).
    cursor: Mode,
}

/// The pause of the agent's tree while the question is asked: `breathe` lets it run a moment
/// (to read what was typed for it), `None` when there is no tree to pause.
pub(crate) trait Pause {
    fn breathe(&mut self);
    /// Whether the agent's own process has ended (killed while held, say).
    fn agent_ended(&self) -> bool;
}

/// How often a question looks whether the agent is still there.
const LOOK: Duration = Duration::from_millis(200);

/// Asks `question` on the terminal `tty` (already opened; the tree already paused by
/// `paused`), within `timeout`; `wake` becomes readable when the agent ends.
pub(crate) fn ask(
    tty: &mut std::fs::File,
    question: &str,
    timeout: Duration,
    paused: &mut dyn Pause,
    wake: BorrowedFd<'_>,
    tmux: Option<&std::path::Path>,
) -> Result<Asked, String> {
    let typed = typeahead(tty, paused);
    let ctl = tty
        .try_clone()
        .map_err(|e| format!("cannot open the terminal: {e}"))?;
    let saved = nix::sys::termios::tcgetattr(ctl.as_fd())
        .map_err(|e| format!("the terminal's modes: {e}"))?;
    let mut raw = saved.clone();
    {
        use nix::sys::termios::{LocalFlags, SpecialCharacterIndices as I};
        raw.local_flags &=
            !(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG | LocalFlags::IEXTEN);
        raw.control_chars[I::VMIN as usize] = 1;
        raw.control_chars[I::VTIME as usize] = 0;
    }
    let set = |t: &nix::sys::termios::Termios| {
        nix::sys::termios::tcsetattr(ctl.as_fd(), nix::sys::termios::SetArg::TCSANOW, t)
    };
    set(&raw).map_err(|e| format!("cannot set the terminal's modes: {e}"))?;
    let mut reader = Reader::default();
    let result = (|| -> Result<(Answer, Mode), String> {
        // Which screen the agent is on, and whether it hid the cursor: tmux says so of its
        // pane; another terminal answers DEC private mode queries, fenced by a device
        // attributes query every terminal answers (in order).
        match tmux_screen(tmux) {
            Some(screen) => reader.screen = screen,
            None => {
                write(tty, b"\x1b[?1049$p\x1b[?25$p\x1b[c")?;
                let until = Instant::now() + REPORT_WAIT;
                while !reader.fenced {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() || !readable(tty.as_fd(), None, left)? {
                        break;
                    }
                    reader.feed(read_some(tty)?.as_slice());
                }
            }
        }
        // The question gets the alternate screen unless the agent is on it: the main screen
        // is then left whole. An agent on the alternate screen (or on a screen the terminal
        // did not name) is made to redraw.
        let own_screen = reader.screen.alternate != Mode::Set;
        let entered = reader.screen;
        if own_screen {
            write(tty, b"\x1b[?1049h")?;
        }
        write(tty, b"\x1b[H\x1b[2J\x1b[?25h")?;
        write(tty, question.replace('\n', "\r\n").as_bytes())?;
        reader.line.clear();
        reader.done = None;
        let deadline = Instant::now() + timeout;
        let answer = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Answer::Unanswered;
            }
            let ready = readable(tty.as_fd(), Some(wake), left.min(LOOK))?;
            if paused.agent_ended() || readable(wake, None, Duration::ZERO)? {
                break Answer::Withdrawn;
            }
            if !ready {
                continue;
            }
            let bytes = read_some(tty)?;
            if bytes.is_empty() {
                break Answer::No;
            }
            let echo = reader.feed(&bytes);
            write(tty, &echo)?;
            if let Some(a) = reader.done.take() {
                break a;
            }
        };
        let said: &[u8] = match answer {
            Answer::Yes => b"\r\n  allowed",
            Answer::No => b"\r\n  refused",
            Answer::Unanswered => b"\r\n  no answer: refused",
            Answer::Withdrawn => b"\r\n  the agent ended: withdrawn",
        };
        write(tty, said)?;
        std::thread::sleep(Duration::from_millis(250));
        write(tty, b"\x1b[H\x1b[2J")?;
        if own_screen {
            write(tty, b"\x1b[?1049l")?;
        }
        if entered.cursor == Mode::Reset {
            write(tty, b"\x1b[?25l")?;
        }
        Ok((answer, entered.alternate))
    })();
    let _ = set(&saved);
    put_back(tty, &typed);
    let (answer, alternate) = result?;
    // The agent draws on the alternate screen, which the question covered (or the terminal
    // did not say which screen it is on): it must draw it again once it runs.
    Ok(Asked {
        answer,
        redraw: alternate != Mode::Reset,
    })
}

/// What the person typed for the agent before the question, which it had not read: the tree
/// runs a moment at a time until it has; what is still waiting then is taken (to be put back
/// after the question).
fn typeahead(tty: &mut std::fs::File, paused: &mut dyn Pause) -> Vec<u8> {
    let until = Instant::now() + TYPEAHEAD_WAIT;
    while crate::tty::queued(tty.as_fd()) > 0 && Instant::now() < until {
        paused.breathe();
    }
    let mut taken = Vec::new();
    while crate::tty::queued(tty.as_fd()) > 0 {
        match read_some(tty) {
            Ok(b) if !b.is_empty() => taken.extend(b),
            _ => break,
        }
    }
    taken
}

/// The `tmux` executable the wrapper would ask about its pane, found on `PATH` before the
/// agent runs: a `tmux` the tree puts on a directory of `PATH` later is never run by the
/// wrapper, outside the floor. `None` outside tmux.
pub(crate) fn tmux_program() -> Option<std::path::PathBuf> {
    std::env::var_os("TMUX")?;
    std::env::var_os("TMUX_PANE")?;
    which::which("tmux").ok()
}

/// What tmux (`tmux`, from [`tmux_program`]) says of the pane the wrapper runs in (tmux
/// answers no mode query).
fn tmux_screen(tmux: Option<&std::path::Path>) -> Option<Screen> {
    let pane = std::env::var_os("TMUX_PANE")?;
    let out = std::process::Command::new(tmux?)
        .args(["display-message", "-p", "-t"])
        .arg(pane)
        .arg("#{alternate_on} #{cursor_flag}")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let flag = |f: Option<&str>| match f {
        Some("1") => Mode::Set,
        Some("0") => Mode::Reset,
        _ => Mode::Unknown,
    };
    let mut words = text.split_whitespace();
    Some(Screen {
        alternate: flag(words.next()),
        cursor: flag(words.next()),
    })
}

/// Puts `bytes` back in the terminal's input queue, for the agent.
fn put_back(tty: &std::fs::File, bytes: &[u8]) {
    let lost = crate::tty::push_input(tty.as_fd(), bytes);
    if lost > 0 {
        tracing::warn!(
            "{lost} key(s) typed for the agent before a question could not be given back to it"
        );
    }
}

/// Makes an agent on the alternate screen draw it again, once it runs: the window's size
/// changed by a row and changed back, a `SIGWINCH` each to the foreground process group. The
/// smaller size is held long enough for the agent to draw a frame at it: a program that reads
/// the size only when it draws would otherwise see no change, and draw only what it thinks
/// changed on a screen it thinks whole.
pub(crate) fn redraw(tty: &std::fs::File) {
    let Some((rows, columns)) = crate::tty::window(tty.as_fd()) else {
        return;
    };
    if rows < 2 || crate::tty::set_window(tty.as_fd(), rows - 1, columns).is_err() {
        return;
    }
    std::thread::sleep(REDRAW_HOLD);
    let _ = crate::tty::set_window(tty.as_fd(), rows, columns);
}

fn write(tty: &mut std::fs::File, bytes: &[u8]) -> Result<(), String> {
    tty.write_all(bytes)
        .and_then(|()| tty.flush())
        .map_err(|e| format!("cannot write to the terminal: {e}"))
}

fn read_some(tty: &mut std::fs::File) -> Result<Vec<u8>, String> {
    let mut buf = [0u8; 256];
    loop {
        match tty.read(&mut buf) {
            Ok(n) => return Ok(buf[..n].to_vec()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read the terminal: {e}")),
        }
    }
}

/// Whether `fd` (or `also`) is readable within `wait`.
fn readable(
    fd: BorrowedFd<'_>,
    also: Option<BorrowedFd<'_>>,
    wait: Duration,
) -> Result<bool, String> {
    let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    let mut fds = vec![PollFd::new(fd, PollFlags::POLLIN)];
    if let Some(a) = also {
        fds.push(PollFd::new(a, PollFlags::POLLIN));
    }
    loop {
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(n) => return Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("cannot wait for the terminal: {e}")),
        }
    }
}

/// The keys of an answer, and the terminal's reports among them.
#[derive(Debug)]
struct Reader {
    line: String,
    done: Option<Answer>,
    screen: Screen,
    /// The terminal answered the device attributes query sent after the mode queries.
    fenced: bool,
    /// An escape sequence being read.
    escape: Option<Vec<u8>>,
}

impl Default for Reader {
    fn default() -> Reader {
        Reader {
            line: String::new(),
            done: None,
            screen: Screen {
                alternate: Mode::Unknown,
                cursor: Mode::Unknown,
            },
            fenced: false,
            escape: None,
        }
    }
}

impl Reader {
    /// Takes `bytes`; returns what to echo.
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut echo = Vec::new();
        for &b in bytes {
            if self.done.is_some() {
                break;
            }
            if let Some(seq) = &mut self.escape {
                seq.push(b);
                // ESC [ … final (0x40–0x7e), ESC O x, or ESC alone then another key.
                let finished = match seq.as_slice() {
                    [b'['] | [b'O'] => false,
                    [b'[', .., last] => (0x40..=0x7e).contains(last),
                    _ => true,
                };
                if finished {
                    let seq = self.escape.take().unwrap_or_default();
                    self.report(&seq);
                }
                continue;
            }
            match b {
                0x1b => self.escape = Some(Vec::new()),
                b'\r' | b'\n' => {
                    let a = self.line.trim().to_ascii_lowercase();
                    self.done = Some(match a.as_str() {
                        "y" | "yes" => Answer::Yes,
                        _ => Answer::No,
                    });
                }
                // Ctrl-C, Ctrl-D.
                0x03 | 0x04 => self.done = Some(Answer::No),
                0x7f | 0x08 if self.line.pop().is_some() => {
                    echo.extend_from_slice(b"\x08 \x08");
                }
                0x20..=0x7e if self.line.len() < MAX_ANSWER => {
                    self.line.push(b as char);
                    echo.push(b);
                }
                _ => {}
            }
        }
        echo
    }

    /// A report of the terminal's (`[?1049;1$y`): noted; anything else (an arrow key, a
    /// mouse report) is no part of an answer.
    fn report(&mut self, seq: &[u8]) {
        if seq.starts_with(b"[?") && seq.ends_with(b"c") {
            self.fenced = true;
            return;
        }
        let Some(body) = seq.strip_prefix(b"[?").and_then(|s| s.strip_suffix(b"$y")) else {
            return;
        };
        let text = String::from_utf8_lossy(body);
        let Some((mode, value)) = text.split_once(';') else {
            return;
        };
        let value = match value {
            "1" | "3" => Mode::Set,
            "2" | "4" => Mode::Reset,
            _ => Mode::Unknown,
        };
        match mode {
            "1049" => self.screen.alternate = value,
            "25" => self.screen.cursor = value,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_a_line_and_reports_are_not_part_of_it() {
        let mut r = Reader::default();
        let echo = r.feed(b"\x1b[?1049;1$y\x1b[?25;2$y\x1b[?1;2cy");
        assert!(r.fenced);
        assert_eq!(echo, b"y");
        assert_eq!(r.screen.alternate, Mode::Set);
        assert_eq!(r.screen.cursor, Mode::Reset);
        assert_eq!(r.done, None);
        r.feed(b"es\r");
        assert_eq!(r.done, Some(Answer::Yes));

        let mut r = Reader::default();
        r.feed(b"y\x7f\x1b[Bn\r");
        assert_eq!(r.done, Some(Answer::No), "{r:?}");
        let mut r = Reader::default();
        r.feed(b"\r");
        assert_eq!(r.done, Some(Answer::No));
        let mut r = Reader::default();
        r.feed(b"\x03");
        assert_eq!(r.done, Some(Answer::No));
        let mut r = Reader::default();
        r.feed(b"\x1b[?1049;2$y");
        assert_eq!(r.screen.alternate, Mode::Reset);
    }
}
