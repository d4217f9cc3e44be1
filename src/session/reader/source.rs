//! Batches out of a plain or zstd log, never past a length limit and never larger than
//! [`MAX_BATCH_BYTES`].
//!
//! Purpose: [`LineSource`] is the reading half of a scan: a plain log read into one reusable
//! buffer and cut at line ends, a zstd log decompressed frame by frame into a reusable buffer
//! (decoders pooled per thread, [`PooledDecoder`]); a line or frame past the bound is a
//! [`Batch::Defect`], not an allocation.
//!
//! Invariant: memory stays bounded by the batch limit whatever the input (an over-long line is
//! skipped, not kept; a frame inflating past the bound stops there), and no byte at or past
//! `limit` is ever yielded. Proof: `reader::tests` (endless and bomb inputs read bounded),
//! `tests/reliability_bounded_memory.rs`, and the `log_reader` fuzz target.

use super::parse::lines;
use super::turn_end::{zstd_turn_end_follows, TurnEndScanner};
use super::{Encoding, HEADER_BUFFER, MAX_BATCH_BYTES, SCAN_BUFFER};
use crate::session::error::{Result, SessionError};
use std::io::{BufRead, BufReader, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};
use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

pub(super) enum Batch {
    /// Whole lines in `LineSource::buf[range]` (each ending in `\n`, except the final line of a
    /// plain log that lost its newline), and the file offset just past the batch. The range is
    /// valid until the next call to `next_batch`.
    Lines {
        range: Range<usize>,
        end_offset: u64,
    },
    /// A batch that cannot be decoded at all (bad zstd frame, torn frame, oversized batch).
    Defect { line: u64, reason: String },
}

pub(super) enum Input<R: Read> {
    /// Plain logs are read straight into `LineSource::buf`.
    Plain(std::io::Take<R>),
    /// zstd input is buffered; frames are decompressed into `LineSource::buf`.
    Zstd {
        reader: BufReader<std::io::Take<R>>,
        decoder: PooledDecoder,
    },
}

/// A zstd decompression context, reused by the logs read on one thread: creating one costs more
/// than reading a session header, and the first listing of a home reads thousands of them.
pub(super) struct PooledDecoder(Option<Box<Decoder<'static>>>);

thread_local! {
    static DECODERS: std::cell::RefCell<Option<Box<Decoder<'static>>>> =
        const { std::cell::RefCell::new(None) };
}

impl PooledDecoder {
    pub(super) fn take() -> std::io::Result<PooledDecoder> {
        let pooled = DECODERS
            .try_with(|slot| slot.borrow_mut().take())
            .ok()
            .flatten();
        Ok(PooledDecoder(Some(match pooled {
            Some(decoder) => decoder,
            None => Box::new(Decoder::new()?),
        })))
    }
}

impl std::ops::Deref for PooledDecoder {
    type Target = Decoder<'static>;
    fn deref(&self) -> &Self::Target {
        self.0.as_deref().expect("present until dropped")
    }
}

impl std::ops::DerefMut for PooledDecoder {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.as_deref_mut().expect("present until dropped")
    }
}

impl Drop for PooledDecoder {
    fn drop(&mut self) {
        // Back to the thread's slot, reset to a fresh frame (a read may stop inside one); a
        // context that cannot be reset is dropped instead.
        if let Some(mut decoder) = self.0.take() {
            if decoder.reinit().is_ok() {
                let _ = DECODERS.try_with(|slot| *slot.borrow_mut() = Some(decoder));
            }
        }
    }
}

/// Yields batches of lines from a plain or zstd log, never past `limit` bytes.
pub(super) struct LineSource<R: Read> {
    pub(super) path: PathBuf,
    pub(super) input: Input<R>,
    /// Bytes this source may read, from `base`.
    pub(super) limit: u64,
    /// The file offset the reader starts at.
    pub(super) base: u64,
    /// The file offset reached.
    pub(super) offset: u64,
    /// Logical lines handed out so far.
    pub(super) line_no: u64,
    pub(super) last_line_unterminated: bool,
    /// Plain: the read buffer, unconsumed in `pos..filled`. zstd: the current frame.
    pub(super) buf: Vec<u8>,
    pub(super) pos: usize,
    pub(super) filled: usize,
    pub(super) eof: bool,
    /// The largest batch accepted: [`MAX_BATCH_BYTES`], or [`MAX_HEADER_BYTES`] for a header read.
    pub(super) max_batch: usize,
    /// The last defect was a batch over `max_batch`.
    pub(super) over_limit: bool,
    /// A plain source stopped inside an over-long line: what follows is still that line.
    pub(super) mid_line: bool,
}

impl<R: Read> LineSource<R> {
    pub(super) fn new(
        path: &Path,
        reader: R,
        encoding: Encoding,
        limit: u64,
        buffer: usize,
    ) -> Result<Self> {
        let reader = reader.take(limit);
        let input = match encoding {
            Encoding::Plain => Input::Plain(reader),
            Encoding::Zstd => Input::Zstd {
                reader: BufReader::with_capacity(buffer, reader),
                decoder: PooledDecoder::take().map_err(|e| SessionError::io(path, e))?,
            },
        };
        Ok(LineSource {
            path: path.to_path_buf(),
            input,
            limit,
            base: 0,
            offset: 0,
            line_no: 0,
            last_line_unterminated: false,
            buf: match encoding {
                // No bigger than what is left to read (a small log is not read through, nor
                // zeroed, a 256 KiB buffer); it grows for a long line as any buffer does.
                Encoding::Plain => {
                    let left = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
                    vec![0; buffer.min(left.max(HEADER_BUFFER))]
                }
                Encoding::Zstd => Vec::new(),
            },
            pos: 0,
            filled: 0,
            eof: false,
            max_batch: MAX_BATCH_BYTES,
            over_limit: false,
            mid_line: false,
        })
    }

    pub(super) fn next_batch(&mut self) -> Result<Option<Batch>> {
        match self.input {
            Input::Plain(_) => self.next_plain_line(),
            Input::Zstd { .. } => self.next_frame(),
        }
    }

    pub(super) fn next_plain_line(&mut self) -> Result<Option<Batch>> {
        // Bytes after `pos` already searched for a newline.
        let mut searched = 0;
        loop {
            let unread = &self.buf[self.pos..self.filled];
            let found = memchr::memchr(b'\n', &unread[searched..]);
            if found.is_some() || self.eof {
                if unread.is_empty() {
                    return Ok(None);
                }
                let len = found.map_or(unread.len(), |n| searched + n + 1);
                let range = self.pos..self.pos + len;
                self.pos += len;
                self.offset += len as u64;
                self.line_no += 1;
                self.last_line_unterminated = found.is_none();
                return Ok(Some(Batch::Lines {
                    range,
                    end_offset: self.offset,
                }));
            }
            searched = unread.len();
            // A long line that does not even start a JSON object is a defect now, not after
            // `max_batch` bytes of it were buffered; the rest of it is skipped, not kept.
            let not_json = unread
                .iter()
                .find(|b| !matches!(b, b' ' | b'\t' | b'\r'))
                .is_some_and(|&b| b != b'{');
            if not_json {
                self.mid_line = true;
                self.pos = self.filled;
                self.offset += searched as u64;
                return Ok(Some(Batch::Defect {
                    line: self.line_no + 1,
                    reason: format!(
                        "unparsable record: a line of over {searched} bytes that is not a JSON object"
                    ),
                }));
            }
            if searched >= self.max_batch {
                self.over_limit = true;
                self.mid_line = true;
                self.pos = self.filled;
                self.offset += searched as u64;
                return Ok(Some(Batch::Defect {
                    line: self.line_no + 1,
                    reason: format!("line longer than {} bytes", self.max_batch),
                }));
            }
            self.fill()?;
        }
    }

    /// Moves unread bytes to the front, grows a full buffer, and reads more.
    pub(super) fn fill(&mut self) -> Result<()> {
        let Input::Plain(reader) = &mut self.input else {
            return Ok(());
        };
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.filled, 0);
            self.filled -= self.pos;
            self.pos = 0;
        }
        if self.filled == self.buf.len() {
            let grown = (self.buf.len() * 2).clamp(HEADER_BUFFER, self.max_batch + 1);
            self.buf.resize(grown, 0);
        }
        loop {
            match reader.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(SessionError::io(&self.path, e)),
            }
            return Ok(());
        }
    }

    /// Decodes exactly one zstd frame into `buf`.
    pub(super) fn next_frame(&mut self) -> Result<Option<Batch>> {
        let Input::Zstd { reader, decoder } = &mut self.input else {
            return Ok(None);
        };
        self.buf.clear();
        let mut started = false;
        loop {
            let available = reader
                .fill_buf()
                .map_err(|e| SessionError::io(&self.path, e))?;
            if available.is_empty() {
                if !started {
                    return Ok(None);
                }
                return Ok(Some(Batch::Defect {
                    line: self.line_no + 1,
                    reason: "incomplete zstd frame".into(),
                }));
            }
            started = true;
            let mut input = InBuffer::around(available);
            let mut finished = false;
            let mut failure = None;
            loop {
                if self.buf.capacity() - self.buf.len() < super::OUT_CHUNK {
                    if self.buf.len() >= self.max_batch {
                        self.over_limit = true;
                        failure =
                            Some(format!("zstd frame inflates past {} bytes", self.max_batch));
                        break;
                    }
                    self.buf.reserve(super::OUT_CHUNK.max(self.buf.len()));
                }
                let before = self.buf.len();
                // Decompresses into the spare capacity; the buffer's length follows.
                let (hint, written) = {
                    let mut output = OutBuffer::around_pos(&mut self.buf, before);
                    let hint = decoder.run(&mut input, &mut output);
                    (hint, output.pos() - before)
                };
                match hint {
                    Ok(0) => {
                        finished = true;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        failure = Some(format!("bad zstd frame: {e}"));
                        break;
                    }
                }
                let room_left = self.buf.capacity() > self.buf.len();
                if input.pos() == input.src.len() && (written == 0 || room_left) {
                    break;
                }
            }
            let consumed = input.pos();
            reader.consume(consumed);
            self.offset += consumed as u64;
            if let Some(reason) = failure {
                let _ = decoder.reinit();
                return Ok(Some(Batch::Defect {
                    line: self.line_no + 1,
                    reason,
                }));
            }
            if finished {
                let _ = decoder.reinit();
                return Ok(Some(self.frame_lines()));
            }
        }
    }

    pub(super) fn frame_lines(&mut self) -> Batch {
        if self.buf.last() != Some(&b'\n') && !self.buf.is_empty() {
            return Batch::Defect {
                line: self.line_no + 1,
                reason: "zstd frame does not end with a newline".into(),
            };
        }
        self.line_no += lines(&self.buf).count() as u64;
        self.last_line_unterminated = false;
        Batch::Lines {
            range: 0..self.buf.len(),
            end_offset: self.offset,
        }
    }

    /// Whether any readable `turn/end` record follows the current position.
    ///
    /// This decides between a torn tail and corruption after a defect, and the rest of the log
    /// may be gigabytes: it is streamed through a bounded buffer, and only a line that may be a
    /// `turn/end` record is kept (see [`TurnEndScanner`]), so memory does not depend on the
    /// log's size.
    pub(super) fn turn_end_follows(&mut self) -> Result<bool> {
        match &mut self.input {
            Input::Plain(reader) => {
                // The rest of an over-long line is skipped, not kept.
                let mut scanner = TurnEndScanner {
                    skipping: self.mid_line,
                    ..TurnEndScanner::default()
                };
                loop {
                    let unread = &self.buf[self.pos..self.filled];
                    let read = unread.len();
                    let found = scanner.feed(unread);
                    self.pos = self.filled;
                    self.offset += read as u64;
                    if found {
                        return Ok(true);
                    }
                    if self.eof {
                        return Ok(scanner.finish());
                    }
                    // A buffer grown for an over-long line is not needed for skimming.
                    if self.buf.len() > SCAN_BUFFER {
                        self.buf = vec![0; SCAN_BUFFER];
                    }
                    self.pos = 0;
                    self.filled = 0;
                    loop {
                        match reader.read(&mut self.buf) {
                            Ok(0) => self.eof = true,
                            Ok(n) => self.filled = n,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(e) => return Err(SessionError::io(&self.path, e)),
                        }
                        break;
                    }
                }
            }
            Input::Zstd { reader, .. } => {
                let (found, read) =
                    zstd_turn_end_follows(reader).map_err(|e| SessionError::io(&self.path, e))?;
                self.offset += read;
                Ok(found)
            }
        }
    }
}
