//! Where floor tests keep what the agent must not be able to touch.

use std::path::PathBuf;

/// A directory outside every temp directory (which the floor lets the agent write), for
/// what a floor test must see left alone: the target directory, or, when the checkout itself
/// lies in a temp directory, a directory in the home of the user running the tests.
pub fn outside_temp() -> PathBuf {
    let temp: Vec<PathBuf> = ahp_wrap::floor::plan::temp_dirs()
        .iter()
        .filter_map(|t| t.canonicalize().ok())
        .collect();
    let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ahp-wrap-floor-tests"));
    let candidates = [Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR"))), home];
    for dir in candidates.into_iter().flatten() {
        if std::fs::create_dir_all(&dir).is_err() {
            continue;
        }
        let dir = dir.canonicalize().unwrap();
        if !temp.iter().any(|t| dir.starts_with(t)) {
            return dir;
        }
    }
    panic!("no directory outside the temp directories for the floor tests ({temp:?})");
}
