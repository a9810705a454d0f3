//! The crates' layers, `unsafe` code kept in confine, and every declared dependency used.

use std::collections::BTreeSet;
use std::path::Path;

use super::collect;

/// The workspace's crates from the bottom up, each with its folder and the crates of ours
/// it may depend on (`[dependencies]` and `[dev-dependencies]`), each listed before it.
const CRATES: &[(&str, &str, &[&str])] = &[
    ("ahp-wrap-wire", "crates/wire", &[]),
    ("ahp-wrap-floor", "crates/floor", &[]),
    ("ahp-wrap-process", "crates/process", &["ahp-wrap-floor"]),
    (
        "ahp-wrap-confine",
        "crates/confine",
        &["ahp-wrap-floor", "ahp-wrap-process"],
    ),
    (
        "ahp-wrap-policy",
        "crates/policy",
        &["ahp-wrap-floor", "ahp-wrap-wire"],
    ),
    (
        "ahp-wrap-adapter",
        "crates/adapter",
        &["ahp-wrap-floor", "ahp-wrap-wire"],
    ),
    (
        "ahp-wrap-shim-claude-code",
        "shims/claude-code",
        &["ahp-wrap-adapter"],
    ),
    ("ahp-wrap-shim-codex", "shims/codex", &["ahp-wrap-adapter"]),
    (
        "ahp-wrap-shim-copilot",
        "shims/copilot",
        &["ahp-wrap-adapter"],
    ),
    (
        "ahp-wrap-shim-gemini",
        "shims/gemini",
        &["ahp-wrap-adapter"],
    ),
    (
        "ahp-wrap-shim-opencode",
        "shims/opencode",
        &["ahp-wrap-adapter"],
    ),
    (
        "ahp-wrap",
        ".",
        &[
            "ahp-wrap-adapter",
            "ahp-wrap-confine",
            "ahp-wrap-floor",
            "ahp-wrap-policy",
            "ahp-wrap-shim-claude-code",
            "ahp-wrap-shim-codex",
            "ahp-wrap-shim-copilot",
            "ahp-wrap-shim-gemini",
            "ahp-wrap-shim-opencode",
            "ahp-wrap-testkit",
            "ahp-wrap-wire",
        ],
    ),
    ("ahp-wrap-testkit", "tests/support", &["ahp-wrap"]),
];

/// Each crate depends only on the crates of ours beneath it in [`CRATES`], and every member
/// of the workspace is in the table: a crate that reached up (the policy to the kernel's
/// part of the floor, a shim past the adapter) fails here before it fails a review.
#[test]
fn every_crate_depends_only_on_crates_beneath_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest(&root.join("Cargo.toml"));
    let members: BTreeSet<&str> = workspace["workspace"]["members"]
        .as_array()
        .expect("the workspace lists its members")
        .iter()
        .filter_map(toml::Value::as_str)
        .chain(["."])
        .collect();
    let listed: BTreeSet<&str> = CRATES.iter().map(|(_, dir, _)| *dir).collect();
    let mut wrong = Vec::new();
    for dir in members.difference(&listed) {
        wrong.push(format!("{dir}: a member the crates' table does not list"));
    }
    for (i, (name, dir, allowed)) in CRATES.iter().enumerate() {
        for dep in allowed.iter() {
            let position = CRATES.iter().position(|(n, _, _)| n == dep);
            // The testkit runs the application it tests, from above it: a dev-dependency
            // of the application's suites, not a layer.
            if position.is_none_or(|p| p >= i) && *dep != "ahp-wrap-testkit" {
                wrong.push(format!(
                    "{name} may depend on {dep}, which the table does not list beneath it"
                ));
            }
        }
        let manifest = manifest(&root.join(dir).join("Cargo.toml"));
        let ours = ["dependencies", "dev-dependencies"]
            .iter()
            .flat_map(|section| dependencies(&manifest, section))
            .filter(|d| d.starts_with("ahp-wrap"));
        for dep in ours {
            if !allowed.contains(&dep.as_str()) {
                wrong.push(format!(
                    "{dir}/Cargo.toml: {name} depends on {dep}, which its layer does not allow"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The most lines `crates/confine`, the one crate with `unsafe` code, may have: what a
/// reviewer of its `unsafe` blocks reads whole.
const CONFINE_MAX_LINES: usize = 6000;

/// `unsafe` code (a block, a function, an `impl`, an `extern` block, an attribute such as
/// `#[unsafe(no_mangle)]`, or `allow(unsafe_code)`) is in `crates/confine` alone, and in the
/// hook's C `main` (`src/bin/ahp-wrap-hook.rs`); the integration tests and benches allow
/// it at their roots for their own system calls. `crates/confine` stays under
/// [`CONFINE_MAX_LINES`] lines.
#[test]
fn only_confine_has_unsafe_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let code = regex::Regex::new(
        r"\bunsafe\s*(\{|fn\b|impl\b|extern\b|trait\b|\()|allow\(unsafe_code\)|no_mangle",
    )
    .unwrap();
    let mut files = Vec::new();
    for dir in ["crates", "shims", "src"] {
        collect(&root.join(dir), &mut files);
    }
    let confine = root.join("crates/confine");
    let hook = root.join("src/bin/ahp-wrap-hook.rs");
    let mut wrong = Vec::new();
    let mut confine_lines = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        if file.starts_with(&confine) {
            confine_lines += text.lines().count();
            continue;
        }
        if *file == hook {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            let line = line.split("//").next().unwrap_or("");
            if code.is_match(line) {
                wrong.push(format!(
                    "{}:{}: unsafe code outside crates/confine",
                    file.strip_prefix(root).unwrap().display(),
                    i + 1
                ));
            }
        }
    }
    assert!(
        confine_lines > 1000,
        "crates/confine has {confine_lines} lines: moved?"
    );
    if confine_lines >= CONFINE_MAX_LINES {
        wrong.push(format!(
            "crates/confine has {confine_lines} lines, {CONFINE_MAX_LINES} at most: what needs \
             no unsafe code belongs in crates/floor or crates/process"
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Dependencies a crate declares without naming them in its code, each with why it stays
/// (a dependency held only to turn on a feature of another's, say); none today.
const UNNAMED_DEPENDENCIES: &[(&str, &str, &str)] = &[];

/// Every dependency a crate of the workspace declares is named by its code: `name::`,
/// `use name` or `extern crate name` (with `-` read as `_`), in `src/` for `[dependencies]`,
/// in `build.rs` for `[build-dependencies]`, and in `src/`, `tests/`, `benches/` and
/// `examples/` for `[dev-dependencies]` (their `target.…` forms alike). A dependency nothing
/// names costs every clean build its compile time and hides what a crate really uses.
#[test]
fn every_declared_dependency_is_used() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest(&root.join("Cargo.toml"));
    let members = workspace["workspace"]["members"]
        .as_array()
        .expect("the workspace lists its members");
    let crates = std::iter::once(".").chain(members.iter().filter_map(toml::Value::as_str));
    let mut wrong = Vec::new();
    let mut used = BTreeSet::new();
    for dir in crates {
        let manifest = manifest(&root.join(dir).join("Cargo.toml"));
        let sections = [
            ("dependencies", &["src"][..]),
            ("build-dependencies", &["build.rs"][..]),
            (
                "dev-dependencies",
                &["src", "tests", "benches", "examples"][..],
            ),
        ];
        for (section, places) in sections {
            let named = named_crates(&code_in(&root.join(dir), places));
            for name in dependencies(&manifest, section) {
                if named.contains(&name.replace('-', "_")) {
                    continue;
                }
                match UNNAMED_DEPENDENCIES
                    .iter()
                    .find(|(c, d, _)| *c == dir && *d == name)
                {
                    Some(e) => {
                        used.insert((e.0, e.1));
                    }
                    None => wrong.push(format!(
                        "{dir}/Cargo.toml: [{section}] {name} is named nowhere in {}",
                        places.join(", ")
                    )),
                }
            }
        }
    }
    for (c, d, why) in UNNAMED_DEPENDENCIES {
        if !used.contains(&(*c, *d)) {
            wrong.push(format!(
                "the exception {c}: {d} ({why}) is gone: take it off the list"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn manifest(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap();
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names a manifest's `section` declares, its `[target.….section]` tables included.
fn dependencies(manifest: &toml::Table, section: &str) -> BTreeSet<String> {
    let targets = manifest
        .get("target")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flat_map(|t| t.values());
    std::iter::once(manifest.get(section))
        .chain(targets.map(|t| t.get(section)))
        .flatten()
        .filter_map(toml::Value::as_table)
        .flat_map(|t| t.keys().cloned())
        .collect()
}

/// The code of the Rust files in `places` (files or directories under `dir`), comments out;
/// the testkit's directory is a crate of its own, not the root crate's tests.
fn code_in(dir: &Path, places: &[&str]) -> String {
    let mut files = Vec::new();
    for place in places {
        let path = dir.join(place);
        if path.is_file() {
            files.push(path);
        } else {
            collect(&path, &mut files);
        }
    }
    let own_crates = [dir.join("tests/support"), dir.join("tests/.cache")];
    files
        .iter()
        .filter(|f| !own_crates.iter().any(|c| f.starts_with(c)))
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.lines()
                .map(|l| l.split("//").next().unwrap_or("").to_owned())
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names `code` uses as a path's first segment (`name::`, not `x::name::`), after `use`
/// and after `extern crate`: where a crate's name can stand.
fn named_crates(code: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"(?:^|[^\w:])(\w+)::|\buse (\w+)|\bextern crate (\w+)").unwrap();
    re.captures_iter(code)
        .filter_map(|c| c.iter().skip(1).flatten().next())
        .map(|m| m.as_str().to_owned())
        .collect()
}
