//! What common programs do with their arguments, as data: which operands they read (and
//! reveal), write, delete; which run another command; which read whole trees.
//!
//! A program not in the table is assumed to read its operands, which only matters for words
//! that name a protected asset: an unknown program's arguments are not all file reads.

use std::collections::HashMap;
use std::sync::LazyLock;

use super::shell::{program_name, Command, UNKNOWN};

/// What a program does with its operands (non-option arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operands {
    /// Reads them and may reveal their content (`cat`, `base64`, `scp`).
    Read,
    /// The first operand is a pattern or a program, the rest are read (`grep`, `sed`, `awk`).
    PatternThenRead,
    /// Names them without revealing their content (`ls`, `stat`, `echo`, `ssh -i`).
    Name,
    /// Modifies or removes them (`rm`, `touch`, `chmod`, `tee`).
    Modify,
    /// Reads the sources and writes the last operand or `-t DIR` (`cp`, `mv`, `ln`).
    Copy,
}

/// One program's entry in the table.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub operands: Operands,
    /// An unknown operand matters (the program reads, writes, deletes or signals it).
    pub sensitive: bool,
    /// Reads whole directory trees: always (`tar`), or with one of these options.
    pub recursive: Recursive,
}

#[derive(Debug, Clone, Copy)]
pub enum Recursive {
    Never,
    Always,
    With(&'static [&'static str]),
}

const fn spec(operands: Operands, sensitive: bool, recursive: Recursive) -> Spec {
    Spec {
        operands,
        sensitive,
        recursive,
    }
}

use Operands::*;
use Recursive::{Always, Never, With};

const GREP_R: Recursive = With(&["-r", "-R", "--recursive", "--dereference-recursive"]);
const CP_R: Recursive = With(&["-r", "-R", "-a", "--recursive", "--archive"]);
const RG_HIDDEN: Recursive = With(&["--hidden", "-uu", "-uuu", "-.", "--unrestricted"]);

/// The table. Names are basenames; the same entry serves every name in its list.
const TABLE: &[(&[&str], Spec)] = &[
    (
        &[
            "cat",
            "tac",
            "less",
            "more",
            "most",
            "head",
            "tail",
            "nl",
            "od",
            "xxd",
            "hexdump",
            "hd",
            "strings",
            "base64",
            "base32",
            "basenc",
            "cut",
            "sort",
            "uniq",
            "paste",
            "diff",
            "cmp",
            "comm",
            "fold",
            "fmt",
            "pr",
            "expand",
            "iconv",
            "bat",
            "batcat",
            "column",
            "vim",
            "vi",
            "view",
            "nano",
            "emacs",
            "ed",
            "ex",
            "pico",
            "code",
            "jq",
            "yq",
            "split",
            "gpg",
            "openssl",
            "xclip",
            "xsel",
            "pbcopy",
            "wl-copy",
            "nc",
            "ncat",
            "socat",
            "mail",
            "sendmail",
            "uuencode",
            "look",
            "join",
            "csplit",
            "sqlite3",
            "python3-base64",
            "gzip",
            "bzip2",
            "xz",
            "zstd",
            "lz4",
            "7z",
            "rar",
            "wc",
            "md5sum",
            "sha1sum",
            "sha256sum",
            "sha512sum",
            "b2sum",
            "cksum",
            "source",
            ".",
        ],
        spec(Read, true, Never),
    ),
    (
        &["grep", "egrep", "fgrep", "zgrep"],
        spec(PatternThenRead, true, GREP_R),
    ),
    (&["rg"], spec(PatternThenRead, true, RG_HIDDEN)),
    (
        &["ag", "ack"],
        spec(
            PatternThenRead,
            true,
            With(&["--hidden", "-u", "--unrestricted"]),
        ),
    ),
    (
        &["sed", "gsed", "awk", "gawk", "mawk", "nawk", "busybox-awk"],
        spec(PatternThenRead, true, Never),
    ),
    (
        &["tar", "bsdtar", "zip", "cpio", "pax"],
        spec(Read, true, Always),
    ),
    (&["scp", "rsync", "rclone"], spec(Copy, true, Always)),
    (
        &["cp", "mv", "install", "ln", "link", "gcp"],
        spec(Copy, true, CP_R),
    ),
    (
        &[
            "rm", "unlink", "rmdir", "shred", "truncate", "touch", "chmod", "chown", "chgrp",
            "chattr", "tee", "setfacl", "wipe", "srm",
        ],
        spec(Modify, true, Never),
    ),
    (&["dd"], spec(Name, true, Never)),
    (&["kill", "pkill", "killall"], spec(Name, true, Never)),
    (
        &["curl", "wget", "http", "https", "xh", "aria2c"],
        spec(Name, true, Never),
    ),
    (
        &[
            "echo",
            "printf",
            "ls",
            "stat",
            "test",
            "[",
            "[[",
            "mkdir",
            "cd",
            "pushd",
            "popd",
            "which",
            "type",
            "realpath",
            "readlink",
            "basename",
            "dirname",
            "export",
            "unset",
            "declare",
            "typeset",
            "local",
            "readonly",
            "true",
            "false",
            "sleep",
            "ssh",
            "ssh-add",
            "ssh-keygen",
            "find",
            "file",
            "du",
            "df",
            "tree",
            "exa",
            "eza",
            "lsattr",
            "getfacl",
            "namei",
            "id",
            "whoami",
            "date",
            "pwd",
            "git",
            "mktemp",
        ],
        spec(Name, false, Never),
    ),
];

static INDEX: LazyLock<HashMap<&'static str, Spec>> = LazyLock::new(|| {
    TABLE
        .iter()
        .flat_map(|(names, spec)| names.iter().map(move |n| (*n, *spec)))
        .collect()
});

/// The entry of `program`, or the default for programs we do not know.
pub fn spec_of(program: &str) -> Spec {
    INDEX
        .get(program)
        .copied()
        .unwrap_or(spec(Read, false, Never))
}

/// Shells whose `-c` argument (or stdin, or script operand) is a script.
pub const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "rbash",
    "busybox-sh",
    "yash",
    "tcsh",
    "csh",
];

/// What a wrapper runs.
#[derive(Debug, Default, PartialEq)]
pub struct Unwrapped {
    /// The wrapped command, program first (empty when it is a script instead).
    pub argv: Vec<String>,
    /// Variables the wrapper sets or unsets for it; `(all)` when it clears them all.
    pub env: Vec<String>,
    /// A directory the wrapper changes to first (`env -C`).
    pub chdir: Option<String>,
    /// A command line the wrapper has a shell run (`env -S`, `script -c`, `watch`, `su -c`).
    pub script: Option<String>,
}

/// If `cmd` runs another command (`sudo rm …`), that command; `None` otherwise.
pub fn unwrap(cmd: &Command) -> Option<Unwrapped> {
    // (short options taking a value, long options taking a value, positionals before the command)
    let (short, long, positionals): (&str, &[&str], usize) = match cmd.program.as_str() {
        "sudo" => {
            if let Some(u) = sudo_shell(&cmd.args) {
                return Some(u);
            }
            (
                "ughpCDrtUT",
                &[
                    "--user",
                    "--group",
                    "--host",
                    "--prompt",
                    "--chdir",
                    "--close-from",
                ],
                0,
            )
        }
        "doas" => ("uC", &[], 0),
        "env" => return unwrap_env(&cmd.args),
        "xargs" => return unwrap_xargs(&cmd.args),
        "parallel" => {
            let mut argv: Vec<String> = cmd
                .args
                .iter()
                .take_while(|a| *a != ":::" && *a != "::::")
                .skip_while(|a| a.starts_with('-'))
                .cloned()
                .collect();
            // `::: A B` gives the inputs; `::::` reads them from a file nobody knows now.
            match cmd.args.iter().position(|a| a == ":::") {
                Some(i) => argv.extend(
                    cmd.args[i + 1..]
                        .iter()
                        .filter(|a| !a.starts_with(":::"))
                        .cloned(),
                ),
                None => argv.push(UNKNOWN.to_string()),
            }
            return Some(Unwrapped {
                argv,
                ..Unwrapped::default()
            });
        }
        "nohup" | "builtin" | "busybox" | "unbuffer" | "catchsegv" | "proxychains"
        | "proxychains4" | "torsocks" | "firejail" | "fakeroot" | "faketime" => ("", &[], 0),
        "setsid" => ("", &[], 0),
        "timeout" => ("sk", &["--signal", "--kill-after"], 1),
        "nice" => ("n", &["--adjustment"], 0),
        "ionice" => ("cnpPu", &["--class", "--classdata"], 0),
        "chrt" => ("", &[], 1),
        "taskset" if cmd.args.iter().any(|a| a == "-p" || a == "--pid") => return None,
        "taskset" if cmd.args.iter().any(|a| a == "-c" || a == "--cpu-list") => {
            ("c", &["--cpu-list"], 0)
        }
        "taskset" => ("", &[], 1),
        "flock" => return unwrap_flock(&cmd.args),
        "strace" | "ltrace" => (
            "oesSpuIEPXabO",
            &["--output", "--trace", "--signal", "--user"],
            0,
        ),
        "chroot" => ("", &["--userspec", "--groups"], 1),
        "unshare" | "nsenter" => ("tSGw", &["--target", "--setuid", "--setgid", "--wd"], 0),
        "script" => return unwrap_script(&cmd.args),
        "watch" => return unwrap_watch(&cmd.args),
        "su" => return unwrap_su(&cmd.args),
        "runuser" => return unwrap_su(&cmd.args),
        "command" if cmd.args.iter().any(|a| a == "-v" || a == "-V") => return None,
        "command" => ("", &[], 0),
        // `exec -c CMD` runs CMD with an empty environment.
        "exec"
            if cmd
                .args
                .iter()
                .take_while(|a| a.starts_with('-'))
                .any(|a| a.contains('c')) =>
        {
            let start = command_start(&cmd.args, "a", &[], 0)?;
            return Some(Unwrapped {
                argv: cmd.args[start..].to_vec(),
                env: vec!["(all)".to_owned()],
                ..Unwrapped::default()
            });
        }
        "exec" => ("a", &[], 0),
        "time" => ("fo", &["--format", "--output"], 0),
        "stdbuf" => ("ioe", &["--input", "--output", "--error"], 0),
        "ahp-wrap" => return unwrap_self(&cmd.args),
        // Detached runners: what they run is analysed like any command (a rule also
        // escalates detaching itself).
        "systemd-run" => (
            "pMEuGpHr",
            &[
                "--unit",
                "--property",
                "--description",
                "--slice",
                "--uid",
                "--gid",
                "--working-directory",
                "--setenv",
                "--on-calendar",
                "--on-active",
                "--machine",
                "--host",
                "-p",
                "-E",
            ],
            0,
        ),
        "screen" => ("SsTcepLlhX", &[], 0),
        "daemonize" => ("aceEiloprptuv", &[], 0),
        "tmux" => return unwrap_tmux(&cmd.args),
        // Package runners run the named program.
        "npx" | "bunx" | "uvx" | "pnpx" => ("p", &["--package", "-p", "--from", "--with"], 0),
        "npm" | "pnpm" | "yarn" | "bun" | "pipx" | "uv"
            if matches!(
                cmd.args.first().map(String::as_str),
                Some("exec" | "dlx" | "x" | "run" | "tool")
            ) && !(cmd.program == "npm" && cmd.args.first().is_some_and(|a| a == "run"))
                && !(cmd.program != "pipx" && cmd.args.first().is_some_and(|a| a == "run")) =>
        {
            let rest = &cmd.args[1..];
            let rest = if cmd.program == "uv" && rest.first().is_some_and(|a| a == "run") {
                &rest[1..]
            } else {
                rest
            };
            let start = command_start(rest, "p", &["--package", "-p", "--from", "--with"], 0)?;
            return Some(Unwrapped {
                argv: rest[start..].to_vec(),
                ..Unwrapped::default()
            });
        }
        _ => return None,
    };
    let start = command_start(&cmd.args, short, long, positionals)?;
    Some(Unwrapped {
        argv: cmd.args[start..].to_vec(),
        ..Unwrapped::default()
    })
}

/// `sudo -s CMD` / `sudo -i CMD` run CMD through a shell.
fn sudo_shell(args: &[String]) -> Option<Unwrapped> {
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

/// `ahp-wrap [OPTIONS] -- AGENT…`: the agent, run under the wrapper.
fn unwrap_self(args: &[String]) -> Option<Unwrapped> {
    let pos = args.iter().position(|a| a == "--")?;
    let argv = args[pos + 1..].to_vec();
    (!argv.is_empty()).then(|| Unwrapped {
        argv,
        ..Unwrapped::default()
    })
}

/// `tmux new-session -d "CMD"`, `tmux send-keys -t x "CMD" Enter`: a shell command line.
fn unwrap_tmux(args: &[String]) -> Option<Unwrapped> {
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

fn unwrap_xargs(args: &[String]) -> Option<Unwrapped> {
    let start = command_start(
        args,
        "adEeILlnPs",
        &[
            "--arg-file",
            "--delimiter",
            "--eof",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
            "--replace",
        ],
        0,
    )
    .unwrap_or(args.len());
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

fn unwrap_flock(args: &[String]) -> Option<Unwrapped> {
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

fn unwrap_script(args: &[String]) -> Option<Unwrapped> {
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

fn unwrap_watch(args: &[String]) -> Option<Unwrapped> {
    let start = command_start(args, "ndqc", &["--interval", "--differences"], 0)?;
    Some(Unwrapped {
        script: Some(args[start..].join(" ")),
        ..Unwrapped::default()
    })
}

fn unwrap_su(args: &[String]) -> Option<Unwrapped> {
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

/// Index of the first argument after the options (and `positionals` plain arguments).
fn command_start(
    args: &[String],
    short: &str,
    long: &[&str],
    mut positionals: usize,
) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            i += 1;
            break;
        }
        if let Some(name) = a.strip_prefix("--") {
            if !name.contains('=') && long.contains(&a) {
                i += 1;
            }
        } else if let Some(cluster) = a.strip_prefix('-').filter(|c| !c.is_empty()) {
            // `-uroot` carries its value; `-u root` takes the next word.
            if let Some(pos) = cluster.find(|c| short.contains(c)) {
                if pos + 1 == cluster.len() {
                    i += 1;
                }
            }
        } else if positionals > 0 {
            positionals -= 1;
        } else {
            return Some(i);
        }
        i += 1;
    }
    (i < args.len()).then_some(i)
}

fn unwrap_env(args: &[String]) -> Option<Unwrapped> {
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

/// The script a shell runs: `bash -c SCRIPT` (options parsed as bash parses its own).
pub fn shell_script(args: &[String]) -> Option<String> {
    let (dash_c, rest) = shell_options(args);
    match rest.first() {
        Some(script) if dash_c => Some(script.clone()),
        _ => None,
    }
}

/// A shell's `-c` flag, and the arguments after its options.
pub fn shell_options(args: &[String]) -> (bool, &[String]) {
    let mut dash_c = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if matches!(a, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
            continue;
        }
        if a == "--command" {
            dash_c = true;
            i += 1;
            continue;
        }
        if a.starts_with("--") {
            i += 1;
            continue;
        }
        match a.strip_prefix(['-', '+']) {
            Some(cluster) if !cluster.is_empty() => {
                dash_c |= cluster.contains('c') && a.starts_with('-');
                // `-o opt` inside a cluster (`-eo pipefail`) takes the next word.
                if cluster.ends_with('o') || cluster.ends_with('O') {
                    i += 1;
                }
            }
            _ => break,
        }
        i += 1;
    }
    (dash_c, args.get(i..).unwrap_or_default())
}

/// The commands `find … -exec CMD {} ;` runs, with `{}` standing for everything below each
/// starting point. Deleting programs run by `find` act on every file below: recursive.
pub fn find_execs(cmd: &Command) -> Vec<Vec<String>> {
    if cmd.program != "find" {
        return Vec::new();
    }
    let starts = find_starts(&cmd.args);
    let mut out = Vec::new();
    let mut args = cmd.args.iter();
    while let Some(a) = args.next() {
        if !matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let argv: Vec<&String> = args
            .by_ref()
            .take_while(|a| *a != ";" && *a != "+")
            .collect();
        for start in &starts {
            let below = format!("{}/*", start.trim_end_matches('/'));
            let mut inner: Vec<String> = argv.iter().map(|a| a.replace("{}", &below)).collect();
            if inner
                .first()
                .is_some_and(|p| matches!(program_name(p).as_str(), "rm" | "unlink" | "shred"))
            {
                inner.insert(1, "-r".to_owned());
            }
            out.push(inner);
        }
    }
    out
}

fn find_starts(args: &[String]) -> Vec<&str> {
    let starts: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !matches!(*a, "-H" | "-L" | "-P"))
        .take_while(|a| !a.starts_with(['-', '(', '!']))
        .collect();
    if starts.is_empty() {
        vec!["."]
    } else {
        starts
    }
}

/// The non-option arguments (all of them after `--`); `find`'s are its starting points.
pub fn operands(cmd: &Command) -> Vec<&str> {
    if cmd.program == "find" {
        return find_starts(&cmd.args);
    }
    let mut out = Vec::new();
    let mut options_done = false;
    for a in &cmd.args {
        if !options_done && a == "--" {
            options_done = true;
        } else if options_done || !a.starts_with('-') || a == "-" {
            out.push(a.as_str());
        }
    }
    out
}

/// The destination of a copy-like command: `-t DIR`, or its last operand.
fn destination(cmd: &Command) -> Option<&str> {
    let mut args = cmd.args.iter();
    while let Some(a) = args.next() {
        if a == "-t" || a == "--target-directory" {
            return args.next().map(String::as_str);
        }
        if let Some(dir) = a.strip_prefix("--target-directory=") {
            return Some(dir);
        }
    }
    operands(cmd).last().copied()
}

/// Values of options that name an input file: `--file=PATH`, curl's `@PATH`, `<PATH`, `-T`.
fn option_inputs(cmd: &Command) -> Vec<&str> {
    let mut out = Vec::new();
    let mut prev: &str = "";
    let net = matches!(
        cmd.program.as_str(),
        "curl" | "wget" | "http" | "https" | "xh"
    );
    for a in &cmd.args {
        if let Some((_, v)) = a.split_once('=').filter(|_| a.starts_with("--")) {
            out.push(v.strip_prefix('@').unwrap_or(v));
        }
        if net {
            if prev.starts_with('-') {
                if let Some(i) = a.find(['@', '<']) {
                    out.push(&a[i + 1..]);
                }
            }
            if let Some(i) = a.find("=@").or_else(|| a.find(":=@")) {
                out.push(&a[i + 2..]);
            } else if let Some(f) = a.strip_prefix('@') {
                out.push(f);
            }
            if matches!(prev, "-T" | "--upload-file" | "--post-file" | "--body-file") {
                out.push(a);
            }
        }
        if cmd.program == "openssl" && matches!(prev, "-in" | "-inkey" | "-key" | "-infiles") {
            out.push(a);
        }
        prev = a;
    }
    out
}

/// Options whose value is something other than a file to read.
fn value_options(program: &str) -> &'static [&'static str] {
    match program {
        "curl" => &[
            "-o",
            "--output",
            "-H",
            "--header",
            "-X",
            "--request",
            "-u",
            "--user",
            "-A",
            "-e",
            "-x",
            "-w",
            "-m",
            "--max-time",
            "--connect-timeout",
            "-K",
            "--config",
            "--data-urlencode",
            "-d",
            "--data",
            "--data-binary",
            "--data-raw",
            "-F",
            "--form",
            "-T",
            "--upload-file",
        ],
        "wget" => &[
            "-O",
            "--output-document",
            "-P",
            "--directory-prefix",
            "-o",
            "--output-file",
            "--header",
            "-U",
            "--user-agent",
            "--post-data",
            "--post-file",
            "--body-file",
        ],
        "openssl" => &[
            "-out",
            "-keyout",
            "-in",
            "-inkey",
            "-key",
            "-subj",
            "-days",
            "-newkey",
            "-passin",
            "-passout",
            "-config",
            "-extensions",
            "-addext",
            "-infiles",
            "-name",
            "-certfile",
            "-CA",
            "-CAkey",
            "-set_serial",
        ],
        "ssh" | "scp" | "ssh-keygen" => &[
            "-i", "-F", "-o", "-p", "-P", "-l", "-J", "-c", "-f", "-C", "-t", "-b", "-N", "-S",
        ],
        "grep" | "egrep" | "fgrep" | "rg" => &[
            "-e",
            "-f",
            "--regexp",
            "--file",
            "-m",
            "-A",
            "-B",
            "-C",
            "--max-count",
            "-g",
            "--glob",
            "-t",
            "--type",
            "--include",
            "--exclude",
        ],
        "tar" => &[
            "-f",
            "--file",
            "-C",
            "--directory",
            "-T",
            "--files-from",
            "-X",
            "--exclude-from",
        ],
        "git" => &["-C", "-c", "--git-dir", "--work-tree"],
        _ => &[],
    }
}

/// The operands of a command with the values of its value-taking options removed.
fn plain_operands(cmd: &Command) -> Vec<&str> {
    let takes = value_options(&cmd.program);
    if takes.is_empty() {
        return operands(cmd);
    }
    let mut out = Vec::new();
    let mut skip = false;
    let mut done = false;
    for a in &cmd.args {
        if skip {
            skip = false;
            continue;
        }
        if done || !a.starts_with('-') || a == "-" {
            out.push(a.as_str());
        } else if a == "--" {
            done = true;
        } else if takes.contains(&a.as_str()) {
            skip = true;
        }
    }
    out
}

/// Files whose content the command may read (and reveal).
pub fn reads(cmd: &Command) -> Vec<&str> {
    let mut out: Vec<&str> = cmd
        .redirects
        .iter()
        .filter(|r| r.reads)
        .map(|r| r.target.as_str())
        .collect();
    if let super::shell::Stdin::File(f) = &cmd.stdin {
        if !out.contains(&f.as_str()) {
            out.push(f);
        }
    }
    let program = cmd.program.as_str();
    if cmd.wrapper || program.is_empty() || super::shell::is_unknown(program) {
        return out;
    }
    if SHELLS.contains(&program) {
        return out; // a shell's operand is a script it runs (see `code`), not data it shows.
    }
    if program == "git" {
        return out; // see `git_reads` in the code module: only some subcommands show files.
    }
    out.extend(option_inputs(cmd));
    if program == "dd" {
        out.extend(cmd.args.iter().filter_map(|a| a.strip_prefix("if=")));
    }
    let spec = spec_of(program);
    let mut ops = plain_operands(cmd);
    match spec.operands {
        Name | Modify => return out,
        PatternThenRead => {
            let pattern_given = cmd.args.iter().any(|a| {
                matches!(
                    a.as_str(),
                    "-e" | "-f" | "--regexp" | "--file" | "--expression"
                ) || a.starts_with("--regexp=")
                    || a.starts_with("--file=")
                    || a.starts_with("--expression=")
            });
            if !pattern_given && !ops.is_empty() {
                ops.remove(0);
            }
        }
        Copy => {
            let dest = destination(cmd);
            ops.retain(|o| Some(*o) != dest);
        }
        Read => {
            if program == "openssl" {
                return out; // only `-in`/`-inkey` values (above); `-keyout`/`-out` are outputs.
            }
        }
    }
    out.extend(ops);
    out
}

/// Whether the command reads its operands as whole trees.
pub fn recursive(cmd: &Command) -> bool {
    match spec_of(&cmd.program).recursive {
        Never => false,
        Always => true,
        With(flags) => cmd.args.iter().any(|a| {
            flags.contains(&a.as_str())
                || (a.starts_with('-')
                    && !a.starts_with("--")
                    && flags
                        .iter()
                        .filter(|f| f.len() == 2 && !f.starts_with("--"))
                        .any(|f| a[1..].contains(&f[1..])))
        }),
    }
}

/// Files the command may create, modify or delete.
pub fn writes(cmd: &Command) -> Vec<String> {
    let mut out: Vec<String> = cmd
        .redirects
        .iter()
        .filter(|r| r.writes)
        .map(|r| r.target.clone())
        .collect();
    if cmd.wrapper {
        return out;
    }
    let program = cmd.program.as_str();
    let spec = spec_of(program);
    let ops = operands(cmd);
    if spec.operands == Modify || in_place(cmd) {
        out.extend(ops.iter().map(|o| o.to_string()));
    }
    if spec.operands == Copy {
        if let Some(dest) = destination(cmd) {
            // The destination may be a directory: then each source lands inside it.
            for src in ops.iter().filter(|o| **o != dest) {
                out.push(format!(
                    "{}/{}",
                    dest.trim_end_matches('/'),
                    program_name(src)
                ));
                if program == "mv" {
                    out.push(src.to_string()); // moved away: changed where it was
                }
            }
            out.push(dest.to_owned());
        }
    }
    let mut prev = "";
    for a in &cmd.args {
        match (program, prev) {
            ("dd", _) => out.extend(a.strip_prefix("of=").map(str::to_owned)),
            ("curl", "-o" | "--output")
            | ("wget", "-O" | "--output-document")
            | ("openssl", "-out" | "-keyout")
            | ("tar" | "bsdtar", "-C" | "--directory")
            | ("unzip", "-d") => out.push(a.clone()),
            _ => {}
        }
        if let Some(v) = a
            .strip_prefix("--output=")
            .or_else(|| a.strip_prefix("--output-document="))
            .or_else(|| a.strip_prefix("--directory=").filter(|_| program == "tar"))
        {
            out.push(v.to_owned());
        }
        prev = a;
    }
    // Unpacking writes into the directory (`tar -x -C DIR`, `unzip -d DIR`): mark it as a
    // tree, so that a rule on files inside it matches.
    if matches!(program, "tar" | "bsdtar" | "unzip") {
        let extract = program == "unzip"
            || cmd.args.iter().any(|a| {
                a == "--extract"
                    || a == "--get"
                    || (a.starts_with('-') && !a.starts_with("--") && a.contains('x'))
                    || (!a.starts_with('-')
                        && a.contains('x')
                        && a.len() <= 6
                        && a.chars().all(|c| c.is_ascii_alphabetic()))
            });
        if extract {
            let dirs: Vec<String> = out
                .iter()
                .map(|d| format!("{}/*", d.trim_end_matches('/')))
                .collect();
            out.extend(dirs);
        } else {
            out.clear();
            out.extend(
                cmd.redirects
                    .iter()
                    .filter(|r| r.writes)
                    .map(|r| r.target.clone()),
            );
        }
    }
    if program == "crontab" && !cmd.args.iter().any(|a| a == "-l") {
        out.push("/var/spool/cron/crontabs/user".to_owned());
    }
    out
}

/// Paths the command removes as whole trees: `rm -r`, `find -delete`, `rsync --delete`,
/// `tar --remove-files`, `mv` of a directory away.
pub fn deletes(cmd: &Command) -> Vec<&str> {
    if cmd.wrapper {
        return Vec::new();
    }
    let has = |pred: &dyn Fn(&str) -> bool| cmd.args.iter().any(|a| pred(a));
    match cmd.program.as_str() {
        "rm" | "shred" | "wipe" | "srm" => {
            let recursive = has(&|a| {
                (a.starts_with('-') && !a.starts_with("--") && a.contains(['r', 'R']))
                    || (a.len() >= 3 && "--recursive".starts_with(a))
                    || a == "--no-preserve-root"
            });
            if recursive {
                operands(cmd)
            } else {
                Vec::new()
            }
        }
        "find" if has(&|a| a == "-delete") => operands(cmd),
        // Programs whose whole job is removing trees (or moving them to the trash).
        "rimraf" | "trash" | "trash-put" | "rmtrash" => operands(cmd),
        "gio"
            if cmd
                .args
                .first()
                .is_some_and(|a| a == "trash" || a == "remove") =>
        {
            operands(cmd).into_iter().skip(1).collect()
        }
        "rsync" if has(&|a| a.starts_with("--delete") || a == "--remove-source-files") => {
            let ops = operands(cmd);
            ops.last().map(|d| vec![*d]).unwrap_or_default()
        }
        "tar" | "bsdtar" if has(&|a| a == "--remove-files") => plain_operands(cmd),
        "mv" => {
            let dest = destination(cmd);
            operands(cmd)
                .into_iter()
                .filter(|o| Some(*o) != dest)
                .collect()
        }
        _ => Vec::new(),
    }
}

/// `sed -i`, `perl -pi -e`, `awk -i inplace`: editing the operands in place.
fn in_place(cmd: &Command) -> bool {
    let short_i = |a: &String| a.starts_with('-') && !a.starts_with("--") && a.contains('i');
    match cmd.program.as_str() {
        "sed" | "gsed" => cmd
            .args
            .iter()
            .any(|a| short_i(a) || a.starts_with("--in-place")),
        "perl" | "ruby" => cmd.args.iter().any(short_i),
        "awk" | "gawk" => {
            cmd.args
                .windows(2)
                .any(|w| w[0] == "-i" && w[1].contains("inplace"))
                || cmd
                    .args
                    .iter()
                    .any(|a| a == "--inplace" || a == "-iinplace")
        }
        "patch" | "ed" | "ex" => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(line: &str) -> Command {
        let mut words = line.split_whitespace().map(str::to_owned);
        Command {
            program: words.next().unwrap(),
            args: words.collect(),
            ..Command::default()
        }
    }

    #[test]
    fn wrappers_unwrap_past_their_options() {
        let argv = |line: &str| unwrap(&cmd(line)).map(|u| u.argv.join(" "));
        assert_eq!(
            argv("sudo -u root -E rm -rf /").as_deref(),
            Some("rm -rf /")
        );
        assert_eq!(argv("timeout -s KILL 10 rm x").as_deref(), Some("rm x"));
        assert_eq!(
            argv("nice -n 5 xargs -I {} rm {}").as_deref(),
            Some("xargs -I {} rm {}")
        );
        assert_eq!(argv("xargs rm -rf").as_deref(), Some("rm -rf \0"));
        assert_eq!(argv("taskset -c 0 rm x").as_deref(), Some("rm x"));
        assert_eq!(argv("taskset 0x1 rm x").as_deref(), Some("rm x"));
        assert_eq!(argv("flock /tmp/l rm x").as_deref(), Some("rm x"));
        assert_eq!(argv("chroot / rm x").as_deref(), Some("rm x"));
        assert_eq!(argv("strace -f -o /tmp/t rm x").as_deref(), Some("rm x"));
        assert_eq!(
            argv("ahp-wrap --mode observe -- claude -p x").as_deref(),
            Some("claude -p x")
        );
        assert_eq!(argv("command -v rm"), None);
        assert_eq!(argv("ls -l"), None);
        let env = unwrap(&cmd("env -u AHP_WRAP_X -C /tmp A=1 sh")).unwrap();
        assert_eq!(env.argv, ["sh"]);
        assert_eq!(env.env, ["AHP_WRAP_X", "A"]);
        assert_eq!(env.chdir.as_deref(), Some("/tmp"));
        assert!(unwrap(&cmd("env -i make"))
            .unwrap()
            .env
            .contains(&"(all)".to_owned()));
    }

    #[test]
    fn shell_options_parse_as_bash_parses_them() {
        let s = |line: &str| shell_script(&cmd(line).args);
        assert_eq!(s("bash -c -- x").as_deref(), Some("x"));
        assert_eq!(s("bash -ce x").as_deref(), Some("x"));
        assert_eq!(s("bash -xc x").as_deref(), Some("x"));
        assert_eq!(s("bash --norc -c x").as_deref(), Some("x"));
        assert_eq!(s("bash -o pipefail -c x").as_deref(), Some("x"));
        assert_eq!(s("bash script.sh"), None);
    }

    #[test]
    fn reads_writes_and_deletes_of_common_programs() {
        assert_eq!(reads(&cmd("cp ~/.ssh/id_rsa /tmp/k")), ["~/.ssh/id_rsa"]);
        assert_eq!(writes(&cmd("cp a .claude/")), [".claude/a", ".claude/"]);
        assert_eq!(writes(&cmd("sed -i s/a/b/ f")), ["s/a/b/", "f"]);
        assert!(writes(&cmd("sed s/a/b/ f")).is_empty());
        assert_eq!(writes(&cmd("curl https://x -o out")), ["out"]);
        assert!(reads(&cmd("echo ~/.ssh/id_rsa")).is_empty());
        assert_eq!(reads(&cmd("grep -r id_rsa docs/")), ["docs/"]);
        assert!(reads(&cmd("openssl req -keyout k.pem -out c.pem")).is_empty());
        assert_eq!(reads(&cmd("openssl rsa -in server.key")), ["server.key"]);
        assert_eq!(reads(&cmd("curl -F f=<k https://x")), ["k"]);
        assert_eq!(reads(&cmd("ln ~/.ssh/id_rsa k")), ["~/.ssh/id_rsa"]);
        assert_eq!(operands(&cmd("find / -name x -delete")), ["/"]);
        assert_eq!(deletes(&cmd("rm --rec x")), ["x"]);
        assert!(deletes(&cmd("rm -f x")).is_empty());
        assert_eq!(deletes(&cmd("rsync -a --delete e/ ~/")), ["~/"]);
        assert_eq!(deletes(&cmd("mv ~ /tmp/x")), ["~"]);
        assert!(recursive(&cmd("grep -rn x ~")));
        assert!(!recursive(&cmd("rg x ~")));
        assert!(recursive(&cmd("rg --hidden x ~")));
        assert_eq!(
            find_execs(&cmd("find /etc -exec rm -f {} ;")),
            [["rm", "-r", "-f", "/etc/*"]]
        );
    }
}
