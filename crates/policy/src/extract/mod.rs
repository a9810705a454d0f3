//! The normaliser: the shell commands, file paths and URLs of any framework's event.
//!
//! Rules then match on these, never on a framework's tool names or argument shapes. The
//! agent's working directory is the one its shim reports (`context.working_directory`).

mod commands;
mod configs;
pub(crate) mod contacts;
mod keys;
mod tools;
mod writes;

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::memory;
use super::paths::{ResolvedPath, Resolver};
use super::semantics;
use crate::command::{program_name, Command, UNKNOWN};
use crate::protected::Protected;
use crate::shell;
use ahp_wrap_wire::protocol::{Event, EventType};

/// Argument keys that hold a shell command line (string) or argv (array).
const COMMAND_KEYS: &[&str] = &["command", "cmd", "script", "shell_command", "bash_command"];
/// Code-running tools (`{code, language}`): the interpreter each language runs, as an argv.
const CODE_LANGUAGES: &[(&str, &[&str])] = &[
    ("bash", &["bash", "-c"]),
    ("sh", &["sh", "-c"]),
    ("shell", &["bash", "-c"]),
    ("zsh", &["zsh", "-c"]),
    ("python", &["python3", "-c"]),
    ("python3", &["python3", "-c"]),
    ("javascript", &["node", "-e"]),
    ("js", &["node", "-e"]),
    ("node", &["node", "-e"]),
    ("typescript", &["node", "-e"]),
    ("ruby", &["ruby", "-e"]),
    ("perl", &["perl", "-e"]),
    ("php", &["php", "-r"]),
];
/// Argument keys of a shell tool that set its working directory.
const WORKDIR_KEYS: &[&str] = &["workdir", "cwd", "directory", "dir_path"];
/// Argument keys that hold a URL.
const URL_KEYS: &[&str] = &["url", "urls"];

/// Programs that fetch a URL given without a scheme (`curl 169.254.169.254/…`).
const NET_PROGRAMS: &[&str] = &[
    "curl", "wget", "http", "https", "xh", "aria2c", "lynx", "links", "w3m",
];

static URL_IN_TEXT: LazyLock<Regex> =
    LazyLock::new(|| crate::pattern(r#"(?i)\b(?:https?|ftp|wss?|file)://[^\s"'<>`]+"#));

/// A shell command line found in an event, and where it is, for rewrites.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShellSource {
    pub text: String,
    /// JSON pointer into the payload of the string (or argv array) holding it.
    pub pointer: String,
    /// The command was an argv array (Codex): a rewrite replaces it with `bash -lc TEXT`.
    pub argv_form: bool,
}

/// One simple command with its operands and files resolved.
#[derive(Debug, Clone)]
pub(crate) struct CommandFacts {
    pub cmd: Command,
    pub operands: Vec<ResolvedPath>,
    pub reads: Vec<ResolvedPath>,
    pub writes: Vec<ResolvedPath>,
    /// Paths removed as whole trees.
    pub deletes: Vec<ResolvedPath>,
    /// Why something known only at run time stands where it matters, if it does.
    pub unknown: Option<String>,
    /// Why a package it installs looks like a typosquat of a popular one, if one does.
    pub typosquat: Option<String>,
}

/// Everything rules look at, extracted once per event.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub event_type: EventType,
    pub tool: Option<String>,
    pub workspace: PathBuf,
    pub home: PathBuf,
    /// The wrapper's own files and processes.
    pub protected: Protected,
    pub shell: Vec<ShellSource>,
    pub commands: Vec<CommandFacts>,
    /// Files read by file tools or by any shell command.
    pub reads: Vec<ResolvedPath>,
    /// Files written by file tools or by any shell command.
    pub writes: Vec<ResolvedPath>,
    pub urls: Vec<url::Url>,
    /// The URLs a non-shell tool will contact: the values of its URL-named arguments
    /// (`url`, `uri`, `href`, `endpoint`, `*_url`, …) at any depth, not URLs merely
    /// mentioned in a text it writes.
    pub contacts: Vec<url::Url>,
    /// The URLs shell commands will contact: a network program's (`curl`, `wget`, …) and
    /// those in an interpreter's code or arguments.
    pub command_contacts: Vec<url::Url>,
    /// Why a shell command could not be understood, if one could not.
    pub parse_errors: Vec<String>,
    /// The files the event writes, with the text where it is known, for the session's
    /// memory (remembered once the event is not refused).
    pub written: Vec<memory::Write>,
}

/// The working directory the event's agent reports, in any of the places shims put it.
fn event_cwd(event: &Event) -> Option<PathBuf> {
    let p = &event.payload;
    [
        &["context", "working_directory"][..],
        &["context", "cwd"],
        &["working_directory"],
        &["cwd"],
    ]
    .iter()
    .find_map(|path| str_at(p, path))
    .or_else(|| {
        event
            .context
            .as_ref()
            .and_then(|c| str_at(c, &["working_directory"]).or_else(|| str_at(c, &["cwd"])))
    })
    .map(PathBuf::from)
}

/// Extracts the facts of `event`. `workspace_root` overrides the event's cwd as the workspace;
/// `placeholders`: the variables that hold the run's own placeholder, a value known when the
/// command is read.
pub(crate) fn facts(
    event: &Event,
    resolver: &Resolver,
    workspace_root: Option<&Path>,
    protected: Protected,
    placeholders: &[String],
) -> Facts {
    let payload = &event.payload;
    let cwd_raw = event_cwd(event)
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
    // Argument names in camelCase (OpenCode's `filePath`, `oldString`) read as the snake_case
    // ones the key lists name.
    let snake = keys::has_camel_keys(args).then(|| keys::snake_keys(args));
    let args = snake.as_ref().unwrap_or(args);

    let mut f = Facts {
        event_type: event.event_type,
        tool,
        workspace,
        home: resolver.home.clone(),
        protected,
        shell: Vec::new(),
        commands: Vec::new(),
        reads: Vec::new(),
        writes: Vec::new(),
        urls: Vec::new(),
        contacts: Vec::new(),
        command_contacts: Vec::new(),
        parse_errors: Vec::new(),
        written: Vec::new(),
    };
    let found = shell_sources(args_key, args);
    f.shell = found.sources;
    let mut patches = found.patches;
    let mut shell_cwd = cwd.clone();
    if !f.shell.is_empty() {
        if let Some(dir) = WORKDIR_KEYS
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
        {
            shell_cwd = resolver.resolve(dir, &cwd).abs;
        }
    }
    let shell = (shell_cwd.as_path(), resolver, placeholders);
    analyse_shell(&mut f, &found.argvs, shell, &mut patches);

    // Every tool's paths, a shell tool's too (its command and working directory aside): an
    // editor tool may call its action `command` (`str_replace_editor`).
    tools::tool_paths(&mut f, args, &cwd, resolver);
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
    tool_urls(&mut f, args);
    if f.shell.is_empty() && f.tool.is_some() {
        contacts::contacted_urls(args, None, 0, &mut f.contacts);
    }
    // A `file:` URL (a browser told to open one, a fetch tool) reads that file.
    let files: Vec<ResolvedPath> = f
        .urls
        .iter()
        .filter(|u| u.scheme() == "file")
        .filter_map(|u| u.to_file_path().ok())
        .map(|p| resolver.resolve(&p.to_string_lossy(), &cwd))
        .collect();
    f.reads.extend(files);
    if f.event_type == EventType::PreAction {
        f.written = writes::writes(args, &f, resolver, &cwd);
    }
    f
}

/// The shell commands of a tool's arguments, where they are, and the argvs among them.
struct Found {
    sources: Vec<ShellSource>,
    /// One per source in argv form (or a script index, or `{code, language}`), in order.
    argvs: Vec<Vec<String>>,
    patches: Vec<String>,
}

fn shell_sources(args_key: &str, args: &Value) -> Found {
    let mut found = Found {
        sources: Vec::new(),
        argvs: Vec::new(),
        patches: Vec::new(),
    };
    for key in COMMAND_KEYS {
        let pointer = format!("/{args_key}/{key}");
        match args.get(*key) {
            Some(Value::String(text)) => found.sources.push(ShellSource {
                text: text.clone(),
                pointer,
                argv_form: false,
            }),
            Some(Value::Array(items)) => {
                let argv: Vec<String> = items
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect();
                let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
                if argv.first().map(|p| program_name(p)).as_deref() == Some("apply_patch") {
                    found.patches.extend(argv.iter().skip(1).cloned());
                } else if !argv.is_empty() {
                    let (pointer, text, argv_form) = match shell_script_of_argv(&argv) {
                        Some(i) => (format!("{pointer}/{i}"), argv[i].clone(), false),
                        None => (pointer, quote_argv(&refs), true),
                    };
                    found.sources.push(ShellSource {
                        text,
                        pointer,
                        argv_form,
                    });
                    found.argvs.push(argv);
                }
            }
            _ => {}
        }
    }
    if let (Some(code), Some(lang)) = (
        args.get("code").and_then(Value::as_str),
        args.get("language").and_then(Value::as_str),
    ) {
        let lang = lang.to_lowercase();
        let runner = CODE_LANGUAGES
            .iter()
            .find(|(l, _)| *l == lang)
            .map(|(_, r)| *r);
        // A language we do not know runs code we cannot read.
        let argv: Vec<String> = match runner {
            Some(r) => r
                .iter()
                .map(|s| (*s).to_owned())
                .chain([code.to_owned()])
                .collect(),
            None => vec!["bash".to_owned(), "-c".to_owned(), UNKNOWN.to_string()],
        };
        found.sources.push(ShellSource {
            text: code.to_owned(),
            pointer: format!("/{args_key}/code"),
            argv_form: false,
        });
        found.argvs.push(argv);
    }
    found
}

/// Parses every shell source into resolved commands (argv forms as exec takes them), run in
/// `shell_cwd`, paths read by `resolver`, `placeholders` the variables holding the run's
/// placeholder.
fn analyse_shell(
    f: &mut Facts,
    argvs: &[Vec<String>],
    (shell_cwd, resolver, placeholders): (&Path, &Resolver, &[String]),
    patches: &mut Vec<String>,
) {
    let mut argv_iter = argvs.iter();
    for src in &f.shell {
        if src.text.contains("*** Begin Patch") {
            patches.push(src.text.clone());
        }
        let argv = if src.argv_form
            || src.pointer.ends_with(|c: char| c.is_ascii_digit())
            || src.pointer.ends_with("/code")
        {
            argv_iter.next()
        } else {
            None
        };
        // The parser is third-party code on untrusted input: a panic in it is a command we
        // could not parse, not a crash of the wrapper.
        let analysed = std::panic::catch_unwind(AssertUnwindSafe(|| match argv {
            Some(argv) => shell::analyse_argv(argv, shell_cwd, resolver, placeholders),
            None => shell::analyse(&src.text, shell_cwd, resolver, placeholders),
        }));
        match analysed {
            Ok(Ok(cmds)) => f.commands.extend(
                cmds.into_iter()
                    .map(|c| commands::resolve_command(c, resolver)),
            ),
            Ok(Err(e)) => f.parse_errors.push(e.0),
            Err(_) => f.parse_errors.push("the shell parser failed".to_owned()),
        }
    }
    written_then_run(&mut f.commands, resolver);
    for c in &f.commands {
        f.reads.extend(c.reads.iter().cloned());
        f.writes.extend(c.writes.iter().cloned());
        f.writes.extend(c.deletes.iter().cloned());
        let mut urls = Vec::new();
        command_urls(&c.cmd, &mut urls);
        if NET_PROGRAMS.contains(&c.cmd.program.as_str()) || c.cmd.code.is_some() {
            f.command_contacts
                .extend(urls.iter().filter(|u| contacts::is_network(u)).cloned());
        }
        f.urls.extend(urls);
    }
}

/// URLs in a tool's `url`/`urls`, anywhere in a non-shell tool's arguments, and in a fetch
/// tool's prompt.
fn tool_urls(f: &mut Facts, args: &Value) {
    for key in URL_KEYS {
        for u in strings(args.get(*key)) {
            f.urls.extend(parse_url(u));
        }
    }
    if f.shell.is_empty() {
        let mut texts = Vec::new();
        tools::collect_strings(args, None, 0, &mut texts);
        for (_, s) in texts {
            f.urls.extend(
                URL_IN_TEXT
                    .find_iter(s)
                    .filter_map(|m| parse_url(m.as_str())),
            );
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
                    .filter_map(|m| parse_url(m.as_str())),
            );
        }
    }
}

fn parse_url(s: &str) -> Option<url::Url> {
    url::Url::parse(s).ok()
}

/// The URLs a command names: any argument with a scheme, and a network program's bare
/// host operands (`curl 169.254.169.254/latest`).
fn command_urls(cmd: &Command, urls: &mut Vec<url::Url>) {
    let net = NET_PROGRAMS.contains(&cmd.program.as_str());
    if cmd.program == "curl" {
        // `--resolve HOST:PORT:ADDR` and `--connect-to H:P:ADDR:PORT` send the request to
        // ADDR; `-x`/`--proxy` through it.
        let mut it = cmd.args.iter();
        while let Some(a) = it.next() {
            let (flag, value) = match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
                _ => (a.as_str(), None),
            };
            let target = match flag {
                "--resolve" | "--connect-to" | "-x" | "--proxy" | "--preproxy" => {
                    value.or_else(|| it.next().cloned())
                }
                _ => None,
            };
            let Some(t) = target else { continue };
            let host = match flag {
                "--resolve" => t.splitn(3, ':').nth(2).map(str::to_owned),
                "--connect-to" => t.split(':').nth(2).map(str::to_owned),
                _ => Some(t.clone()),
            };
            for h in host
                .into_iter()
                .flat_map(|h| h.split(',').map(str::to_owned).collect::<Vec<_>>())
            {
                let h = h.trim_matches(['[', ']']);
                if h.is_empty() {
                    continue;
                }
                let spelled = if h.contains("://") {
                    h.to_owned()
                } else if h.contains(':') && !h.contains('.') {
                    format!("http://[{h}]/")
                } else {
                    format!("http://{h}/")
                };
                urls.extend(parse_url(&spelled));
            }
        }
    }
    // The URLs in an interpreter's code, its constants joined (`'http://169.254.' + '169.254/'`).
    if let Some(code) = &cmd.code {
        urls.extend(
            URL_IN_TEXT
                .find_iter(code)
                .filter_map(|m| parse_url(m.as_str())),
        );
    }
    let mut after_option = false;
    for a in &cmd.args {
        // The value of an option (`-o out.json`, `--header x.y`) names no host.
        let value = std::mem::replace(
            &mut after_option,
            net && semantics::value_follows(&cmd.program, a),
        );
        if value && !a.contains("://") {
            continue;
        }
        if a.contains("://") {
            urls.extend(
                URL_IN_TEXT
                    .find_iter(a)
                    .filter_map(|m| parse_url(m.as_str())),
            );
        } else if net
            && !a.starts_with('-')
            && (a.contains('.') || a.contains(':'))
            && !a.contains(['@', ' ', '<'])
        {
            urls.extend(parse_url(&format!("http://{a}")));
        }
    }
}

/// A command that runs a file an earlier command of the same line wrote (`curl -o x …;
/// sh x`) runs code nobody has read.
fn written_then_run(cmds: &mut [CommandFacts], resolver: &Resolver) {
    let mut written: HashSet<PathBuf> = HashSet::new();
    for c in cmds.iter_mut() {
        if let Some(run) = &c.cmd.runs {
            let target = resolver.resolve_word(run, &c.cmd.cwd).abs;
            if written.contains(&target) && c.cmd.dynamic_code.is_none() {
                c.cmd.dynamic_code = Some(format!("runs {run}, which this same command wrote"));
            }
        }
        let content = !matches!(
            c.cmd.program.as_str(),
            "chmod" | "chown" | "chgrp" | "touch" | "chattr" | "setfacl"
        );
        if content {
            written.extend(c.writes.iter().map(|w| w.abs.clone()));
        }
    }
}

/// `["bash", "-lc", "script"]` → the index of the script, parsed as bash parses its options.
fn shell_script_of_argv(argv: &[String]) -> Option<usize> {
    let program = program_name(argv.first()?);
    if !semantics::SHELLS.contains(&program.as_str()) {
        return None;
    }
    let args = &argv[1..];
    semantics::shell_script(args)?;
    let (_, rest) = semantics::shell_options(args);
    Some(argv.len() - rest.len())
}

/// Quotes an argv as one shell command line.
pub(crate) fn quote_argv(argv: &[&str]) -> String {
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
