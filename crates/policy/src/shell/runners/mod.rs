//! Programs that run code from files the command does not name: build and task runners
//! (`make`, `npm`/`yarn`/`pnpm`/`bun` scripts and install lifecycles, `just`, `tox`,
//! `invoke`, `go generate`, pytest's `conftest.py`, `pip install .`'s `setup.py`, a module
//! of the working directory shadowing `python -m`'s) and variables that load code
//! (`BASH_ENV`, `ENV`, `NODE_OPTIONS`, `node -r`, `LD_PRELOAD`).
//!
//! Each finds the code the program will run, reads it through the walker (bounded, cached),
//! and hands it back as follow-up work: a recipe or script line as the shell that runs it,
//! in the directory it runs in, with the file as its origin.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::inline::Lang;
use super::builtins::Nested;
use super::code::display_name;
use super::{disk, is_unknown, Command, Ctx, Origin, Walker};
use makefile::{Auto, Makefile};

mod makefile;
mod packages;
mod python;
mod taskfiles;

/// Targets one `make` may visit (prerequisites included).
const MAX_TARGETS: usize = 256;
/// `.go` files `go generate` may scan (only those with a directive count as files read).
const MAX_GO_FILES: usize = 512;
/// How deep `go generate ./...` and pytest's `conftest.py` search go, and how many
/// directory entries they look at.
const MAX_TREE_DEPTH: usize = 6;
const MAX_TREE_ENTRIES: usize = 5_000;

/// Directories no runner looks into for code.
const SKIPPED_DIRS: &[&str] = &[
    "node_modules",
    "vendor",
    "testdata",
    "target",
    "venv",
    ".venv",
    "__pycache__",
    "site-packages",
    "dist",
    "build",
];

impl Walker<'_> {
    /// Code a variable or option makes a program load before its own: `BASH_ENV`/`ENV` for
    /// a shell, `NODE_OPTIONS`' and `node`'s `--require`/`--import`, `LD_PRELOAD` for any.
    pub(super) fn loaded_code(&mut self, cmd: &mut Command, ctx: &Ctx) -> Vec<Nested> {
        // Moved out and back (not copied): this runs for every command of every event.
        let assigns = std::mem::take(&mut cmd.assigns);
        let var = |name: &str| ctx.variable(&assigns, name);
        let mut out = Vec::new();
        if let Some(value) = var("LD_PRELOAD").flatten() {
            for lib in value.split([':', ' ']).filter(|l| !l.is_empty()) {
                let abs = self.resolver.resolve_word(lib, &cmd.cwd).abs;
                let system = ["/usr/", "/lib/", "/lib64/"]
                    .iter()
                    .any(|d| abs.starts_with(d));
                if !system {
                    cmd.unread.get_or_insert_with(|| {
                        format!("LD_PRELOAD loads {lib} into every program it starts")
                    });
                }
            }
        }
        if super::super::semantics::SHELLS.contains(&cmd.program.as_str()) {
            for name in ["BASH_ENV", "ENV"] {
                if let Some(Some(file)) = var(name) {
                    out.extend(self.loaded_file(cmd, &file, None));
                }
            }
        }
        if matches!(cmd.program.as_str(), "node" | "nodejs" | "bun" | "deno") {
            let mut preloads = Vec::new();
            if let Some(Some(options)) = var("NODE_OPTIONS") {
                let words: Vec<String> = options.split_whitespace().map(str::to_owned).collect();
                preloads.extend(node_preloads(&words));
            }
            preloads.extend(node_preloads(&node_options(&cmd.args)));
            for file in preloads {
                out.extend(self.loaded_file(cmd, &file, Some(Lang::Js)));
            }
        }
        cmd.assigns = assigns;
        out
    }

    /// A file loaded as code of `lang` (`None`: shell) by a variable or an option.
    fn loaded_file(&mut self, cmd: &mut Command, word: &str, lang: Option<Lang>) -> Vec<Nested> {
        let Some((text, origin)) = self.read_file(cmd, word, display_name) else {
            return Vec::new();
        };
        match lang {
            None => super::code::shell_file(cmd, &text, origin, vec![word.to_owned()]),
            Some(_) => vec![Nested::FromFile {
                origin,
                dir: None,
                then: Box::new(Nested::Argv(vec![
                    "node".into(),
                    "-e".into(),
                    text.to_string(),
                ])),
            }],
        }
    }

    /// The code a build or task runner runs from its files.
    pub(super) fn runners(&mut self, cmd: &mut Command) -> Vec<Nested> {
        match cmd.program.as_str() {
            "make" | "gmake" => self.make(cmd),
            "npm" | "pnpm" | "yarn" | "bun" => self.package_scripts(cmd),
            "just" => self.just(cmd),
            "tox" => self.tox(cmd),
            "invoke" | "inv" => self.python_file_in(cmd, &["-r", "--search-root"], "tasks.py"),
            "pytest" | "py.test" => self.conftests(cmd),
            "go" if cmd.args.first().is_some_and(|a| a == "generate") => self.go_generate(cmd),
            // `direnv exec DIR CMD` first runs DIR's `.envrc` (bash).
            "direnv" if cmd.args.first().is_some_and(|a| a == "exec") => {
                match cmd.args.get(1).filter(|d| !d.starts_with('-')).cloned() {
                    Some(dir) => self.loaded_file(cmd, &format!("{dir}/.envrc"), None),
                    None => Vec::new(),
                }
            }
            "pip" | "pip3" => {
                let args = cmd.args.clone();
                self.setup_py(cmd, &args)
            }
            "uv" if cmd.args.first().is_some_and(|a| a == "pip") => {
                let args = cmd.args[1..].to_vec();
                self.setup_py(cmd, &args)
            }
            p if Lang::of(p) == Some(Lang::Python) => self.python_module(cmd),
            _ => Vec::new(),
        }
    }

    // --- make ------------------------------------------------------------------------------

    fn make(&mut self, cmd: &mut Command) -> Vec<Nested> {
        let mut dir = cmd.cwd.clone();
        let mut file: Option<String> = None;
        let mut overrides: HashMap<String, String> = HashMap::new();
        let mut targets = Vec::new();
        let mut args = cmd.args.iter();
        while let Some(a) = args.next() {
            let value = |flag: &str, long: &str, args: &mut std::slice::Iter<String>| {
                if a == flag || a == long {
                    args.next().cloned()
                } else if let Some(v) = a.strip_prefix(&format!("{long}=")) {
                    Some(v.to_owned())
                } else {
                    a.strip_prefix(flag)
                        .filter(|v| !v.is_empty() && !a.starts_with("--"))
                        .map(str::to_owned)
                }
            };
            if let Some(d) = value("-C", "--directory", &mut args) {
                dir = self.resolver.resolve_word(&d, &dir).abs;
            } else if let Some(f) = value("-f", "--file", &mut args)
                .or_else(|| a.strip_prefix("--makefile=").map(str::to_owned))
            {
                file = Some(f);
            } else if matches!(
                a.as_str(),
                "-n" | "--just-print"
                    | "--dry-run"
                    | "--recon"
                    | "-q"
                    | "--question"
                    | "-p"
                    | "--print-data-base"
            ) {
                // Recipes are printed, not run.
                return Vec::new();
            } else if matches!(a.as_str(), "-o" | "-W" | "-I" | "-l" | "--eval") {
                args.next();
            } else if a == "-j" || a == "--jobs" {
                // `-j` takes an optional number.
            } else if a.starts_with('-') {
            } else if let Some((n, v)) = a.split_once('=') {
                overrides.insert(n.trim_end_matches([':', '?', '+']).to_owned(), v.to_owned());
            } else if !a.chars().all(|c| c.is_ascii_digit()) {
                targets.push(a.clone());
            }
        }
        let word = match file {
            Some(f) => dir.join(f).display().to_string(),
            None => match ["GNUmakefile", "makefile", "Makefile"]
                .iter()
                .map(|n| dir.join(n))
                .find(|p| p.is_file())
            {
                Some(p) => p.display().to_string(),
                None => return Vec::new(),
            },
        };
        let key = if targets.is_empty() {
            "(default)".to_owned()
        } else {
            targets.join(" ")
        };
        let Some((text, origin)) =
            self.read_file(cmd, &word, |p| format!("make {key} in {}", display_name(p)))
        else {
            return Vec::new();
        };
        let mut mk = Makefile {
            home: self.resolver.home.clone(),
            dir: dir.clone(),
            ..Makefile::default()
        };
        mk.vars.extend(overrides.clone());
        mk.parse(&text, true);
        // Included makefiles, in the makefile's directory.
        let base = origin.path.parent().map_or(dir.clone(), Path::to_path_buf);
        for inc in std::mem::take(&mut mk.includes) {
            for w in mk
                .expand(&inc, &Auto::default(), &base, 0)
                .split_whitespace()
            {
                if is_unknown(w) {
                    continue;
                }
                if let Some((t, _)) =
                    self.read_file(cmd, &base.join(w).display().to_string(), |p| {
                        format!("make include {}", display_name(p))
                    })
                {
                    mk.parse(&t, false);
                }
            }
        }
        mk.vars.extend(overrides);
        let shell = mk
            .vars
            .get("SHELL")
            .map(|s| mk.expand(s, &Auto::default(), &dir, 0))
            .unwrap_or_else(|| "/bin/sh".to_owned());
        let flags = mk
            .vars
            .get(".SHELLFLAGS")
            .map(|s| mk.expand(s, &Auto::default(), &dir, 0))
            .unwrap_or_else(|| "-c".to_owned());
        let mut shell_argv: Vec<String> = shell.split_whitespace().map(str::to_owned).collect();
        shell_argv.extend(flags.split_whitespace().map(str::to_owned));
        if shell_argv.is_empty() {
            shell_argv = vec!["/bin/sh".into(), "-c".into()];
        }
        if targets.is_empty() {
            targets.extend(mk.default.clone());
        }
        let mut lines = Vec::new();
        let mut seen = HashSet::new();
        for t in &targets {
            mk.visit(t, &dir, &mut seen, &mut lines);
        }
        if seen.len() >= MAX_TARGETS {
            cmd.unread
                .get_or_insert_with(|| format!("make would visit more than {MAX_TARGETS} targets"));
        }
        let mut recipes: Vec<(String, String)> = Vec::new();
        for (target, line) in lines {
            match recipes.last_mut() {
                Some((t, text)) if mk.oneshell && *t == target => {
                    text.push('\n');
                    text.push_str(&line);
                }
                _ => recipes.push((target, line)),
            }
        }
        let file = display_name(&origin.path);
        recipes
            .into_iter()
            .map(|(target, line)| {
                let mut argv = shell_argv.clone();
                argv.push(line);
                Nested::FromFile {
                    origin: Arc::new(Origin {
                        label: format!("target `{target}` of {file}"),
                        ..(*origin).clone()
                    }),
                    dir: Some(dir.clone()),
                    then: Box::new(Nested::Argv(argv)),
                }
            })
            .collect()
    }

    // --- go generate -----------------------------------------------------------------------

    fn go_generate(&mut self, cmd: &mut Command) -> Vec<Nested> {
        let mut roots: Vec<(PathBuf, bool)> = Vec::new();
        for a in cmd.args[1..].iter().filter(|a| !a.starts_with('-')) {
            let (dir, deep) = match a.strip_suffix("/...") {
                Some(d) => (d, true),
                None => (a.as_str(), false),
            };
            if is_unknown(dir) {
                continue;
            }
            roots.push((self.resolver.resolve_word(dir, &cmd.cwd).abs, deep));
        }
        if roots.is_empty() {
            roots.push((cmd.cwd.clone(), false));
        }
        let mut files = Vec::new();
        for (root, deep) in roots {
            if deep {
                let complete = find_files(&root, &mut |p: &Path| {
                    if p.extension().is_some_and(|e| e == "go") {
                        files.push(p.to_path_buf());
                    }
                    files.len() <= MAX_GO_FILES
                });
                if !complete {
                    cmd.unread.get_or_insert_with(|| {
                        format!(
                            "go generate would scan a tree of more than {MAX_TREE_ENTRIES} \
                             entries; name the packages"
                        )
                    });
                    return Vec::new();
                }
            } else if let Ok(entries) = std::fs::read_dir(&root) {
                files.extend(
                    entries
                        .flatten()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|e| e == "go")),
                );
            }
        }
        if files.len() > MAX_GO_FILES {
            cmd.unread.get_or_insert_with(|| {
                format!("go generate would scan more than {MAX_GO_FILES} Go files")
            });
            return Vec::new();
        }
        let Some(since) = self.resolver.code_since else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for file in files {
            let has_directive = match disk::read(&file, since) {
                disk::Code::Text { text, .. } => text.contains("//go:generate"),
                disk::Code::Unreadable(why) => {
                    cmd.unread.get_or_insert(why);
                    false
                }
                _ => false,
            };
            if !has_directive {
                continue;
            }
            let Some((text, origin)) = self.read_file(cmd, &file.display().to_string(), |p| {
                format!("//go:generate in {}", display_name(p))
            }) else {
                continue;
            };
            let dir = file
                .parent()
                .map_or_else(|| cmd.cwd.clone(), Path::to_path_buf);
            for line in text.lines() {
                if let Some(directive) = line.strip_prefix("//go:generate ") {
                    out.push(Nested::FromFile {
                        origin: origin.clone(),
                        dir: Some(dir.clone()),
                        then: Box::new(Nested::Script(directive.trim().to_owned())),
                    });
                }
            }
        }
        out
    }
}

/// The files below `dir` (skipping hidden and dependency directories), to `visit`, which
/// returns false once it has what it needs. False when the tree is larger than a decision may
/// look at ([`MAX_TREE_ENTRIES`] entries): what it did not see, it cannot vouch for.
fn find_files(dir: &Path, visit: &mut dyn FnMut(&Path) -> bool) -> bool {
    let mut budget = MAX_TREE_ENTRIES;
    let mut enough = false;
    walk_tree(dir, 0, visit, &mut budget, &mut enough);
    enough || budget > 0
}

fn walk_tree(
    dir: &Path,
    depth: usize,
    visit: &mut dyn FnMut(&Path) -> bool,
    budget: &mut usize,
    enough: &mut bool,
) {
    if depth > MAX_TREE_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        if *enough || *budget == 0 {
            return;
        }
        *budget -= 1;
        let name = e.file_name();
        let name = name.to_string_lossy();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            if name.starts_with('.') || SKIPPED_DIRS.contains(&name.as_ref()) {
                continue;
            }
            walk_tree(&e.path(), depth + 1, visit, budget, enough);
        } else if kind.is_file() && !visit(&e.path()) {
            *enough = true;
        }
    }
}

/// A node command's own options, up to its script.
fn node_options(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if !a.starts_with('-') || a == "-" || a == "--" {
            break;
        }
        out.push(a.clone());
        if matches!(
            a.as_str(),
            "-r" | "--require"
                | "--import"
                | "--loader"
                | "--experimental-loader"
                | "-e"
                | "--eval"
                | "-p"
                | "--print"
                | "--env-file"
                | "--title"
        ) {
            out.extend(it.next().cloned());
        }
    }
    out
}

/// The files `--require`/`-r`/`--import`/`--loader` name in node options: only paths (a
/// package name such as `ts-node/register` is a dependency, not a file of the project).
fn node_preloads(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let value = match w.as_str() {
            "-r" | "--require" | "--import" | "--loader" | "--experimental-loader" => {
                it.next().cloned()
            }
            _ => [
                "--require=",
                "--import=",
                "--loader=",
                "--experimental-loader=",
            ]
            .iter()
            .find_map(|p| w.strip_prefix(p).map(str::to_owned)),
        };
        if let Some(v) = value.filter(|v| v.starts_with('.') || v.starts_with('/')) {
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_preloads_are_paths_not_packages() {
        let words: Vec<String> = [
            "-r",
            "./hook.js",
            "--require=ts-node/register",
            "--import=/t/x.mjs",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(node_preloads(&words), ["./hook.js", "/t/x.mjs"]);
    }
}
