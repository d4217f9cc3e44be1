//! The on-disk session store: `SessionQuery` over `<home>/sessions`.
//!
//! The `@` popup lists sessions on every keystroke, so listing must not touch logs that did not
//! change. The store keeps an index of session headers keyed by directory, and revalidates it by
//! the modification stamps of `sessions/` and of each project directory: a new session shows up as
//! a changed directory, and a header never changes once written. Titles are folded by the reader
//! (so only from a log's valid prefix, never from a torn tail) and cached per log file together
//! with the scan that found them, so an unchanged log is never read twice and a grown log is read
//! only past the valid prefix the last scan ended at.
//!
//! Conversation surfaces (what `prepare` reads) are cached the same way, bounded by bytes (64 MiB
//! in all, least recently used dropped first; a conversation over 32 MiB is not kept, since
//! keeping it means a copy beside the snapshot handed out): the folded conversation, the scan
//! that produced it, the file's stamp (length, mtime, inode) and a fingerprint of the bytes it
//! was folded from (a hash of the first 4 KiB and the last 64 bytes before the resume point).
//! An unchanged log is answered after one small read; a log that grew is read only past its
//! valid prefix ([`reader::resume_scan`]) once the fingerprint still matches; a log that shrank,
//! was replaced, or was rewritten in place is read again from the start. Titles resume the same
//! way. Logs are append-only (a writer only ever cuts bytes that were never valid), so the answer
//! is the one a full read would give; the fingerprint catches the programs that break that rule.
//!
//! Listing skips what it cannot read, naming it in the diagnostics log: a project directory
//! (retried every listing), a session whose header is bad (remembered by the log's stamp and
//! not read again until it changes; a header read stops at [`reader::MAX_HEADER_BYTES`]). No
//! listing takes a lock; a title read waits at most `TITLE_LOCK_WAIT` for a writer's lock and
//! then answers the title it knew.
//!
//! A store made with [`DiskStore::with_listing_cache`] also keeps its listing index on disk
//! (`<home>/index/listing`, see `store/listing_cache.rs`): a new process starts from it and checks
//! every directory's stamp instead of reading every header, and walks whatever is missing, stale
//! or another home's.
//!
//! A log whose header has a format version other than 0 cannot be listed honestly (its fields may
//! not mean what ours do), so the listing leaves it out with a warning; reading or resuming it by
//! id answers [`SessionError::UnsupportedVersion`], never "not found".
//!
//! Rooms (the API is [`DiskStore`] and the two file readers below; the rooms are private):
//! `store/listing.rs` (the index of headers and the listing), `store/title.rs` (titles),
//! `store/conversation.rs` (the conversation cache) over `store/lru.rs` (the byte-bounded
//! map), `store/stamp.rs` (the stamps and fingerprints every cache is checked by), and
//! `store/listing_cache.rs` (the index on disk).

use crate::session::error::{Result, SessionError};
use crate::session::paths::SESSIONS_DIR;
use crate::session::query::{BoxFuture, SessionQuery, SessionSummary, SurfaceSnapshot};
use crate::session::reader;
use crate::session::surface::SurfaceBuilder;
use crate::sync::LockExt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod conversation;
mod index;
mod listing;
mod listing_cache;
mod locate;
mod lru;
mod project_dir;
mod session_dirs;
mod stamp;
mod title;

use conversation::{Conversations, Keep};
use index::Index;
use listing::rebuild;
use title::TitleEntry;

/// Counters that show how much work the caches saved (tests and benchmarks read them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Directory listings performed.
    pub dir_reads: u64,
    /// Log headers read.
    pub header_reads: u64,
    /// Title scans (full or incremental) performed.
    pub title_scans: u64,
    /// Bytes of logs read by title scans.
    pub title_bytes_scanned: u64,
}

/// `SessionQuery` over the logs under `<home>/sessions`.
#[derive(Clone)]
pub struct DiskStore {
    inner: Arc<Inner>,
}

struct Inner {
    home: PathBuf,
    /// Keep the listing index in `<home>/index/listing` between processes (see
    /// [`DiskStore::with_listing_cache`]).
    listing_cache: bool,
    index: Mutex<Index>,
    titles: Mutex<HashMap<PathBuf, TitleEntry>>,
    conversations: Mutex<Conversations>,
}

impl DiskStore {
    /// A store over the dsh home `home` (logs under `<home>/sessions`). Touches nothing until
    /// asked; a home without a `sessions` directory lists no sessions.
    pub fn new(home: impl Into<PathBuf>) -> DiskStore {
        DiskStore::build(home.into(), false)
    }

    /// A store like [`DiskStore::new`] that also keeps its listing index in
    /// `<home>/index/listing` between processes: a new process's first listing starts from it,
    /// checking every directory's stamp instead of reading every header, and lists the walk's
    /// way whatever is missing, stale or not this home's (see `store/listing_cache.rs`).
    pub fn with_listing_cache(home: impl Into<PathBuf>) -> DiskStore {
        DiskStore::build(home.into(), true)
    }

    fn build(home: PathBuf, listing_cache: bool) -> DiskStore {
        DiskStore {
            inner: Arc::new(Inner {
                home,
                listing_cache,
                index: Mutex::new(Index::default()),
                titles: Mutex::new(HashMap::new()),
                conversations: Mutex::new(conversation::new_cache()),
            }),
        }
    }

    /// The dsh home this store reads.
    pub fn home(&self) -> &Path {
        &self.inner.home
    }

    /// `<home>/sessions`, where the project directories live.
    pub fn sessions_dir(&self) -> PathBuf {
        self.inner.home.join(SESSIONS_DIR)
    }

    /// The cache counters so far (see [`StoreStats`]).
    pub fn stats(&self) -> StoreStats {
        self.inner.index.locked().stats
    }

    /// Synchronous `read_surface`.
    pub fn read_surface_blocking(&self, id: &str) -> Result<SurfaceSnapshot> {
        self.with_log(id, read_surface_file)
    }

    /// Runs `read` on the log of `id`. A log deleted since it was indexed is forgotten and
    /// answered as not found, like an id the store never knew.
    fn with_log<T>(&self, id: &str, read: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
        let path = self.log_path(id)?;
        match read(&path) {
            Err(SessionError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                self.forget(&path);
                Err(SessionError::NotFound { id: id.to_string() })
            }
            other => other,
        }
    }

    /// Drops a vanished log from the index; its project directory is listed again next time.
    fn forget(&self, path: &Path) {
        let session_dir = path.parent().unwrap_or(Path::new(""));
        let (project_dir, name) = (session_dir.parent(), session_dir.file_name());
        let mut index = self.inner.index.locked();
        if let (Some(project_dir), Some(name)) = (project_dir, name) {
            if let Some(project) = index.projects.get_mut(project_dir) {
                if let Some(entry) = project.sessions.get_mut(name) {
                    *entry = None;
                    project.stamp = None;
                }
            }
        }
        rebuild(&mut index);
        drop(index);
        self.inner.titles.locked().remove(path);
    }

    fn spawn<T: Send + 'static>(
        &self,
        work: impl FnOnce(DiskStore) -> Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T>> {
        let store = self.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || work(store)).await {
                Ok(result) => result,
                Err(source) => Err(SessionError::TaskFailed {
                    what: "store task",
                    source,
                }),
            }
        })
    }
}

impl SessionQuery for DiskStore {
    fn list_sessions(&self) -> BoxFuture<'_, Result<Arc<Vec<SessionSummary>>>> {
        self.spawn(|store| store.list_sessions_blocking())
    }

    fn read_surface<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        let id = id.to_string();
        self.spawn(move |store| store.read_surface_blocking(&id))
    }

    fn read_title<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
        let id = id.to_string();
        self.spawn(move |store| store.read_title_blocking(&id))
    }

    fn read_conversation_surface<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        let id = id.to_string();
        self.spawn(move |store| store.read_conversation_surface_blocking(&id))
    }

    fn read_for_index_blocking(
        &self,
        id: &str,
    ) -> Option<Result<(SurfaceSnapshot, Option<String>)>> {
        // One scan gives both (the conversation builder folds the title as it goes).
        Some(self.with_log(id, |path| {
            self.read_conversation_titled_at(path, Keep::Recent)
        }))
    }
}

/// Reads and folds one log file.
pub fn read_surface_file(path: &Path) -> Result<SurfaceSnapshot> {
    let header = reader::read_header(path)?;
    let mut builder = SurfaceBuilder::new(&header.id);
    let scan = reader::scan_log(path, &mut builder)?;
    Ok(builder.into_snapshot(scan.header))
}

/// Reads and folds one log file for its conversation only (see
/// [`SessionQuery::read_conversation_surface`]): tool output and chunk rows are validated but
/// not decoded or kept.
pub fn read_conversation_surface_file(path: &Path) -> Result<SurfaceSnapshot> {
    let header = reader::read_header(path)?;
    let mut builder = SurfaceBuilder::conversation_only(&header.id);
    let scan = reader::scan_log(path, &mut builder)?;
    Ok(builder.into_snapshot(scan.header))
}
