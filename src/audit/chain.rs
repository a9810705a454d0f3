//! The hash chain: canonical JSON encoding, the line hash (SHA-256 or HMAC-SHA-256) and key ids.

use std::fmt;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Version of the line format, written in every line as `"v"`.
pub(crate) const FORMAT_VERSION: u64 = 1;

/// The `prev` of the first line of a log: 32 zero bytes, hex.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What the HMAC of this constant is truncated to, to make the key id.
const KEY_ID_LABEL: &[u8] = b"ahp-wrap audit key id v1";

/// How a line's `hash` is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    /// Plain SHA-256: detects accidents and naive edits; anyone can recompute it.
    Sha256,
    /// HMAC-SHA-256 under the audit key: only the key holder can produce valid lines.
    HmacSha256,
}

impl Alg {
    /// The name written in the `alg` field.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Alg::Sha256 => "sha256",
            Alg::HmacSha256 => "hmac-sha256",
        }
    }

    /// Parses an `alg` field.
    pub(crate) fn parse(name: &str) -> Option<Alg> {
        match name {
            "sha256" => Some(Alg::Sha256),
            "hmac-sha256" => Some(Alg::HmacSha256),
            _ => None,
        }
    }
}

impl fmt::Display for Alg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Computes line hashes: unkeyed (SHA-256) or keyed (HMAC-SHA-256).
#[derive(Clone)]
pub(crate) struct Signer {
    key: Option<Vec<u8>>,
    key_id: Option<String>,
}

impl fmt::Debug for Signer {
    // Never print the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("alg", &self.alg())
            .field("key_id", &self.key_id)
            .finish()
    }
}

impl Signer {
    /// A signer for `key`, or a plain SHA-256 one without.
    pub(crate) fn new(key: Option<&[u8]>) -> Signer {
        let key_id = key.map(key_id);
        Signer {
            key: key.map(<[u8]>::to_vec),
            key_id,
        }
    }

    /// The algorithm this signer writes.
    pub(crate) fn alg(&self) -> Alg {
        if self.key.is_some() {
            Alg::HmacSha256
        } else {
            Alg::Sha256
        }
    }

    /// The key id written in the `kid` field of keyed lines.
    pub(crate) fn key_id(&self) -> Option<&str> {
        self.key_id.as_deref()
    }

    /// The hex hash of `bytes` (the canonical encoding of a line without its `hash`).
    pub(crate) fn hash(&self, bytes: &[u8]) -> String {
        match &self.key {
            Some(key) => {
                let mut mac = new_mac(key);
                mac.update(bytes);
                hex::encode(mac.finalize().into_bytes())
            }
            None => hex::encode(Sha256::digest(bytes)),
        }
    }

    /// Whether `hash` (hex) is the hash of `bytes`. Keyed comparison is constant-time.
    pub(crate) fn check(&self, bytes: &[u8], hash: &str) -> bool {
        let Ok(claimed) = hex::decode(hash) else {
            return false;
        };
        match &self.key {
            Some(key) => {
                let mut mac = new_mac(key);
                mac.update(bytes);
                mac.verify_slice(&claimed).is_ok()
            }
            None => Sha256::digest(bytes).as_slice() == claimed.as_slice(),
        }
    }
}

#[allow(clippy::expect_used, reason = "HMAC-SHA256 takes a key of any length")]
fn new_mac(key: &[u8]) -> Hmac<Sha256> {
    <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts keys of any length")
}

/// A short public id of a key: the first 8 bytes of HMAC(key, a fixed label), hex. It lets
/// `verify` tell "wrong key" from "edited record" without revealing the key.
pub(crate) fn key_id(key: &[u8]) -> String {
    let mut mac = new_mac(key);
    mac.update(KEY_ID_LABEL);
    hex::encode(&mac.finalize().into_bytes()[..8])
}

/// The canonical encoding of a JSON value: object keys sorted by their UTF-8 bytes at every
/// level, no whitespace, strings escaped as `serde_json` escapes them (only `"`, `\` and
/// control characters; everything else raw UTF-8), numbers as `serde_json` prints them.
///
/// Sorting is done here rather than relied upon from `serde_json::Map`, whose order depends
/// on a crate feature (`preserve_order`) that any dependency may switch on.
pub(crate) fn canonical(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_canonical(value, &mut out);
    out
}

#[allow(clippy::expect_used, reason = "writing JSON into a Vec cannot fail")]
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_canonical(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_string(s, out),
        // Null, booleans and numbers have a single serde_json spelling.
        scalar => serde_json::to_writer(&mut *out, scalar).expect("writing to a Vec cannot fail"),
    }
}

#[allow(clippy::expect_used, reason = "writing JSON into a Vec cannot fail")]
fn write_string(s: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys_at_every_level_and_has_no_whitespace() {
        let v = json!({"b": 1, "a": {"z": [true, null, 1.5], "y": "é\n\""}});
        assert_eq!(
            String::from_utf8(canonical(&v)).unwrap(),
            r#"{"a":{"y":"é\n\"","z":[true,null,1.5]},"b":1}"#
        );
    }

    #[test]
    fn canonical_round_trips_through_parsing() {
        let v = json!({"f": 0.1, "g": 1e300, "n": -3, "u": u64::MAX, "s": "\u{1}x"});
        let bytes = canonical(&v);
        let parsed: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(canonical(&parsed), bytes);
    }

    #[test]
    fn hmac_depends_on_the_key_and_sha256_on_nothing_else() {
        let plain = Signer::new(None);
        let k1 = Signer::new(Some(b"0123456789abcdef"));
        let k2 = Signer::new(Some(b"0123456789abcdeX"));
        assert_eq!(plain.alg(), Alg::Sha256);
        assert_eq!(k1.alg(), Alg::HmacSha256);
        let (h0, h1, h2) = (plain.hash(b"x"), k1.hash(b"x"), k2.hash(b"x"));
        assert_eq!(h0, hex::encode(Sha256::digest(b"x")));
        assert_ne!(h1, h0);
        assert_ne!(h1, h2);
        assert!(k1.check(b"x", &h1));
        assert!(!k2.check(b"x", &h1));
        assert!(!k1.check(b"y", &h1));
        assert!(!plain.check(b"x", "not hex"));
        assert_ne!(k1.key_id(), k2.key_id());
        assert_eq!(k1.key_id().map(str::len), Some(16));
        assert!(!format!("{k1:?}").contains("0123456789abcdef"));
    }
}
