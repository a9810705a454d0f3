//! The integration suites, as one test binary: each module is one suite (a file in `tests/`,
//! or a directory with its `mod.rs`), with the fixtures it names beside it. One binary links
//! the crate once, where a binary per file linked it once each (67 times: most of a clean
//! build's time and of `target/`'s size).
//!
//! Run one suite with its module path: `cargo test --test all floor_net::`, one test with
//! its name: `cargo test --test all -- --exact floor::a_test_name`. `tests/run-all.sh` (what
//! CI runs) installs what the suites need first.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench or test may stop at the first failure

// Named to sort first, so that it starts first: libtest starts tests in the order of their
// names, and this one is the longest by far (install.sh's release build: 8 minutes of CPU,
// its last link on one core). Started last, it ran alone for minutes after the rest had
// finished; started first, the other suites run beside it.
#[path = "quickstart.rs"]
mod a_quickstart;
mod acp_claude;
mod acp_codex;
mod acp_proxy;
mod agents_question;
mod aider_e2e;
mod approvals_host;
mod approvals_page;
mod audit_show;
mod audit_trail;
mod audit_verify;
mod auth;
mod child;
mod claude_code_crossing;
mod claude_code_default_policy;
mod claude_code_e2e;
mod claude_code_env;
mod claude_code_floor;
mod claude_code_persistence;
mod claude_code_reversible;
mod claude_code_run_files;
mod claude_code_sandbox;
mod claude_code_shim;
mod claude_code_state;
mod claude_code_terminal;
mod claude_code_undo;
mod claude_code_undo_git;
mod claude_code_unix;
mod client;
mod codex_e2e;
mod codex_sandbox;
mod codex_state;
mod copilot_e2e;
mod copilot_state;
mod cross_framework;
mod docs;
mod doctor;
mod droid_e2e;
mod droid_state;
mod events;
mod example_workflow;
mod examples;
mod faults;
mod fleet;
mod fleet_caller;
mod fleet_codex;
mod fleet_errors;
mod fleet_restart;
mod floor;
mod floor_apparmor;
mod floor_caches;
mod floor_container;
mod floor_container_net;
mod floor_nested;
mod floor_net;
mod floor_publish;
mod floor_refusals;
mod gemini_e2e;
mod gemini_state;
mod gemini_user;
mod guardian;
mod home_workspace;
mod interop;
mod kilo_e2e;
mod layers;
mod mcp_claude_e2e;
mod mcp_cli;
mod mcp_proxy;
mod observe;
mod opencode_e2e;
mod opencode_family_state;
mod pathshim;
mod policy_corpus;
mod policy_file;
mod qwen_e2e;
mod qwen_state;
mod serve;
mod shim_manifest;
mod subcommands;
mod takeover;
mod telemetry_otlp;
mod telemetry_prometheus;
mod terminal;
mod terminal_question;
mod undo;
mod unsupervised;
