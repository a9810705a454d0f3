//! Shell commands parsed with `brush-parser` and flattened into the simple commands they run.
//!
//! Why `brush-parser`: it is the parser of the `brush` shell, so it is kept working against
//! real bash scripts; it understands bash, not only POSIX sh (process substitution `<(…)`,
//! here-strings, `[[ … ]]`, `$'…'`), which is exactly what agents write; it is MIT licensed
//! (`yash-syntax` is GPL-3.0) and maintained (`conch-parser` has not been released since
//! 2019); and it gives a full AST plus a word parser, so quoting tricks like `r''m` or `\rm`
//! disappear by quote removal instead of by regex guessing.
//!
//! Each simple command becomes one [`Command`]: its program and arguments after quote removal,
//! its redirections, the cwd it runs in (a preceding `cd` counts), the variables it sets or
//! unsets, and the programs whose output can reach it (`fed_by`: earlier pipeline stages,
//! command and process substitutions). Wrappers (`sudo`, `env`, `timeout`, …) are unwrapped,
//! `sh -c`, `eval` and `find -exec` are parsed as nested commands.

use std::path::{Path, PathBuf};

use brush_parser::ast;
use brush_parser::{Parser, ParserOptions};

use super::paths::Resolver;
use super::semantics;

mod words;

/// How deep `bash -c "bash -c '…'"` and `$(…$(…))` may nest before we give up (and escalate).
const MAX_DEPTH: usize = 12;

/// Longest command line we analyse; past it, the command escalates instead.
const MAX_LEN: usize = 1 << 20;

/// Deepest bracket nesting we hand to the parser, which recurses per level: a line of ten
/// thousand `(` must escalate, not overflow the stack of the thread evaluating it.
const MAX_BRACKETS: usize = 100;

/// Text that stands for a value known only when the command runs (`$VAR`, `$(…)`).
pub const DYNAMIC: &str = "*";

/// One simple command that a shell script would run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Command {
    /// Basename of the program (`/bin/rm` → `rm`); empty for a bare assignment or redirection.
    pub program: String,
    /// The arguments after quote removal; dynamic parts become [`DYNAMIC`].
    pub args: Vec<String>,
    pub redirects: Vec<Redirect>,
    /// The directory the command runs in.
    pub cwd: PathBuf,
    /// Names of environment variables this command sets, exports or unsets.
    pub env: Vec<String>,
    /// Programs whose output can reach this command (stdin, substitutions).
    pub fed_by: Vec<String>,
    /// A wrapper such as `sudo`: recorded so rules can see it, but its arguments are another
    /// command (which is recorded too), not files it reads.
    pub wrapper: bool,
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
    let mut walker = Walker {
        resolver,
        out: Vec::new(),
        depth: 0,
    };
    let mut ctx = Ctx {
        cwd: cwd.to_path_buf(),
        fed_by: Vec::new(),
    };
    walker.script(script, &mut ctx)?;
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

/// What a command inherits from where it appears.
#[derive(Debug, Clone)]
struct Ctx {
    cwd: PathBuf,
    fed_by: Vec<String>,
}

struct Walker<'a> {
    resolver: &'a Resolver,
    out: Vec<Command>,
    depth: usize,
}

/// A word after expansion, with the programs of the substitutions inside it.
struct Expanded {
    text: String,
    fed: Vec<String>,
}

fn options() -> ParserOptions {
    ParserOptions::default()
}

impl Walker<'_> {
    fn script(&mut self, script: &str, ctx: &mut Ctx) -> Result<(), ShellError> {
        if self.depth >= MAX_DEPTH {
            return Err(ShellError(format!(
                "commands nested more than {MAX_DEPTH} levels deep"
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
        let start = self.out.len();
        f(self)?;
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
            // A lone command runs in this shell: its `cd` carries over to what follows.
            return self.command(only, ctx);
        }
        let mut upstream = Vec::new();
        for cmd in &pipeline.seq {
            let mut stage = ctx.clone();
            stage.fed_by.extend(upstream.iter().cloned());
            let programs = self.nested(|w| w.command(cmd, &mut stage))?;
            upstream.extend(programs);
        }
        Ok(())
    }

    fn command(&mut self, cmd: &ast::Command, ctx: &mut Ctx) -> Result<(), ShellError> {
        match cmd {
            ast::Command::Simple(simple) => self.simple(simple, ctx),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound, ctx)?;
                self.redirect_only(redirects.as_ref().map(|r| r.0.as_slice()), ctx)
            }
            ast::Command::Function(def) => {
                let ast::FunctionBody(body, redirects) = &def.body;
                let mut inner = ctx.clone();
                self.compound(body, &mut inner)?;
                self.redirect_only(redirects.as_ref().map(|r| r.0.as_slice()), ctx)
            }
            ast::Command::ExtendedTest(_, redirects) => {
                self.redirect_only(redirects.as_ref().map(|r| r.0.as_slice()), ctx)
            }
        }
    }

    fn compound(&mut self, cmd: &ast::CompoundCommand, ctx: &mut Ctx) -> Result<(), ShellError> {
        use ast::CompoundCommand as C;
        match cmd {
            C::Arithmetic(_) => Ok(()),
            C::ArithmeticForClause(f) => self.list(&f.body.list, ctx),
            C::BraceGroup(g) => self.list(&g.list, ctx),
            C::Subshell(s) => self.list(&s.list, &mut ctx.clone()),
            C::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.expand(&w.value, ctx)?;
                }
                self.list(&f.body.list, ctx)
            }
            C::CaseClause(c) => {
                self.expand(&c.value.value, ctx)?;
                for item in &c.cases {
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

    /// Records the redirections of a compound command (`{ …; } > file`) as a command of its own.
    fn redirect_only(
        &mut self,
        redirects: Option<&[ast::IoRedirect]>,
        ctx: &Ctx,
    ) -> Result<(), ShellError> {
        let Some(redirects) = redirects else {
            return Ok(());
        };
        let mut cmd = Command {
            cwd: ctx.cwd.clone(),
            fed_by: ctx.fed_by.clone(),
            ..Command::default()
        };
        let mut stdin_text = None;
        for r in redirects {
            self.redirect(r, ctx, &mut cmd, &mut stdin_text)?;
        }
        self.out.push(cmd);
        Ok(())
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, ctx: &mut Ctx) -> Result<(), ShellError> {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut cmd = Command {
            cwd: ctx.cwd.clone(),
            fed_by: ctx.fed_by.clone(),
            ..Command::default()
        };
        let mut argv: Vec<String> = Vec::new();
        let mut stdin_text: Option<String> = None;
        let prefix = simple.prefix.iter().flat_map(|p| p.0.iter());
        let suffix = simple.suffix.iter().flat_map(|s| s.0.iter());
        for item in prefix {
            match item {
                Item::AssignmentWord(a, w) => {
                    let (ast::AssignmentName::VariableName(n)
                    | ast::AssignmentName::ArrayElementName(n, _)) = &a.name;
                    cmd.env.push(n.clone());
                    let e = self.expand(&w.value, ctx)?;
                    cmd.fed_by.extend(e.fed);
                }
                other => self.item(other, ctx, &mut cmd, &mut argv, &mut stdin_text)?,
            }
        }
        if let Some(name) = &simple.word_or_name {
            let e = self.expand(&name.value, ctx)?;
            cmd.fed_by.extend(e.fed);
            argv.push(e.text);
        }
        for item in suffix {
            self.item(item, ctx, &mut cmd, &mut argv, &mut stdin_text)?;
        }
        self.argv(cmd, argv, stdin_text, ctx)
    }

    /// One word, redirection or process substitution of a simple command.
    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        ctx: &Ctx,
        cmd: &mut Command,
        argv: &mut Vec<String>,
        stdin_text: &mut Option<String>,
    ) -> Result<(), ShellError> {
        use ast::CommandPrefixOrSuffixItem as Item;
        match item {
            // After the command name, `a=b` is an ordinary argument (`export A=b`).
            Item::Word(w) | Item::AssignmentWord(_, w) => {
                let e = self.expand(&w.value, ctx)?;
                cmd.fed_by.extend(e.fed);
                argv.push(e.text);
            }
            Item::IoRedirect(r) => self.redirect(r, ctx, cmd, stdin_text)?,
            Item::ProcessSubstitution(kind, sub) => {
                let programs = self.nested(|w| w.list(&sub.list, &mut ctx.clone()))?;
                if matches!(kind, ast::ProcessSubstitutionKind::Read) {
                    cmd.fed_by.extend(programs);
                }
                argv.push("/dev/fd/63".to_owned());
            }
        }
        Ok(())
    }

    /// Records `argv` as a command, unwrapping wrappers and following nested scripts.
    fn argv(
        &mut self,
        mut cmd: Command,
        mut argv: Vec<String>,
        stdin_text: Option<String>,
        ctx: &mut Ctx,
    ) -> Result<(), ShellError> {
        if argv.is_empty() {
            self.out.push(cmd);
            return Ok(());
        }
        cmd.program = program_name(&argv[0]);
        argv.remove(0);
        cmd.args = argv;
        if let Some(unwrapped) = semantics::unwrap(&cmd) {
            let inner = Command {
                cwd: match &unwrapped.chdir {
                    Some(dir) => self.resolver.resolve(dir, &cmd.cwd).abs,
                    None => cmd.cwd.clone(),
                },
                fed_by: cmd.fed_by.clone(),
                // The wrapper's redirections are the wrapped command's.
                redirects: std::mem::take(&mut cmd.redirects),
                ..Command::default()
            };
            cmd.env.extend(unwrapped.env);
            cmd.wrapper = true;
            self.out.push(cmd);
            if let Some(script) = unwrapped.script {
                let mut inner_ctx = Ctx {
                    cwd: inner.cwd,
                    fed_by: inner.fed_by,
                };
                return self.script(&script, &mut inner_ctx);
            }
            return self.argv(inner, unwrapped.argv, stdin_text, ctx);
        }
        match cmd.program.as_str() {
            "cd" | "pushd" => {
                let target = cmd.args.iter().find(|a| !a.starts_with('-'));
                ctx.cwd = match target {
                    Some(dir) => self.resolver.resolve(dir, &ctx.cwd).abs,
                    None => self.resolver.home.clone(),
                };
            }
            "export" | "unset" | "declare" | "typeset" | "local" | "readonly" => {
                for a in cmd.args.iter().filter(|a| !a.starts_with(['-', '+'])) {
                    let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
                    cmd.env.push(name.to_owned());
                }
            }
            _ => {}
        }
        let nested = semantics::nested_script(&cmd, stdin_text.as_deref());
        let execs = semantics::find_execs(&cmd);
        let inner_ctx = Ctx {
            cwd: cmd.cwd.clone(),
            fed_by: cmd.fed_by.clone(),
        };
        self.out.push(cmd);
        if let Some(script) = nested {
            self.script(&script, &mut inner_ctx.clone())?;
        }
        for exec in execs {
            let inner = Command {
                cwd: inner_ctx.cwd.clone(),
                fed_by: inner_ctx.fed_by.clone(),
                ..Command::default()
            };
            self.argv(inner, exec, None, &mut inner_ctx.clone())?;
        }
        Ok(())
    }
}

/// The basename of a program word: `/usr/bin/rm` → `rm`.
pub fn program_name(word: &str) -> String {
    word.rsplit('/').next().unwrap_or(word).to_owned()
}
