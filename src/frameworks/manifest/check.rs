//! `ahp-wrap shim check FILE`: a manifest, loaded and checked, then tried on the payloads
//! recorded from the real agent (`samples/<Event>.json` beside it): each is mapped to its
//! AHP event, and each decision the event can get is rendered.

use std::path::Path;

use serde_json::{json, Value};

use super::{files_in, load, ManifestShim};
use crate::frameworks::adapter::{CallerReply, Final, Framework, HookContext};

/// What the check found: one line per finding, and whether all is well.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// The lines to print, in order: what loaded, each sample and its renderings, and the
    /// `error:` and `note:` findings.
    pub lines: Vec<String>,
    /// The manifest loaded, samples were found, and every one mapped and rendered.
    pub ok: bool,
}

/// The decisions a check renders on a blocking event.
fn decisions() -> [(&'static str, Final); 4] {
    [
        ("allow", Final::no_opinion()),
        (
            "block",
            Final::Block {
                reason: "REASON".into(),
            },
        ),
        (
            "ask",
            Final::Ask {
                reason: "REASON".into(),
                target: None,
            },
        ),
        (
            "modify",
            Final::Modify {
                modified_payload: json!({"arguments": {"command": "MODIFIED"}}),
            },
        ),
    ]
}

/// Checks the manifest in `file` against the samples in `samples` (else `samples/` beside
/// the file).
pub(crate) fn check(file: &Path, samples: Option<&Path>) -> Report {
    let mut report = Report::default();
    let manifest = match load(file) {
        Ok(m) => m,
        Err(e) => {
            report.lines.push(format!("error: {e}"));
            return report;
        }
    };
    report.lines.push(format!(
        "{}: the {} manifest for {} loads ({} events)",
        file.display(),
        manifest.name,
        manifest.agent,
        manifest.events.len()
    ));
    let dir = samples.map_or_else(
        || file.parent().unwrap_or(Path::new(".")).join("samples"),
        Path::to_owned,
    );
    let shim = ManifestShim::new(manifest);
    let files = files_in(&dir, "json");
    if files.is_empty() {
        report.lines.push(format!(
            "error: no recorded payloads in {} (docs/shims.md says how to record them)",
            dir.display()
        ));
        return report;
    }
    let mut ok = true;
    let mut seen = Vec::new();
    for path in files {
        let hook = hook_of(&path);
        seen.push(hook.clone());
        match sample(&shim, &hook, &path) {
            Ok(lines) => report.lines.extend(lines),
            Err(why) => {
                ok = false;
                report
                    .lines
                    .push(format!("error: {}: {why}", path.display()));
            }
        }
    }
    for event in &shim.manifest().events {
        if !seen.iter().any(|h| h == event.name) {
            report.lines.push(format!(
                "note: no recorded payload for {} (it is not checked)",
                event.name
            ));
        }
    }
    report.ok = ok;
    report
}

/// The hook a sample was recorded from: its file name up to the first dot
/// (`PreToolUse.json`, `PreToolUse.write.json`).
fn hook_of(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.split('.').next().unwrap_or(name).to_owned()
}

/// One sample mapped, and each decision rendered; the lines to print.
fn sample(shim: &ManifestShim, hook: &str, path: &Path) -> Result<Vec<String>, String> {
    let payload = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let cx = HookContext {
        hook,
        cwd: Path::new("/"),
        interactive: false,
    };
    let mapped = shim
        .map(&cx, &payload)
        .map_err(|e| e.to_string())?
        .ok_or("the manifest maps it to no event")?;
    let p = &mapped.payload;
    let what = match p.get("tool_name").and_then(Value::as_str) {
        Some(tool) => format!(" {tool} {}", p["arguments"]),
        None if p.get("prompt").is_some() => format!(" prompt {}", p["prompt"]),
        None => String::new(),
    };
    let mut lines = vec![format!(
        "{}: {hook} -> {}{what}",
        path.display(),
        mapped.event_type.as_str()
    )];
    let decisions = if mapped.event_type.is_blocking() {
        decisions().to_vec()
    } else {
        decisions()[..2].to_vec()
    };
    for (name, verdict) in decisions {
        let r = shim.render(&cx, Some(&mapped), &verdict);
        lines.push(format!("    {name:<6} -> {}", answer(&r)?));
    }
    Ok(lines)
}

/// A rendered answer in one line; stdout that is not one JSON value is an error.
fn answer(r: &CallerReply) -> Result<String, String> {
    let mut parts = Vec::new();
    if !r.stdout.is_empty() {
        let v: Value = serde_json::from_slice(&r.stdout)
            .map_err(|e| format!("an answer's stdout is not JSON: {e}"))?;
        parts.push(format!("stdout {v}"));
    }
    if !r.stderr.is_empty() {
        parts.push(format!(
            "stderr {:?}",
            String::from_utf8_lossy(&r.stderr).trim_end()
        ));
    }
    parts.push(format!("exit {}", r.exit_code));
    Ok(parts.join(", "))
}
