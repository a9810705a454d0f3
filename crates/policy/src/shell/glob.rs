//! Pathname expansion against the real file system, as bash does it (no `globstar`, no
//! `dotglob`): what `cat ~/.ss?/id_*` will actually open.

use std::path::{Path, PathBuf};

/// Most paths one pattern may expand to; past it the rest is not looked at (the pattern
/// itself is still checked as a path).
const MAX_MATCHES: usize = 256;

/// Most directory entries read for one pattern.
const MAX_ENTRIES: usize = 4_096;

/// Expands `pattern` (metacharacters active, quoted ones escaped with `\`) relative to `cwd`.
/// Returns no paths when nothing matches, or when the file system is not to be consulted.
pub(super) fn expand(pattern: &str, cwd: &Path, use_fs: bool) -> Vec<String> {
    if !use_fs {
        return Vec::new();
    }
    let absolute = pattern.starts_with('/');
    let mut candidates: Vec<(PathBuf, String)> = vec![(
        if absolute {
            PathBuf::from("/")
        } else {
            cwd.to_path_buf()
        },
        if absolute {
            "/".to_owned()
        } else {
            String::new()
        },
    )];
    let mut budget = MAX_ENTRIES;
    let segments: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let mut next = Vec::new();
        if !has_meta(seg) {
            let lit = unescape(seg);
            for (dir, shown) in candidates {
                let p = dir.join(&lit);
                if last || p.is_dir() {
                    next.push((p, join(&shown, &lit)));
                }
            }
        } else {
            let Ok(m) = globset::GlobBuilder::new(seg)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map(|g| g.compile_matcher())
            else {
                return Vec::new();
            };
            let hidden_ok = seg.starts_with('.') || seg.starts_with("\\.");
            for (dir, shown) in candidates {
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    if budget == 0 {
                        break;
                    }
                    budget -= 1;
                    let name = entry.file_name();
                    let Some(name) = name.to_str() else { continue };
                    if name.starts_with('.') && !hidden_ok {
                        continue;
                    }
                    if m.is_match(name) {
                        let p = dir.join(name);
                        if last || p.is_dir() {
                            next.push((p, join(&shown, name)));
                        }
                    }
                }
            }
        }
        next.sort();
        next.truncate(MAX_MATCHES);
        candidates = next;
        if candidates.is_empty() {
            return Vec::new();
        }
    }
    candidates
        .into_iter()
        .filter(|(p, _)| p.symlink_metadata().is_ok())
        .map(|(_, shown)| shown)
        .collect()
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else if base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}

fn has_meta(seg: &str) -> bool {
    let mut escaped = false;
    for c in seg.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if matches!(c, '*' | '?' | '[') {
            return true;
        }
    }
    false
}

fn unescape(seg: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for c in seg.chars() {
        if !escaped && c == '\\' {
            escaped = true;
            continue;
        }
        escaped = false;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_real_files_like_bash() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join(".ssh")).unwrap();
        std::fs::write(base.join(".ssh/id_rsa"), "k").unwrap();
        std::fs::write(base.join(".ssh/id_rsa.pub"), "k").unwrap();
        std::fs::write(base.join("a.txt"), "").unwrap();
        let abs = format!("{}/.ss?/id_*", base.display());
        let got = expand(&abs, Path::new("/"), true);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].ends_with("/.ssh/id_rsa"));
        // `*` does not match a leading dot; a quoted `*` is literal.
        assert_eq!(expand("*", &base, true), ["a.txt"]);
        assert!(expand("\\*", &base, true).is_empty());
        assert!(expand("*", &base, false).is_empty());
    }
}
