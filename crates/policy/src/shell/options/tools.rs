//! Other programs whose options run commands: tar (`--to-command`,
//! `--checkpoint-action=exec=`, `-I`), gdb (`-ex 'shell CMD'`, `-ex 'python CODE'`), expect
//! (`spawn`, `exec`), socat (`EXEC:`, `SYSTEM:`) and fd (`-x`, `-X`).
//!
//! Owns: reading these programs' options. Must not touch: the files they read or write
//! (socat's file addresses, tar's archives: `semantics` tells those) or the commands found.

use std::sync::LazyLock;

use regex::Regex;

use super::super::builtins::Nested;
use super::option_values;

/// tar's `--to-command`, `--checkpoint-action=exec=`, `-I`/`--use-compress-program`,
/// `--info-script`/`--new-volume-script`/`-F`.
pub(super) fn tar_commands(args: &[String]) -> Vec<String> {
    let mut out = option_values(
        args,
        &[
            "--to-command",
            "--use-compress-program",
            "-I",
            "--info-script",
            "--new-volume-script",
            "-F",
            // The remote shell it runs for an archive named `host:path`.
            "--rsh-command",
        ],
    );
    out.extend(
        option_values(args, &["--checkpoint-action"])
            .into_iter()
            .filter_map(|a| a.strip_prefix("exec=").map(str::to_owned)),
    );
    out
}

/// gdb's `-ex`/`-iex`/`--eval-command`: `shell CMD`, `!CMD`, `pipe … | CMD`; `python CODE`
/// as Python.
pub(super) fn gdb_commands(args: &[String], out: &mut Vec<Nested>) -> Vec<String> {
    let mut scripts = Vec::new();
    for c in option_values(
        args,
        &["-ex", "-iex", "--eval-command", "--init-eval-command"],
    ) {
        let c = c.trim();
        if let Some(rest) = c.strip_prefix("shell ").or_else(|| c.strip_prefix('!')) {
            scripts.push(rest.to_owned());
        } else if let Some(code) = c.strip_prefix("python ").or_else(|| c.strip_prefix("py ")) {
            out.push(Nested::Argv(vec![
                "python3".into(),
                "-c".into(),
                code.to_owned(),
            ]));
        } else if let Some((_, cmd)) = c.strip_prefix("pipe ").and_then(|p| p.split_once('|')) {
            scripts.push(cmd.to_owned());
        }
    }
    scripts
}

/// expect's `-c` script: what it `spawn`s and `exec`s.
pub(super) fn expect_commands(args: &[String]) -> Vec<String> {
    static SPAWN: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(r"(?m)(?:^|;|\[)\s*(?:spawn|exec)\s+(?:-\w+\s+)*([^;\]\n]+)")
    });
    option_values(args, &["-c"])
        .iter()
        .flat_map(|s| {
            SPAWN
                .captures_iter(s)
                .map(|c| c[1].trim().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// socat's `EXEC:cmd,opts` and `SYSTEM:cmd,opts` addresses.
pub(super) fn socat_commands(args: &[String]) -> Vec<String> {
    args.iter()
        .filter_map(|a| {
            let (kind, rest) = a.split_once(':')?;
            let kind = kind.to_lowercase();
            (kind == "exec" || kind == "system").then(|| {
                let cmd = rest.split(',').next().unwrap_or_default();
                cmd.trim_matches(['"', '\'']).to_owned()
            })
        })
        .collect()
}

/// `fd PATTERN [ROOT] -x CMD…` / `-X CMD…`: the command, once for everything below the root.
pub(super) fn fd_exec(args: &[String]) -> Option<Vec<String>> {
    let at = args
        .iter()
        .position(|a| matches!(a.as_str(), "-x" | "--exec" | "-X" | "--exec-batch"))?;
    let positionals: Vec<&String> = args[..at].iter().filter(|a| !a.starts_with('-')).collect();
    let root = positionals
        .get(1)
        .map_or(".", |r| r.as_str())
        .trim_end_matches('/');
    let below = format!("{root}/*");
    let mut argv: Vec<String> = args[at + 1..]
        .iter()
        .take_while(|a| *a != ";")
        .cloned()
        .collect();
    if argv.is_empty() {
        return None;
    }
    let mut placed = false;
    for a in &mut argv {
        if a.contains('{') && a.contains('}') {
            *a = below.clone();
            placed = true;
        }
    }
    if !placed {
        argv.push(below);
    }
    if matches!(argv[0].as_str(), "rm" | "unlink" | "shred") {
        argv.insert(1, "-r".to_owned());
    }
    Some(argv)
}

#[cfg(test)]
mod tests {
    use super::super::tests::strings;
    use super::*;

    #[test]
    fn fd_exec_runs_below_its_root() {
        assert_eq!(
            fd_exec(&strings(&["-H", "id_", "/h", "-x", "cat", "{}"])).unwrap(),
            ["cat", "/h/*"]
        );
        assert_eq!(
            fd_exec(&strings(&["x", "-X", "rm", "-f"])).unwrap(),
            ["rm", "-r", "-f", "./*"]
        );
    }
}
