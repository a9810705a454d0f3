//! One log line: encoding a record into its chained canonical form, and parsing it back.

use std::io::{self, BufRead};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::chain::{canonical, Alg, Signer, FORMAT_VERSION};
use super::AuditRecord;

/// The longest line the writer produces and the reader accepts (newline excluded).
pub(super) const MAX_LINE: usize = 16 << 20;

/// The event type of the record the writer appends after crash damage.
pub(super) const RECOVERED_EVENT: &str = "audit.recovered";

/// Encodes `record` as line number `seq` chained to `prev`; returns the line (with `\n`)
/// and its hash.
pub(super) fn encode(
    record: &AuditRecord,
    seq: u64,
    prev: &str,
    signer: &Signer,
) -> (Vec<u8>, String) {
    encode_within(record, seq, prev, signer, MAX_LINE)
}

/// [`encode`], with lines longer than `max` slimmed down.
#[allow(
    clippy::expect_used,
    reason = "an audit record is plain JSON data: its serialisation cannot fail"
)]
pub(super) fn encode_within(
    record: &AuditRecord,
    seq: u64,
    prev: &str,
    signer: &Signer,
    max: usize,
) -> (Vec<u8>, String) {
    let (line, hash) = encode_unbounded(record, seq, prev, signer);
    if line.len() <= max {
        return (line, hash);
    }
    // Too big to read back safely: keep a digest of the payload instead of the payload.
    let payload = serde_json::to_vec(&record.payload).expect("JSON values serialize");
    let mut slim = record.clone();
    slim.payload = serde_json::json!({
        "omitted": "payload too large for the audit log",
        "bytes": payload.len(),
        "sha256": hex::encode(Sha256::digest(&payload)),
    });
    if let Some(reason) = &mut slim.reason {
        if reason.len() > 4096 {
            let mut end = 4096;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.truncate(end);
            reason.push('…');
        }
    }
    encode_unbounded(&slim, seq, prev, signer)
}

#[allow(
    clippy::expect_used,
    reason = "an audit record is plain JSON data, serialised as an object"
)]
fn encode_unbounded(
    record: &AuditRecord,
    seq: u64,
    prev: &str,
    signer: &Signer,
) -> (Vec<u8>, String) {
    let Value::Object(mut map) = serde_json::to_value(record).expect("audit records serialize")
    else {
        unreachable!("an AuditRecord serializes to an object")
    };
    map.insert("v".into(), FORMAT_VERSION.into());
    map.insert("seq".into(), seq.into());
    map.insert("alg".into(), signer.alg().as_str().into());
    if let Some(kid) = signer.key_id() {
        map.insert("kid".into(), kid.into());
    }
    map.insert("prev".into(), prev.into());
    let mut value = Value::Object(map);
    let hash = signer.hash(&canonical(&value));
    value
        .as_object_mut()
        .expect("built as an object")
        .insert("hash".into(), hash.clone().into());
    let mut line = canonical(&value);
    line.push(b'\n');
    (line, hash)
}

/// A line that parsed as a chained record.
#[derive(Debug)]
pub(super) struct Parsed {
    pub seq: u64,
    pub alg: Alg,
    pub kid: Option<String>,
    pub prev: String,
    pub hash: String,
    /// The canonical encoding the hash covers (the line without `hash`).
    pub hashed: Vec<u8>,
    /// The whole object, record fields included.
    pub fields: Map<String, Value>,
}

/// Why a line is not a chained record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LineError {
    /// Not JSON at all: crash debris or garbage.
    NotJson,
    /// JSON, but not a record of this format.
    NotRecord(String),
    /// A record, but not in canonical form: edited by hand (or holding duplicate keys).
    NonCanonical,
}

/// Parses one line (without its `\n`).
#[allow(
    clippy::expect_used,
    reason = "the line was parsed as an object just above"
)]
pub(super) fn parse(bytes: &[u8]) -> Result<Parsed, LineError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| LineError::NotJson)?;
    let Value::Object(mut fields) = value else {
        return Err(LineError::NotRecord("not a JSON object".into()));
    };
    let missing = |name: &str| LineError::NotRecord(format!("no valid `{name}`"));
    if fields.get("v").and_then(Value::as_u64) != Some(FORMAT_VERSION) {
        return Err(missing("v"));
    }
    let seq = fields
        .get("seq")
        .and_then(Value::as_u64)
        .ok_or_else(|| missing("seq"))?;
    let alg = fields
        .get("alg")
        .and_then(Value::as_str)
        .and_then(Alg::parse)
        .ok_or_else(|| missing("alg"))?;
    let kid = match fields.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(missing("kid")),
    };
    let is_hex64 = |s: &&str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    let prev = fields
        .get("prev")
        .and_then(Value::as_str)
        .filter(is_hex64)
        .ok_or_else(|| missing("prev"))?
        .to_owned();
    let hash = fields
        .get("hash")
        .and_then(Value::as_str)
        .filter(is_hex64)
        .ok_or_else(|| missing("hash"))?
        .to_owned();
    let mut value = Value::Object(std::mem::take(&mut fields));
    if canonical(&value) != bytes {
        return Err(LineError::NonCanonical);
    }
    let map = value.as_object_mut().expect("parsed as an object");
    map.remove("hash");
    let hashed = canonical(&value);
    let Value::Object(mut fields) = value else {
        unreachable!("still an object")
    };
    fields.insert("hash".into(), hash.clone().into());
    Ok(Parsed {
        seq,
        alg,
        kid,
        prev,
        hash,
        hashed,
        fields,
    })
}

/// Whether the record is a well-formed recovery marker, and the region it names:
/// `(damaged_offset, damaged_bytes)`.
pub(super) fn recovery_region(parsed: &Parsed) -> Option<(u64, u64)> {
    if parsed.fields.get("event_type").and_then(Value::as_str) != Some(RECOVERED_EVENT) {
        return None;
    }
    let payload = parsed.fields.get("payload")?;
    Some((
        payload.get("damaged_offset")?.as_u64()?,
        payload.get("damaged_bytes")?.as_u64()?,
    ))
}

/// Whether a line that is not JSON looks like what a crash leaves: the start of one of our
/// lines (`{`), zero-filled blocks, or nothing.
pub(super) fn is_crash_debris(bytes: &[u8]) -> bool {
    bytes.is_empty() || bytes[0] == b'{' || bytes.iter().all(|&b| b == 0)
}

/// What [`read_line`] found: a whole line, a clean end, a line cut by the end of the file, or
/// one longer than [`MAX_LINE`] (the buffer then holds its first bytes).
pub(super) use crate::jsonrpc::framing::Read;

/// Reads one line into `buf` (cleared first) with the crate's one line framing, reading no
/// more than [`MAX_LINE`] + 1 bytes. The `\n` of a whole line is dropped; a `\r` stays, as
/// it is part of what the chain covers.
pub(super) fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Read> {
    let read = crate::jsonrpc::framing::read_line(reader, MAX_LINE, buf)?;
    if read == Read::Line {
        buf.pop();
    }
    Ok(read)
}
