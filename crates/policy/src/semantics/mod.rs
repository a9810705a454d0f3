//! What common programs do with their arguments, as data: which operands they read (and
//! reveal), write, delete; which run another command; which read whole trees.
//!
//! A program not in the table is assumed to read its operands, which only matters for words
//! that name a protected asset: an unknown program's arguments are not all file reads.

mod installs;
mod shells;
mod table;
mod wrappers;

pub(crate) use installs::typosquat;
pub(crate) use shells::{shell_options, shell_script};
use table::value_options;
pub(crate) use table::{spec_of, SHELLS};
pub(crate) use wrappers::unwrap;

use super::shell::{program_name, Command};
use table::Operands::{Copy, Modify, Name, PatternThenRead, Read};
use table::Recursive::{Always, Never, With};

/// The commands `find … -exec CMD {} ;` runs, with `{}` standing for everything below each
/// starting point. Deleting programs run by `find` act on every file below: recursive.
pub(crate) fn find_execs(cmd: &Command) -> Vec<Vec<String>> {
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
pub(crate) fn operands(cmd: &Command) -> Vec<&str> {
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
pub(crate) fn reads(cmd: &Command) -> Vec<&str> {
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
pub(crate) fn recursive(cmd: &Command) -> bool {
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
/// Whether a `chmod` mode leaves group and others nothing and sets no special bit: `600`,
/// `0700`, `go-rwx`, `u=rw,go=`.
fn restrictive_mode(mode: &str) -> bool {
    if mode.chars().all(|c| c.is_digit(8)) && (3..=4).contains(&mode.len()) {
        let digits: Vec<u32> = mode.chars().filter_map(|c| c.to_digit(8)).collect();
        let n = digits.len();
        let special = if n == 4 { digits[0] } else { 0 };
        return special == 0 && digits[n - 2] == 0 && digits[n - 1] == 0;
    }
    mode.split(',').all(|clause| {
        let op_at = clause.find(['+', '-', '=']);
        let Some(at) = op_at else { return false };
        let (who, rest) = clause.split_at(at);
        let op = rest.chars().next().unwrap_or('=');
        let perms = &rest[1..];
        if !who.chars().all(|c| "ugoa".contains(c)) || !perms.chars().all(|c| "rwxXst".contains(c))
        {
            return false;
        }
        match op {
            '-' => true,
            '=' if !who.is_empty() && !who.contains(['u', 'a']) => perms.is_empty(),
            '=' | '+' => who == "u" && perms.chars().all(|c| "rwxX".contains(c)),
            _ => false,
        }
    })
}

pub(crate) fn writes(cmd: &Command) -> Vec<String> {
    let mut out = redirect_writes(cmd);
    if cmd.wrapper {
        return out;
    }
    let program = cmd.program.as_str();
    let spec = spec_of(program);
    let ops = operands(cmd);
    // Taking permissions away (`chmod 600 key`, `chmod go-rwx ~/.ssh`) changes nothing anyone
    // could use.
    let tightening = program == "chmod" && ops.first().is_some_and(|m| restrictive_mode(m));
    if (spec.operands == Modify || in_place(cmd)) && !tightening {
        out.extend(ops.iter().map(|o| o.to_string()));
    }
    if spec.operands == Copy {
        out.extend(copy_writes(cmd, &ops));
    }
    out.extend(option_outputs(cmd));
    // Unpacking writes into the directory (`tar -x -C DIR`, `unzip -d DIR`): mark it as a
    // tree, so that a rule on files inside it matches.
    if matches!(program, "tar" | "bsdtar" | "unzip") {
        if unpacks(cmd) {
            let dirs: Vec<String> = out
                .iter()
                .map(|d| format!("{}/*", d.trim_end_matches('/')))
                .collect();
            out.extend(dirs);
        } else {
            out = redirect_writes(cmd);
        }
    }
    if program == "crontab" && !cmd.args.iter().any(|a| a == "-l") {
        out.push("/var/spool/cron/crontabs/user".to_owned());
    }
    out
}

/// The targets of the command's writing redirections (`> FILE`, `>> FILE`).
fn redirect_writes(cmd: &Command) -> Vec<String> {
    cmd.redirects
        .iter()
        .filter(|r| r.writes)
        .map(|r| r.target.clone())
        .collect()
}

/// What a copy-like command writes: its destination, each source inside it (the destination
/// may be a directory), and for `mv` each source moved away.
fn copy_writes(cmd: &Command, ops: &[&str]) -> Vec<String> {
    let Some(dest) = destination(cmd) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for src in ops.iter().filter(|o| **o != dest) {
        out.push(format!(
            "{}/{}",
            dest.trim_end_matches('/'),
            program_name(src)
        ));
        if cmd.program == "mv" {
            out.push(src.to_string()); // moved away: changed where it was
        }
    }
    out.push(dest.to_owned());
    out
}

/// Values of options that name a file or directory to write: `curl -o`, `dd of=`,
/// `tar -C`, `--output=`.
fn option_outputs(cmd: &Command) -> Vec<String> {
    let program = cmd.program.as_str();
    let mut out = Vec::new();
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
    out
}

/// Whether an archiver extracts (`unzip`, `tar -x`, `tar xzf`, `--extract`).
fn unpacks(cmd: &Command) -> bool {
    cmd.program == "unzip"
        || cmd.args.iter().any(|a| {
            a == "--extract"
                || a == "--get"
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('x'))
                || (!a.starts_with('-')
                    && a.contains('x')
                    && a.len() <= 6
                    && a.chars().all(|c| c.is_ascii_alphabetic()))
        })
}

/// Paths the command removes as whole trees: `rm -r`, `find -delete`, `rsync --delete`,
/// `tar --remove-files`, `mv` of a directory away.
pub(crate) fn deletes(cmd: &Command) -> Vec<&str> {
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
mod tests;

#[cfg(test)]
mod restrictive_mode_tests {
    use super::restrictive_mode;

    #[test]
    fn only_modes_that_take_permissions_away_are_restrictive() {
        for m in [
            "600",
            "0600",
            "400",
            "700",
            "go-rwx",
            "g-w,o-rwx",
            "u=rw,go=",
            "og=",
            "a-x",
        ] {
            assert!(restrictive_mode(m), "{m}");
        }
        for m in [
            "644", "755", "4700", "777", "o+r", "u+s", "a=rw", "go=r", "+x", "g+r",
        ] {
            assert!(!restrictive_mode(m), "{m}");
        }
    }
}
