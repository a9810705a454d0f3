//! ACP messages as AHP payloads, and a harness's changes back as ACP params.
//!
//! Owns: the shape of every payload the ACP mapping sends (so that the embedded policy
//! reads paths and commands where it reads them for any agent: `arguments.path`,
//! `arguments.content`, `arguments.command`) and the inverse for `modify`. Must not touch:
//! what a verdict does (the mapping in `mod.rs`), framing or I/O.

use serde_json::{json, Map, Value};

use crate::protocol::{updated_input, ToolCall};

/// A prefix that names every ACP tool for the policy (`acp__write_text_file`,
/// `acp__execute`), as `mcp__<server>__` names MCP tools.
pub(crate) const TOOL_PREFIX: &str = "acp__";

pub(super) fn str_at<'a>(v: Option<&'a Value>, key: &str) -> Option<&'a str> {
    v?.get(key)?.as_str()
}

/// The `acp` part of a payload: the method, the session, and `extra` fields.
fn acp_part(method: &str, params: Option<&Value>, extra: Value) -> Value {
    let mut part = json!({"method": method, "session_id": str_at(params, "sessionId")});
    if let (Value::Object(p), Value::Object(e)) = (&mut part, extra) {
        p.extend(e);
    }
    part
}

fn context(cwd: Option<&str>) -> Value {
    let mut c = Map::new();
    if let Some(cwd) = cwd {
        c.insert("working_directory".into(), cwd.into());
    }
    Value::Object(c)
}

/// The text of a prompt's text blocks, one block a line (what a rule on prompts reads).
pub(super) fn prompt_text(params: Option<&Value>) -> String {
    let blocks = params
        .and_then(|p| p.get("prompt"))
        .and_then(Value::as_array);
    blocks
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `pre_prompt` payload of a `session/prompt`: the text (`prompt`) and every content
/// block as sent (`prompt_blocks`).
pub(super) fn pre_prompt(params: Option<&Value>, cwd: Option<&str>) -> Value {
    json!({
        "prompt": prompt_text(params),
        "prompt_blocks": params.and_then(|p| p.get("prompt")).cloned().unwrap_or(json!([])),
        "acp": acp_part("session/prompt", params, json!({})),
        "context": context(cwd),
    })
}

/// The `pre_action` payload of an agent's request to the editor (`fs/write_text_file`,
/// `fs/read_text_file`, `terminal/create`): the operation as a tool call.
pub(super) fn editor_op(method: &str, params: Option<&Value>, cwd: Option<&str>) -> Value {
    let p = params.cloned().unwrap_or(Value::Null);
    let (tool, arguments) = match method {
        "fs/write_text_file" => (
            "write_text_file",
            json!({"path": p.get("path"), "content": p.get("content")}),
        ),
        "fs/read_text_file" => (
            "read_text_file",
            json!({"path": p.get("path"), "line": p.get("line"), "limit": p.get("limit")}),
        ),
        _ => {
            // The program and its arguments as one argv: the policy reads a shell script
            // out of `sh -c SCRIPT`. The environment stays out of `arguments` (its values
            // are not paths the command touches).
            let mut argv = vec![p.get("command").cloned().unwrap_or(Value::Null)];
            argv.extend(
                p.get("args")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            let mut args = json!({"command": argv});
            if let Some(cwd) = p.get("cwd").filter(|c| c.is_string()) {
                args["cwd"] = cwd.clone();
            }
            ("terminal_create", args)
        }
    };
    let extra = match method {
        "terminal/create" => json!({"env": p.get("env")}),
        _ => json!({}),
    };
    ToolCall::new(format!("{TOOL_PREFIX}{tool}"), arguments, context(cwd))
        .with("acp", acp_part(method, params, extra))
        .into_payload()
}

/// The `pre_action` payload of a `session/request_permission`: the tool call the agent
/// wants to make, named by its kind (`acp__execute`, `acp__edit`, …). Its arguments are the
/// agent's `rawInput` when it sends one, completed with the paths (and new text) of the
/// request's diffs and locations when it has none of its own: a `rawInput` in the agent's
/// own shape may hide them (codex-acp's patch is `{changes: {PATH: …}}`, and the policy
/// reads no path in a key). Without a `rawInput`, the arguments are what the request shows:
/// those paths, a diff's new text as `content`, and for an `execute` call its title as
/// `command` (ACP has no field for the command; agents such as Gemini CLI put it there).
pub(super) fn permission(params: Option<&Value>, cwd: Option<&str>) -> Value {
    let call = params.and_then(|p| p.get("toolCall"));
    let kind = str_at(call, "kind").unwrap_or("other");
    let shown = shown_arguments(call, kind);
    let arguments = match call.and_then(|c| c.get("rawInput")) {
        Some(Value::Object(raw)) => {
            let mut args = raw.clone();
            let has_path = ["path", "paths"].iter().any(|k| raw.contains_key(*k));
            for (k, v) in shown.as_object().into_iter().flatten() {
                let add = match k.as_str() {
                    "path" | "paths" => !has_path,
                    "content" => !raw.contains_key(k),
                    // The agent's own input says what runs better than a title does.
                    _ => false,
                };
                if add {
                    args.insert(k.clone(), v.clone());
                }
            }
            Value::Object(args)
        }
        _ => shown,
    };
    let options = params.and_then(|p| p.get("options")).cloned();
    let acp = acp_part(
        "session/request_permission",
        params,
        json!({
            "tool_call_id": str_at(call, "toolCallId"),
            "title": str_at(call, "title"),
            "kind": kind,
            "options": options,
        }),
    );
    ToolCall::new(format!("{TOOL_PREFIX}{kind}"), arguments, context(cwd))
        .with("acp", acp)
        .into_payload()
}

/// What a tool call without `rawInput` shows of its arguments.
fn shown_arguments(call: Option<&Value>, kind: &str) -> Value {
    let mut args = Map::new();
    let mut paths: Vec<Value> = Vec::new();
    let contents = call
        .and_then(|c| c.get("content"))
        .and_then(Value::as_array);
    for item in contents.into_iter().flatten() {
        if item.get("type").and_then(Value::as_str) == Some("diff") {
            if let Some(p) = item.get("path").filter(|p| p.is_string()) {
                paths.push(p.clone());
            }
            if let Some(t) = item.get("newText").filter(|t| t.is_string()) {
                args.entry("content").or_insert_with(|| t.clone());
            }
        }
    }
    let locations = call
        .and_then(|c| c.get("locations"))
        .and_then(Value::as_array);
    for loc in locations.into_iter().flatten() {
        if let Some(p) = loc
            .get("path")
            .filter(|p| p.is_string() && !paths.contains(p))
        {
            paths.push(p.clone());
        }
    }
    if paths.len() == 1 {
        args.insert("path".into(), paths.remove(0));
    } else if !paths.is_empty() {
        args.insert("paths".into(), Value::Array(paths));
    }
    if kind == "execute" {
        if let Some(title) = str_at(call, "title") {
            args.insert("command".into(), title.into());
        }
    }
    Value::Object(args)
}

/// The `post_action` payload of a `session/update` that reports a tool call finished
/// (`completed` or `failed`), or `None` for any other update.
pub(super) fn tool_result(params: Option<&Value>, cwd: Option<&str>) -> Option<Value> {
    let update = params?.get("update")?;
    let kind = update.get("sessionUpdate")?.as_str()?;
    let status = update.get("status")?.as_str()?;
    if !matches!(kind, "tool_call" | "tool_call_update")
        || !matches!(status, "completed" | "failed")
    {
        return None;
    }
    let tool_kind = str_at(Some(update), "kind").unwrap_or("other");
    let arguments = update.get("rawInput").cloned().unwrap_or(json!({}));
    let result = json!({
        "status": if status == "completed" { "success" } else { "error" },
        "output": update.get("rawOutput").or(update.get("content")),
    });
    let acp = acp_part(
        "session/update",
        params,
        json!({
            "tool_call_id": str_at(Some(update), "toolCallId"),
            "title": str_at(Some(update), "title"),
        }),
    );
    let call = ToolCall::new(format!("{TOOL_PREFIX}{tool_kind}"), arguments, context(cwd));
    Some(call.with("result", result).with("acp", acp).into_payload())
}

/// The `session/prompt` params with the prompt a harness asked for: `prompt` as text (when
/// it differs from the original text) becomes one text block; otherwise `prompt_blocks`
/// (or `prompt` as an array) replaces the blocks.
pub(super) fn rewritten_prompt(params: Option<&Value>, modified: &Value) -> Result<Value, String> {
    let blocks = match (modified.get("prompt"), modified.get("prompt_blocks")) {
        (Some(Value::String(t)), _) if *t != prompt_text(params) => {
            json!([{"type": "text", "text": t}])
        }
        (_, Some(b @ Value::Array(_))) | (Some(b @ Value::Array(_)), _) => b.clone(),
        (Some(Value::String(_)), None) => return Ok(params.cloned().unwrap_or(json!({}))),
        _ => return Err("it has no \"prompt\" text or \"prompt_blocks\" array".into()),
    };
    let mut p = params
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    p.insert("prompt".into(), blocks);
    Ok(Value::Object(p))
}

/// The params of an editor operation rewritten with the arguments a harness asked for.
pub(super) fn rewritten_op(
    method: &str,
    params: Option<&Value>,
    modified: &Value,
) -> Result<Value, String> {
    let args = updated_input(modified).map_err(|e| e.to_string())?;
    let mut p = params
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let keys: &[&str] = match method {
        "fs/write_text_file" => &["path", "content"],
        "fs/read_text_file" => &["path", "line", "limit"],
        _ => &["cwd"],
    };
    for k in keys {
        if let Some(v) = args.get(*k) {
            p.insert((*k).into(), v.clone());
        }
    }
    if method == "terminal/create" {
        let (command, rest) = match args.get("command") {
            Some(Value::String(line)) => (json!("sh"), json!(["-c", line])),
            Some(Value::Array(argv)) if argv.first().is_some_and(Value::is_string) => {
                (argv[0].clone(), Value::Array(argv[1..].to_vec()))
            }
            _ => return Err("its \"command\" is neither a command line nor an argv".into()),
        };
        p.insert("command".into(), command);
        p.insert("args".into(), rest);
    }
    Ok(Value::Object(p))
}
