//! What common programs do with their arguments: wrappers, nested scripts, files read and written.

use super::shell::{program_name, Command};

/// Shells whose `-c` argument (or stdin) is a script.
const SHELLS: &[&str] = &[
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
];

/// Programs that do not reveal the content of the files named as their operands, so naming a
/// secret file there is not reading it. `ssh`/`ssh-add` use a key without printing it.
const NON_READING: &[&str] = &[
    "echo", "printf", "ls", "stat", "test", "[", "[[", "touch", "mkdir", "rmdir", "rm", "unlink",
    "chmod", "chown", "chgrp", "cd", "pushd", "popd", "which", "type", "realpath", "readlink",
    "basename", "dirname", "export", "unset", "declare", "typeset", "local", "readonly", "true",
    "false", "sleep", "kill", "ssh", "ssh-add", "find", "file", "ln", "tee", "shred", "truncate",
];

/// Programs whose operands are all files they modify or delete.
const MODIFIERS: &[&str] = &[
    "tee", "touch", "truncate", "rm", "unlink", "rmdir", "shred", "chmod", "chown", "chgrp",
];

/// Programs whose first operand is a pattern or script, not a file, unless `-e`/`-f` give it.
const PATTERN_FIRST: &[&str] = &[
    "grep", "egrep", "fgrep", "rg", "ag", "ack", "sed", "gsed", "awk", "gawk", "mawk", "jq",
];

/// Programs whose last operand (or `-t DIR`) is a destination they write.
const COPIERS: &[&str] = &["cp", "mv", "install", "ln", "rsync", "scp"];

/// What a wrapper runs.
#[derive(Debug, Default, PartialEq)]
pub struct Unwrapped {
    /// The wrapped command, program first (empty when it is a script instead).
    pub argv: Vec<String>,
    /// Variables the wrapper sets or unsets for it.
    pub env: Vec<String>,
    /// A directory the wrapper changes to first (`env -C`).
    pub chdir: Option<String>,
    /// A command line the wrapper splits itself (`env -S`).
    pub script: Option<String>,
}

/// If `cmd` runs another command (`sudo rm …`), that command; `None` otherwise.
pub fn unwrap(cmd: &Command) -> Option<Unwrapped> {
    // (short options taking a value, long options taking a value, positionals before the command)
    let (short, long, positionals): (&str, &[&str], usize) = match cmd.program.as_str() {
        "sudo" => (
            "ughpCDrtUT",
            &["--user", "--group", "--host", "--prompt", "--chdir"],
            0,
        ),
        "doas" => ("uC", &[], 0),
        "env" => return unwrap_env(&cmd.args),
        "xargs" => (
            "adEILnPs",
            &[
                "--arg-file",
                "--delimiter",
                "--eof",
                "--max-lines",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            ],
            0,
        ),
        "nohup" | "builtin" | "setsid" | "busybox" => ("", &[], 0),
        "timeout" => ("sk", &["--signal", "--kill-after"], 1),
        "nice" => ("n", &["--adjustment"], 0),
        "ionice" => ("cnpPu", &["--class", "--classdata"], 0),
        "command" if cmd.args.iter().any(|a| a == "-v" || a == "-V") => return None,
        "command" => ("", &[], 0),
        "exec" => ("a", &[], 0),
        "time" => ("fo", &["--format", "--output"], 0),
        "stdbuf" => ("ioe", &["--input", "--output", "--error"], 0),
        _ => return None,
    };
    let start = command_start(&cmd.args, short, long, positionals)?;
    Some(Unwrapped {
        argv: cmd.args[start..].to_vec(),
        ..Unwrapped::default()
    })
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
            _ if a.starts_with('-') && a.len() > 1 => {}
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

/// The script a shell or `eval` runs: `bash -c SCRIPT`, `eval ARGS…`, `sh <<EOF`.
pub fn nested_script(cmd: &Command, stdin_text: Option<&str>) -> Option<String> {
    if cmd.program == "eval" {
        return Some(cmd.args.join(" "));
    }
    if !SHELLS.contains(&cmd.program.as_str()) {
        return None;
    }
    let mut dash_c = false;
    let mut i = 0;
    while i < cmd.args.len() {
        let a = cmd.args[i].as_str();
        if a == "--" {
            i += 1;
            break;
        }
        if matches!(a, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
            continue;
        }
        if a.starts_with("--") {
            i += 1;
            continue;
        }
        match a.strip_prefix(['-', '+']) {
            Some(cluster) if !cluster.is_empty() => dash_c |= cluster.contains('c'),
            _ => break,
        }
        i += 1;
    }
    match cmd.args.get(i) {
        Some(script) if dash_c => Some(script.clone()),
        None => stdin_text.map(str::to_owned),
        _ => None,
    }
}

/// The commands `find … -exec CMD {} ;` runs, with `{}` standing for everything below each
/// starting point.
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
            out.push(argv.iter().map(|a| a.replace("{}", &below)).collect());
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

/// Values of options that name an input file: `--file=PATH`, and curl's `@PATH` and `-T PATH`.
fn option_inputs(cmd: &Command) -> Vec<&str> {
    let mut out = Vec::new();
    let mut prev: &str = "";
    for a in &cmd.args {
        if let Some((_, v)) = a.split_once('=').filter(|_| a.starts_with("--")) {
            out.push(v.strip_prefix('@').unwrap_or(v));
        }
        if cmd.program == "curl" {
            if let Some(i) = a.find('@').filter(|_| prev.starts_with('-')) {
                out.push(&a[i + 1..]);
            }
            if matches!(prev, "-T" | "--upload-file") {
                out.push(a);
            }
        }
        prev = a;
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
    let program = cmd.program.as_str();
    if cmd.wrapper || program.is_empty() || NON_READING.contains(&program) {
        return out;
    }
    if SHELLS.contains(&program) && nested_script(cmd, Some("")).is_some() {
        return out; // `bash -c SCRIPT`: the operand is a script, not a file.
    }
    if program == "dd" {
        out.extend(cmd.args.iter().filter_map(|a| a.strip_prefix("if=")));
        return out;
    }
    let mut ops = operands(cmd);
    let pattern_given = cmd.args.iter().any(|a| {
        matches!(
            a.as_str(),
            "-e" | "-f" | "--regexp" | "--file" | "--expression"
        ) || a.starts_with("--regexp=")
            || a.starts_with("--file=")
            || a.starts_with("--expression=")
    });
    if PATTERN_FIRST.contains(&program) && !pattern_given && !ops.is_empty() {
        ops.remove(0);
    }
    let dest = COPIERS
        .contains(&program)
        .then(|| destination(cmd))
        .flatten();
    out.extend(ops.into_iter().filter(|o| Some(*o) != dest));
    out.extend(option_inputs(cmd));
    out
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
    let ops = operands(cmd);
    if MODIFIERS.contains(&program) || in_place(cmd) {
        out.extend(ops.iter().map(|o| o.to_string()));
    }
    if COPIERS.contains(&program) {
        if let Some(dest) = destination(cmd) {
            // The destination may be a directory: then each source lands inside it.
            for src in ops.iter().filter(|o| **o != dest) {
                out.push(format!(
                    "{}/{}",
                    dest.trim_end_matches('/'),
                    program_name(src)
                ));
            }
            out.push(dest.to_owned());
        }
    }
    let mut prev = "";
    for a in &cmd.args {
        match (program, prev) {
            ("dd", _) => out.extend(a.strip_prefix("of=").map(str::to_owned)),
            ("curl", "-o" | "--output") | ("wget", "-O" | "--output-document") => {
                out.push(a.clone())
            }
            _ => {}
        }
        if let Some(v) = a
            .strip_prefix("--output=")
            .or_else(|| a.strip_prefix("--output-document="))
        {
            out.push(v.to_owned());
        }
        prev = a;
    }
    out
}

/// `sed -i`, `perl -pi -e`: editing the operands in place.
fn in_place(cmd: &Command) -> bool {
    let short_i = |a: &String| a.starts_with('-') && !a.starts_with("--") && a.contains('i');
    match cmd.program.as_str() {
        "sed" | "gsed" => cmd
            .args
            .iter()
            .any(|a| short_i(a) || a.starts_with("--in-place")),
        "perl" => cmd.args.iter().any(short_i),
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
        assert_eq!(argv("command -v rm"), None);
        assert_eq!(argv("ls -l"), None);
        let env = unwrap(&cmd("env -u AHP_WRAP_X -C /tmp A=1 sh")).unwrap();
        assert_eq!(env.argv, ["sh"]);
        assert_eq!(env.env, ["AHP_WRAP_X", "A"]);
        assert_eq!(env.chdir.as_deref(), Some("/tmp"));
    }

    #[test]
    fn reads_and_writes_of_common_programs() {
        assert_eq!(reads(&cmd("cp ~/.ssh/id_rsa /tmp/k")), ["~/.ssh/id_rsa"]);
        assert_eq!(writes(&cmd("cp a .claude/")), [".claude/a", ".claude/"]);
        assert!(reads(&cmd("cp .env.example .env"))
            .iter()
            .all(|r| *r != ".env"));
        assert_eq!(writes(&cmd("sed -i s/a/b/ f")), ["s/a/b/", "f"]);
        assert!(writes(&cmd("sed s/a/b/ f")).is_empty());
        assert_eq!(writes(&cmd("curl https://x -o out")), ["out"]);
        assert!(reads(&cmd("echo ~/.ssh/id_rsa")).is_empty());
        assert_eq!(reads(&cmd("grep -r id_rsa docs/")), ["docs/"]);
        // Option values count as operands (we cannot know every option), which only over-reads.
        assert!(reads(&cmd("grep -e x .env")).contains(&".env"));
        assert_eq!(operands(&cmd("find / -name x -delete")), ["/"]);
        assert_eq!(
            find_execs(&cmd("find /etc -exec rm -rf {} ;")),
            [["rm", "-rf", "/etc/*"]]
        );
    }
}
