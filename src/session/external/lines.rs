//! The complete lines of another agent's file, read bounded, and the stamp that says a file
//! changed.
//!
//! Purpose: every file agent's parsers are pure sinks over complete lines ([`LineSink`]); this
//! file is the one place their files are read. Invariant: only a regular file is read, without
//! blocking; a line in flight (no newline yet) is neither fed nor consumed; no line longer than
//! the limit is held in memory; memory stays bounded whatever the file. Proof: the tests of
//! `tests/reliability_external_lines.rs` and `tests/reliability_linear_readers.rs`.

use crate::session::error::{Result, SessionError};
use crate::session::files;
use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::time::SystemTime;

/// A file's identity and size: a change means it must be read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl FileStamp {
    pub(super) fn of(meta: &fs::Metadata) -> FileStamp {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        }
    }

    /// Size, modification time and inode.
    pub(super) fn parts(self) -> (u64, Option<SystemTime>, u64) {
        (self.len, self.modified, self.inode)
    }

    /// The stamp of those parts (a stamp read back from the persistent listing).
    pub(super) fn from_parts(len: u64, modified: Option<SystemTime>, inode: u64) -> FileStamp {
        FileStamp {
            len,
            modified,
            inode,
        }
    }

    /// Whether a file now stamped `self` is the file once stamped `old`, grown or not: the
    /// same inode and not shorter (records are only appended).
    pub(super) fn continues(self, old: FileStamp) -> bool {
        self.inode == old.inode && self.len >= old.len
    }

    /// Whether the file once stamped `self` is, now stamped `now`, the same file still holding
    /// at least `offset` bytes (a scan that ended there may go on from it).
    pub(super) fn continues_to(self, now: FileStamp, offset: u64) -> bool {
        self.inode == now.inode && now.len >= offset
    }
}

/// A sink for the complete lines of a file; returns `false` to stop reading.
pub trait LineSink {
    fn line(&mut self, index: u64, bytes: &[u8]) -> bool;
}

/// The longest line of another agent's file that is read: a longer one is a defect (as in the
/// dsh store, SPEC §3.2), skipped with a warning and never held in memory whole. Claude Code
/// puts pasted images inline as base64, so a real record can be megabytes; 64 MiB is far above
/// any seen and far below what a listing may hold.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Feeds the complete lines of `path` from byte `offset` (line number `first`) to `sink`. A last
/// line without its newline is a write in flight: it is not fed and not consumed. A line over
/// [`MAX_LINE_BYTES`] is skipped (counted, not fed) with a warning naming the file and line;
/// memory stays within the limit whatever the line's length. Only a regular file is read, opened
/// without blocking ([`files::open_read`]): a FIFO or a device in a session's place is an error,
/// never a wait. Returns the offset and line number just past the last line consumed.
pub fn read_lines(
    path: &Path,
    offset: u64,
    first: u64,
    sink: &mut dyn LineSink,
) -> Result<(u64, u64)> {
    read_lines_limited(path, offset, first, MAX_LINE_BYTES, sink)
}

/// [`read_lines`] with the line limit given.
pub fn read_lines_limited(
    path: &Path,
    offset: u64,
    first: u64,
    max_line: usize,
    sink: &mut dyn LineSink,
) -> Result<(u64, u64)> {
    let mut file = files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| SessionError::io(path, e))?;
    }
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    let (mut offset, mut index) = (offset, first);
    let cap = max_line as u64;
    loop {
        line.clear();
        if line.capacity() > 1 << 20 {
            line = Vec::new();
        }
        // At most the limit (newline included) is read into `line`; `read_until` finds the newline
        // with the standard library's fast search.
        let n = (&mut reader)
            .take(cap)
            .read_until(b'\n', &mut line)
            .map_err(|e| SessionError::io(path, e))?;
        let mut len = n as u64;
        if line.last() != Some(&b'\n') {
            if len < cap {
                // The end of the file before a newline: a write in flight, not consumed.
                return Ok((offset, index));
            }
            // Over the limit: skip to the newline through a small buffer.
            line = Vec::new();
            let mut scratch = Vec::with_capacity(64 * 1024);
            loop {
                scratch.clear();
                let k = (&mut reader)
                    .take(1 << 20)
                    .read_until(b'\n', &mut scratch)
                    .map_err(|e| SessionError::io(path, e))?;
                if k == 0 {
                    return Ok((offset, index));
                }
                len += k as u64;
                if scratch.last() == Some(&b'\n') {
                    break;
                }
            }
            offset += len;
            tracing::warn!(file = %path.display(), line = index + 1, bytes = len, limit = max_line, "skipping a line longer than the limit");
            index += 1;
            continue;
        }
        offset += len;
        let keep_going = sink.line(index, &line[..line.len() - 1]);
        index += 1;
        if !keep_going {
            return Ok((offset, index));
        }
    }
}
