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
//! This file holds the writer and its append entry points; the rest is in rooms of one idea
//! each: `open.rs` (creating a log and opening one, changing no byte), `lock.rs` (the session
//! directory's writer lock, and whether the file is still ours), `tail.rs` (what lies past the
//! valid prefix, observed), `recheck.rs` (the look again under the lock before an append:
//! adopt, cut or refuse), `batch.rs` (building, encoding and writing one batch), `pending.rs`
//! (the pending-batch marker of a plain log) and `home.rs` (a home's one encoding).
//!
//! Proof: `tests/session/writer.rs` (byte-identical logs after open, damaged and moving tails
//! never cut, adoption of another writer's records, a failing write rolled back).

use super::error::{Result, SessionError};
use super::format::{Event, Record, SessionHeader};
use super::reader::Encoding;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

mod batch;
mod home;
mod lock;
mod open;
mod pending;
mod recheck;
mod tail;

pub use batch::{NewEvent, WriteFault};
pub use home::home_encoding;
pub use lock::held_by_another_writer;
pub(crate) use pending::pending_batch_start;
pub use tail::{TailSeen, SETTLE};

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
        let now = super::clock::now_ms();
        let mut events = Vec::new();
        self.append_built(|next_seq| {
            events = batch::number_events(batch, next_seq, now);
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
        let result = self.refresh_locked();
        let _ = self.file.unlock();
        result
    }

    /// Flushes appended batches to stable storage.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| SessionError::io(&self.path, e))
    }

    fn not_writable(&self, reason: String) -> SessionError {
        SessionError::NotWritable {
            path: self.path.clone(),
            reason,
        }
    }
}
