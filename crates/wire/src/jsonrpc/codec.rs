//! The bounded newline codec for async readers (`tokio_util::codec`), following the rules
//! of [`super::framing`] and keeping each frame's raw bytes for byte-exact pass-through.

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::codec::Decoder;

use super::framing::{self, LineError, NEWLINE};

/// One frame as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    raw: Bytes,
    cut: bool,
}

impl Frame {
    /// The bytes exactly as they came, the terminator included.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// The raw bytes, to pass on without a copy.
    pub fn into_raw(self) -> Bytes {
        self.raw
    }

    /// The content, without `\n` or `\r\n`.
    pub fn content(&self) -> &[u8] {
        framing::content(&self.raw)
    }

    /// The content as text.
    pub fn text(&self) -> Result<&str, LineError> {
        framing::text(&self.raw)
    }

    /// Whether it holds nothing but whitespace.
    pub fn is_blank(&self) -> bool {
        framing::is_blank(&self.raw)
    }

    /// Whether the stream ended inside it (no final `\n`).
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// The frame if it is whole, else [`LineError::Cut`].
    pub fn whole(self) -> Result<Frame, LineError> {
        if self.cut {
            Err(LineError::Cut)
        } else {
            Ok(self)
        }
    }
}

/// Splits a byte stream into frames of at most `limit` bytes of content.
///
/// An oversized line is reported once, as soon as the limit is passed, as an item
/// (`Err(LineError::TooLong)`), then skipped up to its `\n`: the stream goes on, and memory
/// stays bounded by the limit whatever the peer sends. Only I/O errors end the stream. A
/// cut last frame is yielded with [`Frame::is_cut`] set; the reader decides what it is worth.
#[derive(Debug, Clone)]
pub struct LineCodec {
    limit: usize,
    /// How far the buffer was already searched for a `\n`.
    searched: usize,
    /// Inside an oversized line: drop bytes up to its `\n`.
    discarding: bool,
}

impl LineCodec {
    /// A codec that accepts at most `limit` bytes before each frame's `\n`.
    pub fn new(limit: usize) -> LineCodec {
        LineCodec {
            limit,
            searched: 0,
            discarding: false,
        }
    }

    /// Takes from the front of `buf` the first `run(whole)` bytes of `whole`, the whole
    /// frames in it, as one piece (`run` must answer 0 or the end of one of them); `None`
    /// when it takes none. Never while an oversized line is being skipped, nor when the
    /// buffer could hold a line longer than the limit: those are for [`Decoder::decode`] to
    /// report.
    pub(crate) fn decode_run(
        &mut self,
        buf: &mut BytesMut,
        run: impl Fn(&[u8]) -> usize,
    ) -> Option<Bytes> {
        if self.discarding || buf.len() > self.limit {
            return None;
        }
        let whole = memchr::memrchr(NEWLINE, buf).map_or(0, |at| at + 1);
        if whole == 0 {
            return None;
        }
        let n = run(&buf[..whole]);
        debug_assert!(n == 0 || (n <= whole && buf[n - 1] == NEWLINE));
        if n == 0 {
            return None;
        }
        // The search for a `\n` starts again from the new front.
        self.searched = 0;
        Some(buf.split_to(n).freeze())
    }
}

impl Decoder for LineCodec {
    type Item = Result<Frame, LineError>;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Self::Item>> {
        if self.discarding {
            match memchr::memchr(NEWLINE, buf) {
                Some(at) => {
                    buf.advance(at + 1);
                    self.discarding = false;
                }
                None => {
                    buf.clear();
                    return Ok(None);
                }
            }
        }
        // The same bound as the blocking reader: look at no more than `limit + 1` bytes.
        let window = buf.len().min(self.limit.saturating_add(1));
        let found = memchr::memchr(NEWLINE, &buf[self.searched.min(window)..window]);
        if let Some(at) = found {
            let end = self.searched + at + 1;
            self.searched = 0;
            let raw = buf.split_to(end).freeze();
            return Ok(Some(Ok(Frame { raw, cut: false })));
        }
        if buf.len() > self.limit {
            buf.advance(window);
            self.searched = 0;
            self.discarding = true;
            return Ok(Some(Err(LineError::TooLong { limit: self.limit })));
        }
        self.searched = window;
        Ok(None)
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Self::Item>> {
        if let Some(item) = self.decode(buf)? {
            return Ok(Some(item));
        }
        // `decode` left only bytes without a `\n`, all within the limit (or none at all).
        self.searched = 0;
        if self.discarding || buf.is_empty() {
            self.discarding = false;
            buf.clear();
            return Ok(None);
        }
        let raw = buf.split().freeze();
        Ok(Some(Ok(Frame { raw, cut: true })))
    }
}

/// Reads frames from a stream with a [`LineCodec`], as `FramedRead` does, and can also hand
/// out whole frames already read as one run, without splitting them: a reader that passes
/// most frames on untouched writes a run in one piece, without a copy. Not `FramedRead`
/// itself: it decodes a frame as soon as a read comes back, before a run could be taken,
/// and asks each read only for the room left behind the frames taken, so that its reads
/// shrink as runs are split off (this one asks for `capacity` every time).
pub struct FrameReader<R> {
    reader: R,
    codec: LineCodec,
    buf: BytesMut,
    /// How much one read asks for (at least).
    capacity: usize,
    eof: bool,
}

/// What [`FrameReader::next`] gives.
#[derive(Debug)]
pub enum Next {
    /// Whole frames, at least one, as they came.
    Run(Bytes),
    /// One frame (perhaps cut by the end of the stream), or an oversized line.
    Frame(Result<Frame, LineError>),
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Reads `reader` with `codec`, asking each read for at least `capacity` bytes of room.
    pub fn new(reader: R, codec: LineCodec, capacity: usize) -> FrameReader<R> {
        FrameReader {
            reader,
            codec,
            buf: BytesMut::with_capacity(capacity),
            capacity,
            eof: false,
        }
    }

    /// The next frames: the first `run(whole)` bytes of `whole`, the whole frames read and
    /// not yet taken, as one [`Next::Run`] (`run` must answer 0 or the end of one of them);
    /// else the next frame alone. `None` at the end of the stream. Cancel-safe: what was
    /// read stays buffered.
    pub async fn next(&mut self, run: impl Fn(&[u8]) -> usize) -> Option<std::io::Result<Next>> {
        loop {
            if let Some(taken) = self.codec.decode_run(&mut self.buf, &run) {
                return Some(Ok(Next::Run(taken)));
            }
            let item = if self.eof {
                self.codec.decode_eof(&mut self.buf)
            } else {
                self.codec.decode(&mut self.buf)
            };
            match item {
                Ok(Some(item)) => return Some(Ok(Next::Frame(item))),
                Err(e) => return Some(Err(e)),
                Ok(None) if self.eof => return None,
                Ok(None) => {}
            }
            if self.buf.capacity() - self.buf.len() < self.capacity {
                self.buf.reserve(self.capacity);
            }
            match self.reader.read_buf(&mut self.buf).await {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// What is read and not yet taken.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use tokio::io::AsyncWriteExt;
    use tokio_util::codec::FramedRead;

    use super::*;
    use crate::jsonrpc::framing::{read_line, Read};

    type Got = Vec<Result<(Vec<u8>, bool), LineError>>;

    /// Decodes `input` delivered in `chunk`-byte writes, with a limit of 10.
    async fn decode_all(input: &'static [u8], chunk: usize) -> Got {
        let (mut tx, rx) = tokio::io::duplex(chunk);
        let writer = tokio::spawn(async move {
            for part in input.chunks(chunk) {
                tx.write_all(part).await.unwrap();
            }
        });
        let got = FramedRead::new(rx, LineCodec::new(10))
            .map(|item| item.unwrap().map(|f| (f.raw().to_vec(), f.is_cut())))
            .collect()
            .await;
        writer.await.unwrap();
        got
    }

    #[tokio::test]
    async fn clean_end_gives_no_frame_and_a_cut_one_is_marked() {
        assert_eq!(decode_all(b"", 4).await, []);
        assert_eq!(
            decode_all(b"ab\n", 4).await,
            [Ok((b"ab\n".to_vec(), false))]
        );
        assert_eq!(
            decode_all(b"ab\ncd", 4).await,
            [Ok((b"ab\n".to_vec(), false)), Ok((b"cd".to_vec(), true))]
        );
    }

    #[tokio::test]
    async fn oversized_lines_are_reported_once_skipped_and_the_stream_goes_on() {
        for chunk in [1, 3, 64] {
            assert_eq!(
                decode_all(b"0123456789\n0123456789ABCDEFGHIJ\nok\n0123456789AB", chunk).await,
                [
                    Ok((b"0123456789\n".to_vec(), false)),
                    Err(LineError::TooLong { limit: 10 }),
                    Ok((b"ok\n".to_vec(), false)),
                    Err(LineError::TooLong { limit: 10 }),
                ],
                "chunk {chunk}"
            );
        }
    }

    #[tokio::test]
    async fn many_frames_in_one_read_one_split_across_reads_and_crlf() {
        let input = b"{\"a\":1}\r\n\n{\"b\":2}\n";
        let want: Got = vec![
            Ok((b"{\"a\":1}\r\n".to_vec(), false)),
            Ok((b"\n".to_vec(), false)),
            Ok((b"{\"b\":2}\n".to_vec(), false)),
        ];
        assert_eq!(decode_all(input, 64).await, want);
        assert_eq!(decode_all(input, 2).await, want);
        let mut codec = LineCodec::new(10);
        let mut buf = BytesMut::from(&input[..]);
        let first = codec.decode(&mut buf).unwrap().unwrap().unwrap();
        assert_eq!(first.content(), b"{\"a\":1}");
        assert_eq!(first.text(), Ok("{\"a\":1}"));
        assert!(codec.decode(&mut buf).unwrap().unwrap().unwrap().is_blank());
    }

    /// Reads all of `input` (one write) with a [`FrameReader`] of limit `limit` whose runs
    /// are the whole frames up to the first that holds an `X`.
    async fn read_runs(input: &'static [u8], limit: usize) -> Vec<String> {
        let mut reader = FrameReader::new(input, LineCodec::new(limit), 64);
        let run = |whole: &[u8]| match memchr::memchr(b'X', whole) {
            None => whole.len(),
            Some(at) => memchr::memrchr(NEWLINE, &whole[..at]).map_or(0, |nl| nl + 1),
        };
        let mut got = Vec::new();
        while let Some(read) = reader.next(run).await {
            got.push(match read.unwrap() {
                Next::Run(b) => format!("run {}", String::from_utf8_lossy(&b)),
                Next::Frame(Ok(f)) if f.is_cut() => {
                    format!("cut {}", String::from_utf8_lossy(f.raw()))
                }
                Next::Frame(Ok(f)) => format!("frame {}", String::from_utf8_lossy(f.raw())),
                Next::Frame(Err(e)) => format!("error {e}"),
            });
        }
        got
    }

    #[tokio::test]
    async fn runs_stop_at_the_first_frame_they_refuse_and_never_take_a_cut_or_long_one() {
        assert_eq!(
            read_runs(b"a\nb\nXc\nd\nXe\nf", 100).await,
            ["run a\nb\n", "frame Xc\n", "run d\n", "frame Xe\n", "cut f"]
        );
        assert_eq!(read_runs(b"X\n\n", 100).await, ["frame X\n", "run \n"]);
        // A buffer that could hold a line past the limit is left to the codec, which
        // reports it; once it is skipped, runs come back.
        assert_eq!(
            read_runs(b"0123456789ABC\nok\n", 10).await,
            ["error a frame over the 10-byte limit", "frame ok\n"]
        );
    }

    #[tokio::test]
    async fn the_codec_and_the_blocking_reader_agree() {
        let inputs: [&'static [u8]; 5] = [
            b"",
            b"0123456789\n",
            b"0123456789A\n",
            b"a\r\nb\n\nc",
            b"x\n0123456789ABC",
        ];
        for input in inputs {
            let mut blocking: Got = Vec::new();
            let mut reader = std::io::BufReader::new(input);
            let mut buf = Vec::new();
            loop {
                match read_line(&mut reader, 10, &mut buf).unwrap() {
                    Read::Eof => break,
                    Read::Line => blocking.push(Ok((buf.clone(), false))),
                    Read::Cut => blocking.push(Ok((buf.clone(), true))),
                    Read::TooLong => {
                        blocking.push(Err(LineError::TooLong { limit: 10 }));
                        // Skip the rest of the line, as the codec does.
                        std::io::BufRead::read_until(&mut reader, NEWLINE, &mut Vec::new())
                            .unwrap();
                    }
                }
            }
            assert_eq!(decode_all(input, 4).await, blocking, "{input:?}");
        }
    }
}
