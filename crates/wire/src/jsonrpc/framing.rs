//! The newline-delimited framing rules, and a blocking reader that follows them.
//!
//! A frame is the bytes up to and including `\n`; its content drops that `\n` and one `\r`
//! before it (CRLF is accepted). Content over the reader's limit is an error, and is never
//! buffered whole. The end of the stream before any byte of a frame is a clean end; after
//! some bytes but before their `\n` it cuts a frame, which the reader says rather than
//! passing it off as whole. The async codec ([`super::codec`]) follows these same rules.
//!
//! This file uses no async runtime: the hook executable reads its answer header with
//! [`read_line`], and that path stays lean (no tokio, no allocation beyond the caller's
//! buffer).

use std::io::{self, BufRead};

/// The byte that ends a frame.
pub(crate) const NEWLINE: u8 = b'\n';

/// Why the bytes of one frame are not usable. The same wording wherever a line is read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Its content passed the reader's limit before a `\n` came.
    #[error("a frame over the {limit}-byte limit")]
    TooLong {
        /// The reader's limit on a frame's content, in bytes.
        limit: usize,
    },
    /// The stream ended inside it.
    #[error("a frame cut off by the end of the stream")]
    Cut,
    /// Its content is not UTF-8 (for readers that want text).
    #[error("a frame that is not valid UTF-8")]
    NotUtf8,
}

/// What one [`read_line`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// The clean end of the stream: nothing read.
    Eof,
    /// A whole frame, `\n` included.
    Line,
    /// Bytes up to the end of the stream without a final `\n`.
    Cut,
    /// More than the limit without a `\n`; the buffer holds the first `limit + 1` bytes and
    /// the rest of the line is still unread.
    TooLong,
}

impl Read {
    /// `Ok(true)` for a whole frame, `Ok(false)` for a clean end, else why not.
    pub fn check(self, limit: usize) -> Result<bool, LineError> {
        match self {
            Read::Line => Ok(true),
            Read::Eof => Ok(false),
            Read::Cut => Err(LineError::Cut),
            Read::TooLong => Err(LineError::TooLong { limit }),
        }
    }
}

/// Reads one frame into `buf` (cleared first, raw bytes with the `\n`), reading at most
/// `limit + 1` bytes. On an I/O error `buf` keeps what was read before it.
pub fn read_line(reader: &mut impl BufRead, limit: usize, buf: &mut Vec<u8>) -> io::Result<Read> {
    buf.clear();
    io::Read::take(&mut *reader, limit as u64 + 1).read_until(NEWLINE, buf)?;
    Ok(classify(buf, limit))
}

/// Classifies what a bounded read returned: it stopped after a `\n`, after `limit + 1`
/// bytes, or at the end of the stream.
fn classify(buf: &[u8], limit: usize) -> Read {
    match buf.last() {
        None => Read::Eof,
        Some(&NEWLINE) => Read::Line,
        Some(_) if buf.len() > limit => Read::TooLong,
        Some(_) => Read::Cut,
    }
}

/// A frame's content: without its `\n` and one `\r` before it.
pub(crate) fn content(raw: &[u8]) -> &[u8] {
    let line = raw.strip_suffix(b"\n").unwrap_or(raw);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A frame's content as text.
pub fn text(raw: &[u8]) -> Result<&str, LineError> {
    std::str::from_utf8(content(raw)).map_err(|_| LineError::NotUtf8)
}

/// Whether a frame holds nothing but whitespace (readers of JSON skip those).
pub(crate) fn is_blank(raw: &[u8]) -> bool {
    raw.iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads every frame of `input` with a limit of 10, the way the audit reader does
    /// (stopping at a line that is too long).
    fn read_all(input: &[u8], chunk: usize) -> Vec<(Read, Vec<u8>)> {
        let mut reader = io::BufReader::with_capacity(chunk, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let read = read_line(&mut reader, 10, &mut buf).unwrap();
            out.push((read, buf.clone()));
            if matches!(read, Read::Eof | Read::Cut | Read::TooLong) {
                return out;
            }
        }
    }

    #[test]
    fn clean_end_after_a_newline_or_before_any_byte() {
        assert_eq!(read_all(b"", 4), [(Read::Eof, vec![])]);
        assert_eq!(
            read_all(b"{\"a\":1}\n", 4),
            [(Read::Line, b"{\"a\":1}\n".to_vec()), (Read::Eof, vec![])]
        );
    }

    #[test]
    fn a_cut_last_frame_is_not_a_clean_end() {
        assert_eq!(
            read_all(b"one\ntw", 64),
            [(Read::Line, b"one\n".to_vec()), (Read::Cut, b"tw".to_vec())]
        );
        assert_eq!(Read::Cut.check(10), Err(LineError::Cut));
    }

    #[test]
    fn many_frames_in_one_read_and_one_split_across_reads() {
        // A 3-byte buffer splits every frame; a 64-byte one holds them all.
        for chunk in [3, 64] {
            let got = read_all(b"ab\r\ncd\n\nef\n", chunk);
            let frames: Vec<&[u8]> = got.iter().map(|(_, b)| content(b)).collect();
            assert_eq!(
                frames,
                [&b"ab"[..], b"cd", b"", b"ef", b""],
                "chunk {chunk}"
            );
            assert!(is_blank(&got[2].1));
        }
    }

    #[test]
    fn the_limit_counts_content_and_stops_reading_past_it() {
        // Exactly 10 bytes of content is whole; 11 is too long, and no more is read.
        let got = read_all(b"0123456789\n0123456789A\n", 64);
        assert_eq!(got[0], (Read::Line, b"0123456789\n".to_vec()));
        assert_eq!(got[1], (Read::TooLong, b"0123456789A".to_vec()));
        assert_eq!(
            Read::TooLong.check(10).unwrap_err().to_string(),
            "a frame over the 10-byte limit"
        );
    }

    #[test]
    fn crlf_content_and_text() {
        assert_eq!(content(b"x\r\n"), b"x");
        assert_eq!(content(b"x\n"), b"x");
        assert_eq!(content(b"x"), b"x");
        assert_eq!(text(b"\xff\n"), Err(LineError::NotUtf8));
        assert_eq!(text(b"ok\r\n"), Ok("ok"));
    }
}
