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
    on_terminal_again(cmd, steps, 0, limit)
}

/// [`on_terminal`], the last `again` steps (pairs of a wait and keys) run again while the
/// command still runs once every step has run: a quit the agent dropped while busy is typed
/// again instead of waited on until `limit`.
pub fn on_terminal_again(
    cmd: &Command,
    steps: &[&str],
    again: usize,
    limit: Duration,
) -> (String, Option<i32>) {
    let mut pty = Command::new("python3");
    pty.arg(agents::root().join("tests/support/pty_steps.py"))
        .args(["--limit", &limit.as_secs().to_string()])
        .args(["--repeat-last", &again.to_string()])
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

/// A terminal a person looks at: a tmux server of the test's own (its socket in `dir`), one
/// window running a command; what it shows is read back as the terminal drew it.
pub struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    /// Starts `cmd` (program, arguments, directory, and its environment only: as if it had
    /// been cleared) in a `columns`×`rows` window; the window stays when the command ends, so that its screen and exit status
    /// can be read.
    pub fn start(dir: &std::path::Path, cmd: &Command, columns: u16, rows: u16) -> Tmux {
        let socket = dir.join("tmux.sock");
        // The command's environment alone (as it would have it run elsewhere), and what
        // tmux gives each pane: the terminal's name and the server's address.
        let mut line: Vec<std::ffi::OsString> = vec![
            "sh".into(),
            "-c".into(),
            "exec env -i TERM=\"$TERM\" TMUX=\"$TMUX\" TMUX_PANE=\"$TMUX_PANE\" \"$@\"".into(),
            "sh".into(),
        ];
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                let mut kv = k.to_owned();
                kv.push("=");
                kv.push(v);
                line.push(kv);
            }
        }
        line.push(cmd.get_program().to_owned());
        line.extend(cmd.get_args().map(ToOwned::to_owned));
        let mut t = Command::new("tmux");
        t.arg("-S")
            .arg(&socket)
            .args(["-f", "/dev/null", "new-session", "-d"]);
        t.args(["-x", &columns.to_string(), "-y", &rows.to_string()]);
        if let Some(cwd) = cmd.get_current_dir() {
            t.arg("-c").arg(cwd);
        }
        t.arg("--").args(&line);
        // A server of its own, even when the test itself runs inside tmux.
        t.env("TERM", "xterm-256color").env_remove("TMUX");
        let me = Tmux { socket };
        let ok = t
            .stdin(Stdio::null())
            .status()
            .expect("tmux is installed (.ci/run installs it)")
            .success();
        assert!(ok, "tmux starts");
        me.tmux(&["set-option", "-g", "remain-on-exit", "on"]);
        me
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `keys` as they are (no key names).
    pub fn type_keys(&self, keys: &str) {
        self.tmux(&["send-keys", "-l", keys]);
    }

    /// Presses Enter.
    pub fn enter(&self) {
        self.tmux(&["send-keys", "Enter"]);
    }

    /// The screen as it is now: its lines, without trailing blanks.
    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p"])
            .lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_owned()
    }

    /// Waits up to `limit` for `text` on the screen; the screen then (or the panic says what
    /// it was).
    pub fn wait_for(&self, text: &str, limit: Duration) -> String {
        self.wait_until(limit, |s| s.contains(text))
            .unwrap_or_else(|s| panic!("{text:?} never appeared; the screen:\n{s}"))
    }

    /// Waits up to `limit` for the screen to satisfy `ok`: Ok(screen), or Err(last screen).
    pub fn wait_until(&self, limit: Duration, ok: impl Fn(&str) -> bool) -> Result<String, String> {
        let until = std::time::Instant::now() + limit;
        loop {
            let s = self.screen();
            if ok(&s) {
                return Ok(s);
            }
            if std::time::Instant::now() >= until {
                return Err(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The command's exit status once it has ended (waiting up to `limit`), else None.
    pub fn exit_status(&self, limit: Duration) -> Option<i32> {
        let until = std::time::Instant::now() + limit;
        loop {
            let s = self.tmux(&["display-message", "-p", "#{pane_dead} #{pane_dead_status}"]);
            let mut w = s.split_whitespace();
            if w.next() == Some("1") {
                return w.next().and_then(|c| c.parse().ok());
            }
            if std::time::Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}
