//! The conversation cache: folded conversations (what `prepare` reads) kept between reads,
//! bounded by bytes, and resumed past their valid prefix when a log grew.
//!
//! Purpose: a source referenced again, or a log the indexer reads while it grows, costs a `stat`
//! and a small read instead of a whole fold; the bound keeps the cache from ever costing more
//! than [`CONVERSATION_CACHE_BYTES`] (one conversation at most [`CONVERSATION_ENTRY_MAX`]).
//!
//! Invariant: the snapshot answered is the one a full read of the log would fold. A cached fold
//! is reused only for the same file (device and inode) whose folded bytes are still there
//! ([`PrefixCheck`]); an unchanged stamp answers it as it is, a longer log resumes it past its
//! valid prefix ([`reader::resume_scan`]), anything else folds again from the start. The cache
//! lock is never held across I/O: an entry is taken out while it is read and put back after.
//! The byte bound is [`ByteLru`]'s. Proof: `tests/session/reliability_conversation_cache.rs`
//! (grown, shrunk, replaced and rewritten logs against a fresh read) and
//! `the_conversation_cache_is_bounded_by_bytes` (`tests/cli/reliability_hostile_home.rs`).

use super::lru::ByteLru;
use super::stamp::{FileStamp, PrefixCheck};
use super::DiskStore;
use crate::session::error::Result;
use crate::session::query::SurfaceSnapshot;
use crate::session::reader::{self, LogScan};
use crate::session::surface::SurfaceBuilder;
use crate::sync::LockExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What the folded conversations the store keeps may cost in all (their payload bytes), least
/// recently used dropped first.
pub(super) const CONVERSATION_CACHE_BYTES: usize = 64 << 20;

/// A conversation larger than this is not kept: keeping one means a copy beside the snapshot
/// handed out, and for a big source that copy would dominate `prepare`'s peak (see the module
/// docs).
pub(super) const CONVERSATION_ENTRY_MAX: usize = 32 << 20;

/// The folds kept, by log path.
pub(super) type Conversations = ByteLru<PathBuf, ConversationEntry>;

/// An empty cache with the default bounds.
pub(super) fn new_cache() -> Conversations {
    ByteLru::new(CONVERSATION_CACHE_BYTES, CONVERSATION_ENTRY_MAX)
}

pub(super) struct ConversationEntry {
    pub(super) stamp: FileStamp,
    /// The log's bytes up to `scan.valid_len`, as far as they are checked before reuse.
    pub(super) prefix: PrefixCheck,
    pub(super) scan: LogScan,
    pub(super) builder: SurfaceBuilder,
}

/// The approximate heap bytes of a folded conversation.
pub(super) fn conversation_bytes(builder: &SurfaceBuilder) -> usize {
    builder
        .surface()
        .iter()
        .map(|e| {
            std::mem::size_of::<crate::session::format::Event>()
                + e.data.get().len()
                + e.kind.len()
                + e.source_event_seqs.as_ref().map_or(0, |s| s.len() * 8)
        })
        .sum()
}

/// Which folds a conversation read leaves in the conversation cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// Every fold (the reference service's reads: a session referenced once is often
    /// referenced again).
    Always,
    /// A fold already cached, or of a log written in the last [`KEEP_RECENT`] (the indexer's
    /// reads: a full pass reads every session once, and only a growing log is read again, when
    /// the cached fold lets the read resume where it stopped).
    Recent,
}

/// A log written this recently may still grow: the indexer's read of it is cached.
pub(super) const KEEP_RECENT: Duration = Duration::from_secs(600);

impl DiskStore {
    /// Synchronous `read_conversation_surface`, through the conversation cache.
    pub fn read_conversation_surface_blocking(&self, id: &str) -> Result<SurfaceSnapshot> {
        self.with_log(id, |path| self.read_conversation_at(path))
    }

    fn read_conversation_at(&self, path: &Path) -> Result<SurfaceSnapshot> {
        self.read_conversation_titled_at(path, Keep::Always)
            .map(|(snapshot, _)| snapshot)
    }

    /// The conversation surface and, from the same scan, the title (the last `session/title`
    /// of the log's valid prefix, as [`DiskStore::read_title_blocking`] folds it).
    pub(super) fn read_conversation_titled_at(
        &self,
        path: &Path,
        keep: Keep,
    ) -> Result<(SurfaceSnapshot, Option<String>)> {
        let path = path.to_path_buf();
        let stamp = FileStamp::of(&path)?;
        // Taken out while reading, so the lock is never held across I/O.
        let cached = self.conversations().take(&path);
        // A cached fold is reused only for the same file whose folded bytes are still there.
        let cached =
            cached.filter(|entry| entry.stamp.file == stamp.file && entry.prefix.still(&path));
        let was_cached = cached.is_some();
        let (scan, builder) = fold(&path, &stamp, cached)?;
        let title = builder.title().map(str::to_string);
        let snapshot = self.keep(path, stamp, keep, was_cached, scan, builder);
        Ok((snapshot, title))
    }

    /// Puts a fold back in the cache if `keep` wants it and the cache admits it, and answers
    /// its snapshot.
    fn keep(
        &self,
        path: PathBuf,
        stamp: FileStamp,
        keep: Keep,
        was_cached: bool,
        scan: LogScan,
        builder: SurfaceBuilder,
    ) -> SurfaceSnapshot {
        let recent = SystemTime::now()
            .duration_since(stamp.modified)
            .map_or(true, |age| age < KEEP_RECENT);
        if !was_cached && keep == Keep::Recent && !recent {
            // An old log read once by the indexer: caching it would cost a copy of its fold and
            // push out what the reference service reads.
            return builder.into_snapshot(scan.header);
        }
        let bytes = conversation_bytes(&builder);
        if !self.conversations().admits(bytes) {
            return builder.into_snapshot(scan.header);
        }
        // Kept under the stamp seen before the scan: a log that grew meanwhile is resumed next
        // time, past the fingerprinted prefix.
        let Ok(prefix) = PrefixCheck::read(&path, scan.valid_len) else {
            return builder.into_snapshot(scan.header);
        };
        let snapshot = builder.clone().into_snapshot(scan.header.clone());
        let entry = ConversationEntry {
            stamp,
            prefix,
            scan,
            builder,
        };
        self.conversations().put(path, entry, bytes);
        snapshot
    }

    /// Bounds the conversation cache: `max_bytes` in all, `max_entry` for one conversation
    /// (defaults: 64 MiB and 32 MiB). Entries over the new bounds are dropped.
    pub fn set_conversation_cache_limits(&self, max_bytes: usize, max_entry: usize) {
        self.conversations().set_limits(max_bytes, max_entry);
    }

    /// What the conversation cache holds now: entries and their approximate bytes.
    pub fn conversation_cache_size(&self) -> (usize, usize) {
        let cache = self.conversations();
        (cache.len(), cache.bytes())
    }

    fn conversations(&self) -> std::sync::MutexGuard<'_, Conversations> {
        self.inner.conversations.locked()
    }
}

/// The fold of the log at `path` (now `stamp`): the cached one as it is for an unchanged log,
/// resumed past its valid prefix for a longer one, else a read from the start.
fn fold(
    path: &Path,
    stamp: &FileStamp,
    cached: Option<ConversationEntry>,
) -> Result<(LogScan, SurfaceBuilder)> {
    Ok(match cached {
        Some(entry) if entry.stamp == *stamp => (entry.scan, entry.builder),
        Some(entry) if stamp.len >= entry.scan.valid_len && !entry.scan.missing_final_newline => {
            let mut builder = entry.builder;
            let scan = reader::resume_scan(path, &entry.scan, &mut builder)?;
            (scan, builder)
        }
        _ => {
            let header = reader::read_header(path)?;
            let mut builder = SurfaceBuilder::conversation_only(&header.id);
            let scan = reader::scan_log(path, &mut builder)?;
            (scan, builder)
        }
    })
}
