//! How long a heavy session's kept conversation stays: the rank of each kept document and the
//! bound on how many are kept.
//!
//! Purpose: at most [`MAX_FILES`] sessions are kept; which ones is decided by who read them
//! ([`Keep`]) and when the person last touched them. Invariant: a document's mtime is its rank
//! (set here, never later than now); a bulk reader keeps only with room or above the lowest
//! rank; [`prune`] removes a deleted session's copy and the lowest ranks past the bound, and
//! touches only names the parent module writes; nothing is opened through a symlink to be
//! ranked. Proof: the parent module's unit tests (`a_bulk_read_keeps_only_with_room_or_above_
//! the_lowest_rank`, `at_most_max_files_are_kept_the_oldest_going_first`) and
//! `tests/session/agent_conversation_cache.rs`.

use super::scan_file::scan_path;
use super::{dir_beside, path_line, path_of, MAGIC, MAX_FILES, MAX_PATH_LINE};
use crate::session::external::lines::FileStamp;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Who reads a session, which decides what is kept and how long.
///
/// Each kept document's mtime is its rank, the last time the person touched the session:
/// referenced it, or worked in it. [`prune`] removes the lowest ranks first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::session::external) enum Keep {
    /// A reference's read (a `prepare`, an MCP read, a TUI submit): always kept, ranked now;
    /// a use of what is kept ranks it now again.
    Reference,
    /// A bulk reader's (the discovery indexer, which reads every session and puts the same
    /// text in its index): kept ranked by the session file's own mtime, and only while fewer
    /// than [`MAX_FILES`] are kept or the session is more recent than the least recent kept,
    /// so that a first pass over a heavy home keeps the sessions worked in last, and never
    /// pushes out one referenced since.
    Bulk,
}

/// A bulk read's rank: the session file's mtime, never later than now (a clock ahead must not
/// rank a session above everything referenced since).
pub(super) fn rank_of(stamp: FileStamp) -> SystemTime {
    let now = SystemTime::now();
    stamp
        .parts()
        .1
        .map_or(SystemTime::UNIX_EPOCH, |m| m.min(now))
}

/// Sets the rank (mtime) of session `id`'s kept document, when there is one.
pub(super) fn touch(listing: &Path, agent: &str, home: &Path, id: &str, rank: SystemTime) {
    let Some(file) = path_of(listing, agent, home, id) else {
        return;
    };
    // Opened to append (never truncated, nothing written) and not through a symlink; only a
    // regular file's time is set.
    let mut options = std::fs::File::options();
    options.append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    if let Ok(kept) = options.open(&file) {
        if kept.metadata().is_ok_and(|m| m.is_file()) {
            let _ = kept.set_modified(rank);
        }
    }
}

/// Whether a bulk read of session `id`, its file stamped `stamp`, may be kept: fewer than
/// [`MAX_FILES`] others are kept, or the least recent of them ranks below this session's file.
/// Bounded: at most four times [`MAX_FILES`] entries are looked at, as [`prune`] does.
pub(super) fn room_for(
    listing: &Path,
    agent: &str,
    home: &Path,
    id: &str,
    stamp: FileStamp,
) -> bool {
    let (Some(own), Some(dir)) = (path_of(listing, agent, home, id), dir_beside(listing)) else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        // Nothing kept yet (the directory is made by the first save).
        return true;
    };
    let mut count = 0;
    let mut lowest: Option<SystemTime> = None;
    for entry in entries.flatten().take(4 * MAX_FILES) {
        let path = entry.path();
        if !is_document(&path) || path == own {
            continue;
        }
        count += 1;
        let rank = entry.metadata().and_then(|m| m.modified());
        let rank = rank.unwrap_or(SystemTime::UNIX_EPOCH);
        lowest = Some(lowest.map_or(rank, |l| l.min(rank)));
    }
    count < MAX_FILES || lowest.is_some_and(|lowest| lowest < rank_of(stamp))
}

/// Whether `path` names a kept document (not a scan, not a temporary file).
fn is_document(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| !n.starts_with('.') && n.ends_with(".json"))
}

/// Removes from `dir` the kept projections whose session file is gone, and the lowest ranked
/// (mtime, see [`Keep`]) past [`MAX_FILES`] (never `just_written`). Only names this module
/// writes are touched.
pub(super) fn prune(dir: &Path, just_written: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut kept: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in entries.flatten().take(4 * MAX_FILES) {
        let path = entry.path();
        if !is_document(&path) || path == just_written {
            continue;
        }
        if session_gone(&path) {
            let _ = std::fs::remove_file(scan_path(&path));
            let _ = std::fs::remove_file(&path);
            continue;
        }
        let written = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        kept.push((written, path));
    }
    if kept.len() + 1 > MAX_FILES {
        kept.sort();
        for (_, path) in kept.iter().take(kept.len() + 1 - MAX_FILES) {
            let _ = std::fs::remove_file(scan_path(path));
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Whether the kept projection at `kept` names a session file that no longer exists (read from
/// its second line, the session file's path).
fn session_gone(kept: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(MAX_PATH_LINE);
    let Ok(file) = crate::session::files::open_read(kept) else {
        return false;
    };
    if file
        .take((MAGIC.len() + MAX_PATH_LINE) as u64)
        .read_to_end(&mut head)
        .is_err()
    {
        return false;
    }
    match head.strip_prefix(MAGIC.as_bytes()).map(path_line) {
        Some(Some((path, _))) => !Path::new(&path).exists(),
        // Not ours to judge (another version, or damaged): `load` deals with it when read.
        _ => false,
    }
}
