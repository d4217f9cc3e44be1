//! Appending to a session log the way dsh can read it back (SPEC §1.1–§1.2).
//!
//! A batch is the unit of atomicity: one zstd frame, or one `write` of whole lines, done under an
//! exclusive advisory lock so our readers (which take the length under a shared lock) never see
//! half of it. Earlier bytes are never rewritten; a torn tail left by a crash is cut off before the
//! next append. The header is written to a temporary file and linked into place, so a session
//! either exists with a whole header or not at all.
//!
//! A zstd batch is self-delimiting (one checksummed frame), so a frame cut short by a crash is
//! a torn tail. A plain batch is not: its lines are records on their own, and a write cut short
//! by a kill (the kernel may stop a large `write` between pages) would leave the first lines of
//! the batch looking valid. So a plain append first records where the batch starts in a pending
//! marker beside the log (`.session.jsonl.pending`) and removes it once the batch is written.
//! A marker that outlives its writer means that batch may be partial: readers stop at its start
//! ([`super::reader`] caps the length it reads), and the next writer cuts the log back to it.

use super::error::{Result, SessionError};
use super::format::{Event, EventData, Record, SessionHeader, SurfaceOp};
use super::paths;
use super::reader::{Encoding, LogScan};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

const ZSTD_LEVEL: i32 = 3;

/// An event to append; seq is assigned by the writer.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub data: EventData,
    /// `None`: `append` for surface types, absent for others.
    pub surface_op: Option<SurfaceOp>,
    pub source_event_seqs: Option<Vec<u64>>,
    /// Epoch ms; `None`: now.
    pub time: Option<i64>,
}

impl NewEvent {
    pub fn new(data: EventData) -> Self {
        NewEvent {
            data,
            surface_op: None,
            source_event_seqs: None,
            time: None,
        }
    }
    pub fn with_surface_op(mut self, op: SurfaceOp) -> Self {
        self.surface_op = Some(op);
        self
    }
}

impl From<EventData> for NewEvent {
    fn from(data: EventData) -> Self {
        NewEvent::new(data)
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The append side of one session log. One writer per session at a time.
#[derive(Debug)]
pub struct SessionWriter {
    path: PathBuf,
    encoding: Encoding,
    file: File,
    header: SessionHeader,
    next_seq: u64,
    has_events: bool,
    len: u64,
    needs_newline: bool,
}

impl SessionWriter {
    /// Creates the session directory and a log holding only the header.
    pub fn create(home: &Path, header: SessionHeader, encoding: Encoding) -> Result<Self> {
        let dir = paths::session_dir(home, &header.id, header.cwd.as_deref()).ok_or_else(|| {
            SessionError::InvalidId {
                id: header.id.clone(),
                reason: "an empty id cannot be stored".into(),
            }
        })?;
        fs::create_dir_all(&dir).map_err(|e| SessionError::io(&dir, e))?;
        for existing in [paths::PLAIN_LOG, paths::ZSTD_LOG] {
            let path = dir.join(existing);
            if path.exists() {
                return Err(SessionError::AlreadyExists {
                    id: header.id.clone(),
                    path,
                });
            }
        }
        let path = dir.join(encoding.file_name());
        let mut line = serde_json::to_vec(&header).expect("headers serialize");
        line.push(b'\n');
        let bytes = encode_batch(encoding, &line, &path)?;
        let temp = dir.join(format!(
            ".{}.{}.tmp",
            encoding.file_name(),
            std::process::id()
        ));
        {
            let mut file = File::create(&temp).map_err(|e| SessionError::io(&temp, e))?;
            file.write_all(&bytes)
                .and_then(|_| file.sync_data())
                .map_err(|e| SessionError::io(&temp, e))?;
        }
        // A hard link never replaces an existing file: two creators cannot both win.
        let linked = fs::hard_link(&temp, &path);
        let _ = fs::remove_file(&temp);
        linked.map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => SessionError::AlreadyExists {
                id: header.id.clone(),
                path: path.clone(),
            },
            _ => SessionError::io(&path, e),
        })?;
        let file = open_append(&path)?;
        Ok(SessionWriter {
            path,
            encoding,
            file,
            header,
            next_seq: 0,
            has_events: false,
            len: bytes.len() as u64,
            needs_newline: false,
        })
    }

    /// Opens an existing log for appending, cutting off a torn tail (and a batch left pending
    /// by a crashed writer) first.
    pub fn open(path: &Path) -> Result<(Self, LogScan)> {
        let file = open_append(path)?;
        file.lock().map_err(|e| SessionError::io(path, e))?;
        let opened = (|| {
            if let Some(start) = pending_batch_start(path) {
                let len = file
                    .metadata()
                    .map_err(|e| SessionError::io(path, e))?
                    .len();
                if start < len {
                    tracing::warn!(
                        path = %path.display(),
                        "cutting off a batch left pending by a crashed writer ({} bytes)",
                        len - start
                    );
                    file.set_len(start).map_err(|e| SessionError::io(path, e))?;
                }
                let marker = pending_marker(path);
                fs::remove_file(&marker).map_err(|e| SessionError::io(&marker, e))?;
            }
            let scan = scan_log_locked(path)?;
            let len = file
                .metadata()
                .map_err(|e| SessionError::io(path, e))?
                .len();
            if scan.valid_len < len {
                tracing::warn!(
                    path = %path.display(),
                    torn_at_line = scan.torn_tail.as_ref().map(|t| t.line),
                    "cutting off a torn tail of {} bytes",
                    len - scan.valid_len
                );
                file.set_len(scan.valid_len)
                    .map_err(|e| SessionError::io(path, e))?;
            }
            Ok(scan)
        })();
        let _ = file.unlock();
        let scan = opened?;
        Ok((
            SessionWriter {
                path: path.to_path_buf(),
                encoding: scan.encoding,
                file,
                header: scan.header.clone(),
                next_seq: scan.next_seq,
                has_events: scan.has_events,
                len: scan.valid_len,
                needs_newline: scan.missing_final_newline,
            },
            scan,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
    /// The seq the next appended event gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Appends one batch atomically and returns the events as written.
    pub fn append(&mut self, batch: Vec<NewEvent>) -> Result<Vec<Event>> {
        let now = now_ms();
        let events: Vec<Event> = batch
            .into_iter()
            .enumerate()
            .map(|(i, new)| {
                let mut event =
                    Event::new(self.next_seq + i as u64, new.time.unwrap_or(now), &new.data);
                if new.surface_op.is_some() {
                    event.surface_op = new.surface_op;
                }
                event.source_event_seqs = new.source_event_seqs;
                event
            })
            .collect();
        let records: Vec<Record> = events.iter().cloned().map(Record::Event).collect();
        if !self.has_events {
            self.has_events = !records.is_empty();
        }
        self.append_records(&records)?;
        Ok(events)
    }

    /// Appends pre-built records (their seqs must continue the log) as one batch.
    pub fn append_records(&mut self, records: &[Record]) -> Result<()> {
        let Some(first) = records.first() else {
            return Ok(());
        };
        // The first event of a log may start anywhere (as some real logs do).
        let mut expected = if self.has_events {
            self.next_seq
        } else {
            first.first_seq()
        };
        for record in records {
            if record.first_seq() != expected {
                return Err(SessionError::Other(format!(
                    "{}: cannot append seq {} where {} is next",
                    self.path.display(),
                    record.first_seq(),
                    expected
                )));
            }
            expected += record.seq_count();
        }
        let mut plain = Vec::new();
        if self.needs_newline && self.encoding == Encoding::Plain {
            plain.push(b'\n');
        }
        for record in records {
            serde_json::to_writer(&mut plain, record).expect("records serialize");
            plain.push(b'\n');
        }
        let bytes = encode_batch(self.encoding, &plain, &self.path)?;
        self.write_locked(&bytes)?;
        self.next_seq = expected;
        self.has_events = true;
        self.needs_newline = false;
        Ok(())
    }

    fn write_locked(&mut self, bytes: &[u8]) -> Result<()> {
        let path = &self.path;
        self.file.lock().map_err(|e| SessionError::io(path, e))?;
        let result = (|| {
            let len = self
                .file
                .metadata()
                .map_err(|e| SessionError::io(path, e))?
                .len();
            if len != self.len {
                return Err(SessionError::Other(format!(
                    "{}: log changed under its writer (expected {} bytes, found {len})",
                    path.display(),
                    self.len
                )));
            }
            let marker = (self.encoding == Encoding::Plain).then(|| pending_marker(path));
            if let Some(marker) = &marker {
                write_marker(marker, self.len).map_err(|e| SessionError::io(marker, e))?;
            }
            if let Err(e) = self.file.write_all(bytes) {
                // Leave no partial batch behind.
                let _ = self.file.set_len(self.len);
                if let Some(marker) = &marker {
                    let _ = fs::remove_file(marker);
                }
                return Err(SessionError::io(path, e));
            }
            if let Some(marker) = &marker {
                fs::remove_file(marker).map_err(|e| SessionError::io(marker, e))?;
            }
            Ok(())
        })();
        let _ = self.file.unlock();
        result?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Flushes appended batches to stable storage.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| SessionError::io(&self.path, e))
    }
}

/// The pending-batch marker of a plain log (see the module docs).
pub(crate) fn pending_marker(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.pending"))
}

/// The longest marker read: `u64::MAX` has 20 digits, plus its newline.
const MAX_MARKER_BYTES: usize = 32;

/// Where a batch left pending by a crashed writer starts, if a marker says so.
///
/// Only a whole marker counts (the number and its newline), and only if it points at a line
/// boundary past the header: a marker cut short or zero-filled by a crash must never make a
/// writer cut acknowledged data.
pub(crate) fn pending_batch_start(path: &Path) -> Option<u64> {
    if Encoding::of_path(path) != Encoding::Plain {
        return None;
    }
    // A marker is a number and a newline: a few dozen bytes at most, and only a regular file
    // (a FIFO or a symlink to a device in its place must neither block nor feed us forever).
    let marker = super::files::read_small(&pending_marker(path), MAX_MARKER_BYTES)?;
    let marker = std::str::from_utf8(&marker).ok()?;
    let start: u64 = marker.strip_suffix('\n')?.parse().ok()?;
    if start == 0 {
        return None;
    }
    let mut file = super::files::open_read(path).ok()?;
    let mut before = [0u8; 1];
    file.seek(SeekFrom::Start(start - 1)).ok()?;
    file.read_exact(&mut before).ok()?;
    (before[0] == b'\n').then_some(start)
}

/// Writes a pending marker, refusing (instead of blocking on or writing through) anything but a
/// regular file in its place.
fn write_marker(marker: &Path, start: u64) -> std::io::Result<()> {
    let mut file = super::files::open_regular(
        marker,
        OpenOptions::new().write(true).create(true).truncate(true),
        super::files::Symlinks::Refuse,
    )?;
    file.write_all(format!("{start}\n").as_bytes())
}

fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .append(true)
        .read(true)
        .open(path)
        .map_err(|e| SessionError::io(path, e))
}

/// Scans without taking the shared lock (the caller holds the exclusive one).
fn scan_log_locked(path: &Path) -> Result<LogScan> {
    let file = super::files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    let len = file
        .metadata()
        .map_err(|e| SessionError::io(path, e))?
        .len();
    super::reader::scan_reader(path, file, Encoding::of_path(path), len, &mut |_| Ok(()))
}

fn encode_batch(encoding: Encoding, plain: &[u8], path: &Path) -> Result<Vec<u8>> {
    match encoding {
        Encoding::Plain => Ok(plain.to_vec()),
        Encoding::Zstd => {
            let mut compressor =
                zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| SessionError::io(path, e))?;
            compressor
                .include_checksum(true)
                .map_err(|e| SessionError::io(path, e))?;
            compressor
                .compress(plain)
                .map_err(|e| SessionError::io(path, e))
        }
    }
}
