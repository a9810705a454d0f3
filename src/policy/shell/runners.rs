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
use std::sync::{Arc, LazyLock};

use regex::Regex;

use super::super::inline::Lang;
use super::builtins::Nested;
use super::code::display_name;
use super::{disk, is_unknown, Command, Ctx, Origin, Walker, UNKNOWN};

/// Targets one `make` may visit (prerequisites included).
const MAX_TARGETS: usize = 256;
/// Longest value a make variable may expand to here.
const MAX_EXPANSION: usize = 64 * 1024;
/// Variable references one `make` may expand here.
const MAX_REFERENCES: usize = 20_000;
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
        let assigns = cmd.assigns.clone();
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

    // --- package.json scripts --------------------------------------------------------------

    fn package_scripts(&mut self, cmd: &mut Command) -> Vec<Nested> {
        let program = cmd.program.clone();
        let mut dir: Option<PathBuf> = None;
        let mut words = Vec::new();
        let mut extra: Vec<String> = Vec::new();
        let mut it = cmd.args.iter();
        while let Some(a) = it.next() {
            if a == "--" {
                extra.extend(it.by_ref().cloned());
                break;
            }
            if matches!(a.as_str(), "--prefix" | "-C" | "--dir" | "--cwd" | "--cd") {
                if let Some(d) = it.next() {
                    dir = Some(self.resolver.resolve_word(d, &cmd.cwd).abs);
                }
            } else if let Some(d) = ["--prefix=", "--dir=", "--cwd="]
                .iter()
                .find_map(|p| a.strip_prefix(p))
            {
                dir = Some(self.resolver.resolve_word(d, &cmd.cwd).abs);
            } else if matches!(
                a.as_str(),
                "-w" | "--workspace" | "--filter" | "-F" | "--registry" | "--loglevel" | "--cache"
            ) {
                it.next();
            } else if !a.starts_with('-') {
                words.push(a.clone());
            }
        }
        let start = dir.unwrap_or_else(|| cmd.cwd.clone());
        let Some(manifest) = disk::find_up(&start, &["package.json"]) else {
            return Vec::new();
        };
        let Some((text, origin)) =
            self.read_file(cmd, &manifest.display().to_string(), display_name)
        else {
            return Vec::new();
        };
        let scripts: HashMap<String, String> = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("scripts").cloned())
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or_default();
        let lifecycle: &[&str] = &[
            "preinstall",
            "install",
            "postinstall",
            "prepublish",
            "preprepare",
            "prepare",
            "postprepare",
        ];
        let sub = words.first().map(String::as_str);
        let (names, main): (Vec<String>, Option<String>) = match sub {
            None if program == "yarn" => (owned(lifecycle), None),
            None => return Vec::new(),
            Some("install" | "i" | "ci" | "in" | "ins" | "add" | "install-test" | "it")
                if words.len() == 1 || words[1..].iter().all(|w| w == ".") =>
            {
                let mut n = owned(lifecycle);
                if matches!(sub, Some("install-test" | "it")) {
                    n.extend(owned(&["pretest", "test", "posttest"]));
                }
                (n, None)
            }
            Some("run" | "run-script" | "rum" | "urn") => match words.get(1) {
                Some(name) => {
                    extra.extend(words[2..].iter().cloned());
                    (around(name), Some(name.clone()))
                }
                None => return Vec::new(),
            },
            Some("test" | "t" | "tst") => {
                extra.extend(words[1..].iter().cloned());
                (around("test"), Some("test".into()))
            }
            Some(s @ ("start" | "stop" | "restart")) => (around(s), Some(s.to_owned())),
            Some("pack") => (owned(&["prepack", "prepare", "postpack"]), None),
            Some("publish") => (
                owned(&[
                    "prepublishOnly",
                    "prepack",
                    "prepare",
                    "postpack",
                    "publish",
                    "postpublish",
                ]),
                None,
            ),
            // `yarn build`, `pnpm lint`, `bun run x`: a script of that name.
            Some(s) if program != "npm" && scripts.contains_key(s) => {
                extra.extend(words[1..].iter().cloned());
                (around(s), Some(s.to_owned()))
            }
            Some(_) => return Vec::new(),
        };
        let pkg_dir = manifest.parent().map_or(start, Path::to_path_buf);
        names
            .iter()
            .filter_map(|n| scripts.get(n).map(|s| (n, s)))
            .map(|(name, script)| {
                let mut line = script.clone();
                if main.as_deref() == Some(name.as_str()) && !extra.is_empty() {
                    let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
                    line = format!("{line} {}", quote(&refs));
                }
                Nested::FromFile {
                    origin: Arc::new(Origin {
                        label: format!("script `{name}` in {}", origin.label),
                        ..(*origin).clone()
                    }),
                    dir: Some(pkg_dir.clone()),
                    then: Box::new(Nested::Argv(vec!["sh".into(), "-c".into(), line])),
                }
            })
            .collect()
    }

    // --- just ------------------------------------------------------------------------------

    fn just(&mut self, cmd: &mut Command) -> Vec<Nested> {
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

    // --- tox, invoke, pytest, pip, python -m ---------------------------------------------

    fn tox(&mut self, cmd: &mut Command) -> Vec<Nested> {
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

    /// A Python file a runner imports from the working directory (or `flags`' directory).
    fn python_file_in(&mut self, cmd: &mut Command, flags: &[&str], name: &str) -> Vec<Nested> {
        let mut dir = cmd.cwd.clone();
        let mut it = cmd.args.iter();
        while let Some(a) = it.next() {
            if flags.contains(&a.as_str()) {
                if let Some(d) = it.next() {
                    dir = self.resolver.resolve_word(d, &cmd.cwd).abs;
                }
            }
        }
        let file = dir.join(name);
        if !file.is_file() {
            return Vec::new();
        }
        vec![Nested::Argv(vec![
            "python3".into(),
            file.display().to_string(),
        ])]
    }

    /// pytest imports the `conftest.py` of the working directory (its root), of each
    /// directory down to the paths it is given, and of every directory below them (the
    /// whole tree when it is given none).
    fn conftests(&mut self, cmd: &mut Command) -> Vec<Nested> {
        const WITH_VALUE: &[&str] = &[
            "-k",
            "-m",
            "-p",
            "-c",
            "-o",
            "-W",
            "-n",
            "-r",
            "--rootdir",
            "--junitxml",
            "--junit-xml",
            "--deselect",
            "--ignore",
            "--ignore-glob",
            "--cov",
            "--basetemp",
            "--durations",
            "--maxfail",
            "--tb",
            "--confcutdir",
            "--log-level",
        ];
        let module = cmd.args.iter().position(|a| a == "pytest");
        let args = &cmd.args[module.map_or(0, |i| i + 1)..];
        let mut roots = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if WITH_VALUE.contains(&a.as_str()) {
                it.next();
            } else if !a.starts_with('-') && !is_unknown(a) {
                let path = a.split("::").next().unwrap_or(a);
                roots.push(self.resolver.resolve_word(path, &cmd.cwd).abs);
            }
        }
        if roots.is_empty() {
            roots.push(cmd.cwd.clone());
        }
        let mut found: Vec<PathBuf> = Vec::new();
        let add = |p: PathBuf, found: &mut Vec<PathBuf>| {
            if !found.contains(&p) {
                found.push(p);
            }
        };
        for root in roots {
            // The directories from the working directory down to the path.
            let top = if root.is_dir() {
                root.clone()
            } else {
                root.parent()
                    .map_or_else(|| root.clone(), Path::to_path_buf)
            };
            for dir in top.ancestors().take_while(|d| d.starts_with(&cmd.cwd)) {
                let c = dir.join("conftest.py");
                if c.is_file() {
                    add(c, &mut found);
                }
            }
            let complete = !root.is_dir()
                || find_files(&root, &mut |p: &Path| {
                    if p.file_name().is_some_and(|n| n == "conftest.py") {
                        add(p.to_path_buf(), &mut found);
                    }
                    found.len() < disk::MAX_FILES
                });
            if !complete {
                cmd.unread.get_or_insert_with(|| {
                    format!(
                        "pytest would import conftest.py files from a tree of more than \
                         {MAX_TREE_ENTRIES} entries; name the paths to test"
                    )
                });
            }
        }
        found
            .into_iter()
            .map(|p| Nested::Argv(vec!["python3".into(), p.display().to_string()]))
            .collect()
    }

    /// `pip install .` (or a directory) runs that project's `setup.py`. `args` start at
    /// pip's subcommand.
    fn setup_py(&mut self, cmd: &mut Command, args: &[String]) -> Vec<Nested> {
        let mut it = args.iter();
        if it.next().is_none_or(|a| a != "install") {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut rest = it.peekable();
        while let Some(a) = rest.next() {
            if a == "-e" || a == "--editable" {
                continue;
            }
            if a.starts_with('-') {
                if matches!(
                    a.as_str(),
                    "-r" | "-c" | "-t" | "--target" | "-i" | "--index-url"
                ) {
                    rest.next();
                }
                continue;
            }
            let looks_local = a == "." || a.starts_with("./") || a.starts_with('/');
            if !looks_local || is_unknown(a) {
                continue;
            }
            let setup = self.resolver.resolve_word(a, &cmd.cwd).abs.join("setup.py");
            if setup.is_file() {
                out.push(Nested::Argv(vec![
                    "python3".into(),
                    setup.display().to_string(),
                ]));
            }
        }
        out
    }

    /// `python -m MODULE`: the working directory comes first on the module path, so a
    /// `MODULE.py` there (or in `PYTHONPATH`) is what runs; `-m pytest`, `-m pip` and
    /// `-m invoke` are those runners.
    fn python_module(&mut self, cmd: &mut Command) -> Vec<Nested> {
        let Some(i) = cmd.args.iter().position(|a| a == "-m") else {
            return Vec::new();
        };
        let Some(module) = cmd.args.get(i + 1).cloned() else {
            return Vec::new();
        };
        let rest: Vec<String> = cmd.args[i + 2..].to_vec();
        let mut out = match module.as_str() {
            "pytest" => self.conftests(cmd),
            "pip" => self.setup_py(cmd, &rest),
            "invoke" => self.python_file_in(cmd, &["-r", "--search-root"], "tasks.py"),
            _ => Vec::new(),
        };
        let mut dirs = vec![cmd.cwd.clone()];
        if let Some((_, Some(pp))) = cmd.assigns.iter().rev().find(|(n, _)| n == "PYTHONPATH") {
            dirs.extend(
                pp.split(':')
                    .filter(|d| !d.is_empty())
                    .map(|d| self.resolver.resolve_word(d, &cmd.cwd).abs),
            );
        }
        let rel = module.replace('.', "/");
        for d in dirs {
            for candidate in [
                d.join(format!("{rel}.py")),
                d.join(&rel).join("__main__.py"),
            ] {
                if candidate.is_file() {
                    out.push(Nested::Argv(vec![
                        "python3".into(),
                        candidate.display().to_string(),
                    ]));
                }
            }
        }
        out
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

/// An argv quoted as one shell command line.
fn quote(argv: &[&str]) -> String {
    argv.iter()
        .map(|a| {
            let safe = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
            if safe {
                (*a).to_owned()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// A script with its `pre` and `post` scripts, in the order they run.
fn around(name: &str) -> Vec<String> {
    vec![format!("pre{name}"), name.to_owned(), format!("post{name}")]
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

// --- Makefiles -----------------------------------------------------------------------------

#[derive(Debug, Default)]
struct MakeRule {
    targets: Vec<String>,
    prereqs: Vec<String>,
    recipe: Vec<String>,
}

#[derive(Debug)]
struct Makefile {
    /// References left to expand for this `make`: a bound on the work, whatever the file.
    budget: std::cell::Cell<usize>,
    home: PathBuf,
    /// Where make runs (`$(CURDIR)`).
    dir: PathBuf,
    vars: HashMap<String, String>,
    rules: Vec<MakeRule>,
    default: Option<String>,
    oneshell: bool,
    includes: Vec<String>,
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
struct Auto {
    target: String,
    prereqs: Vec<String>,
    stem: String,
}

static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:(?:export|override|private)\s+)*([A-Za-z0-9_.\-/]+)\s*(:::=|::=|:=|\?=|\+=|!=|=)\s*(.*)$")
        .expect("valid regex")
});

impl Makefile {
    /// Adds `text`'s variables and rules (`main`: the first target is the default).
    fn parse(&mut self, text: &str, main: bool) {
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
    fn visit(
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
    fn expand(&self, text: &str, auto: &Auto, dir: &Path, depth: usize) -> String {
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

// --- justfiles and tox.ini ---------------------------------------------------------------

#[derive(Debug)]
struct JustRecipe {
    name: String,
    deps: Vec<String>,
    body: Vec<String>,
}

static JUST_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^@?([A-Za-z_][A-Za-z0-9_-]*)([^:]*):(.*)$").expect("valid regex")
});

/// A justfile's recipes, `{{…}}` interpolations as [`UNKNOWN`].
fn parse_justfile(text: &str) -> Vec<JustRecipe> {
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
    static INTERP: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\{\{[^}]*\}\}").expect("valid regex"));
    INTERP.replace_all(line, UNKNOWN.to_string()).into_owned()
}

/// The `commands*` lines of every test environment in a `tox.ini`.
fn tox_commands(text: &str) -> Vec<String> {
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
    static SUBST: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\{[a-z_:]+[^}]*\}").expect("valid regex"));
    SUBST
        .replace_all(line.trim_start_matches('-'), UNKNOWN.to_string())
        .into_owned()
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
