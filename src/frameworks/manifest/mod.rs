//! A shim as data: a TOML manifest that describes a command-hook agent completely, so that
//! an agent whose hooks follow a known shape needs no Rust.
//!
//! A manifest says how the agent is recognised (its executables and npm packages), how one
//! run's hooks are injected (a settings file in the run directory, named by a variable or a
//! flag, merged with the file it replaces), which hook events it fires and what AHP event
//! each becomes, where the fields sit in a hook's stdin JSON (JSON pointers), and how each
//! decision is written back (output templates and exit codes), including the decisions the
//! agent lacks and what they become. [`ManifestShim`] is the one
//! [`Framework`](crate::frameworks::adapter::Framework) that carries
//! any manifest out; the format is documented in `docs/shims.md`.
//!
//! Manifests come from the binary (every `shims/<name>/shim.toml`, compiled in), from
//! `--shim FILE`, from `AHP_WRAP_SHIM` (paths separated by `:`, which a run hands on to its
//! agent so that a hook process finds the manifest when the wrapper is gone), and from the
//! user's directory (`$XDG_CONFIG_HOME/ahp-wrap/shims/*.toml`).
//!
//! Must not touch: like every shim, only the adapter API (`crate::frameworks::adapter`).
//! A manifest that does not load is refused with its line and its field, never half used.

mod built_in;
pub(crate) mod check;
mod render;
mod shape;
mod shim;
mod sources;
mod validate;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

use crate::frameworks::adapter::EventType;

pub(crate) use built_in::built_in;
pub(crate) use shim::ManifestShim;
pub(crate) use sources::files_in;
pub(crate) use sources::{files, load, ENV_SHIM};
use validate::{check_raw, event, field_in, key_on_line, line_of};

/// A manifest that cannot be used: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {field}: {why}")]
pub struct ManifestError {
    /// The file (or the built-in manifest's path in the source tree).
    pub source_name: String,
    /// 1-based line of the offending value (or of the table that lacks it).
    pub line: usize,
    /// The field, as a dotted path (`events[2].block`), or the parser's own words.
    pub field: String,
    /// What is wrong, in words for the manifest's author.
    pub why: String,
}

/// The manifest as written, before it is checked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Spanned<String>,
    agent: String,
    executables: Spanned<Vec<String>>,
    #[serde(default)]
    packages: Vec<String>,
    proven: Option<Spanned<ProvenRaw>>,
    #[serde(default)]
    model_hosts: Vec<String>,
    #[serde(default)]
    model_url_env: Vec<String>,
    #[serde(default)]
    model_url_files: Vec<String>,
    #[serde(default)]
    instructions: Vec<String>,
    #[serde(default)]
    own_env: Vec<String>,
    #[serde(default)]
    files: Files,
    inject: Spanned<Inject>,
    #[serde(default)]
    payload: Pointers,
    events: Spanned<Vec<Spanned<EventRaw>>>,
    /// How a hook name we do not know is answered: its reason on stderr, and this code.
    #[serde(default = "default_unknown_hook_exit")]
    unknown_hook_exit: i32,
}

fn default_unknown_hook_exit() -> i32 {
    2
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ProvenRaw {
    One(String),
    Range([String; 2]),
}

/// What the agent keeps of its own under the home directory, for the floor.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Files {
    /// Directories the agent writes its state to, relative to the home directory
    /// (`.factory`).
    #[serde(default)]
    pub state: Vec<String>,
    /// Files or directories under the home directory that a run never lets it write:
    /// settings, hooks, and what later sessions obey or run (memory, commands, skills).
    #[serde(default)]
    pub protected: Vec<String>,
    /// Protected directories the run makes, empty, when missing (so that nothing can be
    /// planted in them): under the home directory, as `protected`.
    #[serde(default)]
    pub protected_dirs: Vec<String>,
    /// Protected paths in the project, relative to the workspace.
    #[serde(default)]
    pub project: Vec<String>,
    /// Files that mix the agent's bookkeeping with instructions (`[[files.mixed]]`).
    #[serde(default)]
    pub mixed: Vec<Mixed>,
}

/// One mixed state file under the home directory: the agent writes a private copy on the
/// floor, and at the end its changes to keys the rules call `own` are merged, the rest kept
/// aside (docs/shims.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Mixed {
    /// The file, relative to the home directory.
    pub path: String,
    /// How it is read and merged: `json` or `toml`.
    pub format: crate::frameworks::adapter::StateFormat,
    /// First match wins: `{ key = "mcpServers", treatment = "guarded" }`.
    #[serde(default)]
    pub keys: Vec<crate::frameworks::adapter::KeyRule>,
    /// A key no rule names.
    pub other: crate::frameworks::adapter::Treatment,
    /// The lock directory the agent takes around its writes, under the home directory.
    pub lock: Option<String>,
}

/// How one run's hooks reach the agent: a settings file written in the run directory.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Inject {
    /// The file's name in the run directory.
    pub file: Spanned<String>,
    /// The variable set to the file's path.
    pub env: Option<String>,
    /// Or the flag given the file's path, before the agent's own arguments.
    pub flag: Option<String>,
    /// The settings file the variable replaces (the variable's own value when it is set):
    /// its settings are merged into ours.
    pub replaces: Option<String>,
    /// A variable that must point back at the defaults file beside the replaced one.
    pub defaults_env: Option<String>,
    /// That defaults file's name, beside the replaced file.
    pub defaults_file: Option<String>,
    /// The unit the agent counts hook timeouts in.
    pub timeout_unit: TimeUnit,
    /// The tool-name matcher registered on tool events.
    #[serde(default = "default_matcher")]
    pub tool_matcher: String,
    /// Top-level settings forced in our file (e.g. hooks switched on).
    #[serde(default)]
    pub set: toml::Table,
    /// Flags with which the agent runs no hooks: a wrapped run refuses them.
    #[serde(default)]
    pub refuse_flags: Vec<String>,
    /// A hook the agent calls in every session once the injection works: a run whose agent
    /// never called it warns that it was not supervised.
    pub expect_hook: Option<String>,
}

fn default_matcher() -> String {
    "*".into()
}

/// The unit an agent counts its hook timeouts in (`inject.timeout_unit`): the injected
/// hooks' timeout is written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) enum TimeUnit {
    /// Whole seconds; written `"s"` in the manifest.
    #[serde(rename = "s")]
    Seconds,
    /// Milliseconds; written `"ms"` in the manifest.
    #[serde(rename = "ms")]
    Milliseconds,
}

/// A JSON pointer into a hook's stdin payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pointer(pub String);

impl<'de> Deserialize<'de> for Pointer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Pointer, D::Error> {
        let s = String::deserialize(d)?;
        if !s.starts_with('/') {
            return Err(serde::de::Error::custom(format!(
                "{s:?} is not a JSON pointer (one starts with '/', as in \"/tool_name\")"
            )));
        }
        Ok(Pointer(s))
    }
}

impl Pointer {
    /// The value at this pointer in `payload`.
    pub(crate) fn get<'v>(&self, payload: &'v Value) -> Option<&'v Value> {
        payload.pointer(&self.0)
    }

    /// The pointer's last segment: the key a copied value keeps (`/tool_use_id` →
    /// `tool_use_id`).
    pub(crate) fn key(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }
}

/// Where each field sits in a hook's stdin JSON.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Pointers {
    /// The agent's own session id: recorded beside ours, and sent as
    /// `framework_session_id` on session events.
    pub session: Option<Pointer>,
    /// The working directory, the `context`'s `working_directory`; else the hook process's
    /// own.
    pub cwd: Option<Pointer>,
    /// The tool's name; required on the tool shapes.
    pub tool_name: Option<Pointer>,
    /// The tool's input, renamed by `rename_arguments` (`{}` when absent).
    pub arguments: Option<Pointer>,
    /// Call ids, each copied under its last segment.
    #[serde(default)]
    pub call_ids: Vec<Pointer>,
    /// The user's prompt; required on the `prompt` shape.
    pub prompt: Option<Pointer>,
    /// The agent's answer, on the `response` shape.
    pub response: Option<Pointer>,
    /// Whether the agent is already going on because of a stop hook, on the `response`
    /// shape.
    pub stop_hook_active: Option<Pointer>,
    /// A tool's result: `result.output` of the `tool_result` shape.
    pub output: Option<Pointer>,
    /// A tool's failure: `result.error` of the `tool_failure` shape.
    pub error: Option<Pointer>,
    /// How long the tool ran, in milliseconds: `result.duration_ms`.
    pub duration_ms: Option<Pointer>,
    /// How the session started (`startup`, `resume`, …), on the `session_start` shape.
    pub source: Option<Pointer>,
    /// The agent's model, on the `session_start` shape.
    pub model: Option<Pointer>,
    /// Why the session ended, on the `session_end` shape.
    pub reason: Option<Pointer>,
    /// Fields copied into the AHP `context`, by their name there.
    #[serde(default)]
    pub context: BTreeMap<String, Pointer>,
    /// Tool argument names the agent uses for what the policy knows by another name (its
    /// paths and contents: `target_file = "file_path"`); a modified input is renamed back.
    #[serde(default)]
    pub rename_arguments: BTreeMap<String, String>,
}

/// What an event's payload becomes in AHP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Shape {
    /// A tool about to run: `tool_name`, `arguments`, call ids, `context`.
    ToolCall,
    /// A tool that ran: the call and its `result` (`output`, `duration_ms`).
    ToolResult,
    /// A tool that failed: the call and its `result` (`error`, `duration_ms`).
    ToolFailure,
    /// A user prompt: `prompt` (required) and `context`.
    Prompt,
    /// `framework`, `source`, `model`, `framework_session_id`, `context`.
    SessionStart,
    /// `framework`, `reason`, `framework_session_id`, `context`.
    SessionEnd,
    /// The agent's answer: `response`, `stop_hook_active`, `context`.
    Response,
    /// Any other hook: the whole payload as `hook_payload`, and `context`.
    Raw,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventRaw {
    name: String,
    ahp: EventType,
    shape: Shape,
    #[serde(default)]
    tool: bool,
    allow: Option<Spanned<OutputRaw>>,
    block: Option<Spanned<OutputRaw>>,
    ask: Option<Spanned<OutputRaw>>,
    modify: Option<Spanned<OutputRaw>>,
    context: Option<Spanned<OutputRaw>>,
}

/// One decision's rendering as written: an answer, or what the decision becomes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputRaw {
    stdout: Option<toml::Value>,
    stderr: Option<String>,
    exit: Option<i32>,
    becomes: Option<String>,
    reason: Option<String>,
}

/// What the hook prints and how it exits, with `{placeholders}` still in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Output {
    /// Printed as one line of JSON.
    pub stdout: Option<Value>,
    /// Printed on stderr, followed by a newline.
    pub stderr: Option<String>,
    /// The hook's exit code (0 when the manifest gives none).
    pub exit: i32,
}

/// How one decision is rendered on one event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rendering {
    /// The agent's own answer.
    Native(Output),
    /// The agent has no such answer: the call is blocked, with this reason (else the
    /// standard one for a decision that cannot be applied).
    Block(Option<String>),
}

/// One hook event of the agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    /// The agent's name for the hook (`PreToolUse`): a plain word, once per manifest; the
    /// injected hook command passes it back.
    pub name: &'static str,
    /// The AHP event type it becomes; a blocking one waits for a decision.
    pub ahp: EventType,
    /// What its payload becomes in AHP.
    pub shape: Shape,
    /// Registered with the tool matcher.
    pub tool: bool,
    /// The answer that lets it go on (default: nothing printed, exit 0).
    pub allow: Output,
    /// The answer to a block, and what a failed relay gives (on an event that is not
    /// blocking, only that), so every event has one.
    pub block: Output,
    /// The agent's own "ask the user", or the block it becomes; on blocking events only.
    pub ask: Rendering,
    /// The answer that applies a modified tool input (`{updated_input}`), or the block it
    /// becomes; on blocking events only.
    pub modify: Rendering,
    /// An allow that carries context for the model, where the agent takes one.
    pub context: Option<Output>,
}

/// A checked manifest.
#[derive(Debug)]
pub(crate) struct Manifest {
    /// The framework's name (`--framework NAME`, `ahp-wrap hook NAME <Event>`): one plain
    /// word.
    pub name: &'static str,
    /// How reasons and messages name the agent.
    pub agent: &'static str,
    /// The program file names the agent is recognised by (at least one).
    pub executables: &'static [&'static str],
    /// The npm packages `doctor` reads the installed version from.
    pub packages: &'static [&'static str],
    /// The versions its end-to-end suite has run, `(from, to)`, both included (one version:
    /// the same twice); `None`: not declared.
    pub proven: Option<(&'static str, &'static str)>,
    /// The hosts of its model and service (`host` or `*.domain`), which the floor's egress
    /// proxy lets through to the gate.
    pub model_hosts: &'static [&'static str],
    /// The variables that point the agent at its model API by URL (its base-URL override).
    pub model_url_env: &'static [&'static str],
    /// The person's files (`~/…`) that may point it at its model API by URL.
    pub model_url_files: &'static [&'static str],
    /// Its instruction files at any depth of a workspace (run-file patterns).
    pub instructions: &'static [&'static str],
    /// The credentials in the environment the agent needs (names, `*` for any run of
    /// characters): left in place on the floor.
    pub own_env: &'static [&'static str],
    /// What the agent keeps under the home directory and in the project, for the floor.
    pub files: Files,
    /// How one run's hooks reach the agent.
    pub inject: Inject,
    /// Where the fields sit in a hook's stdin JSON (`[payload]`).
    pub payload: Pointers,
    /// The hooks the agent fires, in the manifest's order (at least one).
    pub events: Vec<Event>,
    /// The exit code of a hook the manifest does not declare (its reason goes to stderr);
    /// 2 unless the manifest says.
    pub unknown_hook_exit: i32,
}

/// The placeholders a template may hold.
const PLACEHOLDERS: &[&str] = &[
    "{reason}",
    "{context}",
    "{event}",
    "{agent}",
    "{updated_input}",
];

/// Strings a manifest is loaded once per process for: kept for its lifetime.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn leak_all(v: Vec<String>) -> &'static [&'static str] {
    Box::leak(
        v.into_iter()
            .map(leak)
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

/// Reads a manifest: parsed, then checked. `source_name` names it in errors.
pub(crate) fn parse(text: &str, source_name: &str) -> Result<Manifest, ManifestError> {
    let at = |span: std::ops::Range<usize>, field: &str, why: String| ManifestError {
        source_name: source_name.to_owned(),
        line: line_of(text, span.start),
        field: field.to_owned(),
        why,
    };
    let raw: Raw = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let message = e.message().trim().to_owned();
        let field = field_in(&message).unwrap_or_else(|| key_on_line(text, span.start));
        at(span, &field, message)
    })?;
    check_raw(&raw, &at)?;
    let events = raw
        .events
        .into_inner()
        .into_iter()
        .enumerate()
        .map(|(i, e)| event(e, i, &at))
        .collect::<Result<Vec<_>, _>>()?;
    let proven = raw.proven.map(|p| match p.into_inner() {
        ProvenRaw::One(v) => {
            let v = leak(v);
            (v, v)
        }
        ProvenRaw::Range([from, to]) => (leak(from), leak(to)),
    });
    Ok(Manifest {
        name: leak(raw.name.into_inner()),
        agent: leak(raw.agent),
        executables: leak_all(raw.executables.into_inner()),
        packages: leak_all(raw.packages),
        proven,
        model_hosts: leak_all(raw.model_hosts),
        model_url_env: leak_all(raw.model_url_env),
        model_url_files: leak_all(raw.model_url_files),
        instructions: leak_all(raw.instructions),
        own_env: leak_all(raw.own_env),
        files: raw.files,
        inject: raw.inject.into_inner(),
        payload: raw.payload,
        events,
        unknown_hook_exit: raw.unknown_hook_exit,
    })
}

/// A TOML table (the settings a manifest forces) as a JSON object.
pub(crate) fn json_table(t: &toml::Table) -> Map<String, Value> {
    serde_json::to_value(t)
        .ok()
        .and_then(|v| match v {
            Value::Object(o) => Some(o),
            _ => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
