//! Wrappers that change what the command starts with: its environment (`env NAME=V -u NAME
//! -C DIR -S LINE CMD`, `exec -c CMD`) and its loader (`ld.so --preload LIB PROG`, checked as
//! `LD_PRELOAD` is).
//!
//! Owns: these parsers. Must not touch: what the variables mean (the walker and the rules on
//! variables judge them).

use super::args::{command_start, quoted};
use super::Unwrapped;

/// Whether `exec`'s options include `-c` (run with an empty environment).
pub(super) fn exec_clears_env(args: &[String]) -> bool {
    args.iter()
        .take_while(|a| a.starts_with('-'))
        .any(|a| a.contains('c'))
}

/// `exec -c CMD`: CMD, with an empty environment.
pub(super) fn unwrap_exec_clean(args: &[String]) -> Option<Unwrapped> {
    let start = command_start(args, "a", &[], 0)?;
    Some(Unwrapped {
        argv: args[start..].to_vec(),
        env: vec!["(all)".to_owned()],
        ..Unwrapped::default()
    })
}

/// The dynamic loader run as a program (`/lib64/ld-linux-x86-64.so.2 PROG`).
pub(super) fn is_dynamic_loader(program: &str) -> bool {
    program == "ld.so"
        || program.starts_with("ld-linux")
        || program.starts_with("ld-musl-")
        || program.starts_with("ld64.so")
}

/// `ld.so [--preload LIB] [--library-path P] PROG ARGS…`: PROG, with LIB preloaded into it
/// (as `LD_PRELOAD` does: checked as that variable is).
pub(super) fn unwrap_loader(args: &[String]) -> Option<Unwrapped> {
    if args.iter().any(|a| {
        matches!(
            a.as_str(),
            "--list"
                | "--verify"
                | "--help"
                | "--version"
                | "--list-tunables"
                | "--list-diagnostics"
        )
    }) {
        return None;
    }
    let with_value = &[
        "--library-path",
        "--preload",
        "--audit",
        "--argv0",
        "--inhibit-rpath",
        "--glibc-hwcaps-prepend",
        "--glibc-hwcaps-mask",
    ];
    let start = command_start(args, "", with_value, 0)?;
    let mut preload = Vec::new();
    for (i, a) in args[..start].iter().enumerate() {
        if a == "--preload" || a == "--audit" {
            preload.extend(args.get(i + 1).cloned());
        } else if let Some(v) = a
            .strip_prefix("--preload=")
            .or_else(|| a.strip_prefix("--audit="))
        {
            preload.push(v.to_owned());
        }
    }
    let argv = args[start..].to_vec();
    if preload.is_empty() {
        return Some(Unwrapped {
            argv,
            ..Unwrapped::default()
        });
    }
    Some(Unwrapped {
        script: Some(format!(
            "LD_PRELOAD={} {}",
            quoted(&[preload.join(":")]),
            quoted(&argv)
        )),
        ..Unwrapped::default()
    })
}

pub(super) fn unwrap_env(args: &[String]) -> Option<Unwrapped> {
    let mut out = Unwrapped::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let next = args.get(i + 1).cloned();
        match a {
            "--" => {
                i += 1;
                break;
            }
            "-" | "-i" | "--ignore-environment" => out.env.push("(all)".to_owned()),
            "-u" | "--unset" => {
                out.env.extend(next);
                i += 1;
            }
            "-C" | "--chdir" => {
                out.chdir = next;
                i += 1;
            }
            "-S" | "--split-string" => {
                out.script = Some(args[i + 1..].join(" "));
                return Some(out);
            }
            _ if a.starts_with("--unset=") => out.env.push(a["--unset=".len()..].to_owned()),
            _ if a.starts_with("--chdir=") => out.chdir = Some(a["--chdir=".len()..].to_owned()),
            _ if a.starts_with("-u") && a.len() > 2 => out.env.push(a[2..].to_owned()),
            _ if a.starts_with("-C") && a.len() > 2 => out.chdir = Some(a[2..].to_owned()),
            _ if a.starts_with("-S") && a.len() > 2 => {
                let mut script = vec![a[2..].to_owned()];
                script.extend(args[i + 1..].iter().cloned());
                out.script = Some(script.join(" "));
                return Some(out);
            }
            _ if a.starts_with('-') && a.len() > 1 && !a.starts_with("--") => {
                if a[1..].contains('i') {
                    out.env.push("(all)".to_owned());
                }
            }
            _ if a.starts_with("--") => {}
            _ => match a.split_once('=') {
                Some((name, _)) if !name.is_empty() => out.env.push(name.to_owned()),
                _ => break,
            },
        }
        i += 1;
    }
    out.argv = args.get(i..).unwrap_or_default().to_vec();
    // `env` alone prints the environment; `env -u X` alone still changes nothing that runs.
    (!out.argv.is_empty() || !out.env.is_empty()).then_some(out)
}
