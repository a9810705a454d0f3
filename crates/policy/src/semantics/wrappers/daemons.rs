//! Wrappers that start a daemon or a unit: `start-stop-daemon --start --exec PROG` (the
//! program it starts) and `systemd-run CMD` (the command, and its unit's `Exec…=` properties).
//!
//! Owns: these parsers. Must not touch: detaching itself (a rule escalates that), or the
//! commands found.

use super::args::{command_start, option_values, quoted};
use super::table::wrapper_options;
use super::{after_options, Unwrapped};
use crate::command::Command;

/// `start-stop-daemon --start --exec PROG [--startas PROG] -- ARGS…`: the program it starts.
pub(super) fn unwrap_start_stop_daemon(args: &[String]) -> Option<Unwrapped> {
    let options_end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let options = &args[..options_end];
    let starts = options
        .iter()
        .any(|a| a == "--start" || (a.starts_with('-') && !a.starts_with("--") && a.contains('S')));
    if !starts {
        return None;
    }
    let value = |short: &str, long: &str| {
        options.iter().enumerate().find_map(|(i, a)| {
            if a == short || a == long {
                options.get(i + 1).cloned()
            } else {
                a.strip_prefix(&format!("{long}=")).map(str::to_owned)
            }
        })
    };
    let program = value("-a", "--startas").or_else(|| value("-x", "--exec"))?;
    let mut argv = vec![program];
    argv.extend(
        args.get(options_end + 1..)
            .unwrap_or_default()
            .iter()
            .cloned(),
    );
    Some(Unwrapped {
        argv,
        ..Unwrapped::default()
    })
}

/// `systemd-run [OPTIONS] CMD`: CMD, and the command lines of its unit's `Exec…=`
/// properties (`-p ExecStartPost=…`), which run with it.
pub(super) fn unwrap_systemd_run(cmd: &Command) -> Option<Unwrapped> {
    let main = after_options(cmd);
    let (short, long, positionals) = wrapper_options(&cmd.program, &cmd.args)?;
    let end = command_start(&cmd.args, short, long, positionals).unwrap_or(cmd.args.len());
    let execs: Vec<&str> = option_values(&cmd.args[..end], short, long, "p", &["--property"])
        .0
        .into_iter()
        .filter_map(|p| {
            let (name, value) = p.split_once('=')?;
            // `-`, `@`, `:`, `+`, `!` prefixes change how it runs, not what.
            name.starts_with("Exec")
                .then(|| value.trim_start_matches(['-', '@', ':', '+', '!']))
        })
        .collect();
    if execs.is_empty() {
        return main;
    }
    let mut lines: Vec<String> = main.iter().map(|m| quoted(&m.argv)).collect();
    lines.extend(execs.into_iter().map(str::to_owned));
    Some(Unwrapped {
        script: Some(lines.join("\n")),
        ..Unwrapped::default()
    })
}
