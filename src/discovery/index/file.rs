//! The database file: opened, checked and, when damaged or foreign, rebuilt under a lock.
//!
//! Purpose: every connection to the index is made here, with the same rules. Invariant:
//! nothing is written through a symlink (what is not a regular file at our paths is set aside
//! first, and connections open with `SQLITE_OPEN_NOFOLLOW`), a database of another schema or
//! application is never used, one another process holds busy is never removed, and
//! connections made at one moment on a database not yet made all wait for one another (as
//! for any busy database) instead of failing. Proof: the damaged, foreign, symlink and busy
//! cases of `tests/discovery/index.rs` and `tests/discovery/cache.rs`;
//! `a_new_index_locked_by_another_connection_is_waited_for` and
//! `many_connections_create_one_new_index_at_once` below.

use super::{
    IndexError, Result, APPLICATION_ID, BUSY_TIMEOUT, HASH_BYTES, LOCK_FILE, PAGE_BYTES,
    READER_BUSY_TIMEOUT, SCHEMA_VERSION,
};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

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
pub(super) fn open_flags(read_only: bool) -> OpenFlags {
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
pub(super) fn resolved(path: &Path) -> PathBuf {
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
pub(super) fn prepare_dir(dir: &Path) -> Result<()> {
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
pub(super) fn set_aside(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
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

pub(super) fn try_open(path: &Path) -> Result<Connection> {
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
    let mode = into_wal(&conn).map_err(sql)?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "discovery index is not in WAL mode");
    }
    // A cache may lose its last commits on a power cut (never its consistency); bigger pages
    // and cache, fewer checkpoints: the index is written in bulk.
    conn.execute_batch(
        "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-32768; PRAGMA wal_autocheckpoint=8192",
    )
    .map_err(sql)?;
    // One statement, so one read: a schema another connection commits meanwhile is seen
    // whole or not at all (never as version 0 with tables, which reads as foreign).
    let (version, app, tables): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), \
             (SELECT application_id FROM pragma_application_id), \
             (SELECT count(*) FROM sqlite_master)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
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
        add_late_indexes(&conn).map_err(sql)?;
        return Ok(conn);
    }
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

/// Puts the connection's database in WAL mode and answers the mode it is in.
///
/// On a database still in rollback mode (a new one is, until its first connection switches
/// it) the switch upgrades a read lock to a write lock, and SQLite answers busy at once
/// instead of calling the busy handler when another connection holds the lock (waiting while
/// holding a read lock could deadlock): two processes making one home's index at the same
/// moment met exactly that. The switch is tried again after short sleeps (1 ms doubling to
/// 50 ms) on busy or locked only, for at most [`BUSY_TIMEOUT`] in all, as any other statement
/// waits; then the busy error is returned as before.
fn into_wal(conn: &Connection) -> rusqlite::Result<String> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)) {
            Err(e) if is_busy(&e) && std::time::Instant::now() + pause < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// The SQL indexes that hand out sessions in listing rank ([`crate::discovery::recent`]):
/// newest activity first, and within one cwd; and the narrow one the indexer reads every
/// session's stamp from (a scan of the whole table filled the writer's 32 MiB page cache; this
/// one is a third of its size). Idempotent, so an index of this schema made before they existed
/// gets them the next time a writer opens it.
const RANK_INDEXES: &str = "CREATE INDEX IF NOT EXISTS sessions_recent ON sessions(last_activity);
    CREATE INDEX IF NOT EXISTS sessions_cwd_recent ON sessions(cwd, last_activity);
    CREATE INDEX IF NOT EXISTS sessions_stamp ON sessions(id, stamp);";

/// Adds [`RANK_INDEXES`] to an index of this schema made before them (once: a writer that
/// finds them all does nothing).
fn add_late_indexes(conn: &Connection) -> rusqlite::Result<()> {
    let have: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN \
         ('sessions_recent', 'sessions_cwd_recent', 'sessions_stamp')",
        [],
        |r| r.get(0),
    )?;
    if have == 3 {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match conn.execute_batch(RANK_INDEXES) {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

pub(super) fn create_schema(conn: &Connection) -> rusqlite::Result<()> {
    // IMMEDIATE: a second process creating it at the same moment waits, then sees it made.
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let made: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if made == SCHEMA_VERSION {
        // Added after the version's first release: an index made before gets them here.
        conn.execute_batch(RANK_INDEXES)?;
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
        {RANK_INDEXES}
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

pub(super) fn remove_db(path: &Path) -> Result<()> {
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
pub(super) struct RebuildLock {
    _file: std::fs::File,
}

impl RebuildLock {
    pub(super) fn take(path: &Path) -> Result<RebuildLock> {
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

/// Whether an SQLite error means the file itself is damaged (rebuild) rather than busy.
pub(super) fn is_damage(error: &rusqlite::Error) -> bool {
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

pub(super) fn id_of(meta: std::fs::Metadata) -> Option<(u64, u64)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// A new database whose write lock another connection holds while this one opens it: the
    /// switch to WAL mode waits for the lock (SQLite itself answers busy at once there).
    #[test]
    fn a_new_index_locked_by_another_connection_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index").join("db");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            other.execute_batch("COMMIT").unwrap();
        });
        let started = std::time::Instant::now();
        let opened = open(&path);
        release.join().unwrap();
        let conn = opened.expect("opened once the other connection let go");
        assert!(started.elapsed() >= std::time::Duration::from_millis(250));
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    /// Many connections made at one instant on a path where no database is yet: every one
    /// opens (none answers busy), over many rounds.
    #[test]
    fn many_connections_create_one_new_index_at_once() {
        let dir = tempfile::tempdir().unwrap();
        for round in 0..100 {
            let path = dir
                .path()
                .join(format!("home-{round}"))
                .join("index")
                .join("db");
            let threads = 8;
            let barrier = Arc::new(Barrier::new(threads));
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (path, barrier) = (path.clone(), Arc::clone(&barrier));
                    std::thread::spawn(move || {
                        barrier.wait();
                        open(&path).map(|_| ()).map_err(|e| e.to_string())
                    })
                })
                .collect();
            for handle in handles {
                if let Err(e) = handle.join().unwrap() {
                    panic!("round {round}: {e}");
                }
            }
        }
    }
}
