//! The normaliser: the shell commands, file paths and URLs of any framework's event.
//!
//! Rules then match on these, never on a framework's tool names or argument shapes. The
//! agent's working directory is the one its shim reports (`context.working_directory`).

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::paths::{ResolvedPath, Resolver};
use super::semantics::{self, spec_of};
use super::shell::{self, is_unknown, Command};
use crate::protocol::{Event, EventType};

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
/// Argument keys that name a file or directory, whatever the tool.
const PATH_KEYS: &[&str] = &[
    "file_path",
    "absolute_path",
    "path",
    "paths",
    "notebook_path",
    "filename",
    "file",
    "files",
    "dir_path",
    "dir",
    "directory",
    "root",
    "cwd",
    "workdir",
    "source",
    "src",
    "from",
    "source_path",
    "destination",
    "dest",
    "to",
    "target",
    "target_path",
    "new_path",
    "old_path",
    "include",
    "includes",
    "glob",
    "exclude",
    "uri",
];
/// Keys whose value is moved or copied away: read, and changed where it was.
const SOURCE_KEYS: &[&str] = &["source", "src", "from", "source_path", "old_path"];
/// Keys whose value is text, not a path (what a file tool writes, a search pattern).
const CONTENT_KEYS: &[&str] = &[
    "content",
    "contents",
    "new_string",
    "old_string",
    "new_str",
    "old_str",
    "new_source",
    "text",
    "body",
    "message",
    "description",
    "prompt",
    "query",
    "edits",
    "diff",
    "regex",
];
/// Argument keys that hold a URL.
const URL_KEYS: &[&str] = &["url", "urls"];

/// Secrets that live at fixed places under the home directory: a command that reads a whole
/// tree containing one of them (`grep -r x ~`, `tar c ~`) reads it.
const HOME_SECRETS: &[&str] = &[
    ".ssh/id_rsa",
    ".ssh/id_ed25519",
    ".ssh/id_ecdsa",
    ".ssh/id_dsa",
    ".aws/credentials",
    ".config/gcloud/credentials.db",
    ".config/gcloud/application_default_credentials.json",
    ".azure/accessTokens.json",
    ".kube/config",
    ".docker/config.json",
    ".gnupg/private-keys-v1.d",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".config/gh/hosts.yml",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".qwen/oauth_creds.json",
    ".copilot/config.json",
];

/// Files under the home directory that start code later or control the agents: what an
/// archive unpacked into home may overwrite.
const HOME_PERSISTENCE: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".ssh/authorized_keys",
    ".config/autostart/x.desktop",
    ".config/systemd/user/x.service",
    ".claude/settings.json",
    ".codex/config.toml",
    ".gemini/settings.json",
    ".qwen/settings.json",
    ".copilot/hooks/x.json",
    ".gitconfig",
];

/// Programs that fetch a URL given without a scheme (`curl 169.254.169.254/…`).
const NET_PROGRAMS: &[&str] = &[
    "curl", "wget", "http", "https", "xh", "aria2c", "lynx", "links", "w3m",
];

static URL_IN_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)\b(?:https?|ftp|wss?|file)://[^\s"'<>`]+"#).expect("valid regex")
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
    /// Paths removed as whole trees.
    pub deletes: Vec<ResolvedPath>,
    /// Why something known only at run time stands where it matters, if it does.
    pub unknown: Option<String>,
}

/// Everything rules look at, extracted once per event.
#[derive(Debug, Clone)]
pub struct Facts {
    pub event_type: EventType,
    pub tool: Option<String>,
    pub workspace: PathBuf,
    pub home: PathBuf,
    /// The wrapper's own files (executables, run directory), for `where = ["wrapper"]`.
    pub wrapper: Vec<PathBuf>,
    /// The wrapper's own processes, for `wrapper_pid = true`.
    pub wrapper_pids: Vec<u32>,
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

/// Extracts the facts of `event`. `workspace_root` overrides the event's cwd as the workspace.
pub fn facts(
    event: &Event,
    resolver: &Resolver,
    workspace_root: Option<&Path>,
    wrapper: &[PathBuf],
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

    let mut f = Facts {
        event_type: event.event_type,
        tool,
        workspace,
        home: resolver.home.clone(),
        wrapper: wrapper.to_vec(),
        wrapper_pids: Vec::new(),
        shell: Vec::new(),
        commands: Vec::new(),
        reads: Vec::new(),
        writes: Vec::new(),
        urls: Vec::new(),
        parse_errors: Vec::new(),
    };
    let mut patches: Vec<String> = Vec::new();
    let mut argvs: Vec<Vec<String>> = Vec::new();

    for key in COMMAND_KEYS {
        let pointer = format!("/{args_key}/{key}");
        match args.get(*key) {
            Some(Value::String(text)) => f.shell.push(ShellSource {
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
                if argv.first().map(|p| shell::program_name(p)).as_deref() == Some("apply_patch") {
                    patches.extend(argv.iter().skip(1).cloned());
                } else if !argv.is_empty() {
                    let (pointer, text, argv_form) = match shell_script_of_argv(&argv) {
                        Some(i) => (format!("{pointer}/{i}"), argv[i].clone(), false),
                        None => (pointer, quote_argv(&refs), true),
                    };
                    f.shell.push(ShellSource {
                        text,
                        pointer,
                        argv_form,
                    });
                    argvs.push(argv);
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
            None => vec!["bash".to_owned(), "-c".to_owned(), "\0".to_owned()],
        };
        f.shell.push(ShellSource {
            text: code.to_owned(),
            pointer: format!("/{args_key}/code"),
            argv_form: false,
        });
        argvs.push(argv);
    }
    let mut shell_cwd = cwd.clone();
    if !f.shell.is_empty() {
        if let Some(dir) = WORKDIR_KEYS
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
        {
            shell_cwd = resolver.resolve(dir, &cwd).abs;
        }
    }
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
            Some(argv) => shell::analyse_argv(argv, &shell_cwd, resolver),
            None => shell::analyse(&src.text, &shell_cwd, resolver),
        }));
        match analysed {
            Ok(Ok(cmds)) => f
                .commands
                .extend(cmds.into_iter().map(|c| resolve_command(c, resolver))),
            Ok(Err(e)) => f.parse_errors.push(e.0),
            Err(_) => f.parse_errors.push("the shell parser failed".to_owned()),
        }
    }
    written_then_run(&mut f.commands, resolver);
    for c in &f.commands {
        f.reads.extend(c.reads.iter().cloned());
        f.writes.extend(c.writes.iter().cloned());
        f.writes.extend(c.deletes.iter().cloned());
        command_urls(&c.cmd, &mut f.urls);
    }

    // Every tool's paths, a shell tool's too (its command and working directory aside): an
    // editor tool may call its action `command` (`str_replace_editor`).
    tool_paths(&mut f, args, &cwd, resolver);
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
            f.urls.extend(parse_url(u));
        }
    }
    if f.shell.is_empty() {
        let mut texts = Vec::new();
        collect_strings(args, None, 0, &mut texts);
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
    f
}

fn parse_url(s: &str) -> Option<url::Url> {
    url::Url::parse(s).ok()
}

/// The URLs a command names: any argument with a scheme, and a network program's bare
/// host operands (`curl 169.254.169.254/latest`).
fn command_urls(cmd: &Command, urls: &mut Vec<url::Url>) {
    let net = NET_PROGRAMS.contains(&cmd.program.as_str());
    for a in &cmd.args {
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

fn resolve_command(cmd: Command, resolver: &Resolver) -> CommandFacts {
    let word = |w: &str| resolver.resolve_word(w, &cmd.cwd);
    let code = |w: &String| resolver.resolve(w, &cmd.cwd);
    let operands: Vec<ResolvedPath> = semantics::operands(&cmd).into_iter().map(word).collect();
    let mut reads: Vec<ResolvedPath> = semantics::reads(&cmd).into_iter().map(word).collect();
    reads.extend(cmd.code_paths.reads.iter().map(code));
    let mut writes: Vec<ResolvedPath> = semantics::writes(&cmd).iter().map(|w| word(w)).collect();
    writes.extend(cmd.code_paths.writes.iter().map(code));
    let nofollow = |w: &str| resolver.resolve_word_nofollow(w, &cmd.cwd);
    let mut deletes: Vec<ResolvedPath> =
        semantics::deletes(&cmd).into_iter().map(nofollow).collect();
    let tree_writer = matches!(cmd.program.as_str(), "tar" | "bsdtar" | "unzip")
        || (matches!(cmd.program.as_str(), "cp" | "rsync" | "scp" | "gcp")
            && semantics::recursive(&cmd));
    if tree_writer {
        // Unpacking or copying a tree into home (or above it) may write any file there:
        // the persistence ones.
        let dirs: Vec<PathBuf> = writes.iter().map(|w| w.abs.clone()).collect();
        for d in dirs {
            if resolver.home.starts_with(&d) {
                writes.extend(HOME_PERSISTENCE.iter().map(|p| {
                    resolver.resolve(&resolver.home.join(p).to_string_lossy(), Path::new("/"))
                }));
            }
        }
    }
    deletes.extend(cmd.code_paths.deletes.iter().map(code));
    if semantics::recursive(&cmd) {
        let roots: Vec<PathBuf> = reads.iter().map(|r| r.abs.clone()).collect();
        reads.extend(secrets_below(&roots, resolver));
    }
    let unknown = unknown_where_it_matters(&cmd);
    CommandFacts {
        cmd,
        operands,
        reads,
        writes,
        deletes,
        unknown,
    }
}

/// The fixed-place secrets inside any of `roots` (a tree read whole reads them).
fn secrets_below(roots: &[PathBuf], resolver: &Resolver) -> Vec<ResolvedPath> {
    let mut out = Vec::new();
    for s in HOME_SECRETS {
        let p = resolver.home.join(s);
        if roots.iter().any(|r| p.starts_with(r)) {
            out.push(resolver.resolve(&p.to_string_lossy(), Path::new("/")));
        }
    }
    out
}

/// Why a value known only at run time stands where it matters in `cmd`, if one does.
fn unknown_where_it_matters(cmd: &Command) -> Option<String> {
    let relative_unknown = |w: &str| !cmd.cwd_known && !w.starts_with('/');
    if is_unknown(&cmd.path) {
        return Some("the program to run is known only at run time".to_owned());
    }
    if let Some(run) = &cmd.runs {
        if is_unknown(run) || relative_unknown(run) {
            return Some("the file it runs is known only at run time".to_owned());
        }
    }
    for r in &cmd.redirects {
        if is_unknown(&r.target) || relative_unknown(&r.target) {
            return Some("a redirection target is known only at run time".to_owned());
        }
    }
    if !cmd.wrapper && spec_of(&cmd.program).sensitive {
        let ops = semantics::operands(cmd);
        if ops.iter().any(|o| is_unknown(o) || relative_unknown(o))
            || (cmd.program == "dd" && cmd.args.iter().any(|a| is_unknown(a)))
        {
            return Some(format!(
                "an operand of `{}` is known only at run time",
                cmd.program
            ));
        }
    }
    if !cmd.wrapper
        && (semantics::deletes(cmd)
            .iter()
            .any(|d| is_unknown(d) || relative_unknown(d))
            || semantics::writes(cmd).iter().any(|w| is_unknown(w)))
    {
        return Some(format!(
            "what `{}` changes is known only at run time",
            cmd.program
        ));
    }
    if cmd.code_unknown {
        return Some("the code it runs is known only at run time".to_owned());
    }
    if cmd
        .code_paths
        .writes
        .iter()
        .chain(&cmd.code_paths.deletes)
        .any(|w| is_unknown(w))
    {
        return Some("inline code changes a path known only at run time".to_owned());
    }
    None
}

/// Whether a file tool of this name reads, writes, or (unknown) both.
fn access(tool: &str) -> (bool, bool) {
    let t = tool.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    let lists = has(&["ls", "list", "glob", "find", "tree"]) && !has(&["read", "grep", "search"]);
    if lists && !has(&["write", "edit", "delete", "remove", "move"]) {
        return (false, false);
    }
    let writes = has(&[
        "write", "edit", "replace", "patch", "create", "delete", "remove", "move", "rename",
        "insert", "save", "copy", "upload",
    ]);
    let reads = has(&[
        "read", "view", "cat", "grep", "search", "open", "get", "download", "copy", "upload",
    ]);
    match (reads, writes) {
        (false, false) => (true, true),
        other => other,
    }
}

/// The paths anywhere in a tool's arguments, read or written as the tool's name says;
/// searching tools read their roots as whole trees.
fn tool_paths(f: &mut Facts, args: &Value, cwd: &Path, resolver: &Resolver) {
    let tool = f.tool.clone().unwrap_or_default();
    let lower = tool.to_lowercase();
    let (reads, writes) = access(&tool);
    // Content searches read whole trees; listing tools (ls, glob, find) only show names.
    let tree = ["grep", "search", "read_many"]
        .iter()
        .any(|w| lower.contains(w));
    let mut found = Vec::new();
    collect_strings(args, None, 0, &mut found);
    let base = ["path", "dir_path", "directory", "dir", "root", "cwd"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map_or_else(|| cwd.to_path_buf(), |p| resolver.resolve(p, cwd).abs);
    let mut roots = Vec::new();
    let shell_tool = !f.shell.is_empty();
    for (key, value) in found {
        let key = key.unwrap_or_default();
        if shell_tool && (COMMAND_KEYS.contains(&key) || WORKDIR_KEYS.contains(&key)) {
            continue;
        }
        let is_path_key = PATH_KEYS.contains(&key) || (key == "pattern" && lower.contains("glob"));
        let value = value.strip_prefix("file://").unwrap_or(value);
        if !(is_path_key || looks_like_path(value)) || value.contains('\n') || value.is_empty() {
            continue;
        }
        let globby = value.contains(['*', '?', '[', '{']);
        let at = if globby || matches!(key, "include" | "glob" | "exclude" | "pattern") {
            &base
        } else {
            cwd
        };
        let paths: Vec<String> = if globby {
            instantiate(value)
        } else {
            vec![value.to_owned()]
        };
        for p in paths {
            let resolved = resolver.resolve(&p, at);
            let source = SOURCE_KEYS.contains(&key);
            if reads || source {
                f.reads.push(resolved.clone());
            }
            if writes || source {
                f.writes.push(resolved.clone());
            }
            if tree && !globby {
                roots.push(resolved.abs);
            }
        }
        if globby {
            roots.push(resolver.resolve(literal_prefix(value), at).abs);
        }
    }
    if tree {
        roots.push(base);
        f.reads.extend(secrets_below(&roots, resolver));
    }
}

fn looks_like_path(s: &str) -> bool {
    (s.starts_with('/')
        || s.starts_with("~/")
        || s == "~"
        || s.starts_with("./")
        || s.starts_with("../"))
        && !s.contains("://")
        && s.len() < 4096
}

/// A glob as a few concrete paths that it matches, for checking against protected globs:
/// `**/.ssh/*` → `d/.ssh/x`; braces give one path per alternative.
fn instantiate(glob: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut rest = glob;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        let alts: Vec<&str> = rest[open + 1..close].split(',').collect();
        let head = &rest[..open];
        out = out
            .iter()
            .flat_map(|o| alts.iter().map(move |a| format!("{o}{head}{a}")))
            .take(64)
            .collect();
        rest = &rest[close + 1..];
    }
    for o in &mut out {
        o.push_str(rest);
    }
    static CLASS: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\[[^\]]*\]").expect("valid regex"));
    out.into_iter()
        .map(|p| {
            CLASS
                .replace_all(&p.replace("**", "d"), "x")
                .replace(['*', '?'], "x")
        })
        .collect()
}

/// The directory part of a glob before its first metacharacter.
fn literal_prefix(glob: &str) -> &str {
    let meta = glob.find(['*', '?', '[', '{']).unwrap_or(glob.len());
    match glob[..meta].rfind('/') {
        Some(i) if i > 0 => &glob[..i],
        Some(_) => "/",
        None => ".",
    }
}

/// Every string in a tool's arguments with the key it is under, except text content.
fn collect_strings<'a>(
    v: &'a Value,
    key: Option<&'a str>,
    depth: usize,
    out: &mut Vec<(Option<&'a str>, &'a str)>,
) {
    const MAX_DEPTH: usize = 8;
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::String(s) => out.push((key, s)),
        Value::Array(items) => {
            for i in items {
                collect_strings(i, key, depth + 1, out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                if !CONTENT_KEYS.contains(&k.as_str()) {
                    collect_strings(v, Some(k), depth + 1, out);
                }
            }
        }
        _ => {}
    }
}

/// `["bash", "-lc", "script"]` → the index of the script, parsed as bash parses its options.
fn shell_script_of_argv(argv: &[String]) -> Option<usize> {
    let program = shell::program_name(argv.first()?);
    if !semantics::SHELLS.contains(&program.as_str()) {
        return None;
    }
    let args = &argv[1..];
    semantics::shell_script(args)?;
    let (_, rest) = semantics::shell_options(args);
    Some(argv.len() - rest.len())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_instantiate_to_paths_they_match() {
        assert_eq!(instantiate("**/.ssh/*"), ["d/.ssh/x"]);
        assert_eq!(
            instantiate("~/.ssh/id_{rsa,dsa}"),
            ["~/.ssh/id_rsa", "~/.ssh/id_dsa"]
        );
        assert_eq!(literal_prefix("/h/.ssh/id_*"), "/h/.ssh");
        assert_eq!(literal_prefix("**/x"), ".");
    }
}
