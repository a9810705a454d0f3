//! The embedded default harness: a rule engine over AHP events, configured by a TOML policy.
//!
//! Owns: the rules, the analysis of what an event does (shell, paths, inline code) and the
//! default policy. Must not touch: I/O beyond reading the file system it reasons about, the
//! audit log, or how a verdict is enforced (the gate and the interceptors do that).
//!
//! # Layout
//!
//! ```text
//!  Event ─▶ extract (an event's facts) ─▶ Facts ─▶ every Rule ─▶ strictest decision wins
//!             │  shell commands ── shell (brush-parser AST) ── semantics (wrappers, reads, writes)
//!             │                      └─ inline (the code given to interpreters)
//!             │  file paths ────── paths (~, cwd, .., symlinks, workspace predicates)
//!             │  what it writes ── memory (what each session wrote, read back by the walker)
//!             └  URLs ─────────── hosts (the `[floor.net]` host rules, for what a call contacts)
//! ```
//!
//! The modules in layers, each importing only from the rows beneath it (tests/layers/
//! keeps the table of what each may import, and fails on an import that climbs):
//!
//! ```text
//!  checked ───────────── a policy file read and checked (the root's `Policy` is built from it)
//!  examples   hosts ──── `match` / `no_match` examples; the host rules a call's URLs answer to
//!  rules ─────────────── the file format (see `docs/policy.md`) and compiled matchers
//!  reversible ────────── what a command a `reversible` rule matched discards, for the run
//!  taint ─────────────── where untrusted content entered a session, and what is then asked
//!  extract ───────────── an event's facts: what it runs, reads, writes and contacts
//!  shell ─────────────── the walker: a command line into the simple commands it runs
//!  semantics   inline ── programs as data (wrappers, reads, writes); interpreter code
//!  protected ─────────── the wrapper's own files and processes
//!  paths ─────────────── the resolver: ~, cwd, .., symlinks, workspace predicates
//!  session ───────────── what a run's decisions change and read: memory, egress, placeholders
//!  memory ────────────── what each session wrote, by file
//!  checkpoints ───────── the `[checkpoints]` section
//!  sections ──────────── the `[floor]` section, and reading one section of a file
//!  command   error ───── the simple command as data; why a policy cannot be loaded
//! ```
//!
//! - `command`: one simple command as `shell` hands it on, read by every module above it
//!   (so that the readers of commands do not import the walker, nor the walker them).
//! - `session`: what a run's decisions change and read ([`Session`]): the memory, and what
//!   the run says of itself before its agent starts; the engine itself is immutable.
//! - `memory`: what each session wrote, so that code run later from those files is judged
//!   on what was written as well as on what the disk holds (the writes of an event are
//!   `extract`'s to read); `taint`: where untrusted content entered a session, and the build
//!   files a write to which is then asked about.
//! - `hosts`: one host policy: the hosts a tool call (or, without the network floor, a
//!   command) will contact, judged by the floor's host rules.
//! - `reversible`: what a command a `reversible = true` rule escalates discards ([`Reach`]),
//!   for the run to allow it when its checkpoints keep all of it (the policy cannot see them).
//! - `default.toml`: the compiled-in default policy ([`Policy::default_toml`]).
//! - `sections`, `checkpoints`: the `[floor]` and `[checkpoints]` sections a run reads on
//!   their own at start-up (the default's from JSON build.rs makes of `default.toml`).
//! - The root: the engine ([`Policy`]) over all of them, and `pattern`, the one helper
//!   they share from it.
//!
//! The engine only decides; enforce or observe mode is the caller's business.

#![forbid(unsafe_code)]

mod checked;
mod checkpoints;
mod command;
mod error;
mod examples;
mod extract;
mod hosts;
mod inline;
mod memory;
mod paths;
mod protected;
mod reversible;
mod rules;
mod sections;
mod semantics;
mod session;
mod shell;
mod taint;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use checked::Checked;
use checked::DEFAULT_TOML;
pub use checkpoints::{checkpoint_spec, CheckpointSpec};
pub use error::{ExampleFailure, PolicyError};
pub use examples::ExampleReport;
pub use extract::contacts::contacted_hosts;
pub use hosts::HOSTS_RULE;
pub use protected::Protected;
pub use reversible::{Effect, Reach};
pub use rules::{Check, DecisionKind, SessionTaint, Unparseable};
pub use sections::floor_spec;
pub use session::Session;

/// The id reported when a write to a build or dependency file is asked about because
/// content from the network entered the session earlier.
pub const TAINT_RULE: &str = "session-taint";

use ahp_wrap_floor::hosts::HostRules;
use ahp_wrap_wire::protocol::{Event, EventType, Verdict};
use extract::Facts;
use paths::Resolver;
use rules::{Rule, Settings};

/// A regular expression of this crate's own code: a pattern that does not compile is a bug in
/// this crate, never an input, so it ends the process with the pattern's error.
#[allow(
    clippy::expect_used,
    reason = "a pattern written in this crate's code: invalid only by a bug of ours"
)]
pub(crate) fn pattern(re: &str) -> regex::Regex {
    regex::Regex::new(re).expect("a pattern of ours compiles")
}

/// What a placeholder variable's name becomes in the code the rules read: a name no rule
/// about secrets matches.
const PLACEHOLDER_VAR: &str = "PLACEHOLDER_VAR";

/// The id reported when a shell command could not be parsed.
pub const UNPARSEABLE_RULE: &str = "unparseable-command";

/// A decision of the embedded harness, with the rule that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDecision {
    /// What the policy answers: allow, block, ask a person, or no opinion.
    pub verdict: Verdict,
    /// The id of the rule that decided, `None` for "no rule matched".
    pub rule: Option<String>,
    /// An escalation by `reversible` rules alone: what the command discards, for the run to
    /// allow it when its checkpoints keep all of that (`None`: the decision stands).
    pub reversible: Option<Reach>,
}

impl PolicyDecision {
    /// "No rule matched."
    pub fn no_opinion() -> PolicyDecision {
        PolicyDecision {
            verdict: Verdict::no_opinion(),
            rule: None,
            reversible: None,
        }
    }

    /// The reason shown to the agent or the person, if the verdict carries one.
    pub fn reason(&self) -> Option<&str> {
        self.verdict.reason()
    }
}

/// The embedded policy engine: immutable once built; what a decision changes is its
/// [`Session`]'s.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    /// How many of `rules`, first, come from the default policy this one extends (their
    /// examples are the default's, checked by the test suite, not at every load).
    inherited: usize,
    settings: Settings,
    resolver: Resolver,
    /// The workspace, when the caller knows it better than the event's cwd.
    workspace_root: Option<PathBuf>,
    /// The wrapper's own files and processes.
    protected: Protected,
    /// The `[floor.net]` host rules, which the URLs a tool will contact answer to as a
    /// connection of the agent's tree does; `None` when the policy's network floor is off.
    hosts: Option<HostRules>,
}

// Beside what it builds: `checked` reads and checks a file, and does not see the engine.
impl Checked {
    /// The policy: the default's rules first when it extends the default (less those it
    /// disables or replaces with a rule of the same id), then its own.
    pub fn build(self) -> Policy {
        let (mut rules, inherited, settings) = if self.extends {
            let base = Policy::default_policy();
            let mut rules = base.rules;
            rules.retain(|r| !self.disable.contains(&r.id));
            // A rule of this file with a default rule's id takes its place.
            rules.retain(|r| !self.own.iter().any(|own| own.id == r.id));
            let inherited = rules.len();
            (rules, inherited, self.settings.unwrap_or(base.settings))
        } else {
            (Vec::new(), 0, self.settings.unwrap_or_default())
        };
        rules.extend(self.own);
        Policy {
            rules,
            inherited,
            settings,
            hosts: self.hosts,
            ..Policy::allow_all()
        }
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::allow_all()
    }
}

impl Policy {
    /// No rules at all: "no opinion" for every event, whatever it contains.
    pub fn allow_all() -> Policy {
        Policy {
            rules: Vec::new(),
            inherited: 0,
            settings: Settings {
                unparseable: Unparseable::NoOpinion,
                session_taint: SessionTaint::NoOpinion,
            },
            resolver: Resolver {
                home: home_from_env(),
                follow_symlinks: true,
                code_since: Some(std::time::SystemTime::now()),
                other_homes: passwd_home().into_iter().collect(),
                written: None,
            },
            workspace_root: None,
            protected: Protected::default(),
            hosts: None,
        }
    }

    /// The compiled-in default policy. Its examples are checked by the test suite rather than
    /// at every start.
    #[allow(
        clippy::expect_used,
        reason = "the compiled-in default policy, which the tests load"
    )]
    pub fn default_policy() -> Policy {
        Policy::parse(DEFAULT_TOML, "(default)").expect("the compiled-in default policy is valid")
    }

    /// The text of the default policy, for printing.
    pub fn default_toml() -> &'static str {
        DEFAULT_TOML
    }

    /// Loads a policy file and checks its examples.
    pub fn load(path: impl AsRef<Path>) -> Result<Policy, PolicyError> {
        Ok(Policy::check_file(path)?.build())
    }

    /// Reads a policy file and checks it as [`Policy::load`] does (its TOML, its rules
    /// compiled, their examples run, what it disables of the default), without building the
    /// default policy it may extend: [`Checked::build`] does that later (the default's rules
    /// take some 15 ms to compile, which a run spends once the agent has started, as it does
    /// for the default policy itself). The file is read once: what is built is what was
    /// checked.
    pub fn check_file(path: impl AsRef<Path>) -> Result<Checked, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Checked::read(&text, &path.display().to_string(), true)
    }

    /// Parses a policy from TOML text and checks its examples.
    pub fn from_toml_str(text: &str) -> Result<Policy, PolicyError> {
        Ok(Checked::read(text, "(string)", true)?.build())
    }

    fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        Ok(Checked::read(text, origin, false)?.build())
    }

    /// Uses `home` for `~` and for `~/…` patterns instead of `$HOME`.
    pub fn with_home(mut self, home: impl AsRef<Path>) -> Policy {
        self.resolver.home = std::fs::canonicalize(home.as_ref())
            .unwrap_or_else(|_| paths::normalise(home.as_ref()));
        self
    }

    /// Uses `root` as the workspace instead of each event's cwd.
    pub fn with_workspace(mut self, root: impl AsRef<Path>) -> Policy {
        self.workspace_root = Some(root.as_ref().to_path_buf());
        self
    }

    /// Counts code on disk changed at or after `since` as untrusted (the agent's own work)
    /// instead of code changed since the policy was built.
    pub fn trusting_code_changed_before(mut self, since: std::time::SystemTime) -> Policy {
        self.resolver.code_since = Some(since);
        self
    }

    /// Protects the wrapper's own files and processes (see [`Protected`]).
    pub fn protecting(mut self, protected: Protected) -> Policy {
        self.protected = protected;
        self
    }

    /// How many rules come from the default policy this one extends (0 when it stands alone).
    pub fn inherited_rules(&self) -> usize {
        self.inherited
    }

    /// The ids of the rules, in file order.
    pub fn rule_ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.id.as_str())
    }

    /// Runs the `match` / `no_match` examples of every rule this policy adds (those of the
    /// default it extends are checked by the test suite).
    pub fn check(&self) -> Result<ExampleReport, PolicyError> {
        let (report, failures) = examples::check(&self.rules[self.inherited..]);
        if failures.is_empty() {
            Ok(report)
        } else {
            Err(PolicyError::Examples(failures))
        }
    }

    /// Evaluates one event on its own, in a session of its own that nothing else reads
    /// (see [`Policy::evaluate_in`]).
    pub fn evaluate(&self, event: &Event) -> PolicyDecision {
        self.evaluate_in(&Session::default(), event, None)
    }

    /// Evaluates one event of `session`: every matching rule proposes its decision, the
    /// strictest wins (block > escalate > defer > modify > explicit allow > no opinion; ties
    /// go to the rule written first). What the event writes and brings into its session is
    /// remembered in `session`, for the decisions that follow; `run`'s files and processes
    /// are protected too (a run knows them only after the policy is built).
    pub fn evaluate_in(
        &self,
        session: &Session,
        event: &Event,
        run: Option<&Protected>,
    ) -> PolicyDecision {
        if self.rules.is_empty() && self.settings.unparseable == Unparseable::NoOpinion {
            return PolicyDecision::no_opinion();
        }
        let facts = self.facts(session, event, run);
        let mut best: Option<(u8, PolicyDecision)> = None;
        // Whether every proposal that acts comes from a `reversible` rule.
        let mut all_reversible = true;
        let mut propose = |rank: u8, decision: PolicyDecision, reversible: bool| {
            all_reversible &= reversible || rank <= DecisionKind::Allow.rank();
            if best.as_ref().is_none_or(|(r, _)| rank > *r) {
                best = Some((rank, decision));
            }
        };
        if let Some(err) = facts.parse_errors.first() {
            let reason =
                format!("the shell command could not be parsed ({err}), so a person must decide");
            match self.settings.unparseable {
                Unparseable::Escalate => propose(
                    DecisionKind::Escalate.rank(),
                    by_rule(
                        Verdict::Escalate {
                            reason,
                            target: None,
                        },
                        UNPARSEABLE_RULE,
                    ),
                    false,
                ),
                Unparseable::Block => propose(
                    DecisionKind::Block.rank(),
                    by_rule(
                        Verdict::Block {
                            reason: format!("the shell command could not be parsed ({err})"),
                        },
                        UNPARSEABLE_RULE,
                    ),
                    false,
                ),
                Unparseable::NoOpinion => {}
            }
        }
        for rule in &self.rules {
            if rule.is_match(&facts) {
                propose(
                    rule.decision.rank(),
                    by_rule(verdict(rule, event, &facts), &rule.id),
                    rule.reversible,
                );
            }
        }
        let commands = !session.egress();
        let hosts = self.hosts.as_ref();
        if let Some((kind, verdict)) = hosts.and_then(|h| hosts::answer(h, event, &facts, commands))
        {
            propose(kind.rank(), by_rule(verdict, HOSTS_RULE), false);
        }
        if self.settings.session_taint == SessionTaint::Escalate {
            if let Some((origin, file)) = taint::build_files_written(&facts)
                .and_then(|file| Some((session.memory.taint(&event.session_id)?, file)))
            {
                propose(
                    DecisionKind::Escalate.rank(),
                    by_rule(
                        Verdict::Escalate {
                            reason: format!(
                                "content from {origin} entered this session, and {file} decides \
                                 what later builds, installs and tests run: a person confirms \
                                 this write (an instruction injected in that content may have \
                                 asked for it)"
                            ),
                            target: None,
                        },
                        TAINT_RULE,
                    ),
                    false,
                );
            }
        }
        let mut decision = best.map_or_else(PolicyDecision::no_opinion, |(_, d)| d);
        if all_reversible
            && facts.parse_errors.is_empty()
            && matches!(decision.verdict, Verdict::Escalate { .. })
        {
            decision.reversible = self.reach(&facts);
        }
        // What the call writes is remembered unless it is refused (a person may allow an
        // escalated one: the stricter reading keeps it). Content from the network has entered
        // once a call that reads it is allowed outright, or has run (its `post_action`): an
        // escalated fetch may still be refused.
        let blocked = matches!(decision.verdict, Verdict::Block { .. });
        let asked = matches!(decision.verdict, Verdict::Escalate { .. });
        let entered = match event.event_type {
            EventType::PreAction => !blocked && !asked,
            EventType::PostAction => true,
            _ => false,
        };
        let taint = entered
            .then(|| taint::taint_of(&facts, |u| hosts::allowed(self.hosts.as_ref(), u)))
            .flatten();
        let written = if blocked { Vec::new() } else { facts.written };
        session.memory.record(&event.session_id, written, taint);
        decision
    }
}

impl Policy {
    /// What the simple commands the matching `reversible` rules match discard.
    fn reach(&self, facts: &Facts) -> Option<Reach> {
        let mut matched: Vec<&extract::CommandFacts> = Vec::new();
        for rule in self
            .rules
            .iter()
            .filter(|r| r.reversible && r.is_match(facts))
        {
            let commands = rule.matching_commands(facts);
            if commands.is_empty() {
                return None;
            }
            for cf in commands {
                if !matched.iter().any(|m| std::ptr::eq(*m, cf)) {
                    matched.push(cf);
                }
            }
        }
        reversible::reach(facts, &matched)
    }

    /// What the engine knows of `event` of `session`, the wrapper's files and processes
    /// protected.
    fn facts(&self, session: &Session, event: &Event, run: Option<&Protected>) -> Facts {
        let protected = match run {
            Some(run) => self.protected.and(run),
            None => self.protected.clone(),
        };
        // Code run from a file the session wrote is read as it wrote it too; `~` covers the
        // agent's own home as well when it runs with another one than ours.
        let written = session.memory.files(&event.session_id);
        let agent_home = self.agent_home(event);
        let for_event = (written.is_some() || agent_home.is_some()).then(|| {
            let mut r = Resolver {
                written,
                ..self.resolver.clone()
            };
            r.other_homes.extend(agent_home);
            r
        });
        let names = session.placeholders();
        let mut facts = extract::facts(
            event,
            for_event.as_ref().unwrap_or(&self.resolver),
            self.workspace_root.as_deref(),
            protected,
            names,
        );
        if !names.is_empty() {
            for cmd in &mut facts.commands {
                cmd.cmd.vars.retain(|v| !names.contains(v));
                if let Some(code) = cmd.cmd.code.as_mut() {
                    for name in names {
                        if code.contains(name.as_str()) {
                            *code = code.replace(name.as_str(), PLACEHOLDER_VAR);
                        }
                    }
                }
            }
        }
        facts
    }

    /// The agent's own home as its hook process reported it (the wrapper puts it in the
    /// event's metadata as `agent_home`), when it is neither ours nor one `~` covers already.
    fn agent_home(&self, event: &Event) -> Option<PathBuf> {
        let raw = event.metadata.as_ref()?.get("agent_home")?.as_str()?;
        let known =
            |p: &Path| p == self.resolver.home || self.resolver.other_homes.iter().any(|h| h == p);
        if !raw.starts_with('/') || known(Path::new(raw)) {
            return None;
        }
        let home = std::fs::canonicalize(raw).unwrap_or_else(|_| paths::normalise(Path::new(raw)));
        (!known(&home)).then_some(home)
    }

    /// Takes note of an event of `session` the agent only reports: a call that ran
    /// (`post_action`) brought what it read from the network into the session, which counts
    /// from then on (`session-taint`). Decides nothing; for the events nobody answers.
    pub fn observe_in(&self, session: &Session, event: &Event) {
        if event.event_type != EventType::PostAction
            || self.settings.session_taint == SessionTaint::NoOpinion
        {
            return;
        }
        let facts = self.facts(session, event, None);
        let taint = taint::taint_of(&facts, |u| hosts::allowed(self.hosts.as_ref(), u));
        session.memory.record(&event.session_id, Vec::new(), taint);
    }

    /// Why `event` gets its decision (`policy explain`): the decision, then each rule whose
    /// event type and tools apply, with each of its conditions and whether it held, rules
    /// that matched first, then those that came closest.
    pub fn explain(&self, event: &Event) -> (PolicyDecision, Vec<RuleExplained>) {
        let session = Session::default();
        let decision = self.evaluate_in(&session, event, None);
        let facts = self.facts(&session, event, None);
        let mut rules: Vec<RuleExplained> = self
            .rules
            .iter()
            .map(|r| RuleExplained {
                id: r.id.clone(),
                decision: r.decision,
                checks: r.explain(&facts),
            })
            .filter(|r| {
                r.checks
                    .iter()
                    .filter(|(key, _)| matches!(*key, "events" | "tools" | "tools_not"))
                    .all(|(_, held)| *held)
            })
            .collect();
        rules.sort_by_key(|r| std::cmp::Reverse((r.matched(), r.held())));
        (decision, rules)
    }
}

/// One rule as `policy explain` shows it.
#[derive(Debug, Clone)]
pub struct RuleExplained {
    /// The rule's id, as the policy file names it.
    pub id: String,
    /// What the rule answers when every condition holds.
    pub decision: DecisionKind,
    /// Each condition, and whether it held.
    pub checks: Vec<Check>,
}

impl RuleExplained {
    /// Every condition held.
    pub fn matched(&self) -> bool {
        self.checks.iter().all(|(_, held)| *held)
    }

    /// How many conditions held.
    pub fn held(&self) -> usize {
        self.checks.iter().filter(|(_, held)| *held).count()
    }
}

fn by_rule(verdict: Verdict, rule: &str) -> PolicyDecision {
    PolicyDecision {
        verdict,
        rule: Some(rule.to_owned()),
        reversible: None,
    }
}

/// The user's home in the password database, canonical.
fn passwd_home() -> Option<PathBuf> {
    let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok()??;
    Some(std::fs::canonicalize(&user.dir).unwrap_or(user.dir))
}

fn home_from_env() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
    std::fs::canonicalize(&home).unwrap_or(home)
}

/// The verdict a matching rule gives for this event.
fn verdict(rule: &Rule, event: &Event, facts: &Facts) -> Verdict {
    let reason = || match rule.detail(facts) {
        Some(detail) => format!("{} ({detail})", rule.reason),
        None => rule.reason.clone(),
    };
    match rule.decision {
        DecisionKind::Allow => Verdict::Allow {
            explicit: true,
            modified_payload: None,
            extra: Map::new(),
        },
        DecisionKind::Block => Verdict::Block { reason: reason() },
        DecisionKind::Defer => Verdict::Defer {
            retry_after_ms: rule.retry_after_ms,
            reason: Some(reason()),
        },
        DecisionKind::Escalate => Verdict::Escalate {
            reason: reason(),
            target: rule.target.clone(),
        },
        DecisionKind::Modify => Verdict::Modify {
            modified_payload: rewrite(rule, event, facts),
        },
    }
}

/// The payload with the rule's rewrite applied.
fn rewrite(rule: &Rule, event: &Event, facts: &Facts) -> Value {
    let mut payload = event.payload.clone();
    let original = facts.shell.first().map_or("", |s| s.text.as_str());
    let fill = |s: &str| {
        s.replace("{command}", original)
            .replace("{tool}", facts.tool.as_deref().unwrap_or_default())
    };
    if let Some(template) = &rule.rewrite.command {
        for src in &facts.shell {
            let text = template.replace("{command}", &src.text);
            let value = if src.argv_form {
                Value::from(vec!["bash".to_owned(), "-lc".to_owned(), text])
            } else {
                Value::from(text)
            };
            set_pointer(&mut payload, &src.pointer, value);
        }
    }
    for (pointer, value) in &rule.rewrite.set {
        let mut v = serde_json::to_value(value).unwrap_or(Value::Null);
        if let Value::String(s) = &v {
            v = Value::String(fill(s));
        }
        set_pointer(&mut payload, pointer, v);
    }
    payload
}

/// Sets the value at a JSON pointer, creating objects on the way.
fn set_pointer(root: &mut Value, pointer: &str, value: Value) {
    let mut cur = root;
    let keys: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|k| k.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, path)) = keys.split_last() else {
        *cur = value;
        return;
    };
    for k in path {
        cur = match cur {
            Value::Array(items) => match k.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(v) => v,
                None => return,
            },
            other => {
                if !other.is_object() {
                    *other = Value::Object(Map::new());
                }
                match other {
                    Value::Object(map) => map
                        .entry(k.clone())
                        .or_insert_with(|| Value::Object(Map::new())),
                    _ => return,
                }
            }
        };
    }
    match cur {
        Value::Array(items) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *slot = value;
            }
        }
        other => {
            if !other.is_object() {
                *other = Value::Object(Map::new());
            }
            if let Some(map) = other.as_object_mut() {
                map.insert(last.clone(), value);
            }
        }
    }
}
