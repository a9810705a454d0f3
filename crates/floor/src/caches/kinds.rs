//! What a later tool does with an entry the agent's tree added to a package cache: checks it
//! before using it, so it may land in the cache; or trusts it without a check, so it stays in
//! the run's layer (the tool fetches or builds it again when it needs it). Each rule names the
//! tool's documentation. An entry no rule knows is held: a cache whose tool is unknown is a
//! place a later program may run code from (a browser a test tool downloads, a model file, a
//! cloned hook repository), and the person can let one directory's additions land by naming
//! it in `[floor] writable`.

use std::collections::HashMap;
use std::path::{Component, Path};

/// What becomes of an added entry (and, for a directory, of everything in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Checked by its tool before use (or plain data): merged.
    Merge,
    /// Trusted by its tool without a check: held, for the reason given.
    Hold(&'static str),
    /// A crate's `.crate` file: merged when its checksum is one the registry or the
    /// workspace's lock file recorded before the run ([`Verified`]).
    Crate,
    /// A directory above entries of several kinds: each entry in it decided on its own.
    Descend,
}

/// One rule: the path components a cache entry lies at or beneath (`*` matches one).
struct Rule {
    path: &'static [&'static str],
    kind: Kind,
}

/// Held, for an entry of a cache no rule knows.
pub(super) const UNKNOWN: &str =
    "a cache whose tool ahp-wrap does not know to check what it uses from it";

const RULES: &[Rule] = &[
    // npm (https://docs.npmjs.com/cli/commands/npm-cache): "All data that passes through the
    // cache is fully verified for integrity on both insertion and extraction" (cacache's
    // content is addressed by its hash; its index entries carry the integrity to check).
    Rule {
        path: &[".npm", "_cacache"],
        kind: Kind::Merge,
    },
    Rule {
        path: &[".npm", "_logs"],
        kind: Kind::Merge,
    },
    Rule {
        path: &[".npm", "_update-notifier-last-checked"],
        kind: Kind::Merge,
    },
    // npx (https://docs.npmjs.com/cli/commands/npm-exec): a package not installed locally is
    // "installed to a folder in the npm cache" (`_npx/<hash>`), and a later `npx` of the same
    // spec runs what it finds there without fetching or checking it again.
    Rule {
        path: &[".npm", "_npx"],
        kind: Kind::Hold("packages npx installed, which a later npx runs without a check"),
    },
    // Cargo (https://doc.rust-lang.org/cargo/guide/cargo-home.html): `registry/index` is the
    // registry's metadata, revalidated with the registry when online (its ETag);
    // `registry/cache` holds the downloaded `.crate` files, which cargo checks against the
    // index's checksum when it downloads them but not when it finds them there;
    // `registry/src` holds their extracted sources, marked `.cargo-ok` and built as they are.
    Rule {
        path: &[".cargo", "registry", "index"],
        kind: Kind::Merge,
    },
    Rule {
        path: &[".cargo", "registry", "cache", "*", "*"],
        kind: Kind::Crate,
    },
    Rule {
        path: &[".cargo", "registry", "src"],
        kind: Kind::Hold(
            "extracted crate sources, which cargo builds later without a check (.cargo-ok)",
        ),
    },
    // `git/db` holds bare repositories, whose objects libgit2 (cargo's git) checks against
    // their names when it reads them; `git/checkouts` holds working trees made from them,
    // used as they are.
    Rule {
        path: &[".cargo", "git", "db"],
        kind: Kind::Merge,
    },
    Rule {
        path: &[".cargo", "git", "checkouts"],
        kind: Kind::Hold("git checkouts, which cargo builds later without a check"),
    },
    // Go (https://go.dev/ref/mod#module-cache): `cache/download` holds the modules' zip files
    // and their hashes, checked against go.sum and the checksum database; the extracted module
    // directories beside it are used as they are.
    Rule {
        path: &["go", "pkg", "mod", "cache", "download"],
        kind: Kind::Merge,
    },
    Rule {
        path: &["go", "pkg", "mod"],
        kind: Kind::Hold("extracted Go modules, which the go command builds without a check"),
    },
    // Go's build cache (https://pkg.go.dev/cmd/go#hdr-Build_and_test_caching): compiled
    // packages, linked into later builds as they are.
    Rule {
        path: &[".cache", "go-build"],
        kind: Kind::Hold("compiled Go packages, which later builds link without a check"),
    },
    // pip (https://pip.pypa.io/en/stable/topics/caching/): the HTTP cache holds responses,
    // whose files pip checks against the hashes the index gives; `wheels` holds wheels pip
    // built from source, installed later as they are.
    Rule {
        path: &[".cache", "pip", "http-v2"],
        kind: Kind::Merge,
    },
    Rule {
        path: &[".cache", "pip", "http"],
        kind: Kind::Merge,
    },
    Rule {
        path: &[".cache", "pip", "selfcheck"],
        kind: Kind::Merge,
    },
    Rule {
        path: &[".cache", "pip", "wheels"],
        kind: Kind::Hold("wheels pip built, which it installs later without a check"),
    },
    // Maven (https://maven.apache.org/guides/introduction/introduction-to-repositories.html):
    // an artifact in the local repository is used without checking its checksum again.
    Rule {
        path: &[".m2", "repository"],
        kind: Kind::Hold("Maven artifacts, which later builds use without a check"),
    },
];

/// What becomes of the entry at `path` (absolute: the cache joined with the entry's path in
/// it): the most specific rule it lies at or beneath; `Descend` where it lies above a rule's
/// path; else held as [`UNKNOWN`].
pub(super) fn kind(path: &Path) -> Kind {
    let parts: Vec<&str> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    let mut best: Option<(usize, Kind)> = None;
    let mut above = false;
    for rule in RULES {
        let m = rule.path.len();
        for i in 0..parts.len() {
            let there = &parts[i..];
            let n = there.len().min(m);
            let agrees = (0..n).all(|k| rule.path[k] == "*" || rule.path[k] == there[k]);
            if !agrees {
                continue;
            }
            if there.len() >= m {
                if best.is_none_or(|(len, _)| m > len) {
                    best = Some((m, rule.kind));
                }
            } else {
                above = true;
            }
        }
    }
    match best {
        // A rule's path with a more specific one beneath it (`go/pkg/mod` above
        // `go/pkg/mod/cache/download`) is descended into.
        Some((_, k)) if above && k != Kind::Crate => Kind::Descend,
        Some((_, k)) => k,
        None if above => Kind::Descend,
        None => Kind::Hold(UNKNOWN),
    }
}

/// The checksums a `.crate` file may have to land: those recorded before the run.
#[derive(Debug, Clone, Default)]
pub struct Verified {
    /// `name-version` to the SHA-256 (hex) the workspace's `Cargo.lock` recorded when the run
    /// started.
    pub locked: HashMap<String, String>,
}

impl Verified {
    /// The checksums of the registry packages the lock file `text` lists.
    pub fn from_lock(text: &str) -> Verified {
        let mut locked = HashMap::new();
        if let Ok(doc) = text.parse::<toml::Table>() {
            let packages = doc.get("package").and_then(|p| p.as_array());
            for p in packages.into_iter().flatten() {
                let get = |k: &str| p.get(k).and_then(|v| v.as_str());
                if let (Some(name), Some(version), Some(sum)) =
                    (get("name"), get("version"), get("checksum"))
                {
                    locked.insert(format!("{name}-{version}"), sum.to_ascii_lowercase());
                }
            }
        }
        Verified { locked }
    }

    /// Whether the `.crate` file `file` (`registry/cache/<registry>/<name>-<version>.crate` in
    /// the cache `cache`, SHA-256 `sum`) has a checksum recorded before the run: in the lock
    /// file, or in the registry's index as the cache held it (`lower`, the cache itself,
    /// which the tree never wrote).
    pub fn knows(&self, lower: &Path, registry: &str, file: &str, sum: &str) -> bool {
        let Some(stem) = file.strip_suffix(".crate") else {
            return false;
        };
        if self.locked.get(stem).is_some_and(|s| s == sum) {
            return true;
        }
        // `name-version`: the version starts at the first `-` followed by a digit.
        let Some(at) = stem
            .char_indices()
            .find(|&(i, c)| c == '-' && stem[i + 1..].starts_with(|d: char| d.is_ascii_digit()))
            .map(|(i, _)| i)
        else {
            return false;
        };
        let (name, version) = (&stem[..at], &stem[at + 1..]);
        let entry = lower
            .join("index")
            .join(registry)
            .join(".cache")
            .join(index_path(name));
        std::fs::read(entry).is_ok_and(|b| index_checksum(&b, version).is_some_and(|s| s == sum))
    }
}

/// Where the registry index keeps `name` (<https://doc.rust-lang.org/cargo/reference/registry-index.html#index-files>).
fn index_path(name: &str) -> String {
    let n = name.to_ascii_lowercase();
    match n.len() {
        1 => format!("1/{n}"),
        2 => format!("2/{n}"),
        3 => format!("3/{}/{n}", &n[..1]),
        _ => format!("{}/{}/{n}", &n[..2], &n[2..4]),
    }
}

/// The checksum cargo's cached index file `bytes` gives `version`: a version byte and a
/// 4-byte index version, then NUL-separated strings: the registry's revision, then a
/// version and its JSON entry, in turn (cargo's `index/cache.rs`).
fn index_checksum(bytes: &[u8], version: &str) -> Option<String> {
    let mut parts = bytes.get(5..)?.split(|b| *b == 0).skip(1);
    while let (Some(v), Some(json)) = (parts.next(), parts.next()) {
        if v == version.as_bytes() {
            let entry: serde_json::Value = serde_json::from_slice(json).ok()?;
            return entry["cksum"].as_str().map(str::to_ascii_lowercase);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_is_decided_by_the_most_specific_rule() {
        let k = |p: &str| kind(Path::new(p));
        assert_eq!(k("/h/.npm/_cacache/content-v2/sha512/ab/cd"), Kind::Merge);
        assert!(matches!(
            k("/h/.npm/_npx/0123/node_modules/x"),
            Kind::Hold(_)
        ));
        assert!(matches!(k("/h/.npm/_npx"), Kind::Hold(_)));
        assert_eq!(k("/h/.cargo/registry"), Kind::Descend);
        assert_eq!(k("/h/.cargo/registry/cache"), Kind::Descend);
        assert_eq!(
            k("/h/.cargo/registry/cache/index.crates.io-1/x-1.0.crate"),
            Kind::Crate
        );
        assert!(matches!(
            k("/h/.cargo/registry/src/index.crates.io-1/x-1.0"),
            Kind::Hold(_)
        ));
        assert_eq!(k("/h/.cargo/registry/index/x/.cache/3/s/syn"), Kind::Merge);
        assert_eq!(k("/h/go/pkg/mod"), Kind::Descend);
        assert_eq!(k("/h/go/pkg/mod/cache/download/x/@v/v1.zip"), Kind::Merge);
        assert!(matches!(k("/h/go/pkg/mod/example.com/x@v1"), Kind::Hold(_)));
        assert_eq!(k("/h/.cache"), Kind::Descend);
        assert_eq!(k("/h/.cache/pip/http-v2/a/b"), Kind::Merge);
        assert_eq!(
            k("/h/.cache/ms-playwright/chromium-1/chrome"),
            Kind::Hold(UNKNOWN)
        );
    }

    #[test]
    fn a_crate_lands_only_with_a_checksum_recorded_before_the_run() {
        let t = crate::test_dir();
        let lower = t.path().join("registry");
        let entry = lower.join("index/reg-1/.cache/se/rd/serde");
        std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
        let mut cache = vec![3u8, 2, 0, 0, 0];
        cache.extend(b"etag\0");
        cache.extend(b"1.0.1\0{\"name\":\"serde\",\"vers\":\"1.0.1\",\"cksum\":\"AA11\"}\0");
        std::fs::write(&entry, cache).unwrap();
        let lock = "[[package]]\nname = \"itoa\"\nversion = \"1.0.0\"\nsource = \"registry+x\"\n\
                    checksum = \"bb22\"\n";
        let v = Verified::from_lock(lock);
        assert!(
            v.knows(&lower, "reg-1", "serde-1.0.1.crate", "aa11"),
            "from the index"
        );
        assert!(
            !v.knows(&lower, "reg-1", "serde-1.0.1.crate", "ff00"),
            "forged"
        );
        assert!(
            v.knows(&lower, "reg-1", "itoa-1.0.0.crate", "bb22"),
            "from the lock file"
        );
        assert!(
            !v.knows(&lower, "reg-1", "itoa-1.0.1.crate", "bb22"),
            "another version"
        );
        assert!(
            !v.knows(&lower, "reg-1", "serde-1.0.1", "aa11"),
            "not a .crate"
        );
    }
}
