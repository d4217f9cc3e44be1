//! A first build of a large home, written aside and moved into place when complete.
//!
//! Purpose: in WAL mode every page is written twice (to the WAL, then by the checkpoint); a
//! file nobody reads yet needs neither the WAL nor a rollback journal. Invariant: nothing
//! half-built is ever opened as the index, and an existing database is never replaced. Proof:
//! `a_first_build_is_written_aside_and_moved_into_place` and
//! `a_database_made_during_a_fresh_build_is_not_replaced` in `tests/discovery/index.rs`.

use super::file::{
    create_schema, open_flags, prepare_dir, remove_db, resolved, set_aside_foreign, RebuildLock,
};
use super::{IndexError, Indexer, PassStats, Result, FRESH_SUFFIX, LOCK_FILE, PAGE_BYTES};
use crate::session::SessionSummary;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl Indexer {
    /// A first build (no database at the index's path) of a home of at least
    /// [`FRESH_BUILD_SESSIONS`](super::FRESH_BUILD_SESSIONS) sessions, written to a fresh file beside the database without a
    /// journal, then moved into place. `None` when a database appeared before the rebuild lock
    /// was held: the pass then goes on as usual.
    ///
    /// In WAL mode every page is written twice, to the WAL and again when it is checkpointed
    /// into the database; at 100,000 sessions and 1 GB of conversation that second write and its
    /// bookkeeping were a quarter of the build's CPU. A file nobody else reads needs neither the
    /// WAL nor a rollback journal: a failed build's file is removed, and a crash leaves only
    /// the database's name with [`FRESH_SUFFIX`], which the next fresh build removes unread. The rebuild lock is held
    /// throughout and a database is made only under it ([`open`]), so no other process of ours
    /// makes one meanwhile. The file is switched to WAL mode and synced before it is linked into
    /// place, and linking never replaces a file (a database that appeared anyway is kept, and
    /// ours dropped). Searches meanwhile answer from the listing, as before any index exists.
    pub(super) fn build_fresh(
        &mut self,
        sessions: &Arc<Vec<SessionSummary>>,
    ) -> Result<Option<PassStats>> {
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        prepare_dir(&dir)?;
        let lock = RebuildLock::take(&dir.join(LOCK_FILE))?;
        if std::fs::symlink_metadata(&self.path).is_ok() {
            return Ok(None);
        }
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(FRESH_SUFFIX);
        let fresh = dir.join(name);
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
}

/// Opens the fresh file of a first build ([`Indexer::build_fresh`]) and makes the schema: no
/// journal and no syncs (the file is used only once it is complete and synced), 8 KiB pages.
pub(super) fn open_fresh(path: &Path) -> Result<Connection> {
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
pub(super) fn finish_fresh(conn: &Connection) -> rusqlite::Result<()> {
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
pub(super) fn publish_fresh(fresh: &Path, path: &Path) -> Result<bool> {
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
