//! The complete lines of another agent's file, read bounded, and the stamp that says a file
//! changed.
//!
//! Purpose: every file agent's parsers are pure sinks over complete lines ([`LineSink`]); this
//! file is the one place their files are read. Invariant: only a regular file is read, without
//! blocking; a line in flight (no newline yet) is neither fed nor consumed; no line longer than
//! the limit is held in memory; memory stays bounded whatever the file (one buffer, as long as
//! the longest line fed, at most the limit: a line past 2 MiB in an anonymous mapping of the
//! limit whose pages are touched only as the line is read into them); a byte is copied once,
//! from the kernel into that buffer (a line's first 2 MiB once more as it leaves the heap),
//! and a line is fed from where it lies. A whole file of megabytes may be read in parts
//! ([`read_lines_in_parts`]), on as many threads as there are cores: the parts are cut at line
//! ends, each part's lines go to a sink of its own, and joined in order they are exactly the
//! lines one read feeds. Such a read maps the file instead of copying it where it can
//! ([`super::mapped`]: the page cache itself is fed, and each part's pages are given back as
//! it ends, so memory stays bounded by the threads times a part and its longest line); a file
//! that shrinks while mapped makes the read say so, and the caller reads it again. Proof: the
//! unit tests below (lines of every size around the heap's, the mapping's and the limit's fed
//! as a split of the bytes gives; files of every shape read in 1 to 6 parts on 1 to 3 threads,
//! mapped and read, joining into one read's lines), the tests of
//! `tests/reliability_external_lines.rs` and `tests/reliability_linear_readers.rs`.

use super::mapped::Mapped;
use super::parts::part_start;
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
    /// The line that starts at `rest[0]`, for a sink that can find its end in its own pass over
    /// its bytes (a walk over a JSON record stops at the record's end), so that the reader does
    /// not pass over them first to look for the newline. `Some((len, keep_going))`: `rest[len]`
    /// is the first newline of `rest`, and the sink took in `rest[..len]` exactly as
    /// `line(index, &rest[..len])` would have. `None` (the default): nothing was taken in, and
    /// the reader finds the line and calls [`LineSink::line`].
    fn line_in(&mut self, _index: u64, _rest: &[u8]) -> Option<(usize, bool)> {
        None
    }
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
/// grows it (doubling up to 2 MiB, then a mapping of the limit: [`Buffer`]), so a 12 MB record
/// is read into place and never copied whole again; past the limit the rest of the line is
/// read through the buffer and dropped.
pub fn read_lines_limited(
    path: &Path,
    offset: u64,
    first: u64,
    max_line: usize,
    sink: &mut dyn LineSink,
) -> Result<(u64, u64)> {
    read_lines_until(path, offset, first, u64::MAX, max_line, sink)
}

/// [`read_lines_limited`] that ends once it has consumed the line reaching offset `stop` (the
/// line holding byte `stop - 1`), or at the end of the file.
fn read_lines_until(
    path: &Path,
    offset: u64,
    first: u64,
    stop: u64,
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
        buf: Buffer::Heap(buf),
        start: 0,
        filled: 0,
        offset,
        index: first,
        max_line: max_line.max(1),
        first_offset: offset,
        stop,
    };
    let result = lines.run(sink);
    if let Buffer::Heap(buf) = &mut lines.buf {
        if buf.len() <= KEPT {
            let buf = std::mem::take(buf);
            BUFFER.with(|b| *b.borrow_mut() = buf);
        }
    }
    result.map_err(|e| SessionError::io(path, e))?;
    Ok((lines.offset, lines.index))
}

/// Feeds the complete lines of `path`, from its start, to `sinks`: the file's first `len` bytes
/// (its length when the caller looked; lines appended since go to the last part) are cut into
/// as many parts as there are sinks (of equal bytes, or shrinking towards the end when there
/// are many more parts than threads: [`part_start`](super::parts::part_start)), each cut moved
/// to the end of the line it falls in, and sink `k` is fed the lines of part `k`, numbered from 0 within the part. The
/// parts are read by `threads` threads (the caller's one of them), each taking the next part
/// not yet taken. Joined in order, the parts' lines are exactly the lines [`read_lines`] feeds
/// from offset 0, each part's in file order; a line over the limit is skipped and counted in
/// its part as there. Returns how many lines each part consumed (fed or skipped), and the
/// offset just past the last line consumed. A thread that cannot be started leaves its share
/// to the others.
///
/// The bytes come from a mapping of the file ([`Mapped`]) where one can be made, and are read
/// otherwise. `None`: the file shrank while it was mapped, so some lines fed were zeros and not
/// the file's; whatever the sinks were fed must be thrown away (read the file again).
pub fn read_lines_in_parts(
    path: &Path,
    len: u64,
    threads: usize,
    sinks: &mut [&mut (dyn LineSink + Send)],
) -> Result<Option<(Vec<u64>, u64)>> {
    read_parts_limited(path, len, MAX_LINE_BYTES, threads, true, sinks)
}

/// Where a part's read ended and the lines it consumed, or why it failed.
type PartEnd = Result<(u64, u64)>;

/// [`read_lines_in_parts`] with the line limit given, and whether to map the file.
fn read_parts_limited(
    path: &Path,
    len: u64,
    max_line: usize,
    threads: usize,
    map: bool,
    sinks: &mut [&mut (dyn LineSink + Send)],
) -> Result<Option<(Vec<u64>, u64)>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let count = sinks.len();
    // Part k starts just past the first newline at or after byte `cut(k) - 1` (part 0 at 0)
    // and ends just past the first one at or after byte `cut(k + 1) - 1`: where the next starts.
    let cut = |k: usize| {
        if k >= count {
            u64::MAX
        } else {
            part_start(len, count, threads, k)
        }
    };
    let mapped = if map { map_file(path, len)? } else { None };
    let read_part = |k: usize, sink: &mut (dyn LineSink + Send)| -> Result<(u64, u64)> {
        match &mapped {
            Some(mapped) => mapped_part(path, mapped, (cut(k), cut(k + 1)), max_line, sink),
            None => read_part_from_file(path, cut(k), cut(k + 1), max_line, sink),
        }
    };
    // Each part's sink and result, taken and set by whichever thread reads the part.
    let slots: Vec<Mutex<Option<&mut (dyn LineSink + Send)>>> = sinks
        .iter_mut()
        .map(|sink| Mutex::new(Some(&mut **sink)))
        .collect();
    let ends: Vec<Mutex<Option<PartEnd>>> = (0..count).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = slots.get(k) else {
            return;
        };
        let sink = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(sink) = sink {
            let end = read_part(k, sink);
            *ends[k].lock().unwrap_or_else(|e| e.into_inner()) = Some(end);
        }
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (1..threads.max(1))
            .map_while(|_| {
                std::thread::Builder::new()
                    .name("dsh-refs-part".into())
                    .spawn_scoped(scope, work)
                    .ok()
            })
            .collect();
        work();
        for handle in handles {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    if mapped.as_ref().is_some_and(|mapped| !mapped.intact()) {
        return Ok(None);
    }
    let mut lines = Vec::with_capacity(count);
    let mut end = 0;
    for part in ends {
        let part = part.into_inner().unwrap_or_else(|e| e.into_inner());
        let (offset, consumed) = part.unwrap_or(Ok((0, 0)))?;
        lines.push(consumed);
        end = end.max(offset);
    }
    Ok(Some((lines, end)))
}

/// The first `len` bytes of the regular file at `path` mapped (fewer when it is shorter now);
/// `None` when it cannot be mapped (then it is read).
fn map_file(path: &Path, len: u64) -> Result<Option<Mapped>> {
    let file = files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    let now = file
        .metadata()
        .map_err(|e| SessionError::io(path, e))?
        .len();
    let Ok(len) = usize::try_from(len.min(now)) else {
        return Ok(None);
    };
    Ok(Mapped::of(&file, len))
}

/// Part `cut.0..cut.1` of a [`read_parts_limited`] read, from the mapped bytes: the lines
/// [`read_lines_until`] would feed from the part's start, found where they lie. A part whose
/// last line runs past the mapped bytes (the last part, of a file that grew, or any part of
/// one that shrank before it was mapped) is read on from there as a part always is. The pages
/// of the lines consumed are given back as the part ends. A sink that finds its lines' ends
/// itself ([`LineSink::line_in`]) is offered the rest of the mapped bytes, up to the limit,
/// so that the line's bytes are passed over once, not twice.
fn mapped_part(
    path: &Path,
    mapped: &Mapped,
    (from, stop): (u64, u64),
    max_line: usize,
    sink: &mut dyn LineSink,
) -> Result<(u64, u64)> {
    let bytes = mapped.bytes();
    let to_index = |offset: u64| {
        usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len())
    };
    let start = if from == 0 {
        0
    } else {
        // Just past the first newline at or after byte `from - 1`, before byte `stop - 1`.
        let (at, until) = (to_index(from - 1), to_index(stop.saturating_sub(1)));
        let searched_all = stop.saturating_sub(1) <= bytes.len() as u64;
        match memchr::memchr(b'\n', bytes.get(at..until).unwrap_or_default()) {
            Some(k) => at + k + 1,
            // No line ends within the part: the line before it goes on past it.
            None if searched_all => return Ok((0, 0)),
            // The mapped bytes end before the part does (the last part, or a file shorter now
            // than when it was looked at): the rest is looked for in the file.
            None => return read_part_from_file(path, from, stop, max_line, sink),
        }
    };
    let (mut at, mut index) = (start, 0);
    let max_line = max_line.max(1);
    while (at as u64) < stop {
        // Up to the limit: a newline the sink finds there ends a line under it.
        let rest = &bytes[at..bytes.len().min(at.saturating_add(max_line))];
        let (len, keep_going) = match sink.line_in(index, rest) {
            Some((len, keep_going)) => {
                debug_assert_eq!(memchr::memchr(b'\n', rest), Some(len));
                (len, keep_going)
            }
            None => {
                let Some(len) = mapped_line_len(mapped, at, max_line) else {
                    mapped.release(start..at);
                    return read_lines_until(path, at as u64, index, stop, max_line, sink);
                };
                if len >= max_line {
                    warn_skipped(path, index, at as u64, len as u64, max_line);
                    (len, true)
                } else {
                    (len, sink.line(index, &bytes[at..at + len]))
                }
            }
        };
        at += len + 1;
        index += 1;
        if !keep_going {
            break;
        }
    }
    mapped.release(start..at);
    Ok((at as u64, index))
}

/// How many bytes the line at `at` of the mapped bytes has before its newline; `None` when they
/// end first. Looked for a few megabytes at a time: once the line is known to be over the limit
/// (it will be skipped, never fed), the pages searched are given back as the search goes on, so
/// a line of gigabytes costs no more memory than one at the limit.
fn mapped_line_len(mapped: &Mapped, at: usize, max_line: usize) -> Option<usize> {
    const STEP: usize = 4 << 20;
    let bytes = mapped.bytes();
    let (mut from, mut released) = (at, at);
    loop {
        let end = from.saturating_add(STEP).min(bytes.len());
        if let Some(k) = memchr::memchr(b'\n', &bytes[from..end]) {
            return Some(from + k - at);
        }
        if end - at > max_line {
            mapped.release(released..end);
            released = end;
        }
        if end == bytes.len() {
            return None;
        }
        from = end;
    }
}

/// Part `from..stop` of a [`read_parts_limited`] read, from the file: from the first line that
/// starts at or after `from` (none when no line ends within the part: the line before it goes
/// on past it).
fn read_part_from_file(
    path: &Path,
    from: u64,
    stop: u64,
    max_line: usize,
    sink: &mut dyn LineSink,
) -> Result<(u64, u64)> {
    match line_start_within(path, from, stop).map_err(|e| SessionError::io(path, e))? {
        Some(start) => read_lines_until(path, start, 0, stop, max_line, sink),
        None => Ok((0, 0)),
    }
}

/// The warning of a line of `len` bytes (its newline not counted) over the limit, skipped.
fn warn_skipped(path: &Path, index: u64, offset: u64, len: u64, max_line: usize) {
    tracing::warn!(file = %path.display(), line = index + 1, at_byte = offset, bytes = len + 1, limit = max_line, "skipping a line longer than the limit");
}

/// Where the part of the file at `path` that begins at byte `at` starts: just past the first
/// newline at or after byte `at - 1`, looked for only before byte `until - 1` (where the next
/// part's own search begins). `None` when there is none there: no line ends within the part.
fn line_start_within(path: &Path, at: u64, until: u64) -> std::io::Result<Option<u64>> {
    if at == 0 {
        return Ok(Some(0));
    }
    let mut file = files::open_read(path)?;
    let from = at - 1;
    let mut left = until.saturating_sub(1).saturating_sub(from);
    file.seek(SeekFrom::Start(from))?;
    let mut buf = vec![0; READ];
    let mut offset = from;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = read_some(&mut file, &mut buf[..want])?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(k) = memchr::memchr(b'\n', &buf[..n]) {
            return Ok(Some(offset + k as u64 + 1));
        }
        offset += n as u64;
        left -= n as u64;
    }
    Ok(None)
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
/// A line longer than this is read into an anonymous mapping ([`Buffer::Mapped`]) instead of
/// the heap: the size of a huge page.
const MAPPED_FROM: usize = 2 << 20;

/// The bytes a file is read into.
///
/// A line of megabytes (a tool result stored twice, a pasted image) would otherwise grow the
/// heap buffer by doubling, each step zeroing its new half and copying the line so far, every
/// page faulted in 4 KiB at a time: for a 12 MB line about a fifth of the whole read's time.
/// An anonymous mapping of the line limit costs address space only: the kernel zeroes a page
/// as it is first written (on Linux a 2 MiB huge page at a time, when it can: the mapping is
/// advised so), the line is never copied again as it grows, and the mapping is let go as soon
/// as the long line is fed.
enum Buffer {
    /// The thread's buffer, kept between files up to [`KEPT`] bytes.
    Heap(Vec<u8>),
    /// A long line's buffer, as long as the line limit; pages are touched only as written.
    Mapped(memmap2::MmapMut),
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Buffer::Heap(vec) => vec,
            Buffer::Mapped(map) => map,
        }
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Buffer::Heap(vec) => vec,
            Buffer::Mapped(map) => map,
        }
    }
}

/// The state of [`read_lines_limited`]: `buf[start..filled]` is read and not yet fed (the start
/// of a line), the file's `offset` is where `buf[start]` lies.
struct Lines<'p> {
    path: &'p Path,
    file: fs::File,
    buf: Buffer,
    start: usize,
    filled: usize,
    offset: u64,
    index: u64,
    max_line: usize,
    /// Where the read started.
    first_offset: u64,
    /// The read ends once it has consumed a line reaching this offset ([`read_lines_in_parts`]).
    stop: u64,
}

impl Lines<'_> {
    fn run(&mut self, sink: &mut dyn LineSink) -> std::io::Result<()> {
        // `buf[start..searched]` holds no newline.
        let mut searched = 0;
        loop {
            if self.offset >= self.stop {
                return Ok(());
            }
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
            // The first read stays small whatever the buffer (a head needs a few lines); a
            // mapped buffer is filled as `cat` reads, never past what the line needs by more.
            let end = if self.offset == self.first_offset && self.filled == 0 {
                FIRST_READ.min(self.buf.len())
            } else if matches!(self.buf, Buffer::Mapped(_)) {
                (self.filled + READ).min(self.buf.len())
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
    /// it, and grows the buffer when the line fills it (doubling, never past the limit; a line
    /// past [`MAPPED_FROM`] goes to a mapping of the limit, left for the heap again once the
    /// long line is fed).
    fn make_room(&mut self) {
        if self.start == self.filled {
            (self.start, self.filled) = (0, 0);
        }
        let pending = self.filled - self.start;
        if matches!(self.buf, Buffer::Mapped(_)) && pending < MAPPED_FROM / 2 {
            let mut heap = vec![0; READ.max(2 * pending)];
            heap[..pending].copy_from_slice(&self.buf[self.start..self.filled]);
            (self.buf, self.start, self.filled) = (Buffer::Heap(heap), 0, pending);
        }
        let free = self.buf.len() - self.filled;
        if self.start > 0 && free < self.buf.len() / 4 {
            self.buf.copy_within(self.start..self.filled, 0);
            self.filled -= self.start;
            self.start = 0;
        }
        let len = self.buf.len();
        if len < READ {
            self.grow(READ);
        } else if self.filled == len {
            self.grow((len * 2).min(self.max_line.max(len + 1)));
        }
    }

    /// Makes the buffer `len` bytes long, keeping `buf[start..filled]` (moved to the front when
    /// the buffer is replaced).
    fn grow(&mut self, len: usize) {
        if let Buffer::Heap(heap) = &mut self.buf {
            if len <= MAPPED_FROM {
                heap.resize(len, 0);
                return;
            }
        }
        let pending = self.filled - self.start;
        // The whole limit at once: untouched pages cost nothing, and the line never moves again.
        let mapped = memmap2::MmapMut::map_anon(self.max_line.max(len)).map(|map| {
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            Buffer::Mapped(map)
        });
        let mut fresh = mapped.unwrap_or_else(|_| Buffer::Heap(vec![0; len]));
        fresh[..pending].copy_from_slice(&self.buf[self.start..self.filled]);
        (self.buf, self.start, self.filled) = (fresh, 0, pending);
    }

    /// Reads past the rest of an over-long line of which `len` bytes were read: `false` when
    /// the file ends first (the line is not consumed).
    fn skip_rest(&mut self, mut len: u64) -> std::io::Result<bool> {
        (self.start, self.filled) = (0, 0);
        loop {
            let chunk = self.buf.len().min(READ);
            let n = read_some(&mut self.file, &mut self.buf[..chunk])?;
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
        warn_skipped(self.path, self.index, self.offset, len, self.max_line);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::TestRng;
    use std::hash::{DefaultHasher, Hash, Hasher};

    /// Each line fed: its number, length and a hash of its bytes. With `.1`, it finds the end
    /// of a line it is offered whole ([`LineSink::line_in`]) itself, but for every third.
    #[derive(Default)]
    struct Fed(Vec<(u64, usize, u64)>, bool);

    fn digest(bytes: &[u8]) -> u64 {
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        hasher.finish()
    }

    impl LineSink for Fed {
        fn line(&mut self, index: u64, bytes: &[u8]) -> bool {
            self.0.push((index, bytes.len(), digest(bytes)));
            true
        }

        fn line_in(&mut self, index: u64, rest: &[u8]) -> Option<(usize, bool)> {
            let len = rest.iter().position(|&b| b == b'\n').filter(|_| self.1)?;
            (!index.is_multiple_of(3)).then(|| (len, self.line(index, &rest[..len])))
        }
    }

    /// Lines of every size around the heap buffer's, the mapping's and the limit's, a line in
    /// flight or not at the end, read from the start or from a line's end: fed, skipped and
    /// consumed exactly as splitting the bytes at their newlines says, through the heap, into a
    /// mapping and back.
    #[test]
    fn lines_of_every_size_are_fed_as_a_split_of_the_bytes_gives() {
        let lens = [
            0,
            10,
            100_000,
            READ - 1,
            READ + 7,
            MAPPED_FROM - 1,
            MAPPED_FROM + 1,
            3 * MAPPED_FROM + 5,
            5 << 20,
        ];
        let max_line = 4 << 20;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut rng = TestRng::new(9);
        for round in 0..5 {
            let mut bytes = Vec::new();
            let count = 4 + rng.below(5);
            for n in 0..count {
                let letter = b'a' + rng.below(26) as u8;
                let len = lens[rng.below(lens.len())];
                bytes.extend((0..len).map(|k| letter.wrapping_add((k % 7) as u8)));
                // The last line of an odd round is still being written.
                if n + 1 < count || round % 2 == 0 {
                    bytes.push(b'\n');
                }
            }
            std::fs::write(&path, &bytes).unwrap();
            let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |k| k + 1);
            let split: Vec<&[u8]> = bytes[..complete]
                .split(|&b| b == b'\n')
                .take(bytes[..complete].iter().filter(|&&b| b == b'\n').count())
                .collect();
            // From the start, and from the end of the first line.
            for skip in [0, 1.min(split.len())] {
                let offset: usize = split[..skip].iter().map(|l| l.len() + 1).sum();
                let expected: Vec<(u64, usize, u64)> = split
                    .iter()
                    .enumerate()
                    .skip(skip)
                    .filter(|(_, line)| line.len() < max_line)
                    .map(|(n, line)| (n as u64, line.len(), digest(line)))
                    .collect();
                let mut fed = Fed::default();
                let end = read_lines_limited(&path, offset as u64, skip as u64, max_line, &mut fed)
                    .unwrap();
                assert_eq!(fed.0, expected, "round {round} from line {skip}");
                assert_eq!(end, (complete as u64, split.len() as u64), "round {round}");
            }
        }
    }

    /// Files of short lines, lines over the limit, lines as long as a part, a newline right at
    /// a cut, a line in flight at the end or not, read in 1 to 6 parts on 1 to 3 threads: the
    /// parts' lines,
    /// renumbered by the lines before them and joined, are the lines one read feeds, and the
    /// end is its end.
    #[test]
    fn lines_read_in_parts_join_into_the_lines_of_one_read() {
        let max_line = 3000;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut rng = TestRng::new(17);
        for round in 0..300 {
            let mut bytes = Vec::new();
            let count = rng.below(40);
            for n in 0..count {
                let len = match rng.below(10) {
                    0 => max_line + rng.below(2 * max_line),
                    1 => rng.below(max_line),
                    2 => 0,
                    _ => rng.below(80),
                };
                bytes.extend((0..len).map(|k| b'a' + (k % 26) as u8));
                if n + 1 < count || round % 3 != 0 {
                    bytes.push(b'\n');
                }
            }
            std::fs::write(&path, &bytes).unwrap();
            let mut whole = Fed::default();
            let end = read_lines_limited(&path, 0, 0, max_line, &mut whole).unwrap();
            for parts in 1..=6 {
                // Half the mapped rounds with sinks that find their lines' ends.
                let own_ends = round % 4 == 0;
                let mut fed: Vec<Fed> = (0..parts).map(|_| Fed(Vec::new(), own_ends)).collect();
                let mut sinks: Vec<&mut (dyn LineSink + Send)> = fed
                    .iter_mut()
                    .map(|f| f as &mut (dyn LineSink + Send))
                    .collect();
                let threads = 1 + round % 3;
                let map = round % 2 == 0;
                let (lines, part_end) = read_parts_limited(
                    &path,
                    bytes.len() as u64,
                    max_line,
                    threads,
                    map,
                    &mut sinks,
                )
                .unwrap()
                .unwrap();
                drop(sinks);
                let mut joined = Vec::new();
                let mut before = 0;
                for (part, consumed) in fed.iter().zip(&lines) {
                    joined.extend(part.0.iter().map(|&(n, len, hash)| (n + before, len, hash)));
                    before += consumed;
                }
                let case = format!("round {round}, {parts} parts, mapped: {map}, own: {own_ends}");
                assert_eq!(joined, whole.0, "{case}");
                assert_eq!((part_end, before), end, "{case}");
            }
        }
    }

    /// Cuts its file short at its first line, then counts lines.
    struct Cutter<'p> {
        path: &'p Path,
        fed: usize,
    }

    impl LineSink for Cutter<'_> {
        fn line(&mut self, _index: u64, _bytes: &[u8]) -> bool {
            if self.fed == 0 {
                fs::OpenOptions::new()
                    .write(true)
                    .open(self.path)
                    .unwrap()
                    .set_len(100)
                    .unwrap();
            }
            self.fed += 1;
            true
        }
    }

    /// A file cut short while its parts are read from a mapping (on one thread, so the cut
    /// comes before the other parts): the process lives on, and the read says the file
    /// shrank instead of giving the zeros that stood in for the lost pages as its lines.
    /// Read again, the file is what is left.
    #[test]
    fn a_file_cut_short_while_mapped_is_said_to_be() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let line = format!("{}\n", "x".repeat(99));
        std::fs::write(&path, line.repeat(4000)).unwrap();
        let mut cutter = Cutter {
            path: &path,
            fed: 0,
        };
        let mut rest: Vec<Fed> = (0..3).map(|_| Fed::default()).collect();
        let mut sinks: Vec<&mut (dyn LineSink + Send)> = vec![&mut cutter];
        sinks.extend(rest.iter_mut().map(|f| f as &mut (dyn LineSink + Send)));
        let read = read_parts_limited(&path, 400_000, 3000, 1, true, &mut sinks).unwrap();
        assert_eq!(read, None);
        let mut again = Fed::default();
        assert_eq!(
            read_lines_limited(&path, 0, 0, 3000, &mut again).unwrap(),
            (100, 1)
        );
    }
}
