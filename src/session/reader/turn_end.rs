//! Is there a readable `turn/end` after a defect? The question that tells a torn tail from
//! corruption, answered in bounded memory.
//!
//! Purpose: after a defect the rest of the log may be gigabytes; [`TurnEndScanner`] looks for a
//! `turn/end` line in bytes fed in pieces, keeping only the current line and only while it may
//! still be one, and [`zstd_turn_end_follows`] tries every frame start of a zstd tail.
//!
//! Invariant: memory never depends on the log's size: at most one line (up to
//! [`MAX_BATCH_BYTES`]) and one candidate frame ([`MAX_COMPRESSED_FRAME`]) are held. Proof:
//! `tests/session/store.rs` and `tests/session/hostile_sessions.rs` (torn tails against
//! corruption in both encodings) and `tests/reliability_bounded_memory.rs`.

use super::OUT_CHUNK;
use super::{MAX_BATCH_BYTES, SCAN_BUFFER};
use crate::session::format::{Record, TURN_END};
use crate::session::skim;
use std::io::BufRead;
use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

/// Finds a `turn/end` line in a stream of bytes fed in pieces, keeping only the current line,
/// and only while it may still be one: a line in the canonical layout whose `type` is something
/// else is skipped as soon as its type is read; other lines are kept up to [`MAX_BATCH_BYTES`]
/// (a longer line is a defect, not a record).
#[derive(Default)]
pub(super) struct TurnEndScanner {
    pub(super) line: Vec<u8>,
    pub(super) skipping: bool,
    pub(super) found: bool,
}

impl TurnEndScanner {
    /// Feeds the next bytes; true once a `turn/end` line was found.
    pub(super) fn feed(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() && !self.found {
            let newline = memchr::memchr(b'\n', bytes);
            let piece = &bytes[..newline.unwrap_or(bytes.len())];
            if !self.skipping {
                if self.line.len() + piece.len() > MAX_BATCH_BYTES {
                    self.skip();
                } else {
                    self.line.extend_from_slice(piece);
                    if self.cannot_be_turn_end() {
                        self.skip();
                    }
                }
            }
            match newline {
                Some(n) => {
                    self.end_line();
                    bytes = &bytes[n + 1..];
                }
                None => break,
            }
        }
        self.found
    }

    /// The stream ended (a final line without its newline counts too).
    pub(super) fn finish(mut self) -> bool {
        if !self.found && !self.line.is_empty() {
            self.end_line();
        }
        self.found
    }

    pub(super) fn end_line(&mut self) {
        if !self.skipping && is_turn_end_line(&self.line) {
            self.found = true;
        }
        self.skipping = false;
        self.line.clear();
        if self.line.capacity() > SCAN_BUFFER {
            self.line = Vec::new();
        }
    }

    pub(super) fn skip(&mut self) {
        self.skipping = true;
        self.line = Vec::new();
    }

    /// The line so far is in the canonical layout with a `type` other than `turn/end`.
    pub(super) fn cannot_be_turn_end(&self) -> bool {
        skim::peek_kind(&self.line).is_some_and(|kind| kind != TURN_END)
    }
}

/// The largest compressed frame worth decoding: a frame inflating to at most [`MAX_BATCH_BYTES`]
/// cannot be much larger than that (zstd's worst case adds a few bytes per 128 KiB block).
pub(super) const MAX_COMPRESSED_FRAME: usize = MAX_BATCH_BYTES + (MAX_BATCH_BYTES >> 10) + 4096;

/// Tries every zstd frame start in the rest of `reader` and looks for a `turn/end` line in each
/// frame that decodes completely. Compressed bytes are held only from the candidate frame start
/// on (at most [`MAX_COMPRESSED_FRAME`]), decoded bytes only as the current line. Returns
/// whether one was found and the bytes read.
pub(super) fn zstd_turn_end_follows<R: BufRead>(reader: &mut R) -> std::io::Result<(bool, u64)> {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    let mut window: Vec<u8> = Vec::new();
    let mut eof = false;
    let mut read = 0u64;
    // Where the search for the next frame start resumes, in `window`.
    let mut start = 0;
    loop {
        let candidate = window[start..]
            .windows(4)
            .position(|w| w == MAGIC)
            .map(|p| start + p);
        let Some(at) = candidate else {
            if eof {
                return Ok((false, read));
            }
            // Keep only what could begin a magic number split across reads.
            let keep = window.len().saturating_sub(3).max(start);
            window.drain(..keep);
            start = 0;
            read += fill_window(reader, &mut window, SCAN_BUFFER, &mut eof)? as u64;
            continue;
        };
        // Bytes before the candidate are done with.
        if at > SCAN_BUFFER {
            window.drain(..at);
            start = 0;
            continue;
        }
        match decode_frame_for_turn_end(&window[at..]) {
            FrameOutcome::Found => return Ok((true, read)),
            FrameOutcome::NeedMore if !eof && window.len() - at < MAX_COMPRESSED_FRAME => {
                // Read as much again (bounded), then decode this candidate again.
                let more = (window.len() - at).clamp(SCAN_BUFFER, MAX_COMPRESSED_FRAME);
                read += fill_window(reader, &mut window, more, &mut eof)? as u64;
            }
            _ => start = at + 1,
        }
    }
}

/// Appends up to `want` bytes of `reader` to `window`.
pub(super) fn fill_window<R: BufRead>(
    reader: &mut R,
    window: &mut Vec<u8>,
    want: usize,
    eof: &mut bool,
) -> std::io::Result<usize> {
    let mut added = 0;
    while added < want {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            *eof = true;
            break;
        }
        let n = available.len().min(want - added);
        window.extend_from_slice(&available[..n]);
        reader.consume(n);
        added += n;
    }
    Ok(added)
}

pub(super) enum FrameOutcome {
    /// The frame decoded completely and holds a `turn/end` line.
    Found,
    /// The frame decoded completely without one, or is not a frame.
    NotFound,
    /// The bytes end inside the frame.
    NeedMore,
}

/// Decodes one zstd frame at the start of `bytes`, streaming its output through a
/// [`TurnEndScanner`].
pub(super) fn decode_frame_for_turn_end(bytes: &[u8]) -> FrameOutcome {
    let Ok(mut decoder) = Decoder::new() else {
        return FrameOutcome::NotFound;
    };
    let mut input = InBuffer::around(bytes);
    let mut out = vec![0u8; OUT_CHUNK];
    let mut scanner = TurnEndScanner::default();
    let mut produced = 0usize;
    loop {
        let mut output = OutBuffer::around(&mut out[..]);
        let hint = decoder.run(&mut input, &mut output);
        let written = output.pos();
        produced += written;
        scanner.feed(&out[..written]);
        match hint {
            Err(_) => return FrameOutcome::NotFound,
            Ok(0) => {
                return if scanner.finish() {
                    FrameOutcome::Found
                } else {
                    FrameOutcome::NotFound
                }
            }
            Ok(_) => {}
        }
        if produced > MAX_BATCH_BYTES {
            return FrameOutcome::NotFound;
        }
        if input.pos() == bytes.len() && written < out.len() {
            return FrameOutcome::NeedMore;
        }
    }
}

pub(super) fn is_turn_end_line(line: &[u8]) -> bool {
    // Cheap filter first: most lines are not turn ends.
    if !line
        .windows(TURN_END.len())
        .any(|w| w == TURN_END.as_bytes())
    {
        return false;
    }
    matches!(serde_json::from_slice::<Record>(line), Ok(r) if r.kind() == TURN_END)
}
