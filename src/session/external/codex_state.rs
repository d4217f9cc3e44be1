//! Codex thread names and titles from `$CODEX_HOME/state_<n>.sqlite` (the `threads` table).
//!
//! Purpose: Codex 0.17x writes a thread's title (its first prompt, or one the model made) and
//! the name `/rename` gave it to its state database; `session_index.jsonl` is written only by
//! the TUI, and no rollout line names a rename. This reads the newest `state_<n>.sqlite`.
//!
//! Invariant: not one byte under the Codex home is written, created, locked or migrated. SQLite
//! never opens a file there for writing: a database without a write-ahead log is opened with
//! `SQLITE_OPEN_READ_ONLY` and `immutable=1` (no locks, no `-wal`/`-shm` created, no journal
//! replayed); a database whose `-wal` holds frames (Codex leaves one after every run) is copied,
//! with its log, into a private directory of ours under the system temporary directory, read
//! there, then deleted. The originals are opened only through
//! [`files::open_regular`] (regular files, non-blocking, symlinks refused), each read capped at
//! [`MAX_STATE_BYTES`]. Any failure is a warning and no names: titles fall back to the rollout.
//!
//! Proof: `tests/session/external_sessions.rs` reads the titles of a home written by Codex
//! 0.171 both ways (with its WAL, and checkpointed) and compares every file's bytes and mtime
//! before and after, and that no `-wal`/`-shm`/`-journal` appeared.

use super::sqlite_snapshot::{copy_capped, wal_of, PrivateDir};
use crate::session::files::{self, Symlinks};
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

/// The largest state database (and, separately, write-ahead log) read.
pub const MAX_STATE_BYTES: u64 = 256 << 20;

/// What the state database says about one thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadTitle {
    /// The name the person gave it (`/rename`), if any.
    pub name: Option<String>,
    /// Codex's title (the first prompt, or a generated one), if any.
    pub title: Option<String>,
}

/// The newest `state_<n>.sqlite` directly under `home` (highest `n`), if any.
pub fn newest_state_db(home: &Path) -> Option<PathBuf> {
    let entries = fs::read_dir(home).ok()?;
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|n| n.strip_prefix("state_"))
            .and_then(|n| n.strip_suffix(".sqlite"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        if entry.file_type().is_ok_and(|t| t.is_file()) && best.as_ref().is_none_or(|(b, _)| n > *b)
        {
            best = Some((n, entry.path()));
        }
    }
    best.map(|(_, path)| path)
}

/// Every thread's name and title in the state database `db`, read without writing under its
/// directory (see the module docs); an error says what could not be read.
pub fn read_threads(db: &Path) -> Result<HashMap<String, ThreadTitle>, String> {
    read_db(db, MAX_STATE_BYTES, query)
}

/// Runs `read` on another program's SQLite database `db` without writing a byte, a mode or an
/// mtime under its directory: without a write-ahead log it is opened read-only and immutable;
/// with one (the newest rows may live only there), the database and its log are copied (each
/// at most `max_bytes`) into a private directory of ours and read there. A log that changed
/// while it was copied (the program was writing) is copied again, a few times at most.
pub fn read_db<T>(
    db: &Path,
    max_bytes: u64,
    read: impl Fn(&Connection) -> rusqlite::Result<T>,
) -> Result<T, String> {
    // Only a regular file, opened without blocking: a FIFO or device here is refused.
    let meta = files::open_regular(db, OpenOptions::new().read(true), Symlinks::Refuse)
        .and_then(|f| f.metadata())
        .map_err(|e| format!("{}: {e}", db.display()))?;
    if meta.len() > max_bytes {
        return Err(format!(
            "{}: {} bytes, over the {max_bytes}-byte limit",
            db.display(),
            meta.len()
        ));
    }
    let wal = wal_of(db);
    let stamp = |p: &Path| {
        fs::symlink_metadata(p)
            .ok()
            .map(|m| (m.len(), m.modified().ok()))
    };
    let wal_has_frames = fs::symlink_metadata(&wal).is_ok_and(|m| m.is_file() && m.len() > 0);
    if !wal_has_frames {
        let conn = Connection::open_with_flags(
            immutable_uri(db),
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| format!("{}: {e}", db.display()))?;
        return read(&conn).map_err(|e| format!("{}: {e}", db.display()));
    }
    let mut tries = 0;
    loop {
        tries += 1;
        let before = (stamp(db), stamp(&wal));
        let copy = PrivateDir::new().map_err(|e| format!("a private copy: {e}"))?;
        let db_copy = copy.path.join("copy.sqlite");
        copy_capped(db, &db_copy, max_bytes)?;
        copy_capped(&wal, &wal_of(&db_copy), max_bytes)?;
        if (stamp(db), stamp(&wal)) != before && tries < 4 {
            continue;
        }
        // The copy is ours: SQLite may build its `-shm` and replay the log there.
        let conn = Connection::open_with_flags(
            &db_copy,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| format!("{}: {e}", db.display()))?;
        let _ = conn.busy_timeout(std::time::Duration::from_secs(2));
        let result = read(&conn).map_err(|e| format!("{}: {e}", db.display()));
        drop(conn);
        return result;
    }
}

fn query(conn: &Connection) -> rusqlite::Result<HashMap<String, ThreadTitle>> {
    // `name` came with the rename feature; older databases have only `title`.
    let mut stmt = match conn.prepare("SELECT id, name, title FROM threads") {
        Ok(stmt) => stmt,
        Err(_) => conn.prepare("SELECT id, NULL, title FROM threads")?,
    };
    let nonempty = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            ThreadTitle {
                name: nonempty(row.get(1)?),
                title: nonempty(row.get(2)?),
            },
        ))
    })?;
    let mut out = HashMap::new();
    for row in rows {
        let (id, title) = row?;
        out.insert(id, title);
    }
    Ok(out)
}

/// `file:` URI of `path` with `immutable=1`, every byte that is not plainly safe escaped.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_escape_what_sqlite_would_read_as_syntax() {
        assert_eq!(
            immutable_uri(Path::new("/a b/x?#%.sqlite")),
            "file:/a%20b/x%3F%23%25.sqlite?immutable=1"
        );
    }
}
