//! A workspace's files read whole, and git run in it: what the undo tests compare before and
//! after.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Every file and symbolic link below `root` but `.git`, sorted: its path, its content (a
/// link's target) and its mode (0 for a link).
pub fn snapshot(root: &Path) -> Vec<(String, Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == ".git" {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                dirs.push(p);
            } else if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.push((rel, t.display().to_string().into_bytes(), 0));
            } else {
                let mode = m.permissions().mode() & 0o7777;
                out.push((rel, std::fs::read(&p).unwrap(), mode));
            }
        }
    }
    out.sort();
    out
}

/// `git ARGS` in `dir` (as a user with a name), which must succeed.
pub fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.email=t@t", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?} in {}", dir.display());
}
