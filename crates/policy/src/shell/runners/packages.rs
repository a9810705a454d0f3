//! `package.json` scripts: what `npm`, `yarn`, `pnpm` and `bun` run for a script, a test,
//! a start, or the project's own install, pack and publish.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::builtins::Nested;
use super::super::code::display_name;
use super::super::{disk, Command, Origin, Walker};

impl Walker<'_> {
    pub(super) fn package_scripts(&mut self, cmd: &mut Command) -> Vec<Nested> {
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
