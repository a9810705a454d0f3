//! What the shims' own unit tests share (the `testing` feature, which only their
//! dev-dependencies turn on): hook contexts, runs, recorded samples and verdicts.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a sample that does not load or parse is the test's failure"
)]

use std::path::Path;

use serde_json::Value;

use crate::{CallerReply, Final, HookContext, Mapped, RunContext};

pub use ahp_wrap_floor::rundir::RunDir;

/// A shim's `render`.
pub(crate) type Render = fn(&HookContext<'_>, Option<&Mapped>, &Final) -> CallerReply;

/// A headless hook call named `hook`.
pub fn cx(hook: &str) -> HookContext<'_> {
    HookContext {
        hook,
        cwd: Path::new("/"),
        interactive: false,
    }
}

/// A headless run of `/bin/ahp-wrap` in `run_dir`, whose hooks may take 12,001 ms.
pub fn run_in(run_dir: &Path) -> RunContext {
    RunContext {
        self_exe: "/bin/ahp-wrap".into(),
        run_dir: run_dir.to_owned(),
        hook_budget_ms: 12_001,
        interactive: false,
    }
}

/// The recorded payload `shims/<shim>/samples/<name>.json`.
pub fn sample(shim: &str, name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shims")
        .join(shim)
        .join("samples")
        .join(format!("{name}.json"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What `render` prints on stdout (parsed, if anything) and its exit code.
pub fn out(render: Render, hook: &str, verdict: &Final) -> (Option<Value>, i32) {
    let r = render(&cx(hook), None, verdict);
    let v = (!r.stdout.is_empty()).then(|| serde_json::from_slice(&r.stdout).unwrap());
    (v, r.exit_code)
}

/// An `allow` with no replacement payload; `extra` must be a JSON object (the decision's
/// other fields).
pub fn allow(explicit: bool, extra: Value) -> Final {
    Final::Allow {
        explicit,
        modified_payload: None,
        extra: serde_json::from_value(extra).unwrap(),
    }
}

/// A `block` whose reason, shown to the agent, is `reason`.
pub fn block(reason: &str) -> Final {
    Final::Block {
        reason: reason.into(),
    }
}

/// A `modify` that replaces the agent's payload with `payload`.
pub fn modify(payload: Value) -> Final {
    Final::Modify {
        modified_payload: payload,
    }
}
