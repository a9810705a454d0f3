//! Compiled patterns: globs and `re:` regexes, and path conditions (globs, places, exceptions).

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex_automata::meta;

use super::super::extract::Facts;
use super::super::paths::{ResolvedPath, Where};
use super::RawPathCond;
use crate::error::PolicyError;

/// Globs (one set) and `re:` regexes, any of which may match.
#[derive(Debug)]
pub(super) struct Patterns {
    globs: GlobSet,
    /// One automaton for all of them (far less memory than a `Regex` each), without the
    /// literal prefilter and the one-pass DFA a `RegexSet` builds: the strings matched are
    /// short (an argument, a path, a URL), where the prefilter gains little (2 µs of the 35
    /// µs decision of the corpus's longest command), a yes/no match never uses the one-pass
    /// DFA, and for the default policy's secret prefixes the prefilter alone is an
    /// Aho-Corasick automaton of half a megabyte.
    regexes: Option<meta::Regex>,
}

impl Patterns {
    pub(super) fn compile(
        rule: &str,
        list: &[String],
        paths: bool,
    ) -> Result<Patterns, PolicyError> {
        let mut globs = GlobSetBuilder::new();
        let mut regexes = Vec::new();
        let invalid = |message: String| PolicyError::InvalidRule {
            rule: rule.to_owned(),
            message,
        };
        for p in list {
            if let Some(re) = p.strip_prefix("re:") {
                // Parsed alone to name the bad one (compiling it alone as well cost more
                // than the whole set: the default policy's first decision did both).
                regex_automata::util::syntax::parse(re)
                    .map_err(|e| invalid(format!("bad regex {p:?}: {e}")))?;
                regexes.push(re.to_owned());
                continue;
            }
            let mut variants = vec![p.as_str()];
            // `dir/**` also names `dir` itself, which is what people mean by it.
            if let Some(dir) = p.strip_suffix("/**").filter(|_| paths) {
                variants.push(dir);
            }
            for v in variants {
                let glob = GlobBuilder::new(v)
                    .literal_separator(paths)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| invalid(format!("bad glob {p:?}: {e}")))?;
                globs.add(glob);
            }
        }
        let globs = globs
            .build()
            .map_err(|e| invalid(format!("bad globs: {e}")))?;
        let regexes = if regexes.is_empty() {
            None
        } else {
            let config = meta::Config::new().auto_prefilter(false).onepass(false);
            let set = meta::Regex::builder()
                .configure(config)
                .build_many(&regexes)
                .map_err(|e| invalid(format!("bad regexes: {e}")))?;
            Some(set)
        };
        Ok(Patterns { globs, regexes })
    }

    pub(super) fn is_match(&self, s: &str) -> bool {
        self.globs.is_match(s) || self.regex_match(s)
    }

    fn regex_match(&self, s: &str) -> bool {
        self.regexes.as_ref().is_some_and(|r| r.is_match(s))
    }
}

/// A compiled path condition: globs on the absolute path, `~/` globs on the home-relative one.
#[derive(Debug)]
pub(super) struct PathCond {
    abs: Patterns,
    tilde: Patterns,
    wheres: Vec<Where>,
    not_abs: Patterns,
    not_tilde: Patterns,
    /// Globs on the absolute path that hold only outside the workspace.
    outside: Patterns,
}

impl PathCond {
    pub(super) fn compile(rule: &str, raw: &RawPathCond) -> Result<PathCond, PolicyError> {
        let (glob, wheres, not, outside) = match raw {
            RawPathCond::Globs(g) => (g.as_slice(), &[][..], &[][..], &[][..]),
            RawPathCond::Table {
                glob,
                wheres,
                not,
                outside,
            } => (
                glob.as_slice(),
                wheres.as_slice(),
                not.as_slice(),
                outside.as_slice(),
            ),
        };
        let split = |list: &[String]| -> Result<(Patterns, Patterns), PolicyError> {
            let (tilde, abs): (Vec<String>, Vec<String>) =
                list.iter().cloned().partition(|p| p.starts_with('~'));
            Ok((
                Patterns::compile(rule, &abs, true)?,
                Patterns::compile(rule, &tilde, true)?,
            ))
        };
        let (abs, tilde) = split(glob)?;
        let (not_abs, not_tilde) = split(not)?;
        Ok(PathCond {
            abs,
            tilde,
            wheres: wheres.to_vec(),
            not_abs,
            not_tilde,
            outside: Patterns::compile(rule, outside, true)?,
        })
    }

    fn is_match(&self, p: &ResolvedPath, f: &Facts) -> bool {
        let abs = p.abs.to_string_lossy();
        let tilde = p.tilde.as_deref();
        let hit = |abs_set: &Patterns, tilde_set: &Patterns| {
            abs_set.is_match(&abs)
                || tilde.is_some_and(|t| tilde_set.is_match(t) || abs_set.regex_match(t))
        };
        let positive = hit(&self.abs, &self.tilde)
            || self
                .wheres
                .iter()
                .any(|w| w.holds(p, &f.workspace, &f.home, &f.protected.paths))
            || (self.outside.is_match(&abs)
                && Where::OutsideWorkspace.holds(p, &f.workspace, &f.home, &f.protected.paths));
        positive && !hit(&self.not_abs, &self.not_tilde)
    }

    pub(super) fn any(&self, paths: &[ResolvedPath], f: &Facts) -> bool {
        paths.iter().any(|p| self.is_match(p, f))
    }
}
