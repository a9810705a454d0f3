//! The paths anywhere in a tool's arguments, read or written as the tool's name says.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::super::paths::Resolver;
use super::commands::secrets_below;
use super::{Facts, COMMAND_KEYS, WORKDIR_KEYS};

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
    "diff",
    "regex",
];

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
        "insert", "save", "copy", "upload", "download",
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
pub(super) fn tool_paths(f: &mut Facts, args: &Value, cwd: &Path, resolver: &Resolver) {
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
    static CLASS: LazyLock<Regex> = LazyLock::new(|| crate::pattern(r"\[[^\]]*\]"));
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
pub(super) fn collect_strings<'a>(
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
