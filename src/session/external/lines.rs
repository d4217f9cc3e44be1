//! The complete lines of another agent's file, read bounded, and the stamp that says a file
//! changed.
//!
//! Purpose: every file agent's parsers are pure sinks over complete lines ([`LineSink`]); this
//! file is the one place their files are read. Invariant: only a regular file is read, without
//! blocking; a line in flight (no newline yet) is neither fed nor consumed; no line longer than
//! the limit is held in memory; memory stays bounded whatever the file (one buffer, as long as
//! the longest line fed, at most the limit); a byte is copied once, from the kernel into that
//! buffer, and a line is fed from where it lies. Proof: the tests of
//! `tests/reliability_external_lines.rs` and `tests/reliability_linear_readers.rs`.

use crate::session::error::{Result, SessionError};
use crate::session::files;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::SystemTime;

/// A file's identity and size: a change means it must be read again. Its status change time
/// rides along (not compared): unchanged, it says that no `chmod`, `chown` or ACL change
/// happened since the stamp was taken.
#[derive(Debug, Clone, Copy)]
pub struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
    /// The status change time in nanoseconds (`None` where the platform or a saved stamp has
    /// none).
    changed: Option<i64>,
}

impl PartialEq for FileStamp {
    fn eq(&self, other: &FileStamp) -> bool {
        (self.len, self.modified, self.inode) == (other.len, other.modified, other.inode)
    }
}

impl Eq for FileStamp {}

impl FileStamp {
    pub(super) fn of(meta: &fs::Metadata) -> FileStamp {
        #[cfg(unix)]
        let (inode, changed) = {
            use std::os::unix::fs::MetadataExt;
            let changed = meta
                .ctime()
                .checked_mul(1_000_000_000)
                .and_then(|ns| ns.checked_add(meta.ctime_nsec()));
            (meta.ino(), changed)
        };
        #[cfg(not(unix))]
        let (inode, changed) = (0, None);
        FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
            changed,
        }
    }

    /// The status change time (nanoseconds), if known.
    pub(super) fn changed(self) -> Option<i64> {
        self.changed
    }

    /// This stamp with the status change time `changed` (a stamp read back from disk).
    pub(super) fn with_changed(self, changed: Option<i64>) -> FileStamp {
        FileStamp { changed, ..self }
    }

    /// Whether no status change (mode, owner, ACL) happened between the stamp `old` and this
    /// one: both know their change time and it is the same.
    pub(super) fn same_status(self, old: FileStamp) -> bool {
        self.changed.is_some() && self.changed == old.changed
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
            changed: None,
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
///
/// The file is read straight into one buffer and each line is fed from where it lies there: a
/// byte is copied once, from the kernel, as `cat` copies it. A line longer than the buffer
/// grows it (doubling, up to the limit), so a 12 MB record is read into place and never copied
/// whole again; past the limit the rest of the line is read through the buffer and dropped.
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
    // The thread's buffer from its last file: a first listing reads thousands of files, and a
    // fresh buffer for each would be zeroed for each.
    let mut buf = BUFFER.with(|b| std::mem::take(&mut *b.borrow_mut()));
    if buf.len() < FIRST_READ {
        buf = vec![0; FIRST_READ];
    }
    let mut lines = Lines {
        path,
        file,
        buf,
        start: 0,
        filled: 0,
        offset,
        index: first,
        max_line: max_line.max(1),
        first_offset: offset,
    };
    let result = lines.run(sink);
    if lines.buf.len() <= KEPT {
        let buf = std::mem::take(&mut lines.buf);
        BUFFER.with(|b| *b.borrow_mut() = buf);
    }
    result.map_err(|e| SessionError::io(path, e))?;
    Ok((lines.offset, lines.index))
}

thread_local! {
    /// The line buffer a thread keeps between files (at most [`KEPT`] bytes).
    static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The largest buffer a thread keeps once its file is read: one grown for a long line is freed.
const KEPT: usize = 1 << 20;

/// The first read of a file: enough for the head of most sessions, little for the thousands of
/// heads a first listing reads.
const FIRST_READ: usize = 64 * 1024;
/// The reads after it, as large as `cat`'s.
const READ: usize = 256 * 1024;

/// The state of [`read_lines_limited`]: `buf[start..filled]` is read and not yet fed (the start
/// of a line), the file's `offset` is where `buf[start]` lies.
struct Lines<'p> {
    path: &'p Path,
    file: fs::File,
    buf: Vec<u8>,
    start: usize,
    filled: usize,
    offset: u64,
    index: u64,
    max_line: usize,
    /// Where the read started.
    first_offset: u64,
}

impl Lines<'_> {
    fn run(&mut self, sink: &mut dyn LineSink) -> std::io::Result<()> {
        // `buf[start..searched]` holds no newline.
        let mut searched = 0;
        loop {
            if let Some(k) = memchr::memchr(b'\n', &self.buf[searched..self.filled]) {
                let end = searched + k;
                let len = end - self.start;
                let keep_going = if len >= self.max_line {
                    self.skipped(len as u64);
                    true
                } else {
                    let keep_going = sink.line(self.index, &self.buf[self.start..end]);
                    self.offset += len as u64 + 1;
                    self.index += 1;
                    keep_going
                };
                self.start = end + 1;
                searched = self.start;
                if !keep_going {
                    return Ok(());
                }
                continue;
            }
            let pending = self.filled - self.start;
            if pending >= self.max_line {
                // Over the limit: the rest of the line goes through the buffer and is dropped.
                if !self.skip_rest(pending as u64)? {
                    return Ok(());
                }
                searched = self.start;
                continue;
            }
            self.make_room();
            searched = self.filled;
            // The first read stays small whatever the buffer (a head needs a few lines).
            let end = if self.offset == self.first_offset && self.filled == 0 {
                FIRST_READ.min(self.buf.len())
            } else {
                self.buf.len()
            };
            let n = read_some(&mut self.file, &mut self.buf[self.filled..end])?;
            if n == 0 {
                // The end of the file before a newline: a write in flight, not consumed.
                return Ok(());
            }
            self.filled += n;
        }
    }

    /// Moves the line being read to the front of the buffer when little room is left after
    /// it, and grows the buffer when the line fills it (doubling, never past the limit).
    fn make_room(&mut self) {
        if self.start == self.filled {
            (self.start, self.filled) = (0, 0);
        }
        let free = self.buf.len() - self.filled;
        if self.start > 0 && free < self.buf.len() / 4 {
            self.buf.copy_within(self.start..self.filled, 0);
            self.filled -= self.start;
            self.start = 0;
        }
        if self.buf.len() < READ {
            self.buf.resize(READ, 0);
        } else if self.filled == self.buf.len() {
            let len = (self.buf.len() * 2).min(self.max_line.max(self.buf.len() + 1));
            self.buf.resize(len, 0);
        }
    }

    /// Reads past the rest of an over-long line of which `len` bytes were read: `false` when
    /// the file ends first (the line is not consumed).
    fn skip_rest(&mut self, mut len: u64) -> std::io::Result<bool> {
        (self.start, self.filled) = (0, 0);
        loop {
            let n = read_some(&mut self.file, &mut self.buf)?;
            if n == 0 {
                return Ok(false);
            }
            if let Some(k) = memchr::memchr(b'\n', &self.buf[..n]) {
                self.skipped(len + k as u64);
                (self.start, self.filled) = (k + 1, n);
                return Ok(true);
            }
            len += n as u64;
        }
    }

    /// A line of `len` bytes (its newline not counted) over the limit: counted, not fed.
    fn skipped(&mut self, len: u64) {
        tracing::warn!(file = %self.path.display(), line = self.index + 1, bytes = len + 1, limit = self.max_line, "skipping a line longer than the limit");
        self.offset += len + 1;
        self.index += 1;
    }
}

/// One `read`, retried when a signal interrupts it.
fn read_some(file: &mut fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}
