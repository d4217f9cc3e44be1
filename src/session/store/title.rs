//! Titles of listed sessions: folded from a log's valid prefix, cached per log file, and
//! resumed where the last scan's valid prefix ended when the log grew.
//!
//! Purpose: the `@` popup asks for a title per candidate on every keystroke, so a title must
//! cost nothing for an unchanged log and only the new bytes for a grown one.
//!
//! Invariant: the title answered is the one a full read of the log's valid prefix would fold
//! (nothing from a torn tail): a cached title is reused only under the same [`FileStamp`], and a
//! scan resumes only in the same file, past the [`Resume`] point, while its [`PrefixCheck`]
//! still holds; anything else reads the log from the start. A log held locked longer than
//! [`TITLE_LOCK_WAIT`] answers the title known before. Proof: `tests/session/store.rs` (titles
//! of grown, rewritten and busy logs, and the scan counters of [`super::StoreStats`]).

use super::stamp::{FileStamp, PrefixCheck};
use super::DiskStore;
use crate::session::error::{Result, SessionError};
use crate::session::format::SessionHeader;
use crate::session::reader::{self, Encoding, LogScan};
use crate::session::surface::TitleFold;
use crate::sync::LockExt;
use std::path::Path;
use std::time::Duration;

/// How long a title read waits for a writer's lock. Titles are read for every listed candidate,
/// so this is much shorter than [`reader::LOCK_WAIT`]: a busy log shows its last known title, or
/// its id.
pub(super) const TITLE_LOCK_WAIT: Duration = Duration::from_millis(200);

#[derive(Debug, Clone)]
pub(super) struct TitleEntry {
    pub(super) stamp: FileStamp,
    /// Where the scan that found the title ended its valid prefix: a grown log is resumed there.
    /// (Not the whole [`LogScan`]: a listing caches a title per session, and the header is read
    /// again only when a log grew.)
    pub(super) resume: Resume,
    /// The log's bytes up to `resume.valid_len`, checked before a scan resumes there.
    pub(super) prefix: PrefixCheck,
    pub(super) title: Option<String>,
}

/// The parts of a [`LogScan`] a resumed scan continues from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Resume {
    pub(super) encoding: Encoding,
    pub(super) valid_len: u64,
    pub(super) next_seq: u64,
    pub(super) valid_lines: u64,
    pub(super) has_events: bool,
    pub(super) missing_final_newline: bool,
}

impl Resume {
    fn of(scan: &LogScan) -> Resume {
        Resume {
            encoding: scan.encoding,
            valid_len: scan.valid_len,
            next_seq: scan.next_seq,
            valid_lines: scan.valid_lines,
            has_events: scan.has_events,
            missing_final_newline: scan.missing_final_newline,
        }
    }

    fn scan(self, header: SessionHeader) -> LogScan {
        LogScan {
            header,
            encoding: self.encoding,
            valid_len: self.valid_len,
            scanned_len: self.valid_len,
            next_seq: self.next_seq,
            valid_lines: self.valid_lines,
            has_events: self.has_events,
            missing_final_newline: self.missing_final_newline,
            torn_tail: None,
        }
    }
}

impl DiskStore {
    /// Synchronous `read_title`.
    pub fn read_title_blocking(&self, id: &str) -> Result<Option<String>> {
        self.with_log(id, |path| self.title_of_path(path))
    }

    /// The title folded from the log's valid prefix only (the reader's validation: nothing
    /// from a torn tail). A grown log is scanned from where its valid prefix ended.
    pub(super) fn title_of_path(&self, path: &Path) -> Result<Option<String>> {
        let stamp = FileStamp::of(path)?;
        let cached = self.inner.titles.locked().get(path).cloned();
        let known = cached.as_ref().map(|entry| entry.title.clone());
        let scanned = match cached {
            Some(entry) if entry.stamp == stamp => return Ok(entry.title),
            // Appended (or a torn tail cut and written again): read only past the valid prefix,
            // if what was read is still there (a log rewritten in place is read again).
            Some(entry)
                if entry.stamp.file == stamp.file
                    && stamp.len >= entry.resume.valid_len
                    && !entry.resume.missing_final_newline
                    && entry.prefix.still(path) =>
            {
                let mut fold = TitleFold::new(entry.title);
                let start = entry.resume.valid_len;
                reader::read_header(path).and_then(|header| {
                    let previous = entry.resume.scan(header);
                    let scan =
                        reader::resume_scan_waiting(path, &previous, &mut fold, TITLE_LOCK_WAIT)?;
                    Ok((scan, start, fold.into_title()))
                })
            }
            _ => {
                let mut fold = TitleFold::default();
                reader::scan_log_waiting(path, &mut fold, TITLE_LOCK_WAIT)
                    .map(|scan| (scan, 0, fold.into_title()))
            }
        };
        let (scan, start, title) = match (scanned, known) {
            (Ok(scanned), _) => scanned,
            // A log held locked by another process: the title it had when last read (the cache
            // is left as it was, so the next call reads the new part).
            (Err(SessionError::Busy { .. }), Some(known)) => return Ok(known),
            (Err(e), _) => return Err(e),
        };
        {
            let mut index = self.inner.index.locked();
            index.stats.title_scans += 1;
            index.stats.title_bytes_scanned += scan.scanned_len.saturating_sub(start);
        }
        // Under the stamp seen before the scan: a log that grew meanwhile is resumed next time.
        if let Ok(prefix) = PrefixCheck::read(path, scan.valid_len) {
            self.inner.titles.locked().insert(
                path.to_path_buf(),
                TitleEntry {
                    stamp,
                    resume: Resume::of(&scan),
                    prefix,
                    title: title.clone(),
                },
            );
        }
        Ok(title)
    }
}
