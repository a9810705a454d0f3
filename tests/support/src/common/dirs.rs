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
    let candidates = [Some(crate::target_tmpdir()), home];
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

/// A fresh directory (prefixed `prefix`) under [`outside_temp`], its path canonical, holding
/// `files` (each path relative to it, parents made) with their contents and the directories
/// `dirs`. The directory goes when the guard is dropped.
pub fn outside_tree(
    prefix: &str,
    dirs: &[&str],
    files: &[(&str, &str)],
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(outside_temp())
        .unwrap();
    let root = dir.path().canonicalize().unwrap();
    for d in dirs {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for (path, content) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    (dir, root)
}
