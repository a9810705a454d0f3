//! `ahp-wrap restore FILE`: applies the changes a run kept aside from an agent's mixed
//! state file (the instructions it wrote there), once the person has read them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::exit::{CommandResult, Exit, Failure};
use crate::statefile::merge::{self, Change};
use crate::statefile::{key_text, Format};

/// A record the run wrote (`run/statefiles.rs`).
#[derive(Debug, Deserialize)]
struct Record {
    file: PathBuf,
    format: Format,
    #[serde(default)]
    lock: Option<PathBuf>,
    changes: Vec<Change>,
}

/// Prints the record's changes and, unless `dry_run`, applies them to the state file and
/// removes the record.
pub fn restore(path: &Path, dry_run: bool) -> CommandResult {
    let fail = |m: String| Failure::new(Exit::Problem, m);
    let text =
        std::fs::read(path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
    let record: Record = serde_json::from_slice(&text).map_err(|e| {
        fail(format!(
            "{} is not a record of changes kept aside by a run: {e}",
            path.display()
        ))
    })?;
    let file = &record.file;
    let mut out = format!(
        "{} change(s) to {}:\n",
        record.changes.len(),
        file.display()
    );
    for c in &record.changes {
        let show = |v: &Option<serde_json::Value>| {
            v.as_ref().map_or("(absent)".to_owned(), |v| v.to_string())
        };
        out.push_str(&format!(
            "  {}: {} -> {}\n",
            key_text(&c.key),
            show(&c.old),
            show(&c.new)
        ));
    }
    crate::exit::print(&out);
    if dry_run {
        return Ok(Exit::OK);
    }
    let _lock = merge::Lock::take(record.lock.as_deref(), Duration::from_secs(2));
    let mut doc = match std::fs::read(file) {
        Ok(b) => merge::parse(&b, record.format, file).map_err(|e| fail(crate::error_chain(&e)))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(e) => return Err(fail(format!("cannot read {}: {e}", file.display()))),
    };
    let failed = merge::apply(&mut doc, &record.changes, &serde_json::Value::Null);
    let bytes =
        merge::serialize(&doc, record.format, file).map_err(|e| fail(crate::error_chain(&e)))?;
    merge::write_atomic(file, &bytes).map_err(|e| fail(crate::error_chain(&e)))?;
    if !failed.is_empty() {
        let keys: Vec<String> = failed.iter().map(|c| key_text(&c.key)).collect();
        return Err(fail(format!(
            "not applied (what lies above them in {} is no longer a table): {}; the record is \
             kept",
            file.display(),
            keys.join(", ")
        )));
    }
    let _ = std::fs::remove_file(path);
    crate::exit::print(&format!("applied to {}\n", file.display()));
    Ok(Exit::OK)
}
