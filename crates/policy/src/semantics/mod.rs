//! What common programs do with their arguments, as data: which operands they read (and
//! reveal), write, delete; which run another command; which read whole trees.
//!
//! A program not in the table is assumed to read its operands, which only matters for words
//! that name a protected asset: an unknown program's arguments are not all file reads.
//!
//! Owns: a simple command's reads, writes, deletions and nested commands, from the program
//! table (`table`) and the readers of particular programs: `option_files` (files named by
//! options' values), `network` (the trees static file servers hand out, socat's file
//! addresses), `wrappers`, `shells` (a shell's own options) and `installs` (package names
//! close to popular ones). Must not touch: parsing and expanding the shell (`shell`), or
//! judging what is found (the rules).

mod installs;
mod network;
mod option_files;
mod shells;
mod table;
mod wrappers;

pub(crate) use installs::typosquat;
pub(crate) use shells::{shell_options, shell_script};
use table::value_options;
pub(crate) use table::{spec_of, SHELLS};
pub(crate) use wrappers::unwrap;

use crate::command::{program_name, Command};
use network::{served_trees, socat_files};
pub(crate) use option_files::value_follows;
use option_files::{option_inputs, option_outputs};
use table::Operands::{Copy, Modify, Name, PatternThenRead, Read};
use table::Recursive::{Always, Never, With};

/// The commands `find … -exec CMD {} ;` runs, with `{}` standing for everything below each
/// starting point. Deleting programs run by `find` act on every file below: recursive.
pub(crate) fn find_execs(cmd: &Command) -> Vec<Vec<String>> {
    if cmd.program != "find" {
        return Vec::new();
    }
    let starts = find_starts(&cmd.args);
    // A name the command looks for, spelled out (`-name .bashrc`): one of the files `{}`
    // stands for, named so that rules on that file see it.
    let names: Vec<&String> = cmd
        .args
        .windows(2)
        .filter(|w| matches!(w[0].as_str(), "-name" | "-iname"))
        .map(|w| &w[1])
        .filter(|n| !n.is_empty() && !n.contains(['*', '?', '[', '/', '\\']))
        .collect();
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
            let mut inner: Vec<String> = Vec::new();
            for a in &argv {
                inner.push(a.replace("{}", &below));
                if *a == "{}" {
                    inner.extend(
                        names
                            .iter()
                            .map(|n| format!("{}/{n}", start.trim_end_matches('/'))),
                    );
                }
            }
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

/// The operands of a command with the values of its value-taking options removed.
fn plain_operands(cmd: &Command) -> Vec<&str> {
    let takes = value_options(&cmd.program);
    if takes.is_empty() {
        return operands(cmd);
    }
    positionals(&cmd.args, takes)
}

/// The positional arguments of `args`: what is not an option, and everything after `--`
/// (`-` is an operand); options named in `takes` consume the next argument (unless written
/// `--opt=value`).
pub(crate) fn positionals<'a>(args: &'a [String], takes: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut skip = false;
    let mut done = false;
    for a in args {
        if skip {
            skip = false;
        } else if done || !a.starts_with('-') || a == "-" {
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
    if let crate::command::Stdin::File(f) = &cmd.stdin {
        if !out.contains(&f.as_str()) {
            out.push(f);
        }
    }
    let program = cmd.program.as_str();
    if program == "xargs" {
        // `xargs -a FILE`: FILE's words become the command's arguments (`xargs -a key echo`).
        out.extend(wrappers::xargs_arg_files(&cmd.args));
    }
    if cmd.wrapper || program.is_empty() || crate::command::is_unknown(program) {
        return out;
    }
    if SHELLS.contains(&program) {
        return out; // a shell's operand is a script it runs (see `code`), not data it shows.
    }
    if program == "git" {
        // See `git` in the shell's builtins (`show`, `diff`, `blame`…) and its options
        // (`add`, `hash-object`, `send-email`): only some subcommands show files.
        return out;
    }
    if let Some(dirs) = served_trees(cmd) {
        out.extend(dirs);
    }
    if program == "socat" {
        // Its operands are addresses (`TCP:h:p`, `EXEC:cmd`), not files: only its file
        // addresses are read.
        out.extend(socat_files(cmd).0);
        return out;
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
    // `DIR/*` left as written (what `find DIR -exec CMD {}`, `fd -x` and `… | xargs CMD`
    // hand CMD: anything below DIR): the tree below DIR (see `recursive`).
    out.extend(ops.into_iter().map(|o| match o.strip_suffix("/*") {
        Some("") => "/",
        Some(dir) => dir,
        None => o,
    }));
    out
}

/// Whether the command reads its operands as whole trees.
pub(crate) fn recursive(cmd: &Command) -> bool {
    if served_trees(cmd).is_some() {
        return true;
    }
    let spec = spec_of(&cmd.program);
    if matches!(spec.operands, Read | PatternThenRead | Copy)
        && !cmd.wrapper
        && operands(cmd).iter().any(|o| o.ends_with("/*"))
    {
        return true;
    }
    match spec.recursive {
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

/// Files the command may create, modify or delete.
pub(crate) fn writes(cmd: &Command) -> Vec<String> {
    let mut out = redirect_writes(cmd);
    // A wrapper's own output files (`strace -o FILE`, `script FILE`, `time -o FILE`); a pipe
    // to a command (`strace -o '|CMD'`) is that command's, walked as one.
    out.extend(
        wrappers::wrapper_outputs(cmd)
            .into_iter()
            .filter(|o| !o.starts_with(['|', '!'])),
    );
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
    if program == "socat" {
        out.extend(socat_files(cmd).1.into_iter().map(str::to_owned));
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
