//! Shell words and redirections: quote removal, static expansion, and substituted commands.

use brush_parser::ast;
use brush_parser::word::{self, ParameterExpr, TildeExpr, WordPiece, WordPieceWithSource};

use super::{options, Command, Ctx, Expanded, Redirect, ShellError, Walker, DYNAMIC};

impl Walker<'_> {
    pub(super) fn redirect(
        &mut self,
        r: &ast::IoRedirect,
        ctx: &Ctx,
        cmd: &mut Command,
        stdin_text: &mut Option<String>,
    ) -> Result<(), ShellError> {
        use ast::IoFileRedirectKind as K;
        match r {
            ast::IoRedirect::File(_, kind, target) => match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    let e = self.expand(&w.value, ctx)?;
                    cmd.fed_by.extend(e.fed);
                    let (reads, writes) = match kind {
                        K::Read => (true, false),
                        K::Write | K::Append | K::Clobber => (false, true),
                        K::ReadAndWrite => (true, true),
                        K::DuplicateInput | K::DuplicateOutput => (false, false),
                    };
                    if reads || writes {
                        cmd.redirects.push(Redirect {
                            target: e.text,
                            reads,
                            writes,
                        });
                    }
                }
                ast::IoFileRedirectTarget::ProcessSubstitution(k, sub) => {
                    let programs = self.nested(|w| w.list(&sub.list, &mut ctx.clone()))?;
                    if matches!(k, ast::ProcessSubstitutionKind::Read) {
                        cmd.fed_by.extend(programs);
                    }
                }
                ast::IoFileRedirectTarget::Fd(_) | ast::IoFileRedirectTarget::Duplicate(_) => {}
            },
            ast::IoRedirect::OutputAndError(w, _) => {
                let e = self.expand(&w.value, ctx)?;
                cmd.fed_by.extend(e.fed);
                cmd.redirects.push(Redirect {
                    target: e.text,
                    reads: false,
                    writes: true,
                });
            }
            ast::IoRedirect::HereString(_, w) => {
                let e = self.expand(&w.value, ctx)?;
                cmd.fed_by.extend(e.fed);
                *stdin_text = Some(e.text);
            }
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    // Only substitutions matter here; the body's quotes are literal text.
                    let pieces = word::parse_heredoc(&doc.doc.value, &options())
                        .map_err(|e| ShellError(format!("{e}")))?;
                    let mut e = Expanded {
                        text: String::new(),
                        fed: Vec::new(),
                    };
                    self.pieces(&pieces, ctx, &mut e)?;
                    cmd.fed_by.extend(e.fed);
                }
                *stdin_text = Some(doc.doc.value.clone());
            }
        }
        Ok(())
    }

    /// Quote removal and static expansion of one word.
    pub(super) fn expand(&mut self, raw: &str, ctx: &Ctx) -> Result<Expanded, ShellError> {
        let pieces = word::parse(raw, &options()).map_err(|e| ShellError(format!("{e}")))?;
        let mut e = Expanded {
            text: String::new(),
            fed: Vec::new(),
        };
        self.pieces(&pieces, ctx, &mut e)?;
        Ok(e)
    }

    pub(super) fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        ctx: &Ctx,
        e: &mut Expanded,
    ) -> Result<(), ShellError> {
        for p in pieces {
            match &p.piece {
                WordPiece::Text(s) | WordPiece::SingleQuotedText(s) => e.text.push_str(s),
                WordPiece::AnsiCQuotedText(s) => e.text.push_str(&ansi_c(s)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => self.pieces(inner, ctx, e)?,
                WordPiece::EscapeSequence(s) => e.text.push_str(s.strip_prefix('\\').unwrap_or(s)),
                WordPiece::TildeExpansion(t) => match t {
                    TildeExpr::Home => e.text.push_str(&self.resolver.home.to_string_lossy()),
                    TildeExpr::UserHome(u) if u == "root" => e.text.push_str("/root"),
                    TildeExpr::UserHome(u) => e.text.push_str(&format!("/home/{u}")),
                    TildeExpr::WorkingDir => e.text.push_str(&ctx.cwd.to_string_lossy()),
                    _ => e.text.push_str(DYNAMIC),
                },
                WordPiece::ParameterExpansion(expr) => {
                    let (name, default) = match expr {
                        ParameterExpr::Parameter {
                            parameter: word::Parameter::Named(n),
                            indirect: false,
                        } => (Some(n.as_str()), None),
                        ParameterExpr::UseDefaultValues { default_value, .. }
                        | ParameterExpr::AssignDefaultValues { default_value, .. } => {
                            (None, default_value.as_deref())
                        }
                        _ => (None, None),
                    };
                    if let Some(d) = default {
                        let inner = self.expand(d, ctx)?;
                        e.fed.extend(inner.fed);
                    }
                    match name {
                        Some("HOME") => e.text.push_str(&self.resolver.home.to_string_lossy()),
                        Some("PWD") => e.text.push_str(&ctx.cwd.to_string_lossy()),
                        _ => e.text.push_str(DYNAMIC),
                    }
                }
                WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
                    let programs = self.nested(|w| w.script(s, &mut ctx.clone()))?;
                    e.fed.extend(programs);
                    e.text.push_str(DYNAMIC);
                }
                WordPiece::ArithmeticExpression(_) => e.text.push_str(DYNAMIC),
            }
        }
        Ok(())
    }
}

/// Decodes the common escapes of `$'…'`.
fn ansi_c(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('x') => {
                let hex: String = chars
                    .clone()
                    .take(2)
                    .take_while(char::is_ascii_hexdigit)
                    .collect();
                for _ in 0..hex.len() {
                    chars.next();
                }
                if let Some(ch) = u8::from_str_radix(&hex, 16).ok().map(char::from) {
                    out.push(ch);
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}
