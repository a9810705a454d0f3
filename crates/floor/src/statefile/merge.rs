//! What the agent changed in its copy of a mixed state file, key by key; which changes are
//! merged into the real file and which are kept aside; and the merge itself, written
//! atomically against what the real file holds at the end (another session may have written
//! it meanwhile).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Format, StateFile, Treatment};

/// One changed key: its value before (`None`: absent) and after (`None`: removed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The key's path of names from the top of the document (a list member's last name is
    /// the member itself, see `member`).
    pub key: Vec<String>,
    /// The value before the run; `None` when the key was absent.
    pub old: Option<Value>,
    /// The value after the run; `None` when the agent removed the key.
    pub new: Option<Value>,
    /// The key's last name is a member of a list of strings (`trustedFolders`, a project's
    /// `allowedTools`) added (`new` is `true`) or removed (`old` is `true`): each member is
    /// sorted on its own, as if the list were a table of them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub member: bool,
}

impl Change {
    /// The change that undoes this one.
    pub fn undone(&self) -> Change {
        Change {
            key: self.key.clone(),
            old: self.new.clone(),
            new: self.old.clone(),
            member: self.member,
        }
    }
}

/// A run's changes, sorted.
#[derive(Debug, Default, PartialEq)]
pub struct Sorted {
    /// To the agent's own keys: merged.
    pub merged: Vec<Change>,
    /// To instruction keys: kept aside.
    pub kept: Vec<Change>,
}

/// Why a state file could not be read, merged or written.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The file exists but could not be read.
    #[error("read {path}")]
    Read {
        /// The file, for display.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file's bytes are not a document of its format.
    #[error("{path} is not valid {format}: {why}")]
    Parse {
        /// The file, for display.
        path: String,
        /// The format's name as shown: `JSON` or `TOML`.
        format: &'static str,
        /// The parser's message.
        why: String,
    },
    /// The file parses, but to something other than a table (an object in JSON).
    #[error("{path} does not hold a table at its top")]
    NotATable {
        /// The file, for display.
        path: String,
    },
    /// Writing the new file beside it, syncing or renaming it over the file failed.
    #[error("write {path}")]
    Write {
        /// The file, for display.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The merged document could not be written in the file's format (a value TOML cannot
    /// hold, for a TOML file).
    #[error("serialize {path}: {why}")]
    Serialize {
        /// The file, for display.
        path: String,
        /// The serializer's message.
        why: String,
    },
}

/// The document `bytes` hold, in `format`; an empty file is an empty table (a file the run
/// made so that the floor could bind the copy over it).
pub fn parse(bytes: &[u8], format: Format, path: &Path) -> Result<Value, MergeError> {
    let bad = |why: String| MergeError::Parse {
        path: path.display().to_string(),
        format: match format {
            Format::Json => "JSON",
            Format::Toml => "TOML",
        },
        why,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    let value = match format {
        Format::Json => match serde_json::from_slice(bytes) {
            Ok(v) => v,
            // Some agents head their JSON with `//` comment lines (Copilot's config.json).
            Err(e) => serde_json::from_slice(&without_comment_lines(bytes))
                .map_err(|_| bad(e.to_string()))?,
        },
        Format::Toml => {
            let text = std::str::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
            let table: toml::Table = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
            serde_json::to_value(table).map_err(|e| bad(e.to_string()))?
        }
    };
    if !value.is_object() {
        return Err(MergeError::NotATable {
            path: path.display().to_string(),
        });
    }
    Ok(value)
}

/// `bytes` without its lines that start (after blanks) with `//`.
fn without_comment_lines(bytes: &[u8]) -> Vec<u8> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .filter(|line| !line.trim_ascii_start().starts_with(b"//"))
        .flatten()
        .copied()
        .collect()
}

/// `doc` written back in `format` (JSON as the agents write it: two-space indentation).
pub(crate) fn serialize(doc: &Value, format: Format, path: &Path) -> Result<Vec<u8>, MergeError> {
    let bad = |why: String| MergeError::Serialize {
        path: path.display().to_string(),
        why,
    };
    match format {
        Format::Json => serde_json::to_vec_pretty(doc).map_err(|e| bad(e.to_string())),
        Format::Toml => {
            let table: toml::Table =
                serde_json::from_value(doc.clone()).map_err(|e| bad(e.to_string()))?;
            toml::to_string(&table)
                .map(String::into_bytes)
                .map_err(|e| bad(e.to_string()))
        }
    }
}

/// Every key whose value differs between `before` and `after`, down to the leaves: tables
/// are compared key by key (a table added or removed whole counts as each of its keys, an
/// empty one as itself); anything else (a list, a string, a number) is one value.
pub(crate) fn changes(before: &Value, after: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk(Some(before), Some(after), &mut Vec::new(), &mut out);
    out
}

fn walk(
    before: Option<&Value>,
    after: Option<&Value>,
    key: &mut Vec<String>,
    out: &mut Vec<Change>,
) {
    let table = |v: Option<&Value>| match v {
        Some(Value::Object(m)) => Some(m.clone()),
        None => Some(Map::new()),
        Some(_) => None,
    };
    if before == after {
        return;
    }
    if let (Some(b), Some(a)) = (strings(before), strings(after)) {
        if !(b.is_empty() && a.is_empty()) {
            for m in b.iter().filter(|m| !a.contains(m)) {
                out.push(member(key, m, true, false));
            }
            for m in a.iter().filter(|m| !b.contains(m)) {
                out.push(member(key, m, false, true));
            }
            return;
        }
    }
    let empty_table = |v: Option<&Value>| matches!(v, Some(Value::Object(m)) if m.is_empty());
    let whole =
        (before.is_none() && empty_table(after)) || (after.is_none() && empty_table(before));
    if let (false, Some(b), Some(a)) = (whole, table(before), table(after)) {
        let mut names: Vec<&String> = b.keys().chain(a.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            key.push(name.clone());
            walk(b.get(name), a.get(name), key, out);
            key.pop();
        }
        return;
    }
    out.push(Change {
        key: key.clone(),
        old: before.cloned(),
        new: after.cloned(),
        member: false,
    });
}

/// The strings of a list of strings (`None` when absent: an empty list, not a list of
/// strings: nothing), `Some` only where members can be compared.
fn strings(v: Option<&Value>) -> Option<Vec<&str>> {
    match v {
        None => Some(Vec::new()),
        Some(Value::Array(a)) if !a.is_empty() => a.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

fn member(key: &[String], name: &str, was: bool, is: bool) -> Change {
    let mut key = key.to_vec();
    key.push(name.to_owned());
    Change {
        key,
        old: was.then_some(Value::Bool(true)),
        new: is.then_some(Value::Bool(true)),
        member: true,
    }
}

/// Sorts `changes` to `file` by its rules, for a run in `workspace`. A key added with an
/// empty value (`[]`, `{}`, `false`, `null`) adds nothing a later session could obey, and
/// is merged whatever its rule; a value that replaces or removes a table beneath which a guarded key
/// may lie is kept aside.
///
/// A change kept aside is shown at the entry its rule names (`mcpServers.evil`, not each
/// key of that server), else at the table added or removed whole.
pub fn sort(file: &StateFile, before: &Value, after: &Value, workspace: &[String]) -> Sorted {
    let mut sorted = Sorted::default();
    let mut guarded = Vec::new();
    for change in changes(before, after) {
        let empty = |v: &Option<Value>| match v {
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Bool(b)) => !b,
            Some(Value::Null) => true,
            _ => false,
        };
        let table = |v: &Option<Value>| matches!(v, Some(Value::Object(m)) if !m.is_empty());
        let treatment = if change.old.is_none() && empty(&change.new) {
            Treatment::Own
        } else if (table(&change.old) || table(&change.new))
            && file.guards_beneath(&change.key, workspace)
        {
            Treatment::Guarded
        } else {
            file.treatment(&change.key, workspace)
        };
        match treatment {
            Treatment::Own => sorted.merged.push(change),
            Treatment::Guarded => guarded.push(change),
        }
    }
    // Each kept change is shown, and kept, at the shallowest key that holds nothing merged
    // and is the entry its rule names or a table added or removed whole.
    for change in guarded {
        if change.member {
            sorted.kept.push(change);
            continue;
        }
        let rule_entry = file.rule_depth(&change.key, workspace).map(|d| d + 1);
        let entry = (1..change.key.len())
            .find(|&n| {
                let k = &change.key[..n];
                let whole = lookup(before, k).is_none() || lookup(after, k).is_none();
                (whole || rule_entry == Some(n))
                    && !sorted.merged.iter().any(|m| m.key.starts_with(k))
            })
            .unwrap_or(change.key.len());
        let key = change.key[..entry].to_vec();
        if sorted.kept.iter().any(|k| k.key == key) {
            continue;
        }
        sorted.kept.push(Change {
            old: lookup(before, &key).cloned(),
            new: lookup(after, &key).cloned(),
            key,
            member: false,
        });
    }
    // A change beneath one kept whole is in it.
    let whole: Vec<Vec<String>> = sorted.kept.iter().map(|c| c.key.clone()).collect();
    sorted.kept.retain(|c| {
        !whole
            .iter()
            .any(|w| w.len() < c.key.len() && c.key.starts_with(w))
    });
    sorted
}

/// Applies `changes` to `doc`; `after` is the copy they came from (a table the changes
/// emptied that the copy no longer has goes too). Returns the changes that could not be
/// applied: a key beneath something in `doc` that is no longer a table.
pub(crate) fn apply(doc: &mut Value, changes: &[Change], after: &Value) -> Vec<Change> {
    let mut failed = Vec::new();
    for change in changes {
        let applied = match change.member {
            true => apply_member(doc, change),
            false => apply_value(doc, change, after),
        };
        if !applied {
            failed.push(change.clone());
        }
    }
    failed
}

/// The table at `key` in `doc`, made (with the tables above it) where missing; `None` where
/// something on the way is not a table.
fn table_at<'a>(doc: &'a mut Value, key: &[String]) -> Option<&'a mut Map<String, Value>> {
    let mut at = doc;
    for name in key {
        at = at
            .as_object_mut()?
            .entry(name.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    at.as_object_mut()
}

fn apply_value(doc: &mut Value, change: &Change, after: &Value) -> bool {
    let Some((last, above)) = change.key.split_last() else {
        return true;
    };
    let Some(m) = table_at(doc, above) else {
        return false;
    };
    match &change.new {
        Some(v) => {
            m.insert(last.clone(), v.clone());
        }
        None => {
            m.remove(last);
            prune(doc, above, after);
        }
    }
    true
}

/// Adds or removes one member of a list of strings.
fn apply_member(doc: &mut Value, change: &Change) -> bool {
    let [parents @ .., list, name] = change.key.as_slice() else {
        return false;
    };
    if change.new.is_none() && lookup(doc, &change.key[..change.key.len() - 1]).is_none() {
        return true; // nothing to remove it from
    }
    let Some(m) = table_at(doc, parents) else {
        return false;
    };
    let Value::Array(items) = m
        .entry(list.clone())
        .or_insert_with(|| Value::Array(Vec::new()))
    else {
        return false;
    };
    let item = Value::String(name.clone());
    match change.new {
        Some(_) if !items.contains(&item) => items.push(item),
        Some(_) => {}
        None => items.retain(|i| *i != item),
    }
    true
}

/// Removes the tables above a removed key, deepest first, while they are empty in `doc`
/// and absent from `after`.
fn prune(doc: &mut Value, above: &[String], after: &Value) {
    for depth in (1..=above.len()).rev() {
        let key = &above[..depth];
        if lookup(after, key).is_some() {
            return;
        }
        let Some((last, parent)) = key.split_last() else {
            return;
        };
        let Some(Value::Object(up)) = lookup_mut(doc, parent) else {
            return;
        };
        match up.get(last) {
            Some(Value::Object(m)) if m.is_empty() => {
                up.remove(last);
            }
            _ => return,
        }
    }
}

fn lookup<'a>(doc: &'a Value, key: &[String]) -> Option<&'a Value> {
    key.iter().try_fold(doc, |v, k| v.as_object()?.get(k))
}

fn lookup_mut<'a>(doc: &'a mut Value, key: &[String]) -> Option<&'a mut Value> {
    key.iter()
        .try_fold(doc, |v, k| v.as_object_mut()?.get_mut(k))
}

/// What a run kept aside of one file: what `ahp-wrap restore` applies.
#[derive(Debug, Serialize, Deserialize)]
pub struct Record {
    /// The state file the changes belong to (the real one, not the run's copy).
    pub file: PathBuf,
    /// Its format, to read and write it when restoring.
    pub format: Format,
    /// The agent's own lock on the file, taken to write it.
    #[serde(default)]
    pub lock: Option<PathBuf>,
    /// The changes kept aside (to instruction keys), in the order they are applied.
    pub changes: Vec<Change>,
}

/// The document `path` holds in `format`; a file that does not exist is an empty table.
pub fn read_doc(path: &Path, format: Format) -> Result<Value, MergeError> {
    match std::fs::read(path) {
        Ok(bytes) => parse(&bytes, format, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Object(Map::new())),
        Err(source) => Err(MergeError::Read {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// What the agent's tree left at `path` (a file it wrote in place, or its private copy),
/// read without following a link: a link it made there would have the wrapper read, and
/// keep or merge, whatever file of the person's it points at. `None` when nothing is there.
pub fn read_agents(path: &Path) -> Result<Option<Vec<u8>>, MergeError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    match crate::beneath::open_file(path) {
        Ok(mut f) => f.read_to_end(&mut bytes).map(|_| Some(bytes)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into_io()),
    }
    .map_err(|source| MergeError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// [`read_doc`] of what the agent's tree left ([`read_agents`]).
pub fn read_agents_doc(path: &Path, format: Format) -> Result<Value, MergeError> {
    match read_agents(path)? {
        Some(bytes) => parse(&bytes, format, path),
        None => Ok(Value::Object(Map::new())),
    }
}

/// Applies `changes` (`apply`; `after` as there) to the file at `path` as it is now, under
/// the agent's `lock`, and writes it back atomically. Returns the changes that could not be
/// applied.
pub fn apply_to_file(
    path: &Path,
    format: Format,
    lock: Option<&Path>,
    changes: &[Change],
    after: &Value,
) -> Result<Vec<Change>, MergeError> {
    let _lock = Lock::take(lock, LOCK_WAIT);
    let mut doc = read_doc(path, format)?;
    let failed = apply(&mut doc, changes, after);
    write_atomic(path, &serialize(&doc, format, path)?)?;
    Ok(failed)
}

/// How long a merge waits for the agent's own lock on a file (another session's write).
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Writes `bytes` to `path` atomically: a new file beside it (with `path`'s permissions),
/// synced, renamed over it, and the directory synced. `path` is never left half-written:
/// a reader sees the old content or the new.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), MergeError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    write_atomic_as(path, bytes, mode)
}

/// [`write_atomic`] with the new file's permissions `mode`, whatever `path` had (and owned
/// by this process's user, whoever owned it before).
pub fn write_atomic_as(path: &Path, bytes: &[u8], mode: u32) -> Result<(), MergeError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| MergeError::Write {
        path: path.display().to_string(),
        source,
    };
    // Its directory reached without following a link (one the agent's tree made would aim
    // the write elsewhere); the file itself, a link or not, is replaced, never written through.
    let entry = crate::beneath::Entry::of(path).map_err(|e| err(e.into_io()))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp_name = format!(".{name}.ahp-wrap-{}", crate::random_hex(6));
    let tmp = entry
        .sibling(std::ffi::OsStr::new(&tmp_name))
        .map_err(err)?;
    let written = (|| {
        let mut f = tmp.create(mode)?;
        // The mode given at creation is masked by the umask; the file keeps the old one.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        tmp.rename_to(&entry)?;
        entry.sync_dir()
    })();
    if written.is_err() {
        let _ = tmp.remove();
    }
    written.map_err(err)
}

/// The agent's own lock on a state file, held while the merge reads and writes it: a
/// directory made and removed (as the agents' `proper-lockfile` does). A lock older than
/// the agents' own staleness limit (10 s) is taken over; one that stays taken for `wait`
/// is not waited for further (the merge goes on: losing the person's choices would be worse).
pub(crate) struct Lock(Option<PathBuf>);

impl Lock {
    /// Takes the lock directory `dir`, retrying every 20 ms for up to `wait`; a lock not
    /// taken (no `dir`, stale, busy or unmakable) holds nothing and the caller goes on.
    pub(crate) fn take(dir: Option<&Path>, wait: Duration) -> Lock {
        let Some(dir) = dir else {
            return Lock(None);
        };
        let deadline = Instant::now() + wait;
        loop {
            match std::fs::create_dir(dir) {
                Ok(()) => return Lock(Some(dir.to_owned())),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = std::fs::metadata(dir)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok())
                        .is_some_and(|age| age > Duration::from_secs(10));
                    if stale || Instant::now() >= deadline {
                        tracing::debug!("state file lock {} not taken", dir.display());
                        return Lock(None);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(_) => return Lock(None),
            }
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[cfg(test)]
pub(super) mod tests;
