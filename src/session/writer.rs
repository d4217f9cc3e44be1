//! Appending to a session log the way dsh can read it back (SPEC §1.1–§1.2).
//!
//! A batch is the unit of atomicity: one zstd frame, or one `write` of whole lines, done under an
//! exclusive advisory lock so our readers (which take the length under a shared lock) never see
//! half of it. Earlier bytes are never rewritten. The header is written to a temporary file and
//! linked into place, so a session either exists with a whole header or not at all.
//!
//! A zstd batch is self-delimiting (one checksummed frame), so a frame cut short by a crash is
//! a torn tail. A plain batch is not: its lines are records on their own, and a write cut short
//! by a kill (the kernel may stop a large `write` between pages) would leave the first lines of
//! the batch looking valid. So a plain append first records where the batch starts in a pending
//! marker beside the log (`.session.jsonl.pending`) and removes it once the batch is written.
//! A marker that outlives its writer means that batch may be partial: readers stop at its start
//! ([`super::reader`] caps the length it reads), and the next append cuts the log back to it.
//!
//! Invariant: opening a log changes no byte of it (SPEC §1.2). Whatever lies past the valid
//! prefix is only *observed* at open (offset, length, modification time, a digest). Only an
//! append, holding the log's exclusive lock, may cut it, and only if it is still exactly what
//! was first observed, looks like one unfinished batch (a plain line without its newline, a zstd
//! tail holding no complete frame, or the batch of a stale pending marker), and has not changed
//! for [`SETTLE`] (dsh takes no lock: a tail that moved recently may be an append in flight).
//! Anything else past the valid prefix (whole records after a seq defect, say) is damage that
//! is kept byte for byte, and nothing is appended after it.
//!
//! One writer of ours per session: a writer holds an exclusive `flock` on the session directory
//! for its whole life, so a second one (another process, or another agent here) is refused with
//! [`SessionError::NotWritable`] instead of interleaving. A log that grew under a writer (dsh
//! appending, which takes no lock) is re-read under the exclusive lock before the next append:
//! valid records from the other writer are adopted ([`SessionWriter::take_adopted`]) and the new
//! batch continues after them; anything else refuses the append.
//!
//! Proof: `tests/session/writer.rs` (byte-identical logs after open, damaged and moving tails
//! never cut, adoption of another writer's records, a failing write rolled back).

use super::error::{Result, SessionError};
use super::format::{Event, EventData, Record, SessionHeader, SurfaceOp};
use super::paths;
use super::reader::{Encoding, LogScan};
use std::fs::{self, File, OpenOptions};
use std::hash::Hasher;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const ZSTD_LEVEL: i32 = 3;

/// An event to append; seq is assigned by the writer.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The typed payload, written in the identified shape.
    pub data: EventData,
    /// `None`: `append` for surface types, absent for others.
    pub surface_op: Option<SurfaceOp>,
    /// `sourceEventSeqs`; `None`: not written.
    pub source_event_seqs: Option<Vec<u64>>,
    /// Epoch ms; `None`: now.
    pub time: Option<i64>,
}

impl NewEvent {
    /// An event with the writer's defaults: `append` for surface types, no provenance, time now.
    pub fn new(data: EventData) -> Self {
        NewEvent {
            data,
            surface_op: None,
            source_event_seqs: None,
            time: None,
        }
    }
    /// Gives the event this `surfaceOp` instead of the default.
    pub fn with_surface_op(mut self, op: SurfaceOp) -> Self {
        self.surface_op = Some(op);
        self
    }
    /// Makes this event a surface replace carrying its provenance, as built by
    /// [`super::surface::compaction_replace`].
    pub fn with_replacement(mut self, replacement: super::surface::Replacement) -> Self {
        self.surface_op = Some(replacement.surface_op);
        self.source_event_seqs = Some(replacement.source_event_seqs);
        self
    }
}

impl From<EventData> for NewEvent {
    fn from(data: EventData) -> Self {
        NewEvent::new(data)
    }
}

/// The clock moved to `session::clock`; this path stays for callers outside the crate.
pub use super::clock::now_ms;

/// How long a torn tail must have been left alone before an append may cut it: dsh takes no lock,
/// so a tail that changed more recently may be a batch it is still writing.
pub const SETTLE: Duration = Duration::from_secs(5);

/// The largest tail an append will consider cutting: one unfinished batch, never more.
const MAX_CUTTABLE_TAIL: u64 = 64 << 20;

/// What lay past the valid prefix when the writer last looked (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailSeen {
    /// Where the valid prefix ends: where a cut would go.
    pub at: u64,
    /// The file length then.
    pub len: u64,
    /// The file's modification time then.
    pub modified: Option<SystemTime>,
    digest: u64,
    /// Why the bytes past `at` are not part of the log.
    pub reason: String,
    /// Whether they look like one unfinished batch (which an append may cut once settled).
    pub cuttable: bool,
    /// Whether they are the batch of a stale pending marker: a writer of ours died writing it
    /// (a live one removes its marker before it unlocks), so no settling time applies.
    pub pending: bool,
}

impl TailSeen {
    /// Why an append refuses to go after this tail right now, or `None` if it may cut it.
    fn refusal(&self, now: SystemTime) -> Option<String> {
        if !self.cuttable {
            return Some(format!(
                "the log is damaged after byte {} ({}); the {} bytes past it are kept untouched \
                 and nothing is appended after them",
                self.at,
                self.reason,
                self.len - self.at
            ));
        }
        if self.pending {
            return None;
        }
        let age = self
            .modified
            .map(|m| now.duration_since(m).unwrap_or_default())
            .unwrap_or(SETTLE);
        (age < SETTLE).then(|| {
            format!(
                "the log ends in an unfinished batch of {} bytes last changed {:.1} s ago: \
                 another process may still be appending to it; try again in a few seconds",
                self.len - self.at,
                age.as_secs_f64()
            )
        })
    }
}

/// What a writer finds when it looks at its log again.
enum Look {
    Unchanged,
    /// The tail first seen is still there, unchanged.
    SameTail(TailSeen),
    /// The log changed in any other way.
    Moved,
}

/// A test seam: makes the writer's next writes fail like a full disk, after writing `after`
/// bytes of the batch (so the roll-back of a partial batch is exercised too).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteFault {
    pub after: usize,
    pub kind: std::io::ErrorKind,
}

/// The append side of one session log. One writer per session at a time (a lock on the session
/// directory enforces it across processes).
#[derive(Debug)]
pub struct SessionWriter {
    path: PathBuf,
    encoding: Encoding,
    file: File,
    /// Holds the exclusive lock on the session directory for the writer's life.
    _dir_lock: File,
    header: SessionHeader,
    next_seq: u64,
    has_events: bool,
    /// Bytes of the file that hold the valid log (where the next batch goes).
    len: u64,
    needs_newline: bool,
    /// Bytes past `len` seen at the last look, if any.
    tail: Option<TailSeen>,
    /// Records another writer appended, re-read before our last append.
    adopted: Vec<Record>,
    fault: Option<WriteFault>,
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
        let exists = |dir: &Path| {
            for existing in [paths::PLAIN_LOG, paths::ZSTD_LOG] {
                let path = dir.join(existing);
                if path.exists() {
                    return Err(SessionError::AlreadyExists {
                        id: header.id.clone(),
                        path,
                    });
                }
            }
            Ok(())
        };
        exists(&dir)?;
        let dir_lock = lock_dir(&dir)?;
        exists(&dir)?;
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
            _dir_lock: dir_lock,
            header,
            next_seq: 0,
            has_events: false,
            len: bytes.len() as u64,
            needs_newline: false,
            tail: None,
            adopted: Vec::new(),
            fault: None,
        })
    }

    /// Opens an existing log for appending. Changes no byte: a torn tail (or a batch left
    /// pending by a crashed writer) is only observed here; the first append decides about it.
    /// Refused while another writer of ours holds the session.
    pub fn open(path: &Path) -> Result<(Self, LogScan)> {
        Self::open_with(path, &mut |_| Ok(()))
    }

    /// [`SessionWriter::open`], handing the valid records to `sink` on the way (one read).
    pub fn open_with(
        path: &Path,
        sink: &mut dyn super::reader::RecordSink,
    ) -> Result<(Self, LogScan)> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let dir_lock = lock_dir(dir)?;
        let file = open_append(path)?;
        file.lock_shared().map_err(|e| SessionError::io(path, e))?;
        let observed = observe(path, &file, sink);
        let _ = file.unlock();
        let (scan, tail) = observed?;
        if let Some(tail) = &tail {
            tracing::warn!(
                path = %path.display(),
                at = tail.at,
                len = tail.len,
                cuttable = tail.cuttable,
                reason = %tail.reason,
                "the log holds bytes past its valid prefix; left untouched until an append"
            );
        }
        Ok((
            SessionWriter {
                path: path.to_path_buf(),
                encoding: scan.encoding,
                file,
                _dir_lock: dir_lock,
                header: scan.header.clone(),
                next_seq: scan.next_seq,
                has_events: scan.has_events,
                len: scan.valid_len,
                needs_newline: scan.missing_final_newline,
                tail,
                adopted: Vec::new(),
                fault: None,
            },
            scan,
        ))
    }

    /// The log file this writer appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The header of the session (line 0 of the log).
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }
    /// The log's encoding (fixed when the log was created).
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
    /// The seq the next appended event gets (as far as this writer knows: another writer's
    /// records are adopted at the next append).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
    /// What lay past the valid prefix at the last look.
    pub fn tail(&self) -> Option<&TailSeen> {
        self.tail.as_ref()
    }

    /// Why an append would be refused now without looking at the file again (a damaged tail),
    /// or `None`. A tail still settling, or a log that moved, is only judged by the append.
    pub fn blocked(&self) -> Option<String> {
        self.tail
            .as_ref()
            .filter(|t| !t.cuttable)
            .and_then(|t| t.refusal(SystemTime::now()))
    }

    /// Records of another writer adopted by the last append (in log order), for the caller's
    /// in-memory view; taken once.
    pub fn take_adopted(&mut self) -> Vec<Record> {
        std::mem::take(&mut self.adopted)
    }

    #[doc(hidden)]
    pub fn set_write_fault(&mut self, fault: Option<WriteFault>) {
        self.fault = fault;
    }

    /// Appends one batch atomically and returns the events as written.
    pub fn append(&mut self, batch: Vec<NewEvent>) -> Result<Vec<Event>> {
        let now = now_ms();
        let mut events = Vec::new();
        self.append_built(|next_seq| {
            events = batch
                .into_iter()
                .enumerate()
                .map(|(i, new)| {
                    let mut event =
                        Event::new(next_seq + i as u64, new.time.unwrap_or(now), &new.data);
                    if new.surface_op.is_some() {
                        event.surface_op = new.surface_op;
                    }
                    event.source_event_seqs = new.source_event_seqs;
                    event
                })
                .collect();
            events.iter().cloned().map(Record::Event).collect()
        })?;
        Ok(events)
    }

    /// Appends pre-built records (their seqs must continue the log) as one batch.
    pub fn append_records(&mut self, records: &[Record]) -> Result<()> {
        self.append_built(|_| records.to_vec()).map(drop)
    }

    /// Appends the records `build` makes from the seq the batch starts at, as one batch, and
    /// returns them. `build` runs under the log's lock, after the log was re-checked (and
    /// another writer's records adopted), so its seqs are the ones the log needs.
    pub fn append_built(&mut self, build: impl FnOnce(u64) -> Vec<Record>) -> Result<Vec<Record>> {
        self.file
            .lock()
            .map_err(|e| SessionError::io(&self.path, e))?;
        let result = self.prepare_locked().and_then(|()| {
            let records = build(self.next_seq);
            self.write_records_locked(&records).map(|()| records)
        });
        let _ = self.file.unlock();
        result
    }

    /// Re-reads the log if it moved since this writer last looked, adopting another writer's
    /// records ([`SessionWriter::take_adopted`]), so that what the caller builds next (a turn
    /// number, say) follows them. Writes and cuts nothing.
    pub fn refresh(&mut self) -> Result<()> {
        self.file
            .lock()
            .map_err(|e| SessionError::io(&self.path, e))?;
        let result = self.look_locked().and_then(|moved| match moved {
            Look::Moved => self.resync(),
            Look::Unchanged | Look::SameTail(_) => Ok(()),
        });
        let _ = self.file.unlock();
        result
    }

    /// Under the lock: whether the file is still as this writer last saw it.
    fn look_locked(&self) -> Result<Look> {
        let meta = self
            .file
            .metadata()
            .map_err(|e| SessionError::io(&self.path, e))?;
        if let Some(reason) = replaced(&self.path, &meta) {
            return Err(self.not_writable(reason));
        }
        let len = meta.len();
        match &self.tail {
            None if len == self.len => Ok(Look::Unchanged),
            None => Ok(Look::Moved),
            Some(seen) => {
                let same = len == seen.len
                    && meta.modified().ok() == seen.modified
                    && digest_range(&self.path, seen.at, seen.len)? == seen.digest;
                Ok(if same {
                    Look::SameTail(seen.clone())
                } else {
                    Look::Moved
                })
            }
        }
    }

    /// Under the exclusive lock: makes `len` the end of the file, cutting a settled torn tail
    /// seen before, or re-reading a log that moved; refuses anything else.
    fn prepare_locked(&mut self) -> Result<()> {
        match self.look_locked()? {
            Look::Unchanged => Ok(()),
            Look::Moved => self.resync(),
            Look::SameTail(seen) => {
                if let Some(reason) = seen.refusal(SystemTime::now()) {
                    return Err(self.not_writable(reason));
                }
                tracing::warn!(
                    path = %self.path.display(),
                    "cutting off an unfinished batch of {} bytes ({})",
                    seen.len - seen.at,
                    seen.reason
                );
                self.file
                    .set_len(seen.at)
                    .map_err(|e| SessionError::io(&self.path, e))?;
                remove_marker(&self.path)?;
                self.len = seen.at;
                self.tail = None;
                Ok(())
            }
        }
    }

    /// Re-reads the log under the exclusive lock after it changed under this writer.
    fn resync(&mut self) -> Result<()> {
        let known = (self.len, self.has_events.then_some(self.next_seq));
        let mut adopted = Vec::new();
        let (scan, tail) = observe(&self.path, &self.file, &mut |record: Record| {
            if known.1.is_none_or(|next| record.first_seq() >= next) {
                adopted.push(record);
            }
            Ok(())
        })?;
        if scan.header.id != self.header.id || scan.valid_len < known.0 {
            return Err(self.not_writable(format!(
                "the log no longer holds the {} bytes this writer knew (it was cut or replaced \
                 by someone else)",
                known.0
            )));
        }
        tracing::info!(
            path = %self.path.display(),
            records = adopted.len(),
            "the log grew under its writer; adopting the other writer's records"
        );
        self.len = scan.valid_len;
        self.next_seq = scan.next_seq;
        self.has_events = scan.has_events;
        self.needs_newline = scan.missing_final_newline;
        self.adopted.extend(adopted);
        self.tail = tail;
        match &self.tail {
            // Seen for the first time: only a later append may cut it, if it is unchanged.
            Some(tail) => {
                let reason = tail.refusal(SystemTime::now()).unwrap_or_else(|| {
                    format!(
                        "the log ends in {} bytes that are not a complete batch ({}), seen just \
                         now; try again",
                        tail.len - tail.at,
                        tail.reason
                    )
                });
                Err(self.not_writable(reason))
            }
            None => Ok(()),
        }
    }

    fn not_writable(&self, reason: String) -> SessionError {
        SessionError::NotWritable {
            path: self.path.clone(),
            reason,
        }
    }

    /// Checks the seqs of `records`, then writes them as one batch (the lock is held).
    fn write_records_locked(&mut self, records: &[Record]) -> Result<()> {
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
                return Err(SessionError::SeqGap {
                    path: self.path.clone(),
                    seq: record.first_seq(),
                    expected,
                });
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
        let marker = (self.encoding == Encoding::Plain).then(|| pending_marker(path));
        if let Some(marker) = &marker {
            write_marker(marker, self.len).map_err(|e| SessionError::io(marker, e))?;
        }
        let written = match self.fault {
            Some(fault) => self
                .file
                .write_all(&bytes[..fault.after.min(bytes.len())])
                .and_then(|()| Err(std::io::Error::from(fault.kind))),
            None => self.file.write_all(bytes),
        };
        if let Err(e) = written {
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

/// Why the file at `path` is no longer the one this writer has open (deleted, or replaced by
/// another file under the same name), if it is not: appending to ours would write where no
/// reader looks.
fn replaced(path: &Path, ours: &fs::Metadata) -> Option<String> {
    match fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some("the log was deleted since this writer opened it".into())
        }
        Err(_) => None,
        Ok(now) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                if (now.dev(), now.ino()) != (ours.dev(), ours.ino()) {
                    return Some(
                        "the log was replaced by another file since this writer opened it".into(),
                    );
                }
            }
            #[cfg(not(unix))]
            let _ = (now, ours);
            None
        }
    }
}

/// Whether another writer of ours holds the session whose log is at `path` (a cheap check for a
/// UI deciding whether to offer sending at all).
pub fn held_by_another_writer(path: &Path) -> bool {
    let dir = path.parent().unwrap_or(Path::new("."));
    matches!(lock_dir(dir), Err(SessionError::NotWritable { .. }))
}

/// The encoding for a new session in `home` (SPEC §1.2: a home has one encoding, as dsh refuses to
/// list a home that holds logs of both kinds). `requested` must match the logs the home already
/// holds, else the answer is an error naming one of them; without a request, the home's own
/// encoding (zstd if it holds any zstd log), and zstd for an empty or new home.
///
/// Walks `sessions/*/*/` until it finds a log of the kind that decides (a conflicting one, or
/// any zstd log without a request): a home of the kind asked for (or a plain home without a
/// request) costs one `stat` per session, about as much as the listing the TUI warms anyway.
pub fn home_encoding(home: &Path, requested: Option<Encoding>) -> Result<Encoding> {
    let sessions = home.join(paths::SESSIONS_DIR);
    let decisive = match requested {
        Some(Encoding::Plain) | None => Encoding::Zstd,
        Some(Encoding::Zstd) => Encoding::Plain,
    };
    let mut found_plain = false;
    let mut decided = None;
    // One `stat` per session: the decisive kind; the other only until one plain log is seen.
    'walk: for project in sorted_dirs(&sessions)? {
        for session in sorted_dirs(&project)? {
            let log = session.join(decisive.file_name());
            if log.is_file() {
                decided = Some(log);
                break 'walk;
            }
            if requested.is_none() && !found_plain {
                found_plain = session.join(paths::PLAIN_LOG).is_file();
            }
        }
    }
    match (requested, decided) {
        (Some(requested), Some(other)) => {
            let (asked, held) = match requested {
                Encoding::Plain => ("uncompressed (session.jsonl)", "zstd"),
                Encoding::Zstd => ("zstd (session.jsonl.zstd)", "uncompressed"),
            };
            Err(SessionError::MixedEncoding {
                asked,
                held,
                home: home.to_path_buf(),
                example: other,
            })
        }
        (Some(requested), None) => Ok(requested),
        (None, Some(_)) => Ok(Encoding::Zstd),
        (None, None) if found_plain => Ok(Encoding::Plain),
        (None, None) => Ok(Encoding::Zstd),
    }
}

/// The subdirectories of `dir`, sorted (none if it does not exist).
fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SessionError::io(dir, e)),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| SessionError::io(dir, e))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Takes the exclusive, non-blocking writer lock on a session directory. A lock found held is
/// tried again for a moment ([`LOCK_SETTLE`]) before it counts as another writer's: a lock this
/// process's writer has just released can still be held for a few milliseconds by a child
/// between its `fork` and `exec` (the descriptor is close-on-exec, but the child holds it until
/// it execs), which is not a writer at all.
fn lock_dir(dir: &Path) -> Result<File> {
    let handle = File::open(dir).map_err(|e| SessionError::io(dir, e))?;
    let deadline = std::time::Instant::now() + LOCK_SETTLE;
    loop {
        match handle.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return lock_result(dir, handle, other),
        }
    }
}

/// How long a held writer lock is tried again before it counts as another writer's.
const LOCK_SETTLE: std::time::Duration = std::time::Duration::from_millis(100);

fn lock_result(
    dir: &Path,
    handle: File,
    locked: std::result::Result<(), std::fs::TryLockError>,
) -> Result<File> {
    match locked {
        Ok(()) => Ok(handle),
        Err(std::fs::TryLockError::WouldBlock) => Err(SessionError::NotWritable {
            path: dir.to_path_buf(),
            reason: "another dsh-refs writer holds this session (it is open in another \
                     process or agent); it can only be read until that one closes"
                .into(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(SessionError::io(dir, e)),
    }
}

/// Scans the log (the caller holds a lock on `file`) and observes what lies past its valid
/// prefix. A plain log's stale pending batch counts as past the prefix, as for readers.
fn observe(
    path: &Path,
    file: &File,
    sink: &mut dyn super::reader::RecordSink,
) -> Result<(LogScan, Option<TailSeen>)> {
    let meta = file.metadata().map_err(|e| SessionError::io(path, e))?;
    let len = meta.len();
    let marker = pending_batch_start(path).filter(|&start| start < len);
    let reader = super::files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    let scan = super::reader::scan_reader(
        path,
        reader,
        Encoding::of_path(path),
        marker.unwrap_or(len),
        sink,
    )?;
    let at = scan.valid_len;
    if at >= len {
        return Ok((scan, None));
    }
    let pending = marker == Some(at);
    let reason = match (&scan.torn_tail, pending) {
        (_, true) => "a batch left pending by a crashed writer".to_string(),
        (Some(torn), false) => format!("line {}: {}", torn.line, torn.reason),
        (None, false) => "bytes after a pending batch marker".to_string(),
    };
    let cuttable = pending
        || (len - at <= MAX_CUTTABLE_TAIL
            && unfinished_batch(scan.encoding, &read_range(path, at, len)?));
    let tail = TailSeen {
        at,
        len,
        modified: meta.modified().ok(),
        digest: digest_range(path, at, len)?,
        reason,
        cuttable,
        pending,
    };
    Ok((scan, Some(tail)))
}

/// Whether `tail` looks like one batch cut short: a plain line without its newline (or bytes a
/// crash zero-filled), or zstd bytes holding no complete frame.
fn unfinished_batch(encoding: Encoding, tail: &[u8]) -> bool {
    match encoding {
        Encoding::Plain => {
            !tail.contains(&b'\n') || tail.iter().all(|b| *b == 0 || b.is_ascii_whitespace())
        }
        Encoding::Zstd => !holds_complete_frame(tail),
    }
}

/// Whether a complete zstd frame starts anywhere in `bytes`.
fn holds_complete_frame(bytes: &[u8]) -> bool {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    let mut start = 0;
    while let Some(pos) = bytes[start..].windows(4).position(|w| w == MAGIC) {
        let at = start + pos;
        if let Ok(decoder) = zstd::stream::read::Decoder::with_buffer(&bytes[at..]) {
            let mut decoder = decoder.single_frame();
            if std::io::copy(&mut decoder, &mut std::io::sink()).is_ok() {
                return true;
            }
        }
        start = at + 1;
    }
    false
}

fn read_range(path: &Path, from: u64, to: u64) -> Result<Vec<u8>> {
    let mut file = File::open(path).map_err(|e| SessionError::io(path, e))?;
    file.seek(SeekFrom::Start(from))
        .map_err(|e| SessionError::io(path, e))?;
    let mut bytes = Vec::new();
    file.take(to - from)
        .read_to_end(&mut bytes)
        .map_err(|e| SessionError::io(path, e))?;
    Ok(bytes)
}

/// A digest of bytes `from..to` of the file, read in bounded pieces.
fn digest_range(path: &Path, from: u64, to: u64) -> Result<u64> {
    let mut file = File::open(path).map_err(|e| SessionError::io(path, e))?;
    file.seek(SeekFrom::Start(from))
        .map_err(|e| SessionError::io(path, e))?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut reader = file.take(to - from);
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(SessionError::io(path, e)),
        };
        hasher.write(&buf[..n]);
        total += n as u64;
    }
    hasher.write_u64(total);
    Ok(hasher.finish())
}

fn remove_marker(path: &Path) -> Result<()> {
    let marker = pending_marker(path);
    match fs::remove_file(&marker) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SessionError::io(&marker, e)),
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
