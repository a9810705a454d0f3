//! Verification: walks a log's hash chain and reports the first line that breaks it, and why.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::chain::{Alg, Signer, GENESIS};
use super::head::Head;
use super::line::{self, LineError, Parsed, Read};

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records that verified, in order, before the first problem (all of them if none).
    pub records: u64,
    /// The algorithm of the first record, if any.
    pub alg: Option<Alg>,
    /// Crash damage that the writer found and recorded when it reopened the log.
    pub recoveries: Vec<Recovery>,
    /// The first problem; `None` if the whole log verified.
    pub problem: Option<Problem>,
}

/// Crash debris followed by the `audit.recovered` record that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The 1-based line of the recovery record.
    pub line: u64,
    /// The byte offset where the debris starts, as the record's payload names it.
    pub damaged_offset: u64,
    /// The debris's length in bytes, up to the recovery record.
    pub damaged_bytes: u64,
}

/// Where the chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The 1-based line number.
    pub line: u64,
    /// The byte offset where the line starts.
    pub offset: u64,
    /// What is wrong there.
    pub kind: ProblemKind,
}

/// Why the chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// The file could not be read.
    Io(String),
    /// The file ends in an incomplete line (`bytes` long, from `line` on): a writer that
    /// crashed mid-write and has not reopened the log since, or a cut. Every record before
    /// it verified.
    Truncated {
        /// The incomplete tail's length, up to the end of the file.
        bytes: u64,
    },
    /// A complete line that is not a record of this format (garbage, or a record with
    /// fields removed), not explained by a recovery record.
    Malformed(String),
    /// A record not in canonical form: edited by hand.
    NonCanonical,
    /// The hash does not match the record: it was edited, or forged without the key.
    HashMismatch,
    /// Records `expected..found` are missing.
    Dropped {
        /// The `seq` the chain needed next: the first one missing.
        expected: u64,
        /// The `seq` of the record found in its place; it does not appear later.
        found: u64,
    },
    /// Record `found` is out of place where `expected` should be (moved or duplicated).
    Reordered {
        /// The `seq` the chain needed next.
        expected: u64,
        /// The `seq` of the record found in its place.
        found: u64,
    },
    /// `prev` is not the previous line's hash: the previous line was replaced.
    ChainBroken,
    /// The log is keyed and no key was given.
    KeyRequired,
    /// A key was given but the log is not keyed.
    NotKeyed,
    /// The record was written with another key than the one given.
    WrongKey,
    /// The record's algorithm differs from the log's: a line forged or spliced in.
    AlgChanged {
        /// The algorithm the log (and the verifier's key or its absence) calls for.
        expected: Alg,
        /// The algorithm the record names in its `alg`.
        found: Alg,
    },
    /// A recovery record names damage that is not where it says.
    RecoveryMismatch,
    /// A line longer than the writer ever writes.
    TooLong,
    /// A line that is not a record, followed by more records, with no recovery record
    /// naming it: a record cut (or garbage written) in the middle of the log.
    CutInTheMiddle,
    /// The log ends (whole or cut) before record `committed`, which had been acknowledged
    /// when a writer closed the log (its commit head says so): cut after the fact.
    CommittedCut {
        /// The `seq` of the last record the commit head acknowledged.
        committed: u64,
    },
    /// Record `seq` differs from the one acknowledged when a writer closed the log.
    CommittedChanged {
        /// The `seq` whose `hash` differs from the commit head's.
        seq: u64,
    },
}

/// What a verification found, as `audit verify` exits with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integrity {
    /// Every record verified, no damage anywhere.
    Intact = 0,
    /// Edited, dropped, reordered, forged, or cut where a crash cannot have cut it.
    Tampered = 1,
    /// The log could not be checked (unreadable, or keyed and no key given).
    Unverifiable = 2,
    /// Only the last record is incomplete and nothing acknowledges it: what a crash
    /// mid-write leaves (or a cut of the very end, which no chain can tell from it).
    CrashTruncated = 3,
    /// A record was cut and a later writer recovered and went on: a crash then, or an
    /// edit before the log was reopened; the log alone cannot tell which.
    RecoveredDamage = 4,
}

impl ProblemKind {
    /// Whether this is what a crash mid-write leaves, rather than a sign of tampering.
    #[cfg(test)]
    pub(crate) fn is_crash(&self) -> bool {
        matches!(self, ProblemKind::Truncated { .. })
    }

    /// How `audit verify` classes this problem.
    pub(crate) fn outcome(&self) -> Integrity {
        match self {
            ProblemKind::Io(_) | ProblemKind::KeyRequired => Integrity::Unverifiable,
            ProblemKind::Truncated { .. } => Integrity::CrashTruncated,
            _ => Integrity::Tampered,
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProblemKind::Io(e) => write!(f, "cannot read the log: {e}"),
            ProblemKind::Truncated { bytes } => write!(
                f,
                "incomplete final record ({bytes} bytes): the writer crashed mid-write, or the file was cut"
            ),
            ProblemKind::Malformed(why) => write!(f, "not an audit record: {why}"),
            ProblemKind::NonCanonical => f.write_str("record not in canonical form: edited"),
            ProblemKind::HashMismatch => {
                f.write_str("hash mismatch: the record was edited, or forged without the key")
            }
            ProblemKind::Dropped { expected, found } if found - expected == 1 => {
                write!(f, "record {expected} is missing (dropped)")
            }
            ProblemKind::Dropped { expected, found } => {
                write!(f, "records {expected}..{} are missing (dropped)", found - 1)
            }
            ProblemKind::Reordered { expected, found } => write!(
                f,
                "record {found} where record {expected} should be: records reordered or duplicated"
            ),
            ProblemKind::ChainBroken => f.write_str(
                "chain broken: `prev` is not the previous record's hash (a record was replaced)",
            ),
            ProblemKind::KeyRequired => f.write_str("the log is keyed: a key is needed to verify it"),
            ProblemKind::NotKeyed => f.write_str("a key was given, but the log is not keyed"),
            ProblemKind::WrongKey => f.write_str("written with a different key than the one given"),
            ProblemKind::AlgChanged { expected, found } => write!(
                f,
                "written with {found} in a log written with {expected}: a forged or spliced record"
            ),
            ProblemKind::RecoveryMismatch => {
                f.write_str("recovery record does not match the damage it names")
            }
            ProblemKind::TooLong => f.write_str("line too long to be an audit record"),
            ProblemKind::CutInTheMiddle => f.write_str(
                "not a record, and more records follow with no recovery record naming it: a record was cut or replaced",
            ),
            ProblemKind::CommittedCut { committed } => write!(
                f,
                "the log ends before record {committed}, which was acknowledged when the log was last closed: cut after the fact"
            ),
            ProblemKind::CommittedChanged { seq } => write!(
                f,
                "record {seq} is not the one acknowledged when the log was last closed: replaced"
            ),
        }
    }
}

impl VerifyReport {
    /// Whether the whole log verified, with no damage anywhere.
    #[cfg(test)]
    pub(crate) fn is_ok(&self) -> bool {
        self.outcome() == Integrity::Intact
    }

    /// What was found, as an exit code class.
    pub(crate) fn outcome(&self) -> Integrity {
        match (&self.problem, self.recoveries.is_empty()) {
            (Some(p), _) => p.kind.outcome(),
            (None, false) => Integrity::RecoveredDamage,
            (None, true) => Integrity::Intact,
        }
    }

    /// A few lines for a terminal.
    pub(crate) fn to_text(&self) -> String {
        let alg = self.alg.map_or("no records".into(), |a| a.to_string());
        let mut out = match &self.problem {
            None => format!("ok: {} records verified ({alg})\n", self.records),
            Some(p) => format!(
                "FAILED at line {} (byte {}): {}\n{} records verified before it ({alg})\n",
                p.line, p.offset, p.kind, self.records
            ),
        };
        for r in &self.recoveries {
            out.push_str(&format!(
                "FINDING: a record was cut ({} bytes at byte {}) and the log was reopened and \
                 recovered at line {}: a crash mid-write then, or an edit before the log was \
                 reopened; the log alone cannot tell which (check for a crash at that time)\n",
                r.damaged_bytes, r.damaged_offset, r.line
            ));
        }
        out
    }
}

/// Debris lines not yet explained by a recovery record.
struct Debris {
    line: u64,
    offset: u64,
}

/// Verifies the log at `path`, with the audit key if it is keyed.
pub fn verify(path: &Path, key: Option<&[u8]>) -> VerifyReport {
    verify_with_head(path, key, None)
}

/// [`verify`], also checking that the records acknowledged by a commit head (see
/// [`super::head`]) are still there, unchanged.
pub fn verify_with_head(path: &Path, key: Option<&[u8]>, head: Option<&Head>) -> VerifyReport {
    let mut report = VerifyReport {
        records: 0,
        alg: None,
        recoveries: Vec::new(),
        problem: None,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            report.problem = Some(Problem {
                line: 0,
                offset: 0,
                kind: ProblemKind::Io(e.to_string()),
            });
            return report;
        }
    };
    let mut reader = BufReader::new(file);
    let (problem, end) = walk(&mut reader, &Signer::new(key), head, &mut report);
    report.problem = problem;
    // A log that ends (cleanly or in a cut) before an acknowledged record was cut later.
    if let Some(head) = head {
        let cut_or_end = report
            .problem
            .as_ref()
            .is_none_or(|p| matches!(p.kind, ProblemKind::Truncated { .. }));
        if report.records <= head.seq && cut_or_end {
            let (line, offset) = report.problem.as_ref().map_or(end, |p| (p.line, p.offset));
            report.problem = Some(Problem {
                line,
                offset,
                kind: ProblemKind::CommittedCut {
                    committed: head.seq,
                },
            });
        }
    }
    report
}

/// Walks the chain; returns the first problem, and the line and offset of the end.
fn walk(
    reader: &mut impl BufRead,
    signer: &Signer,
    head: Option<&Head>,
    report: &mut VerifyReport,
) -> (Option<Problem>, (u64, u64)) {
    let mut walk = Walk::new();
    loop {
        let parsed = match walk.next_line(reader) {
            Step::Record(parsed) => parsed,
            Step::Debris => continue,
            Step::Stop(problem) => return (problem, walk.end),
        };
        if let Some(kind) = walk.check(&parsed, reader, signer, head, report.records == 0) {
            return (Some(walk.problem(kind)), walk.end);
        }
        if let Some(problem) = walk.explain_debris(&parsed, report) {
            return (Some(problem), walk.end);
        }
        if report.records == 0 {
            report.alg = Some(parsed.alg);
        }
        report.records += 1;
        walk.expected_seq += 1;
        walk.prev = parsed.hash;
    }
}

/// What one line of the log is to the walk.
enum Step {
    /// A record, to check against the chain.
    Record(Parsed),
    /// A line that is not JSON: debris, which a recovery record must explain.
    Debris,
    /// The walk stops here: the end of the log, or its first problem.
    Stop(Option<Problem>),
}

/// Where a walk along the chain is: the line being read, and what the next record must be.
struct Walk {
    buf: Vec<u8>,
    /// The 1-based number of the line being read.
    line_no: u64,
    /// Where the line being read starts.
    here: u64,
    /// Where the next line starts.
    offset: u64,
    expected_seq: u64,
    /// The hash the next record's `prev` must be.
    prev: String,
    /// The first debris line since the last record.
    debris: Option<Debris>,
    /// The line and offset of the end of the log, once reached.
    end: (u64, u64),
}

impl Walk {
    /// A walk at the start of the log.
    fn new() -> Walk {
        Walk {
            buf: Vec::new(),
            line_no: 0,
            here: 0,
            offset: 0,
            expected_seq: 0,
            prev: GENESIS.to_owned(),
            debris: None,
            end: (0, 0),
        }
    }

    /// A problem at the line being read.
    fn problem(&self, kind: ProblemKind) -> Problem {
        Problem {
            line: self.line_no,
            offset: self.here,
            kind,
        }
    }

    /// Reads the next line: a record, debris, or where the walk stops (the end of the log,
    /// a cut, a line too long or not a record).
    fn next_line(&mut self, reader: &mut impl BufRead) -> Step {
        self.line_no += 1;
        self.here = self.offset;
        let read = match line::read_line(reader, &mut self.buf) {
            Ok(read) => read,
            Err(e) => return Step::Stop(Some(self.problem(ProblemKind::Io(e.to_string())))),
        };
        self.offset += self.buf.len() as u64 + u64::from(read == Read::Line);
        match read {
            Read::Eof => {
                self.end = (self.line_no, self.here);
                Step::Stop(self.debris.take().map(|d| Problem {
                    line: d.line,
                    offset: d.offset,
                    kind: ProblemKind::Malformed("not JSON, and no recovery record follows".into()),
                }))
            }
            Read::TooLong => Step::Stop(Some(self.problem(ProblemKind::TooLong))),
            Read::Cut => {
                let (line, start) = self
                    .debris
                    .take()
                    .map_or((self.line_no, self.here), |d| (d.line, d.offset));
                Step::Stop(Some(Problem {
                    line,
                    offset: start,
                    kind: ProblemKind::Truncated {
                        bytes: self.offset - start,
                    },
                }))
            }
            Read::Line => match line::parse(&self.buf) {
                Ok(parsed) => Step::Record(parsed),
                Err(LineError::NotJson) => {
                    self.debris.get_or_insert(Debris {
                        line: self.line_no,
                        offset: self.here,
                    });
                    Step::Debris
                }
                Err(LineError::NotRecord(why)) => {
                    Step::Stop(Some(self.problem(ProblemKind::Malformed(why))))
                }
                Err(LineError::NonCanonical) => {
                    Step::Stop(Some(self.problem(ProblemKind::NonCanonical)))
                }
            },
        }
    }

    /// Checks a record against the chain: its key, its place, its link to the previous
    /// record, its hash, and the record a commit head acknowledged.
    fn check(
        &mut self,
        parsed: &Parsed,
        reader: &mut impl BufRead,
        signer: &Signer,
        head: Option<&Head>,
        first: bool,
    ) -> Option<ProblemKind> {
        if let Some(kind) = check_key(parsed, signer, first) {
            return Some(kind);
        }
        let expected = self.expected_seq;
        if parsed.seq != expected {
            let found = parsed.seq;
            return Some(
                if found > expected && !seq_follows(reader, &mut self.buf, expected) {
                    ProblemKind::Dropped { expected, found }
                } else {
                    ProblemKind::Reordered { expected, found }
                },
            );
        }
        if parsed.prev != self.prev {
            return Some(ProblemKind::ChainBroken);
        }
        if !signer.check(&parsed.hashed, &parsed.hash) {
            return Some(ProblemKind::HashMismatch);
        }
        if head.is_some_and(|h| h.seq == parsed.seq && h.hash != parsed.hash) {
            return Some(ProblemKind::CommittedChanged { seq: parsed.seq });
        }
        None
    }

    /// A valid record: any debris before it must be exactly what it says it recovered
    /// (recorded in `report`); a problem otherwise.
    fn explain_debris(&mut self, parsed: &Parsed, report: &mut VerifyReport) -> Option<Problem> {
        match (self.debris.take(), line::recovery_region(parsed)) {
            (None, None) => None,
            (Some(d), Some((at, len))) if at == d.offset && at + len == self.here => {
                report.recoveries.push(Recovery {
                    line: self.line_no,
                    damaged_offset: at,
                    damaged_bytes: len,
                });
                None
            }
            (Some(d), _) => Some(Problem {
                line: d.line,
                offset: d.offset,
                kind: ProblemKind::CutInTheMiddle,
            }),
            (None, Some(_)) => Some(self.problem(ProblemKind::RecoveryMismatch)),
        }
    }
}

/// Checks the record's algorithm and key id against the verifier's.
fn check_key(parsed: &Parsed, signer: &Signer, first: bool) -> Option<ProblemKind> {
    match (parsed.alg, signer.alg()) {
        (Alg::HmacSha256, Alg::Sha256) if first => Some(ProblemKind::KeyRequired),
        (Alg::Sha256, Alg::HmacSha256) if first => Some(ProblemKind::NotKeyed),
        (found, expected) if found != expected => Some(ProblemKind::AlgChanged { expected, found }),
        _ if parsed.kid.as_deref() != signer.key_id() => Some(ProblemKind::WrongKey),
        _ => None,
    }
}

/// Whether a record with `seq` appears in the rest of the file (to tell a move from a loss).
fn seq_follows(reader: &mut impl BufRead, buf: &mut Vec<u8>, seq: u64) -> bool {
    while let Ok(Read::Line) = line::read_line(reader, buf) {
        if line::parse(buf).is_ok_and(|p| p.seq == seq) {
            return true;
        }
    }
    false
}
