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
//! ([`super::terms`]) rather than its text: the same tokens, a third of the lookups and
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
//! Proof: `tests/discovery/index.rs` (build, incremental growth, compaction, damaged and foreign
//! databases, two connections and a second process, the write lock free during a read, external
//! sessions, the fresh first build and a database made during it), `tests/discovery/cache.rs` (symlinks, directories, FIFOs at its paths, a database
//! held under `BEGIN EXCLUSIVE`), `tests/discovery/watch.rs`
//! (targeted refreshes under the background indexer); the chunking and the
//! hash chain are unit-tested below.

use super::terms::index_terms;
use crate::reference::projection::{project_owned, ConversationItem, Role};
use crate::session::external::{self, ExternalSessions};
use crate::session::title::{own_words, own_words_of_title, reference_labels};
use crate::session::{DiskStore, SessionError, SessionQuery, SessionSummary};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
/// file beside it and moves it into place when done ([`Indexer::build_fresh`]).
pub const FRESH_BUILD_SESSIONS: usize = 1_000;
/// The file a fresh build writes, beside [`DB_FILE`].
const FRESH_FILE: &str = "discovery.sqlite3.fresh";

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

/// Where the index of `home` lives.
pub fn db_path(home: &Path) -> PathBuf {
    home.join(INDEX_DIR).join(DB_FILE)
}

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
fn locked_inodes() -> std::collections::HashSet<u64> {
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

/// Opens (creating, or rebuilding when broken or foreign) the index database at `path`.
///
/// What sits at our paths is checked first, without following symlinks
/// ([`set_aside_foreign`]): a symlink, or anything but a directory at the index directory or a
/// regular file at the database (and its `-wal`, `-shm`, `-journal` files), is renamed aside and
/// a new index made, so nothing is ever written through a link to a file outside the home. The
/// database is then opened with `SQLITE_OPEN_NOFOLLOW` (a link made after the check is refused,
/// not followed). A database another process holds busy is an error ([`is_busy`]), never a
/// reason to rebuild: only a damaged or foreign one is removed, under the rebuild lock.
pub fn open(path: &Path) -> Result<Connection> {
    let dir = path.parent().unwrap_or(Path::new("."));
    prepare_dir(dir)?;
    set_aside_foreign(path)?;
    // A database is made under the rebuild lock, so it never appears while another process's
    // fresh build ([`Indexer::build_fresh`]) is about to move its file into place.
    let making = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some(RebuildLock::take(&dir.join(LOCK_FILE))?)
        }
        _ => None,
    };
    match try_open(path) {
        Ok(conn) => Ok(conn),
        Err(first) if is_busy_error(&first) => Err(first),
        Err(first) => {
            tracing::warn!(error = %first, "discovery index unusable; rebuilding it");
            let _lock = match making {
                Some(lock) => lock,
                None => RebuildLock::take(&dir.join(LOCK_FILE))?,
            };
            // Another process may have rebuilt it while we waited for the lock.
            match try_open(path) {
                Ok(conn) => return Ok(conn),
                Err(again) if is_busy_error(&again) => return Err(again),
                Err(_) => {}
            }
            remove_db(path)?;
            try_open(path)
        }
    }
}

/// Whether `error` says another connection holds the database (busy or locked past the busy
/// timeout): the database may be perfectly good, and is never removed for it.
pub fn is_busy_error(error: &IndexError) -> bool {
    matches!(error, IndexError::Sql { source, .. } if is_busy(source))
}

/// Whether SQLite answered busy or locked.
pub fn is_busy(error: &rusqlite::Error) -> bool {
    use rusqlite::ffi::ErrorCode;
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// The flags every index connection opens with: never through a symlink.
fn open_flags(read_only: bool) -> OpenFlags {
    let access = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
    };
    access | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW
}

/// The path SQLite is given for the database at `path` (`<home>/index/<file>`): the home's own
/// path with its symlinks resolved (a home may well live under a link, `/tmp` on macOS is one,
/// and `SQLITE_OPEN_NOFOLLOW` refuses a link anywhere in the path), then `index/` and the file
/// as they are, so a link at either of those, ours, is still refused.
fn resolved(path: &Path) -> PathBuf {
    let (Some(dir), Some(file)) = (path.parent(), path.file_name()) else {
        return path.to_path_buf();
    };
    let (Some(home), Some(index)) = (dir.parent(), dir.file_name()) else {
        return path.to_path_buf();
    };
    let home = if home.as_os_str().is_empty() {
        Path::new(".")
    } else {
        home
    };
    match std::fs::canonicalize(home) {
        Ok(home) => home.join(index).join(file),
        Err(_) => path.to_path_buf(),
    }
}

/// Makes the index directory `dir`, first setting aside a symlink or a non-directory there.
fn prepare_dir(dir: &Path) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| IndexError::Io { path, source }
    };
    if let Ok(meta) = std::fs::symlink_metadata(dir) {
        if !meta.is_dir() {
            set_aside(dir, &meta)?;
        }
    }
    std::fs::create_dir_all(dir).map_err(io(dir))
}

/// Renames whatever is at `path` aside when it is not a regular file (a symlink, a directory, a
/// FIFO…), and the database's `-wal`, `-shm` and `-journal` files likewise: SQLite would follow
/// a link at any of them and write where it leads. A renamed symlink still leads where it did;
/// the file it named is never opened or changed.
pub fn set_aside_foreign(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        if let Ok(meta) = std::fs::symlink_metadata(&file) {
            if !meta.is_file() {
                set_aside(&file, &meta)?;
            }
        }
    }
    Ok(())
}

/// Renames `path` to `<path>.foreign-<epoch ms>` and says so in the diagnostics.
fn set_aside(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut aside = PathBuf::from(format!("{}.foreign-{stamp}", path.display()));
    let mut n = 0;
    while std::fs::symlink_metadata(&aside).is_ok() {
        n += 1;
        aside = PathBuf::from(format!("{}.foreign-{stamp}-{n}", path.display()));
    }
    let kind = if meta.file_type().is_symlink() {
        "a symbolic link"
    } else if meta.is_dir() {
        "a directory"
    } else if meta.is_file() {
        "a file"
    } else {
        "not a regular file"
    };
    tracing::warn!(
        path = %path.display(),
        aside = %aside.display(),
        kind,
        "discovery index: not ours, set aside; a new index is built"
    );
    std::fs::rename(path, &aside).map_err(|source| IndexError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Opens `path` as a read-only search connection (no schema changes, never through a
/// symlink).
pub fn open_reader(path: &Path) -> Result<Connection> {
    let sql = |source| IndexError::Sql {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open_with_flags(resolved(path), open_flags(true)).map_err(sql)?;
    conn.busy_timeout(READER_BUSY_TIMEOUT).map_err(sql)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    if version != SCHEMA_VERSION {
        return Err(sql(rusqlite::Error::InvalidQuery));
    }
    Ok(conn)
}

fn try_open(path: &Path) -> Result<Connection> {
    let sql = |source| IndexError::Sql {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open_with_flags(resolved(path), open_flags(false)).map_err(sql)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
    // Before anything is written (a no-op on an existing file): 8 KiB pages hold a chunk's
    // text and FTS5's 4 KB leaves with less overflow than the default 4 KiB (a 100,000-session
    // build: about 9 % less CPU and 6 % less disk).
    conn.execute_batch(&format!("PRAGMA page_size = {PAGE_BYTES}"))
        .map_err(sql)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(sql)?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "discovery index is not in WAL mode");
    }
    // A cache may lose its last commits on a power cut (never its consistency); bigger pages
    // and cache, fewer checkpoints: the index is written in bulk.
    conn.execute_batch(
        "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-32768; PRAGMA wal_autocheckpoint=8192",
    )
    .map_err(sql)?;
    let (version, app): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), \
             (SELECT application_id FROM pragma_application_id)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sql)?;
    if version == SCHEMA_VERSION && app == APPLICATION_ID {
        // Touch both tables: a damaged schema fails here, not in the middle of a search.
        conn.query_row("SELECT count(*) FROM sessions", [], |_| Ok(()))
            .map_err(sql)?;
        conn.query_row("SELECT count(*) FROM doc WHERE rowid = 0", [], |_| Ok(()))
            .map_err(sql)?;
        conn.query_row("SELECT count(*) FROM owner WHERE row = 0", [], |_| Ok(()))
            .map_err(sql)?;
        conn.query_row("SELECT count(*) FROM chunk WHERE row = 0", [], |_| Ok(()))
            .map_err(sql)?;
        return Ok(conn);
    }
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(sql)?;
    if version != 0 || app != 0 || tables != 0 {
        return Err(sql(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISMATCH),
            Some(format!(
                "schema version {version} (application id {app:#x}), expected {SCHEMA_VERSION}"
            )),
        )));
    }
    create_schema(&conn).map_err(sql)?;
    Ok(conn)
}

/// Opens the fresh file of a first build ([`Indexer::build_fresh`]) and makes the schema: no
/// journal and no syncs (the file is used only once it is complete and synced), 8 KiB pages.
fn open_fresh(path: &Path) -> Result<Connection> {
    let sql = |source| IndexError::Sql {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open_with_flags(resolved(path), open_flags(false)).map_err(sql)?;
    conn.execute_batch(&format!(
        "PRAGMA page_size = {PAGE_BYTES}; PRAGMA synchronous = OFF; PRAGMA cache_size = -32768"
    ))
    .map_err(sql)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = OFF", [], |r| r.get(0))
        .map_err(sql)?;
    if !mode.eq_ignore_ascii_case("off") {
        tracing::warn!(mode, "discovery index: the fresh build keeps a journal");
    }
    create_schema(&conn).map_err(sql)?;
    Ok(conn)
}

/// The last step of a fresh build before its file is closed: WAL mode, as every connection to
/// the published database expects.
fn finish_fresh(conn: &Connection) -> rusqlite::Result<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "discovery index is not in WAL mode");
    }
    Ok(())
}

/// Moves the complete, closed fresh file to `path`, where no database is (checked under the
/// rebuild lock): synced first, then linked without replacing anything. A `-wal`, `-shm` or
/// `-journal` file left at `path` by a database that is gone is removed first (SQLite would
/// replay a stray WAL into the new file). `false` when a database appeared at `path` anyway:
/// ours is removed and theirs kept.
fn publish_fresh(fresh: &Path, path: &Path) -> Result<bool> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| IndexError::Io { path, source }
    };
    std::fs::File::open(fresh)
        .and_then(|file| file.sync_all())
        .map_err(io(fresh))?;
    set_aside_foreign(path)?;
    for suffix in ["-wal", "-shm", "-journal"] {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(IndexError::Io { path: file, source }),
        }
    }
    match std::fs::hard_link(fresh, path) {
        Ok(()) => {
            std::fs::remove_file(fresh).map_err(io(fresh))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            remove_db(fresh)?;
            Ok(false)
        }
        // No hard links here: a rename (the lock is held and no database was there).
        Err(_) => std::fs::rename(fresh, path)
            .map_err(io(path))
            .map(|()| true),
    }
}

fn create_schema(conn: &Connection) -> rusqlite::Result<()> {
    // IMMEDIATE: a second process creating it at the same moment waits, then sees it made.
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let made: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if made == SCHEMA_VERSION {
        return conn.execute_batch("COMMIT");
    }
    let result = conn.execute_batch(&format!(
        "CREATE TABLE sessions(
            id TEXT PRIMARY KEY NOT NULL,
            title TEXT,
            cwd TEXT,
            created_at INTEGER NOT NULL,
            last_activity INTEGER NOT NULL,
            messages INTEGER NOT NULL,
            conversation_bytes INTEGER NOT NULL,
            first_prompt TEXT,
            source TEXT,
            stamp TEXT,
            items INTEGER NOT NULL,
            chain INTEGER NOT NULL,
            tail_chunk INTEGER,
            tail_items INTEGER NOT NULL,
            error TEXT
        );
        CREATE VIRTUAL TABLE doc USING fts5(
            terms,
            tokenize = 'unicode61 remove_diacritics 2',
            content = '',
            contentless_delete = 1
        );
        INSERT INTO doc(doc, rank) VALUES('hashsize', {HASH_BYTES});
        CREATE TABLE owner(
            row INTEGER PRIMARY KEY,
            sid INTEGER NOT NULL,
            kind INTEGER NOT NULL
        );
        CREATE INDEX owner_sid ON owner(sid, kind);
        CREATE TABLE chunk(
            row INTEGER PRIMARY KEY,
            body TEXT NOT NULL
        );
        PRAGMA user_version = {SCHEMA_VERSION};
        PRAGMA application_id = {APPLICATION_ID};"
    ));
    match result {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

fn remove_db(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(IndexError::Io { path: file, source }),
        }
    }
    Ok(())
}

/// An exclusive advisory lock on a file, held while the database is rebuilt.
struct RebuildLock {
    _file: std::fs::File,
}

impl RebuildLock {
    fn take(path: &Path) -> Result<RebuildLock> {
        use crate::session::files::{open_regular, Symlinks};
        let open = || {
            open_regular(
                path,
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true),
                Symlinks::Refuse,
            )
        };
        // A symlink or a FIFO at the lock's path is not ours: set aside, never followed.
        let file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                if let Ok(meta) = std::fs::symlink_metadata(path) {
                    set_aside(path, &meta)?;
                }
                open()
            }
            other => other,
        }
        .map_err(|source| IndexError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        // An exclusive advisory lock (`flock` on Unix), released when the file is closed.
        file.lock().map_err(|source| IndexError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(RebuildLock { _file: file })
    }
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

/// What the index knows of one session, as far as the indexer needs to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Known {
    stamp: Option<String>,
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
    known: HashMap<String, Known>,
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
            match self.known.get(summary.id()) {
                Some(known) if known.stamp.is_some() && known.stamp == stamp => continue,
                Some(known) if stamp.is_none() && known.stamp.is_none() => continue,
                _ => stale.push((summary.clone(), stamp)),
            }
        }
        self.index_stale(stale, &mut stats)?;
        stats.removed = self.remove_unlisted(&sessions)?;
        self.data_version = Some(self.current_data_version()?);
        self.listing = Some(sessions);
        Ok(stats)
    }

    /// A first build (no database at the index's path) of a home of at least
    /// [`FRESH_BUILD_SESSIONS`] sessions, written to a fresh file beside the database without a
    /// journal, then moved into place. `None` when a database appeared before the rebuild lock
    /// was held: the pass then goes on as usual.
    ///
    /// In WAL mode every page is written twice, to the WAL and again when it is checkpointed
    /// into the database; at 100,000 sessions and 1 GB of conversation that second write and its
    /// bookkeeping were a quarter of the build's CPU. A file nobody else reads needs neither the
    /// WAL nor a rollback journal: a failed build's file is removed, and a crash leaves only
    /// [`FRESH_FILE`], which the next fresh build removes unread. The rebuild lock is held
    /// throughout and a database is made only under it ([`open`]), so no other process of ours
    /// makes one meanwhile. The file is switched to WAL mode and synced before it is linked into
    /// place, and linking never replaces a file (a database that appeared anyway is kept, and
    /// ours dropped). Searches meanwhile answer from the listing, as before any index exists.
    fn build_fresh(&mut self, sessions: &Arc<Vec<SessionSummary>>) -> Result<Option<PassStats>> {
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        prepare_dir(&dir)?;
        let lock = RebuildLock::take(&dir.join(LOCK_FILE))?;
        if std::fs::symlink_metadata(&self.path).is_ok() {
            return Ok(None);
        }
        let fresh = dir.join(FRESH_FILE);
        set_aside_foreign(&fresh)?;
        remove_db(&fresh)?;
        self.conn = Some(open_fresh(&fresh)?);
        self.file = None;
        self.building = Some(fresh.clone());
        self.known.clear();
        self.data_version = None;
        let mut stats = PassStats {
            listed: sessions.len(),
            ..PassStats::default()
        };
        // Oldest first, as in any pass: search reads the newest rows first.
        let stale = sessions
            .iter()
            .rev()
            .map(|summary| (summary.clone(), self.stamper.stamp(summary)))
            .collect();
        let mut built = self.index_stale(stale, &mut stats);
        if built.is_ok() {
            built = finish_fresh(self.conn.as_ref().expect("the fresh build's connection"))
                .map_err(|source| IndexError::Sql {
                    path: fresh.clone(),
                    source,
                });
        }
        self.building = None;
        if let Some(conn) = self.conn.take() {
            if let Err((_, source)) = conn.close() {
                built = built.and(Err(IndexError::Sql {
                    path: fresh.clone(),
                    source,
                }));
            }
        }
        let published = built.and_then(|()| publish_fresh(&fresh, &self.path));
        drop(lock);
        match published {
            Ok(true) => {
                self.data_version = Some(self.current_data_version()?);
                Ok(Some(stats))
            }
            Ok(false) => {
                self.known.clear();
                Ok(None)
            }
            Err(e) => {
                self.known.clear();
                let _ = remove_db(&fresh);
                Err(e)
            }
        }
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
            if self.known.get(summary.id()).and_then(|k| k.stamp.as_ref()) != Some(&stamp) {
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
                known.insert(row.get::<_, String>(0)?, Known { stamp: row.get(1)? });
            }
            Ok(())
        })();
        rows.map_err(|e| self.sql(e))?;
        self.known = known;
        self.data_version = Some(version);
        Ok(())
    }

    fn remove_unlisted(&mut self, sessions: &[SessionSummary]) -> Result<usize> {
        let listed: std::collections::HashSet<&str> = sessions.iter().map(|s| s.id()).collect();
        let gone: Vec<String> = self
            .known
            .keys()
            .filter(|id| !listed.contains(id.as_str()) && (self.covers)(id))
            .cloned()
            .collect();
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
            self.known.remove(id);
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
        let doc = SessionDoc::of(summary, title, last_event, &items, &labels);
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
                    self.known.insert(id, Known { stamp });
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
    doc: SessionDoc,
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

/// Records a session the store could not read: its header fields and `error`, no text (it is
/// read again once its stamp changes).
fn record_failure(
    conn: &Connection,
    summary: &SessionSummary,
    stamp: Option<String>,
    error: &str,
) -> rusqlite::Result<()> {
    delete_session(conn, summary.id())?;
    conn.execute(
        "INSERT INTO sessions(id, title, cwd, created_at, last_activity, messages,
            conversation_bytes, first_prompt, source, stamp, items, chain, tail_chunk,
            tail_items, error)
         VALUES (?1, NULL, ?2, ?3, ?3, 0, 0, NULL, ?4, ?5, 0, 0, NULL, 0, ?6)",
        params![
            summary.id(),
            summary.cwd(),
            summary.created_at(),
            external::source_of(&summary.header).map(|a| a.name()),
            stamp,
            error
        ],
    )
    .map(drop)
}

/// Whether an SQLite error means the file itself is damaged (rebuild) rather than busy.
fn is_damage(error: &rusqlite::Error) -> bool {
    use rusqlite::ffi::ErrorCode;
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase | ErrorCode::SchemaChanged)
    ) || matches!(error, rusqlite::Error::SqliteFailure(e, _) if e.extended_code == rusqlite::ffi::SQLITE_MISMATCH)
}

/// The (device, inode) of `path`, to notice a database replaced by a rebuild.
pub(crate) fn file_id(path: &Path) -> Option<(u64, u64)> {
    id_of(std::fs::metadata(path).ok()?)
}

/// The (device, inode) of what is at `path` itself: a symlink put in the database's place is
/// another file, never the one it leads to.
pub(crate) fn entry_id(path: &Path) -> Option<(u64, u64)> {
    id_of(std::fs::symlink_metadata(path).ok()?)
}

fn id_of(meta: std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        Some((0, 0))
    }
}

struct Outcome {
    appended: bool,
    bytes: u64,
}

/// The per-session fields of the index (one row of `sessions`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionDoc {
    /// The whole session id (`claude:<uuid>` / `codex:<uuid>` for other agents' sessions).
    pub id: String,
    /// The session's current title; `None` when it has none or it could not be read.
    pub title: Option<String>,
    /// The working directory of the session header; `None` when the header has none.
    pub cwd: Option<String>,
    /// Creation time from the header, epoch milliseconds.
    pub created_at: i64,
    /// The time of the latest event, epoch milliseconds; never before `created_at`.
    pub last_activity: i64,
    /// Projected conversation items (SPEC §3.5), checkpoints included.
    pub messages: u64,
    /// UTF-8 bytes of the projected items' text, summed.
    pub conversation_bytes: u64,
    /// The first direct user prompt (not a checkpoint), trimmed and cut to at most 512 bytes.
    pub first_prompt: Option<String>,
    /// The other agent it came from (`claude`, `codex`); `None` for a dsh session.
    pub source: Option<&'static str>,
}

impl SessionDoc {
    fn of(
        summary: &SessionSummary,
        title: Option<String>,
        last_event: Option<i64>,
        items: &[ConversationItem],
        labels: &[String],
    ) -> SessionDoc {
        // The person's own words: the labels of the sessions it referenced taken out.
        let first_prompt = items
            .iter()
            .find(|i| i.role == Role::User && !i.checkpoint)
            .map(|i| own_words(&i.text, labels))
            .filter(|t| !t.is_empty())
            .map(|t| clip_bytes(&t, FIRST_PROMPT_BYTES).to_string());
        SessionDoc {
            id: summary.id().to_string(),
            title,
            cwd: summary.cwd().map(str::to_string),
            created_at: summary.created_at(),
            last_activity: last_event.unwrap_or(0).max(summary.created_at()),
            messages: items.len() as u64,
            conversation_bytes: items.iter().map(|i| i.text.len() as u64).sum(),
            first_prompt,
            source: external::source_of(&summary.header).map(|a| a.name()),
        }
    }
}

/// The labels of the session references made before the session's first direct prompt (the
/// contexts of that prompt), from a conversation surface.
fn first_prompt_labels(snapshot: &crate::session::SurfaceSnapshot) -> Vec<String> {
    let mut contexts = Vec::new();
    for event in &snapshot.events {
        if event.kind != crate::session::format::USER_MESSAGE {
            continue;
        }
        let Ok(Some(message)) = event.message(&snapshot.session.id) else {
            continue;
        };
        if message.source.is_direct_user() {
            break;
        }
        contexts.push(message);
    }
    reference_labels(&contexts)
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn clip_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A hash chain over projected items: `chain(items[..n])` identifies that prefix.
pub fn chain(items: &[ConversationItem]) -> Vec<i64> {
    use std::hash::{Hash, Hasher};
    let mut out = Vec::with_capacity(items.len());
    let mut h: u64 = 0;
    for item in items {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        h.hash(&mut hasher);
        item.role.as_str().hash(&mut hasher);
        item.checkpoint.hash(&mut hasher);
        item.text.hash(&mut hasher);
        h = hasher.finish();
        out.push(h as i64);
    }
    out
}

/// Groups items `[from..]` into chunks of about [`CHUNK_BYTES`]: (first item, end item) pairs.
pub fn chunk_ranges(items: &[ConversationItem], from: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = from;
    let mut bytes = 0usize;
    for (i, item) in items.iter().enumerate().skip(from) {
        let len = item.text.len() + 1;
        if i > start && bytes + len > CHUNK_BYTES {
            out.push((start, i));
            start = i;
            bytes = 0;
        }
        bytes += len;
    }
    if start < items.len() {
        out.push((start, items.len()));
    }
    out
}

fn chunk_text(items: &[ConversationItem]) -> String {
    let mut text = String::with_capacity(items.iter().map(|i| i.text.len() + 1).sum());
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            text.push('\n');
        }
        text.push_str(&item.text);
    }
    text
}

/// Deletes the full-text rows of session `sid` (of one `kind` only, when given).
fn delete_rows(conn: &Connection, sid: i64, kind: Option<i64>) -> rusqlite::Result<()> {
    match kind {
        Some(kind) => {
            conn.prepare_cached(
                "DELETE FROM doc WHERE rowid IN (SELECT row FROM owner WHERE sid = ?1 AND kind = ?2)",
            )?
            .execute([sid, kind])?;
            conn.prepare_cached(
                "DELETE FROM chunk WHERE row IN (SELECT row FROM owner WHERE sid = ?1 AND kind = ?2)",
            )?
            .execute([sid, kind])?;
            conn.prepare_cached("DELETE FROM owner WHERE sid = ?1 AND kind = ?2")?
                .execute([sid, kind])?;
        }
        None => {
            conn.prepare_cached(
                "DELETE FROM doc WHERE rowid IN (SELECT row FROM owner WHERE sid = ?1)",
            )?
            .execute([sid])?;
            conn.prepare_cached(
                "DELETE FROM chunk WHERE row IN (SELECT row FROM owner WHERE sid = ?1)",
            )?
            .execute([sid])?;
            conn.prepare_cached("DELETE FROM owner WHERE sid = ?1")?
                .execute([sid])?;
        }
    }
    Ok(())
}

fn delete_session(conn: &Connection, id: &str) -> rusqlite::Result<()> {
    let rowid: Option<i64> = conn
        .query_row("SELECT rowid FROM sessions WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?;
    if let Some(rowid) = rowid {
        delete_rows(conn, rowid, None)?;
        conn.execute("DELETE FROM sessions WHERE rowid = ?1", [rowid])?;
    }
    Ok(())
}

/// What a session's row says about its indexed text: rowid, items, chain, tail chunk, items in
/// the tail chunk, title.
type Indexed = (i64, i64, i64, Option<i64>, i64, Option<String>);

/// Writes one session's row and text: appends when the indexed items are a prefix of `items`,
/// else replaces them.
fn write_session(
    conn: &Connection,
    doc: &SessionDoc,
    stamp: Option<String>,
    items: &[ConversationItem],
) -> rusqlite::Result<Outcome> {
    let chains = chain(items);
    let total_chain = chains.last().copied().unwrap_or(0);
    let old: Option<Indexed> = conn
        .prepare_cached(
            "SELECT rowid, items, chain, tail_chunk, tail_items, title FROM sessions WHERE id = ?1",
        )?
        .query_row([&doc.id], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .optional()?;
    // Where writing starts: after the indexed prefix if it is still a prefix (minus the last,
    // partial chunk, rewritten with the new items), else from scratch.
    let (rowid, from, appended) = match old {
        Some((rowid, n, old_chain, tail_chunk, tail_items, _))
            if n > 0
                && (n as usize) <= items.len()
                && chains[n as usize - 1] == old_chain
                && tail_chunk.is_some() =>
        {
            let tail = tail_chunk.expect("checked");
            conn.prepare_cached("DELETE FROM doc WHERE rowid = ?1")?
                .execute([tail])?;
            conn.prepare_cached("DELETE FROM chunk WHERE row = ?1")?
                .execute([tail])?;
            conn.prepare_cached("DELETE FROM owner WHERE row = ?1")?
                .execute([tail])?;
            delete_rows(conn, rowid, Some(0))?;
            (rowid, (n - tail_items) as usize, true)
        }
        Some((rowid, _, _, _, _, _)) => {
            delete_rows(conn, rowid, None)?;
            (rowid, 0, false)
        }
        None => {
            conn.prepare_cached(
                "INSERT INTO sessions(id, created_at, last_activity, messages, conversation_bytes,
                    items, chain, tail_items) VALUES (?1, 0, 0, 0, 0, 0, 0, 0)",
            )?
            .execute([&doc.id])?;
            (conn.last_insert_rowid(), 0, false)
        }
    };
    let mut bytes = 0u64;
    let mut tail = None;
    let mut insert_chunk = conn.prepare_cached("INSERT INTO chunk(body) VALUES (?1)")?;
    let mut insert_doc = conn.prepare_cached("INSERT INTO doc(rowid, terms) VALUES (?1, ?2)")?;
    let mut insert_owner =
        conn.prepare_cached("INSERT INTO owner(row, sid, kind) VALUES (?1, ?2, ?3)")?;
    let mut insert = |kind: i64, body: &str| -> rusqlite::Result<i64> {
        insert_chunk.execute([body])?;
        let row = conn.last_insert_rowid();
        insert_doc.execute(params![row, index_terms(body)])?;
        insert_owner.execute(params![row, rowid, kind])?;
        Ok(row)
    };
    // The title's own words only: a session matching only through a label it referenced ranks
    // below the session it references.
    let heading = [
        doc.title.as_deref().map(own_words_of_title),
        doc.first_prompt.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("\n");
    insert(0, &heading)?;
    for (start, end) in chunk_ranges(items, from) {
        let text = chunk_text(&items[start..end]);
        bytes += text.len() as u64;
        let row = insert(1, &text)?;
        tail = Some((row, (end - start) as i64));
    }
    let (tail_chunk, tail_items) = tail.map_or((None, 0), |(row, n)| (Some(row), n));
    conn.prepare_cached(
        "UPDATE sessions SET title = ?2, cwd = ?3, created_at = ?4, last_activity = ?5,
            messages = ?6, conversation_bytes = ?7, first_prompt = ?8, source = ?9, stamp = ?10,
            items = ?11, chain = ?12, tail_chunk = ?13, tail_items = ?14, error = NULL
         WHERE rowid = ?1",
    )?
    .execute(params![
        rowid,
        doc.title,
        doc.cwd,
        doc.created_at,
        doc.last_activity,
        doc.messages as i64,
        doc.conversation_bytes as i64,
        doc.first_prompt,
        doc.source,
        stamp,
        items.len() as i64,
        total_chain,
        tail_chunk,
        tail_items,
    ])?;
    Ok(Outcome { appended, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(text: &str) -> ConversationItem {
        ConversationItem {
            role: Role::User,
            text: text.to_string(),
            checkpoint: false,
        }
    }

    #[test]
    fn chunks_cut_at_message_boundaries_and_cover_everything() {
        let big = "x".repeat(CHUNK_BYTES - 10);
        let items = vec![
            item("a"),
            item(&big),
            item("b"),
            item(&"y".repeat(CHUNK_BYTES * 2)),
            item("c"),
        ];
        let ranges = chunk_ranges(&items, 0);
        // A message longer than a chunk is a chunk of its own; the next starts a new one.
        assert_eq!(ranges, vec![(0, 3), (3, 4), (4, 5)]);
        assert_eq!(chunk_ranges(&items, 3), vec![(3, 4), (4, 5)]);
        assert!(chunk_ranges(&items, 5).is_empty());
        assert!(chunk_ranges(&[], 0).is_empty());
    }

    #[test]
    fn the_chain_names_a_prefix() {
        let a = chain(&[item("one"), item("two")]);
        let b = chain(&[item("one"), item("two"), item("three")]);
        assert_eq!(a[..], b[..2]);
        let c = chain(&[item("one"), item("TWO")]);
        assert_ne!(a[1], c[1]);
        assert_eq!(a[0], c[0]);
    }

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

    #[test]
    fn clipping_keeps_whole_characters() {
        assert_eq!(clip_bytes("héllo", 2), "h");
        assert_eq!(clip_bytes("héllo", 3), "hé");
        assert_eq!(clip_bytes("hi", 10), "hi");
    }
}
