//! End to end on the real Kilo Code CLI (`kilo`, a fork of OpenCode; the version pinned in
//! tests/kilo/VERSION, installed by tests/kilo/setup.sh), which the OpenCode shim serves with
//! Kilo's names: the OpenCode family's scenarios (`ahp_wrap_testkit::opencode_family`),
//! driven by a scripted fake OpenAI Chat Completions server on 127.0.0.1 (a provider in the
//! user's own Kilo config) and a scripted stdio harness, with a plugin of the user's that
//! must still load.

use ahp_wrap_testkit::llm_agents::Agent;
use ahp_wrap_testkit::opencode_family as scenario;

#[test]
#[cfg_attr(
    skip_e2e = "kilo",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the kilo setup"
)]
fn a_blocked_command_never_runs_an_allowed_one_does_and_the_users_plugin_still_loads() {
    scenario::a_blocked_command_never_runs_an_allowed_one_does_and_the_users_plugin_still_loads(
        Agent::Kilo,
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "kilo",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the kilo setup"
)]
fn a_modified_command_runs_as_modified() {
    scenario::a_modified_command_runs_as_modified(Agent::Kilo);
}

#[test]
#[cfg_attr(
    skip_e2e = "kilo",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the kilo setup"
)]
fn a_harness_that_goes_down_gets_the_command_blocked() {
    scenario::a_harness_that_goes_down_gets_the_command_blocked(Agent::Kilo);
}

#[test]
#[cfg_attr(
    skip_e2e = "kilo",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the kilo setup"
)]
fn a_blocked_prompt_never_reaches_the_model() {
    scenario::a_blocked_prompt_never_reaches_the_model(Agent::Kilo);
}

#[test]
#[cfg_attr(
    skip_e2e = "kilo",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the kilo setup"
)]
fn a_rewritten_prompt_is_what_the_model_gets() {
    scenario::a_rewritten_prompt_is_what_the_model_gets(Agent::Kilo);
}

#[test]
#[cfg_attr(
    skip_e2e = "kilo",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the kilo setup"
)]
fn a_hook_whose_wrapper_is_gone_blocks() {
    scenario::a_hook_whose_wrapper_is_gone_blocks(Agent::Kilo);
}
