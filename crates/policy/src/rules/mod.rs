//! The policy file format (TOML, deserialised with serde) and its rules compiled for matching.

use std::collections::BTreeMap;

use serde::Deserialize;

mod command;
mod patterns;

use super::extract::{CommandFacts, Facts};
use super::paths::{ResolvedPath, Where};
use crate::error::PolicyError;
use ahp_wrap_wire::protocol::EventType;
use command::CommandCond;
use patterns::{PathCond, Patterns};

/// One condition of a rule and whether it held, as `policy explain` reports it.
pub type Check = (&'static str, bool);

/// A policy file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPolicy {
    pub version: Option<u32>,
    /// `"default"`: this file adds to the default policy (its rules first, then this file's;
    /// a rule with a default rule's id replaces it) instead of standing alone.
    #[serde(default)]
    pub extends: Option<String>,
    /// With `extends`: ids of the default rules this file leaves out.
    #[serde(default)]
    pub disable: Vec<String>,
    /// `None` when the file has no `[settings]` (then an extended policy keeps its own).
    #[serde(default)]
    pub settings: Option<Settings>,
    #[serde(default, rename = "rule")]
    pub rules: Vec<RawRule>,
    /// The kernel's floor: read on its own by [`crate::floor_spec`]; here checked, so that a
    /// policy with a bad `[floor]` does not load, and its `[floor.net]` host rules taken for
    /// the URLs tools contact.
    #[serde(default)]
    pub floor: Option<ahp_wrap_floor::Spec>,
    /// The workspace's checkpoints: read on its own by [`crate::checkpoint_spec`]; here
    /// checked, so that a policy with a bad `[checkpoints]` does not load.
    #[serde(default)]
    #[allow(dead_code, reason = "checked here, read on its own by checkpoint_spec")]
    pub checkpoints: Option<crate::checkpoints::CheckpointSpec>,
}

/// Policy-wide settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// What to answer for a shell command that cannot be parsed.
    #[serde(default)]
    pub unparseable: Unparseable,
    /// What to answer for a write to a build or dependency file once content from the
    /// network entered the session (`session-taint`).
    #[serde(default)]
    pub session_taint: SessionTaint,
}

/// The answer for a write to a build or dependency file in a session that read content from
/// the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionTaint {
    /// Ask a person (`escalate`, the default).
    #[default]
    Escalate,
    /// Leave it to the other rules (`no_opinion`).
    NoOpinion,
}

/// The answer for a shell command that cannot be parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unparseable {
    /// Ask a person (`escalate`, the default).
    #[default]
    Escalate,
    /// Refuse it (`block`).
    Block,
    /// Leave it to the other rules and the fail mode (`no_opinion`).
    NoOpinion,
}

/// The decision a rule gives when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Let the action run (`allow`).
    Allow,
    /// Refuse it, with the rule's reason (`block`).
    Block,
    /// Run it changed, as the rule rewrites it (`modify`).
    Modify,
    /// Not now: the agent may try again after the rule's `retry_after_ms` (`defer`).
    Defer,
    /// Ask a person, at the terminal or on the approvals page (`escalate`).
    Escalate,
}

impl DecisionKind {
    /// Strictness: block > escalate > defer > modify > explicit allow (> no opinion, 0).
    pub fn rank(self) -> u8 {
        match self {
            DecisionKind::Block => 5,
            DecisionKind::Escalate => 4,
            DecisionKind::Defer => 3,
            DecisionKind::Modify => 2,
            DecisionKind::Allow => 1,
        }
    }

    /// As a policy file writes it.
    pub fn name(self) -> &'static str {
        match self {
            DecisionKind::Block => "block",
            DecisionKind::Escalate => "escalate",
            DecisionKind::Defer => "defer",
            DecisionKind::Modify => "modify",
            DecisionKind::Allow => "allow",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    pub id: String,
    pub description: Option<String>,
    pub decision: DecisionKind,
    pub reason: Option<String>,
    pub events: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    /// Tool names the rule does not apply to.
    pub tools_not: Option<Vec<String>>,
    pub command: Option<RawCommand>,
    pub file: Option<RawFile>,
    pub url: Option<RawUrl>,
    pub rewrite: Option<Rewrite>,
    pub retry_after_ms: Option<u64>,
    pub target: Option<String>,
    /// Escalate only: the call is allowed when the run's checkpoints keep everything the
    /// command discards (the run judges; the policy says what it reaches).
    #[serde(default)]
    pub reversible: bool,
    #[serde(default, rename = "match")]
    pub matches: Vec<Example>,
    #[serde(default)]
    pub no_match: Vec<Example>,
}

/// A rule example: a shell command line, or an event (or its payload) as a table.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Example {
    Command(String),
    Event(toml::Table),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCommand {
    pub program: Option<Vec<String>>,
    pub program_not: Option<Vec<String>>,
    /// One list: some argument matches. A list of lists: for each list, some argument matches.
    pub args_any: Option<ArgsAny>,
    pub args_all: Option<Vec<String>>,
    pub operands: Option<RawPathCond>,
    pub reads: Option<RawPathCond>,
    pub writes: Option<RawPathCond>,
    pub env: Option<Vec<String>>,
    pub fed_by: Option<Vec<String>>,
    pub deletes: Option<RawPathCond>,
    /// Something known only at run time stands where it matters (or, with `false`, nothing).
    pub unknown: Option<bool>,
    /// The command runs code nobody can read now (piped, downloaded, decoded, built at run
    /// time, written earlier in the same command).
    pub dynamic_code: Option<bool>,
    /// Code the command runs from a file could not be checked (too large, not a regular
    /// file, too many files, or the agent's own code building what it runs at run time).
    pub unread_code: Option<bool>,
    /// A package it installs is one or two edits from a popular one (`pip install reqeusts`).
    pub typosquat: Option<bool>,
    /// Patterns on the literal code an interpreter runs (`python -c`, `awk '…'`).
    pub code_matches: Option<Vec<String>>,
    /// Names of variables the arguments refer to.
    pub vars: Option<Vec<String>>,
    /// Wrappers the command must not run under (e.g. `ahp-wrap`).
    pub via_not: Option<Vec<String>>,
    /// (`kill`, `pkill -P`, …) some argument is the pid or process group of the wrapper or
    /// its guardian, or every process (`-1`).
    pub wrapper_pid: Option<bool>,
}

/// `args_any` as written: one list, or several that must all find a match.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum ArgsAny {
    One(Vec<String>),
    All(Vec<Vec<String>>),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    pub reads: Option<RawPathCond>,
    pub writes: Option<RawPathCond>,
    pub paths: Option<RawPathCond>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUrl {
    pub hosts: Option<Vec<String>>,
    pub urls: Option<Vec<String>>,
    pub schemes: Option<Vec<String>>,
}

/// A path condition: a list of globs, or a table of globs, places and exceptions.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawPathCond {
    Globs(Vec<String>),
    Table {
        #[serde(default)]
        glob: Vec<String>,
        #[serde(default, rename = "where")]
        wheres: Vec<Where>,
        #[serde(default)]
        not: Vec<String>,
        /// Globs that hold only for a path outside the workspace (a start-up file by its
        /// name, in whatever home the agent runs with).
        #[serde(default)]
        outside: Vec<String>,
    },
}

/// How a `modify` rule rewrites the payload.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rewrite {
    /// A new shell command line; `{command}` stands for the original.
    pub command: Option<String>,
    /// JSON pointers into the payload and the values to put there.
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
}

/// A compiled rule.
#[derive(Debug)]
pub(crate) struct Rule {
    pub id: String,
    pub decision: DecisionKind,
    pub reason: String,
    pub target: Option<String>,
    pub retry_after_ms: u64,
    pub rewrite: Rewrite,
    /// `reversible = true`: allowed when the checkpoints keep what the command discards.
    pub reversible: bool,
    events: Vec<EventType>,
    tools: Option<Patterns>,
    tools_not: Option<Patterns>,
    command: Option<CommandCond>,
    file: Option<FileCond>,
    url: Option<UrlCond>,
    pub matches: Vec<Example>,
    pub no_match: Vec<Example>,
}

#[derive(Debug)]
struct FileCond {
    reads: Option<PathCond>,
    writes: Option<PathCond>,
    paths: Option<PathCond>,
}

impl FileCond {
    /// Compiles a `[rule.file]` table.
    fn compile(id: &str, f: &RawFile) -> Result<FileCond, PolicyError> {
        Ok(FileCond {
            reads: path_cond(id, &f.reads)?,
            writes: path_cond(id, &f.writes)?,
            paths: path_cond(id, &f.paths)?,
        })
    }
}

#[derive(Debug)]
struct UrlCond {
    hosts: Option<Patterns>,
    urls: Option<Patterns>,
    schemes: Option<Patterns>,
}

impl UrlCond {
    /// Compiles a `[rule.url]` table; hosts and schemes match in lower case.
    fn compile(id: &str, u: &RawUrl) -> Result<UrlCond, PolicyError> {
        let lower = |l: &Option<Vec<String>>| {
            l.as_ref()
                .map(|v| v.iter().map(|s| s.to_lowercase()).collect())
        };
        Ok(UrlCond {
            hosts: patterns(id, &lower(&u.hosts))?,
            urls: patterns(id, &u.urls)?,
            schemes: patterns(id, &lower(&u.schemes))?,
        })
    }
}

impl Rule {
    /// Compiles a rule as written; every glob and regex is compiled here, once.
    pub(crate) fn compile(raw: RawRule) -> Result<Rule, PolicyError> {
        let id = raw.id.clone();
        if id.trim().is_empty() {
            return Err(invalid(&id, "the id is empty"));
        }
        let events = compile_events(&id, &raw.events)?;
        let reason = checked_reason(&id, &raw)?;
        let rewrite = checked_rewrite(&id, &raw)?;
        if raw.reversible && raw.decision != DecisionKind::Escalate {
            return Err(invalid(&id, "only an escalate rule may be reversible"));
        }
        let command = raw
            .command
            .as_ref()
            .map(|c| CommandCond::compile(&id, c))
            .transpose()?;
        let file = raw
            .file
            .as_ref()
            .map(|f| FileCond::compile(&id, f))
            .transpose()?;
        let url = raw
            .url
            .as_ref()
            .map(|u| UrlCond::compile(&id, u))
            .transpose()?;
        Ok(Rule {
            tools: patterns(&id, &raw.tools)?,
            tools_not: patterns(&id, &raw.tools_not)?,
            id,
            decision: raw.decision,
            reason,
            target: raw.target,
            retry_after_ms: raw.retry_after_ms.unwrap_or(1000),
            rewrite,
            reversible: raw.reversible,
            events,
            command,
            file,
            url,
            matches: raw.matches,
            no_match: raw.no_match,
        })
    }

    /// For a matching rule, what people need to know beyond its reason: the file whose code
    /// it matched in (a script, a recipe, a package script), and why that code could not be
    /// checked, when that is what the rule is about.
    pub(crate) fn detail(&self, f: &Facts) -> Option<String> {
        let cf = match (&self.command, &self.file) {
            (Some(c), _) => f.commands.iter().find(|cf| c.is_match(cf, f))?,
            (None, Some(fc)) => f.commands.iter().find(|cf| {
                cf.cmd.from.is_some() && {
                    let changed: Vec<ResolvedPath> =
                        cf.writes.iter().chain(&cf.deletes).cloned().collect();
                    let all: Vec<ResolvedPath> = cf.reads.iter().chain(&changed).cloned().collect();
                    fc.reads.as_ref().is_some_and(|c| c.any(&cf.reads, f))
                        || fc.writes.as_ref().is_some_and(|c| c.any(&changed, f))
                        || fc.paths.as_ref().is_some_and(|c| c.any(&all, f))
                }
            })?,
            (None, None) => return None,
        };
        let why = match &self.command {
            Some(c) if c.unread_code == Some(true) => cf.cmd.unread.as_deref(),
            Some(c) if c.typosquat == Some(true) => cf.typosquat.as_deref(),
            _ => None,
        };
        match (why, cf.cmd.from.as_deref()) {
            (Some(why), Some(o)) => Some(format!("{why}; in {}", o.label)),
            (Some(why), None) => Some(why.to_owned()),
            (None, Some(o)) => Some(format!("in {}, which this command runs", o.label)),
            (None, None) => None,
        }
    }

    /// The simple commands of the event that its `[rule.command]` matches (none for a rule
    /// without one): what a `reversible` rule's judgement reads.
    pub(crate) fn matching_commands<'f>(&self, f: &'f Facts) -> Vec<&'f CommandFacts> {
        match &self.command {
            Some(c) => f.commands.iter().filter(|cf| c.is_match(cf, f)).collect(),
            None => Vec::new(),
        }
    }

    /// Whether every selector of the rule matches the event.
    pub(crate) fn is_match(&self, f: &Facts) -> bool {
        self.events.contains(&f.event_type)
            && self.tools_hold(f)
            && self.tools_not_hold(f)
            && self
                .command
                .as_ref()
                .is_none_or(|c| f.commands.iter().any(|cf| c.is_match(cf, f)))
            && self.file_holds(f)
            && self.url_holds(f)
    }

    /// Each condition of the rule and whether it holds for the event, for `policy explain`:
    /// its event types and tools, each key of `[rule.command]` for the command that comes
    /// closest, `[rule.file]` and `[rule.url]` as one each.
    pub(crate) fn explain(&self, f: &Facts) -> Vec<Check> {
        let mut out = vec![("events", self.events.contains(&f.event_type))];
        if self.tools.is_some() {
            out.push(("tools", self.tools_hold(f)));
        }
        if self.tools_not.is_some() {
            out.push(("tools_not", self.tools_not_hold(f)));
        }
        if let Some(c) = &self.command {
            let closest = f
                .commands
                .iter()
                .map(|cf| {
                    let mut keys = Vec::new();
                    c.check(cf, f, |key, held| {
                        keys.push((key, held));
                        true
                    });
                    keys
                })
                .max_by_key(|keys| keys.iter().filter(|(_, held)| *held).count());
            out.extend(closest.unwrap_or_else(|| vec![("command", false)]));
        }
        if self.file.is_some() {
            out.push(("file", self.file_holds(f)));
        }
        if self.url.is_some() {
            out.push(("url", self.url_holds(f)));
        }
        out
    }

    fn tools_hold(&self, f: &Facts) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| f.tool.as_deref().is_some_and(|t| tools.is_match(t)))
    }

    fn tools_not_hold(&self, f: &Facts) -> bool {
        self.tools_not
            .as_ref()
            .is_none_or(|not| !f.tool.as_deref().is_some_and(|t| not.is_match(t)))
    }

    fn file_holds(&self, f: &Facts) -> bool {
        let Some(fc) = &self.file else {
            return true;
        };
        let both: Vec<ResolvedPath> = match &fc.paths {
            Some(_) => f.reads.iter().chain(&f.writes).cloned().collect(),
            None => Vec::new(),
        };
        let ok = |c: &Option<PathCond>, items: &[ResolvedPath]| {
            c.as_ref().is_none_or(|c| c.any(items, f))
        };
        ok(&fc.reads, &f.reads) && ok(&fc.writes, &f.writes) && ok(&fc.paths, &both)
    }

    fn url_holds(&self, f: &Facts) -> bool {
        let Some(u) = &self.url else {
            return true;
        };
        f.urls.iter().any(|url| {
            // `metadata.google.internal.` (fully qualified) is the same host.
            let host = url
                .host_str()
                .unwrap_or_default()
                .trim_end_matches('.')
                .to_lowercase();
            u.hosts.as_ref().is_none_or(|p| p.is_match(&host))
                && u.urls.as_ref().is_none_or(|p| p.is_match(url.as_str()))
                && u.schemes.as_ref().is_none_or(|p| p.is_match(url.scheme()))
        })
    }
}

/// The error for rule `id` written wrong.
fn invalid(id: &str, message: &str) -> PolicyError {
    PolicyError::InvalidRule {
        rule: id.to_owned(),
        message: message.to_owned(),
    }
}

/// A list of patterns (not paths), compiled if given.
fn patterns(id: &str, list: &Option<Vec<String>>) -> Result<Option<Patterns>, PolicyError> {
    list.as_ref()
        .map(|l| Patterns::compile(id, l, false))
        .transpose()
}

/// A path condition, compiled if given.
fn path_cond(id: &str, raw: &Option<RawPathCond>) -> Result<Option<PathCond>, PolicyError> {
    raw.as_ref().map(|r| PathCond::compile(id, r)).transpose()
}

/// The event types a rule applies to: those named, or `pre_action` when none are.
fn compile_events(id: &str, names: &Option<Vec<String>>) -> Result<Vec<EventType>, PolicyError> {
    match names {
        None => Ok(vec![EventType::PreAction]),
        Some(names) => names
            .iter()
            .map(|n| {
                EventType::parse(n).ok_or_else(|| invalid(id, &format!("unknown event type {n:?}")))
            })
            .collect(),
    }
}

/// The rule's reason (its description when it has none), required unless it allows or
/// modifies.
fn checked_reason(id: &str, raw: &RawRule) -> Result<String, PolicyError> {
    let reason = raw.reason.clone().or_else(|| raw.description.clone());
    match (raw.decision, reason) {
        (_, Some(r)) => Ok(r),
        (DecisionKind::Allow | DecisionKind::Modify, None) => Ok(String::new()),
        (_, None) => Err(invalid(
            id,
            "a block, defer or escalate rule needs a reason",
        )),
    }
}

/// The rule's rewrite: required of a modify rule, refused on any other.
fn checked_rewrite(id: &str, raw: &RawRule) -> Result<Rewrite, PolicyError> {
    let rewrite = raw.rewrite.clone().unwrap_or_default();
    if raw.decision == DecisionKind::Modify && rewrite.command.is_none() && rewrite.set.is_empty() {
        return Err(invalid(id, "a modify rule needs a rewrite"));
    }
    if raw.decision != DecisionKind::Modify && raw.rewrite.is_some() {
        return Err(invalid(id, "only a modify rule may have a rewrite"));
    }
    Ok(rewrite)
}
