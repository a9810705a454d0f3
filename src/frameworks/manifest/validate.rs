//! The checks a manifest passes before it is used, and where an error is: its line and its
//! field. What the format alone cannot say (one of `env` and `flag`, a block on every event,
//! no placeholder that does not exist, …) is checked here, on the manifest as written.

use serde_json::Value;
use toml::Spanned;

use super::{
    leak, Event, EventRaw, ManifestError, Output, OutputRaw, Raw, Rendering, Shape, PLACEHOLDERS,
};
use crate::frameworks::adapter::is_word;

pub(super) type At<'a> = dyn Fn(std::ops::Range<usize>, &str, String) -> ManifestError + 'a;

/// The checks across fields that the format alone cannot make.
pub(super) fn check_raw(raw: &Raw, at: &At<'_>) -> Result<(), ManifestError> {
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

pub(super) fn event(e: Spanned<EventRaw>, i: usize, at: &At<'_>) -> Result<Event, ManifestError> {
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
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The field a serde message names (`unknown field \`evnts\``, `missing field \`agent\``).
pub(super) fn field_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    let name = &message[start..start + len];
    // An unknown or missing field names itself; any other message (a wrong type, an
    // unknown variant) is about the value on the line, whose key is the field.
    message.contains("field `").then(|| name.to_owned())
}

/// The key written on the line at `offset` (`tool = "yes"` → `tool`), or the table header.
pub(super) fn key_on_line(text: &str, offset: usize) -> String {
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
