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

use super::error::{Result, SessionError};
use super::format::{SessionHeader, FORMAT_VERSION};
use super::paths::{self, SESSIONS_DIR};
use super::query::{sort_sessions, BoxFuture, SessionQuery, SessionSummary, SurfaceSnapshot};
use super::reader::{self, Encoding, LogScan};
use super::surface::{SurfaceBuilder, TitleFold};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

mod listing_cache;

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

/// How long a title read waits for a writer's lock. Titles are read for every listed candidate,
/// so this is much shorter than [`reader::LOCK_WAIT`]: a busy log shows its last known title, or
/// its id.
const TITLE_LOCK_WAIT: Duration = Duration::from_millis(200);

/// What the folded conversations the store keeps may cost in all (their payload bytes), least
/// recently used dropped first.
const CONVERSATION_CACHE_BYTES: usize = 64 << 20;

/// A conversation larger than this is not kept: keeping one means a copy beside the snapshot
/// handed out, and for a big source that copy would dominate `prepare`'s peak (see the module
/// docs).
const CONVERSATION_ENTRY_MAX: usize = 32 << 20;

struct Conversations {
    entries: HashMap<PathBuf, ConversationEntry>,
    clock: u64,
    /// The sum of the entries' `bytes`.
    bytes: usize,
    /// [`CONVERSATION_CACHE_BYTES`] and [`CONVERSATION_ENTRY_MAX`] unless set otherwise.
    max_bytes: usize,
    max_entry: usize,
}

impl Default for Conversations {
    fn default() -> Self {
        Conversations {
            entries: HashMap::new(),
            clock: 0,
            bytes: 0,
            max_bytes: CONVERSATION_CACHE_BYTES,
            max_entry: CONVERSATION_ENTRY_MAX,
        }
    }
}

impl Conversations {
    fn take(&mut self, path: &Path) -> Option<ConversationEntry> {
        let entry = self.entries.remove(path)?;
        self.bytes -= entry.bytes;
        Some(entry)
    }

    /// Keeps `entry`, then drops the least recently used entries while over the byte bound.
    fn put(&mut self, path: PathBuf, mut entry: ConversationEntry) {
        self.clock += 1;
        entry.used = self.clock;
        self.bytes += entry.bytes;
        if let Some(old) = self.entries.insert(path, entry) {
            self.bytes -= old.bytes;
        }
        while self.bytes > self.max_bytes {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(p, _)| p.clone());
            match oldest {
                Some(oldest) => {
                    self.take(&oldest);
                }
                None => break,
            }
        }
    }
}

struct ConversationEntry {
    stamp: FileStamp,
    /// The log's bytes up to `scan.valid_len`, as far as they are checked before reuse.
    prefix: PrefixCheck,
    scan: LogScan,
    builder: SurfaceBuilder,
    /// What the folded conversation costs (payloads and per-event overhead).
    bytes: usize,
    used: u64,
}

/// The approximate heap bytes of a folded conversation.
fn conversation_bytes(builder: &SurfaceBuilder) -> usize {
    builder
        .surface()
        .iter()
        .map(|e| {
            std::mem::size_of::<super::format::Event>()
                + e.data.get().len()
                + e.kind.len()
                + e.source_event_seqs.as_ref().map_or(0, |s| s.len() * 8)
        })
        .sum()
}

/// A fingerprint of a log's first `len` bytes: a hash of the first block and the last bytes
/// before `len`. A cache built from those bytes is reused only if they are still there: a log
/// rewritten in place (same inode, as long or longer) must not be answered as old lines followed
/// by new ones. Logs only ever grow by appends, so a mismatch means "read again from the start".
#[derive(Debug, Clone, PartialEq, Eq)]
struct PrefixCheck {
    len: u64,
    head: u64,
    tail: Vec<u8>,
}

/// Bytes of the start of a log hashed, and of the end of its prefix kept.
const PREFIX_HEAD: u64 = 4096;
const PREFIX_TAIL: u64 = 64;

impl PrefixCheck {
    fn read(path: &Path, len: u64) -> Result<PrefixCheck> {
        use std::hash::Hasher;
        use std::io::{Read, Seek, SeekFrom};
        let io = |e| SessionError::io(path, e);
        let mut file = super::files::open_read(path).map_err(io)?;
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
    fn still(&self, path: &Path) -> bool {
        PrefixCheck::read(path, self.len).is_ok_and(|now| now == *self)
    }
}

/// Which folds a conversation read leaves in the conversation cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Every fold (the reference service's reads: a session referenced once is often
    /// referenced again).
    Always,
    /// A fold already cached, or of a log written in the last [`KEEP_RECENT`] (the indexer's
    /// reads: a full pass reads every session once, and only a growing log is read again, when
    /// the cached fold lets the read resume where it stopped).
    Recent,
}

/// A log written this recently may still grow: the indexer's read of it is cached.
const KEEP_RECENT: Duration = Duration::from_secs(600);

/// A log file's identity and size at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: SystemTime,
    /// Device and inode (0 where the platform has none): a replaced file is another file.
    file: (u64, u64),
}

impl FileStamp {
    /// Modified so recently that a rewrite within the same clock tick could hide behind it.
    fn is_racy(&self, now: SystemTime) -> bool {
        now.duration_since(self.modified)
            .map(|age| age < RACY_WINDOW)
            .unwrap_or(true)
    }

    fn of(path: &Path) -> Result<FileStamp> {
        let meta = fs::metadata(path).map_err(|e| SessionError::io(path, e))?;
        #[cfg(unix)]
        let file = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let file = (0, 0);
        Ok(FileStamp {
            len: meta.len(),
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            file,
        })
    }
}

/// A directory's identity at one moment; a change means it must be listed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: SystemTime,
    len: u64,
    /// Modified so recently that a change within the same clock tick could hide behind it.
    racy: bool,
}

/// Timestamps this close to "now" are not trusted (coarse filesystem clocks).
const RACY_WINDOW: Duration = Duration::from_secs(2);

impl Stamp {
    fn of(meta: &fs::Metadata, now: SystemTime) -> Stamp {
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let racy = now
            .duration_since(modified)
            .map(|age| age < RACY_WINDOW)
            .unwrap_or(true);
        Stamp {
            modified,
            len: meta.len(),
            racy,
        }
    }
    fn still(&self, fresh: &Stamp) -> bool {
        !self.racy && self.modified == fresh.modified && self.len == fresh.len
    }
}

#[derive(Default)]
struct Index {
    /// Whether this store tried the listing cache already, and when it last wrote it.
    cache: CacheState,
    root: Option<Stamp>,
    projects: HashMap<PathBuf, Project>,
    /// Session id → log path (first by path order when ids collide).
    by_id: HashMap<String, PathBuf>,
    /// Logs of a format version this build cannot read, by session id (ids of readable logs
    /// win): left out of the listing, answered by id with [`SessionError::UnsupportedVersion`].
    unsupported: HashMap<String, (PathBuf, u64)>,
    sorted: Arc<Vec<SessionSummary>>,
    stats: StoreStats,
}

/// The listing cache, as one store uses it.
#[derive(Default, Clone, Copy)]
struct CacheState {
    loaded: bool,
    written: Option<Instant>,
}

/// A store that keeps a listing cache rewrites it at most this often (a new session changes the
/// index; the next process checks a stale cache and lists only what changed).
const CACHE_REWRITE_EVERY: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Project {
    stamp: Option<Stamp>,
    /// Session directory → its log, or `None` while the directory holds no readable log yet.
    sessions: HashMap<PathBuf, Option<LogEntry>>,
    /// The last listing of this directory failed (warned about once, until it succeeds).
    unreadable: bool,
    /// Session directory → the log whose header could not be read, and its stamp then: an
    /// unchanged bad log is not read again on every listing.
    failed: HashMap<PathBuf, (PathBuf, FileStamp)>,
}

#[derive(Clone)]
struct LogEntry {
    path: PathBuf,
    header: Arc<SessionHeader>,
    /// The session directory's stamp taken before its header was read: the listing cache
    /// trusts the header in a later process only while the directory still has this stamp.
    dir_stamp: Option<Stamp>,
    /// Read or checked by this process (`false` for an entry the listing cache gave, until its
    /// directory's stamp was compared).
    verified: bool,
}

#[derive(Debug, Clone)]
struct TitleEntry {
    stamp: FileStamp,
    /// Where the scan that found the title ended its valid prefix: a grown log is resumed there.
    /// (Not the whole [`LogScan`]: a listing caches a title per session, and the header is read
    /// again only when a log grew.)
    resume: Resume,
    /// The log's bytes up to `resume.valid_len`, checked before a scan resumes there.
    prefix: PrefixCheck,
    title: Option<String>,
}

/// The parts of a [`LogScan`] a resumed scan continues from.
#[derive(Debug, Clone, Copy)]
struct Resume {
    encoding: Encoding,
    valid_len: u64,
    next_seq: u64,
    valid_lines: u64,
    has_events: bool,
    missing_final_newline: bool,
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
                conversations: Mutex::new(Conversations::default()),
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
        self.inner.index.lock().expect("index lock").stats
    }

    /// The encoding new sessions should use: the home's existing one, else zstd (as dsh).
    pub fn preferred_encoding(&self) -> Encoding {
        let _ = self.list_sessions_blocking();
        let index = self.inner.index.lock().expect("index lock");
        let mut plain = false;
        for path in index.by_id.values() {
            match Encoding::of_path(path) {
                Encoding::Zstd => return Encoding::Zstd,
                Encoding::Plain => plain = true,
            }
        }
        if plain {
            Encoding::Plain
        } else {
            Encoding::Zstd
        }
    }

    /// The log file of session `id`, refreshing the index once if the id is unknown. A log of an
    /// unsupported format version is [`SessionError::UnsupportedVersion`], not a log path.
    pub fn log_path(&self, id: &str) -> Result<PathBuf> {
        if let Some(found) = self.lookup(id) {
            return found;
        }
        self.list_sessions_blocking()?;
        self.lookup(id)
            .unwrap_or_else(|| Err(SessionError::NotFound { id: id.to_string() }))
    }

    fn lookup(&self, id: &str) -> Option<Result<PathBuf>> {
        let index = self.inner.index.lock().expect("index lock");
        if let Some(path) = index.by_id.get(id) {
            return Some(Ok(path.clone()));
        }
        index.unsupported.get(id).map(|(path, version)| {
            Err(SessionError::UnsupportedVersion {
                path: path.clone(),
                version: *version,
            })
        })
    }

    /// Synchronous `list_sessions`.
    pub fn list_sessions_blocking(&self) -> Result<Arc<Vec<SessionSummary>>> {
        let mut index = self.inner.index.lock().expect("index lock");
        let sessions_dir = self.inner.home.join(SESSIONS_DIR);
        if !self.inner.listing_cache {
            refresh(&sessions_dir, &mut index)?;
            return Ok(index.sorted.clone());
        }
        let first = !index.cache.loaded;
        if first {
            index.cache.loaded = true;
            if index.root.is_none() && index.projects.is_empty() {
                if let Some(loaded) = listing_cache::load(&self.inner.home, &sessions_dir) {
                    *index = Index {
                        cache: index.cache,
                        stats: index.stats,
                        ..loaded
                    };
                }
            }
        }
        let before = index.stats;
        refresh(&sessions_dir, &mut index)?;
        let read = index.stats.dir_reads + index.stats.header_reads
            > before.dir_reads + before.header_reads;
        let due = index
            .cache
            .written
            .is_none_or(|at| at.elapsed() >= CACHE_REWRITE_EVERY);
        if read && (first || due) && index.root.is_some() {
            listing_cache::store(&self.inner.home, &sessions_dir, &index);
            index.cache.written = Some(Instant::now());
        }
        Ok(index.sorted.clone())
    }

    /// Logs the last listing left out because their format version is not 0, as the errors
    /// reading them gives, sorted by path (for a command line to say what it skipped).
    pub fn unsupported_logs(&self) -> Vec<SessionError> {
        let index = self.inner.index.lock().expect("index lock");
        let mut logs: Vec<(PathBuf, u64)> = index.unsupported.values().cloned().collect();
        logs.sort();
        logs.into_iter()
            .map(|(path, version)| SessionError::UnsupportedVersion { path, version })
            .collect()
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
        let session_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut index = self.inner.index.lock().expect("index lock");
        for project in index.projects.values_mut() {
            if let Some(entry) = project.sessions.get_mut(&session_dir) {
                *entry = None;
                project.stamp = None;
            }
        }
        rebuild(&mut index);
        drop(index);
        self.inner.titles.lock().expect("title lock").remove(path);
    }

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
    fn read_conversation_titled_at(
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
        let (scan, builder) = match cached {
            Some(entry) if entry.stamp == stamp => (entry.scan, entry.builder),
            Some(entry)
                if stamp.len >= entry.scan.valid_len && !entry.scan.missing_final_newline =>
            {
                let mut builder = entry.builder;
                let scan = reader::resume_scan(&path, &entry.scan, &mut builder)?;
                (scan, builder)
            }
            _ => {
                let header = reader::read_header(&path)?;
                let mut builder = SurfaceBuilder::conversation_only(&header.id);
                let scan = reader::scan_log(&path, &mut builder)?;
                (scan, builder)
            }
        };
        let title = builder.title().map(str::to_string);
        let recent = SystemTime::now()
            .duration_since(stamp.modified)
            .map_or(true, |age| age < KEEP_RECENT);
        if !was_cached && keep == Keep::Recent && !recent {
            // An old log read once by the indexer: caching it would cost a copy of its fold and
            // push out what the reference service reads.
            return Ok((builder.into_snapshot(scan.header), title));
        }
        let bytes = conversation_bytes(&builder);
        if bytes > self.conversations().max_entry {
            return Ok((builder.into_snapshot(scan.header), title));
        }
        // Kept under the stamp seen before the scan: a log that grew meanwhile is resumed next
        // time, past the fingerprinted prefix.
        let prefix = PrefixCheck::read(&path, scan.valid_len);
        let Ok(prefix) = prefix else {
            return Ok((builder.into_snapshot(scan.header), title));
        };
        let snapshot = builder.clone().into_snapshot(scan.header.clone());
        let entry = ConversationEntry {
            stamp,
            prefix,
            scan,
            builder,
            bytes,
            used: 0,
        };
        self.conversations().put(path, entry);
        Ok((snapshot, title))
    }

    /// Bounds the conversation cache: `max_bytes` in all, `max_entry` for one conversation
    /// (defaults: 64 MiB and 32 MiB). Entries over the new bounds are dropped.
    pub fn set_conversation_cache_limits(&self, max_bytes: usize, max_entry: usize) {
        let mut cache = self.conversations();
        cache.max_bytes = max_bytes;
        cache.max_entry = max_entry;
        let over: Vec<PathBuf> = cache
            .entries
            .iter()
            .filter(|(_, e)| e.bytes > max_entry)
            .map(|(p, _)| p.clone())
            .collect();
        for path in over {
            cache.take(&path);
        }
        while cache.bytes > cache.max_bytes {
            let oldest = cache
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(p, _)| p.clone());
            match oldest {
                Some(oldest) => {
                    cache.take(&oldest);
                }
                None => break,
            }
        }
    }

    /// What the conversation cache holds now: entries and their approximate bytes.
    pub fn conversation_cache_size(&self) -> (usize, usize) {
        let cache = self.conversations();
        (cache.entries.len(), cache.bytes)
    }

    fn conversations(&self) -> std::sync::MutexGuard<'_, Conversations> {
        self.inner
            .conversations
            .lock()
            .expect("conversation cache lock")
    }

    /// Synchronous `read_title`.
    pub fn read_title_blocking(&self, id: &str) -> Result<Option<String>> {
        self.with_log(id, |path| self.title_of_path(path))
    }

    /// The title folded from the log's valid prefix only (the reader's validation: nothing
    /// from a torn tail). A grown log is scanned from where its valid prefix ended.
    fn title_of_path(&self, path: &Path) -> Result<Option<String>> {
        let stamp = FileStamp::of(path)?;
        let cached = self
            .inner
            .titles
            .lock()
            .expect("title lock")
            .get(path)
            .cloned();
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
            let mut index = self.inner.index.lock().expect("index lock");
            index.stats.title_scans += 1;
            index.stats.title_bytes_scanned += scan.scanned_len.saturating_sub(start);
        }
        // Under the stamp seen before the scan: a log that grew meanwhile is resumed next time.
        if let Ok(prefix) = PrefixCheck::read(path, scan.valid_len) {
            self.inner.titles.lock().expect("title lock").insert(
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

/// The log file inside a session directory, preferring the zstd one.
fn find_log(dir: &Path) -> Option<PathBuf> {
    [paths::ZSTD_LOG, paths::PLAIN_LOG]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
}

fn refresh(sessions_dir: &Path, index: &mut Index) -> Result<()> {
    let now = SystemTime::now();
    let root_meta = match fs::metadata(sessions_dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !index.projects.is_empty() || index.root.is_some() {
                *index = Index {
                    stats: index.stats,
                    ..Index::default()
                };
            }
            return Ok(());
        }
        Err(e) => return Err(SessionError::io(sessions_dir, e)),
    };
    let root_stamp = Stamp::of(&root_meta, now);
    let mut changed = false;
    if !index.root.is_some_and(|s| s.still(&root_stamp)) {
        index.stats.dir_reads += 1;
        let mut seen = HashSet::new();
        for dir in list_dirs(sessions_dir)? {
            seen.insert(dir.clone());
            index.projects.entry(dir).or_default();
        }
        let before = index.projects.len();
        index.projects.retain(|dir, _| seen.contains(dir));
        changed |= before != index.projects.len();
        index.root = Some(root_stamp);
    }
    changed |= refresh_projects(&mut index.projects, now, &mut index.stats)?;
    if changed || index.sorted.is_empty() && !index.projects.is_empty() {
        rebuild(index);
    }
    Ok(())
}

/// Refreshes every project directory. The first listing of a big home reads a header per session
/// (tens of thousands of small files, most of it in the kernel's path lookups), so then the
/// projects are shared among the available cores.
fn refresh_projects(
    projects: &mut HashMap<PathBuf, Project>,
    now: SystemTime,
    stats: &mut StoreStats,
) -> Result<bool> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    // Threads only pay for a listing that reads directories never read before; an indexed home
    // costs a `stat` per project.
    let unread = projects
        .values()
        .filter(|p| p.stamp.is_none() || p.sessions.values().flatten().any(|e| !e.verified))
        .count();
    let mut projects: Vec<(&PathBuf, &mut Project)> = projects.iter_mut().collect();
    if workers < 2 || unread < 2 * workers {
        return refresh_share(&mut projects, now, stats);
    }
    let share = projects.len().div_ceil(workers);
    let outcomes: Vec<Result<(bool, StoreStats)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = projects
            .chunks_mut(share)
            .map(|chunk| {
                scope.spawn(move || {
                    let mut stats = StoreStats::default();
                    refresh_share(chunk, now, &mut stats).map(|changed| (changed, stats))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut changed = false;
    for outcome in outcomes {
        let (share_changed, share_stats) = outcome?;
        changed |= share_changed;
        stats.dir_reads += share_stats.dir_reads;
        stats.header_reads += share_stats.header_reads;
    }
    Ok(changed)
}

/// Refreshes one share of the project directories.
fn refresh_share(
    projects: &mut [(&PathBuf, &mut Project)],
    now: SystemTime,
    stats: &mut StoreStats,
) -> Result<bool> {
    let mut changed = false;
    for (dir, project) in projects.iter_mut() {
        changed |= refresh_project(dir, project, now, stats)?;
    }
    Ok(changed)
}

/// Re-lists a project directory if it changed, and retries sessions without a log yet.
fn refresh_project(
    dir: &Path,
    project: &mut Project,
    now: SystemTime,
    stats: &mut StoreStats,
) -> Result<bool> {
    let meta = match fs::metadata(dir) {
        Ok(meta) => meta,
        Err(_) => {
            let had = !project.sessions.is_empty();
            project.sessions.clear();
            project.stamp = None;
            return Ok(had);
        }
    };
    let stamp = Stamp::of(&meta, now);
    let mut changed = false;
    if !project.stamp.is_some_and(|s| s.still(&stamp)) {
        stats.dir_reads += 1;
        let listed = match list_dirs(dir) {
            Ok(listed) => listed,
            Err(e) => {
                // One project nobody may read must not take the home down: skip it like an
                // unreadable session, and try again on the next listing (no stamp is kept).
                if !project.unreadable {
                    tracing::warn!(error = %e, "skipping a project directory that cannot be read");
                }
                project.unreadable = true;
                let had = !project.sessions.is_empty();
                project.sessions.clear();
                project.stamp = None;
                return Ok(had);
            }
        };
        project.unreadable = false;
        // Headers the listing cache gave for a directory that changed are read again.
        for entry in project.sessions.values_mut() {
            if entry.as_ref().is_some_and(|e| !e.verified) {
                *entry = None;
            }
        }
        let mut seen = HashSet::new();
        for session_dir in listed {
            seen.insert(session_dir.clone());
            if let std::collections::hash_map::Entry::Vacant(slot) =
                project.sessions.entry(session_dir)
            {
                slot.insert(None);
                changed = true;
            }
        }
        let before = project.sessions.len();
        project.sessions.retain(|d, _| seen.contains(d));
        project.failed.retain(|d, _| seen.contains(d));
        changed |= before != project.sessions.len();
        project.stamp = Some(stamp);
    }
    for (session_dir, entry) in project.sessions.iter_mut() {
        // A known log keeps its header forever; only directories without one are retried. One
        // the listing cache gave is kept while its directory has the stamp it had then.
        if let Some(known) = entry.as_mut() {
            if !known.verified {
                let fresh = fs::metadata(session_dir).ok().map(|m| Stamp::of(&m, now));
                known.verified = matches!(
                    (known.dir_stamp, fresh),
                    (Some(then), Some(fresh)) if then.still(&fresh)
                );
            }
            if known.verified {
                continue;
            }
            *entry = None;
            changed = true;
        }
        let Some(path) = find_log(session_dir) else {
            changed |= entry.take().is_some();
            continue;
        };
        // A log whose header failed is read again only once it changed (or was replaced).
        let stamp = FileStamp::of(&path).ok();
        if let (Some(stamp), Some((failed_path, failed_stamp))) =
            (stamp, project.failed.get(session_dir))
        {
            if *failed_path == path && *failed_stamp == stamp {
                continue;
            }
        }
        stats.header_reads += 1;
        // Taken before the read: a change after it shows as a stamp that no longer matches.
        let dir_stamp = fs::metadata(session_dir).ok().map(|m| Stamp::of(&m, now));
        match reader::read_header_any_version(&path) {
            Ok(header) => {
                project.failed.remove(session_dir);
                if header.version != FORMAT_VERSION {
                    tracing::warn!(
                        path = %path.display(),
                        version = header.version,
                        "not listing a session log of an unsupported format version"
                    );
                }
                *entry = Some(LogEntry {
                    path,
                    header: Arc::new(header),
                    dir_stamp,
                    verified: true,
                });
                changed = true;
            }
            Err(e) => {
                tracing::warn!(error = %e, "skipping a session whose header cannot be read");
                changed |= entry.take().is_some();
                // Remembered only once its stamp is old enough to be trusted (coarse clocks).
                match stamp.filter(|s| !s.is_racy(now)) {
                    Some(stamp) => {
                        project.failed.insert(session_dir.clone(), (path, stamp));
                    }
                    None => {
                        project.failed.remove(session_dir);
                    }
                }
            }
        }
    }
    Ok(changed)
}

fn rebuild(index: &mut Index) {
    let mut entries: Vec<&LogEntry> = index
        .projects
        .values()
        .flat_map(|p| p.sessions.values().flatten())
        .collect();
    entries.sort_by(|a, b| path_order(&a.path, &b.path));
    let mut by_id = HashMap::with_capacity(entries.len());
    let mut sessions = Vec::with_capacity(entries.len());
    let (entries, unreadable): (Vec<&LogEntry>, Vec<&LogEntry>) = entries
        .into_iter()
        .partition(|entry| entry.header.version == FORMAT_VERSION);
    for entry in entries {
        if by_id.contains_key(&entry.header.id) {
            tracing::warn!(
                id = %entry.header.id,
                path = %entry.path.display(),
                "ignoring a second log with the same session id"
            );
            continue;
        }
        by_id.insert(entry.header.id.clone(), entry.path.clone());
        sessions.push(SessionSummary {
            header: entry.header.clone(),
            live: false,
            persisted: true,
        });
    }
    sort_sessions(&mut sessions);
    index.unsupported = unreadable
        .into_iter()
        .filter(|entry| !by_id.contains_key(&entry.header.id))
        .map(|entry| {
            let found = (entry.path.clone(), entry.header.version);
            (entry.header.id.clone(), found)
        })
        .collect();
    index.by_id = by_id;
    index.sorted = Arc::new(sessions);
}

/// `a.cmp(b)` for the store's paths (joined from listed names: no `.`, `..` or repeated
/// separators), without splitting them into components: a byte comparison in which the separator
/// sorts below every other byte is the component-wise order then, since no name holds a
/// separator. (`Path::cmp` was a quarter of a listing served from the listing cache.)
fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
        let key = |byte: u8| if byte == b'/' { 0 } else { u16::from(byte) + 1 };
        match mismatch(a, b) {
            Some(at) => key(a[at]).cmp(&key(b[at])),
            None => a.len().cmp(&b.len()),
        }
    }
    #[cfg(not(unix))]
    {
        a.cmp(b)
    }
}

/// The first index where `a` and `b` differ (within the shorter), eight bytes at a time: the
/// store's paths share the long prefix of the home.
#[cfg(unix)]
fn mismatch(a: &[u8], b: &[u8]) -> Option<usize> {
    let n = a.len().min(b.len());
    let (wa, _) = a[..n].as_chunks::<8>();
    let (wb, _) = b[..n].as_chunks::<8>();
    for (k, (x, y)) in wa.iter().zip(wb).enumerate() {
        let diff = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
        if diff != 0 {
            return Some(8 * k + diff.trailing_zeros() as usize / 8);
        }
    }
    let done = 8 * wa.len();
    (done..n).find(|&i| a[i] != b[i])
}

fn list_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(dirs),
        Err(e) => return Err(SessionError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| SessionError::io(dir, e))?;
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            dirs.push(entry.path());
        }
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::TestRng;

    /// The byte order with the separator lowest is `Path`'s component order on joined names.
    #[test]
    fn path_order_is_the_component_order() {
        let names = [
            "a", "ab", "a-b", "a.b", "a b", "b", "A", "é", "a~", "_no-cwd", "0",
        ];
        let mut rng = TestRng::new(9);
        for _ in 0..20_000 {
            let path = |rng: &mut TestRng| {
                let mut path = PathBuf::from("/home/h/sessions");
                for _ in 0..1 + rng.below(3) {
                    path.push(names[rng.below(names.len())]);
                }
                path
            };
            let (a, b) = (path(&mut rng), path(&mut rng));
            assert_eq!(path_order(&a, &b), a.cmp(&b), "{a:?} {b:?}");
        }
    }
}
