//! Code handed to a shell or an interpreter: `bash -c TEXT`, `sh FILE`, `… | sh`,
//! `bash <(…)`, `python -c TEXT`, `perl -e TEXT`, awk programs. Literal code is analysed;
//! code nobody can read now (piped, downloaded, decoded, built at run time) is marked so a
//! rule can block it.

use super::super::inline::{self, Lang};
use super::super::semantics::{shell_options, SHELLS};
use super::builtins::Nested;
use super::disk;
use super::{is_unknown, Command, Ctx, Origin, ShellError, Stdin, Walker};

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

/// The program `cmd` runs: literal text, or a file operand (by index).
enum Program {
    Text(String),
    File(usize),
}

/// The program `cmd` runs, when it can be read now. Otherwise records on `cmd` why not
/// (code piped, produced or built at run time) and returns `None`.
fn program(cmd: &mut Command, lang: Option<Lang>) -> Option<Program> {
    let text = match source(cmd, lang)? {
        Source::Text(t) => t,
        Source::Stdin => stdin_text(cmd)?,
        Source::File(i) => match file_text(cmd, i)? {
            FileText::Text(t) => t,
            FileText::File => return Some(Program::File(i)),
        },
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
    Some(Program::Text(text))
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

/// What a file operand holds.
enum FileText {
    /// A process substitution with literal output.
    Text(String),
    /// A file on disk.
    File,
}

/// The code in argument `i`, when it is a process substitution with literal output; a plain
/// file is recorded as the script `cmd` runs.
fn file_text(cmd: &mut Command, i: usize) -> Option<FileText> {
    // Process substitutions are numbered from the program word.
    match cmd.procsubs.iter().find(|(at, _)| *at == i + 1) {
        Some((_, Stdin::Literal(t))) => Some(FileText::Text(t.clone())),
        Some(_) => {
            cmd.dynamic_code = Some(format!(
                "`{}` runs code produced by other programs",
                cmd.program
            ));
            None
        }
        None => {
            cmd.runs = cmd.args.get(i).cloned();
            Some(FileText::File)
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

/// Directories whose programs are the system's, not the project's: run by path, they are
/// not read (as they are not when found on `PATH`).
const SYSTEM_DIRS: &[&str] = &[
    "/usr/",
    "/bin/",
    "/sbin/",
    "/lib/",
    "/lib64/",
    "/nix/store/",
    "/snap/",
    "/opt/",
];

impl Walker<'_> {
    /// Looks at the program text `cmd` runs, records what it does, and returns the shell
    /// commands and argvs found in it (walked once `cmd` is recorded).
    pub(super) fn code(&mut self, cmd: &mut Command, ctx: &Ctx) -> Result<Vec<Nested>, ShellError> {
        if cmd.path.contains('/') {
            cmd.runs = Some(cmd.path.clone());
        }
        let mut out = self.loaded_code(cmd, ctx);
        out.extend(self.runners(cmd));
        let Some(lang) = language(&cmd.program) else {
            if cmd.path.contains('/') && !is_unknown(&cmd.path) {
                let word = cmd.path.clone();
                out.extend(self.program_file(cmd, &word));
            }
            return Ok(out);
        };
        match program(cmd, lang) {
            Some(Program::Text(text)) => out.extend(match lang {
                None => nested_script(cmd, text),
                Some(lang) => self.inline_code(cmd, text, lang, None),
            }),
            Some(Program::File(i)) => {
                let word = cmd.args[i].clone();
                let args = cmd.args[i..].to_vec();
                out.extend(self.script_file(cmd, &word, lang, args));
            }
            None => {}
        }
        Ok(out)
    }

    /// The code in file `word` (relative to `cmd`'s directory), read as `label`: its text
    /// and origin, or nothing (no such file, a binary, a value known only at run time, a
    /// file already being walked). What cannot be read is recorded on `cmd`. A file the
    /// session wrote and whose text on disk is not what it wrote: the disk's text (what a
    /// build file's reader needs whole), else what the session wrote.
    pub(super) fn read_file(
        &mut self,
        cmd: &mut Command,
        word: &str,
        label: impl FnOnce(&std::path::Path) -> String,
    ) -> Option<(std::sync::Arc<str>, std::sync::Arc<Origin>)> {
        self.read_files(cmd, word, label).into_iter().next()
    }

    /// Every reading of the code in file `word`: the text on disk and, when the session
    /// wrote the file, the text it wrote if that differs (the stricter reading wins, so a
    /// script is walked as both). A file the session wrote that is not on disk now, or
    /// whose text we never knew and cannot read, is recorded on `cmd` as code that cannot
    /// be checked: what runs will be whatever is there by then.
    pub(super) fn read_files(
        &mut self,
        cmd: &mut Command,
        word: &str,
        label: impl FnOnce(&std::path::Path) -> String,
    ) -> Vec<(std::sync::Arc<str>, std::sync::Arc<Origin>)> {
        let Some(since) = self.resolver.code_since else {
            return Vec::new();
        };
        if is_unknown(word) || (!cmd.cwd_known && !word.starts_with('/')) {
            return Vec::new();
        }
        let path = self.resolver.resolve_word(word, &cmd.cwd).abs;
        let label = label(&path);
        if self.reading.iter().any(|(p, l)| *p == path && *l == label) {
            return Vec::new();
        }
        if self.files_read >= disk::MAX_FILES {
            cmd.unread.get_or_insert_with(|| {
                format!(
                    "it reads more than {} files of code (scripts and build files)",
                    disk::MAX_FILES
                )
            });
            return Vec::new();
        }
        self.files_read += 1;
        let written = self.resolver.written.as_ref().and_then(|w| w.get(&path));
        let origin = |trusted: bool| {
            std::sync::Arc::new(Origin {
                path: path.clone(),
                label: label.clone(),
                trusted,
            })
        };
        let mut out = Vec::new();
        let on_disk = match disk::read(&path, since) {
            disk::Code::Text { text, trusted } => {
                let same = written.is_some_and(|w| w.text.as_ref() == Some(&text));
                out.push((text, origin(trusted && written.is_none())));
                if same {
                    return out;
                }
                true
            }
            disk::Code::Missing => false,
            disk::Code::Opaque => true,
            disk::Code::Unreadable(why) => {
                cmd.unread.get_or_insert(why);
                true
            }
        };
        let Some(w) = written else {
            return out;
        };
        if !on_disk {
            cmd.unread.get_or_insert_with(|| {
                format!(
                    "it runs {}, which this session wrote ({}), and it is not on disk now",
                    display_name(&path),
                    w.how
                )
            });
        }
        if let Some(text) = &w.text {
            out.push((text.clone(), origin(false)));
        }
        out
    }

    /// A script given to a shell or an interpreter (`bash x.sh a b`, `python3 x.py`,
    /// `source env.sh`): its code, walked as the code it is. `args`: `$0`, `$1`… for a shell.
    fn script_file(
        &mut self,
        cmd: &mut Command,
        word: &str,
        lang: Option<Lang>,
        args: Vec<String>,
    ) -> Vec<Nested> {
        let mut out = Vec::new();
        for (text, origin) in self.read_files(cmd, word, display_name) {
            match lang {
                None => out.extend(shell_file(cmd, &text, origin, args.clone())),
                Some(lang) => {
                    let imports = self.changed_imports(&origin, &text, lang);
                    out.extend(self.inline_code(cmd, text.to_string(), lang, Some(origin)));
                    out.extend(imports);
                }
            }
        }
        out
    }

    /// A program run by its path (`./build.sh`, `scripts/x`): a script is read and walked
    /// in the language its `#!` line names; a binary, or a program of the system, is not.
    fn program_file(&mut self, cmd: &mut Command, word: &str) -> Vec<Nested> {
        let abs = self.resolver.resolve_word(word, &cmd.cwd).abs;
        if SYSTEM_DIRS.iter().any(|d| abs.starts_with(d)) {
            return Vec::new();
        }
        let mut args = vec![word.to_owned()];
        args.extend(cmd.args.iter().cloned());
        let mut out = Vec::new();
        for (text, origin) in self.read_files(cmd, word, display_name) {
            match disk::interpreter(&text) {
                disk::Interpreter::Shell => {
                    out.extend(shell_file(cmd, &text, origin, args.clone()))
                }
                disk::Interpreter::Lang(lang) => {
                    let imports = self.changed_imports(&origin, &text, lang);
                    out.extend(self.inline_code(cmd, text.to_string(), lang, Some(origin)));
                    out.extend(imports);
                }
                disk::Interpreter::Other => {}
            }
        }
        out
    }

    /// The local modules `origin`'s code imports that changed since the run started (the
    /// agent's edits to a helper the project's script imports), read in turn with `origin`
    /// as the file being walked, so that two modules importing each other end.
    fn changed_imports(
        &self,
        origin: &std::sync::Arc<Origin>,
        text: &str,
        lang: Lang,
    ) -> Vec<Nested> {
        let Some(since) = self.resolver.code_since else {
            return Vec::new();
        };
        super::imports::local_imports(&origin.path, text, lang)
            .into_iter()
            .filter(|p| {
                self.resolver
                    .written
                    .as_ref()
                    .is_some_and(|w| w.contains_key(p))
                    || matches!(
                        disk::read(p, since),
                        disk::Code::Text { trusted: false, .. }
                    )
            })
            .map(|p| {
                let program = if lang == Lang::Python {
                    "python3"
                } else {
                    "node"
                };
                Nested::FromFile {
                    origin: origin.clone(),
                    dir: None,
                    then: Box::new(Nested::Argv(vec![
                        program.to_owned(),
                        p.display().to_string(),
                    ])),
                }
            })
            .collect()
    }

    /// Scans an interpreter's code: records the files it reads, writes and deletes, and
    /// returns the shell commands and argvs it runs. `file`: where the code was read from;
    /// the project's own unchanged files are trusted with values known only at run time.
    fn inline_code(
        &self,
        cmd: &mut Command,
        text: String,
        lang: Lang,
        file: Option<std::sync::Arc<Origin>>,
    ) -> Vec<Nested> {
        let text = inline::fold_constants(&text, lang);
        let scan = inline::scan(&text, lang);
        let trusted = file.as_ref().is_some_and(|o| o.trusted);
        if let Some(why) = scan.dynamic {
            match &file {
                None => cmd.dynamic_code = Some(format!("`{}`: {why}", cmd.program)),
                // Decoding and running is never the project's ordinary code.
                Some(_) if why.contains("decodes") => {
                    cmd.dynamic_code = Some(format!("`{}`: {why}", cmd.program));
                }
                Some(o) if !o.trusted => {
                    cmd.unread
                        .get_or_insert_with(|| format!("{} (in {})", why, o.label));
                }
                Some(_) => {}
            }
        }
        cmd.code_paths.reads.extend(scan.reads);
        let known = |w: &String| !trusted || !is_unknown(w);
        cmd.code_paths
            .writes
            .extend(scan.writes.into_iter().filter(known));
        cmd.code_paths
            .deletes
            .extend(scan.deletes.into_iter().filter(known));
        // The text is what `code_matches` rules read: patterns on what code merely mentions
        // (`credentials`, `socket` and `dup2`) are for code written by the agent (inline, or a
        // file it changed), not for the project's own.
        if !trusted {
            cmd.code = Some(match cmd.code.take() {
                Some(before) => format!("{before}\n{text}"),
                None => text,
            });
        }
        if cmd.from.is_none() {
            cmd.from.clone_from(&file);
        }
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
        match file {
            Some(origin) => out
                .into_iter()
                .map(|n| Nested::FromFile {
                    origin: origin.clone(),
                    dir: None,
                    then: Box::new(n),
                })
                .collect(),
            None => out,
        }
    }
}

/// A shell script read from a file, walked with `args` as `$0`, `$1`…; past
/// [`disk::MAX_SHELL_SCRIPT`] bytes it is recorded as unread instead (parsing it would cost
/// the decision tens of milliseconds).
pub(super) fn shell_file(
    cmd: &mut Command,
    text: &str,
    origin: std::sync::Arc<Origin>,
    args: Vec<String>,
) -> Vec<Nested> {
    if text.len() > disk::MAX_SHELL_SCRIPT {
        cmd.unread.get_or_insert_with(|| {
            format!(
                "{} is a shell script larger than {} KiB",
                origin.label,
                disk::MAX_SHELL_SCRIPT / 1024
            )
        });
        return Vec::new();
    }
    vec![Nested::FromFile {
        origin,
        dir: None,
        then: Box::new(Nested::ScriptArgs(text.to_owned(), args)),
    }]
}

/// A path as people name it in a reason: its last two components.
pub(super) fn display_name(path: &std::path::Path) -> String {
    let parts: Vec<_> = path.iter().collect();
    let n = parts.len();
    let tail: std::path::PathBuf = parts[n.saturating_sub(2)..].iter().collect();
    tail.display().to_string()
}
