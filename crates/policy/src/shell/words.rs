//! Shell words and redirections: brace expansion, quote removal, the expansions whose value
//! is known now, globs, and the commands substituted inside words.

use brush_parser::ast;
use brush_parser::word::{self, TildeExpr, WordPiece, WordPieceWithSource};

use super::lexical::{ansi_c, braces, tilde_after_assignment, user_home};

use super::{
    glob, is_unknown, literal_output, options, Command, Ctx, Expanded, Redirect, ShellError, Stdin,
    Walker, UNKNOWN,
};

/// Marks a field boundary made by splitting an unquoted expansion.
const SPLIT: char = '\u{1}';

/// One word being built: its value, and the same as a glob pattern (quoted metacharacters
/// escaped) when an unquoted `*`, `?` or `[` makes it one.
#[derive(Default)]
struct Build {
    text: String,
    pattern: String,
    globbing: bool,
}

impl Build {
    fn literal(&mut self, s: &str) {
        self.text.push_str(s);
        for c in s.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                self.pattern.push('\\');
            }
            self.pattern.push(c);
        }
    }

    /// An unquoted expansion's value: split into fields at blanks, as the shell does.
    fn split_value(&mut self, v: &str) {
        let mut first = true;
        for part in v.split([' ', '\t', '\n']) {
            if !first {
                self.text.push(SPLIT);
                self.pattern.push(SPLIT);
            }
            first = false;
            self.literal(part);
        }
    }

    fn unquoted(&mut self, s: &str) {
        self.text.push_str(s);
        self.pattern.push_str(s);
        self.globbing |= s.contains(['*', '?', '[']);
    }
}

impl Walker<'_> {
    /// Records a redirection on `cmd`: the file it reads or writes, the programs feeding it,
    /// and the stdin it gives the command.
    pub(super) fn redirect(
        &mut self,
        r: &ast::IoRedirect,
        ctx: &Ctx,
        cmd: &mut Command,
        stdin: &mut Option<Stdin>,
    ) -> Result<(), ShellError> {
        match r {
            ast::IoRedirect::File(fd, kind, target) => match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    self.file_redirect(*fd, kind, &w.value, ctx, cmd, stdin)?
                }
                ast::IoFileRedirectTarget::ProcessSubstitution(k, sub) => {
                    self.procsub_redirect(*fd, k, sub, ctx, cmd, stdin)?
                }
                // `>&WORD`: a file when WORD, expanded, is not a descriptor (checked there).
                ast::IoFileRedirectTarget::Duplicate(w) => {
                    self.file_redirect(*fd, kind, &w.value, ctx, cmd, stdin)?
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
            },
            ast::IoRedirect::OutputAndError(w, append) => {
                let e = self.expand_one(&w.value, ctx)?;
                cmd.fed_by.extend(e.fed.iter().cloned());
                cmd.redirects.push(Redirect {
                    target: e.text(),
                    reads: false,
                    writes: true,
                    appends: *append,
                });
            }
            ast::IoRedirect::HereString(_, w) => {
                let e = self.expand_one(&w.value, ctx)?;
                let text = e.text();
                cmd.fed_by.extend(e.fed);
                cmd.vars.extend(e.vars);
                *stdin = Some(here_stdin(text));
            }
            ast::IoRedirect::HereDocument(_, doc) => {
                let text = self.here_document(doc, ctx, cmd)?;
                *stdin = Some(here_stdin(text));
            }
        }
        Ok(())
    }

    /// `< FILE`, `> FILE`, `>> FILE`, `<> FILE`: the file read or written (on fd 0, the
    /// command's stdin).
    fn file_redirect(
        &mut self,
        fd: Option<ast::IoFd>,
        kind: &ast::IoFileRedirectKind,
        target: &str,
        ctx: &Ctx,
        cmd: &mut Command,
        stdin: &mut Option<Stdin>,
    ) -> Result<(), ShellError> {
        use ast::IoFileRedirectKind as K;
        let e = self.expand_one(target, ctx)?;
        cmd.fed_by.extend(e.fed.iter().cloned());
        cmd.vars.extend(e.vars.iter().cloned());
        let text = e.text();
        // `>&WORD` with a word that is not a descriptor writes stdout and stderr to a file.
        let fd_word = text.chars().all(|c| c.is_ascii_digit()) || text.ends_with('-');
        let (reads, writes) = match kind {
            K::Read => (true, false),
            K::Write | K::Append | K::Clobber => (false, true),
            K::ReadAndWrite => (true, true),
            K::DuplicateOutput => (false, !fd_word),
            K::DuplicateInput => (false, false),
        };
        if reads && fd.is_none_or(|f| f == 0) {
            *stdin = Some(Stdin::File(text.clone()));
        }
        if reads || writes {
            cmd.redirects.push(Redirect {
                target: text,
                reads,
                writes,
                appends: matches!(kind, K::Append),
            });
        }
        Ok(())
    }

    /// `< <(…)`, `> >(…)`: walks the substituted commands; a read one feeds the command (its
    /// stdin on fd 0, literal when its output is known now).
    fn procsub_redirect(
        &mut self,
        fd: Option<ast::IoFd>,
        kind: &ast::ProcessSubstitutionKind,
        sub: &ast::SubshellCommand,
        ctx: &Ctx,
        cmd: &mut Command,
        stdin: &mut Option<Stdin>,
    ) -> Result<(), ShellError> {
        let start = self.out.len();
        let programs = self.nested(|w| w.list(&sub.list, &mut ctx.clone()))?;
        if matches!(kind, ast::ProcessSubstitutionKind::Read) {
            cmd.fed_by.extend(programs);
            if fd.is_none_or(|f| f == 0) {
                *stdin =
                    Some(literal_output(&self.out[start..]).map_or(Stdin::Data, Stdin::Literal));
            }
        }
        Ok(())
    }

    /// A here-document's text, expanded unless its delimiter was quoted.
    fn here_document(
        &mut self,
        doc: &ast::IoHereDocument,
        ctx: &Ctx,
        cmd: &mut Command,
    ) -> Result<String, ShellError> {
        if !doc.requires_expansion {
            return Ok(doc.doc.value.clone());
        }
        // Only expansions matter here; the body's quotes are literal text.
        let pieces = word::parse_heredoc(&doc.doc.value, &options())
            .map_err(|e| ShellError(format!("{e}")))?;
        let mut b = Build::default();
        let mut e = Expanded::default();
        self.pieces(&pieces, ctx, &mut b, &mut e, true)?;
        cmd.fed_by.extend(e.fed);
        cmd.vars.extend(e.vars);
        Ok(b.text)
    }

    /// A word where the shell does no field splitting or globbing (redirect targets,
    /// assignments): one field.
    pub(super) fn expand_one(&mut self, raw: &str, ctx: &Ctx) -> Result<Expanded, ShellError> {
        let pieces = word::parse(raw, &options()).map_err(|e| ShellError(format!("{e}")))?;
        let mut b = Build::default();
        let mut e = Expanded::default();
        self.pieces(&pieces, ctx, &mut b, &mut e, true)?;
        e.fields = vec![b.text.replace(SPLIT, " ")];
        Ok(e)
    }

    /// Brace expansion, then quote removal and expansion, then globbing, of one word.
    pub(super) fn expand(&mut self, raw: &str, ctx: &Ctx) -> Result<Expanded, ShellError> {
        let mut e = Expanded::default();
        let raw = tilde_after_assignment(raw, &self.resolver.home.display().to_string());
        for variant in braces(&raw) {
            let pieces =
                word::parse(&variant, &options()).map_err(|err| ShellError(format!("{err}")))?;
            let mut b = Build::default();
            self.pieces(&pieces, ctx, &mut b, &mut e, false)?;
            if b.text.contains(SPLIT) {
                e.fields.extend(
                    b.text
                        .split(SPLIT)
                        .filter(|f| !f.is_empty())
                        .map(str::to_owned),
                );
                continue;
            }
            if b.globbing && !is_unknown(&b.text) {
                let matches = glob::expand(&b.pattern, &ctx.cwd, self.resolver.follow_symlinks);
                if !matches.is_empty() {
                    // The pattern too: what it would match once the command has run.
                    e.fields.extend(matches);
                }
            }
            e.fields.push(b.text);
        }
        Ok(e)
    }

    /// The commands substituted in an arithmetic expression; its value is unknown.
    pub(super) fn arithmetic(&mut self, text: &str, ctx: &Ctx) -> Result<Expanded, ShellError> {
        let mut e = Expanded::default();
        if text.contains(['$', '`']) {
            let pieces = word::parse(&format!("\"{}\"", text.replace('"', "")), &options())
                .map_err(|err| ShellError(format!("{err}")))?;
            let mut b = Build::default();
            self.pieces(&pieces, ctx, &mut b, &mut e, true)?;
        }
        e.fields = vec![UNKNOWN.to_string()];
        Ok(e)
    }

    fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        ctx: &Ctx,
        b: &mut Build,
        e: &mut Expanded,
        quoted: bool,
    ) -> Result<(), ShellError> {
        for p in pieces {
            match &p.piece {
                WordPiece::Text(s) if quoted => b.literal(s),
                WordPiece::Text(s) => b.unquoted(s),
                WordPiece::SingleQuotedText(s) => b.literal(s),
                WordPiece::AnsiCQuotedText(s) => b.literal(&ansi_c(s)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, ctx, b, e, true)?
                }
                WordPiece::EscapeSequence(s) => b.literal(s.strip_prefix('\\').unwrap_or(s)),
                WordPiece::TildeExpansion(t) => {
                    let v = match t {
                        TildeExpr::Home => Some(self.resolver.home.display().to_string()),
                        TildeExpr::UserHome(u) => Some(user_home(u)),
                        TildeExpr::WorkingDir => {
                            ctx.cwd_known.then(|| ctx.cwd.display().to_string())
                        }
                        TildeExpr::OldWorkingDir => {
                            ctx.oldpwd.as_ref().map(|p| p.display().to_string())
                        }
                        _ => None,
                    };
                    b.literal(&v.unwrap_or_else(|| UNKNOWN.to_string()));
                }
                WordPiece::ParameterExpansion(expr) => match self.parameter(expr, ctx, e)? {
                    Some(v) if !quoted => b.split_value(&v),
                    Some(v) => b.literal(&v),
                    None => b.literal(&UNKNOWN.to_string()),
                },
                WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
                    let start = self.out.len();
                    let programs = self.nested(|w| w.script(s, &mut ctx.clone()))?;
                    let only = super::only_command(&self.out[start..]);
                    if let Some(value) = only.and_then(|c| super::known_output(c, self.resolver)) {
                        // `$(pwd)`: a value known now, as `$PWD` is.
                        b.literal(&value);
                    } else {
                        e.fed.extend(programs);
                        if only.is_some_and(super::shell_setup) {
                            b.literal(super::SETUP);
                        } else {
                            b.literal(&UNKNOWN.to_string());
                        }
                    }
                }
                WordPiece::ArithmeticExpression(a) => {
                    let inner = self.arithmetic(&a.value, ctx)?;
                    e.fed.extend(inner.fed);
                    b.literal(&UNKNOWN.to_string());
                }
            }
        }
        Ok(())
    }
}

/// The stdin a here-string or here-document gives: its text, or data when that is known
/// only at run time.
fn here_stdin(text: String) -> Stdin {
    if is_unknown(&text) {
        Stdin::Data
    } else {
        Stdin::Literal(text)
    }
}
