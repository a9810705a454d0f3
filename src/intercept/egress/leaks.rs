//! What leaves with a real credential is checked: a request the proxy puts a declared
//! credential's value on (a `git push`, an `npm publish`, a gist, an issue) must not carry a
//! secret of the person's out with it. Looked for, never shown: the values the floor took out
//! of the agent's environment, the declared credentials' own values, and the secrets of the
//! workspace's `.env` files as the run found them (a value under a credential's name, or
//! shaped like a token).
//!
//! The body is read whole before anything is sent (up to [`MAX_CHECKED`]) and looked at as it
//! is, decompressed (`Content-Encoding: gzip` or `deflate`), as git's pack (each object
//! inflated: a commit's files travel compressed), and for a JSON body, each long base64
//! string decoded (npm's published tarball), gunzipped when it is gzip. Not covered: what is
//! encrypted or encoded otherwise (a zip, an archive in an archive), a secret split across a
//! pack's delta and its base, and requests on hosts the proxy only tunnels (no credential:
//! nothing of the person's authority goes with them).

use std::io::Read;
use std::path::{Path, PathBuf};

use aho_corasick::AhoCorasick;

/// The largest body checked; a larger one carrying a credential is refused, said.
pub(crate) const MAX_CHECKED: usize = 256 << 20;

/// The most bytes any one decompression may give (a zip bomb is not read to its end).
const MAX_INFLATED: u64 = 512 << 20;

/// Values shorter than this are never looked for (too likely to occur by chance).
const MIN_SECRET: usize = 8;

/// The secrets one run looks for, and where each came from.
#[derive(Default)]
pub(crate) struct Secrets {
    finder: Option<AhoCorasick>,
    /// Per pattern: where it came from, for a person ("API_KEY in /ws/.env").
    sources: Vec<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// The secrets of `values` (each with where it came from), those too short left out.
    pub(crate) fn new(values: Vec<(String, String)>) -> Secrets {
        let mut kept: Vec<(String, String)> = Vec::new();
        for (value, source) in values {
            if value.len() >= MIN_SECRET && !kept.iter().any(|(v, _)| *v == value) {
                kept.push((value, source));
            }
        }
        if kept.is_empty() {
            return Secrets::default();
        }
        let finder = AhoCorasick::new(kept.iter().map(|(v, _)| v.as_bytes())).ok();
        Secrets {
            finder,
            sources: kept.into_iter().map(|(_, s)| s).collect(),
        }
    }

    /// Whether there is nothing to look for.
    pub(crate) fn is_empty(&self) -> bool {
        self.finder.is_none()
    }

    /// Where the first secret found in `body` came from (and in what part of it), if one is.
    pub(crate) fn found(&self, body: &[u8], encoding: Option<&str>) -> Option<String> {
        let finder = self.finder.as_ref()?;
        let hit = |bytes: &[u8]| {
            finder
                .find(bytes)
                .map(|m| self.sources[m.pattern()].clone())
        };
        let decoded = match encoding.map(str::to_ascii_lowercase).as_deref() {
            Some("gzip") | Some("x-gzip") => inflate(flate2::read::MultiGzDecoder::new(body)),
            Some("deflate") => inflate(flate2::read::ZlibDecoder::new(body)),
            _ => None,
        };
        let body = decoded.as_deref().unwrap_or(body);
        if let Some(s) = hit(body) {
            return Some(s);
        }
        if let Some(at) = memchr::memmem::find(body, b"PACK\0\0\0") {
            if let Some(s) = pack_objects(&body[at..], &hit) {
                return Some(format!("{s}, in a git pack"));
            }
        }
        if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
            if let Some(s) = in_base64_strings(&json, &hit, 0) {
                return Some(format!("{s}, in a base64 attachment"));
            }
        }
        None
    }
}

/// All a decoder gives, up to [`MAX_INFLATED`] bytes; `None` when it is not what it says.
fn inflate(r: impl Read) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    r.take(MAX_INFLATED).read_to_end(&mut out).ok()?;
    Some(out)
}

/// What `hit` finds in the objects of the git pack `pack` (its format: gitformat-pack(5)).
/// Each object's data is one zlib stream after its header (and, for a delta, its base).
fn pack_objects(pack: &[u8], hit: &dyn Fn(&[u8]) -> Option<String>) -> Option<String> {
    let count = u32::from_be_bytes(pack.get(8..12)?.try_into().ok()?);
    let mut at = 12;
    for _ in 0..count {
        // Type and size: 3 bits and 4, then 7 more a byte while the high bit is set.
        let mut c = *pack.get(at)?;
        let kind = (c >> 4) & 7;
        at += 1;
        while c & 0x80 != 0 {
            c = *pack.get(at)?;
            at += 1;
        }
        match kind {
            // OFS_DELTA: the base's offset, a varint.
            6 => loop {
                let b = *pack.get(at)?;
                at += 1;
                if b & 0x80 == 0 {
                    break;
                }
            },
            // REF_DELTA: the base's name (SHA-1; a SHA-256 repository's packs are rarer still).
            7 => at += 20,
            _ => {}
        }
        let mut z = flate2::Decompress::new(true);
        let mut out = Vec::new();
        loop {
            out.reserve(64 << 10);
            let before = z.total_in();
            let status = z
                .decompress_vec(pack.get(at..)?, &mut out, flate2::FlushDecompress::None)
                .ok()?;
            at += (z.total_in() - before) as usize;
            if status == flate2::Status::StreamEnd {
                break;
            }
            if out.len() as u64 > MAX_INFLATED
                || z.total_in() == before && out.capacity() > out.len()
            {
                return None;
            }
        }
        if let Some(s) = hit(&out) {
            return Some(s);
        }
    }
    None
}

/// What `hit` finds in the long base64 strings of `v` (decoded; gunzipped when gzip).
fn in_base64_strings(
    v: &serde_json::Value,
    hit: &dyn Fn(&[u8]) -> Option<String>,
    depth: usize,
) -> Option<String> {
    use base64::Engine;
    if depth > 16 {
        return None;
    }
    match v {
        serde_json::Value::String(s) if s.len() >= 64 => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s.trim())
                .ok()?;
            if bytes.starts_with(&[0x1f, 0x8b]) {
                if let Some(s) =
                    inflate(flate2::read::MultiGzDecoder::new(&bytes[..])).and_then(|b| hit(&b))
                {
                    return Some(s);
                }
            }
            hit(&bytes)
        }
        serde_json::Value::Array(a) => a.iter().find_map(|x| in_base64_strings(x, hit, depth + 1)),
        serde_json::Value::Object(o) => o
            .values()
            .find_map(|x| in_base64_strings(x, hit, depth + 1)),
        _ => None,
    }
}

/// The secrets of the workspace's `.env` files (at its top and a level below, the examples
/// and templates left out), as the run finds them before the agent starts: each value whose
/// name or shape says it is a credential, with where it is.
pub(crate) fn dotenv_secrets(workspace: &Path) -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut dirs = vec![workspace.to_owned()];
    if let Ok(entries) = std::fs::read_dir(workspace) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let skip = matches!(name.as_ref(), "node_modules" | ".git" | "target" | ".venv");
            if !skip && e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(e.path());
            }
        }
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let example = [".example", ".sample", ".template", ".dist"]
                .iter()
                .any(|x| name.ends_with(x));
            if (name == ".env" || name.starts_with(".env.")) && !example {
                files.push(e.path());
            }
        }
    }
    let mut out = Vec::new();
    for file in files {
        let Ok(f) = crate::beneath::open_file(&file) else {
            continue;
        };
        let mut text = String::new();
        if f.take(1 << 20).read_to_string(&mut text).is_err() {
            continue;
        }
        for line in text.lines() {
            let line = line.trim();
            let line = line.strip_prefix("export ").unwrap_or(line);
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            if line.starts_with('#') {
                continue;
            }
            let (name, value) = (name.trim(), value.trim());
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            if crate::floor::secrets::is_credential(name, std::ffi::OsStr::new(value)) {
                out.push((value.to_owned(), format!("{name} in {}", file.display())));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn secrets() -> Secrets {
        Secrets::new(vec![
            (
                "s3cr3t-value-of-the-project".into(),
                "API_SECRET in /ws/.env".into(),
            ),
            ("short".into(), "too short".into()),
        ])
    }

    #[test]
    fn a_secret_is_found_as_it_is_gzipped_in_a_git_pack_and_in_a_base64_tarball() {
        let s = secrets();
        let plain = b"{\"body\": \"here: s3cr3t-value-of-the-project\"}";
        assert_eq!(
            s.found(plain, None).as_deref(),
            Some("API_SECRET in /ws/.env")
        );
        assert_eq!(s.found(b"nothing here, not even short", None), None);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(plain).unwrap();
        let gz = gz.finish().unwrap();
        assert!(s.found(&gz, Some("gzip")).is_some());
        // A pack of two blobs (as `git pack-objects` writes them), the second holding it.
        // (Files long enough to be compressed: a short one is stored as it is.)
        let file = |middle: &str| {
            format!(
                "{}{middle}{}",
                "let x = 1;\n".repeat(40),
                "y();\n".repeat(40)
            )
        };
        let (code, env) = (
            file("fn main() {}\n"),
            file("API_SECRET=s3cr3t-value-of-the-project\n"),
        );
        assert!(s.found(code.as_bytes(), None).is_none());
        let mut pack = b"0000PACK\0\0\0\x02\0\0\0\x02".to_vec();
        for blob in [code.as_bytes(), env.as_bytes()] {
            pack.push(0x30 | (blob.len() as u8 & 0x0f) | 0x80);
            pack.push((blob.len() >> 4) as u8 & 0x7f | if blob.len() >> 11 > 0 { 0x80 } else { 0 });
            if blob.len() >> 11 > 0 {
                pack.push((blob.len() >> 11) as u8);
            }
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            z.write_all(blob).unwrap();
            pack.extend(z.finish().unwrap());
        }
        assert_eq!(
            s.found(&pack, None).as_deref(),
            Some("API_SECRET in /ws/.env, in a git pack")
        );
        use base64::Engine;
        let attachment = base64::engine::general_purpose::STANDARD.encode(&gz);
        let publish = serde_json::json!({"_attachments": {"x.tgz": {"data": attachment}}});
        assert!(s
            .found(publish.to_string().as_bytes(), None)
            .is_some_and(|w| w.ends_with("in a base64 attachment")));
    }

    #[test]
    fn the_workspaces_dotenv_secrets_are_those_named_or_shaped_so() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path();
        std::fs::write(
            ws.join(".env"),
            "# a comment\nAPI_SECRET=\"s3cr3t-value\"\nPORT=3000\nexport DATABASE_URL=postgres://app:pw@db/app\n",
        )
        .unwrap();
        std::fs::create_dir(ws.join("api")).unwrap();
        std::fs::write(
            ws.join("api/.env.local"),
            "STRIPE=sk_live_0123456789abcdefghij\n",
        )
        .unwrap();
        std::fs::write(ws.join(".env.example"), "API_SECRET=changeme-please\n").unwrap();
        let mut got: Vec<String> = dotenv_secrets(ws).into_iter().map(|(v, _)| v).collect();
        got.sort();
        assert_eq!(
            got,
            [
                "postgres://app:pw@db/app",
                "s3cr3t-value",
                "sk_live_0123456789abcdefghij"
            ]
        );
    }
}
