//! What a run did in the directories the checkpoints leave out: counted at its end, the
//! executables and start-up files among them named (none of it is kept).

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{ancestors, times, Manifest};

/// What a run did in one left-out directory: how many files and links it created or
/// changed there (not kept, so not undone), the executables and start-up files among them
/// by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The directory (relative to the workspace).
    pub dir: String,
    /// Files and links created or changed there during the run.
    pub count: u64,
    /// The executables and start-up files among them (at most [`NAMED`]).
    pub named: Vec<String>,
    /// Whether the count stopped at [`LOOK_AT_MOST`] entries.
    pub at_least: bool,
}

/// The most files of a left-out directory [`left_out`] names.
pub(crate) const NAMED: usize = 10;
/// The most entries of a left-out directory [`left_out`] looks at.
pub(crate) const LOOK_AT_MOST: u64 = 200_000;

/// What the run did in each directory of `dirs` (left out of the checkpoints) since `since`
/// (ns since the epoch: an inode's status-change time, which no program sets back): those
/// with a file created or changed. The paths `kept` holds (kept anyway) are not counted.
pub(crate) fn left_out(
    root: &Path,
    dirs: &BTreeSet<String>,
    since: i64,
    kept: &Manifest,
) -> Vec<LeftOut> {
    let mut out = Vec::new();
    for dir in dirs {
        // Inside another counted one: counted there.
        if ancestors(dir).any(|a| dirs.contains(a)) {
            continue;
        }
        // Never through a link the tree put there (a `node_modules` made a link to the
        // home would have the wrapper list the home).
        if !crate::beneath::is_dir(&root.join(dir)).unwrap_or(false) {
            continue;
        }
        let mut found = LeftOut {
            dir: dir.clone(),
            ..LeftOut::default()
        };
        let (mut todo, mut looked) = (vec![(root.join(dir), dir.clone())], 0u64);
        while let Some((path, rel)) = todo.pop() {
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            for e in entries.flatten() {
                looked += 1;
                if looked > LOOK_AT_MOST {
                    found.at_least = true;
                    todo.clear();
                    break;
                }
                let (Ok(ft), Some(name)) =
                    (e.file_type(), e.file_name().to_str().map(str::to_owned))
                else {
                    continue;
                };
                let rel = format!("{rel}/{name}");
                if ft.is_dir() {
                    todo.push((e.path(), rel));
                    continue;
                }
                if kept.contains_key(&rel) {
                    continue;
                }
                let Ok(m) = e.metadata() else {
                    continue;
                };
                if times(&m).1 < since {
                    continue;
                }
                found.count += 1;
                let starts = name.ends_with(".pth")
                    || name == "sitecustomize.py"
                    || name == "usercustomize.py";
                if (starts || (ft.is_file() && m.mode() & 0o111 != 0)) && found.named.len() < NAMED
                {
                    found.named.push(rel);
                }
            }
        }
        if found.count > 0 {
            out.push(found);
        }
    }
    out
}
