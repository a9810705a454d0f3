//! The normaliser: the shell commands, file paths and URLs of any framework's event.
//!
//! Rules then match on these, never on a framework's tool names or argument shapes.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::paths::{ResolvedPath, Resolver};
use super::semantics;
use super::shell::{self, Command};
use crate::protocol::{Event, EventType};

/// Argument keys that hold a shell command line (string) or argv (array).
const COMMAND_KEYS: &[&str] = &["command", "cmd"];
/// Argument keys of a shell tool that set its working directory.
const WORKDIR_KEYS: &[&str] = &["workdir", "cwd", "directory", "dir_path"];
/// Argument keys of a file tool that name a file or directory.
const PATH_KEYS: &[&str] = &[
    "file_path",
    "absolute_path",
    "path",
    "notebook_path",
    "filename",
    "dir_path",
    "paths",
];
/// Argument keys that hold a URL.
const URL_KEYS: &[&str] = &["url", "urls"];

static URL_IN_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)\b(?:https?|ftp|wss?)://[^\s"'<>`]+"#).expect("valid regex")
});

/// A shell command line found in an event, and where it is, for rewrites.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellSource {
    pub text: String,
    /// JSON pointer into the payload of the string (or argv array) holding it.
    pub pointer: String,
    /// The command was an argv array (Codex): a rewrite replaces it with `bash -lc TEXT`.
    pub argv_form: bool,
}

/// One simple command with its operands and files resolved.
#[derive(Debug, Clone)]
pub struct CommandFacts {
    pub cmd: Command,
    pub operands: Vec<ResolvedPath>,
    pub reads: Vec<ResolvedPath>,
    pub writes: Vec<ResolvedPath>,
}

/// Everything rules look at, extracted once per event.
#[derive(Debug, Clone)]
pub struct Facts {
    pub event_type: EventType,
    pub tool: Option<String>,
    pub workspace: PathBuf,
    pub home: PathBuf,
    pub shell: Vec<ShellSource>,
    pub commands: Vec<CommandFacts>,
    /// Files read by file tools or by any shell command.
    pub reads: Vec<ResolvedPath>,
    /// Files written by file tools or by any shell command.
    pub writes: Vec<ResolvedPath>,
    pub urls: Vec<url::Url>,
    /// Why a shell command could not be understood, if one could not.
    pub parse_errors: Vec<String>,
}

/// Extracts the facts of `event`. `workspace_root` overrides the event's cwd as the workspace.
pub fn facts(event: &Event, resolver: &Resolver, workspace_root: Option<&Path>) -> Facts {
    let payload = &event.payload;
    let event_cwd = str_at(payload, &["context", "cwd"])
        .or_else(|| str_at(payload, &["cwd"]))
        .or_else(|| event.context.as_ref().and_then(|c| str_at(c, &["cwd"])))
        .map(PathBuf::from);
    let cwd_raw = event_cwd
        .or_else(|| workspace_root.map(Path::to_path_buf))
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let cwd = resolver.resolve_dir(&cwd_raw);
    let workspace = workspace_root.map_or_else(|| cwd.clone(), |w| resolver.resolve_dir(w));
    let tool = ["tool_name", "tool", "name"]
        .iter()
        .find_map(|k| payload.get(*k).and_then(Value::as_str))
        .map(str::to_owned);
    let (args_key, args) = ["arguments", "tool_input", "input", "args"]
        .iter()
        .find_map(|k| payload.get(*k).filter(|v| v.is_object()).map(|v| (*k, v)))
        .unwrap_or(("arguments", &Value::Null));

    let mut f = Facts {
        event_type: event.event_type,
        tool,
        workspace,
        home: resolver.home.clone(),
        shell: Vec::new(),
        commands: Vec::new(),
        reads: Vec::new(),
        writes: Vec::new(),
        urls: Vec::new(),
        parse_errors: Vec::new(),
    };
    let mut patches: Vec<String> = Vec::new();

    let mut shell_cwd = cwd.clone();
    for key in COMMAND_KEYS {
        let pointer = format!("/{args_key}/{key}");
        match args.get(*key) {
            Some(Value::String(text)) => f.shell.push(ShellSource {
                text: text.clone(),
                pointer,
                argv_form: false,
            }),
            Some(Value::Array(items)) => {
                let argv: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                if argv.first().map(|p| shell::program_name(p)).as_deref() == Some("apply_patch") {
                    patches.extend(argv.iter().skip(1).map(|s| s.to_string()));
                } else if let Some((i, script)) = shell_script_of_argv(&argv) {
                    f.shell.push(ShellSource {
                        text: script.to_owned(),
                        pointer: format!("{pointer}/{i}"),
                        argv_form: false,
                    });
                } else if !argv.is_empty() {
                    f.shell.push(ShellSource {
                        text: quote_argv(&argv),
                        pointer,
                        argv_form: true,
                    });
                }
            }
            _ => {}
        }
    }
    if !f.shell.is_empty() {
        if let Some(dir) = WORKDIR_KEYS
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
        {
            shell_cwd = resolver.resolve(dir, &cwd).abs;
        }
    }
    for src in &f.shell {
        if src.text.contains("*** Begin Patch") {
            patches.push(src.text.clone());
        }
        // The parser is third-party code on untrusted input: a panic in it is a command we
        // could not parse, not a crash of the wrapper.
        let analysed = std::panic::catch_unwind(AssertUnwindSafe(|| {
            shell::analyse(&src.text, &shell_cwd, resolver)
        }));
        match analysed {
            Ok(Ok(cmds)) => f
                .commands
                .extend(cmds.into_iter().map(|c| resolve_command(c, resolver))),
            Ok(Err(e)) => f.parse_errors.push(e.0),
            Err(_) => f.parse_errors.push("the shell parser failed".to_owned()),
        }
    }
    for c in &f.commands {
        f.reads.extend(c.reads.iter().cloned());
        f.writes.extend(c.writes.iter().cloned());
        for a in &c.cmd.args {
            if a.contains("://") {
                f.urls.extend(url::Url::parse(a).ok());
            }
        }
    }

    // File tools: how a path is used is read from the tool's name.
    if f.shell.is_empty() {
        let (reads, writes) = access(f.tool.as_deref().unwrap_or_default());
        for key in PATH_KEYS {
            for p in strings(args.get(*key)) {
                let resolved = resolver.resolve(p, &cwd);
                if reads {
                    f.reads.push(resolved.clone());
                }
                if writes {
                    f.writes.push(resolved);
                }
            }
        }
    }
    if let Value::Object(map) = args {
        patches.extend(
            map.values()
                .filter_map(Value::as_str)
                .filter(|s| s.contains("*** Begin Patch"))
                .map(str::to_owned),
        );
    }
    for patch in &patches {
        f.writes
            .extend(patch_paths(patch).map(|p| resolver.resolve(p, &shell_cwd)));
    }

    for key in URL_KEYS {
        for u in strings(args.get(*key)) {
            f.urls.extend(url::Url::parse(u).ok());
        }
    }
    if f.tool
        .as_deref()
        .is_some_and(|t| t.to_lowercase().contains("fetch"))
    {
        if let Some(prompt) = args.get("prompt").and_then(Value::as_str) {
            f.urls.extend(
                URL_IN_TEXT
                    .find_iter(prompt)
                    .filter_map(|m| url::Url::parse(m.as_str()).ok()),
            );
        }
    }
    f
}

fn resolve_command(cmd: Command, resolver: &Resolver) -> CommandFacts {
    let resolve = |w: &str| resolver.resolve(w, &cmd.cwd);
    CommandFacts {
        operands: semantics::operands(&cmd).into_iter().map(resolve).collect(),
        reads: semantics::reads(&cmd).into_iter().map(resolve).collect(),
        writes: semantics::writes(&cmd).iter().map(|w| resolve(w)).collect(),
        cmd,
    }
}

/// Whether a file tool of this name reads, writes, or (unknown) both.
fn access(tool: &str) -> (bool, bool) {
    let t = tool.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    let writes = has(&[
        "write", "edit", "replace", "patch", "create", "delete", "remove", "move", "rename",
        "insert", "save",
    ]);
    let reads = has(&[
        "read", "view", "cat", "grep", "glob", "search", "list", "ls", "find", "open",
    ]);
    match (reads, writes) {
        (false, false) => (true, true),
        other => other,
    }
}

/// `["bash", "-lc", "script"]` → the script and its index.
fn shell_script_of_argv<'a>(argv: &[&'a str]) -> Option<(usize, &'a str)> {
    let program = shell::program_name(argv.first()?);
    if !matches!(program.as_str(), "sh" | "bash" | "zsh" | "dash" | "ksh") {
        return None;
    }
    let flag = argv
        .iter()
        .position(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c'))?;
    argv.get(flag + 1).map(|s| (flag + 1, *s))
}

/// Quotes an argv as one shell command line.
pub fn quote_argv(argv: &[&str]) -> String {
    let quote = |a: &&str| {
        let safe = !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
        if safe {
            a.to_string()
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    argv.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// The files an `apply_patch` patch adds, updates, deletes or moves to.
fn patch_paths(patch: &str) -> impl Iterator<Item = &str> {
    const HEADERS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    patch.lines().filter_map(|line| {
        let line = line.trim_start();
        HEADERS
            .iter()
            .find_map(|h| line.strip_prefix(h))
            .map(str::trim)
    })
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_str()
}

/// A string, or the strings of an array.
fn strings(v: Option<&Value>) -> Vec<&str> {
    match v {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}
