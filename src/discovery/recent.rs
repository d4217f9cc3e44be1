//! The most recent sessions, straight from the index: the first rows of a ranked listing
//! without loading every row.
//!
//! Purpose: a host such as an MCP client lists at most a few hundred sessions (same cwd first,
//! then newest activity first, ties by id). Loading the whole listing and every index row to
//! rank 100,000 sessions costs seconds and hundreds of megabytes; the index already holds each
//! session's id, title, first prompt, cwd, last activity and counts, and two of its SQL indexes
//! (`sessions_recent` on `last_activity`, `sessions_cwd_recent` on `(cwd, last_activity)`) hand
//! them out in rank order, so the first `limit` rows cost `limit` index steps.
//!
//! Invariant: [`RecentReader::top`] returns the rows the index holds in exactly the order
//! the MCP listing's `ranked` gives for the same rows: rows of `cwd` first, then
//! `last_activity` descending, then id ascending; only rows `covers` accepts; at most `limit`.
//! It reads through a read-only connection (never a write, never through a symlink) and reopens
//! when an indexer rebuilt the database into a new file. The rows are as fresh as the index:
//! a session nobody indexed yet is missing, and callers reconcile with the store listing.
//! Proof: the unit tests below build an index on disk and compare with a sort of all its rows;
//! `tests/mcp/` checks the order against `dsh-refs search` over the real binary.

use super::index::{self, IndexError};
use super::meta::SessionMeta;
use rusqlite::{Connection, OptionalExtension};
use std::path::PathBuf;

/// The columns of a [`SessionMeta`], in the order [`meta_at`] reads them.
pub(crate) const COLUMNS: &str = "id, title, cwd, created_at, last_activity, messages, \
                                  conversation_bytes, first_prompt, source";

/// The [`SessionMeta`] of a row whose [`COLUMNS`] start at column `at`.
pub(crate) fn meta_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<SessionMeta> {
    Ok(SessionMeta {
        id: r.get(at)?,
        title: r.get(at + 1)?,
        cwd: r.get(at + 2)?,
        created_at: r.get(at + 3)?,
        last_activity: r.get(at + 4)?,
        messages: r.get::<_, i64>(at + 5)?.max(0) as u64,
        conversation_bytes: r.get::<_, i64>(at + 6)?.max(0) as u64,
        first_prompt: r.get(at + 7)?,
        source: r.get(at + 8)?,
    })
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionMeta> {
    meta_at(r, 0)
}

/// A read-only connection to one index database, opened on first use.
pub struct RecentReader {
    path: PathBuf,
    conn: Option<Connection>,
    file: Option<(u64, u64)>,
}

impl RecentReader {
    /// A reader of the database at `path` (which need not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> RecentReader {
        RecentReader {
            path: path.into(),
            conn: None,
            file: None,
        }
    }

    fn sql(&self, source: rusqlite::Error) -> IndexError {
        IndexError::Sql {
            path: self.path.clone(),
            source,
        }
    }

    fn connection(&mut self) -> Result<&Connection, IndexError> {
        if self.conn.is_some() && index::entry_id(&self.path) != self.file {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.conn = Some(index::open_reader(&self.path)?);
            self.file = index::entry_id(&self.path);
        }
        Ok(self.conn.as_ref().expect("opened"))
    }

    /// The first `limit` rows in rank order: rows of `cwd` first, then newest activity, then id;
    /// rows `covers` refuses are skipped. One read transaction, so both parts see one snapshot.
    pub fn top(
        &mut self,
        cwd: Option<&str>,
        covers: &dyn Fn(&str) -> bool,
        limit: usize,
    ) -> Result<Vec<SessionMeta>, IndexError> {
        let result = self.top_inner(cwd, covers, limit);
        if let Ok(conn) = self.connection() {
            // Ends the read transaction whatever happened (a no-op when none is open).
            let _ = conn.execute_batch("COMMIT");
        }
        if result.is_err() {
            // A failed statement may leave the connection unusable (a rebuilt file): reopen.
            self.conn = None;
        }
        result
    }

    fn top_inner(
        &mut self,
        cwd: Option<&str>,
        covers: &dyn Fn(&str) -> bool,
        limit: usize,
    ) -> Result<Vec<SessionMeta>, IndexError> {
        let mut out = Vec::with_capacity(limit.min(1024));
        if limit == 0 {
            return Ok(out);
        }
        let path = self.path.clone();
        let conn = self.connection()?;
        let step = |e| IndexError::Sql {
            path: path.clone(),
            source: e,
        };
        conn.execute_batch("BEGIN").map_err(step)?;
        if let Some(cwd) = cwd {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM sessions WHERE cwd = ?1 \
                     ORDER BY last_activity DESC, id"
                ))
                .map_err(step)?;
            let mut rows = stmt.query([cwd]).map_err(step)?;
            while let Some(r) = rows.next().map_err(step)? {
                let found = row(r).map_err(step)?;
                if covers(&found.id) {
                    out.push(found);
                    if out.len() == limit {
                        return Ok(out);
                    }
                }
            }
        }
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM sessions ORDER BY last_activity DESC, id"
            ))
            .map_err(step)?;
        let mut rows = stmt.query([]).map_err(step)?;
        while let Some(r) = rows.next().map_err(step)? {
            let found = row(r).map_err(step)?;
            if cwd.is_some() && found.cwd.as_deref() == cwd {
                continue;
            }
            if covers(&found.id) {
                out.push(found);
                if out.len() == limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// The id of every session the index holds (one pass over its primary key, no row loaded).
    pub fn ids(&mut self) -> Result<std::collections::HashSet<String>, IndexError> {
        let found = {
            let conn = self.connection()?;
            conn.prepare_cached("SELECT id FROM sessions")
                .and_then(|mut stmt| {
                    stmt.query_map([], |r| r.get::<_, String>(0))?
                        .collect::<rusqlite::Result<std::collections::HashSet<String>>>()
                })
        };
        found.map_err(|e| {
            self.conn = None;
            self.sql(e)
        })
    }

    /// The row of session `id`, if the index has it.
    pub fn get(&mut self, id: &str) -> Result<Option<SessionMeta>, IndexError> {
        let found = {
            let conn = self.connection()?;
            conn.prepare_cached(&format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1"))
                .and_then(|mut stmt| stmt.query_row([id], row).optional())
        };
        found.map_err(|e| {
            self.conn = None;
            self.sql(e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn make(dir: &Path, rows: &[(&str, Option<&str>, i64)]) -> PathBuf {
        let path = dir.join("index").join("discovery.sqlite3");
        let conn = index::open(&path).unwrap();
        for (id, cwd, at) in rows {
            conn.execute(
                "INSERT INTO sessions(id, title, cwd, created_at, last_activity, messages,
                 conversation_bytes, first_prompt, source, stamp, items, chain, tail_chunk,
                 tail_items) VALUES (?1, NULL, ?2, 0, ?3, 1, 2, 'p', NULL, NULL, 0, 0, NULL, 0)",
                rusqlite::params![id, cwd, at],
            )
            .unwrap();
        }
        path
    }

    fn ids(rows: Vec<SessionMeta>) -> Vec<String> {
        rows.into_iter().map(|r| r.id).collect()
    }

    #[test]
    fn same_cwd_first_then_newest_then_id_and_only_covered() {
        let dir = tempfile::tempdir().unwrap();
        let path = make(
            dir.path(),
            &[
                ("a", Some("/other"), 5),
                ("b", Some("/p"), 1),
                ("c", None, 3),
                ("d", Some("/p"), 2),
                ("e", Some("/other"), 4),
                ("f", Some("/other"), 4),
                ("claude:x", Some("/p"), 9),
            ],
        );
        let mut reader = RecentReader::new(&path);
        let dsh = |id: &str| !id.contains(':');
        assert_eq!(
            ids(reader.top(Some("/p"), &dsh, 10).unwrap()),
            ["d", "b", "a", "e", "f", "c"]
        );
        assert_eq!(
            ids(reader.top(Some("/p"), &dsh, 3).unwrap()),
            ["d", "b", "a"]
        );
        assert_eq!(
            ids(reader.top(None, &|_| true, 3).unwrap()),
            ["claude:x", "a", "e"]
        );
        assert!(reader.top(None, &|_| true, 0).unwrap().is_empty());
        assert_eq!(reader.get("d").unwrap().unwrap().cwd.as_deref(), Some("/p"));
        assert_eq!(reader.get("zz").unwrap(), None);
        let mut all: Vec<String> = reader.ids().unwrap().into_iter().collect();
        all.sort();
        assert_eq!(all, ["a", "b", "c", "claude:x", "d", "e", "f"]);
    }

    #[test]
    fn a_missing_index_is_an_error_and_nothing_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index").join("discovery.sqlite3");
        let mut reader = RecentReader::new(&path);
        assert!(reader.top(None, &|_| true, 5).is_err());
        assert!(!dir.path().join("index").exists());
    }

    #[test]
    fn the_rank_indexes_exist_and_are_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = make(dir.path(), &[("a", Some("/p"), 1)]);
        let conn = index::open_reader(&path).unwrap();
        let plan = |sql: &str| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = stmt.query_map([], |r| r.get::<_, String>(3)).unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
        };
        let all = plan(&format!(
            "SELECT {COLUMNS} FROM sessions ORDER BY last_activity DESC, id"
        ));
        assert!(all.contains("sessions_recent"), "{all}");
        let same = plan(&format!(
            "SELECT {COLUMNS} FROM sessions WHERE cwd = 'x' ORDER BY last_activity DESC, id"
        ));
        assert!(same.contains("sessions_cwd_recent"), "{same}");
    }
}
