//! Shell commands parsed with `brush-parser` and flattened into the simple commands they run.
//!
//! Why `brush-parser`: it is the parser of the `brush` shell, so it is kept working against
//! real bash scripts; it understands bash, not only POSIX sh (process substitution `<(…)`,
//! here-strings, `[[ … ]]`, `$'…'`), which is exactly what agents write; it is MIT licensed
//! (`yash-syntax` is GPL-3.0) and maintained (`conch-parser` has not been released since
//! 2019); and it gives a full AST plus a word parser, so quoting tricks like `r''m` or `\rm`
//! disappear by quote removal instead of by regex guessing.
//!
//! The walker does the expansions the shell would do where their value is decidable
//! (assignments made earlier in the same command, `~`, `$HOME` and its `${…}` forms, brace
//! expansion, globs against the real file system, `$'…'`, `cd`/`pushd`/`CDPATH`), and marks
//! every other value with [`UNKNOWN`] instead of guessing: rules then treat an unknown value
//! that stands where it matters as unknown, never as "somewhere harmless".
//!
//! Each simple command becomes one [`Command`]: its program and arguments after expansion,
//! its redirections, the cwd it runs in, the variables it sets or unsets, the programs whose
//! output can reach it, and where its stdin comes from. Wrappers (`sudo`, `env`, `timeout`, …)
//! are unwrapped; `sh -c`, `eval`, `trap`, `find -exec`, `git -c alias.x=!…` and the literal
//! code given to interpreters are analysed as nested commands.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use brush_parser::{Parser, ParserOptions};

use crate::command::{is_unknown, program_name, Command, Origin, Redirect, Stdin, UNKNOWN};
use crate::paths::Resolver;

mod builtins;
mod code;
mod disk;
mod glob;
mod imports;
mod lexical;
mod mktemp;
mod options;
mod params;
mod runners;
mod walk;
mod words;

/// How deep `bash -c "bash -c '…'"` and `$(…$(…))` may nest before we give up (and escalate).
const MAX_DEPTH: usize = 12;

/// Longest command line we analyse; past it, the command escalates instead.
const MAX_LEN: usize = 1 << 20;

/// Deepest bracket nesting we hand to the parser, which recurses per level: a line of ten
/// thousand `(` must escalate, not overflow the stack of the thread evaluating it.
const MAX_BRACKETS: usize = 100;

/// Most simple commands one event may expand to (loops unrolled, braces expanded).
const MAX_COMMANDS: usize = 2_000;

/// Why a command could not be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ShellError(pub String);

/// Parses `script` and returns every simple command it may run, in order.
/// `placeholders`: the variables holding the run's own placeholder, whose value is known.
pub(crate) fn analyse(
    script: &str,
    cwd: &Path,
    resolver: &Resolver,
    placeholders: &[String],
) -> Result<Vec<Command>, ShellError> {
    let mut walker = Walker::new(resolver, placeholders);
    let mut ctx = Ctx::new(cwd);
    walker.script(script, &mut ctx)?;
    let mut out = walker.out;
    if !walker.made.is_empty() {
        for cmd in &mut out {
            cmd.made.clone_from(&walker.made);
        }
    }
    Ok(out)
}

/// Analyses an argv that is executed without a shell (Codex's argv form): the program and
/// its arguments are taken as they are, with no expansion at all.
pub(crate) fn analyse_argv(
    argv: &[String],
    cwd: &Path,
    resolver: &Resolver,
    placeholders: &[String],
) -> Result<Vec<Command>, ShellError> {
    let mut walker = Walker::new(resolver, placeholders);
    let mut ctx = Ctx::new(cwd);
    let cmd = walker.new_command(&ctx);
    walker.argv(cmd, argv.to_vec(), &mut ctx)?;
    Ok(walker.out)
}

/// The deepest nesting of `(` and `{` (quotes ignored: an over-estimate is fine here).
fn bracket_depth(script: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in script.bytes() {
        match b {
            b'(' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The shell state a command sees: where it runs, and the variables set so far.
#[derive(Debug, Clone)]
struct Ctx {
    cwd: PathBuf,
    cwd_known: bool,
    oldpwd: Option<PathBuf>,
    dirs: Vec<PathBuf>,
    /// Variables assigned earlier in this script: `Some(value)`, or `None` when the value is
    /// known only at run time.
    vars: HashMap<String, Option<String>>,
    fed_by: Vec<String>,
    stdin: Stdin,
    /// The paths the previous stage of a pipeline lists (`find ROOT …`, `fd`, `rg -l`, `git
    /// ls-files`), as `ROOT/*`: what `… | xargs CMD` hands CMD.
    listed: Option<Vec<String>>,
}

impl Ctx {
    /// The value a command sees for variable `name`: from its own assignments (`X=1 cmd`),
    /// else from the script so far; `Some(None)` when it is set to a value known only at
    /// run time.
    fn variable(&self, assigns: &[(String, Option<String>)], name: &str) -> Option<Option<String>> {
        assigns
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| self.vars.get(name).cloned())
    }

    fn new(cwd: &Path) -> Ctx {
        Ctx {
            cwd: cwd.to_path_buf(),
            cwd_known: true,
            oldpwd: None,
            dirs: Vec::new(),
            vars: HashMap::new(),
            fed_by: Vec::new(),
            stdin: Stdin::Inherited,
            listed: None,
        }
    }
}

struct Walker<'a> {
    resolver: &'a Resolver,
    /// The variables holding the run's own placeholder: their value is known.
    placeholders: &'a [String],
    out: Vec<Command>,
    depth: usize,
    /// The file whose code is being walked, if any.
    origin: Option<Arc<Origin>>,
    /// The files (and what of them) being walked, outermost first: one already here is not
    /// walked again (a script that sources itself, a target that makes itself).
    reading: Vec<(PathBuf, String)>,
    /// Files read for this event, against [`disk::MAX_FILES`].
    files_read: usize,
    /// The stand-ins of the paths `mktemp` makes in this event (see [`mktemp`]).
    made: Vec<String>,
}

/// One word after expansion: its fields (several after brace or glob expansion), the
/// programs of the substitutions inside it, and the variables it names or assigns.
#[derive(Debug, Default)]
struct Expanded {
    fields: Vec<String>,
    fed: Vec<String>,
    vars: Vec<String>,
    assigned: Vec<String>,
}

impl Expanded {
    /// The fields joined as the shell would join them for a single-word context.
    fn text(&self) -> String {
        self.fields.join(" ")
    }
}

fn options() -> ParserOptions {
    ParserOptions::default()
}

impl<'a> Walker<'a> {
    fn new(resolver: &'a Resolver, placeholders: &'a [String]) -> Walker<'a> {
        Walker {
            resolver,
            placeholders,
            out: Vec::new(),
            depth: 0,
            origin: None,
            reading: Vec::new(),
            files_read: 0,
            made: Vec::new(),
        }
    }

    fn new_command(&self, ctx: &Ctx) -> Command {
        Command {
            cwd: ctx.cwd.clone(),
            cwd_known: ctx.cwd_known,
            fed_by: ctx.fed_by.clone(),
            stdin: ctx.stdin.clone(),
            ..Command::default()
        }
    }

    fn push(&mut self, mut cmd: Command) -> Result<(), ShellError> {
        if cmd.from.is_none() {
            cmd.from.clone_from(&self.origin);
        }
        if self.out.len() >= MAX_COMMANDS {
            return Err(ShellError(format!(
                "the command expands to more than {MAX_COMMANDS} simple commands"
            )));
        }
        self.out.push(cmd);
        Ok(())
    }

    fn script(&mut self, script: &str, ctx: &mut Ctx) -> Result<(), ShellError> {
        if self.depth >= MAX_DEPTH {
            return Err(ShellError(format!(
                "commands nested more than {MAX_DEPTH} levels deep"
            )));
        }
        if script.len() > MAX_LEN {
            return Err(ShellError(format!(
                "the command is longer than {MAX_LEN} bytes"
            )));
        }
        if bracket_depth(script) > MAX_BRACKETS {
            return Err(ShellError(format!(
                "brackets nested more than {MAX_BRACKETS} deep"
            )));
        }
        let mut parser = Parser::new(std::io::Cursor::new(script.as_bytes()), &options());
        let program = parser
            .parse_program()
            .map_err(|e| ShellError(format!("{e}")))?;
        self.depth += 1;
        let result = program
            .complete_commands
            .iter()
            .try_for_each(|list| self.list(list, ctx));
        self.depth -= 1;
        result
    }

    /// Runs `f` one level deeper and returns the programs of the commands it recorded.
    fn nested(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(), ShellError>,
    ) -> Result<Vec<String>, ShellError> {
        if self.depth >= MAX_DEPTH {
            return Err(ShellError(format!(
                "commands nested more than {MAX_DEPTH} levels deep"
            )));
        }
        let start = self.out.len();
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result?;
        Ok(self.out[start..]
            .iter()
            .filter(|c| !c.program.is_empty())
            .map(|c| c.program.clone())
            .collect())
    }
}

/// The text a list of commands prints when it is nothing but `echo`/`printf` of known words.
/// What a command substitution's commands print, when the policy knows it: `pwd` (the
/// directory), `git rev-parse --show-toplevel` (the repository's root, found on disk).
/// The one command a substitution or a pipeline stage ran (bare assignments and redirections
/// aside), if it ran exactly one: what the three below look at, without copying anything.
fn only_command(cmds: &[Command]) -> Option<&Command> {
    let mut real = cmds.iter().filter(|c| !c.program.is_empty());
    let c = real.next()?;
    real.next().is_none().then_some(c)
}

fn known_output(c: &Command, resolver: &Resolver) -> Option<String> {
    if !c.redirects.is_empty() || !c.cwd_known || c.wrapper || !c.via.is_empty() {
        return None;
    }
    let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
    match (c.path.as_str(), args.as_slice()) {
        ("pwd", [] | ["-L"] | ["-P"]) => Some(c.cwd.display().to_string()),
        ("git", ["rev-parse", "--show-toplevel"]) if resolver.follow_symlinks => c
            .cwd
            .ancestors()
            .find(|d| d.join(".git").exists())
            .map(|d| d.display().to_string()),
        _ => None,
    }
}

/// Stands for the output of a known shell set-up generator (`ssh-agent -s`, `pyenv init -`,
/// `kubectl completion bash`): code, but the generator's own, not the agent's. It follows an
/// [`UNKNOWN`], so everywhere else the value is still unknown.
pub(super) const SETUP: &str = "\0\u{2}";

/// Whether a substitution's commands are one well-known program printing its shell set-up
/// (environment, hooks, completions), run from the system and not from a path of the agent's.
fn shell_setup(c: &Command) -> bool {
    let system = !c.path.contains('/')
        || [
            "/usr/",
            "/bin/",
            "/opt/",
            "/home/linuxbrew/",
            "/nix/store/",
            "/snap/",
        ]
        .iter()
        .any(|d| c.path.starts_with(d));
    if !system || !c.redirects.is_empty() || c.args.iter().any(|a| is_unknown(a)) {
        return false;
    }
    let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
    let first = args.first().copied().unwrap_or_default();
    match c.program.as_str() {
        "ssh-agent" => matches!(args.as_slice(), [] | ["-s"] | ["-c"]),
        "pyenv" | "rbenv" | "nodenv" | "goenv" | "jenv" | "plenv" | "phpenv" => {
            matches!(first, "init" | "virtualenv-init")
        }
        "direnv" => first == "hook",
        "starship" | "zoxide" | "atuin" | "mcfly" | "oh-my-posh" => first == "init",
        "fnm" | "opam" => first == "env",
        "mise" | "rtx" => matches!(first, "activate" | "env"),
        "conda" | "mamba" | "micromamba" => {
            first.starts_with("shell.") && args.get(1) == Some(&"hook")
        }
        "brew" => first == "shellenv",
        "dircolors" => true,
        "keychain" => args.contains(&"--eval"),
        "luarocks" => first == "path",
        "thefuck" => first == "--alias",
        "fzf" => matches!(args.as_slice(), ["--bash" | "--zsh" | "--fish"]),
        "uv" | "uvx" => first == "generate-shell-completion",
        "kubectl" | "helm" | "npm" | "gh" | "rustup" | "poetry" | "pip" | "pip3" | "docker"
        | "deno" | "bun" | "pnpm" | "kind" | "minikube" | "flux" | "argocd" | "k3d"
        | "kustomize" | "stern" | "just" | "cargo" | "golangci-lint" | "hugo" | "doctl" => args
            .iter()
            .any(|a| matches!(*a, "completion" | "completions")),
        _ => false,
    }
}

/// The paths a lister prints (`find ROOT …`, `fd PATTERN ROOT`, `rg -l PATTERN ROOT`,
/// `grep -rl PATTERN ROOT`, `git ls-files`), each as `ROOT/*`; `None` for anything else.
fn listing(c: &Command) -> Option<Vec<String>> {
    if c.wrapper || !c.cwd_known {
        return None;
    }
    let positionals: Vec<&str> = c
        .args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let roots: Vec<&str> = match c.program.as_str() {
        "find" => super::semantics::operands(c),
        "fd" | "fdfind" => positionals
            .get(1..)
            .map(<[&str]>::to_vec)
            .unwrap_or_default(),
        "rg" if c.args.iter().any(|a| a == "--files") => positionals.clone(),
        "rg" | "grep" | "egrep"
            if c.args.iter().any(|a| {
                a == "-l"
                    || a == "--files-with-matches"
                    || (a.starts_with('-') && !a.starts_with("--") && a.contains('l'))
            }) =>
        {
            positionals
                .get(1..)
                .map(<[&str]>::to_vec)
                .unwrap_or_default()
        }
        "git" if matches!(positionals.first(), Some(&"ls-files")) => vec!["."],
        _ => return None,
    };
    let roots = if roots.is_empty() { vec!["."] } else { roots };
    if roots.iter().any(|r| is_unknown(r)) {
        return None;
    }
    Some(
        roots
            .iter()
            .map(|r| format!("{}/*", r.trim_end_matches('/')))
            .collect(),
    )
}

fn literal_output(cmds: &[Command]) -> Option<String> {
    let mut out = String::new();
    let mut any = false;
    for c in cmds {
        if !c.redirects.is_empty() || c.args.iter().any(|a| is_unknown(a)) {
            return None;
        }
        match c.program.as_str() {
            "echo" => {
                let words: Vec<&str> = c
                    .args
                    .iter()
                    .map(String::as_str)
                    .skip_while(|a| matches!(*a, "-n" | "-e" | "-E" | "-ne" | "-en"))
                    .collect();
                out.push_str(&words.join(" "));
                out.push('\n');
            }
            "printf" => {
                let words: Vec<&str> = c
                    .args
                    .iter()
                    .map(String::as_str)
                    .filter(|a| *a != "--")
                    .collect();
                // The format with its `%s` filled, roughly: enough to read the script.
                let mut text = words.first().copied().unwrap_or_default().to_owned();
                for w in words.iter().skip(1) {
                    text = text.replacen("%s", w, 1);
                }
                out.push_str(&text.replace("\\n", "\n"));
                out.push('\n');
            }
            "" => continue,
            _ => return None,
        }
        any = true;
    }
    any.then_some(out)
}
