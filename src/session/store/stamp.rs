//! The store's "has this changed?" answers: a file's stamp, a directory's stamp, and a
//! fingerprint of the bytes a cache was built from.
//!
//! Purpose: every cache of the store (the listing index, titles, conversations) is reused only
//! while the thing it came from is unchanged, and these three types are how "unchanged" is
//! decided, in one room instead of beside each cache.
//!
//! Invariant: a stamp or check that compares equal to a fresh one means the file or directory
//! may be trusted as it was when the cache was built: [`FileStamp`] holds length, mtime and
//! device/inode (a replaced file is another file); [`Stamp`] refuses to vouch for a directory
//! modified within [`RACY_WINDOW`] of the moment it was taken (coarse filesystem clocks); a
//! [`PrefixCheck`] catches a log rewritten in place. Proof: the store's tests of rewritten, replaced
//! and racy logs (`tests/session/reliability_conversation_cache.rs`, `tests/session/store.rs`)
//! and the listing cache's (`store/listing_cache.rs`), which depend on exactly these answers.

use crate::session::error::{Result, SessionError};
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A fingerprint of a log's first `len` bytes: a hash of the first block and the last bytes
/// before `len`. A cache built from those bytes is reused only if they are still there: a log
/// rewritten in place (same inode, as long or longer) must not be answered as old lines followed
/// by new ones. Logs only ever grow by appends, so a mismatch means "read again from the start".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PrefixCheck {
    pub(super) len: u64,
    pub(super) head: u64,
    pub(super) tail: Vec<u8>,
}

/// Bytes of the start of a log hashed, and of the end of its prefix kept.
pub(super) const PREFIX_HEAD: u64 = 4096;
pub(super) const PREFIX_TAIL: u64 = 64;

impl PrefixCheck {
    pub(super) fn read(path: &Path, len: u64) -> Result<PrefixCheck> {
        use std::hash::Hasher;
        use std::io::{Read, Seek, SeekFrom};
        let io = |e| SessionError::io(path, e);
        let mut file = crate::session::files::open_read(path).map_err(io)?;
        let mut head = vec![0; len.min(PREFIX_HEAD) as usize];
        file.read_exact(&mut head).map_err(io)?;
        let tail_start = len.saturating_sub(PREFIX_TAIL);
        let mut tail = vec![0; (len - tail_start) as usize];
        file.seek(SeekFrom::Start(tail_start)).map_err(io)?;
        file.read_exact(&mut tail).map_err(io)?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        hasher.write(&head);
        Ok(PrefixCheck {
            len,
            head: hasher.finish(),
            tail,
        })
    }

    /// Whether the log at `path` still starts with the bytes this check was taken from.
    pub(super) fn still(&self, path: &Path) -> bool {
        PrefixCheck::read(path, self.len).is_ok_and(|now| now == *self)
    }
}

/// A log file's identity and size at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp {
    pub(super) len: u64,
    pub(super) modified: SystemTime,
    /// Device and inode (0 where the platform has none): a replaced file is another file.
    pub(super) file: (u64, u64),
}

impl FileStamp {
    /// Modified so recently that a rewrite within the same clock tick could hide behind it.
    pub(super) fn is_racy(&self, now: SystemTime) -> bool {
        now.duration_since(self.modified)
            .map(|age| age < RACY_WINDOW)
            .unwrap_or(true)
    }

    pub(super) fn of(path: &Path) -> Result<FileStamp> {
        let meta = fs::metadata(path).map_err(|e| SessionError::io(path, e))?;
        Ok(FileStamp::of_meta(&meta))
    }

    /// The stamp of the file `meta` describes (an open file's `metadata()`: no path lookup).
    pub(super) fn of_meta(meta: &fs::Metadata) -> FileStamp {
        #[cfg(unix)]
        let file = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let file = (0, 0);
        FileStamp {
            len: meta.len(),
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            file,
        }
    }
}

/// A directory's identity at one moment; a change means it must be listed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    pub(super) modified: SystemTime,
    pub(super) len: u64,
    /// Modified so recently that a change within the same clock tick could hide behind it.
    pub(super) racy: bool,
}

/// Timestamps this close to "now" are not trusted (coarse filesystem clocks).
pub(super) const RACY_WINDOW: Duration = Duration::from_secs(2);

impl Stamp {
    pub(super) fn of(meta: &fs::Metadata, now: SystemTime) -> Stamp {
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        Stamp::new(modified, meta.len(), now)
    }

    /// The stamp of a directory modified at `modified` with size `len`, seen at `now`.
    fn new(modified: SystemTime, len: u64, now: SystemTime) -> Stamp {
        let racy = now
            .duration_since(modified)
            .map(|age| age < RACY_WINDOW)
            .unwrap_or(true);
        Stamp {
            modified,
            len,
            racy,
        }
    }
    /// The stamp of the directory `name` in the open directory `parent` (a lookup of one
    /// component, not of a whole path); `None` when it cannot be looked at.
    #[cfg(unix)]
    pub(super) fn at(parent: &fs::File, name: &std::ffi::OsStr, now: SystemTime) -> Option<Stamp> {
        let stat = rustix::fs::statat(parent, name, rustix::fs::AtFlags::empty()).ok()?;
        let since = Duration::new(
            stat.st_mtime.unsigned_abs(),
            u32::try_from(stat.st_mtime_nsec).unwrap_or(0),
        );
        let modified = if stat.st_mtime >= 0 {
            SystemTime::UNIX_EPOCH.checked_add(since)
        } else {
            SystemTime::UNIX_EPOCH
                .checked_sub(Duration::from_secs(since.as_secs()))?
                .checked_add(Duration::from_nanos(u64::from(since.subsec_nanos())))
        }
        .unwrap_or(SystemTime::UNIX_EPOCH);
        Some(Stamp::new(
            modified,
            u64::try_from(stat.st_size).unwrap_or(0),
            now,
        ))
    }

    pub(super) fn still(&self, fresh: &Stamp) -> bool {
        !self.racy && self.modified == fresh.modified && self.len == fresh.len
    }
}
