//! One host policy: the URLs a tool call (or, without the network floor, a command) will
//! contact answer to the policy's `[floor.net]` host rules, the ones the floor's egress proxy
//! applies to every connection of the agent's tree, with the same reasons.

use ahp_wrap_floor::hosts::{is_loopback, HostRules, Judgement, Target};
use ahp_wrap_floor::spec::{NetSpec, Unknown};
use ahp_wrap_wire::protocol::{Event, Verdict};

use super::extract::Facts;
use crate::error::PolicyError;
use crate::rules::DecisionKind;
use crate::sections::floor_spec;

/// The rule name of a decision the `[floor.net]` host rules made.
pub const HOSTS_RULE: &str = "floor-net-hosts";

/// The `[floor.net]` host rules of a policy whose own `[floor.net]` is `own` (each list it
/// leaves out taken from the default policy's, as the floor takes them); `None` when the
/// network floor is off.
pub(crate) fn host_rules(own: Option<&NetSpec>) -> Result<Option<HostRules>, PolicyError> {
    let default = floor_spec(None)?.net;
    let net = own.map_or_else(|| default.clone(), |n| n.clone().or(&default));
    if !net.enabled() {
        return Ok(None);
    }
    HostRules::new(&net, &[])
        .map(Some)
        .map_err(|message| PolicyError::InvalidRule {
            rule: "[floor.net]".into(),
            message: message.to_string(),
        })
}

/// What `hosts` make of the URLs a (non-shell) tool will contact, the strictest answer of
/// them: a host the floor denies (or a raw address it does not name) is blocked, a host no
/// list names gets the `unknown` treatment, with the reason a connection to it would get. So
/// are the hosts shell commands contact (a network program's, an interpreter's) when
/// `commands` says so: not while the floor's egress proxy decides the tree's connections
/// ([`crate::Session::leave_commands_to_egress`]), since it asks about each connection they
/// make. Not the egress's own `net` events (metadata `interceptor = "egress"`), which it
/// decided by these rules, with the agent's model hosts added, before it asked.
pub(crate) fn answer(
    hosts: &HostRules,
    event: &Event,
    facts: &Facts,
    commands: bool,
) -> Option<(DecisionKind, Verdict)> {
    let from_egress = event
        .metadata
        .as_ref()
        .and_then(|m| m.get("interceptor"))
        .is_some_and(|i| i == "egress");
    if from_egress {
        return None;
    }
    let mut best: Option<(DecisionKind, Verdict)> = None;
    let urls = facts
        .contacts
        .iter()
        .chain(facts.command_contacts.iter().filter(|_| commands));
    let what = if facts.shell.is_empty() {
        "tool"
    } else {
        "command"
    };
    for url in urls {
        let Some(target) = url.host_str().and_then(Target::parse) else {
            continue;
        };
        let port = url.port_or_known_default();
        let answer = match hosts.judge_at(&target, port) {
            Judgement::Allowed | Judgement::Unknown(Unknown::Allow) => continue,
            Judgement::Denied(why) => (
                DecisionKind::Block,
                Verdict::Block {
                    reason: format!("this {what} would contact {target}: {why}"),
                },
            ),
            Judgement::Unknown(Unknown::Block) => (
                DecisionKind::Block,
                Verdict::Block {
                    reason: match is_loopback(&target) {
                        true => format!(
                            "this {what} would make {}, which the floor does not let through \
                             (unknown = \"block\")",
                            hosts.unnamed(&target, port.unwrap_or(0))
                        ),
                        false => format!(
                            "this {what} would contact {target}, a host the floor does not let \
                             through ([floor.net] allow; unknown = \"block\")"
                        ),
                    },
                },
            ),
            Judgement::Unknown(Unknown::Ask) => (
                DecisionKind::Escalate,
                Verdict::Escalate {
                    reason: match is_loopback(&target) {
                        true => format!(
                            "this {what} would make {}; a person must decide",
                            hosts.unnamed(&target, port.unwrap_or(0))
                        ),
                        false => format!(
                            "this {what} would contact {target}, a host [floor.net] does not \
                             name; a person must decide"
                        ),
                    },
                    target: None,
                },
            ),
        };
        if best
            .as_ref()
            .is_none_or(|(k, _)| answer.0.rank() > k.rank())
        {
            best = Some(answer);
        }
    }
    best
}

/// Whether `url`'s host is one the host rules let through by name (`allow`): what comes
/// from it is not counted as untrusted content entering the session. With the network
/// floor off, none is.
pub(crate) fn allowed(hosts: Option<&HostRules>, url: &url::Url) -> bool {
    hosts.is_some_and(|h| {
        url.host_str().and_then(Target::parse).is_some_and(|t| {
            matches!(
                h.judge_at(&t, url.port_or_known_default()),
                Judgement::Allowed
            )
        })
    })
}
