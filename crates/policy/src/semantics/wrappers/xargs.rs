//! `xargs` and `parallel`: the command they run, with the arguments they read from their
//! input (unknown now) or are given (`::: A B`), and the file `xargs -a FILE` reads them from.
//!
//! Owns: these two parsers and xargs's options. Must not touch: what the input is (the
//! walker knows the pipeline), or what the command does.

use super::args::{command_start, option_values};
use super::Unwrapped;
use crate::command::UNKNOWN;

/// `parallel CMD ::: A B`: the command with its inputs (unknown when read from a file).
pub(super) fn unwrap_parallel(args: &[String]) -> Unwrapped {
    let mut argv: Vec<String> = args
        .iter()
        .take_while(|a| *a != ":::" && *a != "::::")
        .skip_while(|a| a.starts_with('-'))
        .cloned()
        .collect();
    // `::: A B` gives the inputs; `::::` reads them from a file nobody knows now.
    match args.iter().position(|a| a == ":::") {
        Some(i) => argv.extend(
            args[i + 1..]
                .iter()
                .filter(|a| !a.starts_with(":::"))
                .cloned(),
        ),
        None => argv.push(UNKNOWN.to_string()),
    }
    Unwrapped {
        argv,
        ..Unwrapped::default()
    }
}

/// xargs's short options taking a value, and its long ones.
const XARGS_SHORT: &str = "adEeILlnPs";
const XARGS_LONG: &[&str] = &[
    "--arg-file",
    "--delimiter",
    "--eof",
    "--max-lines",
    "--max-args",
    "--max-procs",
    "--max-chars",
    "--process-slot-var",
    "--replace",
];

/// `xargs -a FILE` / `--arg-file=FILE`: the file whose words become the arguments.
pub(crate) fn xargs_arg_files(args: &[String]) -> Vec<&str> {
    let start = command_start(args, XARGS_SHORT, XARGS_LONG, 0).unwrap_or(args.len());
    option_values(
        &args[..start],
        XARGS_SHORT,
        XARGS_LONG,
        "a",
        &["--arg-file"],
    )
    .0
}

pub(super) fn unwrap_xargs(args: &[String]) -> Option<Unwrapped> {
    let start = command_start(args, XARGS_SHORT, XARGS_LONG, 0).unwrap_or(args.len());
    let replace = args[..start]
        .iter()
        .enumerate()
        .find_map(|(i, a)| match a.as_str() {
            "-I" => args.get(i + 1).cloned(),
            "-i" | "--replace" => Some("{}".to_owned()),
            _ => a
                .strip_prefix("-I")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        });
    // With no command xargs runs `echo`. Its input becomes arguments nobody knows now.
    let mut argv: Vec<String> = if start < args.len() {
        args[start..].to_vec()
    } else {
        vec!["echo".to_owned()]
    };
    match replace {
        Some(r) => {
            for a in argv.iter_mut().skip(1) {
                *a = a.replace(&r, &UNKNOWN.to_string());
            }
        }
        None => argv.push(UNKNOWN.to_string()),
    }
    Some(Unwrapped {
        argv,
        ..Unwrapped::default()
    })
}
