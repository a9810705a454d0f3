//! `${…}` parameter expansion where its value is known now: variables assigned earlier in
//! the command, `HOME`, `PWD`, `OLDPWD`, positional parameters of `bash -c`, and the
//! operators on them (`:-`, `:=`, `:+`, `%`, `#`, `/`, `#…` length).

use brush_parser::word::{self, Parameter, ParameterExpr, ParameterTestType, SubstringMatchKind};

use super::{is_unknown, Ctx, Expanded, ShellError, Walker};

impl Walker<'_> {
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
        if self.placeholders.contains(name) {
            // The run's own placeholder: known, and the same whenever the command runs.
            return Some(format!("ahp-wrap-placeholder-of-{name}"));
        }
        match name.as_str() {
            "HOME" => Some(self.resolver.home.display().to_string()),
            "PWD" => ctx.cwd_known.then(|| ctx.cwd.display().to_string()),
            "OLDPWD" => ctx.oldpwd.as_ref().map(|p| p.display().to_string()),
            _ => None,
        }
    }

    /// Evaluates `${…}` where it can be, recording substitutions, names and assignments.
    pub(super) fn parameter(
        &mut self,
        expr: &ParameterExpr,
        ctx: &Ctx,
        e: &mut Expanded,
    ) -> Result<Option<String>, ShellError> {
        if let ParameterExpr::VariableNames { prefix, .. } = expr {
            // `${!PREFIX*}`: the names of the variables with that prefix, as a name pattern.
            return Ok(Some(format!("{prefix}*")));
        }
        let Some((parameter, indirect)) = target(expr) else {
            return Ok(None);
        };
        e.vars.extend(variable_name(parameter));
        let value = if indirect {
            None
        } else {
            self.var(parameter, ctx)
        };
        self.operate(expr, parameter, value, ctx, e)
    }

    /// Applies the operator of `expr` (`:-`, `:=`, `:+`, `%`, `#`, `/`, length) to the
    /// parameter's `value`; `None` when the result is known only at run time.
    fn operate(
        &mut self,
        expr: &ParameterExpr,
        parameter: &Parameter,
        value: Option<String>,
        ctx: &Ctx,
        e: &mut Expanded,
    ) -> Result<Option<String>, ShellError> {
        use ParameterExpr as P;
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
                    e.assigned.extend(variable_name(parameter));
                }
                let default = self.operand(default_value.as_deref(), ctx, e)?;
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
                let alt = self.operand(alternative_value.as_deref(), ctx, e)?;
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
                let pat = self.operand(pattern.as_deref(), ctx, e)?;
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
                let pat = self.operand(Some(pattern), ctx, e)?;
                let rep = self.operand(replacement.as_deref(), ctx, e)?;
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

    /// Expands an operator's word (a default value, a pattern; empty when absent), recording
    /// what it uses in `e`; `None` when its text is known only at run time.
    fn operand(
        &mut self,
        text: Option<&str>,
        ctx: &Ctx,
        e: &mut Expanded,
    ) -> Result<Option<String>, ShellError> {
        let inner = self.expand_one(text.unwrap_or_default(), ctx)?;
        e.fed.extend(inner.fed.iter().cloned());
        e.vars.extend(inner.vars.iter().cloned());
        e.assigned.extend(inner.assigned.iter().cloned());
        let t = inner.text();
        Ok((!is_unknown(&t)).then_some(t))
    }
}

/// The variable a parameter names (arrays included); `None` for positional and special ones.
fn variable_name(p: &Parameter) -> Option<String> {
    match p {
        Parameter::Named(n)
        | Parameter::NamedWithIndex { name: n, .. }
        | Parameter::NamedWithAllIndices { name: n, .. } => Some(n.clone()),
        _ => None,
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

/// The parameter an expression expands and whether it is `${!indirect}`; `None` for the
/// forms that name variables rather than read one.
fn target(expr: &ParameterExpr) -> Option<(&Parameter, bool)> {
    use ParameterExpr as P;
    match expr {
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
        } => Some((parameter, *indirect)),
        P::VariableNames { .. } => None,
        P::MemberKeys { .. } => None,
    }
}
