//! The look again before an append: under the log's exclusive lock, is the file still as this
//! writer last saw it?
//!
//! Purpose: dsh appends without a lock, and a crash may leave a torn tail, so every append (and
//! [`SessionWriter::refresh`]) first compares the file with what the writer knows. Unchanged:
//! the batch goes at `len`. The same tail as seen before: it is cut if it is a settled unfinished
//! batch ([`super::tail::TailSeen::refusal`]), else the append is refused. Anything else: the log
//! is re-read ([`SessionWriter::resync`]), another writer's valid records are adopted, and a tail
//! seen for the first time refuses this append.
//! Invariant: nothing is cut but a tail that is byte for byte (length, modification time,
//! digest) the one observed before; a log that no longer holds the bytes this writer knew, or a
//! file deleted or replaced under it, refuses the append with [`SessionError::NotWritable`].
//! Proof: `tests/session/writer.rs` (`a_writer_whose_log_moved_on_adopts_the_new_records`,
//! `a_log_cut_under_its_writer_is_refused`,
//! `a_torn_tail_that_changed_since_it_was_seen_is_not_cut`,
//! `a_log_replaced_or_deleted_under_its_writer_is_refused`) and `tests/agent/write_failures.rs`
//! (adopted records reach the surface).

use super::lock::replaced;
use super::pending::remove_marker;
use super::tail::{digest_range, observe, TailSeen};
use super::SessionWriter;
use crate::session::error::{Result, SessionError};
use crate::session::format::Record;
use std::time::SystemTime;

/// What a writer finds when it looks at its log again.
enum Look {
    Unchanged,
    /// The tail first seen is still there, unchanged.
    SameTail(TailSeen),
    /// The log changed in any other way.
    Moved,
}

impl SessionWriter {
    /// Under the lock: re-reads the log if it moved ([`SessionWriter::refresh`]).
    pub(super) fn refresh_locked(&mut self) -> Result<()> {
        self.look_locked().and_then(|moved| match moved {
            Look::Moved => self.resync(),
            Look::Unchanged | Look::SameTail(_) => Ok(()),
        })
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
    pub(super) fn prepare_locked(&mut self) -> Result<()> {
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
}
