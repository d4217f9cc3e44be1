//! The discovery index: an SQLite database with FTS5 under `<home>/index/` (SPEC §8).
//!
//! Purpose: answer "which session did I mean" from titles, first prompts and conversation text
//! without reading logs on a keystroke. It is a cache: deleting it loses nothing.
//!
//! Layout: one row per session in `sessions` (id, title, cwd, created and last-activity time,
//! message count, conversation bytes, first prompt, source, the change stamp it was indexed at,
//! and the state of its indexed conversation), and per session one heading row (`kind` 0, title
//! and first prompt) and conversation chunks (`kind` 1) of at most [`CHUNK_BYTES`] each, cut at
//! message boundaries. A row's number is shared by three tables: `owner` (its session and kind,
//! small, so a query never reads text it does not show), `chunk` (its text, read only for a
//! hit's snippet) and the contentless FTS5 table `doc`, which indexes the row's distinct words
//! (`super::terms`) rather than its text: the same tokens, a third of the lookups and
//! positions, and no second copy of the text. Conversation text is the projection of SPEC §3.5
//! ([`crate::reference::projection`]): direct prompts, steering, assistant text and checkpoints;
//! never tool output or reasoning.
//!
//! Incremental rule: a session is read again only when its change stamp (log length, mtime and
//! inode, from [`Stamper`]) differs from the one it was indexed at. It is then re-projected
//! through the store (whose conversation cache resumes a grown log past its valid prefix), and
//! a hash chain over the projected items tells whether the indexed items are still the prefix of
//! the new ones: if so only the last (partial) chunk and the new items are written (a grown log is
//! indexed from where it stopped); otherwise (a compaction rewrote history) its chunks are
//! replaced. A targeted refresh ([`Indexer::refresh_sessions`], on the watcher's events) applies
//! the same rule and write path to named sessions of the last listing, without listing.
//!
//! Invariants: a database that is not ours, of another schema version, or corrupt is rebuilt
//! (under a lock file, re-checked once the lock is held, so two processes never both rebuild);
//! one another process holds busy is an error after [`BUSY_TIMEOUT`], never rebuilt or removed;
//! nothing is written through a symlink (anything but a directory at `index/`, or but a regular
//! file at the database, its `-wal`/`-shm`/`-journal` files or the lock, is set aside first,
//! and connections open with `SQLITE_OPEN_NOFOLLOW`);
//! the database runs in WAL mode with a busy timeout, so two processes on one home can index
//! and search at once; logs are read outside any transaction and written a batch per short
//! write transaction, so a second indexer waits only for writes; a session that cannot be read is recorded with its stamp and header only
//! (never failing the pass) and read again once it changes. A first build of a large home
//! ([`FRESH_BUILD_SESSIONS`]) is written without a journal to a fresh file beside the database,
//! under the rebuild lock, and linked into place only when complete and synced (never over a
//! database that appeared meanwhile; a database is only made under that lock): no WAL copy of
//! every page, and nothing half-built is ever opened as the index.
//!
//! Rooms: [`file`] opens, checks and rebuilds the database file (never through a link);
//! `fresh` writes a first build aside; `stamp` says when a session changed; [`write`]
//! turns one read session into rows. This module holds the passes.
//!
//! Proof: `tests/discovery/index.rs` (build, incremental growth, compaction, damaged and foreign
//! databases, two connections and a second process, the write lock free during a read, external
//! sessions, the fresh first build and a database made during it), `tests/discovery/cache.rs` (symlinks, directories, FIFOs at its paths, a database
//! held under `BEGIN EXCLUSIVE`), `tests/discovery/watch.rs`
//! (targeted refreshes under the background indexer); the chunking and the
//! hash chain are unit-tested below.

mod file;
mod fresh;
mod stamp;
mod write;

use crate::discovery::meta::SessionMeta;
pub(crate) use file::entry_id;
pub use file::{is_busy, is_busy_error, open, open_reader, set_aside_foreign};
pub use stamp::{FileStamper, Stamper};

use crate::reference::projection::{project_owned, ConversationItem};
use crate::session::{SessionError, SessionQuery, SessionSummary};
use file::{is_damage, prepare_dir, remove_db, try_open, RebuildLock};
use rusqlite::Connection;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use write::{delete_session, first_prompt_labels, record_failure, write_session, Outcome};

/// The schema this build writes (`PRAGMA user_version`); anything else is rebuilt.
pub const SCHEMA_VERSION: i64 = 4;
/// The application id stamped in the database header (`PRAGMA application_id`): "dshD".
const APPLICATION_ID: i64 = 0x6473_6844;
/// The index directory under a home, and the database in it.
pub const INDEX_DIR: &str = "index";
/// The database file in [`INDEX_DIR`] (its WAL and shared-memory files sit beside it).
pub const DB_FILE: &str = "discovery.sqlite3";
const LOCK_FILE: &str = "rebuild.lock";
/// Conversation text is stored in chunks of about this many bytes (cut at message boundaries; a
/// longer message is its own chunk).
pub const CHUNK_BYTES: usize = 64 << 10;
/// FTS5 keeps this many bytes of a transaction's new terms in memory before it writes a
/// segment: fewer, larger segments are fewer merges during a build (the default is 1 MiB).
const HASH_BYTES: usize = 16 << 20;
/// The database's page size, set when the file is made.
const PAGE_BYTES: usize = 8 << 10;
/// The first prompt kept per session (bytes, cut at a character boundary).
const FIRST_PROMPT_BYTES: usize = 512;
/// How long a statement waits for another connection's write lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a search connection waits for a database another connection holds. In WAL mode a
/// reader waits only for a holder in exclusive locking mode (or a moment of recovery); a search
/// then answers from the listing instead ([`crate::discovery::Discovery::search`]) rather than
/// hold a keystroke for [`BUSY_TIMEOUT`].
pub const READER_BUSY_TIMEOUT: Duration = Duration::from_secs(1);
/// Sessions are read for this long before the batch is written in one transaction (writing
/// takes about twice as long as reading), so searches see progress about every second and
/// another process's indexer waits at most about that long for the write lock.
const COMMIT_EVERY: Duration = Duration::from_millis(400);
/// ...or until this much text is read (it is held in memory until its batch is written, and
/// FTS5 keeps a transaction's terms in memory until it commits).
const COMMIT_BYTES: u64 = 32 << 20;
/// A pass that finds no database and at least this many sessions builds the index as a fresh
/// file beside it and moves it into place when done (`Indexer::build_fresh`).
pub const FRESH_BUILD_SESSIONS: usize = 1_000;
/// The suffix of the file a fresh build writes beside its database (`discovery.sqlite3.fresh`).
const FRESH_SUFFIX: &str = ".fresh";

/// Why an indexing pass or a search failed. Callers fall back to the contract listing; the
/// index itself is rebuilt when the failure was a damaged or foreign database.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// SQLite refused a statement on the database (busy past [`BUSY_TIMEOUT`], damaged, or, for
    /// a search connection, of another schema version: an indexer has not rebuilt it yet).
    #[error("discovery index {path}: {source}")]
    Sql {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A file-system error: creating the index directory, taking the rebuild lock, removing a
    /// broken database, or starting the indexer's runtime.
    #[error("discovery index {path}: {source}")]
    Io {
        /// The file or directory the operation was on (the database for the runtime).
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The session store failed: listing the sessions, or a search task that did not finish
    /// (a session that cannot be read is recorded in the index, never an error of a pass).
    #[error("discovery index: {0}")]
    Store(#[from] crate::session::SessionError),
}

/// A result of the discovery index, failing with an [`IndexError`].
pub type Result<T> = std::result::Result<T, IndexError>;

/// Where the index of `home`'s own sessions lives (no other agent's sessions served).
pub fn db_path(home: &Path) -> PathBuf {
    home.join(INDEX_DIR).join(DB_FILE)
}

/// Where the index of `home` serving `external` (pairs of an agent's name and its home) lives.
///
/// An index is keyed by every home it holds rows of: the dsh home by its directory, the other
/// agents' homes by name in the file (`discovery-<hash>.sqlite3`, the hash of the sorted
/// `name=canonical home` pairs). So a process given Claude Code home B never opens the index
/// that a process given home A filled, and never shows, completes or reads A's rows; nor does
/// its indexer delete them as unlisted. With no external home it is [`db_path`].
pub fn db_path_for(home: &Path, external: &[(&str, &Path)]) -> PathBuf {
    if external.is_empty() {
        return db_path(home);
    }
    let mut keys: Vec<String> = external
        .iter()
        .map(|(name, dir)| {
            let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
            format!("{name}={}", dir.display())
        })
        .collect();
    keys.sort();
    keys.dedup();
    // FNV-1a over the joined keys: stable across builds and platforms (a name, not a defence).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in keys.join("\n").bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    home.join(INDEX_DIR)
        .join(format!("discovery-{hash:016x}.sqlite3"))
}

/// What one indexing pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassStats {
    /// Sessions listed.
    pub listed: usize,
    /// Sessions read and (re)indexed.
    pub indexed: usize,
    /// Of those, how many only appended chunks (a grown log).
    pub appended: usize,
    /// Sessions whose read failed (recorded with their header only).
    pub failed: usize,
    /// Rows removed for sessions no longer listed.
    pub removed: usize,
    /// Conversation bytes written to the full-text table.
    pub text_bytes: u64,
}

/// What a targeted refresh ([`Indexer::refresh_sessions`]) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targeted {
    /// `listed` counts the ids found in the last listing; the rest as in a pass.
    pub stats: PassStats,
    /// The ids asked for that the last listing did not hold: a full pass finds them.
    pub unknown: Vec<String>,
}

/// What the index knows of one session, as far as the indexer needs to decide: a 64-bit hash
/// of its stamp (the stamp text is 60-odd bytes; 100,000 of them cost tens of megabytes, the
/// hashes 800 kB). Two different stamps share a hash with a chance of 2⁻⁶⁴; the session is
/// then indexed at its next change instead of this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Known {
    /// The stamp's hash, never 0; 0 for a session indexed without a stamp (eight bytes a
    /// session instead of an `Option`'s sixteen).
    stamp: u64,
}

impl Known {
    fn of(stamp: Option<&str>) -> Known {
        Known {
            stamp: stamp.map_or(0, stamp_hash),
        }
    }

    /// Whether `stamp` (the log's stamp now) is the one indexed.
    fn is(&self, stamp: Option<&str>) -> bool {
        *self == Known::of(stamp)
    }

    /// Whether it was indexed with a stamp.
    fn stamped(&self) -> bool {
        self.stamp != 0
    }
}

/// The stamp's hash kept in [`Known`] (fixed keys: the same in every process and run).
fn stamp_hash(stamp: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    stamp.hash(&mut hasher);
    hasher.finish().max(1)
}

/// The key [`Indexer::known`] files a session id under: a 64-bit hash instead of the id's text
/// (100,000 ids cost 8 MB as boxed strings and their map). Two ids sharing a hash (a chance of
/// 2⁻⁶⁴ per pair) share one entry: one of them is indexed again on a pass where the other's
/// stamp is current, never left out of the index.
fn id_key(id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (0xd5u8, id).hash(&mut hasher);
    hasher.finish()
}

/// Keeps the index of one set of sessions up to date. Owns the write connection.
pub struct Indexer {
    path: PathBuf,
    conn: Option<Connection>,
    /// The (device, inode) of the database file `conn` has open: a file replaced by another
    /// process's rebuild is reopened.
    file: Option<(u64, u64)>,
    query: Arc<dyn SessionQuery>,
    stamper: Arc<dyn Stamper>,
    /// Which ids this indexer is responsible for: rows of other ids are left alone when they
    /// are not listed (another process may serve other sources into the same home).
    covers: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    /// What the database knows, by [`id_key`] of each session's id.
    known: HashMap<u64, Known>,
    data_version: Option<i64>,
    /// The last full pass's listing: the summaries a targeted refresh
    /// ([`Indexer::refresh_sessions`]) stamps and indexes without listing again.
    listing: Option<Arc<Vec<SessionSummary>>>,
    /// The fresh file being built, while a fresh build runs: `conn` writes it instead of `path`.
    building: Option<PathBuf>,
    /// How many sessions a pass that finds no database must list to build a fresh file
    /// ([`FRESH_BUILD_SESSIONS`]).
    fresh_from: usize,
    /// Drives the query's futures on the indexer's own thread; `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Indexer {
    fn drop(&mut self) {
        // The last handle may be dropped on an async worker (the TUI quitting), where a blocking
        // runtime shutdown panics; nothing of ours is left running on it.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Indexer {
    /// An indexer of the sessions `query` lists into the database at `path`, stamped by
    /// `stamper`; `covers` says which ids it is responsible for (an unlisted row of another id
    /// is kept). The database is opened (made, or rebuilt) by the first [`Indexer::refresh`];
    /// this fails only when the indexer's own single-thread runtime cannot be started.
    pub fn new(
        path: PathBuf,
        query: Arc<dyn SessionQuery>,
        stamper: Arc<dyn Stamper>,
        covers: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> std::io::Result<Indexer> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Indexer {
            path,
            conn: None,
            file: None,
            query,
            stamper,
            covers,
            known: HashMap::new(),
            data_version: None,
            listing: None,
            building: None,
            fresh_from: FRESH_BUILD_SESSIONS,
            runtime: Some(runtime),
        })
    }

    /// The database this indexer writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn block_on<T>(&self, future: impl std::future::Future<Output = T>) -> T {
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the indexer")
            .block_on(future)
    }

    /// Sets how many listed sessions a pass that finds no database needs to build a fresh file
    /// ([`FRESH_BUILD_SESSIONS`] unless set): tests reach the fresh build with a small home.
    #[doc(hidden)]
    pub fn with_fresh_build_from(mut self, sessions: usize) -> Indexer {
        self.fresh_from = sessions;
        self
    }

    fn connection(&mut self) -> Result<&Connection> {
        if let Some(fresh) = &self.building {
            return match &self.conn {
                Some(conn) => Ok(conn),
                None => Err(IndexError::Io {
                    path: fresh.clone(),
                    source: std::io::Error::other("the fresh build's connection is closed"),
                }),
            };
        }
        let now = entry_id(&self.path);
        if self.conn.is_some() && (now.is_none() || now != self.file) {
            // Deleted or replaced under us: our rows would go to a file nobody reads.
            self.conn = None;
            self.known.clear();
            self.data_version = None;
        }
        if self.conn.is_none() {
            self.conn = Some(open(&self.path)?);
            self.file = entry_id(&self.path);
        }
        Ok(self.conn.as_ref().expect("connection just opened"))
    }

    /// One pass: list the sessions, index every one whose stamp changed, drop rows of sessions
    /// that are gone. A damaged database found on the way is rebuilt on the next pass.
    pub fn refresh(&mut self) -> Result<PassStats> {
        match self.refresh_inner() {
            Err(IndexError::Sql { path, source }) if is_damage(&source) => {
                tracing::warn!(error = %source, "discovery index damaged; rebuilding");
                self.conn = None;
                self.known.clear();
                self.data_version = None;
                // What is at our paths is checked again first: a link put there since is set
                // aside, never removed through.
                let dir = path.parent().unwrap_or(Path::new("."));
                prepare_dir(dir)?;
                set_aside_foreign(&path)?;
                let lock = RebuildLock::take(&self.path.with_file_name(LOCK_FILE))?;
                // Rebuilt meanwhile by another process? Only a still-broken file is removed,
                // never one another process holds busy.
                match try_open(&path) {
                    Err(e) if !is_busy_error(&e) => remove_db(&path)?,
                    _ => {}
                }
                drop(lock);
                self.refresh_inner()
            }
            other => other,
        }
    }

    fn refresh_inner(&mut self) -> Result<PassStats> {
        let sessions = self.block_on(self.query.list_sessions())?;
        if sessions.len() >= self.fresh_from
            && matches!(std::fs::symlink_metadata(&self.path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        {
            if let Some(stats) = self.build_fresh(&sessions)? {
                self.listing = Some(sessions);
                return Ok(stats);
            }
        }
        self.load_known()?;
        let mut stats = PassStats {
            listed: sessions.len(),
            ..PassStats::default()
        };
        let mut stale = Vec::new();
        // Oldest first: rows written later are newer, and search reads the newest rows first.
        for summary in sessions.iter().rev() {
            let stamp = self.stamper.stamp(summary);
            match self.known.get(&id_key(summary.id())) {
                Some(known) if known.is(stamp.as_deref()) => continue,
                _ => stale.push((summary.clone(), stamp)),
            }
        }
        self.index_stale(stale, &mut stats)?;
        stats.removed = self.remove_unlisted(&sessions)?;
        self.data_version = Some(self.current_data_version()?);
        self.listing = Some(sessions);
        Ok(stats)
    }

    /// A targeted refresh: stamps only the sessions `ids` of the last full pass's listing and
    /// indexes those whose stamp changed, with the write path and transaction rules of a pass
    /// (a session that cannot be read is recorded). Nothing is listed and nothing removed: an
    /// id the last listing did not hold (a new session, or none has run yet) comes back in
    /// [`Targeted::unknown`] for a full pass to find, and a session whose log is gone is left to
    /// the next full pass. Errors, a damaged database included, are the caller's cue for one.
    pub fn refresh_sessions(&mut self, ids: &HashSet<String>) -> Result<Targeted> {
        let Some(listing) = self.listing.clone() else {
            return Ok(Targeted {
                stats: PassStats::default(),
                unknown: ids.iter().cloned().collect(),
            });
        };
        self.load_known()?;
        let mut found = HashSet::new();
        let mut stale = Vec::new();
        for summary in listing.iter().filter(|s| ids.contains(s.id())) {
            found.insert(summary.id());
            let Some(stamp) = self.stamper.stamp(summary) else {
                continue;
            };
            if !self
                .known
                .get(&id_key(summary.id()))
                .is_some_and(|k| k.stamped() && k.is(Some(&stamp)))
            {
                stale.push((summary, Some(stamp)));
            }
        }
        let mut stats = PassStats {
            listed: found.len(),
            ..PassStats::default()
        };
        let unknown = ids
            .iter()
            .filter(|id| !found.contains(id.as_str()))
            .cloned()
            .collect();
        if stale.is_empty() {
            return Ok(Targeted { stats, unknown });
        }
        let stale = stale
            .into_iter()
            .map(|(summary, stamp)| (summary.clone(), stamp))
            .collect();
        self.index_stale(stale, &mut stats)?;
        self.data_version = Some(self.current_data_version()?);
        Ok(Targeted { stats, unknown })
    }

    fn sql(&self, source: rusqlite::Error) -> IndexError {
        IndexError::Sql {
            path: self.path.clone(),
            source,
        }
    }

    fn current_data_version(&mut self) -> Result<i64> {
        let v = self
            .connection()?
            .query_row("PRAGMA data_version", [], |r| r.get(0));
        v.map_err(|e| self.sql(e))
    }

    /// Loads what the database knows, unless nothing changed since (ours or another process's
    /// commits both move `data_version` as seen from a fresh read).
    fn load_known(&mut self) -> Result<()> {
        let version = self.current_data_version()?;
        if self.data_version == Some(version) && !self.known.is_empty() {
            return Ok(());
        }
        let conn = self.connection()?;
        let mut known = HashMap::new();
        let rows: rusqlite::Result<()> = (|| {
            let mut stmt = conn.prepare("SELECT id, stamp FROM sessions")?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                // Borrowed from the row: no copy of 100,000 ids and stamps.
                let id = row.get_ref(0)?.as_str()?;
                let stamp = row.get_ref(1)?.as_str_or_null()?;
                known.insert(id_key(id), Known::of(stamp));
            }
            Ok(())
        })();
        rows.map_err(|e| self.sql(e))?;
        self.known = known;
        self.data_version = Some(version);
        Ok(())
    }

    fn remove_unlisted(&mut self, sessions: &[SessionSummary]) -> Result<usize> {
        // Listed ids are unique: when as many of them are known as the database holds, no row
        // is unlisted (and no set of 100,000 keys is built to find out).
        let known_listed = sessions
            .iter()
            .filter(|s| self.known.contains_key(&id_key(s.id())))
            .count();
        if known_listed == self.known.len() {
            return Ok(0);
        }
        let listed: HashSet<u64> = sessions.iter().map(|s| id_key(s.id())).collect();
        // Some rows are not listed: their ids are read from the database (rows of ids this
        // indexer does not cover are left alone).
        let covers = self.covers.clone();
        let conn = self.connection()?;
        let unlisted: rusqlite::Result<Vec<String>> = (|| {
            let mut stmt = conn.prepare("SELECT id FROM sessions")?;
            let mut rows = stmt.query([])?;
            let mut gone = Vec::new();
            while let Some(row) = rows.next()? {
                let id = row.get_ref(0)?.as_str()?;
                if !listed.contains(&id_key(id)) && covers(id) {
                    gone.push(id.to_string());
                }
            }
            Ok(gone)
        })();
        let gone = unlisted.map_err(|e| self.sql(e))?;
        if gone.is_empty() {
            return Ok(0);
        }
        let conn = self.connection()?;
        let result: rusqlite::Result<()> = (|| {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            for id in &gone {
                delete_session(conn, id)?;
            }
            conn.execute_batch("COMMIT")
        })();
        if let Err(e) = result {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(self.sql(e));
        }
        for id in &gone {
            self.known.remove(&id_key(id));
        }
        Ok(gone.len())
    }

    /// Indexes `stale` sessions in order. Logs are read outside any transaction, a batch at a
    /// time (until [`COMMIT_EVERY`] has passed or [`COMMIT_BYTES`] of text are read), and each
    /// batch is written in one short write transaction: another process's indexer waits for our
    /// writes only, never for our reads, and searches see progress batch by batch.
    fn index_stale(
        &mut self,
        stale: Vec<(SessionSummary, Option<String>)>,
        stats: &mut PassStats,
    ) -> Result<()> {
        let mut batch = Vec::new();
        let mut batch_bytes = 0u64;
        let mut started = Instant::now();
        for (summary, stamp) in stale {
            let read = self.read_one(&summary);
            batch_bytes += read.as_ref().map_or(0, Read::text_bytes);
            batch.push((summary, stamp, read));
            if started.elapsed() >= COMMIT_EVERY || batch_bytes >= COMMIT_BYTES {
                self.write_batch(std::mem::take(&mut batch), stats)?;
                batch_bytes = 0;
                started = Instant::now();
            }
        }
        self.write_batch(batch, stats)
    }

    /// Reads and projects one session (no database access): the row and items to write, or
    /// why the store could not read it.
    fn read_one(&self, summary: &SessionSummary) -> std::result::Result<Read, SessionError> {
        let id = summary.id().to_string();
        // On this thread when the backend can (no async hand-off per read), else through it.
        let (snapshot, title) = match self.query.read_for_index_blocking(&id) {
            Some(read) => read?,
            None => {
                let snapshot = self.block_on(self.query.read_conversation_surface(&id))?;
                let title = match self.block_on(self.query.read_title(&id)) {
                    Ok(title) => title,
                    Err(e) => {
                        tracing::warn!(session = %id, error = %e, "title unreadable; indexed without it");
                        None
                    }
                };
                (snapshot, title)
            }
        };
        let last_event = snapshot.events.iter().map(|e| e.time).max();
        let labels = first_prompt_labels(&snapshot);
        let (_, _, items) = project_owned(snapshot);
        let doc = SessionMeta::of(summary, title, last_event, &items, &labels);
        Ok(Read { doc, items })
    }

    /// Writes a batch of read sessions in one write transaction: each read one's row and text,
    /// each unreadable one's failure; an SQL error rolls the whole batch back (and forgets what
    /// is known, so the next pass re-reads from the database).
    fn write_batch(&mut self, batch: Vec<Batched>, stats: &mut PassStats) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        // The file is checked once per batch (`connection` stats it), not per statement.
        let conn = self.connection()?;
        let written: rusqlite::Result<Vec<(String, Option<String>)>> = (|| {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            let mut written = Vec::with_capacity(batch.len());
            for (summary, stamp, read) in batch {
                let done = match read {
                    Ok(read) => write_session(conn, &read.doc, stamp.clone(), &read.items).map(
                        |Outcome { appended, bytes }| {
                            stats.indexed += 1;
                            stats.appended += usize::from(appended);
                            stats.text_bytes += bytes;
                        },
                    ),
                    Err(e) => {
                        stats.failed += 1;
                        tracing::warn!(session = summary.id(), error = %e, "not indexed");
                        record_failure(conn, &summary, stamp.clone(), &e.to_string())
                    }
                };
                if let Err(e) = done {
                    let _ = conn.execute_batch("ROLLBACK");
                    return Err(e);
                }
                written.push((summary.id().to_string(), stamp));
            }
            if let Err(e) = conn.execute_batch("COMMIT") {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e);
            }
            Ok(written)
        })();
        match written {
            Ok(written) => {
                for (id, stamp) in written {
                    self.known.insert(id_key(&id), Known::of(stamp.as_deref()));
                }
                Ok(())
            }
            Err(source) => {
                self.known.clear();
                Err(IndexError::Sql { path, source })
            }
        }
    }
}

/// One session read for the index: its row and its projected items.
struct Read {
    doc: SessionMeta,
    items: Vec<ConversationItem>,
}

impl Read {
    fn text_bytes(&self) -> u64 {
        self.doc.conversation_bytes
    }
}

/// A session of a batch: its summary, the stamp it was read at, and what reading it gave.
type Batched = (
    SessionSummary,
    Option<String>,
    std::result::Result<Read, SessionError>,
);
