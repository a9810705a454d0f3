//! How long an agent waits for one of our hooks: always longer than the wrapper's budget.
//!
//! The hook process fails closed when the wrapper has not answered within the budget, and
//! every agent we support lets the action through when its own hook timeout fires first.
//! So each shim registers the budget plus this margin, in the unit its agent counts.

use crate::RunContext;

/// How much longer than the wrapper's budget a registered hook timeout is.
pub(crate) const HOOK_TIMEOUT_MARGIN_MS: u64 = 5_000;

/// The hook timeout to register, in milliseconds.
pub fn hook_timeout_ms(run: &RunContext) -> u64 {
    run.hook_budget_ms + HOOK_TIMEOUT_MARGIN_MS
}

/// The hook timeout to register, in whole seconds (the budget rounded up).
pub fn hook_timeout_s(run: &RunContext) -> u64 {
    run.hook_budget_ms.div_ceil(1000) + HOOK_TIMEOUT_MARGIN_MS / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_added_in_the_agents_unit() {
        let run = RunContext {
            self_exe: "/x".into(),
            run_dir: "/r".into(),
            hook_budget_ms: 12_001,
            interactive: false,
        };
        assert_eq!(hook_timeout_ms(&run), 17_001);
        assert_eq!(hook_timeout_s(&run), 18);
    }
}
