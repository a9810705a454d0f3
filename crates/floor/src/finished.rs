//! A run's plan finished for the kernel: the private copies of its mixed state files made
//! and its caches' overlays laid (or taken from the mount namespace made ahead), what could
//! not be made said in the run's report, and what the run holds of them until its end.
//! `crates/confine` prepares the confinement from a [`Finished`] plan alone.

#[cfg(target_os = "linux")]
use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
use crate::caches::{self, Laid, Layers};
#[cfg(target_os = "linux")]
use crate::{Plan, Report, Support, Unavailable};

mod copies;
pub use copies::{project_names, Copies, Outcome};

/// What completing a plan needs of the run.
#[cfg(target_os = "linux")]
pub struct Completion<'a> {
    /// What the kernel offers: a copy is bound, and a cache overlaid, only in a mount
    /// namespace of the tree's own.
    pub support: &'a Support,
    /// Where the private copies are made (the run directory's `state`).
    pub state: &'a Path,
    /// The private directory for the caches' layers ([`Plan::for_run`]'s), if it was made.
    pub layers: Option<&'a Path>,
    /// The layers and overlays made ahead for these caches, held by the mount namespace
    /// made at start-up, when they are the ones it made (`NamespaceReceiver::overlays_for`
    /// in `crates/confine`).
    pub ahead: &'a mut dyn FnMut(&[PathBuf]) -> Option<Laid>,
}

/// A plan completed for the kernel ([`Plan::complete`]), with what the run holds for it.
#[cfg(target_os = "linux")]
pub struct Finished {
    plan: Plan,
    copies: Copies,
    layers: Option<Layers>,
}

#[cfg(target_os = "linux")]
impl Plan {
    /// Completes the plan for the kernel: makes the private copies of its mixed state files
    /// ([`Plan::copies`]) and the layers of its caches' overlays ([`Plan::overlays`]), where
    /// the tree has a mount namespace of its own; what cannot be made goes to `report`'s
    /// gaps.
    pub fn complete(mut self, cx: Completion<'_>, report: &mut Report) -> Finished {
        let own_mounts = cx.support.namespaces.is_ok();
        // A copy can be bound only in a mount namespace of the tree's own.
        let copies = match own_mounts && !self.mixed.is_empty() {
            true => {
                let (copies, problems) = Copies::make(&self.mixed, &self.writable, cx.state);
                report.gaps.extend(problems);
                self.copies = copies.binds();
                copies
            }
            false => Copies::default(),
        };
        // A cache is an overlay only in a mount namespace of the tree's own.
        let mut layers = None;
        if own_mounts && !self.caches.is_empty() {
            match self.lay(cx.layers, cx.ahead) {
                Ok((held, overlays, gaps)) => {
                    layers = Some(held);
                    report.gaps.extend(gaps);
                    self.overlays = overlays;
                }
                // Said by the report already when the kernel cannot.
                Err(why) if caches::possible().is_err() => tracing::debug!("floor: {why}"),
                Err(why) => report.gaps.push(format!("caches: written in place: {why}")),
            }
        }
        Finished {
            plan: self,
            copies,
            layers,
        }
    }

    /// The layers of the caches' overlays: those made ahead, whose overlays the agent's mount
    /// namespace made ahead holds, when the plan's caches are those and the agent's process
    /// will join it (it joins the namespaces made ahead with the network part; nothing is to
    /// be staged beneath a cache before its overlay covers it); else made now in `dir`.
    fn lay(
        &self,
        dir: Option<&Path>,
        ahead: &mut dyn FnMut(&[PathBuf]) -> Option<Laid>,
    ) -> Result<Laid, Unavailable> {
        if self.through.is_empty() && self.net.is_some() {
            if let Some(laid) = ahead(&self.caches) {
                return Ok(laid);
            }
        }
        caches::possible()?;
        let dir = dir.ok_or(Unavailable::NoStateDirectory)?;
        caches::make(&self.caches, dir).map_err(|e| Unavailable::CacheLayers {
            dir: dir.to_owned(),
            source: e,
        })
    }
}

#[cfg(target_os = "linux")]
impl Finished {
    /// The plan, completed.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The plan, the copies of its mixed state files (sorted and merged at the run's end)
    /// and its caches' layers (held to be removed with the run).
    pub fn into_parts(self) -> (Plan, Copies, Option<Layers>) {
        (self.plan, self.copies, self.layers)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::statefile::{Format, StateFile, Treatment};

    fn support(namespaces: bool) -> Support {
        Support {
            landlock_abi: 6,
            namespaces: match namespaces {
                true => Ok(()),
                false => Err(Unavailable::InsideAnotherFloor),
            },
            by_apparmor_profile: false,
        }
    }

    /// A mixed state file outside the writable roots gets a copy bound over it only where
    /// the tree has a mount namespace of its own.
    #[test]
    fn a_mixed_state_file_is_copied_only_with_a_mount_namespace() {
        let dir = crate::test_dir();
        let file = dir.path().join(".state.json");
        std::fs::write(&file, "{}").unwrap();
        let plan = Plan {
            mixed: vec![StateFile {
                path: file.clone(),
                format: Format::Json,
                rules: Vec::new(),
                other: Treatment::Own,
                through: None,
                lock: None,
            }],
            ..Plan::default()
        };
        for namespaces in [true, false] {
            let state = dir.path().join(format!("state-{namespaces}"));
            let mut report = Report::default();
            let finished = plan.clone().complete(
                Completion {
                    support: &support(namespaces),
                    state: &state,
                    layers: None,
                    ahead: &mut |_| None,
                },
                &mut report,
            );
            let copies = &finished.plan().copies;
            assert_eq!(copies.len(), usize::from(namespaces), "{copies:?}");
            assert!(copies
                .iter()
                .all(|c| c.file == file && c.copy.starts_with(&state)));
            assert!(report.gaps.is_empty(), "{report:?}");
        }
    }

    /// The overlays made ahead are asked for only when the agent's process joins the
    /// namespace that holds them (a network part, nothing beneath a cache); without them and
    /// without a directory for layers, the caches are written in place, and the report says
    /// so where the kernel could overlay them.
    #[test]
    fn the_overlays_made_ahead_are_asked_for_only_when_the_agent_joins_them() {
        let cache = PathBuf::from("/nonexistent/cache");
        for (net, through, asked) in [
            (true, false, true),
            (false, false, false),
            (true, true, false),
        ] {
            let plan = Plan {
                caches: vec![cache.clone()],
                through: match through {
                    true => vec![cache.join("state")],
                    false => Vec::new(),
                },
                net: net.then(crate::plan::NetPlan::default),
                ..Plan::default()
            };
            let mut report = Report::default();
            let mut was_asked = false;
            let finished = plan.complete(
                Completion {
                    support: &support(true),
                    state: Path::new("/nonexistent/state"),
                    layers: None,
                    ahead: &mut |caches| {
                        assert_eq!(caches, std::slice::from_ref(&cache));
                        was_asked = true;
                        None
                    },
                },
                &mut report,
            );
            assert_eq!(was_asked, asked, "net: {net}, through: {through}");
            assert!(finished.plan().overlays.is_empty());
            let (_, _, layers) = finished.into_parts();
            assert!(layers.is_none());
            let said = report
                .gaps
                .iter()
                .any(|g| g.starts_with("caches: written in place"));
            assert_eq!(said, caches::possible().is_ok(), "{report:?}");
        }
    }
}
