//! Task files read for the commands they run: `just` recipes (and their dependencies) and
//! `tox.ini`'s `commands`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::super::super::inline::Lang;
use super::super::builtins::Nested;
use super::super::code::display_name;
use super::super::{disk, Command, Walker, UNKNOWN};
use super::MAX_TARGETS;

impl Walker<'_> {
    pub(super) fn just(&mut self, cmd: &mut Command) -> Vec<Nested> {
        let mut file: Option<String> = None;
        let mut dir = cmd.cwd.clone();
        let mut words = Vec::new();
        let mut it = cmd.args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "-f" | "--justfile" => file = it.next().cloned(),
                "-d" | "--working-directory" => {
                    if let Some(d) = it.next() {
                        dir = self.resolver.resolve_word(d, &cmd.cwd).abs;
                    }
                }
                "-n" | "--dry-run" | "-l" | "--list" | "--summary" | "--show" | "-s"
                | "--evaluate" | "--dump" => return Vec::new(),
                "--set" => {
                    it.next();
                    it.next();
                }
                _ if a.starts_with('-') => {}
                _ => words.push(a.clone()),
            }
        }
        let path = match file {
            Some(f) => Some(cmd.cwd.join(f)),
            None => disk::find_up(&dir, &["justfile", "Justfile", ".justfile", "JUSTFILE"]),
        };
        let Some(path) = path else {
            return Vec::new();
        };
        let key = words.first().cloned().unwrap_or_else(|| "(default)".into());
        let Some((text, origin)) = self.read_file(cmd, &path.display().to_string(), |p| {
            format!("just {key} in {}", display_name(p))
        }) else {
            return Vec::new();
        };
        let recipes = parse_justfile(&text);
        let Some(first) = words
            .first()
            .cloned()
            .or_else(|| recipes.first().map(|r| r.name.clone()))
        else {
            return Vec::new();
        };
        let run_dir = path.parent().map_or(dir, Path::to_path_buf);
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![first];
        let mut order = Vec::new();
        while let Some(name) = stack.pop() {
            if !seen.insert(name.clone()) || seen.len() > MAX_TARGETS {
                continue;
            }
            if let Some(r) = recipes.iter().find(|r| r.name == name) {
                order.push(r);
                stack.extend(r.deps.iter().cloned());
            }
        }
        for r in order {
            let wrap = |then: Nested| Nested::FromFile {
                origin: origin.clone(),
                dir: Some(run_dir.clone()),
                then: Box::new(then),
            };
            if r.body.first().is_some_and(|l| l.starts_with("#!")) {
                let text = r.body.join("\n");
                let argv = match disk::interpreter(&text) {
                    disk::Interpreter::Lang(lang) => {
                        vec![lang_program(lang).into(), lang_flag(lang).into(), text]
                    }
                    _ => vec!["sh".into(), "-c".into(), text],
                };
                out.push(wrap(Nested::Argv(argv)));
            } else {
                for line in &r.body {
                    let line = line.trim_start_matches(['@', '-']).to_owned();
                    out.push(wrap(Nested::Argv(vec!["sh".into(), "-c".into(), line])));
                }
            }
        }
        out
    }

    pub(super) fn tox(&mut self, cmd: &mut Command) -> Vec<Nested> {
        let mut file = "tox.ini".to_owned();
        let mut it = cmd.args.iter();
        while let Some(a) = it.next() {
            if a == "-c" || a == "--conf" {
                if let Some(f) = it.next() {
                    file.clone_from(f);
                }
            }
        }
        let Some((text, origin)) = self.read_file(cmd, &file, display_name) else {
            return Vec::new();
        };
        let dir = origin
            .path
            .parent()
            .map_or_else(|| cmd.cwd.clone(), Path::to_path_buf);
        tox_commands(&text)
            .into_iter()
            .map(|line| Nested::FromFile {
                origin: origin.clone(),
                dir: Some(dir.clone()),
                then: Box::new(Nested::Script(line)),
            })
            .collect()
    }
}

fn lang_program(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => "python3",
        Lang::Js => "node",
        Lang::Perl => "perl",
        Lang::Ruby => "ruby",
        Lang::Php => "php",
        Lang::Awk => "awk",
    }
}

fn lang_flag(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => "-c",
        Lang::Php => "-r",
        Lang::Awk => "--",
        _ => "-e",
    }
}

#[derive(Debug)]
pub(super) struct JustRecipe {
    pub(super) name: String,
    pub(super) deps: Vec<String>,
    pub(super) body: Vec<String>,
}

static JUST_HEADER: LazyLock<Regex> =
    LazyLock::new(|| crate::pattern(r"^@?([A-Za-z_][A-Za-z0-9_-]*)([^:]*):(.*)$"));

/// A justfile's recipes, `{{…}}` interpolations as [`UNKNOWN`].
pub(super) fn parse_justfile(text: &str) -> Vec<JustRecipe> {
    let mut recipes: Vec<JustRecipe> = Vec::new();
    let mut in_recipe = false;
    for raw in text.lines() {
        if raw.starts_with([' ', '\t']) {
            if in_recipe {
                if let Some(r) = recipes.last_mut() {
                    let line = raw.trim();
                    if !line.is_empty() {
                        r.body.push(interpolated(line));
                    }
                }
            }
            continue;
        }
        in_recipe = false;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
            continue;
        }
        if line.starts_with("set ") || line.starts_with("alias ") || line.contains(":=") {
            continue;
        }
        if let Some(c) = JUST_HEADER.captures(line) {
            if c[3].starts_with('=') {
                continue;
            }
            let deps = c
                .get(3)
                .map(|d| {
                    d.as_str()
                        .split_whitespace()
                        .filter(|w| !w.starts_with('(') && !w.starts_with('&'))
                        .map(|w| w.trim_matches(['(', ')']).to_owned())
                        .collect()
                })
                .unwrap_or_default();
            recipes.push(JustRecipe {
                name: c[1].to_owned(),
                deps,
                body: Vec::new(),
            });
            in_recipe = true;
        }
    }
    recipes
}

fn interpolated(line: &str) -> String {
    static INTERP: LazyLock<Regex> = LazyLock::new(|| crate::pattern(r"\{\{[^}]*\}\}"));
    INTERP.replace_all(line, UNKNOWN.to_string()).into_owned()
}

/// The `commands*` lines of every test environment in a `tox.ini`.
pub(super) fn tox_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_env = false;
    let mut in_commands = false;
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with('[') {
            in_env = line.starts_with("[testenv");
            in_commands = false;
            continue;
        }
        if !in_env || line.starts_with('#') || line.is_empty() {
            continue;
        }
        if raw.starts_with([' ', '\t']) {
            if in_commands {
                out.push(substituted(line));
            }
            continue;
        }
        in_commands = false;
        if let Some((key, value)) = line.split_once('=') {
            let key = key.trim();
            if key.starts_with("commands") {
                in_commands = true;
                if !value.trim().is_empty() {
                    out.push(substituted(value.trim()));
                }
            }
        }
    }
    out
}

/// tox's `{posargs}`, `{envdir}` … substitutions, known only to tox.
fn substituted(line: &str) -> String {
    static SUBST: LazyLock<Regex> = LazyLock::new(|| crate::pattern(r"\{[a-z_:]+[^}]*\}"));
    SUBST
        .replace_all(line.trim_start_matches('-'), UNKNOWN.to_string())
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn justfiles_and_tox_ini_give_their_command_lines() {
        let recipes = parse_justfile(
            "set shell := [\"bash\", \"-c\"]\ndefault: build\n\nbuild:\n    cargo build\n\nclean dir=\"x\": build\n    rm -rf {{dir}}\n",
        );
        let names: Vec<&str> = recipes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["default", "build", "clean"]);
        assert_eq!(recipes[2].deps, ["build"]);
        assert_eq!(recipes[2].body, [format!("rm -rf {UNKNOWN}")]);
        let tox = tox_commands(
            "[tox]\nenvlist = py3\n[testenv]\ndeps = pytest\ncommands =\n    pytest {posargs}\n    rm -rf ~/.ssh\n[flake8]\ncommands = no\n",
        );
        assert_eq!(
            tox,
            [format!("pytest {UNKNOWN}"), "rm -rf ~/.ssh".to_owned()]
        );
    }
}
