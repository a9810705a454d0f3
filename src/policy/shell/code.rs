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
    match lang {
        None => shell_source(cmd),
        Some(Lang::Python) => python_source(args),
        Some(Lang::Js) => js_source(cmd),
        Some(Lang::Perl | Lang::Ruby) => {
            Some(text_or_file(args, &["-e", "-E"], &["-I", "-M", "-r"]))
        }
        Some(Lang::Php) => Some(text_or_file(args, &["-r"], &["-c", "-d"])),
        Some(Lang::Awk) => awk_source(args),
    }
}

/// The code given with one of `flags` (`-e CODE`, `-eCODE`, `-pe CODE`), joined by newlines
/// when given more than once.
fn flag_code(args: &[String], flags: &[&str]) -> Option<String> {
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
            if flags.iter().any(|f| f.len() == 2 && a.ends_with(&f[1..])) {
                code.extend(it.next().cloned());
            }
        }
    }
    (!code.is_empty()).then(|| code.join("\n"))
}

/// The code given with one of `code_flags`, else the script operand (skipping the values of
/// `with_value`), else stdin.
fn text_or_file(args: &[String], code_flags: &[&str], with_value: &[&str]) -> Source {
    match flag_code(args, code_flags) {
        Some(c) => Source::Text(c),
        None => first_operand(args, with_value).map_or(Source::Stdin, Source::File),
    }
}

/// A shell's script (`-c TEXT`, a file, or stdin); `source FILE`; `at`'s job (stdin or `-f`).
fn shell_source(cmd: &Command) -> Option<Source> {
    let args = &cmd.args;
    match cmd.program.as_str() {
        "source" | "." => first_operand(args, &[]).map(Source::File),
        "at" | "batch" => {
            // Listing, removing or showing jobs runs nothing.
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
        _ => {
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
    }
}

/// `python -c CODE`, `python FILE`, `python` (stdin); `python -m MODULE` runs no text of ours.
fn python_source(args: &[String]) -> Option<Source> {
    if let Some(c) = flag_code(args, &["-c"]) {
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

/// `node -e CODE`, `node FILE`, `node -` (stdin), `deno eval CODE`.
fn js_source(cmd: &Command) -> Option<Source> {
    let args = &cmd.args;
    if cmd.program == "deno" {
        return match args.first().map(String::as_str) {
            Some("eval") => args.get(1).map(|c| Source::Text(c.clone())),
            _ => None,
        };
    }
    if let Some(c) = flag_code(args, &["-e", "--eval", "-p", "--print"]) {
        return Some(Source::Text(c));
    }
    if args.first().is_some_and(|a| a == "-") || args.iter().all(|a| a.starts_with('-')) {
        return Some(Source::Stdin);
    }
    first_operand(args, &["-r", "--require", "--import", "--loader"]).map(Source::File)
}

/// An awk program: its first operand (`awk -f FILE` runs a file nobody reads here).
fn awk_source(args: &[String]) -> Option<Source> {
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

/// The program text `cmd` runs, when it can be read now. Otherwise records on `cmd` why not
/// (code piped, produced or built at run time; the script file it runs) and returns `None`.
fn program_text(cmd: &mut Command, lang: Option<Lang>) -> Option<String> {
    let text = match source(cmd, lang)? {
        Source::Text(t) => t,
        Source::Stdin => stdin_text(cmd)?,
        Source::File(i) => file_text(cmd, i)?,
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
        return None;
    }
    Some(text)
}

/// The code `cmd` reads on stdin, when it is literal (a here-document or here-string).
fn stdin_text(cmd: &mut Command) -> Option<String> {
    match cmd.stdin.clone() {
        Stdin::Literal(t) => Some(t),
        Stdin::Data => {
            cmd.dynamic_code = Some(format!(
                "`{}` runs code piped from other programs",
                cmd.program
            ));
            None
        }
        Stdin::File(f) => {
            cmd.dynamic_code = Some(format!("`{}` runs code redirected from {f}", cmd.program));
            None
        }
        Stdin::Inherited => None,
    }
}

/// The code in argument `i`, when it is a process substitution with literal output; a plain
/// file is recorded as the script `cmd` runs.
fn file_text(cmd: &mut Command, i: usize) -> Option<String> {
    // Process substitutions are numbered from the program word.
    match cmd.procsubs.iter().find(|(at, _)| *at == i + 1) {
        Some((_, Stdin::Literal(t))) => Some(t.clone()),
        Some(_) => {
            cmd.dynamic_code = Some(format!(
                "`{}` runs code produced by other programs",
                cmd.program
            ));
            None
        }
        None => {
            cmd.runs = cmd.args.get(i).cloned();
            None
        }
    }
}

/// A shell's script, walked as nested shell code (with its positional arguments after
/// `-c TEXT`).
fn nested_script(cmd: &Command, text: String) -> Vec<Nested> {
    let (dash_c, rest) = shell_options(&cmd.args);
    if dash_c && rest.len() > 1 {
        return vec![Nested::ScriptArgs(text, rest[1..].to_vec())];
    }
    vec![Nested::Script(text)]
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
        let Some(text) = program_text(cmd, lang) else {
            return Ok(Vec::new());
        };
        Ok(match lang {
            None => nested_script(cmd, text),
            Some(lang) => self.inline_code(cmd, text, lang),
        })
    }

    /// Scans an interpreter's code: records the files it reads, writes and deletes, and
    /// returns the shell commands and argvs it runs.
    fn inline_code(&self, cmd: &mut Command, text: String, lang: Lang) -> Vec<Nested> {
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
        out
    }
}
