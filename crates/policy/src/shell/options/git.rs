//! git's arguments and variables: the commands they make it run (`ext::` URLs, `submodule
//! foreach`, `rebase --exec`, `bisect run`, `difftool -x`, `filter-branch`'s filters, the
//! programs given for the other end, `GIT_CONFIG_*` settings checked as `git -c` is), and the
//! files whose content it stores, mails or makes a message (`add`, `hash-object`,
//! `send-email`, `commit -F`).
//!
//! Owns: reading git's subcommands and their options here. Must not touch: `git -c` and
//! `git config` settings themselves (the shell's builtins and `extract::configs` read those)
//! or what `show`, `diff` and the like print (the builtins).

use std::sync::LazyLock;

use regex::Regex;

use super::super::builtins::Nested;
use super::super::Command;
use super::option_values;

/// git's commands run from its arguments: `ext::` URLs, `submodule foreach`, `rebase
/// --exec`/`-x`, `bisect run`, `difftool -x`/`--extcmd`, `filter-branch`'s filters, and the
/// configuration given in `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n` or `GIT_CONFIG_PARAMETERS`.
pub(super) fn git_commands(
    args: &[String],
    assigned: &dyn Fn(&str) -> Option<String>,
    out: &mut Vec<Nested>,
) -> Vec<String> {
    out.extend(
        args.iter()
            .filter_map(|a| a.strip_prefix("ext::"))
            .map(|c| Nested::Argv(ext_argv(c))),
    );
    let mut scripts = Vec::new();
    let sub_at = args.iter().position(|a| {
        matches!(
            a.as_str(),
            "submodule"
                | "rebase"
                | "bisect"
                | "difftool"
                | "filter-branch"
                | "mergetool"
                | "clone"
                | "fetch"
                | "pull"
                | "ls-remote"
                | "push"
                | "archive"
        )
    });
    if let Some(at) = sub_at {
        let rest = &args[at + 1..];
        match args[at].as_str() {
            "submodule" => {
                if let Some(f) = rest.iter().position(|a| a == "foreach") {
                    let body: Vec<&str> = rest[f + 1..]
                        .iter()
                        .map(String::as_str)
                        .filter(|a| !a.starts_with("--"))
                        .collect();
                    scripts.push(body.join(" "));
                }
            }
            "rebase" => scripts.extend(option_values(rest, &["-x", "--exec"])),
            "bisect" if rest.first().is_some_and(|a| a == "run") => {
                out.push(Nested::Argv(rest[1..].to_vec()));
            }
            "difftool" | "mergetool" => {
                scripts.extend(option_values(rest, &["-x", "--extcmd"]));
            }
            "clone" | "fetch" | "pull" | "ls-remote" | "push" | "archive" => {
                // The program git runs for the other end (a shell command line; for a local
                // repository it runs here).
                scripts.extend(option_values(
                    rest,
                    if args[at] == "clone" {
                        &["--upload-pack", "-u"][..]
                    } else {
                        &["--upload-pack", "--receive-pack", "--exec"][..]
                    },
                ));
            }
            "filter-branch" => scripts.extend(option_values(
                rest,
                &[
                    "--tree-filter",
                    "--index-filter",
                    "--msg-filter",
                    "--env-filter",
                    "--commit-filter",
                    "--parent-filter",
                    "--tag-name-filter",
                ],
            )),
            _ => {}
        }
    }
    // Configuration from the environment, checked as `git -c` is.
    let mut config = Vec::new();
    if let Some(n) = assigned("GIT_CONFIG_COUNT").and_then(|n| n.parse::<usize>().ok()) {
        for i in 0..n.min(64) {
            if let (Some(k), Some(v)) = (
                assigned(&format!("GIT_CONFIG_KEY_{i}")),
                assigned(&format!("GIT_CONFIG_VALUE_{i}")),
            ) {
                config.push(format!("{k}={v}"));
            }
        }
    }
    if let Some(params) = assigned("GIT_CONFIG_PARAMETERS") {
        static PAIR: LazyLock<Regex> =
            LazyLock::new(|| crate::pattern(r"'([^']*)'\s*=\s*'([^']*)'"));
        config.extend(
            PAIR.captures_iter(&params)
                .map(|c| format!("{}={}", &c[1], &c[2])),
        );
    }
    if !config.is_empty() {
        let mut argv = vec!["git".to_owned()];
        for kv in config {
            argv.push("-c".into());
            argv.push(kv);
        }
        argv.push("status".into());
        out.push(Nested::Argv(argv));
    }
    scripts
}

/// The argv of a `ext::` remote: words split at spaces not escaped by `%`, `%S`/`%s` the
/// service, `%G` and `%V` dropped.
fn ext_argv(spec: &str) -> Vec<String> {
    let mut argv = Vec::new();
    let mut word = String::new();
    let mut chars = spec.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => match chars.next() {
                Some(' ') => word.push(' '),
                Some('%') => word.push('%'),
                Some('S') => word.push_str("git-upload-pack"),
                Some('s') => word.push_str("upload-pack"),
                _ => {}
            },
            ' ' => {
                if !word.is_empty() {
                    argv.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        argv.push(word);
    }
    argv
}

/// git subcommands that put a file's content where others can read it: `add` (and `stage`)
/// and `hash-object` store it in the repository (to be committed, pushed, printed with
/// `cat-file`), `send-email` mails it, `commit -F`/`tag -F`/`notes add -F` make it a
/// message. Paths are the work tree's: below `-C DIR` and `--work-tree DIR`.
pub(super) fn git_reads(cmd: &mut Command, args: &[String]) {
    let mut base = String::new();
    let mut work_tree: Option<String> = None;
    let mut i = 0;
    let join = |base: &str, p: &str| {
        if base.is_empty() || p.starts_with('/') {
            p.to_owned()
        } else {
            format!("{}/{p}", base.trim_end_matches('/'))
        }
    };
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-C" => {
                base = join(&base, args.get(i + 1).map_or("", String::as_str));
                i += 2;
            }
            "--work-tree" => {
                work_tree = args.get(i + 1).cloned();
                i += 2;
            }
            "-c" | "--git-dir" | "--namespace" | "--exec-path" | "--config-env" => i += 2,
            _ if a.starts_with("--work-tree=") => {
                work_tree = Some(a["--work-tree=".len()..].to_owned());
                i += 1;
            }
            _ if a.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let base = match work_tree {
        Some(w) => join(&base, &w),
        None => base,
    };
    let Some(sub) = args.get(i) else { return };
    let rest = &args[i + 1..];
    let mut files: Vec<&str> = Vec::new();
    match sub.as_str() {
        "add" | "stage" | "hash-object" | "send-email" => {
            // Options taking a separate value.
            let with_value: &[&str] = match sub.as_str() {
                "hash-object" => &["-t"],
                "send-email" => &[
                    "--to",
                    "--cc",
                    "--bcc",
                    "--from",
                    "--subject",
                    "--in-reply-to",
                    "--reply-to",
                    "--smtp-server",
                    "--smtp-server-port",
                    "--smtp-user",
                    "--smtp-pass",
                    "--smtp-encryption",
                    "--identity",
                    "--sender",
                ],
                _ => &[],
            };
            let mut skip = false;
            let mut done = false;
            for a in rest {
                if skip {
                    skip = false;
                } else if !done && a == "--" {
                    done = true;
                } else if !done && with_value.contains(&a.as_str()) {
                    skip = true;
                } else if done || !a.starts_with('-') {
                    files.push(a);
                }
            }
        }
        "commit" | "tag" | "notes" => {
            for f in option_values(rest, &["-F", "--file"]) {
                if f != "-" {
                    cmd.code_paths.reads.push(join(&base, &f));
                }
            }
        }
        _ => {}
    }
    for f in files {
        cmd.code_paths.reads.push(join(&base, f));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{strings, with_stdin};
    use super::*;

    #[test]
    fn git_stores_files_it_adds_below_its_work_tree() {
        let mut cmd = with_stdin("git", None);
        git_reads(
            &mut cmd,
            &strings(&["-C", "/h", "add", "-f", ".ssh/id_rsa"]),
        );
        git_reads(&mut cmd, &strings(&["--work-tree=/w", "add", "--", "k"]));
        git_reads(
            &mut cmd,
            &strings(&["hash-object", "-t", "blob", "-w", "x"]),
        );
        git_reads(
            &mut cmd,
            &strings(&["send-email", "--to", "a@b", "p.patch"]),
        );
        git_reads(&mut cmd, &strings(&["commit", "-F", "msg.txt"]));
        git_reads(&mut cmd, &strings(&["commit", "-m", "add x"]));
        assert_eq!(
            cmd.code_paths.reads,
            ["/h/.ssh/id_rsa", "/w/k", "x", "p.patch", "msg.txt"]
        );
    }

    #[test]
    fn ext_remotes_split_as_git_splits_them() {
        assert_eq!(ext_argv("sh -c rm% -rf% ~"), ["sh", "-c", "rm -rf ~"]);
        assert_eq!(
            ext_argv("ssh -p 22 h %S% 'repo'"),
            ["ssh", "-p", "22", "h", "git-upload-pack 'repo'"]
        );
    }
}
