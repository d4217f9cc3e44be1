//! A private, consistent and cached snapshot of another program's SQLite database in WAL mode.
//!
//! Purpose: opencode keeps every session in `opencode.db`, and the newest ones may live only in
//! its write-ahead log `opencode.db-wal`. SQLite cannot read another program's database without
//! touching it: `mode=ro` still maps and stamps the `-shm` index, and `immutable=1` ignores the
//! log. So the database and its log are copied (each bounded, through the crate's read-only
//! opener) into a private directory of ours under the system temporary directory; SQLite folds
//! the log into the copy there (`journal_mode=DELETE`), the copy is opened read-only and
//! immutable, and on Unix the file is unlinked at once: the open connection is the snapshot and
//! nothing of ours is left on disk, however the process ends later (only a crash during the
//! copy itself can leave a `dsh-refs-snapshot-*` directory, mode 0700). A snapshot is kept (at most
//! [`MAX_SNAPSHOTS`], least recently used dropped) with the stamps (length, mtime, inode) the
//! database and its log had before they were copied, and reused while those stamps hold: an
//! unchanged database is never copied twice.
//!
//! Consistency under a concurrent writer: appends to the log are harmless (SQLite reads a log
//! only up to its last frame whose checksum chain holds, so a copy taken mid-append is the state
//! at an earlier commit, and a torn last frame is ignored); what can tear a copy is the
//! database file changing between the start of its copy and the end of the log's (a checkpoint
//! writing pages back, after which the log restarts and no longer holds them). So the stamps
//! are taken before and after the copy: when the database's changed, the copy is thrown away
//! and made again, at most [`MAX_TRIES`] times, then the read fails with a message saying the
//! database kept changing (the caller's next read tries again). A log that moved is copied
//! again too while tries remain; at the last try a copy whose database held still is used.
//!
//! Invariant: nothing in the program's directory is opened for writing, created, locked or
//! stamped: the database and log are opened only through [`files::open_regular`] (regular files,
//! non-blocking, symlinks refused) for reading, the `-shm` file is never opened, and SQLite only
//! ever sees our copy. Each file is read at most `max_bytes`.
//!
//! Proof: the unit tests below (a log-only row seen; the copy reused until a stamp moves and
//! unlinked while open; a checkpoint and a log restart made between the two copies, which a
//! reader without the stamp check reads as the old database alone; a database that never holds
//! still; a writer committing and checkpointing in another thread while snapshots are taken;
//! the directory's bytes and mtimes unchanged); `tests/session/opencode_sessions.rs` over the
//! home the real opencode wrote.

use crate::session::files::{self, Symlinks};
use crate::sync::LockExt;
use rusqlite::{Connection, OpenFlags};
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The path of a database's write-ahead log.
pub fn wal_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

/// Snapshots kept at once (one per database; each holds one open file of ours).
pub const MAX_SNAPSHOTS: usize = 4;
/// Copies made of one database before a read gives up on a database that keeps changing.
pub const MAX_TRIES: usize = 5;

/// What a file looked like: length, mtime, inode (`None`: absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = fs::symlink_metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        inode,
    })
}

/// The stamps of a database and its log.
type Stamps = (Option<Stamp>, Option<Stamp>);

fn stamps(db: &Path) -> Stamps {
    (stamp(db), stamp(&wal_of(db)))
}

struct Snapshot {
    db: PathBuf,
    stamps: Stamps,
    used: u64,
    conn: Arc<Mutex<Connection>>,
    /// Where the copy lives while it cannot be unlinked (not Unix); removed with the snapshot.
    _dir: Option<PrivateDir>,
}

static SNAPSHOTS: Mutex<Vec<Snapshot>> = Mutex::new(Vec::new());
static USES: AtomicU64 = AtomicU64::new(0);

/// Runs `read` on a snapshot of the database `db` (and its `-wal`, if any) as it is now: the
/// kept one while neither file changed, else a fresh copy (see the module docs). An error says
/// which file could not be read, or that the database kept changing.
pub fn read<T>(
    db: &Path,
    max_bytes: u64,
    read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> Result<T, String> {
    let now = stamps(db);
    if now.0.is_none() {
        return Err(format!("{}: no such database", db.display()));
    }
    let kept = {
        let mut kept = SNAPSHOTS.locked();
        kept.iter_mut()
            .find(|s| s.db == db && s.stamps == now)
            .map(|s| {
                s.used = USES.fetch_add(1, Ordering::Relaxed);
                s.conn.clone()
            })
    };
    let conn = match kept {
        Some(conn) => conn,
        None => {
            let (stamps, conn, dir) = take(db, max_bytes)?;
            let conn = Arc::new(Mutex::new(conn));
            let mut kept = SNAPSHOTS.locked();
            kept.retain(|s| s.db != db);
            if kept.len() >= MAX_SNAPSHOTS {
                if let Some(oldest) = (0..kept.len()).min_by_key(|&i| kept[i].used) {
                    kept.swap_remove(oldest);
                }
            }
            kept.push(Snapshot {
                db: db.to_path_buf(),
                stamps,
                used: USES.fetch_add(1, Ordering::Relaxed),
                conn: conn.clone(),
                _dir: dir,
            });
            conn
        }
    };
    let conn = conn.locked();
    read(&conn).map_err(|e| format!("{}: {e}", db.display()))
}

/// A fresh snapshot: the stamps the files had before the copy that was used, the connection,
/// and the directory still holding the copy where it could not be unlinked.
fn take(db: &Path, max_bytes: u64) -> Result<(Stamps, Connection, Option<PrivateDir>), String> {
    let wal = wal_of(db);
    let mut last_error = String::new();
    for attempt in 1..=MAX_TRIES {
        let before = stamps(db);
        let dir = PrivateDir::new().map_err(|e| format!("a private copy: {e}"))?;
        let copy = dir.path.join("copy.sqlite");
        copy_capped(db, &copy, max_bytes)?;
        #[cfg(test)]
        tests::BETWEEN.with(|hook| {
            if let Some(hook) = hook.borrow_mut().as_mut() {
                hook();
            }
        });
        if before.1.is_some_and(|w| w.len > 0) {
            match copy_capped(&wal, &wal_of(&copy), max_bytes) {
                Ok(()) => {}
                // Removed after a checkpoint in between: the database changed, try again.
                Err(e) if stamp(&wal).is_none() => {
                    last_error = e;
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        let after = stamps(db);
        if after.0 != before.0 {
            last_error = format!("{}: the database changed while it was copied", db.display());
            continue;
        }
        if after.1 != before.1 && attempt < MAX_TRIES {
            continue;
        }
        let conn = settle(&copy).map_err(|e| format!("{}: {e}", db.display()))?;
        // The connection keeps the file open; on Unix nothing of ours stays on disk.
        #[cfg(unix)]
        {
            drop(dir);
            return Ok((before, conn, None));
        }
        #[cfg(not(unix))]
        return Ok((before, conn, Some(dir)));
    }
    Err(format!(
        "{} (it kept changing over {MAX_TRIES} copies; it is read again next time)",
        if last_error.is_empty() {
            db.display().to_string()
        } else {
            last_error
        }
    ))
}

/// Folds the copied log into the copied database and opens it read-only and immutable.
fn settle(copy: &Path) -> rusqlite::Result<Connection> {
    {
        let conn = Connection::open_with_flags(
            copy,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(2))?;
        // Reads the log (its valid frames), writes them into the copy and removes the log.
        let _: String = conn.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))?;
    }
    let mut uri = String::from("file:");
    for &b in copy.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    let conn = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // Reads the schema now, while the file still has its name.
    let _: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    Ok(conn)
}

/// Copies the regular file `from` (symlinks refused, read-only, at most `max` bytes) to `to`.
pub(super) fn copy_capped(from: &Path, to: &Path, max: u64) -> Result<(), String> {
    let file = files::open_regular(from, OpenOptions::new().read(true), Symlinks::Refuse)
        .map_err(|e| format!("{}: {e}", from.display()))?;
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(|e| format!("{}: {e}", to.display()))?;
    let copied = io::copy(&mut file.take(max + 1), &mut out)
        .map_err(|e| format!("{}: {e}", from.display()))?;
    if copied > max {
        return Err(format!("{}: over the {max}-byte limit", from.display()));
    }
    out.flush().map_err(|e| format!("{}: {e}", to.display()))
}

/// A directory of ours (mode 0700) under the system temporary directory, removed when dropped.
pub(super) struct PrivateDir {
    pub(super) path: PathBuf,
}

impl PrivateDir {
    pub(super) fn new() -> io::Result<PrivateDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("dsh-refs-snapshot-{}-{n}", std::process::id()));
            let mut builder = fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&path) {
                Ok(()) => return Ok(PrivateDir { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::os::unix::fs::MetadataExt;

    type Entry = (u32, i64, i64, Vec<u8>);

    thread_local! {
        /// Run by `take` between copying the database and copying its log (this thread only).
        pub(super) static BETWEEN: std::cell::RefCell<Option<Box<dyn FnMut()>>> =
            const { std::cell::RefCell::new(None) };
    }

    fn files(dir: &Path) -> BTreeMap<PathBuf, Entry> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let path = e.unwrap().path();
                let meta = fs::symlink_metadata(&path).unwrap();
                let bytes = fs::read(&path).unwrap();
                (path, (meta.mode(), meta.mtime(), meta.mtime_nsec(), bytes))
            })
            .collect()
    }

    /// A database in WAL mode with `n` rows in the database file and `m` more only in its log,
    /// left open by the writer returned (as a running program keeps it).
    fn wal_database(n: i64, m: i64) -> (tempfile::TempDir, PathBuf, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.db");
        let conn = Connection::open(&db).unwrap();
        let _: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .unwrap();
        conn.execute_batch(
            "PRAGMA wal_autocheckpoint=0; CREATE TABLE t (id integer PRIMARY KEY, v text);",
        )
        .unwrap();
        for i in 0..n {
            conn.execute("INSERT INTO t VALUES (?1, 'in the database')", [i])
                .unwrap();
        }
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        for i in n..n + m {
            // Rows of some hundred bytes: the log's rows fill pages of their own.
            conn.execute(
                "INSERT INTO t VALUES (?1, 'only in the log ' || hex(zeroblob(200)))",
                [i],
            )
            .unwrap();
        }
        (dir, db, conn)
    }

    fn count(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
        conn.query_row(
            "SELECT count(*), coalesce(sum(v LIKE 'only in the log%'), 0) FROM t",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    #[test]
    fn rows_only_in_the_log_are_seen_and_nothing_in_the_directory_moves() {
        let (dir, db, writer) = wal_database(3, 2);
        let before = files(dir.path());
        assert!(before.keys().any(|p| p.ends_with("app.db-shm")));
        assert_eq!(read(&db, 1 << 20, count).unwrap(), (5, 2));
        assert_eq!(files(dir.path()), before, "bytes, modes and mtimes");
        drop(writer);
    }

    /// The connection of the snapshot kept for `db`, if any.
    fn kept(db: &Path) -> Option<Arc<Mutex<Connection>>> {
        SNAPSHOTS
            .locked()
            .iter()
            .find(|s| s.db == db)
            .map(|s| s.conn.clone())
    }

    #[test]
    fn an_unchanged_database_is_not_copied_again_and_a_changed_one_is() {
        let (_dir, db, writer) = wal_database(2, 1);
        assert_eq!(read(&db, 1 << 20, count).unwrap(), (3, 1));
        let first = kept(&db).expect("a snapshot is kept");
        for _ in 0..5 {
            assert_eq!(read(&db, 1 << 20, count).unwrap(), (3, 1));
            let same = kept(&db).unwrap();
            assert!(Arc::ptr_eq(&first, &same), "read from the kept copy");
        }
        // The copy is open but has no name left on disk.
        let file: String = first
            .locked()
            .query_row("PRAGMA database_list", [], |r| r.get(2))
            .unwrap();
        assert!(file.contains("dsh-refs-snapshot-"), "{file}");
        assert!(!Path::new(&file).exists(), "{file} was unlinked");
        assert!(!Path::new(&file).parent().unwrap().exists());
        writer
            .execute("INSERT INTO t VALUES (100, 'only in the log')", [])
            .unwrap();
        assert_eq!(read(&db, 1 << 20, count).unwrap(), (4, 2), "the new row");
        assert!(!Arc::ptr_eq(&first, &kept(&db).unwrap()), "copied again");
    }

    #[test]
    fn a_database_without_a_log_and_the_limits() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("plain.db");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch("CREATE TABLE t (id integer, v text); INSERT INTO t VALUES (1, 'x');")
            .unwrap();
        drop(conn);
        let before = files(dir.path());
        assert_eq!(
            read(&db, 1 << 20, |c| c.query_row(
                "SELECT count(*) FROM t",
                [],
                |r| r.get::<_, i64>(0)
            ))
            .unwrap(),
            1
        );
        assert_eq!(files(dir.path()), before);
        let err = read(&dir.path().join("other.db"), 1 << 20, |_| Ok(())).unwrap_err();
        assert!(err.contains("other.db"), "{err}");
        let small = dir.path().join("small.db");
        let conn = Connection::open(&small).unwrap();
        conn.execute_batch("CREATE TABLE t (v text); INSERT INTO t VALUES (zeroblob(100000));")
            .unwrap();
        drop(conn);
        let err = read(&small, 4096, |_| Ok(())).unwrap_err();
        assert!(err.contains("4096-byte limit"), "{err}");
        std::os::unix::fs::symlink(&db, dir.path().join("link.db")).unwrap();
        let err = read(&dir.path().join("link.db"), 1 << 20, |_| Ok(())).unwrap_err();
        assert!(err.contains("link.db"), "{err}");
    }

    /// Runs `read` with `hook` called between the copies of the database and its log.
    fn with_hook<T>(hook: impl FnMut() + 'static, read: impl FnOnce() -> T) -> T {
        BETWEEN.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
        let out = read();
        BETWEEN.with(|h| *h.borrow_mut() = None);
        out
    }

    #[test]
    fn a_checkpoint_between_the_two_copies_is_caught_and_the_copy_made_again() {
        // 20 rows in the database, 60 only in the log. Between our copies of the two, the
        // program folds the log into the database and starts a new log with one more row: the
        // old database with the new log would lose the 60 rows' pages (or be malformed).
        let (_dir, db, writer) = wal_database(20, 60);
        let writer = std::rc::Rc::new(writer);
        let w = writer.clone();
        let mut calls = 0;
        let got = with_hook(
            move || {
                calls += 1;
                if calls == 1 {
                    w.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                        .unwrap();
                    w.execute("INSERT INTO t VALUES (1000, 'only in the log')", [])
                        .unwrap();
                }
            },
            || read(&db, 1 << 20, count),
        );
        assert_eq!(got.unwrap(), (81, 61), "every row, from a second copy");
        // A log that only grew in between is copied again too (tries remain).
        writer
            .execute("INSERT INTO t VALUES (1001, 'only in the log')", [])
            .unwrap();
        let w = writer.clone();
        let mut calls = 0;
        let got = with_hook(
            move || {
                calls += 1;
                if calls == 1 {
                    w.execute("INSERT INTO t VALUES (1002, 'only in the log')", [])
                        .unwrap();
                }
            },
            || read(&db, 1 << 20, count),
        );
        assert_eq!(got.unwrap(), (83, 63));
        // A database that changes between every pair of copies: the read gives up, saying why.
        writer
            .execute("INSERT INTO t VALUES (1003, 'x')", [])
            .unwrap();
        let w = writer.clone();
        let mut next = 2000;
        let err = with_hook(
            move || {
                next += 1;
                w.execute("INSERT INTO t VALUES (?1, 'x')", [next]).unwrap();
                w.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                    .unwrap();
            },
            || read(&db, 1 << 20, count),
        )
        .unwrap_err();
        assert!(
            err.contains("kept changing") && err.contains("app.db"),
            "{err}"
        );
        // Once it holds still, it is read again.
        assert_eq!(
            read(&db, 1 << 20, count).unwrap(),
            (84 + MAX_TRIES as i64, 63)
        );
    }

    #[test]
    fn a_writer_committing_and_checkpointing_meanwhile_never_yields_a_torn_read() {
        // A database of some megabytes, so that a copy takes long enough for the writer's
        // checkpoints to land in the middle of it.
        let (dir, db, writer) = wal_database(0, 0);
        writer
            .execute_batch(
                "BEGIN; WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)
                 INSERT INTO t SELECT i, 'in the database ' || hex(randomblob(200)) FROM n; COMMIT;
                 PRAGMA wal_checkpoint(TRUNCATE);",
            )
            .unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        // Commits of ten rows each (one transaction), rewriting pages all over the file and
        // checkpointing them into it, as a busy program does: a reader must always see a whole
        // number of commits, from a database that is not torn.
        let thread = std::thread::spawn(move || {
            let mut commits = 0u64;
            while !flag.load(Ordering::Relaxed) {
                writer.execute_batch("BEGIN").unwrap();
                for _ in 0..10 {
                    writer
                        .execute(
                            "INSERT INTO t (v) VALUES ('only in the log ' || hex(randomblob(100)))",
                            [],
                        )
                        .unwrap();
                }
                writer
                    .execute(
                        "UPDATE t SET v = 'in the database ' || hex(randomblob(200)) WHERE id % 97 = ?1",
                        [(commits % 97) as i64],
                    )
                    .unwrap();
                writer.execute_batch("COMMIT").unwrap();
                commits += 1;
                if commits.is_multiple_of(3) {
                    let _ = writer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            }
            commits
        });
        let check = |conn: &Connection| {
            let (total, ok): (i64, String) = conn.query_row(
                "SELECT (SELECT count(*) FROM t), (SELECT group_concat(quick_check) FROM pragma_quick_check)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            Ok((total, ok))
        };
        let mut seen = 0;
        let mut gave_up = 0;
        for _ in 0..30 {
            match read(&db, 256 << 20, check) {
                Ok((total, ok)) => {
                    assert_eq!(ok, "ok", "a torn copy");
                    assert_eq!(total % 10, 0, "a commit was half read: {total}");
                    seen += 1;
                }
                Err(e) => {
                    assert!(e.contains("kept changing"), "{e}");
                    gave_up += 1;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let commits = thread.join().unwrap();
        assert!(
            commits > 0 && seen > 0,
            "{commits} commits, {seen} reads, {gave_up} gave up"
        );
        drop(dir);
    }
}
