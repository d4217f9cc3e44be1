//! When a session changed: its change stamp, and whether a writer holds it now.
//!
//! Purpose: a pass reads a session again only when its stamp (log length, mtime and inode)
//! differs from the one it was indexed at. Invariant: stamping never opens a log, and the live
//! probe only reads the kernel's lock table (taking a writer's lock could make it fail). Proof:
//! the lock-table test below, `a_session_held_by_a_writer_is_live` in
//! `tests/discovery/index.rs`.

use super::file::file_id;
use crate::session::external::{self, ExternalSessions};
use crate::session::{DiskStore, SessionSummary};
use std::path::{Path, PathBuf};

/// A change stamp for a session: equal stamps mean the session's log is unchanged.
pub trait Stamper: Send + Sync {
    /// `None` when the backend cannot say; such a session is indexed once and not re-read.
    fn stamp(&self, summary: &SessionSummary) -> Option<String>;
    /// Which of `summaries` another process is writing now (the popup's live badge).
    fn live_elsewhere(&self, summaries: &[&SessionSummary]) -> Vec<bool> {
        vec![false; summaries.len()]
    }
}

/// Stamps from the log files of a dsh store and of other agents' homes.
#[derive(Clone)]
pub struct FileStamper {
    /// The dsh store whose logs stamp dsh sessions (those no other agent is the source of).
    pub store: DiskStore,
    /// The other agents' session homes; a session is stamped from the one of its source.
    pub external: Vec<ExternalSessions>,
}

impl FileStamper {
    fn path(&self, summary: &SessionSummary) -> Option<PathBuf> {
        match external::source_of(&summary.header) {
            Some(agent) => self
                .external
                .iter()
                .find(|s| s.agent() == agent)
                .and_then(|s| s.path_of(summary.id()).ok()),
            None => self.store.log_path(summary.id()).ok(),
        }
    }
}

impl Stamper for FileStamper {
    fn stamp(&self, summary: &SessionSummary) -> Option<String> {
        let path = self.path(summary)?;
        let meta = std::fs::metadata(&path).ok()?;
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        #[cfg(unix)]
        let file = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let file = (0u64, 0u64);
        Some(format!("{}:{modified}:{}:{}", meta.len(), file.0, file.1))
    }

    /// A writer of ours holds an exclusive `flock` on its session directory for as long as it
    /// is open. Probing that lock by taking it could make a writer opening at that instant fail,
    /// so the probe only reads the kernel's lock table (`/proc/locks`, Linux); elsewhere there
    /// is no badge. Other agents take no lock we could see.
    fn live_elsewhere(&self, summaries: &[&SessionSummary]) -> Vec<bool> {
        let held = locked_inodes();
        summaries
            .iter()
            .map(|summary| {
                if held.is_empty() || external::source_of(&summary.header).is_some() {
                    return false;
                }
                self.path(summary)
                    .and_then(|p| p.parent().map(Path::to_path_buf))
                    .and_then(|dir| file_id(&dir))
                    .is_some_and(|(_, ino)| held.contains(&ino))
            })
            .collect()
    }
}

/// Inodes under an exclusive `flock` now, from `/proc/locks` (empty where there is none).
pub(super) fn locked_inodes() -> std::collections::HashSet<u64> {
    let Ok(text) = std::fs::read_to_string("/proc/locks") else {
        return Default::default();
    };
    parse_locks(&text)
}

/// `N: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> <start> <end>` → inode, for write
/// (exclusive) flocks.
pub fn parse_locks(text: &str) -> std::collections::HashSet<u64> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let at = fields.iter().position(|f| *f == "FLOCK")?;
            if fields.get(at + 2) != Some(&"WRITE") {
                return None;
            }
            fields.get(at + 4)?.rsplit(':').next()?.parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_flocks_are_read_from_the_lock_table() {
        let table = "1: FLOCK  ADVISORY  WRITE 29148 fe:00:6054109 0 EOF\n\
                     2: FLOCK  ADVISORY  READ 29148 fe:00:10133508 0 EOF\n\
                     3: POSIX  ADVISORY  WRITE 1966 fe:00:5627935 0 EOF\n\
                     4: -> FLOCK  ADVISORY  WRITE 1910 fe:00:77 0 EOF\n\
                     garbage\n";
        let held = parse_locks(table);
        assert_eq!(held, [6054109, 77].into_iter().collect());
    }
}
