//! The adapter API: everything a framework's shim may use from the rest of the crate.
//!
//! A shim (`shims/<name>/src/`, and `generic.rs` here) maps one agent's hook contract to
//! AHP and back. It gets the [`Framework`] trait and its types, the gate's [`Final`]
//! decision and AHP's [`EventType`], the shared helpers ([`shared`]) and the few services listed below — and
//! nothing else of the core: not the client, the control socket, the gate or the policy.
//! What a shim needs from the core is added here, by name, where a reviewer sees it.
//!
//! # One crate, and a test that enforces the rule
//!
//! The rule could be a workspace (an adapter-API crate, one crate of adapters, the core).
//! We keep one crate with an enforced rule instead, because it is the cheaper choice that
//! is just as reviewable: the shims already compile into this crate through `#[path]`
//! modules, the API is a handful of types that would otherwise need a crate of their own
//! (with `Verdict` and `EventType` moved out of `protocol`), and the build, the tests and
//! the release stay one `cargo` invocation. The test below fails when a file under
//! `shims/*/src/`, `generic.rs` or `shared/` names any `crate::` path not under
//! `crate::frameworks::adapter`, or climbs out of its module with `super::super` (or with
//! `super::` in a module's root file, where `super` is the core's `frameworks`).

pub(crate) use super::shared::events::hook_events;
pub use super::shared::{self, Shim};
pub use super::{
    AgentCommand, AgentFiles, CallerReply, Framework, FrameworkError, HookContext, Mapped, Proven,
    RunContext,
};
pub use crate::protocol::{unapplicable_modify, updated_input, EventType, Final, ToolCall};
/// An agent's mixed state files: the declaration in [`AgentFiles::mixed`].
pub use crate::statefile::{Format as StateFormat, KeyRule, StateFile, Treatment};

/// Whether a name is a plain word (what the control socket accepts as a scope or a name:
/// an MCP server's name, for `ahp-wrap mcp --name`).
pub use crate::control::wire::is_word;

/// Whether `path` and every directory above it are owned by root and writable by no one
/// else: where some agents (Gemini) trust a system settings file.
pub use crate::rundir::only_root_can_write;

/// A fresh per-run nonce for hook commands and file names (16 hex digits).
pub fn run_nonce() -> String {
    crate::random_hex(8)
}

/// What the shims' own unit tests use from the core.
#[cfg(test)]
pub mod testing {
    pub use super::super::detect;
    pub use super::super::shared::output::testing::*;
    pub use crate::control::wire::is_word;
    pub use crate::rundir::RunDir;
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The one `crate::` path a shim may name.
    const ALLOWED: &str = "crate::frameworks::adapter";

    /// Every place in `text` that reaches outside the adapter API, as `line: text`. In a
    /// module's root file (`root`: a shim's `mod.rs`, `generic.rs`, `shared/mod.rs`)
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
                let allowed = path.strip_prefix(ALLOWED).is_some_and(|after| {
                    !after.starts_with(|c: char| c == '_' || c.is_alphanumeric())
                });
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

    /// The files the rule covers: every shim's sources, `generic.rs`, `shared/` and the
    /// manifest shim (`manifest/`).
    fn adapter_files() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("src/frameworks/generic.rs")];
        rust_files(&root.join("src/frameworks/shared"), &mut files);
        rust_files(&root.join("src/frameworks/manifest"), &mut files);
        for shim in std::fs::read_dir(root.join("shims")).unwrap() {
            let src = shim.unwrap().path().join("src");
            if src.is_dir() {
                rust_files(&src, &mut files);
            }
        }
        files
    }

    #[test]
    fn shims_import_only_the_adapter_api() {
        let files = adapter_files();
        assert!(
            files
                .iter()
                .any(|f| f.ends_with("shims/claude-code/src/mod.rs")),
            "the scan found no shims: {files:?}"
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
            "shims may use only {ALLOWED} (src/frameworks/adapter.rs); add what they need \
             there instead:\n{}",
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
}
