//! Wrappers that hand a shell a command line (`sudo -s CMD`, `su -c CMD`, `script -c CMD`,
//! `watch CMD`, `tmux new-session CMD`, `flock FILE -c CMD`, `sg GROUP CMD`, `nix-shell --run
//! CMD`) or run one with arguments (`capsh -- ARGS`, `watch -x CMD`, `flock FILE CMD`).
//!
//! Owns: these wrappers' parsers. Must not touch: the shell's own options (`shells` in
//! `semantics`), or the command line handed on (walked as any other).

use super::args::command_start;
use super::Unwrapped;

/// `nix-shell --run CMD` / `--command CMD`: CMD, through a shell.
pub(super) fn unwrap_nix_shell(args: &[String]) -> Option<Unwrapped> {
    let at = args.iter().position(|a| a == "--run" || a == "--command")?;
    Some(Unwrapped {
        script: Some(args.get(at + 1)?.clone()),
        ..Unwrapped::default()
    })
}

/// `sudo -s CMD` / `sudo -i CMD` run CMD through a shell.
pub(super) fn sudo_shell(args: &[String]) -> Option<Unwrapped> {
    let options = args.iter().take_while(|a| a.starts_with('-'));
    let pos = options
        .enumerate()
        .find(|(_, a)| !a.starts_with("--") && (a.contains('s') || a.contains('i')))?
        .0;
    let rest = &args[pos + 1..];
    (!rest.is_empty()).then(|| Unwrapped {
        script: Some(rest.join(" ")),
        ..Unwrapped::default()
    })
}

/// `tmux new-session -d "CMD"`, `tmux send-keys -t x "CMD" Enter`: a shell command line.
pub(super) fn unwrap_tmux(args: &[String]) -> Option<Unwrapped> {
    let sub = args.iter().position(|a| !a.starts_with('-'))?;
    let runs = matches!(
        args[sub].as_str(),
        "new"
            | "new-session"
            | "new-window"
            | "neww"
            | "split-window"
            | "splitw"
            | "respawn-pane"
            | "respawn-window"
            | "send-keys"
            | "send"
            | "run-shell"
            | "run"
            | "display-popup"
    );
    if !runs {
        return None;
    }
    let rest = &args[sub + 1..];
    let mut words = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        if a.starts_with('-') && a.len() == 2 && "tscnFeExySlpBTwh".contains(&a[1..]) {
            i += 2;
            continue;
        }
        if !a.starts_with('-') && !matches!(a.as_str(), "Enter" | "C-m" | "KPEnter") {
            words.push(a.clone());
        }
        i += 1;
    }
    (!words.is_empty()).then(|| Unwrapped {
        script: Some(words.join(" ")),
        ..Unwrapped::default()
    })
}

pub(super) fn unwrap_flock(args: &[String]) -> Option<Unwrapped> {
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        if matches!(
            args[i].as_str(),
            "-w" | "--timeout" | "-E" | "--conflict-exit-code"
        ) {
            i += 1;
        }
        if matches!(args[i].as_str(), "-c" | "--command") {
            return args.get(i + 1).map(|s| Unwrapped {
                script: Some(s.clone()),
                ..Unwrapped::default()
            });
        }
        i += 1;
    }
    // The lock file, then a command or `-c CMD`.
    let rest = args.get(i + 1..)?;
    if let Some(pos) = rest.iter().position(|a| a == "-c" || a == "--command") {
        return rest.get(pos + 1).map(|s| Unwrapped {
            script: Some(s.clone()),
            ..Unwrapped::default()
        });
    }
    (!rest.is_empty()).then(|| Unwrapped {
        argv: rest.to_vec(),
        ..Unwrapped::default()
    })
}

pub(super) fn unwrap_script(args: &[String]) -> Option<Unwrapped> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-c" || a == "--command" {
            return it.next().map(|s| Unwrapped {
                script: Some(s.clone()),
                ..Unwrapped::default()
            });
        }
        if let Some(s) = a.strip_prefix("--command=") {
            return Some(Unwrapped {
                script: Some(s.to_owned()),
                ..Unwrapped::default()
            });
        }
    }
    None
}

pub(super) fn unwrap_watch(args: &[String]) -> Option<Unwrapped> {
    let start = command_start(args, "ndqc", &["--interval", "--differences"], 0)?;
    // `watch -x CMD ARGS…` execs CMD with its arguments as they are; otherwise `sh -c`
    // runs them joined.
    let exec = args[..start]
        .iter()
        .any(|a| a == "--exec" || (a.starts_with('-') && !a.starts_with("--") && a.contains('x')));
    if exec {
        return Some(Unwrapped {
            argv: args[start..].to_vec(),
            ..Unwrapped::default()
        });
    }
    Some(Unwrapped {
        script: Some(args[start..].join(" ")),
        ..Unwrapped::default()
    })
}

/// `capsh [OPTIONS] -- ARGS…`: the shell (`--shell=`, else bash) run with ARGS.
pub(super) fn unwrap_capsh(args: &[String]) -> Option<Unwrapped> {
    let at = args.iter().position(|a| a == "--")?;
    let shell = args[..at]
        .iter()
        .find_map(|a| a.strip_prefix("--shell="))
        .unwrap_or("/bin/bash");
    let mut argv = vec![shell.to_owned()];
    argv.extend(args[at + 1..].iter().cloned());
    Some(Unwrapped {
        argv,
        ..Unwrapped::default()
    })
}

/// `sg GROUP [-c] COMMAND`: COMMAND, run by `/bin/sh -c`.
pub(super) fn unwrap_sg(args: &[String]) -> Option<Unwrapped> {
    let rest = match args.first().map(String::as_str) {
        Some("-") => &args[1..],
        _ => args,
    };
    let rest = rest.get(1..)?;
    let rest = match rest.first().map(String::as_str) {
        Some("-c") => &rest[1..],
        _ => rest,
    };
    (!rest.is_empty()).then(|| Unwrapped {
        script: Some(rest.join(" ")),
        ..Unwrapped::default()
    })
}

pub(super) fn unwrap_su(args: &[String]) -> Option<Unwrapped> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-c" || a == "--command" || a == "--session-command" {
            return it.next().map(|s| Unwrapped {
                script: Some(s.clone()),
                ..Unwrapped::default()
            });
        }
    }
    None
}
