//! Where a listed session's log is, and the table that finds a session by id.
//!
//! Purpose: the store answers `log_path(id)` for every read, and keeps one entry per session
//! for the life of the process; at 100,000 sessions a map from id text to absolute path was
//! 64 bytes and two paths a session. Here an id is a 4-byte position in the sorted listing
//! (hashed by the id it points at) and a location 12 bytes of positions.
//! Invariant: positions are those of the last [`super::listing::rebuild`], which follows every
//! change of the listing under the same lock. Proof: `tests/session/store.rs` (reads by id
//! after sessions are added, removed and replaced) and `tests/session/listing_cache.rs`.

use crate::session::query::SessionSummary;
use crate::session::reader::Encoding;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The log of encoding `log` in the session directory `name` of the project directory `project`.
pub(super) fn log_path(project: &Path, name: &OsStr, log: Encoding) -> PathBuf {
    let mut path = project.join(name);
    path.push(log.file_name());
    path
}

/// Session ids to positions in the sorted listing: a hash table of 4-byte positions, hashed by
/// the id each points at (a map from id to path kept the id's text and two absolute paths per
/// session, then an id and two shared names: 64 bytes a session against 5 now).
#[derive(Default)]
pub(super) struct IdTable {
    table: hashbrown::HashTable<u32>,
    hasher: std::hash::RandomState,
}

impl IdTable {
    /// The table of `sessions` (ids unique).
    pub(super) fn of(sessions: &[SessionSummary]) -> IdTable {
        use std::hash::BuildHasher;
        let hasher = std::hash::RandomState::new();
        let mut table = hashbrown::HashTable::with_capacity(sessions.len());
        for (at, session) in sessions.iter().enumerate() {
            table.insert_unique(hasher.hash_one(session.id()), at as u32, |&at| {
                hasher.hash_one(sessions[at as usize].id())
            });
        }
        IdTable { table, hasher }
    }

    /// The position of `id` in `sessions` (the listing the table was made of).
    pub(super) fn find(&self, sessions: &[SessionSummary], id: &str) -> Option<usize> {
        use std::hash::BuildHasher;
        self.table
            .find(self.hasher.hash_one(id), |&at| {
                sessions[at as usize].id() == id
            })
            .map(|&at| at as usize)
    }

    pub(super) fn len(&self) -> usize {
        self.table.len()
    }
}

/// Where a listed session's log is: its project directory (a position in
/// [`Index::project_dirs`](super::listing::Index::project_dirs)), its session directory (a position in that project's
/// [`SessionDirs`](super::session_dirs::SessionDirs)) and the log's encoding. Valid until the next [`rebuild`](super::listing::rebuild), which every change
/// of a project's directories is followed by, under the same lock.
#[derive(Clone, Copy)]
pub(super) struct Location {
    pub(super) project: u32,
    pub(super) dir: u32,
    pub(super) log: Encoding,
}
