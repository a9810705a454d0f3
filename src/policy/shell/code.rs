//! Code handed to a shell or an interpreter: `bash -c TEXT`, `sh FILE`, `… | sh`,
//! `bash <(…)`, `python -c TEXT`, `perl -e TEXT`, awk programs. Literal code is analysed;
//! code nobody can read now (piped, downloaded, decoded, built at run time) is marked so a
//! rule can block it.

use super::super::inline::{self, Lang};
use super::super::semantics::{shell_options, SHELLS};
use super::builtins::Nested;
use super::{is_unknown, Command, Ctx, ShellError, Stdin, Walker};

/// Where a shell's or interpreter's program text comes from.
enum Source {
    Text(String),
    /// A file operand, by its index in the arguments (it may be a process substitution).
    File(usize),
    Stdin,
}

/// The language a program runs: `None` for the shell, or an interpreter's.
fn language(program: &str) -> Option<Option<Lang>> {
    // `at` and `batch` run their stdin (or `-f FILE`) through a shell, later.
    if SHELLS.contains(&program) || matches!(program, "source" | "." | "at" | "batch") {
        return Some(None);
    }
    Lang::of(program).map(Some)
}

/// The index of the first argument that is not an option (or an option's value).
fn first_operand(args: &[String], with_value: &[&str]) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            return (i + 1 < args.len()).then_some(i + 1);
        }
        if a == "-" {
            return None;
        }
        if !a.starts_with('-') {
            return Some(i);
        }
        if with_value.contains(&a) {
            i += 1;
        }
        i += 1;
    }
    None
}

/// Where `cmd`'s program text comes from, if it runs one.
fn source(cmd: &Command, lang: Option<Lang>) -> Option<Source> {
    let args = &cmd.args;
    let value_of = |flags: &[&str]| -> Option<String> {
        let mut code = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if flags.contains(&a.as_str()) {
                code.extend(it.next().cloned());
            } else if let Some(f) = flags
                .iter()
                .find(|f| f.len() == 2 && a.starts_with(**f) && a.len() > 2 && !a.starts_with("--"))
            {
                code.push(a[f.len()..].to_owned());
            } else if a.starts_with('-')
                && !a.starts_with("--")
                && (3..=6).contains(&a.len())
                && a[1..].chars().all(|c| c.is_ascii_alphabetic())
            {
                // A cluster ending in the flag (`-pe CODE`, `-ne CODE`).
                if let Some(f) = flags.iter().find(|f| f.len() == 2 && a.ends_with(&f[1..])) {
                    let _ = f;
                    code.extend(it.next().cloned());
                }
            }
        }
        (!code.is_empty()).then(|| code.join("\n"))
    };
    match lang {
        None if matches!(cmd.program.as_str(), "source" | ".") => {
            first_operand(args, &[]).map(Source::File)
        }
        None if matches!(cmd.program.as_str(), "at" | "batch") => {
            if args
                .iter()
                .any(|a| a == "-l" || a == "-r" || a == "-d" || a == "-c")
            {
                return None;
            }
            match args.iter().position(|a| a == "-f") {
                Some(i) => Some(Source::File(i + 1)),
                None => Some(Source::Stdin),
            }
        }
        None => {
            let (dash_c, rest) = shell_options(args);
            let offset = args.len() - rest.len();
            if dash_c {
                return rest.first().map(|s| Source::Text(s.clone()));
            }
            let stdin_flag = args[..offset]
                .iter()
                .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('s'));
            match rest.first() {
                Some(_) if !stdin_flag => Some(Source::File(offset)),
                _ => Some(Source::Stdin),
            }
        }
        Some(Lang::Python) => {
            if let Some(c) = value_of(&["-c"]) {
                return Some(Source::Text(c));
            }
            if args
                .iter()
                .any(|a| a == "-m" || (a.starts_with("-m") && a.len() > 2))
            {
                return None;
            }
            Some(first_operand(args, &["-W", "-X", "-Q"]).map_or(Source::Stdin, Source::File))
        }
        Some(Lang::Js) => {
            if cmd.program == "deno" {
                return match args.first().map(String::as_str) {
                    Some("eval") => args.get(1).map(|c| Source::Text(c.clone())),
                    _ => None,
                };
            }
            if let Some(c) = value_of(&["-e", "--eval", "-p", "--print"]) {
                return Some(Source::Text(c));
            }
            if args.first().is_some_and(|a| a == "-") || args.iter().all(|a| a.starts_with('-')) {
                return Some(Source::Stdin);
            }
            first_operand(args, &["-r", "--require", "--import", "--loader"]).map(Source::File)
        }
        Some(Lang::Perl | Lang::Ruby) => {
            if let Some(c) = value_of(&["-e", "-E"]) {
                return Some(Source::Text(c));
            }
            Some(first_operand(args, &["-I", "-M", "-r"]).map_or(Source::Stdin, Source::File))
        }
        Some(Lang::Php) => {
            if let Some(c) = value_of(&["-r"]) {
                return Some(Source::Text(c));
            }
            Some(first_operand(args, &["-c", "-d"]).map_or(Source::Stdin, Source::File))
        }
        Some(Lang::Awk) => {
            if args.iter().any(|a| a == "-f" || a.starts_with("--file")) {
                return None;
            }
            first_operand(
                args,
                &[
                    "-F",
                    "-v",
                    "--assign",
                    "--field-separator",
                    "-i",
                    "--include",
                ],
            )
            .map(|i| Source::Text(args[i].clone()))
        }
    }
}

impl Walker<'_> {
    /// Looks at the program text `cmd` runs, records what it does, and returns the shell
    /// commands and argvs found in it (walked once `cmd` is recorded).
    pub(super) fn code(
        &mut self,
        cmd: &mut Command,
        _ctx: &Ctx,
    ) -> Result<Vec<Nested>, ShellError> {
        if cmd.path.contains('/') {
            cmd.runs = Some(cmd.path.clone());
        }
        let Some(lang) = language(&cmd.program) else {
            return Ok(Vec::new());
        };
        let text = match source(cmd, lang) {
            None => return Ok(Vec::new()),
            Some(Source::Text(t)) => t,
            Some(Source::Stdin) => match cmd.stdin.clone() {
                Stdin::Literal(t) => t,
                Stdin::Data => {
                    cmd.dynamic_code = Some(format!(
                        "`{}` runs code piped from other programs",
                        cmd.program
                    ));
                    return Ok(Vec::new());
                }
                Stdin::File(f) => {
                    cmd.dynamic_code =
                        Some(format!("`{}` runs code redirected from {f}", cmd.program));
                    return Ok(Vec::new());
                }
                Stdin::Inherited => return Ok(Vec::new()),
            },
            Some(Source::File(i)) => {
                // Process substitutions are numbered from the program word.
                match cmd.procsubs.iter().find(|(at, _)| *at == i + 1) {
                    Some((_, Stdin::Literal(t))) => t.clone(),
                    Some(_) => {
                        cmd.dynamic_code = Some(format!(
                            "`{}` runs code produced by other programs",
                            cmd.program
                        ));
                        return Ok(Vec::new());
                    }
                    None => {
                        cmd.runs = cmd.args.get(i).cloned();
                        return Ok(Vec::new());
                    }
                }
            }
        };
        if is_unknown(&text) {
            if cmd.fed_by.is_empty() {
                // From a variable: unknown, like a variable program name.
                cmd.code_unknown = true;
            } else {
                cmd.dynamic_code = Some(format!(
                    "`{}` runs code built at run time from other programs' output",
                    cmd.program
                ));
            }
            return Ok(Vec::new());
        }
        let Some(lang) = lang else {
            let (dash_c, rest) = shell_options(&cmd.args);
            if dash_c && rest.len() > 1 {
                return Ok(vec![Nested::ScriptArgs(text, rest[1..].to_vec())]);
            }
            return Ok(vec![Nested::Script(text)]);
        };
        let scan = inline::scan(&text, lang);
        cmd.code = Some(text);
        if let Some(why) = scan.dynamic {
            cmd.dynamic_code = Some(format!("`{}`: {why}", cmd.program));
        }
        cmd.code_paths.reads.extend(scan.reads);
        cmd.code_paths.writes.extend(scan.writes);
        cmd.code_paths.deletes.extend(scan.deletes);
        let mut out: Vec<Nested> = scan.shell.into_iter().map(Nested::Script).collect();
        // Inline code hands `~` to `expanduser` & co.; an argv of it gets the home directory.
        let home = self.resolver.home.display().to_string();
        let tilde = |a: String| match a.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{home}{rest}"),
            _ => a,
        };
        out.extend(
            scan.argvs
                .into_iter()
                .filter(|a| !a.is_empty())
                .map(|a| Nested::Argv(a.into_iter().map(tilde).collect())),
        );
        Ok(out)
    }
}
