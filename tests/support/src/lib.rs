//! What the integration suites and the benches share, in one crate: the suites are the
//! modules of one test binary (`tests/all.rs`: each file in `tests/`, or directory with its
//! `mod.rs`, one suite), and each uses the part it needs, by name
//! (`use ahp_wrap_testkit::claude_code as support;`). The scripts the suites run (fake model
//! servers, scripted harnesses, terminal drivers) sit beside this crate in `tests/support/`.
//!
//! - [`common`]: the binary under test, examples, processes with a time limit, directories
//!   outside the temp tree, a gated shell agent.
//! - [`agents`]: what the end-to-end suites on real agent CLIs share (installed CLIs, a fake
//!   model server, time-limited runs); [`claude_code`], [`codex`] and [`llm_agents`] add each
//!   agent's command line and what its model API receives.
//! - [`acp`], [`mcp`]: the ACP and MCP peers and worlds; [`approvals`], [`browser`]: the
//!   approvals host and its page in a real Chromium; [`rabbitmq`], [`fleet`]: a private
//!   broker and the fleet's workers.
//! - [`terminal`]: an agent CLI on a real pseudo-terminal, driven through steps.
//! - [`reach`]: the wrapper, an agent and the scripts where a run as another user reaches
//!   them.

// A test world is made with `new()`, so that each test says it starts a fresh one.
#![allow(clippy::new_without_default)]

use std::path::{Path, PathBuf};

pub mod acp;
pub mod agents;
pub mod approvals;
pub mod browser;
pub mod claude_code;
pub mod codex;
pub mod common;
pub mod fleet;
pub mod llm_agents;
pub mod mcp;
pub mod opencode_family;
pub mod rabbitmq;
pub mod reach;
pub mod terminal;

/// The project's root directory.
pub fn root() -> &'static Path {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .expect("the project's root")
    })
}

/// The directory cargo builds the running test or bench binary's crate into
/// (`target/debug`, `target/release`): the binary is in its `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary's directory");
    let dir = if deps.ends_with("deps") {
        deps.parent().expect("the profile directory")
    } else {
        deps
    };
    dir.to_owned()
}

/// The `ahp-wrap` binary under test: the one cargo builds beside the running test binary
/// (as `CARGO_BIN_EXE_ahp-wrap` names it to the test crate itself).
pub fn wrap_bin() -> PathBuf {
    let bin = profile_dir().join("ahp-wrap");
    assert!(bin.exists(), "{} is not built", bin.display());
    bin
}

/// A scratch directory under the target directory, as `CARGO_TARGET_TMPDIR` names it to
/// the test crate itself: some agents refuse to work under `/tmp`.
pub fn target_tmpdir() -> PathBuf {
    let dir = profile_dir()
        .parent()
        .expect("the target directory")
        .join("tmp");
    std::fs::create_dir_all(&dir).expect("the target's tmp directory");
    dir
}
