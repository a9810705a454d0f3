//! `ahp-wrap restore FILE`: applies the changes a run kept aside from an agent's mixed
//! state file (the instructions it wrote there), or puts back a protected path the agent's
//! tree created and the run moved aside, or applies the changes the tree made to entries of
//! a package cache, once the person has read them.

use std::path::Path;

use crate::exit::{CommandResult, Exit, Failure};
use crate::statefile::aside::{put_back, Moved};
use crate::statefile::key_text;
use crate::statefile::merge::{self, Record};

/// Prints the record's changes and, unless `dry_run`, applies them to the state file and
/// removes the record.
pub fn restore(path: &Path, dry_run: bool) -> CommandResult {
    let fail = |m: String| Failure::new(Exit::Problem, m);
    let text =
        std::fs::read(path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
    if let Ok(moved) = serde_json::from_slice::<Moved>(&text) {
        crate::exit::print(&format!(
            "{} was created during a run and moved aside to {}\n",
            moved.moved.display(),
            moved.held.display()
        ));
        if dry_run {
            return Ok(Exit::OK);
        }
        put_back(path, &moved).map_err(|e| fail(format!("not put back: {e}")))?;
        crate::exit::print(&format!("put back at {}\n", moved.moved.display()));
        return Ok(Exit::OK);
    }
    #[cfg(target_os = "linux")]
    if let Ok(record) = serde_json::from_slice::<crate::floor::caches::Record>(&text) {
        let mut out = format!(
            "{} change(s) to entries of the cache {} (what the run's tree wrote is in {}):\n",
            record.changes.len(),
            record.cache.display(),
            record.held.display()
        );
        for c in &record.changes {
            let how = if c.removed { "removed" } else { "rewritten" };
            out.push_str(&format!("  {} ({how})\n", c.path.display()));
        }
        crate::exit::print(&out);
        if dry_run {
            return Ok(Exit::OK);
        }
        crate::floor::caches::apply(path, &record)
            .map_err(|e| fail(format!("not applied: {e}")))?;
        crate::exit::print(&format!(
            "applied to {} (what it held is in {})\n",
            record.cache.display(),
            record.held.with_extension("before").display()
        ));
        return Ok(Exit::OK);
    }
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
    let failed = merge::apply_to_file(
        file,
        record.format,
        record.lock.as_deref(),
        &record.changes,
        &serde_json::Value::Null,
    )
    .map_err(|e| fail(crate::error_chain(&e)))?;
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
