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

pub mod check;
mod render;
mod shape;
mod shim;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

use crate::frameworks::adapter::{is_word, EventType};

pub use shim::ManifestShim;

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
pub struct Files {
    #[serde(default)]
    pub state: Vec<String>,
    #[serde(default)]
    pub protected: Vec<String>,
}

/// How one run's hooks reach the agent: a settings file written in the run directory.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inject {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum TimeUnit {
    #[serde(rename = "s")]
    Seconds,
    #[serde(rename = "ms")]
    Milliseconds,
}

/// A JSON pointer into a hook's stdin payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer(pub String);

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
    pub fn get<'v>(&self, payload: &'v Value) -> Option<&'v Value> {
        payload.pointer(&self.0)
    }

    /// The pointer's last segment: the key a copied value keeps (`/tool_use_id` →
    /// `tool_use_id`).
    pub fn key(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }
}

/// Where each field sits in a hook's stdin JSON.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pointers {
    pub session: Option<Pointer>,
    pub cwd: Option<Pointer>,
    pub tool_name: Option<Pointer>,
    pub arguments: Option<Pointer>,
    /// Call ids, each copied under its last segment.
    #[serde(default)]
    pub call_ids: Vec<Pointer>,
    pub prompt: Option<Pointer>,
    pub response: Option<Pointer>,
    pub stop_hook_active: Option<Pointer>,
    pub output: Option<Pointer>,
    pub error: Option<Pointer>,
    pub duration_ms: Option<Pointer>,
    pub source: Option<Pointer>,
    pub model: Option<Pointer>,
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
pub enum Shape {
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
pub struct Output {
    /// Printed as one line of JSON.
    pub stdout: Option<Value>,
    pub stderr: Option<String>,
    pub exit: i32,
}

/// How one decision is rendered on one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Rendering {
    /// The agent's own answer.
    Native(Output),
    /// The agent has no such answer: the call is blocked, with this reason (else the
    /// standard one for a decision that cannot be applied).
    Block(Option<String>),
}

/// One hook event of the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub name: &'static str,
    pub ahp: EventType,
    pub shape: Shape,
    /// Registered with the tool matcher.
    pub tool: bool,
    pub allow: Output,
    pub block: Output,
    pub ask: Rendering,
    pub modify: Rendering,
    /// An allow that carries context for the model, where the agent takes one.
    pub context: Option<Output>,
}

/// A checked manifest.
#[derive(Debug)]
pub struct Manifest {
    pub name: &'static str,
    pub agent: &'static str,
    pub executables: &'static [&'static str],
    pub packages: &'static [&'static str],
    pub proven: Option<(&'static str, &'static str)>,
    pub model_hosts: &'static [&'static str],
    pub files: Files,
    pub inject: Inject,
    pub payload: Pointers,
    pub events: Vec<Event>,
    pub unknown_hook_exit: i32,
    /// Where it was loaded from.
    pub source_name: String,
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
pub fn parse(text: &str, source_name: &str) -> Result<Manifest, ManifestError> {
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
        files: raw.files,
        inject: raw.inject.into_inner(),
        payload: raw.payload,
        events,
        unknown_hook_exit: raw.unknown_hook_exit,
        source_name: source_name.to_owned(),
    })
}

type At<'a> = dyn Fn(std::ops::Range<usize>, &str, String) -> ManifestError + 'a;

/// The checks across fields that the format alone cannot make.
fn check_raw(raw: &Raw, at: &At<'_>) -> Result<(), ManifestError> {
    if !is_word(raw.name.get_ref()) {
        return Err(at(
            raw.name.span(),
            "name",
            "a shim's name is one plain word (letters, digits, '-', '_', '.')".into(),
        ));
    }
    if raw.executables.get_ref().is_empty() {
        return Err(at(
            raw.executables.span(),
            "executables",
            "name at least one executable, by which the agent is recognised".into(),
        ));
    }
    let inject = raw.inject.get_ref();
    let span = raw.inject.span();
    if inject.env.is_some() == inject.flag.is_some() {
        return Err(at(
            span,
            "inject",
            "name exactly one of `env` (a variable) and `flag` (an option) to give the agent the settings file".into(),
        ));
    }
    let file = inject.file.get_ref();
    if file.is_empty() || file.contains('/') || file.starts_with('.') {
        return Err(at(
            inject.file.span(),
            "inject.file",
            "a plain file name in the run directory".into(),
        ));
    }
    if inject.replaces.is_some() && inject.env.is_none() {
        return Err(at(
            span,
            "inject.replaces",
            "only a variable (`env`) can replace a settings file".into(),
        ));
    }
    if (inject.defaults_env.is_some() || inject.defaults_file.is_some())
        && !(inject.replaces.is_some()
            && inject.defaults_env.is_some()
            && inject.defaults_file.is_some())
    {
        return Err(at(
            span,
            "inject.defaults_env",
            "`defaults_env` and `defaults_file` go together, with `replaces`".into(),
        ));
    }
    let events = raw.events.get_ref();
    if events.is_empty() {
        return Err(at(
            raw.events.span(),
            "events",
            "declare at least one event".into(),
        ));
    }
    for (i, e) in events.iter().enumerate() {
        let name = &e.get_ref().name;
        if !is_word(name) {
            return Err(at(
                e.span(),
                &format!("events[{i}].name"),
                format!("{name:?} is not a plain word"),
            ));
        }
        if events[..i].iter().any(|o| &o.get_ref().name == name) {
            return Err(at(
                e.span(),
                &format!("events[{i}].name"),
                format!("{name:?} is declared twice"),
            ));
        }
    }
    if let Some(hook) = &inject.expect_hook {
        if !events.iter().any(|e| &e.get_ref().name == hook) {
            return Err(at(
                span,
                "inject.expect_hook",
                format!("{hook:?} is none of the events"),
            ));
        }
    }
    Ok(())
}

fn event(e: Spanned<EventRaw>, i: usize, at: &At<'_>) -> Result<Event, ManifestError> {
    let span = e.span();
    let e = e.into_inner();
    let field = |name: &str| format!("events[{i}].{name}");
    let blocking = e.ahp.is_blocking();
    let tool_call = e.shape == Shape::ToolCall;
    let output = |o: Spanned<OutputRaw>, name: &str| -> Result<Rendering, ManifestError> {
        rendering(o, &field(name), at)
    };
    let native = |o: Option<Spanned<OutputRaw>>, name: &str| -> Result<Output, ManifestError> {
        let Some(o) = o else {
            return Ok(Output::silence());
        };
        let o_span = o.span();
        match output(o, name)? {
            Rendering::Native(out) => Ok(out),
            Rendering::Block(_) => Err(at(
                o_span,
                &field(name),
                format!("`{name}` is always the agent's own answer; it cannot become another"),
            )),
        }
    };
    let Some(block) = e.block else {
        return Err(at(
            span,
            &field("block"),
            "every event needs a `block` output: a failed relay blocks any hook".into(),
        ));
    };
    let block_span = block.span();
    let block = native(Some(block), "block")?;
    // A block the agent would read as "go on" lets the call through.
    if blocking && block.stdout.is_none() && block.exit == 0 {
        return Err(at(
            block_span,
            &field("block"),
            format!(
                "a block of a {} event must print an answer on stdout or exit non-zero: silence and exit 0 is \"go on\"",
                e.ahp.as_str()
            ),
        ));
    }
    let non_blocking = |o: &Option<Spanned<OutputRaw>>, name: &str| -> Result<(), ManifestError> {
        match o {
            Some(o) if !blocking => Err(at(
                o.span(),
                &field(name),
                format!(
                    "a {} event is only ever answered allow or block",
                    e.ahp.as_str()
                ),
            )),
            _ => Ok(()),
        }
    };
    non_blocking(&e.ask, "ask")?;
    non_blocking(&e.modify, "modify")?;
    non_blocking(&e.context, "context")?;
    let lacking = |o: Option<Spanned<OutputRaw>>, name: &str| match o {
        Some(o) => output(o, name),
        None => Ok(Rendering::Block(None)),
    };
    let modify_span = e.modify.as_ref().map(Spanned::span);
    let modify = lacking(e.modify, "modify")?;
    if let (Rendering::Native(out), Some(s)) = (&modify, modify_span) {
        if !tool_call || !out.mentions("{updated_input}") {
            return Err(at(
                s,
                &field("modify"),
                "a modify the agent applies is a tool_call event's answer holding \"{updated_input}\"".into(),
            ));
        }
    }
    Ok(Event {
        name: leak(e.name),
        ahp: e.ahp,
        shape: e.shape,
        tool: e.tool,
        allow: native(e.allow, "allow")?,
        block,
        ask: lacking(e.ask, "ask")?,
        modify,
        context: e.context.map(|c| native(Some(c), "context")).transpose()?,
    })
}

fn rendering(o: Spanned<OutputRaw>, field: &str, at: &At<'_>) -> Result<Rendering, ManifestError> {
    let span = o.span();
    let o = o.into_inner();
    if let Some(becomes) = &o.becomes {
        if becomes != "block" {
            return Err(at(
                span,
                &format!("{field}.becomes"),
                format!("{becomes:?}: a decision the agent lacks can only become \"block\" (anything else would let the call through unchecked)"),
            ));
        }
        if o.stdout.is_some() || o.stderr.is_some() || o.exit.is_some() {
            return Err(at(
                span,
                field,
                "`becomes` says the agent has no answer of its own: no stdout, stderr or exit beside it".into(),
            ));
        }
        return Ok(Rendering::Block(o.reason));
    }
    if o.reason.is_some() {
        return Err(at(
            span,
            &format!("{field}.reason"),
            "a reason goes with `becomes`; an answer holds \"{reason}\" where the agent reads it"
                .into(),
        ));
    }
    let stdout = o
        .stdout
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| at(span.clone(), &format!("{field}.stdout"), e.to_string()))?;
    let out = Output {
        stdout,
        stderr: o.stderr,
        exit: o.exit.unwrap_or(0),
    };
    if let Some(unknown) = out.unknown_placeholder() {
        return Err(at(
            span,
            field,
            format!(
                "{unknown} is not a placeholder (there are {})",
                PLACEHOLDERS.join(", ")
            ),
        ));
    }
    Ok(Rendering::Native(out))
}

impl Output {
    fn silence() -> Output {
        Output {
            stdout: None,
            stderr: None,
            exit: 0,
        }
    }

    /// Whether any string of the output holds `placeholder`.
    fn mentions(&self, placeholder: &str) -> bool {
        let mut found = false;
        self.strings(&mut |s| found |= s.contains(placeholder));
        found
    }

    /// The first `{word}` in a string that is not a placeholder.
    fn unknown_placeholder(&self) -> Option<String> {
        let mut unknown = None;
        self.strings(&mut |s| {
            for (at, _) in s.match_indices('{') {
                let Some(len) = s[at..].find('}') else {
                    continue;
                };
                let word = &s[at..=at + len];
                let plain = word[1..word.len() - 1]
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_');
                if plain && len > 1 && !PLACEHOLDERS.contains(&word) && unknown.is_none() {
                    unknown = Some(word.to_owned());
                }
            }
        });
        unknown
    }

    fn strings(&self, f: &mut dyn FnMut(&str)) {
        fn walk(v: &Value, f: &mut dyn FnMut(&str)) {
            match v {
                Value::String(s) => f(s),
                Value::Array(a) => a.iter().for_each(|v| walk(v, f)),
                Value::Object(o) => o.iter().for_each(|(k, v)| {
                    f(k);
                    walk(v, f)
                }),
                _ => {}
            }
        }
        if let Some(v) = &self.stdout {
            walk(v, f);
        }
        if let Some(s) = &self.stderr {
            f(s);
        }
    }
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The field a serde message names (`unknown field \`evnts\``, `missing field \`agent\``).
fn field_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    let name = &message[start..start + len];
    // An unknown or missing field names itself; any other message (a wrong type, an
    // unknown variant) is about the value on the line, whose key is the field.
    message.contains("field `").then(|| name.to_owned())
}

/// The key written on the line at `offset` (`tool = "yes"` → `tool`), or the table header.
fn key_on_line(text: &str, offset: usize) -> String {
    let start = text[..offset.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("").trim();
    line.split('=')
        .next()
        .unwrap_or(line)
        .trim()
        .trim_matches(|c| c == '[' || c == ']')
        .to_owned()
}

/// The manifests compiled into the binary: every `shims/<name>/shim.toml`, by its path.
const BUILT_IN: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/built_in_shims.rs"));

/// The built-in manifests. One that does not load is a bug its unit test catches; should
/// it reach a build, it is left out with an error in the log.
pub fn built_in() -> Vec<Manifest> {
    BUILT_IN
        .iter()
        .filter_map(|(path, text)| match parse(text, path) {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::error!("the built-in shim {path} does not load: {e}");
                None
            }
        })
        .collect()
}

/// The variable that names extra manifest files (separated by `:`), for a run and its hooks.
pub const ENV_SHIM: &str = "AHP_WRAP_SHIM";

/// The user's own directory of manifests: `$XDG_CONFIG_HOME/ahp-wrap/shims`, else
/// `~/.config/ahp-wrap/shims`.
pub fn user_dir() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| Path::new(&h).join(".config"))
        })?;
    Some(config.join("ahp-wrap").join("shims"))
}

/// The manifest in `path`.
pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
        source_name: name.clone(),
        line: 0,
        field: "(file)".into(),
        why: format!("cannot read it: {e}"),
    })?;
    parse(&text, &name)
}

/// The manifest files to load beside the built-in ones: those `AHP_WRAP_SHIM` names, then
/// the `*.toml` files of the user's directory, sorted.
pub fn files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::env::var_os(ENV_SHIM)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if let Some(dir) = user_dir() {
        files.extend(files_in(&dir, "toml"));
    }
    files
}

/// The files of `dir` whose extension is `ext`, sorted; none when it cannot be read.
pub(crate) fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
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
