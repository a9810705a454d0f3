//! `git config` of a key that makes git run a program (a pager, an editor, a filter, a
//! driver, a credential helper, a shell alias, an ssh command), load another file of
//! settings, or let a transport run one: the file of the scope it writes (`~/.gitconfig`,
//! `.git/config`, `/etc/gitconfig`, `-f FILE`).
//!
//! Owns: which keys run code and which file each scope is. Must not touch: `git -c` and
//! `GIT_CONFIG_*` settings given to one command (the shell's walker reads those), or other
//! tools' settings (`tools`).

use std::path::{Path, PathBuf};

use super::{has, option_value, positionals};

/// `git [-C DIR] config [--global|--system|--local|--worktree|-f FILE] KEY VALUE` (or `git
/// config set KEY VALUE`, `--add`, `--replace-all`) of a key that makes git run a program,
/// load another file of settings, or accept a transport that runs one.
pub(super) fn git_config(args: &[String], home: &Path) -> Vec<PathBuf> {
    let mut i = 0;
    let mut dir: Option<PathBuf> = None;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-C" => {
                if let Some(d) = args.get(i + 1) {
                    dir = Some(dir.map_or_else(|| PathBuf::from(d), |p| p.join(d)));
                }
                i += 2;
            }
            "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env" => i += 2,
            s if s.starts_with('-') => i += 1,
            _ => break,
        }
    }
    if args.get(i).map(String::as_str) != Some("config") {
        return Vec::new();
    }
    let rest = &args[i + 1..];
    const READS: &[&str] = &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
        "-l",
        "--list",
        "-e",
        "--edit",
        "--unset",
        "--unset-all",
        "--remove-section",
        "--rename-section",
        "--blob",
    ];
    if has(rest, READS) {
        return Vec::new();
    }
    let takes = [
        "-f",
        "--file",
        "--type",
        "--default",
        "--comment",
        "--value",
        "--blob",
    ];
    let mut pos = positionals(rest, &takes);
    match pos.first().copied() {
        Some("set") => {
            pos.remove(0);
        }
        Some("get" | "list" | "unset" | "rename-section" | "remove-section" | "edit") => {
            return Vec::new()
        }
        _ => {}
    }
    let (Some(key), Some(value)) = (pos.first(), pos.get(1)) else {
        return Vec::new();
    };
    if !git_key_runs_code(key, value) {
        return Vec::new();
    }
    let base = dir.unwrap_or_default();
    let file = if let Some(f) = option_value(rest, &["-f", "--file"]) {
        PathBuf::from(f)
    } else if has(rest, &["--global"]) {
        home.join(".gitconfig")
    } else if has(rest, &["--system"]) {
        PathBuf::from("/etc/gitconfig")
    } else if has(rest, &["--worktree"]) {
        base.join(".git/config.worktree")
    } else {
        base.join(".git/config")
    };
    vec![file]
}

/// Whether setting git's `key` to `value` makes git run a program (a pager, an editor, a
/// filter, a diff or merge driver, a credential helper, a signing program, a shell alias, an
/// ssh command, a monitor), load another file of settings (`include.path`), or let a
/// transport run one (`protocol.ext.allow`).
fn git_key_runs_code(key: &str, value: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('.').collect();
    let (section, name) = match (parts.first(), parts.last()) {
        (Some(s), Some(n)) if parts.len() >= 2 => (*s, *n),
        _ => return false,
    };
    let sub = parts.len() > 2;
    let v = value.trim();
    let boolean = matches!(
        v.to_ascii_lowercase().as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "0" | "1" | ""
    );
    match (section, name) {
        // An editor or a pager as people set them up (`vim`, `less -FRX`, `code --wait`) is
        // a program looked up on PATH; a path, or anything a shell would read more into, is
        // code of the agent's choosing.
        ("core", "pager" | "editor")
        | ("sequence", "editor")
        | ("gpg", "program")
        | ("web", "browser") => !plain_program(v),
        ("pager", _) => !boolean && !plain_program(v),
        (
            "core",
            "fsmonitor"
            | "sshcommand"
            | "askpass"
            | "gitproxy"
            | "hookspath"
            | "alternaterefscommand",
        ) => !(name == "fsmonitor" && boolean),
        ("alias", _) => v.starts_with('!'),
        ("filter", "clean" | "smudge" | "process") => sub,
        ("diff", "textconv" | "command") => sub,
        ("diff", "external") => true,
        ("merge", "driver") => sub,
        ("mergetool" | "difftool", "cmd" | "path") => sub,
        ("credential", "helper") => v.starts_with('!') || v.contains('/'),
        ("gpg", "defaultkeycommand") => true,
        ("include", "path") => true,
        ("includeif", "path") => sub,
        ("uploadpack", "packobjectshook") => true,
        ("remote", "uploadpack" | "receivepack") => sub,
        ("protocol", "allow") => v.eq_ignore_ascii_case("always"),
        ("submodule", "update") => sub && v.starts_with('!'),
        ("tar", "command") => sub,
        ("man", "cmd" | "path") => sub,
        ("browser", "cmd" | "path") => sub,
        ("sendemail", "tocmd" | "cccmd" | "sendmailcmd") => true,
        ("sendemail", "smtpserver") => v.starts_with('/'),
        ("interactive", "difffilter") => true,
        ("init", "templatedir") => true,
        _ => false,
    }
}

/// A program as people name it in their settings: a bare name found on PATH (`vim`,
/// `delta`), with plain options (`less -FRX`, `code --wait`); no path, no shell syntax, no
/// value known only at run time.
fn plain_program(v: &str) -> bool {
    let mut words = v.split_whitespace();
    let Some(name) = words.next() else {
        return false;
    };
    // A shell or an interpreter as the pager runs what git shows (a commit message); as the
    // editor, the file it is given.
    const RUNS_INPUT: &[&str] = &[
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox",
        "python", "perl", "ruby", "node", "nodejs", "deno", "bun", "php", "lua", "tclsh", "awk",
        "gawk", "mawk", "xargs", "env", "eval", "source", "sudo", "nohup", "setsid", "timeout",
    ];
    let interpreter = RUNS_INPUT.contains(&name)
        || ["python", "perl", "ruby", "lua", "php"].iter().any(|p| {
            name.starts_with(p)
                && name[p.len()..]
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.')
        });
    let name_ok = !interpreter
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c));
    name_ok
        && words.all(|w| {
            w.starts_with('-')
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-=._,+".contains(c))
        })
}

#[cfg(test)]
mod tests {
    use super::super::tests::args;
    use super::*;

    fn git(s: &str) -> Vec<PathBuf> {
        git_config(&args(s), Path::new("/h"))
    }

    #[test]
    fn git_config_of_a_key_that_runs_a_program_writes_the_scope_file() {
        assert_eq!(
            git("config --global core.fsmonitor /tmp/f"),
            [PathBuf::from("/h/.gitconfig")]
        );
        assert_eq!(
            git("config filter.x.smudge /tmp/f"),
            [PathBuf::from(".git/config")]
        );
        assert_eq!(
            git("-C sub config core.pager sh"),
            [PathBuf::from("sub/.git/config")]
        );
        assert_eq!(
            git("config --system include.path /tmp/g"),
            [PathBuf::from("/etc/gitconfig")]
        );
        assert_eq!(
            git("config -f /tmp/c alias.x !sh"),
            [PathBuf::from("/tmp/c")]
        );
        assert_eq!(
            git("config set --global core.editor /tmp/e"),
            [PathBuf::from("/h/.gitconfig")]
        );
    }

    #[test]
    fn git_config_reads_and_plain_settings_write_nothing() {
        for s in [
            "config --get core.pager",
            "config core.pager",
            "config --global --unset core.pager",
            "config get core.pager",
            "config --global user.email a@b.c",
            "config --global alias.co checkout",
            "config --global core.editor vim",
            "config --global core.pager less -FRX",
            "config pager.branch false",
            "config --global credential.helper store",
            "status",
        ] {
            assert!(git(s).is_empty(), "{s}");
        }
    }

    #[test]
    fn an_editor_or_pager_is_plain_only_as_a_name_with_options() {
        assert!(plain_program("code --wait"));
        assert!(plain_program("delta"));
        assert!(!plain_program("sh"));
        assert!(!plain_program("python3.12 -i"));
        assert!(!plain_program("/tmp/x"));
        assert!(!plain_program("less; sh x"));
        assert!(!plain_program(""));
    }
}
