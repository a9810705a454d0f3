//! The rule the two shims built into the application keep (`generic.rs`, `manifest/`):
//! like the shims of agents, which are crates that depend on the adapter alone, they name
//! no `crate::` path but [`crate::frameworks::adapter`], and never climb out of their
//! module with `super::super` (or `super::` in their root file, where `super` is the
//! registry).

use std::path::{Path, PathBuf};

/// The one `crate::` path `generic.rs` and `manifest/` may name.
const ALLOWED: &str = "crate::frameworks::adapter";

/// Every place in `text` that reaches outside the adapter API, as `line: text`. In a
/// module's root file (`root`: `generic.rs`, `manifest/mod.rs`)
/// `super::` is `crate::frameworks` itself: only a test module's `use super::*;` may
/// name it there.
fn violations(text: &str, root: bool) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if root && line.contains("super::") && line.trim() != "use super::*;" {
            found.push(format!("{}: {}", n + 1, line.trim()));
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            // `$crate::` in a macro is `crate::` all the same.
            let path = &rest[at..];
            let allowed = path
                .strip_prefix(ALLOWED)
                .is_some_and(|after| !after.starts_with(|c: char| c == '_' || c.is_alphanumeric()));
            if !allowed {
                found.push(format!("{}: {}", n + 1, line.trim()));
                break;
            }
            rest = &rest[at + "crate::".len()..];
        }
        if line.contains("super::super") {
            found.push(format!("{}: {}", n + 1, line.trim()));
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The files the rule covers: `generic.rs` and the manifest shim (`manifest/`). The
/// shims of agents are crates that see only the adapter: Cargo keeps them to it.
fn adapter_files() -> Vec<PathBuf> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/frameworks");
    let mut files = vec![here.join("generic.rs")];
    rust_files(&here.join("manifest"), &mut files);
    files
}

#[test]
fn the_shims_built_in_import_only_the_adapter_api() {
    let files = adapter_files();
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("src/frameworks/manifest/mod.rs")),
        "the scan found no manifest shim: {files:?}"
    );
    let mut bad = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let root = file.ends_with("mod.rs") || file.ends_with("generic.rs");
        for v in violations(&text, root) {
            bad.push(format!("{}:{v}", file.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "generic.rs and manifest/ may use only {ALLOWED} (crates/adapter); add what \
         they need there instead:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scan_sees_every_way_out() {
    let ok = |text| violations(text, false).is_empty();
    assert!(ok("use crate::frameworks::adapter::{Verdict, Shim};"));
    assert!(ok("crate::frameworks::adapter::run_nonce()"));
    assert!(ok("$crate::frameworks::adapter::hook_events!(@tool)"));
    assert!(ok("use super::{CodexEvent, SHIM};"));
    assert!(violations("    use super::*;", true).is_empty());
    assert_eq!(violations("use super::{Mapped};", true).len(), 1);
    for bad in [
        "use crate::protocol::Verdict;",
        "use crate::{frameworks::adapter, control};",
        "let n = crate::random_hex(8);",
        "use crate::frameworks::adapter_internals::X;",
        "use crate::frameworks::adapter::X; use crate::control::Y;",
        "use crate::frameworks::{Mapped};",
        "use super::super::detect;",
    ] {
        assert_eq!(violations(bad, false).len(), 1, "{bad}");
    }
}
