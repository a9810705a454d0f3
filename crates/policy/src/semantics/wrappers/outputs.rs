//! The files wrappers write themselves, by their options' values (`strace -o FILE`, `time -o
//! FILE`, `script FILE`, `logsave FILE`), and strace's trace piped to a command (`-o '|CMD'`).
//!
//! Owns: naming those outputs. Must not touch: the wrapped command's own writes (`semantics`
//! tells those), or judging the files (the rules do).

use super::args::{command_start, option_values, quoted};
use super::table::wrapper_options;
use super::{after_options, Unwrapped};
use crate::command::Command;

/// `strace -o FILE CMD`, `ltrace -o FILE CMD`: CMD; with `-o '|PIPE'` (or `'!PIPE'`) its
/// trace is piped to PIPE, a command line a shell runs.
pub(super) fn unwrap_tracer(cmd: &Command) -> Option<Unwrapped> {
    let traced = after_options(cmd);
    let pipe = wrapper_outputs(cmd)
        .into_iter()
        .find_map(|o| o.strip_prefix(['|', '!']).map(str::to_owned));
    let Some(pipe) = pipe else {
        return traced;
    };
    let script = match traced {
        Some(t) => format!("{} | {pipe}", quoted(&t.argv)),
        None => pipe,
    };
    Some(Unwrapped {
        script: Some(script),
        ..Unwrapped::default()
    })
}

/// Files a wrapper itself writes, by the values of its options: `strace -o FILE`, `time -o
/// FILE`, `script FILE`, `logsave FILE`. A value starting with `|` or `!` (strace's pipe to a
/// command) is returned as written.
pub(crate) fn wrapper_outputs(cmd: &Command) -> Vec<String> {
    let args = &cmd.args;
    match cmd.program.as_str() {
        "strace" | "ltrace" | "time" => {
            let Some((short, long, positionals)) = wrapper_options(&cmd.program, args) else {
                return Vec::new();
            };
            let end = command_start(args, short, long, positionals).unwrap_or(args.len());
            option_values(&args[..end], short, long, "o", &["--output"])
                .0
                .into_iter()
                .map(str::to_owned)
                .collect()
        }
        "script" => {
            let (mut out, operands) = option_values(
                args,
                "cEBIOTmo",
                &[
                    "--command",
                    "--echo",
                    "--log-io",
                    "--log-in",
                    "--log-out",
                    "--log-timing",
                    "--logging-format",
                    "--output-limit",
                ],
                "BIOT",
                &["--log-io", "--log-in", "--log-out", "--log-timing"],
            );
            // `script [OPTIONS] [FILE]`: the typescript file.
            out.extend(operands.into_iter().take(1));
            out.into_iter().map(str::to_owned).collect()
        }
        "logsave" => option_values(args, "", &[], "", &[])
            .1
            .into_iter()
            .take(1)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}
