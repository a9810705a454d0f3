//! The directories the floor made for a run (the agent's missing state directories and
//! caches, so that a rule has a directory to hold on to): recorded as they are made, and
//! removed at the run's end when they are still empty, so that a run leaves no empty
//! directory the user did not have.
//!
//! Kept for the process, not in the plan: a run makes them twice over, once for the mount
//! namespace made ahead ([`super::caches_ahead`]) and once in [`super::Plan::new`], where the
//! first ones are already there.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The directories made, each after its parent.
static MADE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Records `dir` as made by the floor.
fn record(dir: &Path) {
    if let Ok(mut made) = MADE.lock() {
        made.push(dir.to_owned());
    }
}

/// Makes `dir`, whose parent exists; recorded when this made it.
pub(super) fn make(dir: &Path) {
    if std::fs::create_dir(dir).is_ok() {
        record(dir);
    }
}

/// Makes `dir` and its missing parents, each recorded.
pub(super) fn make_all(dir: &Path) {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && std::fs::symlink_metadata(d).is_err())
        .collect();
    for d in missing.into_iter().rev() {
        if std::fs::create_dir(d).is_err() {
            return;
        }
        record(d);
    }
}

/// Removes the directories the floor made that are still empty, deepest first (a parent
/// made for a state directory goes with it), and forgets them all; returns those removed.
/// Only empty directories are removed (`rmdir`): whatever the agent left in one keeps it.
pub fn remove_empty() -> Vec<PathBuf> {
    remove(take())
}

/// The directories made so far, forgotten.
fn take() -> Vec<PathBuf> {
    match MADE.lock() {
        Ok(mut made) => std::mem::take(&mut *made),
        Err(_) => Vec::new(),
    }
}

/// Of `made` (each after its parent), removes those that are empty directories, the last
/// made first.
fn remove(made: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for dir in made.into_iter().rev() {
        let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        if is_dir && std::fs::remove_dir(&dir).is_ok() {
            removed.push(dir);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_made_goes_when_empty_and_stays_when_not() {
        let dir = tempfile::tempdir().unwrap();
        let there = dir.path().join("there");
        std::fs::create_dir(&there).unwrap();
        make(&there);
        let state = dir.path().join(".local/share/agent");
        make_all(&state);
        let cache = dir.path().join(".npm");
        make(&cache);
        let used = dir.path().join(".cache");
        make(&used);
        std::fs::write(used.join("kept"), "").unwrap();
        assert!(state.is_dir() && cache.is_dir());
        // Only this test's: the plan's tests make directories in this process too.
        let ours = take().into_iter().filter(|d| d.starts_with(dir.path()));
        let removed = remove(ours.collect());
        assert!(
            removed.contains(&cache) && removed.contains(&state),
            "{removed:?}"
        );
        assert!(
            !dir.path().join(".local").exists(),
            "its parents made with it go too"
        );
        assert!(there.is_dir(), "what was there before stays");
        assert!(used.join("kept").exists(), "what holds something stays");
    }
}
