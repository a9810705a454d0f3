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

use brush_parser::ast;
use brush_parser::{Parser, ParserOptions};

use super::paths::Resolver;

mod builtins;
mod code;
mod glob;
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

/// Stands for the part of a word whose value is known only when the command runs (`$VAR`
/// from the environment, `$(…)`, `$((…))`). A NUL cannot occur in a real argument, so a
/// word containing it is unknown, and no rule can mistake it for a real path.
pub const UNKNOWN: char = '\0';

/// Whether a word has a part known only at run time.
pub fn is_unknown(word: &str) -> bool {
    word.contains(UNKNOWN)
}

/// Where a command's standard input comes from.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Stdin {
    /// Whatever the caller's stdin is (a terminal, or nothing).
    #[default]
    Inherited,
    /// Text known now: a here-document, a here-string, `echo '…' |`.
    Literal(String),
    /// The output of other programs, or anything else not known now.
    Data,
    /// A file (`< file`).
    File(String),
}

/// One simple command that a shell script would run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Command {
    /// Basename of the program (`/bin/rm` → `rm`); empty for a bare assignment or redirection.
    pub program: String,
    /// The program word as written (after expansion): a path when it contains a `/`.
    pub path: String,
    /// The arguments after expansion; unknown parts are [`UNKNOWN`].
    pub args: Vec<String>,
    pub redirects: Vec<Redirect>,
    /// The directory the command runs in.
    pub cwd: PathBuf,
    /// False when an earlier `cd` went somewhere known only at run time.
    pub cwd_known: bool,
    /// Names of environment variables this command sets, exports or unsets; `(all)` when it
    /// clears the whole environment (`env -i`).
    pub env: Vec<String>,
    /// Programs whose output can reach this command (stdin, substitutions).
    pub fed_by: Vec<String>,
    pub stdin: Stdin,
    /// Arguments that are process substitutions (`<(…)`), by index, and what they hold.
    pub procsubs: Vec<(usize, Stdin)>,
    /// A wrapper such as `sudo`: recorded so rules can see it, but its arguments are another
    /// command (which is recorded too), not files it reads.
    pub wrapper: bool,
    /// The wrappers this command runs under (`sudo`, `timeout`, `ahp-wrap`, …).
    pub via: Vec<String>,
    /// Names of the variables the arguments refer to.
    pub vars: Vec<String>,
    /// Why this command runs code nobody can read now (downloaded, decoded, piped, built at
    /// run time, or written earlier in the same command), if it does.
    pub dynamic_code: Option<String>,
    /// The literal program text this command's interpreter runs (`python -c`, `awk '…'`).
    pub code: Option<String>,
    /// The code this command runs is a value known only at run time (`bash -c "$CMD"`).
    pub code_unknown: bool,
    /// A file this command runs as a program or script (`./x`, `sh x`, `source x`).
    pub runs: Option<String>,
    /// Paths the literal code names (read), writes and deletes, from the interpreter's code.
    pub code_paths: CodePaths,
}

/// What inline interpreter code does with files, as far as its literals show.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CodePaths {
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    pub deletes: Vec<String>,
}

/// A redirection to or from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Redirect {
    pub target: String,
    pub reads: bool,
    pub writes: bool,
}

/// Why a command could not be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShellError(pub String);

/// Parses `script` and returns every simple command it may run, in order.
pub fn analyse(script: &str, cwd: &Path, resolver: &Resolver) -> Result<Vec<Command>, ShellError> {
    let mut walker = Walker::new(resolver);
    let mut ctx = Ctx::new(cwd);
    walker.script(script, &mut ctx)?;
    Ok(walker.out)
}

/// Analyses an argv that is executed without a shell (Codex's argv form): the program and
/// its arguments are taken as they are, with no expansion at all.
pub fn analyse_argv(
    argv: &[String],
    cwd: &Path,
    resolver: &Resolver,
) -> Result<Vec<Command>, ShellError> {
    let mut walker = Walker::new(resolver);
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
}

impl Ctx {
    fn new(cwd: &Path) -> Ctx {
        Ctx {
            cwd: cwd.to_path_buf(),
            cwd_known: true,
            oldpwd: None,
            dirs: Vec::new(),
            vars: HashMap::new(),
            fed_by: Vec::new(),
            stdin: Stdin::Inherited,
        }
    }
}

struct Walker<'a> {
    resolver: &'a Resolver,
    out: Vec<Command>,
    depth: usize,
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
    fn new(resolver: &'a Resolver) -> Walker<'a> {
        Walker {
            resolver,
            out: Vec::new(),
            depth: 0,
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

    fn push(&mut self, cmd: Command) -> Result<(), ShellError> {
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

    fn list(&mut self, list: &ast::CompoundList, ctx: &mut Ctx) -> Result<(), ShellError> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, ctx)?;
            for next in &and_or.additional {
                let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                self.pipeline(p, ctx)?;
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, ctx: &mut Ctx) -> Result<(), ShellError> {
        if let [only] = pipeline.seq.as_slice() {
            // A lone command runs in this shell: its `cd` and assignments carry over.
            return self.command(only, ctx);
        }
        let mut upstream = Vec::new();
        let mut feed = ctx.stdin.clone();
        for cmd in &pipeline.seq {
            let mut stage = ctx.clone();
            stage.fed_by.extend(upstream.iter().cloned());
            stage.stdin = feed;
            let start = self.out.len();
            let programs = self.nested(|w| w.command(cmd, &mut stage))?;
            feed = literal_output(&self.out[start..]).map_or(Stdin::Data, Stdin::Literal);
            upstream.extend(programs);
        }
        Ok(())
    }

    fn command(&mut self, cmd: &ast::Command, ctx: &mut Ctx) -> Result<(), ShellError> {
        match cmd {
            ast::Command::Simple(simple) => self.simple(simple, ctx),
            ast::Command::Compound(compound, redirects) => {
                let mut inner = ctx.clone();
                let stdin = self.redirect_only(redirects.as_ref(), ctx)?;
                if let Some(s) = stdin {
                    inner.stdin = s;
                }
                self.compound(compound, &mut inner)?;
                if !matches!(compound, ast::CompoundCommand::Subshell(_)) {
                    *ctx = Ctx {
                        stdin: ctx.stdin.clone(),
                        fed_by: ctx.fed_by.clone(),
                        ..inner
                    };
                }
                Ok(())
            }
            ast::Command::Function(def) => {
                let ast::FunctionBody(body, redirects) = &def.body;
                let mut inner = ctx.clone();
                self.compound(body, &mut inner)?;
                self.redirect_only(redirects.as_ref(), ctx).map(|_| ())
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.test_expr(&test.expr, ctx)?;
                self.redirect_only(redirects.as_ref(), ctx).map(|_| ())
            }
        }
    }

    fn test_expr(&mut self, e: &ast::ExtendedTestExpr, ctx: &Ctx) -> Result<(), ShellError> {
        use ast::ExtendedTestExpr as T;
        match e {
            T::And(a, b) | T::Or(a, b) => {
                self.test_expr(a, ctx)?;
                self.test_expr(b, ctx)
            }
            T::Not(a) | T::Parenthesized(a) => self.test_expr(a, ctx),
            T::UnaryTest(_, w) => self.expand(&w.value, ctx).map(|_| ()),
            T::BinaryTest(_, a, b) => {
                self.expand(&a.value, ctx)?;
                self.expand(&b.value, ctx).map(|_| ())
            }
        }
    }

    fn compound(&mut self, cmd: &ast::CompoundCommand, ctx: &mut Ctx) -> Result<(), ShellError> {
        use ast::CompoundCommand as C;
        match cmd {
            C::Arithmetic(a) => self.arithmetic(&a.expr.value, ctx).map(|_| ()),
            C::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&e.value, ctx)?;
                }
                self.list(&f.body.list, ctx)
            }
            C::BraceGroup(g) => self.list(&g.list, ctx),
            C::Subshell(s) => self.list(&s.list, &mut ctx.clone()),
            C::ForClause(f) => self.for_clause(f, ctx),
            C::CaseClause(c) => {
                self.expand(&c.value.value, ctx)?;
                for item in &c.cases {
                    for p in &item.patterns {
                        self.expand(&p.value, ctx)?;
                    }
                    if let Some(body) = &item.cmd {
                        self.list(body, ctx)?;
                    }
                }
                Ok(())
            }
            C::IfClause(i) => {
                self.list(&i.condition, ctx)?;
                self.list(&i.then, ctx)?;
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        self.list(cond, ctx)?;
                    }
                    self.list(&e.body, ctx)?;
                }
                Ok(())
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.list(&w.0, ctx)?;
                self.list(&w.1.list, ctx)
            }
            C::Coprocess(c) => self.command(&c.body, &mut ctx.clone()),
        }
    }

    /// `for V in WORDS`: the body once per value when every value is known (up to a few),
    /// else once with `V` unknown.
    fn for_clause(&mut self, f: &ast::ForClauseCommand, ctx: &mut Ctx) -> Result<(), ShellError> {
        const MAX_UNROLL: usize = 16;
        let mut values = Vec::new();
        let mut fed = Vec::new();
        for w in f.values.iter().flatten() {
            let e = self.expand(&w.value, ctx)?;
            fed.extend(e.fed);
            values.extend(e.fields);
        }
        // The loop variable is set by the shell: an edit of the environment, like `export`.
        let mut marker = self.new_command(ctx);
        marker.env.push(f.variable_name.clone());
        marker.fed_by.extend(fed);
        self.push(marker)?;
        if f.values.is_none() || values.iter().any(|v| is_unknown(v)) || values.len() > MAX_UNROLL {
            ctx.vars.insert(f.variable_name.clone(), None);
            return self.list(&f.body.list, ctx);
        }
        for v in values {
            ctx.vars.insert(f.variable_name.clone(), Some(v));
            self.list(&f.body.list, ctx)?;
        }
        Ok(())
    }

    /// Records the redirections of a compound command (`{ …; } > file`) as a command of its
    /// own, and returns what they make the compound's stdin.
    fn redirect_only(
        &mut self,
        redirects: Option<&ast::RedirectList>,
        ctx: &Ctx,
    ) -> Result<Option<Stdin>, ShellError> {
        let Some(redirects) = redirects else {
            return Ok(None);
        };
        let mut cmd = self.new_command(ctx);
        let mut stdin = None;
        for r in &redirects.0 {
            self.redirect(r, ctx, &mut cmd, &mut stdin)?;
        }
        self.push(cmd)?;
        Ok(stdin)
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, ctx: &mut Ctx) -> Result<(), ShellError> {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut cmd = self.new_command(ctx);
        let mut argv: Vec<String> = Vec::new();
        let mut stdin: Option<Stdin> = None;
        let mut assignments: Vec<(String, Option<String>)> = Vec::new();
        let prefix = simple.prefix.iter().flat_map(|p| p.0.iter());
        let suffix = simple.suffix.iter().flat_map(|s| s.0.iter());
        for item in prefix {
            match item {
                Item::AssignmentWord(a, w) => {
                    let (ast::AssignmentName::VariableName(n)
                    | ast::AssignmentName::ArrayElementName(n, _)) = &a.name;
                    cmd.env.push(n.clone());
                    let value = match &a.value {
                        ast::AssignmentValue::Scalar(v) => {
                            let e = self.expand_one(&v.value, ctx)?;
                            cmd.fed_by.extend(e.fed.iter().cloned());
                            cmd.env.extend(e.assigned.iter().cloned());
                            Some(e.text()).filter(|t| !is_unknown(t) && !a.append)
                        }
                        ast::AssignmentValue::Array(items) => {
                            for (k, v) in items {
                                if let Some(k) = k {
                                    self.expand(&k.value, ctx)?;
                                }
                                let e = self.expand(&v.value, ctx)?;
                                cmd.fed_by.extend(e.fed);
                            }
                            None
                        }
                    };
                    // The whole word, too: brush keeps `A=$(cmd)` in `w`.
                    let _ = w;
                    assignments.push((n.clone(), value));
                }
                other => self.item(other, ctx, &mut cmd, &mut argv, &mut stdin)?,
            }
        }
        if let Some(name) = &simple.word_or_name {
            let e = self.expand(&name.value, ctx)?;
            cmd.fed_by.extend(e.fed);
            cmd.vars.extend(e.vars);
            cmd.env.extend(e.assigned);
            argv.extend(e.fields);
        }
        for item in suffix {
            self.item(item, ctx, &mut cmd, &mut argv, &mut stdin)?;
        }
        if let Some(s) = stdin {
            cmd.stdin = s;
        }
        if argv.is_empty() {
            // `A=1` alone sets a shell variable for what follows.
            for (name, value) in assignments {
                ctx.vars.insert(name, value);
            }
        }
        self.argv(cmd, argv, ctx)
    }

    /// One word, redirection or process substitution of a simple command.
    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        ctx: &Ctx,
        cmd: &mut Command,
        argv: &mut Vec<String>,
        stdin: &mut Option<Stdin>,
    ) -> Result<(), ShellError> {
        use ast::CommandPrefixOrSuffixItem as Item;
        match item {
            // After the command name, `a=b` is an ordinary argument (`export A=b`).
            Item::Word(w) | Item::AssignmentWord(_, w) => {
                let e = self.expand(&w.value, ctx)?;
                cmd.fed_by.extend(e.fed);
                cmd.vars.extend(e.vars);
                cmd.env.extend(e.assigned);
                argv.extend(e.fields);
            }
            Item::IoRedirect(r) => self.redirect(r, ctx, cmd, stdin)?,
            Item::ProcessSubstitution(kind, sub) => {
                let start = self.out.len();
                let programs = self.nested(|w| w.list(&sub.list, &mut ctx.clone()))?;
                if matches!(kind, ast::ProcessSubstitutionKind::Read) {
                    let held =
                        literal_output(&self.out[start..]).map_or(Stdin::Data, Stdin::Literal);
                    cmd.procsubs.push((argv.len(), held));
                    cmd.fed_by.extend(programs);
                }
                argv.push("/dev/fd/63".to_owned());
            }
        }
        Ok(())
    }
}

/// The text a list of commands prints when it is nothing but `echo`/`printf` of known words.
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

/// The basename of a program word: `/usr/bin/rm` → `rm`.
pub fn program_name(word: &str) -> String {
    word.rsplit('/').next().unwrap_or(word).to_owned()
}
