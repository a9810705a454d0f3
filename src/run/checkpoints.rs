//! The run's workspace checkpoints: the first taken on a thread of its own while the run
//! prepares (joined before the agent starts), the last once the agent's tree has ended, and
//! what the run changed said in its summary with the command that undoes it.

use std::sync::Arc;

use serde_json::json;

use super::Run;
use crate::checkpoint::Checkpointer;
use crate::protocol::EventType;

/// The first checkpoint, being taken.
pub(super) type First = Option<std::thread::JoinHandle<Result<Option<Checkpointer>, String>>>;

/// The last checkpoint, being taken.
pub(super) type Last = Option<tokio::task::JoinHandle<Option<crate::checkpoint::Summary>>>;

impl Run<'_> {
    /// Starts taking the first checkpoint of the workspace on a thread of its own, the
    /// policy's `[checkpoints]` read there too (none when they cannot be read: the run says
    /// so when it joins).
    pub(super) fn first_checkpoint(&self) -> First {
        // Made now (one `stat` when it is there), so that the floor hides it from the tree.
        if let Some(store) = crate::checkpoint::store::Store::open() {
            let _ = store.create();
        }
        let policy = self.cfg.policy.clone();
        let workspace = self.cfg.workspace.clone();
        let run = self.gate.session_id.clone();
        let agent = std::iter::once(self.cfg.program.to_string_lossy().into_owned())
            .chain(
                self.cfg
                    .args
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned()),
            )
            .collect::<Vec<_>>()
            .join(" ");
        let spawned = std::thread::Builder::new()
            .name("checkpoint".into())
            .spawn(move || {
                let spec = crate::policy::checkpoint_spec(policy.as_deref()).map_err(|e| {
                    format!("the policy's [checkpoints]: {}", crate::error_chain(&e))
                })?;
                Checkpointer::start(&spec, &workspace, &run, &agent)
            });
        spawned.ok()
    }

    /// Waits for the first checkpoint, before the agent starts; says why there is none when
    /// it failed (the run goes on: nothing to undo then).
    pub(super) async fn checkpoints_ready(&mut self, first: First) {
        let Some(first) = first else {
            return;
        };
        let why = match first.join() {
            Ok(Ok(Some(c))) => {
                let not_kept = c.not_kept();
                if !not_kept.is_empty() && !self.cfg.quiet {
                    let named: Vec<String> = not_kept
                        .iter()
                        .map(|(p, size)| format!("{p} ({} MiB)", size >> 20))
                        .collect();
                    let more = format!("and {} more", named.len().saturating_sub(5));
                    eprintln!(
                        "ahp-wrap: checkpoints: not kept, so not undone (larger than [checkpoints] \
                         max_file_mb, untracked): {}",
                        the_first(&named, 5, &more)
                    );
                }
                let _ = self.gate.checkpoints.set(Arc::new(c));
                return;
            }
            Ok(Ok(None)) => return,
            Ok(Err(why)) => why,
            Err(_) => "the checkpoint thread failed".to_owned(),
        };
        let m = format!("checkpoints: none for this run (nothing to undo): {why}");
        if !self.cfg.quiet {
            eprintln!("ahp-wrap: warning: {m}");
        }
        self.notes.push(format!("warning: {m}"));
        let payload = json!({"source": "checkpoints", "message": m});
        self.gate.say(EventType::Error, payload).await;
    }

    /// Starts taking the last checkpoint, once the agent's tree has ended and the floor's
    /// end has put the workspace as it leaves it, on a thread of the runtime's.
    pub(super) fn start_last_checkpoint(&self) -> Last {
        let checkpoints = self.gate.checkpoints.get().cloned()?;
        Some(tokio::task::spawn_blocking(move || checkpoints.end()))
    }

    /// Waits for the last checkpoint and says what the run changed in the workspace with
    /// the command that undoes it.
    pub(super) async fn last_checkpoint(&mut self, last: Last) {
        let Some(last) = last else {
            return;
        };
        let Ok(Some(summary)) = last.await else {
            return;
        };
        if let Some(why) = &summary.failed {
            self.notes.push(format!(
                "warning: checkpoints stopped during the run ({why}): `ahp-wrap undo` goes back \
                 only as far as the last one taken"
            ));
        }
        if let (n @ 1.., Some(why)) = &summary.walks {
            self.notes.push(format!(
                "checkpoints: {n} of them walked the whole workspace, since what changed was not \
                 known ({why})"
            ));
        }
        if !summary.too_large.is_empty() {
            self.notes.push(format!(
                "checkpoints: {} file(s) git does not track were too large to keep ([checkpoints] \
                 max_file_mb): {}",
                summary.too_large.len(),
                the_first(&summary.too_large, 5, "…")
            ));
        }
        for l in &summary.left_out {
            let mut m = format!(
                "checkpoints: {} left out of them: the run created or changed {}{} file(s) there, \
                 which `ahp-wrap undo` does not take back",
                l.dir,
                if l.at_least { "at least " } else { "" },
                l.count
            );
            if !l.named.is_empty() {
                m.push_str(&format!(
                    "; among them executables and start-up files: {}",
                    l.named.join(", ")
                ));
            }
            self.notes.push(m);
        }
        for r in &summary.reversed {
            self.notes.push(reversed(r));
        }
        let c = &summary.changes;
        if c.is_empty() {
            return;
        }
        if !summary.run_later.is_empty() {
            self.notes.push(format!(
                "workspace: files a later command runs, created or changed by this run (no \
                 review looks there; `ahp-wrap undo` takes them back too): {}",
                the_first(&summary.run_later, 10, "…")
            ));
        }
        let m = format!(
            "workspace: this run created {}, changed {} and deleted {} file(s); `ahp-wrap undo` \
             puts them back as they were when it started (`ahp-wrap changes` shows each call's)",
            c.created.len(),
            c.changed.len(),
            c.deleted.len()
        );
        self.notes.push(m);
    }
}

/// The summary's line for a call allowed because the checkpoints keep what it discards:
/// what it was asked, what it discarded (as the next checkpoint found it), the undo.
fn reversed(r: &crate::checkpoint::Reversed) -> String {
    let what = match &r.discarded {
        Some(c) if !c.is_empty() => {
            let mut parts = Vec::new();
            for (n, verb, paths) in [
                (c.deleted.len(), "deleted", &c.deleted),
                (c.changed.len(), "changed", &c.changed),
                (c.created.len(), "created", &c.created),
            ] {
                if n > 0 {
                    parts.push(format!("{verb} {n} ({})", the_first(paths, 3, "…")));
                }
            }
            format!("it {}", parts.join(", "))
        }
        Some(_) => "it changed no file the checkpoints keep".to_owned(),
        None => "what it changed is not known".to_owned(),
    };
    format!(
        "reversible: tool call {} ({}) was allowed since the checkpoints keep what it discards; \
         {what}; `{}` brings it back",
        r.checkpoint, r.what, r.undo
    )
}

/// The first `n` of `items`, comma-separated, then `more` when there are others.
fn the_first(items: &[String], n: usize, more: &str) -> String {
    let mut shown: Vec<&str> = items.iter().take(n).map(String::as_str).collect();
    if items.len() > n {
        shown.push(more);
    }
    shown.join(", ")
}
