//! Tests of the policy engine: the default rules against adversarial commands and their
//! harmless look-alikes, and the engine's own guarantees.

use super::*;

#[test]
fn default_policy_examples_pass() {
    let report = Policy::default_policy()
        .check()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.examples > 50, "{report:?}");
}
