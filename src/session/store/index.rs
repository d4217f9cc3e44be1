//! The store's in-memory listing: every project directory with its session directories, the
//! sorted summaries and where each one's log is.
//!
//! Purpose: the data the listing (`listing.rs`) keeps up to date and the listing cache
//! (`listing_cache.rs`) saves and restores, apart from both, so each of them depends on it and
//! neither on the other. Invariant: `sorted`, `by_id` and `located` are those of the last
//! [`rebuild`](super::listing::rebuild) of `projects`. Proof: `tests/session/store.rs` and
//! `tests/session/listing_cache.rs`.

use super::locate::{log_path, IdTable, Location};
use super::session_dirs::SessionDirs;
use super::stamp::{FileStamp, Stamp};
use super::StoreStats;
use crate::session::query::SessionSummary;
use crate::session::reader::Encoding;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(Default)]
pub(super) struct Index {
    /// Whether this store tried the listing cache already, and when it last wrote it.
    pub(super) cache: CacheState,
    pub(super) root: Option<Stamp>,
    /// Project directory (absolute, shared with every [`Location`] under it) → its sessions.
    pub(super) projects: HashMap<Arc<Path>, Project>,
    /// Session id → its position in `sorted` and `located` (first by path order when ids
    /// collide).
    pub(super) by_id: IdTable,
    /// Where the log of each of `sorted`'s sessions is, by position.
    pub(super) located: Vec<Location>,
    /// The project directories [`Location::project`] counts in (as of the last rebuild).
    pub(super) project_dirs: Vec<Arc<Path>>,
    /// Logs of a format version this build cannot read, by session id (ids of readable logs
    /// win): left out of the listing, answered by id with [`SessionError::UnsupportedVersion`].
    pub(super) unsupported: HashMap<String, (PathBuf, u64)>,
    pub(super) sorted: Arc<Vec<SessionSummary>>,
    pub(super) stats: StoreStats,
}

/// The listing cache, as one store uses it.
#[derive(Default, Clone, Copy)]
pub(super) struct CacheState {
    pub(super) loaded: bool,
    pub(super) written: Option<Instant>,
}

#[derive(Default)]
pub(super) struct Project {
    pub(super) stamp: Option<Stamp>,
    /// Session directory's name → its log, or `None` while the directory holds no readable log
    /// yet.
    pub(super) sessions: SessionDirs,
    /// The last listing of this directory failed (warned about once, until it succeeds).
    pub(super) unreadable: bool,
    /// Session directory's name → the log whose header could not be read, and its stamp then:
    /// an unchanged bad log is not read again on every listing.
    pub(super) failed: HashMap<Arc<OsStr>, (Encoding, FileStamp)>,
    /// Session directory's name → why its log is not listed (the read's error, naming the
    /// file), for a command line to say what it left out.
    pub(super) errors: HashMap<Arc<OsStr>, Arc<str>>,
}

impl Index {
    /// The log file of the session at `at` in the listing.
    pub(super) fn log_at(&self, at: usize) -> Option<PathBuf> {
        let location = self.located.get(at)?;
        let project = self.project_dirs.get(location.project as usize)?;
        let (name, _) = self
            .projects
            .get(project)?
            .sessions
            .at(location.dir as usize)?;
        Some(log_path(project, name, location.log))
    }
}
