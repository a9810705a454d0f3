//! The end of a run's floor: the kernel's and the network's refusals counted, the agent's
//! mixed state files sorted, what the tree added to the caches merged (and what it changed
//! there kept aside), and protected paths it created moved aside; each said and audited.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::super::{Run, RunGuard};
use crate::floor;
use crate::protocol::EventType;

/// The caches whose additions the run has still to merge once the rest of its floor has
/// ended. Their merge never writes in the workspace (the plan overlays no cache beneath a
/// writable root, and binds a writable root beneath a cache through its overlay): the last
/// checkpoint is taken while it runs.
#[derive(Default)]
pub(in crate::run) struct Unmerged {
    #[cfg(target_os = "linux")]
    overlays: Vec<floor::plan::Overlay>,
    /// What a `.crate` file's checksum is checked against.
    #[cfg(target_os = "linux")]
    verified: floor::caches::Verified,
}

/// Where kept-aside changes go: `quarantine/` in the user's state directory for ahp-wrap.
pub(super) fn quarantine_dir() -> Option<PathBuf> {
    crate::termlog::state_dir().map(|d| d.join("quarantine"))
}

impl Run<'_> {
    /// The kernel's refusals, counted (each kind was audited as it came); the network's
    /// count; and protected paths that did not exist when the agent started (nothing could be
    /// bound over them) and exist now: said and audited.
    /// Returns the caches whose additions are still to be merged ([`Self::merge_caches`]).
    pub(in crate::run) async fn floor_after_end(&mut self, held: &mut RunGuard<'_>) -> Unmerged {
        #[cfg(target_os = "linux")]
        if let Some(watching) = held.denials.take() {
            let refusals = watching.finish().await;
            if refusals.total > 0 {
                let shown: Vec<String> = refusals.kept.iter().take(5).map(|d| d.line()).collect();
                let more = refusals.total.saturating_sub(shown.len() as u64);
                let m = format!(
                    "floor: the kernel refused {} act(s) of the agent's tree: {}{} (each kind \
                     is in the audit log)",
                    refusals.total,
                    shown.join("; "),
                    if more > 0 {
                        format!("; and {more} more")
                    } else {
                        String::new()
                    }
                );
                tracing::info!("{m}");
                self.notes.push(m);
            }
        }
        if let Some(net) = &held.net {
            let refused = net
                .egress
                .refused
                .load(std::sync::atomic::Ordering::Relaxed);
            let allowed = net
                .egress
                .allowed
                .load(std::sync::atomic::Ordering::Relaxed);
            #[cfg(target_os = "linux")]
            let bridged = net
                .counts
                .bridged
                .load(std::sync::atomic::Ordering::Relaxed);
            #[cfg(not(target_os = "linux"))]
            let bridged = 0;
            let m = format!(
                "network floor: {allowed} connection(s) to the outside (through the proxy or by \
                 name), {bridged} to this machine's loopback, {refused} refused (each refusal is in the audit log)"
            );
            tracing::info!("{m}");
            if refused > 0 {
                self.notes.push(m);
            }
            let injection = net.egress.injection.as_ref();
            if let Some(counts) = injection.and_then(|i| i.counts.lock().ok()) {
                for (name, c) in counts.iter() {
                    let hosts: Vec<&str> = c.hosts.iter().map(String::as_str).collect();
                    let mut m = format!(
                        "credentials: {name}'s value put on {} request(s) to {}",
                        c.injected,
                        if hosts.is_empty() {
                            "no host".into()
                        } else {
                            hosts.join(", ")
                        }
                    );
                    if c.refused > 0 {
                        m.push_str(&format!(
                            "; {} attempt(s) to send it elsewhere refused (in the audit log)",
                            c.refused
                        ));
                    }
                    self.notes.push(m);
                }
            }
            if let Some(untrusted) = injection.and_then(|i| i.untrusted.lock().ok()) {
                for (host, n) in untrusted.iter() {
                    self.notes.push(format!(
                        "warning: credentials: {n} connection(s) to {host} did not complete TLS \
                         with the run's certificate authority (a program that ignores \
                         SSL_CERT_FILE and the like, or pins the host's certificate, cannot use \
                         a credential there: docs/floor.md, \"Credentials the agent uses but \
                         never reads\")"
                    ));
                }
            }
            #[cfg(target_os = "linux")]
            {
                use std::sync::atomic::Ordering::Relaxed;
                let published = &net.egress.published;
                let (ports, carried) = (
                    published.ports.load(Relaxed),
                    published.connections.load(Relaxed),
                );
                if ports > 0 {
                    self.notes.push(format!(
                        "network floor: {ports} listener(s) of the tree published on this \
                         machine's loopback, {carried} connection(s) carried to them"
                    ));
                }
                if let Ok(taken) = published.taken.lock() {
                    self.notes
                        .extend(taken.iter().map(|m| format!("warning: {m}")));
                }
            }
        }
        let Some(Ok(floor)) = &held.floor else {
            return Unmerged::default();
        };
        let workspace = floor.plan.writable.first().cloned().unwrap_or_default();
        let outcomes = floor.copies.finish(
            &crate::floor::finished::project_names(&workspace),
            quarantine_dir().as_deref(),
        );
        for outcome in outcomes {
            self.say_state_file(outcome).await;
        }
        let appeared = floor.plan.appeared();
        if !appeared.is_empty() {
            let quarantine = quarantine_dir();
            for found in appeared {
                self.move_aside(&found, quarantine.as_deref()).await;
            }
        }
        #[cfg(target_os = "linux")]
        return Unmerged {
            overlays: floor.plan.overlays.clone(),
            verified: floor
                .lock_at_start
                .as_deref()
                .map(floor::caches::Verified::from_lock)
                .unwrap_or_default(),
        };
        #[cfg(not(target_os = "linux"))]
        Unmerged::default()
    }

    /// Moves a protected path the agent's tree created (absent at the start, so the floor
    /// could not bind it), or a link it made on the way to one, into the quarantine, and says
    /// so at exit and in the audit log. A link is moved as a link: what it points at (the
    /// user's own `~/.claude`, say) is never touched.
    async fn move_aside(&mut self, found: &floor::plan::Appeared, quarantine: Option<&Path>) {
        use crate::statefile::aside;
        let path = found.moved();
        let shown = path.display();
        let what = match found {
            floor::plan::Appeared::Path(_) => format!("{shown} was created during the run"),
            floor::plan::Appeared::Link { protected, .. } => format!(
                "{shown} was made a symbolic link during the run, on the way to {} (its \
                 target{} is not touched)",
                protected.display(),
                crate::beneath::Entry::of(path)
                    .and_then(|e| e
                        .link_target()
                        .map_err(|source| crate::beneath::Refused::Io {
                            path: path.to_owned(),
                            source,
                        }))
                    .map(|t| format!(", {},", t.display()))
                    .unwrap_or_default()
            ),
        };
        let moved = quarantine
            .ok_or_else(|| "no state directory for a quarantine".to_owned())
            .and_then(|q| aside::move_aside(path, q).map_err(|e| e.to_string()));
        let (m, record) = match &moved {
            Ok(record) => (
                format!(
                    "floor: {what}, where a later session would obey it; moved aside (to put \
                     it back: ahp-wrap restore {})",
                    record.display()
                ),
                Some(record.display().to_string()),
            ),
            Err(why) => (
                format!(
                    "floor: {what}, where a later session would obey it, and is left in place: \
                     it could not be moved aside ({why})"
                ),
                None,
            ),
        };
        self.notes.push(format!("warning: {m}"));
        let payload = json!({
            "source": "floor",
            "message": m,
            "path": shown.to_string(),
            "record": record,
        });
        self.gate.say(EventType::Error, payload).await;
    }

    /// Adds what the tree added to each cache, on a thread of the runtime's (while the last
    /// checkpoint is taken on another); keeps aside (said at exit, audited) what it changed
    /// there.
    pub(in crate::run) async fn merge_caches(&mut self, unmerged: Unmerged) {
        #[cfg(target_os = "linux")]
        {
            if unmerged.overlays.is_empty() {
                return;
            }
            let quarantine = quarantine_dir();
            let verified = unmerged.verified;
            let merging = tokio::task::spawn_blocking(move || {
                let merge = |o: floor::plan::Overlay| {
                    let merged = floor::caches::merge(&o, quarantine.as_deref(), &verified);
                    (o.cache, merged)
                };
                unmerged.overlays.into_iter().map(merge).collect::<Vec<_>>()
            });
            match merging.await {
                Ok(merged) => {
                    for (cache, merged) in merged {
                        self.say_merged(&cache, merged).await;
                    }
                }
                Err(e) => {
                    let m = format!("floor: the caches' merge failed ({e}): what the tree added to them is lost");
                    self.notes.push(format!("warning: {m}"));
                    let payload = json!({"source": "floor", "message": m});
                    self.gate.say(EventType::Error, payload).await;
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = unmerged;
    }

    /// Says what became of one cache's merge.
    #[cfg(target_os = "linux")]
    async fn say_merged(&mut self, cache: &Path, merged: std::io::Result<floor::caches::Merged>) {
        let shown = cache.display();
        let merged = match merged {
            Ok(m) => m,
            Err(e) => {
                let m = format!("floor: what the tree added to the cache {shown} is lost: {e}");
                self.notes.push(format!("warning: {m}"));
                let payload = json!({"source": "floor", "message": m, "cache": shown.to_string()});
                self.gate.say(EventType::Error, payload).await;
                return;
            }
        };
        tracing::info!(
            "floor: {} new entries added to the cache {shown}",
            merged.added
        );
        if !merged.held.is_empty() {
            self.say_held(cache, &merged.held).await;
        }
        if merged.kept.is_empty() && merged.lost.is_empty() {
            return;
        }
        let changed: Vec<String> = merged
            .kept
            .iter()
            .map(|c| {
                let how = if c.removed { "removed" } else { "changed" };
                format!("{} ({how})", c.path.display())
            })
            .collect();
        let shown_changes: Vec<&str> = changed.iter().take(3).map(String::as_str).collect();
        let more = changed.len().saturating_sub(shown_changes.len());
        let mut m = format!(
            "floor: the tree changed {} entr{} the cache {shown} had before the run: {}{}; \
             not applied",
            changed.len(),
            if changed.len() == 1 { "y" } else { "ies" },
            shown_changes.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
        );
        if let Some(record) = &merged.record {
            m.push_str(&format!(
                " (kept aside; to apply: ahp-wrap restore {})",
                record.display()
            ));
        }
        if !merged.lost.is_empty() {
            m.push_str(&format!("; lost: {}", merged.lost.join("; ")));
        }
        self.notes.push(m.clone());
        let payload = json!({
            "source": "floor",
            "message": m,
            "cache": shown.to_string(),
            "added": merged.added,
            "changed": changed,
            "record": merged.record,
        });
        self.gate.say(EventType::Error, payload).await;
    }

    /// Says which entries the tree added to `cache` were not added to it (a later tool would
    /// use them without a check), and why: at exit and in the audit log.
    #[cfg(target_os = "linux")]
    async fn say_held(&mut self, cache: &Path, held: &[(std::path::PathBuf, &'static str)]) {
        // Grouped by why, each group by its first two components (`_npx/0a1b…`).
        let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
        for (path, why) in held {
            let short: std::path::PathBuf = path.components().take(2).collect();
            let short = short.display().to_string();
            match groups.iter_mut().find(|(w, _)| w == why) {
                Some((_, paths)) if !paths.contains(&short) => paths.push(short),
                Some(_) => {}
                None => groups.push((why, vec![short])),
            }
        }
        let said: Vec<String> = groups
            .iter()
            .map(|(why, paths)| {
                let more = paths.len().saturating_sub(3);
                let mut s = paths.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
                if more > 0 {
                    s.push_str(&format!(" and {more} more"));
                }
                format!("{s} ({why})")
            })
            .collect();
        let m = format!(
            "floor: {} entr{} the tree added to the cache {} not kept, since a later tool would \
             use {} without a check: {}; its tool makes them again when it needs them (to let a \
             directory's additions land, name it in [floor] writable: docs/floor.md, \"Caches\")",
            held.len(),
            if held.len() == 1 { "y" } else { "ies" },
            cache.display(),
            if held.len() == 1 { "it" } else { "them" },
            said.join("; ")
        );
        self.notes.push(m.clone());
        let list: Vec<String> = held.iter().map(|(p, _)| p.display().to_string()).collect();
        let payload = json!({
            "source": "floor",
            "message": m,
            "cache": cache.display().to_string(),
            "held": list,
        });
        self.gate.say(EventType::Error, payload).await;
    }

    /// Says what became of the agent's changes to one mixed state file: in the log when all
    /// were merged; at exit and in the audit log when some were kept aside or could not be
    /// merged (the person's choices must not vanish without a word).
    async fn say_state_file(&mut self, o: crate::floor::finished::Outcome) {
        let file = o.file.display().to_string();
        if !o.merged.is_empty() {
            tracing::info!(
                "floor: merged the agent's changes to its own keys in {file}: {}",
                o.merged.join(", ")
            );
        }
        let restore = |q: &Path| format!("ahp-wrap restore {}", q.display());
        let m = match (&o.failed, o.kept.is_empty()) {
            (Some(why), _) => format!(
                "floor: the agent's changes to {file} could not be merged ({why}); {}",
                match &o.quarantine {
                    Some(q) => format!("its copy is kept at {}", q.display()),
                    None => "its copy is lost (no state directory for a quarantine)".to_owned(),
                }
            ),
            (None, true) => return,
            (None, false) => format!(
                "floor: {} change(s) the agent made to instructions in {file} {}: {}; {}",
                o.kept.len(),
                if o.in_place {
                    "were undone at the end of the run"
                } else {
                    "were not merged"
                },
                o.kept.join(", "),
                match &o.quarantine {
                    Some(q) => format!("kept at {} (to apply them: {})", q.display(), restore(q)),
                    None => "not kept (no state directory for a quarantine)".to_owned(),
                }
            ),
        };
        self.notes.push(format!("warning: {m}"));
        let payload = json!({
            "source": "floor",
            "message": m,
            "file": file,
            "merged": o.merged,
            "kept": o.kept,
            "quarantine": o.quarantine,
        });
        self.gate.say(EventType::Error, payload).await;
    }
}
