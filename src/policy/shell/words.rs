//! Shell words and redirections: brace expansion, quote removal, the expansions whose value
//! is known now, globs, and the commands substituted inside words.

use brush_parser::ast;
use brush_parser::word::{
    self, BraceExpressionMember, BraceExpressionOrText, Parameter, ParameterExpr,
    ParameterTestType, SubstringMatchKind, TildeExpr, WordPiece, WordPieceWithSource,
};

use super::{
    glob, is_unknown, literal_output, options, Command, Ctx, Expanded, Redirect, ShellError, Stdin,
    Walker, UNKNOWN,
};

/// Marks a field boundary made by splitting an unquoted expansion.
const SPLIT: char = '\u{1}';

/// Most words one brace expression may produce.
const MAX_BRACE_FIELDS: usize = 256;

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

/// Variable names whose value is a credential; their use in a command is recorded.
impl Walker<'_> {
    pub(super) fn redirect(
        &mut self,
        r: &ast::IoRedirect,
        ctx: &Ctx,
        cmd: &mut Command,
        stdin: &mut Option<Stdin>,
    ) -> Result<(), ShellError> {
        use ast::IoFileRedirectKind as K;
        match r {
            ast::IoRedirect::File(fd, kind, target) => match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    let e = self.expand_one(&w.value, ctx)?;
                    cmd.fed_by.extend(e.fed.iter().cloned());
                    cmd.vars.extend(e.vars.iter().cloned());
                    let text = e.text();
                    let (reads, writes) = match kind {
                        K::Read => (true, false),
                        K::Write | K::Append | K::Clobber => (false, true),
                        K::ReadAndWrite => (true, true),
                        K::DuplicateInput | K::DuplicateOutput => (false, false),
                    };
                    if reads && fd.map_or(true, |f| f == 0) {
                        *stdin = Some(Stdin::File(text.clone()));
                    }
                    if reads || writes {
                        cmd.redirects.push(Redirect {
                            target: text,
                            reads,
                            writes,
                        });
                    }
                }
                ast::IoFileRedirectTarget::ProcessSubstitution(k, sub) => {
                    let start = self.out.len();
                    let programs = self.nested(|w| w.list(&sub.list, &mut ctx.clone()))?;
                    if matches!(k, ast::ProcessSubstitutionKind::Read) {
                        cmd.fed_by.extend(programs);
                        if fd.map_or(true, |f| f == 0) {
                            *stdin = Some(
                                literal_output(&self.out[start..])
                                    .map_or(Stdin::Data, Stdin::Literal),
                            );
                        }
                    }
                }
                ast::IoFileRedirectTarget::Fd(_) | ast::IoFileRedirectTarget::Duplicate(_) => {}
            },
            ast::IoRedirect::OutputAndError(w, _) => {
                let e = self.expand_one(&w.value, ctx)?;
                cmd.fed_by.extend(e.fed.iter().cloned());
                cmd.redirects.push(Redirect {
                    target: e.text(),
                    reads: false,
                    writes: true,
                });
            }
            ast::IoRedirect::HereString(_, w) => {
                let e = self.expand_one(&w.value, ctx)?;
                let text = e.text();
                cmd.fed_by.extend(e.fed);
                cmd.vars.extend(e.vars);
                *stdin = Some(if is_unknown(&text) {
                    Stdin::Data
                } else {
                    Stdin::Literal(text)
                });
            }
            ast::IoRedirect::HereDocument(_, doc) => {
                let text = if doc.requires_expansion {
                    // Only expansions matter here; the body's quotes are literal text.
                    let pieces = word::parse_heredoc(&doc.doc.value, &options())
                        .map_err(|e| ShellError(format!("{e}")))?;
                    let mut b = Build::default();
                    let mut e = Expanded::default();
                    self.pieces(&pieces, ctx, &mut b, &mut e, true)?;
                    cmd.fed_by.extend(e.fed);
                    cmd.vars.extend(e.vars);
                    b.text
                } else {
                    doc.doc.value.clone()
                };
                *stdin = Some(if is_unknown(&text) {
                    Stdin::Data
                } else {
                    Stdin::Literal(text)
                });
            }
        }
        Ok(())
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
                    let programs = self.nested(|w| w.script(s, &mut ctx.clone()))?;
                    e.fed.extend(programs);
                    b.literal(&UNKNOWN.to_string());
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

    /// The value of a variable, `None` when it is known only at run time.
    fn var(&self, p: &Parameter, ctx: &Ctx) -> Option<String> {
        let name = match p {
            Parameter::Named(name) => name.clone(),
            // `bash -c SCRIPT ARG0 ARG1…` sets them; elsewhere they are unknown.
            Parameter::Positional(n) => n.to_string(),
            // The shell itself and its last background job: processes of this command, not
            // the wrapper's, whatever their number (shown as job specs).
            Parameter::Special(word::SpecialParameter::LastBackgroundProcessId) => {
                return Some("%!".to_owned())
            }
            Parameter::Special(word::SpecialParameter::ProcessId) => return Some("%$".to_owned()),
            _ => return None,
        };
        let name = &name;
        if let Some(v) = ctx.vars.get(name) {
            return v.clone();
        }
        match name.as_str() {
            "HOME" => Some(self.resolver.home.display().to_string()),
            "PWD" => ctx.cwd_known.then(|| ctx.cwd.display().to_string()),
            "OLDPWD" => ctx.oldpwd.as_ref().map(|p| p.display().to_string()),
            _ => None,
        }
    }

    /// Evaluates `${…}` where it can be, recording substitutions, names and assignments.
    fn parameter(
        &mut self,
        expr: &ParameterExpr,
        ctx: &Ctx,
        e: &mut Expanded,
    ) -> Result<Option<String>, ShellError> {
        use ParameterExpr as P;
        let name_of = |p: &Parameter| match p {
            Parameter::Named(n)
            | Parameter::NamedWithIndex { name: n, .. }
            | Parameter::NamedWithAllIndices { name: n, .. } => Some(n.clone()),
            _ => None,
        };
        let sub =
            |w: &mut Self, e: &mut Expanded, text: &str| -> Result<Option<String>, ShellError> {
                let inner = w.expand_one(text, ctx)?;
                e.fed.extend(inner.fed.iter().cloned());
                e.vars.extend(inner.vars.iter().cloned());
                e.assigned.extend(inner.assigned.iter().cloned());
                let t = inner.text();
                Ok((!is_unknown(&t)).then_some(t))
            };
        let (parameter, indirect) = match expr {
            P::Parameter {
                parameter,
                indirect,
            }
            | P::UseDefaultValues {
                parameter,
                indirect,
                ..
            }
            | P::AssignDefaultValues {
                parameter,
                indirect,
                ..
            }
            | P::IndicateErrorIfNullOrUnset {
                parameter,
                indirect,
                ..
            }
            | P::UseAlternativeValue {
                parameter,
                indirect,
                ..
            }
            | P::ParameterLength {
                parameter,
                indirect,
            }
            | P::RemoveSmallestSuffixPattern {
                parameter,
                indirect,
                ..
            }
            | P::RemoveLargestSuffixPattern {
                parameter,
                indirect,
                ..
            }
            | P::RemoveSmallestPrefixPattern {
                parameter,
                indirect,
                ..
            }
            | P::RemoveLargestPrefixPattern {
                parameter,
                indirect,
                ..
            }
            | P::Substring {
                parameter,
                indirect,
                ..
            }
            | P::Transform {
                parameter,
                indirect,
                ..
            }
            | P::UppercaseFirstChar {
                parameter,
                indirect,
                ..
            }
            | P::UppercasePattern {
                parameter,
                indirect,
                ..
            }
            | P::LowercaseFirstChar {
                parameter,
                indirect,
                ..
            }
            | P::LowercasePattern {
                parameter,
                indirect,
                ..
            }
            | P::ReplaceSubstring {
                parameter,
                indirect,
                ..
            } => (parameter, *indirect),
            // `${!PREFIX*}`: the names of the variables with that prefix, as a name pattern.
            P::VariableNames { prefix, .. } => return Ok(Some(format!("{prefix}*"))),
            P::MemberKeys { .. } => return Ok(None),
        };
        e.vars.extend(name_of(parameter));
        let value = if indirect {
            None
        } else {
            self.var(parameter, ctx)
        };
        let empty_counts = |t: &ParameterTestType| matches!(t, ParameterTestType::UnsetOrNull);
        Ok(match expr {
            P::Parameter { .. } | P::IndicateErrorIfNullOrUnset { .. } => value,
            P::UseDefaultValues {
                test_type,
                default_value,
                ..
            }
            | P::AssignDefaultValues {
                test_type,
                default_value,
                ..
            } => {
                if matches!(expr, P::AssignDefaultValues { .. }) {
                    e.assigned.extend(name_of(parameter));
                }
                let default = sub(self, e, default_value.as_deref().unwrap_or_default())?;
                match value {
                    Some(v) if !(v.is_empty() && empty_counts(test_type)) => Some(v),
                    Some(_) => default,
                    None => None,
                }
            }
            P::UseAlternativeValue {
                test_type,
                alternative_value,
                ..
            } => {
                let alt = sub(self, e, alternative_value.as_deref().unwrap_or_default())?;
                match value {
                    Some(v) if v.is_empty() && empty_counts(test_type) => Some(String::new()),
                    Some(_) => alt,
                    None => None,
                }
            }
            P::ParameterLength { .. } => value.map(|v| v.chars().count().to_string()),
            P::RemoveSmallestSuffixPattern { pattern, .. }
            | P::RemoveLargestSuffixPattern { pattern, .. }
            | P::RemoveSmallestPrefixPattern { pattern, .. }
            | P::RemoveLargestPrefixPattern { pattern, .. } => {
                let pat = sub(self, e, pattern.as_deref().unwrap_or_default())?;
                match (value, pat) {
                    (Some(v), Some(p)) => remove_pattern(expr, &v, &p),
                    _ => None,
                }
            }
            P::ReplaceSubstring {
                pattern,
                replacement,
                match_kind,
                ..
            } => {
                let pat = sub(self, e, pattern)?;
                let rep = sub(self, e, replacement.as_deref().unwrap_or_default())?;
                match (value, pat, rep) {
                    (Some(v), Some(p), Some(r)) if !p.contains(['*', '?', '[']) => {
                        Some(replace(&v, &p, &r, match_kind))
                    }
                    _ => None,
                }
            }
            _ => None,
        })
    }
}

/// `${v%pat}`, `${v%%pat}`, `${v#pat}`, `${v##pat}` with a glob pattern.
fn remove_pattern(expr: &ParameterExpr, v: &str, pattern: &str) -> Option<String> {
    use ParameterExpr as P;
    let m = globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .ok()?
        .compile_matcher();
    let cuts: Vec<usize> = v
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(v.len()))
        .collect();
    let out = match expr {
        // Shortest suffix: try the cut closest to the end first.
        P::RemoveSmallestSuffixPattern { .. } => cuts
            .iter()
            .rev()
            .find(|&&i| m.is_match(&v[i..]))
            .map(|&i| &v[..i]),
        P::RemoveLargestSuffixPattern { .. } => cuts
            .iter()
            .find(|&&i| m.is_match(&v[i..]))
            .map(|&i| &v[..i]),
        P::RemoveSmallestPrefixPattern { .. } => cuts
            .iter()
            .find(|&&i| m.is_match(&v[..i]))
            .map(|&i| &v[i..]),
        P::RemoveLargestPrefixPattern { .. } => cuts
            .iter()
            .rev()
            .find(|&&i| m.is_match(&v[..i]))
            .map(|&i| &v[i..]),
        _ => None,
    };
    Some(out.unwrap_or(v).to_owned())
}

fn replace(v: &str, p: &str, r: &str, kind: &SubstringMatchKind) -> String {
    match kind {
        SubstringMatchKind::Prefix => match v.strip_prefix(p) {
            Some(rest) if !p.is_empty() => format!("{r}{rest}"),
            _ => v.to_owned(),
        },
        SubstringMatchKind::Suffix => match v.strip_suffix(p) {
            Some(rest) if !p.is_empty() => format!("{rest}{r}"),
            _ => v.to_owned(),
        },
        SubstringMatchKind::FirstOccurrence if !p.is_empty() => v.replacen(p, r, 1),
        SubstringMatchKind::Anywhere if !p.is_empty() => v.replace(p, r),
        _ => v.to_owned(),
    }
}

/// Bash expands `~` after the `=` of a word that looks like an assignment, even as an
/// argument (`dd of=~/x`), and after each `:` of it.
fn tilde_after_assignment(raw: &str, home: &str) -> String {
    let Some((name, value)) = raw.split_once('=') else {
        return raw.to_owned();
    };
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid || !value.contains('~') {
        return raw.to_owned();
    }
    let parts: Vec<String> = value
        .split(':')
        .map(|p| match p.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("'{home}'{rest}"),
            _ => p.to_owned(),
        })
        .collect();
    format!("{name}={}", parts.join(":"))
}

/// `~user`: from the password database, else the usual place.
fn user_home(user: &str) -> String {
    if let Ok(passwd) = std::fs::read_to_string("/etc/passwd") {
        for line in passwd.lines() {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() > 5 && f[0] == user {
                return f[5].to_owned();
            }
        }
    }
    if user == "root" {
        "/root".to_owned()
    } else {
        format!("/home/{user}")
    }
}

/// Brace expansion of a raw word: `a{b,c}` → `ab`, `ac`. A word without a brace
/// expression, or one that expands past the limit, is returned as it is.
fn braces(raw: &str) -> Vec<String> {
    if !raw.contains('{') || !(raw.contains(',') || raw.contains("..")) {
        return vec![raw.to_owned()];
    }
    match word::parse_brace_expansions(raw, &options()) {
        Ok(Some(parts)) => {
            let mut out = vec![String::new()];
            if !expand_parts(&parts, &mut out) {
                return vec![raw.to_owned()];
            }
            out
        }
        _ => vec![raw.to_owned()],
    }
}

fn expand_parts(parts: &[BraceExpressionOrText], acc: &mut Vec<String>) -> bool {
    for part in parts {
        let options: Vec<String> = match part {
            BraceExpressionOrText::Text(t) => vec![t.clone()],
            BraceExpressionOrText::Expr(members) => {
                let mut opts = Vec::new();
                for m in members {
                    match m {
                        BraceExpressionMember::Child(children) => {
                            let mut sub = vec![String::new()];
                            if !expand_parts(children, &mut sub) {
                                return false;
                            }
                            opts.extend(sub);
                        }
                        BraceExpressionMember::NumberSequence {
                            start,
                            end,
                            increment,
                        } => {
                            let step = increment.unsigned_abs().max(1) as usize;
                            let (lo, hi) = (*start.min(end), *start.max(end));
                            if (hi - lo) as usize / step > MAX_BRACE_FIELDS {
                                return false;
                            }
                            let mut seq: Vec<String> =
                                (lo..=hi).step_by(step).map(|n| n.to_string()).collect();
                            if start > end {
                                seq.reverse();
                            }
                            opts.extend(seq);
                        }
                        BraceExpressionMember::CharSequence {
                            start,
                            end,
                            increment,
                        } => {
                            let step = increment.unsigned_abs().max(1) as usize;
                            let (lo, hi) = (*start.min(end), *start.max(end));
                            opts.extend((lo..=hi).step_by(step).map(String::from));
                        }
                    }
                }
                opts
            }
        };
        if acc.len() * options.len().max(1) > MAX_BRACE_FIELDS {
            return false;
        }
        *acc = acc
            .iter()
            .flat_map(|a| options.iter().map(move |o| format!("{a}{o}")))
            .collect();
    }
    true
}

/// Decodes `$'…'` as bash does.
pub fn ansi_c(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    let take_radix = |chars: &mut std::iter::Peekable<std::str::Chars>, radix: u32, max: usize| {
        let mut v = 0u32;
        let mut n = 0;
        while n < max {
            match chars.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    v = v * radix + d;
                    chars.next();
                    n += 1;
                }
                None => break,
            }
        }
        (n > 0).then_some(v)
    };
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('e' | 'E') => out.push('\x1b'),
            Some('f') => out.push('\x0c'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('v') => out.push('\x0b'),
            Some('x') => match take_radix(&mut chars, 16, 2) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\x"),
            },
            Some('u') => match take_radix(&mut chars, 16, 4) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\u"),
            },
            Some('U') => match take_radix(&mut chars, 16, 8) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\U"),
            },
            Some('c') => {
                if let Some(x) = chars.next() {
                    out.push(char::from((x as u8) & 0x1f));
                }
            }
            Some(d @ '0'..='7') => {
                let mut v = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(x) => {
                            v = v * 8 + x;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.extend(char::from_u32(v & 0xff));
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_decodes_what_bash_decodes() {
        assert_eq!(ansi_c(r"\x72\x6d"), "rm");
        assert_eq!(ansi_c(r"\162m"), "rm");
        assert_eq!(ansi_c(r"\u0072m"), "rm");
        assert_eq!(ansi_c(r"a\tb\\"), "a\tb\\");
    }

    #[test]
    fn braces_expand() {
        assert_eq!(braces("a{b,c}d"), ["abd", "acd"]);
        assert_eq!(braces("~/{a,.ssh}"), ["~/a", "~/.ssh"]);
        assert_eq!(braces("x{1..3}"), ["x1", "x2", "x3"]);
        assert_eq!(braces("{}"), ["{}"]);
        assert_eq!(braces("plain"), ["plain"]);
    }
}
