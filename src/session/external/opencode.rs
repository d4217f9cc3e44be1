//! opencode sessions (`$XDG_DATA_HOME/opencode/opencode.db`, SQLite in WAL mode).
//!
//! Purpose: opencode 1.x keeps every session in one database: `session` rows (id, directory,
//! title, times, `parent_id` for a sub-agent's child session), `message` rows (`data`: JSON with
//! `role`, `summary`) and `part` rows (`data`: JSON with `type`, `text`, `synthetic`). The
//! listing is the sessions that are not children; the title is `session.title` unless it is
//! opencode's default (`New session - <ISO time>`), else the first prompt; the conversation is
//! the `text` parts of user and assistant messages in `(time_created, id)` order, parts by id.
//! A compaction (`/compact`) is a user message with a `compaction` part followed by an
//! assistant message with `summary: true`: the summary stands in for everything before that
//! user message. Reasoning, tool, step, patch and snapshot parts, and text opencode marks
//! `synthetic`, are not conversation. `opencode run` wraps a prompt that holds a space in double
//! quotes before storing it; one such pair of quotes is taken off (the person did not type
//! them; a prompt that itself starts and ends with a quote loses them too, a known cost).
//!
//! Invariant: nothing under the data directory is written, created or touched (`-wal` and
//! `-shm` included): the database is read through `codex_state::read_db` (read-only and
//! immutable without a log; with one, the database and its log copied into a private directory
//! and read there, so sessions that live only in the log are seen). Every query is bounded: at
//! most [`MAX_SESSIONS`] sessions, [`MAX_PARTS`] parts a conversation, [`MAX_TEXT`] bytes a part.
//! Proof: `tests/session/opencode_sessions.rs` over a home the real opencode 1.18.33 wrote (one
//! session only in its log), comparing every file's bytes, mode and mtime before and after.

use super::agent::{AgentFormat, DatabaseFormat, DatabaseRow, SideNames, TitleScan};
use super::codex_state::{read_db, wal_of};
use super::scan::LineSink;
use super::{title_line, Conversation, Head, Item, ItemKind};
use crate::session::error::{Result, SessionError};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

/// The most sessions listed.
pub const MAX_SESSIONS: usize = 200_000;
/// The most text parts read for one conversation.
pub const MAX_PARTS: usize = 200_000;
/// The most bytes of one part's JSON read.
pub const MAX_TEXT: usize = 8 << 20;
/// The largest database (or log) read.
pub const MAX_DB_BYTES: u64 = 4 << 30;

/// opencode (`$XDG_DATA_HOME/opencode/opencode.db`; ids `opencode:<ses_…>`).
pub struct Opencode;

impl AgentFormat for Opencode {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn product(&self) -> &'static str {
        "opencode"
    }

    /// `XDG_DATA_HOME` names the data directory; opencode's is `opencode` below it.
    fn home_env(&self) -> &'static str {
        "XDG_DATA_HOME"
    }

    fn home_from_env(&self, value: &str) -> Option<PathBuf> {
        let value = value.trim();
        (!value.is_empty()).then(|| Path::new(value).join("opencode"))
    }

    fn default_home(&self, user_home: &Path) -> PathBuf {
        user_home.join(".local/share/opencode")
    }

    fn sessions_subdir(&self) -> &'static str {
        "."
    }

    fn depth(&self) -> usize {
        0
    }

    fn is_session_file(&self, _path: &Path) -> bool {
        false
    }

    fn read_head(&self, _path: &Path) -> Result<Option<Head>> {
        Ok(None)
    }

    fn title_scan(&self) -> Box<dyn TitleScan> {
        Box::new(NoTitle)
    }

    fn read_conversation(&self, path: &Path) -> Result<Conversation> {
        Err(SessionError::NotFound {
            id: path.display().to_string(),
        })
    }

    fn present(&self, home: &Path) -> bool {
        home.join(DB).is_file()
    }

    fn database(&self) -> Option<&dyn DatabaseFormat> {
        Some(self)
    }
}

/// The database file in the data directory (release channels; others use `opencode-<channel>.db`).
const DB: &str = "opencode.db";

/// A title scan for an agent without session files.
struct NoTitle;

impl LineSink for NoTitle {
    fn line(&mut self, _: u64, _: &[u8]) -> bool {
        false
    }
}

impl TitleScan for NoTitle {
    fn choose(&self, _: Option<&dyn SideNames>, _: &str) -> Option<String> {
        None
    }
}

fn failed(home: &Path, error: String) -> SessionError {
    SessionError::Corrupt {
        path: home.join(DB),
        line: 0,
        reason: error,
    }
}

impl DatabaseFormat for Opencode {
    fn files(&self, home: &Path) -> Vec<PathBuf> {
        let db = home.join(DB);
        vec![wal_of(&db), db]
    }

    fn list(&self, home: &Path) -> Result<Vec<DatabaseRow>> {
        read_db(&home.join(DB), MAX_DB_BYTES, list_rows).map_err(|e| failed(home, e))
    }

    fn conversation(&self, home: &Path, own_id: &str) -> Result<Option<Conversation>> {
        read_db(&home.join(DB), MAX_DB_BYTES, |conn| {
            conversation(conn, own_id)
        })
        .map_err(|e| failed(home, e))
    }
}

/// Whether `title` is opencode's default (`New session - 2026-12-04T00:55:02.600Z`, or a
/// child's): then the first prompt names the session.
pub fn is_default_title(title: &str) -> bool {
    let rest = title
        .strip_prefix("New session - ")
        .or_else(|| title.strip_prefix("Child session - "));
    rest.is_some_and(|t| super::parse_time(t).is_some() && t.ends_with('Z'))
}

/// A prompt without the pair of double quotes `opencode run` put around it.
pub fn unquoted(text: &str) -> String {
    let inner = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|t| t.contains(' '));
    match inner {
        Some(inner) => inner.replace("\\\"", "\""),
        None => text.to_string(),
    }
}

fn list_rows(conn: &Connection) -> rusqlite::Result<Vec<DatabaseRow>> {
    let mut stmt = conn.prepare(
        "SELECT id, directory, title, time_created FROM session \
         WHERE parent_id IS NULL ORDER BY time_created DESC, id LIMIT ?1",
    )?;
    let rows = stmt.query_map([MAX_SESSIONS as i64], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, Option<String>>(1)?,
            row.get::<_, Option<String>>(2)?,
            row.get::<_, i64>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, directory, title, created) = row?;
        let title = match title.filter(|t| !t.trim().is_empty() && !is_default_title(t)) {
            Some(title) => title_line(&title),
            None => first_prompt(conn, &id)?,
        };
        out.push(DatabaseRow {
            head: Head {
                id,
                created_at: created,
                cwd: directory.filter(|d| !d.is_empty()),
            },
            title,
        });
    }
    Ok(out)
}

/// The session's first prompt, as a title.
fn first_prompt(conn: &Connection, id: &str) -> rusqlite::Result<Option<String>> {
    let mut stmt = conn.prepare(
        "SELECT substr(p.data, 1, ?2) FROM message m JOIN part p ON p.message_id = m.id \
         WHERE m.session_id = ?1 AND json_extract(m.data, '$.role') = 'user' \
         AND json_extract(p.data, '$.type') = 'text' \
         AND coalesce(json_extract(p.data, '$.synthetic'), 0) = 0 \
         ORDER BY m.time_created, m.id, p.id LIMIT 1",
    )?;
    let mut rows = stmt.query(rusqlite::params![id, MAX_TEXT as i64])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let data: String = row.get(0)?;
    Ok(part_text(&data).and_then(|t| title_line(&unquoted(&t))))
}

fn part_text(data: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(data).ok()?;
    value.get("text")?.as_str().map(str::to_string)
}

fn conversation(conn: &Connection, id: &str) -> rusqlite::Result<Option<Conversation>> {
    let exists: i64 = conn.query_row("SELECT count(*) FROM session WHERE id = ?1", [id], |r| {
        r.get(0)
    })?;
    if exists == 0 {
        return Ok(None);
    }
    // Only the parts the projection can use are read: text and compaction markers.
    let mut stmt = conn.prepare(
        "SELECT m.id, json_extract(m.data, '$.role'), coalesce(json_extract(m.data, '$.summary'), 0), \
                m.time_created, m.time_updated, json_extract(p.data, '$.type'), \
                coalesce(json_extract(p.data, '$.synthetic'), 0), substr(p.data, 1, ?2) \
         FROM message m JOIN part p ON p.message_id = m.id \
         WHERE m.session_id = ?1 AND json_extract(p.data, '$.type') IN ('text', 'compaction') \
         ORDER BY m.time_created, m.id, p.id LIMIT ?3",
    )?;
    let mut rows = stmt.query(rusqlite::params![id, MAX_TEXT as i64, MAX_PARTS as i64])?;
    let mut items: Vec<Item> = Vec::new();
    let mut current: Option<(String, Item)> = None;
    let mut last_activity: Option<i64> = None;
    let mut count: u64 = 0;
    let flush = |current: &mut Option<(String, Item)>, items: &mut Vec<Item>| {
        if let Some((_, item)) = current.take() {
            if !item.text.trim().is_empty() {
                items.push(item);
            }
        }
    };
    while let Some(row) = rows.next()? {
        count += 1;
        let message: String = row.get(0)?;
        let role: Option<String> = row.get(1)?;
        let summary = matches!(
            row.get::<_, rusqlite::types::Value>(2)?,
            rusqlite::types::Value::Integer(1)
        );
        let created: i64 = row.get(3)?;
        let updated: Option<i64> = row.get(4)?;
        let kind: Option<String> = row.get(5)?;
        let synthetic = matches!(
            row.get::<_, rusqlite::types::Value>(6)?,
            rusqlite::types::Value::Integer(1)
        );
        let data: String = row.get(7)?;
        last_activity = Some(last_activity.map_or(created, |a| a.max(updated.unwrap_or(created))));
        if current.as_ref().is_some_and(|(m, _)| *m != message) {
            flush(&mut current, &mut items);
        }
        if kind.as_deref() == Some("compaction") {
            // Everything before the compaction's message is replaced by the summary after it.
            flush(&mut current, &mut items);
            items.clear();
            continue;
        }
        if synthetic {
            continue;
        }
        let Some(text) = part_text(&data) else {
            continue;
        };
        let (kind, text) = match role.as_deref() {
            Some("user") => (ItemKind::User, unquoted(&text)),
            Some("assistant") if summary => (ItemKind::Summary, text.trim().to_string()),
            Some("assistant") => (ItemKind::Assistant, text.trim().to_string()),
            _ => continue,
        };
        match &mut current {
            Some((_, item)) if item.kind == kind => {
                item.text.push('\n');
                item.text.push_str(&text);
            }
            _ => {
                flush(&mut current, &mut items);
                current = Some((
                    message,
                    Item {
                        kind,
                        text,
                        time: created,
                    },
                ));
            }
        }
    }
    flush(&mut current, &mut items);
    Ok(Some(Conversation {
        items,
        last_line: count.checked_sub(1),
        last_activity,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_titles_and_run_quotes_are_recognised() {
        assert!(is_default_title("New session - 2026-12-04T00:55:02.600Z"));
        assert!(is_default_title("Child session - 2026-12-04T00:55:02.600Z"));
        assert!(!is_default_title("New session - my plan"));
        assert!(!is_default_title("OC Renamed Session ✓"));
        assert_eq!(unquoted("\"fix the bug\""), "fix the bug");
        assert_eq!(unquoted("\"say \\\"hi\\\" twice\""), "say \"hi\" twice");
        assert_eq!(unquoted("\"word\""), "\"word\"");
        assert_eq!(unquoted("typed in the TUI"), "typed in the TUI");
    }

    fn database() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("opencode");
        std::fs::create_dir(&home).unwrap();
        let conn = Connection::open(home.join(DB)).unwrap();
        conn.execute_batch(
            "CREATE TABLE session (id text PRIMARY KEY, project_id text, parent_id text, directory text NOT NULL, title text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL);
             CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
             CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
             INSERT INTO session VALUES ('ses_1', 'global', NULL, '/w', 'New session - 2026-12-04T00:55:02.600Z', 10, 90);
             INSERT INTO session VALUES ('ses_child', 'global', 'ses_1', '/w', 'Child session - 2026-12-04T00:55:02.600Z', 11, 12);
             INSERT INTO message VALUES ('msg_1', 'ses_1', 20, 20, '{\"role\":\"user\"}');
             INSERT INTO part VALUES ('prt_1', 'msg_1', 'ses_1', 20, 20, '{\"type\":\"text\",\"text\":\"\\\"OC-T1 first question\\\"\"}');
             INSERT INTO message VALUES ('msg_2', 'ses_1', 30, 31, '{\"role\":\"assistant\"}');
             INSERT INTO part VALUES ('prt_2', 'msg_2', 'ses_1', 30, 30, '{\"type\":\"reasoning\",\"text\":\"THINK\"}');
             INSERT INTO part VALUES ('prt_3', 'msg_2', 'ses_1', 30, 30, '{\"type\":\"text\",\"text\":\"first answer\"}');
             INSERT INTO part VALUES ('prt_4', 'msg_2', 'ses_1', 30, 30, '{\"type\":\"tool\",\"state\":{\"output\":\"TOOL-OUT\"}}');
             INSERT INTO message VALUES ('msg_3', 'ses_1', 40, 40, '{\"role\":\"user\"}');
             INSERT INTO part VALUES ('prt_5', 'msg_3', 'ses_1', 40, 40, '{\"type\":\"compaction\",\"auto\":false}');
             INSERT INTO message VALUES ('msg_4', 'ses_1', 50, 50, '{\"role\":\"assistant\",\"summary\":true,\"mode\":\"compaction\"}');
             INSERT INTO part VALUES ('prt_6', 'msg_4', 'ses_1', 50, 50, '{\"type\":\"text\",\"text\":\"OC-SUMMARY two questions\"}');
             INSERT INTO message VALUES ('msg_5', 'ses_1', 60, 60, '{\"role\":\"user\"}');
             INSERT INTO part VALUES ('prt_7', 'msg_5', 'ses_1', 60, 60, '{\"type\":\"text\",\"text\":\"after\"}');
             INSERT INTO part VALUES ('prt_8', 'msg_5', 'ses_1', 60, 60, '{\"type\":\"text\",\"text\":\"attached file\",\"synthetic\":true}');",
        )
        .unwrap();
        (dir, home)
    }

    #[test]
    fn listing_titles_and_the_conversation_after_a_compaction() {
        let (_dir, home) = database();
        let rows = Opencode.list(&home).unwrap();
        assert_eq!(rows.len(), 1, "children are not listed");
        assert_eq!(rows[0].head.id, "ses_1");
        assert_eq!(rows[0].title.as_deref(), Some("OC-T1 first question"));
        let conversation = Opencode.conversation(&home, "ses_1").unwrap().unwrap();
        let items: Vec<(ItemKind, &str)> = conversation
            .items
            .iter()
            .map(|i| (i.kind, i.text.as_str()))
            .collect();
        assert_eq!(
            items,
            [
                (ItemKind::Summary, "OC-SUMMARY two questions"),
                (ItemKind::User, "after"),
            ]
        );
        assert_eq!(Opencode.conversation(&home, "ses_none").unwrap(), None);
    }
}
