//! Python's runners: pytest's `conftest.py` files, `invoke`'s `tasks.py`, the `setup.py` of
//! `pip install .`, and the module `python -m` really runs.

use std::path::{Path, PathBuf};

use super::super::builtins::Nested;
use super::super::{is_unknown, Command, Walker};
use super::{disk, find_files, MAX_TREE_ENTRIES};

impl Walker<'_> {
    /// A Python file a runner imports from the working directory (or `flags`' directory).
    pub(super) fn python_file_in(
        &mut self,
        cmd: &mut Command,
        flags: &[&str],
        name: &str,
    ) -> Vec<Nested> {
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
    pub(super) fn conftests(&mut self, cmd: &mut Command) -> Vec<Nested> {
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
    pub(super) fn setup_py(&mut self, cmd: &mut Command, args: &[String]) -> Vec<Nested> {
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
    pub(super) fn python_module(&mut self, cmd: &mut Command) -> Vec<Nested> {
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
}
