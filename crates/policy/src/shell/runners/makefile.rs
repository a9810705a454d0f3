//! Makefiles as make reads them, for what a target runs: rules, prerequisites, pattern
//! rules, variables (recursive, simple, conditional, appended, `define`), `include`,
//! `.ONESHELL`, automatic variables and the functions whose value is known now (`$(shell …)`
//! becomes a command substitution; the others are unknown). Bounded in the value one variable
//! may expand to and the references one `make` may expand.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use super::super::{is_unknown, UNKNOWN};
use super::MAX_TARGETS;

/// Longest value a make variable may expand to here.
const MAX_EXPANSION: usize = 64 * 1024;
/// Variable references one `make` may expand here.
const MAX_REFERENCES: usize = 20_000;

#[derive(Debug, Default)]
pub(super) struct MakeRule {
    pub(super) targets: Vec<String>,
    pub(super) prereqs: Vec<String>,
    pub(super) recipe: Vec<String>,
}

#[derive(Debug)]
pub(super) struct Makefile {
    /// References left to expand for this `make`: a bound on the work, whatever the file.
    pub(super) budget: std::cell::Cell<usize>,
    pub(super) home: PathBuf,
    /// Where make runs (`$(CURDIR)`).
    pub(super) dir: PathBuf,
    pub(super) vars: HashMap<String, String>,
    pub(super) rules: Vec<MakeRule>,
    pub(super) default: Option<String>,
    pub(super) oneshell: bool,
    pub(super) includes: Vec<String>,
}

impl Default for Makefile {
    fn default() -> Makefile {
        Makefile {
            budget: std::cell::Cell::new(MAX_REFERENCES),
            home: PathBuf::new(),
            dir: PathBuf::new(),
            vars: HashMap::new(),
            rules: Vec::new(),
            default: None,
            oneshell: false,
            includes: Vec::new(),
        }
    }
}

/// Automatic variables of one recipe.
#[derive(Debug, Default)]
pub(super) struct Auto {
    pub(super) target: String,
    pub(super) prereqs: Vec<String>,
    pub(super) stem: String,
}

static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    crate::pattern(
        r"^(?:(?:export|override|private)\s+)*([A-Za-z0-9_.\-/]+)\s*(:::=|::=|:=|\?=|\+=|!=|=)\s*(.*)$",
    )
});

impl Makefile {
    /// Adds `text`'s variables and rules (`main`: the first target is the default).
    pub(super) fn parse(&mut self, text: &str, main: bool) {
        let joined = text
            .replace("\\\r\n", " ")
            .replace("\\\n\t", "")
            .replace("\\\n", " ");
        let mut current: Option<usize> = None;
        let mut define: Option<(String, Vec<String>)> = None;
        for raw in joined.lines() {
            if let Some((name, body)) = &mut define {
                if raw.trim() == "endef" {
                    let (name, body) = (name.clone(), body.join("\n"));
                    self.vars.insert(name, body);
                    define = None;
                } else {
                    body.push(raw.to_owned());
                }
                continue;
            }
            if let Some(recipe) = raw.strip_prefix('\t') {
                if let Some(i) = current {
                    let line = recipe.trim();
                    if !line.is_empty() && !line.starts_with('#') {
                        self.rules[i].recipe.push(line.to_owned());
                    }
                }
                continue;
            }
            let line = raw.split('#').next().unwrap_or_default().trim_end();
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            let first = trimmed.split_whitespace().next().unwrap_or_default();
            match first {
                "ifeq" | "ifneq" | "ifdef" | "ifndef" | "else" | "endif" | "vpath" | "unexport" => {
                    continue;
                }
                "define" => {
                    let name = trimmed
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or_default()
                        .to_owned();
                    define = Some((name, Vec::new()));
                    continue;
                }
                "include" | "-include" | "sinclude" => {
                    self.includes.push(trimmed[first.len()..].trim().to_owned());
                    continue;
                }
                _ => {}
            }
            if let Some(c) = ASSIGNMENT.captures(trimmed) {
                let (name, op, value) = (&c[1], &c[2], c[3].trim().to_owned());
                let value = match op {
                    "!=" => format!("$(shell {value})"),
                    _ => value,
                };
                match op {
                    "+=" => {
                        let v = self.vars.entry(name.to_owned()).or_default();
                        if !v.is_empty() {
                            v.push(' ');
                        }
                        v.push_str(&value);
                    }
                    "?=" => {
                        self.vars.entry(name.to_owned()).or_insert(value);
                    }
                    _ => {
                        self.vars.insert(name.to_owned(), value);
                    }
                }
                current = None;
                continue;
            }
            let Some(colon) = rule_colon(trimmed) else {
                current = None;
                continue;
            };
            // Targets and prerequisites are expanded as the line is read.
            let auto = Auto::default();
            let targets: Vec<String> = self
                .expand(&trimmed[..colon], &auto, &self.dir, 0)
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            let rest = trimmed[colon..].trim_start_matches(':');
            if ASSIGNMENT.is_match(rest.trim()) {
                // A target-specific variable.
                current = None;
                continue;
            }
            let (prereqs, inline) = match rest.split_once(';') {
                Some((p, r)) => (p, Some(r.trim().to_owned())),
                None => (rest, None),
            };
            if targets.iter().any(|t| t == ".ONESHELL") {
                self.oneshell = true;
            }
            if main && self.default.is_none() {
                if let Some(t) = targets
                    .iter()
                    .find(|t| !t.starts_with('.') && !t.contains('%'))
                {
                    self.default = Some(t.clone());
                }
            }
            let prereqs = self.expand(prereqs, &auto, &self.dir, 0);
            self.rules.push(MakeRule {
                targets,
                prereqs: prereqs
                    .split_whitespace()
                    .filter(|p| *p != "|")
                    .map(str::to_owned)
                    .collect(),
                recipe: inline.into_iter().filter(|r| !r.is_empty()).collect(),
            });
            current = Some(self.rules.len() - 1);
        }
    }

    /// The recipe lines `target` runs (its prerequisites' first), expanded.
    #[allow(
        clippy::expect_used,
        reason = "the pattern rule was found by the same lookup just above"
    )]
    pub(super) fn visit(
        &self,
        target: &str,
        dir: &Path,
        seen: &mut HashSet<String>,
        out: &mut Vec<(String, String)>,
    ) {
        if seen.len() >= MAX_TARGETS || !seen.insert(target.to_owned()) {
            return;
        }
        let explicit: Vec<&MakeRule> = self
            .rules
            .iter()
            .filter(|r| r.targets.iter().any(|t| t == target))
            .collect();
        let (prereqs, recipe, stem): (Vec<String>, Vec<String>, String) = if explicit
            .iter()
            .any(|r| !r.recipe.is_empty())
            || self.pattern_for(target).is_none()
        {
            (
                explicit
                    .iter()
                    .flat_map(|r| r.prereqs.iter().cloned())
                    .collect(),
                explicit
                    .iter()
                    .flat_map(|r| r.recipe.iter().cloned())
                    .collect(),
                String::new(),
            )
        } else {
            let (rule, stem) = self.pattern_for(target).expect("checked above");
            let mut p: Vec<String> = explicit
                .iter()
                .flat_map(|r| r.prereqs.iter().cloned())
                .collect();
            p.extend(rule.prereqs.iter().map(|x| x.replace('%', &stem)));
            (p, rule.recipe.clone(), stem)
        };
        let auto = Auto {
            target: target.to_owned(),
            prereqs: prereqs
                .iter()
                .map(|p| self.expand(p, &Auto::default(), dir, 0))
                .collect(),
            stem,
        };
        for p in &auto.prereqs {
            for word in p.split_whitespace() {
                if !is_unknown(word) {
                    self.visit(word, dir, seen, out);
                }
            }
        }
        for line in recipe {
            let expanded = self.expand(&line, &auto, dir, 0);
            let line = expanded.trim_start_matches(['@', '-', '+', ' ', '\t']);
            if !line.is_empty() {
                out.push((target.to_owned(), line.to_owned()));
            }
        }
    }

    /// The pattern rule (`%.o: %.c`) that makes `target`, and its stem.
    fn pattern_for(&self, target: &str) -> Option<(&MakeRule, String)> {
        self.rules
            .iter()
            .filter(|r| !r.recipe.is_empty())
            .find_map(|r| {
                r.targets.iter().find_map(|t| {
                    let (pre, post) = t.split_once('%')?;
                    let stem = target.strip_prefix(pre)?.strip_suffix(post)?;
                    Some((r, stem.to_owned()))
                })
            })
    }

    /// `text` with make's variables and functions expanded: what make hands the shell.
    /// What only make knows at run time (most functions) becomes [`UNKNOWN`].
    pub(super) fn expand(&self, text: &str, auto: &Auto, dir: &Path, depth: usize) -> String {
        if depth > 16 {
            return UNKNOWN.to_string();
        }
        let mut out = String::new();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            // Variables that double at each level would grow without end: past this, the
            // value is make's business.
            if out.len() > MAX_EXPANSION {
                return UNKNOWN.to_string();
            }
            let c = chars[i];
            if c != '$' || i + 1 >= chars.len() {
                out.push(c);
                i += 1;
                continue;
            }
            let next = chars[i + 1];
            match next {
                '$' => {
                    out.push('$');
                    i += 2;
                }
                '(' | '{' => {
                    let close = if next == '(' { ')' } else { '}' };
                    let mut level = 0;
                    let mut j = i + 1;
                    while j < chars.len() {
                        if chars[j] == next {
                            level += 1;
                        } else if chars[j] == close {
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        j += 1;
                    }
                    let inner: String = chars[i + 2..j.min(chars.len())].iter().collect();
                    out.push_str(&self.reference(&inner, auto, dir, depth));
                    i = j + 1;
                }
                _ => {
                    out.push_str(&self.reference(&next.to_string(), auto, dir, depth));
                    i += 2;
                }
            }
        }
        out
    }

    /// The value of `$(inner)`.
    fn reference(&self, inner: &str, auto: &Auto, dir: &Path, depth: usize) -> String {
        let left = self.budget.get();
        if left == 0 {
            return UNKNOWN.to_string();
        }
        self.budget.set(left - 1);
        let (name, args) = match inner.split_once(|c: char| c.is_whitespace()) {
            Some((n, a)) => (n, a.trim()),
            None => (inner, ""),
        };
        match name {
            "shell" => return format!("$({})", self.expand(args, auto, dir, depth + 1)),
            "wildcard" | "strip" | "abspath" | "realpath" => {
                return self.expand(args, auto, dir, depth + 1).trim().to_owned()
            }
            "info" | "warning" | "error" | "eval" => return String::new(),
            "subst" | "patsubst" | "addprefix" | "addsuffix" | "notdir" | "dir" | "basename"
            | "suffix" | "filter" | "filter-out" | "sort" | "word" | "words" | "wordlist"
            | "firstword" | "lastword" | "join" | "foreach" | "if" | "or" | "and" | "call"
            | "value" | "origin" | "flavor" | "file" | "let" | "intcmp" => {
                return UNKNOWN.to_string()
            }
            _ => {}
        }
        // `$(VAR:.c=.o)`: a substitution reference, known only to make.
        if inner.contains(':') && !inner.starts_with(':') {
            return UNKNOWN.to_string();
        }
        match inner {
            "@" => return auto.target.clone(),
            "<" => return auto.prereqs.first().cloned().unwrap_or_default(),
            "^" | "+" | "?" => return auto.prereqs.join(" "),
            "*" => return auto.stem.clone(),
            "CURDIR" => return dir.display().to_string(),
            _ => {}
        }
        if let Some(v) = self.vars.get(inner) {
            return self.expand(v, auto, dir, depth + 1);
        }
        match inner {
            "MAKE" => "make".into(),
            "CC" => "cc".into(),
            "CXX" => "g++".into(),
            "RM" => "rm -f".into(),
            "AR" => "ar".into(),
            "SHELL" => "/bin/sh".into(),
            "HOME" => self.home.display().to_string(),
            "PWD" => dir.display().to_string(),
            // Undefined: empty, as make has it (the agent's environment is not known here).
            _ => String::new(),
        }
    }
}

/// Where a rule line's `:` is (not `:=` or `::=`), if it is a rule.
fn rule_colon(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    let mut level = 0usize;
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'(' | b'{' => level += 1,
            b')' | b'}' => level = level.saturating_sub(1),
            b':' if level == 0 => {
                let rest = &line[i..];
                if rest.starts_with(":=") || rest.starts_with("::=") {
                    return None;
                }
                return Some(i);
            }
            b'=' if level == 0 => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makefile_recipes_follow_prerequisites_variables_and_patterns() {
        let mut mk = Makefile::default();
        mk.parse(
            "OUT := build\nRMF = rm -rf\n# comment\nall: gen $(OUT)/app\n\t@echo done\n\ngen:\n\t-./gen.sh $@\n$(OUT)/%: src/%.c\n\t$(CC) -o $@ $<\nclean: ; $(RMF) $(OUT)\n.PHONY: all clean\n",
            true,
        );
        assert_eq!(mk.default.as_deref(), Some("all"));
        let mut lines = Vec::new();
        mk.visit("all", Path::new("/w"), &mut HashSet::new(), &mut lines);
        let lines: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(
            lines,
            ["./gen.sh gen", "cc -o build/app src/app.c", "echo done"]
        );
        let mut clean = Vec::new();
        mk.visit("clean", Path::new("/w"), &mut HashSet::new(), &mut clean);
        assert_eq!(clean[0].1, "rm -rf build");
    }

    #[test]
    fn variables_that_double_at_each_level_end_unknown() {
        let mut text = String::from("V0 = xxxxxxxxxxxxxxxx\n");
        for i in 1..40 {
            text.push_str(&format!("V{i} = $(V{}) $(V{})\n", i - 1, i - 1));
        }
        text.push_str("t:\n\techo $(V39)\n");
        let mut mk = Makefile::default();
        mk.parse(&text, true);
        let mut lines = Vec::new();
        for _ in 0..50 {
            mk.visit("t", Path::new("/w"), &mut HashSet::new(), &mut lines);
        }
        assert!(lines[0].1.len() < 4 * MAX_EXPANSION && lines[0].1.contains(UNKNOWN));
        assert_eq!(mk.budget.get(), 0, "the work is bounded");
    }

    #[test]
    fn make_functions_known_only_to_make_are_unknown_and_shell_is_a_substitution() {
        let mut mk = Makefile::default();
        mk.parse(
            "X != cat ~/.ssh/id_rsa\nt:\n\techo $(X) $(patsubst %.c,%.o,a.c) $$HOME\n",
            true,
        );
        let mut lines = Vec::new();
        mk.visit("t", Path::new("/w"), &mut HashSet::new(), &mut lines);
        assert_eq!(
            lines[0].1,
            format!("echo $(cat ~/.ssh/id_rsa) {UNKNOWN} $HOME")
        );
    }
}
