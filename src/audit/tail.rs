//! The end of a log, read back when it is opened (or after a failed write): where the chain
//! stands, and the crash debris after the last record.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::chain::{Alg, GENESIS};
use super::line::{self, LineError};
use super::AuditError;

/// How many complete non-record lines may precede the end of the file and still count as
/// crash debris (each crash during recovery adds at most one).
const MAX_DEBRIS_LINES: u64 = 16;

/// How much of the end of the file is read first when looking for the last record.
const FIRST_WINDOW: u64 = 64 << 10;

/// Where the chain stands at the end of the file.
#[derive(Debug)]
pub(super) struct Tail {
    pub next_seq: u64,
    pub prev: String,
    /// The algorithm and key id of the last record, if there is one.
    pub last: Option<(Alg, Option<String>)>,
    /// The last record is whole but lacks its newline.
    pub unterminated: bool,
    pub damage: Option<Damage>,
}

/// Crash debris after the last record.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Damage {
    /// Where the debris starts.
    pub offset: u64,
    /// Its length, up to the end of the file.
    pub len: u64,
    /// How many lines (complete or not) it spans.
    pub lines: u64,
    /// Whether the file ends without a newline.
    pub partial: bool,
}

/// Finds the last record, reading ever larger windows from the end of the file.
pub(super) fn inspect_tail(file: &File, path: &Path) -> Result<Tail, AuditError> {
    let io_err = |source| AuditError::Open {
        path: path.display().to_string(),
        source,
    };
    let len = file.metadata().map_err(io_err)?.len();
    let mut window = FIRST_WINDOW;
    loop {
        let start = len.saturating_sub(window);
        let mut buf = vec![0; (len - start) as usize];
        file.read_exact_at(&mut buf, start).map_err(io_err)?;
        match scan_tail(&buf, start, len) {
            Ok(Some(tail)) => return Ok(tail),
            Ok(None) => window = window.saturating_mul(4),
            Err(why) => {
                return Err(AuditError::NotAnAuditLog {
                    path: path.display().to_string(),
                    why,
                })
            }
        }
    }
}

/// Looks for the last record in `buf`, the bytes of the file from `base` to its end `len`.
/// `Ok(None)` means the window starts too late to tell.
fn scan_tail(buf: &[u8], base: u64, len: u64) -> Result<Option<Tail>, String> {
    let whole_file = base == 0;
    let mut damage: Option<Damage> = None;
    // `end` is always just past a newline (or 0): the end of the lines still to look at.
    let mut end = buf.len();
    if buf.last().is_some_and(|&b| b != b'\n') {
        let Some(start) = line_start(buf, end, whole_file) else {
            return Ok(None);
        };
        if let Ok(parsed) = line::parse(&buf[start..]) {
            // A crash that lost only the newline: the record itself is whole.
            return Ok(Some(Tail::after(parsed, true, None)));
        }
        if !line::is_crash_debris(&buf[start..]) {
            return Err("the last line is incomplete and not crash debris".into());
        }
        add_damage(&mut damage, base + start as u64, len, true);
        end = start;
    }
    loop {
        if end == 0 {
            if !whole_file {
                return Ok(None);
            }
            return Ok(Some(Tail::empty(damage)));
        }
        let Some(start) = line_start(buf, end - 1, whole_file) else {
            return Ok(None);
        };
        let text = &buf[start..end - 1];
        match line::parse(text) {
            Ok(parsed) => return Ok(Some(Tail::after(parsed, false, damage))),
            Err(LineError::NotJson) if line::is_crash_debris(text) => {
                if add_damage(&mut damage, base + start as u64, len, false) > MAX_DEBRIS_LINES {
                    return Err("too many damaged lines at the end".into());
                }
                end = start;
            }
            Err(e) => return Err(refusal(e)),
        }
    }
}

impl Tail {
    /// The chain after the last record, `parsed`.
    fn after(parsed: line::Parsed, unterminated: bool, damage: Option<Damage>) -> Tail {
        Tail {
            next_seq: parsed.seq + 1,
            prev: parsed.hash,
            last: Some((parsed.alg, parsed.kid)),
            unterminated,
            damage,
        }
    }

    /// The chain of a file with no record: at its start.
    fn empty(damage: Option<Damage>) -> Tail {
        Tail {
            next_seq: 0,
            prev: GENESIS.to_owned(),
            last: None,
            unterminated: false,
            damage,
        }
    }
}

/// Where the line that ends at `end` starts in `buf`; `None` when it may start before the
/// window (which then starts too late to tell).
fn line_start(buf: &[u8], end: usize, whole_file: bool) -> Option<usize> {
    match buf[..end].iter().rposition(|&b| b == b'\n') {
        Some(i) => Some(i + 1),
        None if whole_file => Some(0),
        None => None,
    }
}

/// Extends the damage back to the debris line at `offset` (the file is `len` bytes long);
/// `partial` says whether the file ends without a newline, when it is the first. Returns how
/// many lines the damage spans now.
fn add_damage(damage: &mut Option<Damage>, offset: u64, len: u64, partial: bool) -> u64 {
    let d = damage.get_or_insert(Damage {
        offset: 0,
        len: 0,
        lines: 0,
        partial,
    });
    d.offset = offset;
    d.len = len - d.offset;
    d.lines += 1;
    d.lines
}

/// Why a last line that is neither a record nor crash debris makes the file no audit log.
fn refusal(e: LineError) -> String {
    match e {
        LineError::NotJson => "its last line is not JSON".into(),
        LineError::NotRecord(why) => format!("last record: {why}"),
        LineError::NonCanonical => "its last record is not in canonical form (edited?)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::chain::Signer;
    use super::*;

    #[test]
    fn scan_tail_finds_debris_and_asks_for_more_when_the_window_is_short() {
        let rec = super::super::tests::record("allow");
        let (l0, h0) = line::encode(&rec, 0, GENESIS, &Signer::new(None));
        let mut file = l0.clone();
        file.extend_from_slice(b"\0\0\0\n{\"ag");
        let len = file.len() as u64;
        let tail = scan_tail(&file, 0, len).unwrap().unwrap();
        assert_eq!((tail.next_seq, tail.prev.as_str()), (1, h0.as_str()));
        let damage = tail.damage.unwrap();
        assert_eq!(damage.offset, l0.len() as u64);
        assert_eq!(damage.len, len - l0.len() as u64);
        assert_eq!((damage.lines, damage.partial), (2, true));
        // A window that starts inside the record cannot tell.
        let cut = 5;
        assert!(scan_tail(&file[cut..], cut as u64, len).unwrap().is_none());
    }

    #[test]
    fn scan_tail_refuses_files_that_are_not_audit_logs() {
        let readme = b"# Title\n\nSome text.\n";
        assert!(scan_tail(readme, 0, readme.len() as u64).is_err());
        let no_newline = b"plain text";
        assert!(scan_tail(no_newline, 0, no_newline.len() as u64).is_err());
        let other_json = b"{\"a\":1}\n";
        assert!(scan_tail(other_json, 0, other_json.len() as u64).is_err());
    }
}
