//! The files an event writes, and with what text where its arguments hold it: what the
//! session's memory ([`crate::memory`]) keeps once the event is not refused.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Facts;
use crate::command::{is_unknown, Command, Stdin};
use crate::memory::{Content, Write, MAX_TEXT};
use crate::paths::{ResolvedPath, Resolver};

/// The writes of one event: its file tool's (with the text the tool writes) and its shell
/// commands' (with the text of those whose text the command line holds).
pub(super) fn writes(args: &Value, facts: &Facts, resolver: &Resolver, cwd: &Path) -> Vec<Write> {
    let mut out = Vec::new();
    let how = match &facts.tool {
        Some(t) => format!("the {t} tool"),
        None => "a tool".to_owned(),
    };
    // A patch (`apply_patch`, however the agent passes it: an argument of its own, its
    // `command`) is all the event writes.
    if let Value::Object(map) = args {
        let texts = map.values().flat_map(|v| match v {
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            v => v.as_str().into_iter().collect::<Vec<_>>(),
        });
        for patch in texts.filter(|t| t.contains("*** Begin Patch")) {
            patch_writes(patch, resolver, cwd, &how, &mut out);
        }
    }
    if !out.is_empty() {
        return out;
    }
    if facts.shell.is_empty() {
        tool_writes(args, facts, resolver, cwd, &how, &mut out);
    }
    for c in &facts.commands {
        command_writes(&c.cmd, &c.writes, resolver, &mut out);
    }
    out
}

/// Keys that hold a whole file's new text.
const TEXT_KEYS: &[&str] = &["content", "contents", "file_text", "text"];

/// A file tool's writes: every path it writes, with the text when its arguments hold it.
fn tool_writes(
    args: &Value,
    facts: &Facts,
    resolver: &Resolver,
    cwd: &Path,
    how: &str,
    out: &mut Vec<Write>,
) {
    let how = how.to_owned();
    let str_of = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
    };
    // The file the tool writes (a reading tool names one too: it is not among the writes).
    let target = str_of(&[
        "file_path",
        "path",
        "filename",
        "file",
        "target_file",
        "target",
    ])
    .map(|p| resolver.resolve(p, cwd).abs)
    .filter(|t| facts.writes.iter().any(|w| &w.abs == t));
    if let Some(path) = target.clone() {
        let edit = |e: &Value| {
            let s = |keys: &[&str]| keys.iter().find_map(|k| e.get(*k).and_then(Value::as_str));
            Some(Content::Edit {
                old: s(&["old_string", "old_str"])?.to_owned(),
                new: s(&["new_string", "new_str"]).unwrap_or_default().to_owned(),
                all: e
                    .get("replace_all")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        };
        let contents: Vec<Content> = if let Some(text) = str_of(TEXT_KEYS) {
            vec![if text.len() <= MAX_TEXT {
                Content::Whole(text.to_owned())
            } else {
                Content::TooLarge
            }]
        } else if let Some(edits) = args.get("edits").and_then(Value::as_array) {
            edits
                .iter()
                .map(|e| edit(e).unwrap_or(Content::Unknown))
                .collect()
        } else {
            vec![edit(args).unwrap_or(Content::Unknown)]
        };
        out.extend(contents.into_iter().map(|content| Write {
            path: path.clone(),
            content,
            how: how.clone(),
        }));
    }
    // Every other path the tool writes (a move's destination, a download's file).
    for w in &facts.writes {
        if Some(&w.abs) != target.as_ref() {
            out.push(Write {
                path: w.abs.clone(),
                content: Content::Unknown,
                how: how.clone(),
            });
        }
    }
}

/// An `apply_patch` patch's files: an added file's whole text, an updated one's added lines
/// (after what it held: both are read).
fn patch_writes(patch: &str, resolver: &Resolver, cwd: &Path, how: &str, out: &mut Vec<Write>) {
    let mut current: Option<(PathBuf, bool, String)> = None;
    let flush = |current: &mut Option<(PathBuf, bool, String)>, out: &mut Vec<Write>| {
        if let Some((path, whole, text)) = current.take() {
            out.push(Write {
                path,
                content: if whole {
                    Content::Whole(text)
                } else {
                    Content::Appended(text)
                },
                how: how.to_owned(),
            });
        }
    };
    for line in patch.lines() {
        let trimmed = line.trim_start();
        if let Some(p) = trimmed.strip_prefix("*** Add File: ") {
            flush(&mut current, out);
            current = Some((resolver.resolve(p.trim(), cwd).abs, true, String::new()));
        } else if let Some(p) = trimmed
            .strip_prefix("*** Update File: ")
            .or_else(|| trimmed.strip_prefix("*** Move to: "))
        {
            flush(&mut current, out);
            current = Some((resolver.resolve(p.trim(), cwd).abs, false, "\n".to_owned()));
        } else if trimmed.starts_with("*** ") {
            flush(&mut current, out);
        } else if let (Some(added), Some((_, _, text))) = (line.strip_prefix('+'), &mut current) {
            text.push_str(added);
            text.push('\n');
        }
    }
    flush(&mut current, out);
}

/// Programs whose writes leave a file's text as it was (its mode, owner, times).
const KEEP_TEXT: &[&str] = &["chmod", "chown", "chgrp", "touch", "chattr", "setfacl"];

/// A shell command's writes: a redirection of `echo`, `printf` or a here-document, `tee` of
/// a text known now, a copy of a file the session wrote; any other write with its text
/// unknown.
fn command_writes(
    cmd: &Command,
    writes: &[ResolvedPath],
    resolver: &Resolver,
    out: &mut Vec<Write>,
) {
    if KEEP_TEXT.contains(&cmd.program.as_str()) {
        return;
    }
    let literal_stdin = match &cmd.stdin {
        Stdin::Literal(t) => Some(t.clone()),
        _ => None,
    };
    let output: Option<String> = match cmd.program.as_str() {
        "echo" => {
            let words: Vec<&str> = cmd
                .args
                .iter()
                .map(String::as_str)
                .skip_while(|a| matches!(*a, "-n" | "-e" | "-E" | "-ne" | "-en"))
                .collect();
            Some(format!("{}\n", words.join(" ")))
        }
        // The format and its arguments: what a reader of the file sees, near enough.
        "printf" => Some(cmd.args.join(" ")),
        "cat" if cmd.args.is_empty() => literal_stdin.clone(),
        _ => None,
    };
    let mut done: Vec<PathBuf> = Vec::new();
    for r in cmd.redirects.iter().filter(|r| r.writes && !r.reads) {
        if is_unknown(&r.target) || r.target.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let path = resolver.resolve_word(&r.target, &cmd.cwd).abs;
        let content = Content::of(output.as_deref(), r.appends);
        done.push(path.clone());
        out.push(Write {
            path,
            content,
            how: "a shell redirection".to_owned(),
        });
    }
    if cmd.program == "tee" {
        let append = cmd.args.iter().any(|a| a == "-a" || a == "--append");
        for a in cmd.args.iter().filter(|a| !a.starts_with('-')) {
            let path = resolver.resolve_word(a, &cmd.cwd).abs;
            let content = Content::of(literal_stdin.as_deref(), append);
            done.push(path.clone());
            out.push(Write {
                path,
                content,
                how: "tee".to_owned(),
            });
        }
    }
    if matches!(cmd.program.as_str(), "cp" | "mv" | "install") {
        let operands: Vec<&String> = cmd.args.iter().filter(|a| !a.starts_with('-')).collect();
        if let [from, to] = operands[..] {
            if !is_unknown(from) && !is_unknown(to) {
                let from = resolver.resolve_word(from, &cmd.cwd).abs;
                let mut to = resolver.resolve_word(to, &cmd.cwd).abs;
                if to.is_dir() {
                    if let Some(name) = from.file_name() {
                        to = to.join(name);
                    }
                }
                done.push(to.clone());
                out.push(Write {
                    path: to,
                    content: Content::CopyOf(from),
                    how: format!("`{}`", cmd.program),
                });
            }
        }
    }
    for w in writes {
        if !done.contains(&w.abs) {
            out.push(Write {
                path: w.abs.clone(),
                content: Content::Unknown,
                how: format!(
                    "`{}`",
                    if cmd.program.is_empty() {
                        "a command"
                    } else {
                        &cmd.program
                    }
                ),
            });
        }
    }
}
