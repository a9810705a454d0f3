//! The layers of the workspace, kept by tests: the crates' (`CRATES`, each crate's
//! `Cargo.toml` naming only crates beneath it), and inside each crate its top-level modules
//! (a folder or file under the crate's `src/`), each listing what it may import from the
//! others (`crate::x`), from the bottom up.
//! An import that is not listed fails the test, and so does a listed exception that is no
//! longer needed (so the list only shrinks).
//!
//! The crates, from the bottom up: `crates/wire` (jsonrpc, protocol, control) and
//! `crates/floor` (the floor's data model and the agent's command, state files, run
//! directory and exit codes) see nothing of ours; `crates/process` (the process tree, seen
//! with safe calls) sees the floor's data; `crates/confine`, the one crate with `unsafe`
//! code (vfork, the agent's process and its guardian, the kernel's part of the floor), sees
//! both; `crates/policy` and `crates/adapter` see the wire and the floor's data, not
//! confine; a shim (`shims/<name>/`) sees the adapter alone; the application sees them
//! all, under their old names (`crate::floor`, re-exported), so its list still names them.
//! The adapter's two modules (`shared`, and `testing` for the shims' tests) need no list.
//! `only_confine_has_unsafe_code` keeps `unsafe` in `crates/confine` (and the hook's C
//! `main`), and that crate under `crates::CONFINE_MAX_LINES` lines.
//!
//! An exception (an import against the layers, to be taken out) must be named with its
//! reason; there is none today.
//!
//! Beside the layers, the dependencies: each crate's `Cargo.toml` declares only crates its
//! code names (`every_declared_dependency_is_used`), so that what Cargo builds is what the
//! code uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

mod crates;
mod tables;

use tables::*;

#[test]
fn every_import_follows_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    check(imports(&root.join("src")), LAYERS, EXCEPTIONS);
    check(
        imports(&root.join("crates/confine/src")),
        CONFINE_LAYERS,
        &[],
    );
    check(
        imports_below(&root.join("crates/confine/src/floor"), 1),
        CONFINE_FLOOR_LAYERS,
        &[],
    );
    check(imports(&root.join("crates/floor/src")), FLOOR_LAYERS, &[]);
    check(
        imports(&root.join("crates/process/src")),
        PROCESS_LAYERS,
        &[],
    );
    check(imports(&root.join("crates/wire/src")), WIRE_LAYERS, &[]);
    check(imports(&root.join("crates/policy/src")), POLICY_LAYERS, &[]);
}

/// Fails with every import of `actual` that `layers` (and `exceptions`) do not allow.
fn check(
    actual: BTreeMap<String, BTreeSet<String>>,
    layers: &[(&str, &[&str])],
    exceptions: &[(&str, &str, &str)],
) {
    assert!(!actual.is_empty(), "no module found: the crate moved?");
    let mut wrong = Vec::new();
    // Bottom up: a module may name only modules listed before it, so that no two modules
    // can import each other, however the lists grow.
    for (i, (module, deps)) in layers.iter().enumerate() {
        for dep in deps.iter() {
            let position = layers.iter().position(|(m, _)| m == dep);
            if position.is_some_and(|p| p >= i) {
                wrong.push(format!(
                    "{module} may import {dep}, which its table lists above it: the table goes bottom up"
                ));
            }
        }
    }
    let layers: BTreeMap<&str, BTreeSet<&str>> = layers
        .iter()
        .map(|(m, deps)| (*m, deps.iter().copied().collect()))
        .collect();
    let mut used = BTreeSet::new();
    for (module, deps) in &actual {
        let Some(allowed) = layers.get(module.as_str()) else {
            wrong.push(format!(
                "{module}: a top-level module the layers do not list"
            ));
            continue;
        };
        for dep in deps {
            if allowed.contains(dep.as_str()) {
                continue;
            }
            match exceptions.iter().find(|(m, d, _)| m == module && d == dep) {
                Some(e) => {
                    used.insert((e.0, e.1));
                }
                None => wrong.push(format!(
                    "{module} imports crate::{dep}, which its layer does not allow"
                )),
            }
        }
    }
    for (m, d, why) in exceptions {
        if !used.contains(&(*m, *d)) {
            wrong.push(format!(
                "the exception {m} -> {d} ({why}) is gone: take it off the list"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Each top-level module's imports of the others under `src`: `crate::x` paths, `super::`
/// paths that climb to the crate root (`super::super::x` two files down), and the names of
/// their `{..}` groups. A file's depth is its path's (`a/b.rs` and `a/b/mod.rs` are two
/// down), plus the inline modules (`mod tests {`) it is inside, which rustfmt's indentation
/// shows: such a module ends at the `}` of its own indentation.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    imports_below(src, 0)
}

/// [`imports`] for the modules of a folder `offset` modules beneath the crate root (`src`
/// is then that folder, `crates/confine/src/floor` for `offset` 1): their imports of each
/// other, as `super::x` or as `crate::<folder>::x`; what they import from outside the folder
/// is the crate's table's to check.
fn imports_below(src: &Path, offset: usize) -> BTreeMap<String, BTreeSet<String>> {
    let path =
        regex::Regex::new(r"\b(crate|super)((?:::super)*)::(\{|\w+)(?:::(\{|\w+))?").unwrap();
    let folder = src.file_name().unwrap().to_string_lossy().into_owned();
    let inline = regex::Regex::new(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{").unwrap();
    let char_literal = regex::Regex::new(r"'(?:\\.|[^\\'])'").unwrap();
    let string_literal = regex::Regex::new(r#""(?:\\.|[^"\\])*""#).unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    collect(src, &mut files);
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let mut parts: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        // The root of the crate (or of the folder) is the one every module sits beneath.
        if parts.is_empty() || matches!(parts[0].as_str(), "lib" | "main" | "bin") {
            continue;
        }
        let module = parts[0].clone();
        let text = std::fs::read_to_string(&file).unwrap();
        // Comments out, then the text of literals (`'"'` first, so that its quote opens none).
        let code: Vec<String> = text
            .lines()
            .map(|l| {
                let l = l.split("//").next().unwrap_or("");
                let l = char_literal.replace_all(l, "' '");
                string_literal.replace_all(&l, "\"\"").into_owned()
            })
            .collect();
        let deps = out.entry(module.clone()).or_default();
        // The indentation of each inline module the line is inside.
        let mut open: Vec<String> = Vec::new();
        for (i, line) in code.iter().enumerate() {
            while open
                .last()
                .is_some_and(|indent| line.strip_prefix(indent.as_str()) == Some("}"))
            {
                open.pop();
            }
            let depth = offset + parts.len() + open.len();
            for c in path.captures_iter(line) {
                let climbs = c[2].matches("super").count();
                // The length of the module path the first named segment is beneath: 0 is
                // the crate root.
                let level = match &c[1] {
                    "crate" => 0,
                    _ => depth.checked_sub(1 + climbs).unwrap_or_else(|| {
                        panic!("{}:{}: climbs above the crate root", file.display(), i + 1)
                    }),
                };
                // The segment that names a module of the folder: the first one of a path
                // from the folder itself, the second of `crate::<folder>::x`.
                let group = match level {
                    l if l == offset => 3,
                    0 if offset == 1 && &c[3] == folder.as_str() => 4,
                    _ => continue,
                };
                let Some(segment) = c.get(group) else {
                    continue;
                };
                if segment.as_str() == "{" {
                    let rest = code[i..].join("\n");
                    deps.extend(group_heads(&rest[segment.end()..]));
                } else {
                    deps.insert(segment.as_str().to_owned());
                }
            }
            if let Some(c) = inline.captures(line) {
                open.push(c[1].to_owned());
            }
        }
        deps.remove(&module);
        deps.remove("self");
    }
    out
}

/// The first segment of each path of a `{..}` group, `text` starting after its `{`:
/// `a::{b, c}, d}` gives `a` and `d`.
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let (mut depth, mut item) = (0, String::new());
    for ch in text.chars() {
        match ch {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => heads.push(std::mem::take(&mut item)),
            _ if depth == 0 => item.push(ch),
            _ => {}
        }
    }
    heads.push(item);
    heads
        .iter()
        .filter_map(|i| i.trim().split("::").next())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .collect()
}

pub(super) fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
