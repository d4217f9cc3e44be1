//! opencode sessions (`$XDG_DATA_HOME/opencode/opencode.db`, SQLite in WAL mode).
//!
//! Purpose: opencode 1.x keeps every session in one database: `session` rows (id, directory,
//! title, times, `parent_id` for a sub-agent's child session, `time_archived`), `message` rows
//! (`data`: JSON with `role`, `summary`) and `part` rows (`data`: JSON with `type`, `text`,
//! `synthetic`). The listing is the sessions that are not children (a child is a sub-agent's
//! work, reached through its parent); archived sessions are listed like the others (archiving
//! only tidies opencode's own picker: the conversation is still the person's, and a reference
//! to it is still wanted). The title is `session.title` unless it is opencode's default
//! (`New session - <ISO time>`), else the first prompt. The conversation is the `text` parts
//! of user and assistant messages in `(time_created, id)` order, parts by id. A compaction
//! (`/compact`) is a user message with a `compaction` part followed by an assistant message
//! with `summary: true`: once that summary's text is read it stands in for everything before the
//! compaction (the latest compaction wins; one whose summary never came drops nothing).
//! Reasoning, tool, step, patch, snapshot and compaction parts, and text opencode marks
//! `synthetic` (attached files, the "continue" note after an automatic compaction), are not
//! conversation.
//!
//! `opencode run` wraps each argument that holds a space in double quotes and escapes the `"`
//! inside, so `opencode run "fix the bug"` is stored as `"fix the bug"`. Those quotes are taken
//! off (see [`unquoted`]): the person never typed them, and every headless prompt would
//! otherwise read as a quotation. The same text typed into the TUI cannot be told apart (the
//! rows are identical), so a TUI prompt typed whole in quotes loses its outer pair too; a TUI
//! prompt with a quote inside that is not escaped (`"a" b`) is never touched.
//!
//! Invariant: nothing under the data directory is written, created or touched (`-wal` and
//! `-shm` included): the database is read through `sqlite_snapshot`
//! (private copies of the database and its log, kept while their stamps hold, consistent while
//! opencode writes), so sessions that live only in the log are seen. Every query is bounded:
//! at most [`MAX_SESSIONS`] sessions, [`MAX_PARTS`] parts a conversation, [`MAX_PART_BYTES`]
//! bytes of one part's JSON (a larger part is left out), [`MAX_DB_BYTES`] a file.
//!
//! Proof: the unit tests below (inline rows for every rule) and
//! `tests/session/opencode_sessions.rs` over a home the real opencode 1.18.33 wrote (a tool
//! call, a sub-agent, `/compact`, `/rename`, one session only in its log), comparing every
//! file's bytes, mode and mtime before and after.

use super::agent::{AgentFormat, DatabaseFormat, DatabaseRow, Layout, SideNames, TitleScan};
use super::scan::LineSink;
use super::sqlite_snapshot;
use super::sqlite_snapshot::wal_of;
use super::{title_line, Conversation, Head, Item, ItemKind};
use crate::session::error::{Result, SessionError};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

/// The most sessions listed.
pub const MAX_SESSIONS: usize = 200_000;
/// The most text parts read for one conversation.
pub const MAX_PARTS: usize = 200_000;
/// The most bytes of one part's JSON read (a larger part is left out of the conversation).
pub const MAX_PART_BYTES: usize = 8 << 20;
/// The largest database (or log) read.
pub const MAX_DB_BYTES: u64 = 4 << 30;

/// Part types the projection reads (`text`; `compaction` marks a `/compact`).
pub const USED_PART_TYPES: &[&str] = &["text", "compaction"];
/// Part types opencode writes that are not conversation: thinking, tool calls and results,
/// step and snapshot bookkeeping, attachments, sub-agent and retry markers.
pub const IGNORED_PART_TYPES: &[&str] = &[
    "reasoning",
    "tool",
    "step-start",
    "step-finish",
    "patch",
    "snapshot",
    "file",
    "agent",
    "subtask",
    "retry",
];

/// opencode (`$XDG_DATA_HOME/opencode/opencode.db`; ids `opencode:<ses_…>`).
pub struct Opencode;

impl AgentFormat for Opencode {
    fn layout(&self) -> &'static Layout {
        const LAYOUT: Layout = Layout {
            name: "opencode",
            product: "opencode",
            // `XDG_DATA_HOME` names the data directory; opencode's is `opencode` below it.
            home_env: "XDG_DATA_HOME",
            default_home: ".local/share/opencode",
            sessions_subdir: ".",
            depth: 0,
        };
        &LAYOUT
    }

    fn home_from_env(&self, value: &str) -> Option<PathBuf> {
        let value = value.trim();
        (!value.is_empty()).then(|| Path::new(value).join("opencode"))
    }

    fn is_session_file(&self, _path: &Path) -> bool {
        false
    }

    fn read_head(&self, _path: &Path) -> Result<Option<Head>> {
        Ok(None)
    }

    fn title_scan(&self, saved: Option<&serde_json::Value>) -> Option<Box<dyn TitleScan>> {
        super::agent::title_scan_of::<NoTitle>(saved)
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

/// A title scan for an agent without session files (saved as `null`).
#[derive(Default, serde::Deserialize)]
struct NoTitle;

impl LineSink for NoTitle {
    fn line(&mut self, _: u64, _: &[u8]) -> bool {
        false
    }
}

impl TitleScan for NoTitle {
    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

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
        sqlite_snapshot::read(&home.join(DB), MAX_DB_BYTES, list_rows).map_err(|e| failed(home, e))
    }

    fn conversation(&self, home: &Path, own_id: &str) -> Result<Option<Conversation>> {
        sqlite_snapshot::read(&home.join(DB), MAX_DB_BYTES, |conn| {
            conversation(conn, own_id)
        })
        .map_err(|e| failed(home, e))
    }
}

/// Whether `title` is opencode's default (`New session - 2026-12-04T00:55:02.600Z`, or a
/// child's `Child session - …`), matched as opencode's own pattern does
/// (`^(New session - |Child session - )\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`): then the
/// first prompt names the session.
pub fn is_default_title(title: &str) -> bool {
    let Some(rest) = title
        .strip_prefix("New session - ")
        .or_else(|| title.strip_prefix("Child session - "))
    else {
        return false;
    };
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd.dddZ";
    rest.len() == SHAPE.len()
        && rest.bytes().zip(SHAPE).all(|(b, &s)| match s {
            b'd' => b.is_ascii_digit(),
            _ => b == s,
        })
}

/// A prompt without the pair of double quotes `opencode run` put around it: run wraps an
/// argument that holds a space in `"…"` and puts a backslash before every `"` inside, so only
/// text of exactly that shape is unwrapped (and its `\"` turned back into `"`); anything else,
/// such as `"a" and b` typed into the TUI, is returned as it is.
pub fn unquoted(text: &str) -> String {
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return text.to_string();
    };
    let bytes = inner.as_bytes();
    let escaped = bytes
        .iter()
        .enumerate()
        .all(|(i, &b)| b != b'"' || (i > 0 && bytes[i - 1] == b'\\'));
    if !inner.contains(' ') || !escaped {
        return text.to_string();
    }
    inner.replace("\\\"", "\"")
}

fn list_rows(conn: &Connection) -> rusqlite::Result<Vec<DatabaseRow>> {
    let mut stmt = conn.prepare(
        "SELECT id, directory, substr(title, 1, 4096), time_created FROM session \
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

/// The text of a part's JSON when it is at most [`MAX_PART_BYTES`] (else `NULL`), as SQL.
const PART_TEXT: &str =
    "CASE WHEN octet_length(p.data) <= ?2 THEN json_extract(p.data, '$.text') END";
/// Whether opencode marked the part as its own text, as SQL (`1` or `0`).
const SYNTHETIC: &str = "coalesce(json_extract(p.data, '$.synthetic'), 0) IS 1";

/// The session's first prompt (a text part of a user message that opencode did not add), as a
/// title.
fn first_prompt(conn: &Connection, id: &str) -> rusqlite::Result<Option<String>> {
    let sql = format!(
        "SELECT {PART_TEXT} FROM message m JOIN part p ON p.message_id = m.id \
         WHERE m.session_id = ?1 AND json_extract(m.data, '$.role') = 'user' \
         AND json_extract(p.data, '$.type') = 'text' AND NOT {SYNTHETIC} \
         ORDER BY m.time_created, m.id, p.id LIMIT 1"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(rusqlite::params![id, MAX_PART_BYTES as i64])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let text: Option<String> = row.get(0)?;
    Ok(text.and_then(|t| title_line(&unquoted(&t))))
}

fn conversation(conn: &Connection, id: &str) -> rusqlite::Result<Option<Conversation>> {
    let updated: Option<i64> = match conn.query_row(
        "SELECT time_updated FROM session WHERE id = ?1",
        [id],
        |r| r.get(0),
    ) {
        Ok(updated) => updated,
        Err(rusqlite::Error::QueryReturnedNoRows) => return Ok(None),
        Err(e) => return Err(e),
    };
    // Only the parts the projection can use are read: text and compaction markers.
    let sql = format!(
        "SELECT m.id, json_extract(m.data, '$.role'), json_extract(m.data, '$.summary') IS 1, \
                m.time_created, json_extract(p.data, '$.type'), {SYNTHETIC}, {PART_TEXT} \
         FROM message m JOIN part p ON p.message_id = m.id \
         WHERE m.session_id = ?1 AND json_extract(p.data, '$.type') IN ('text', 'compaction') \
         ORDER BY m.time_created, m.id, p.id LIMIT ?3"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(rusqlite::params![
        id,
        MAX_PART_BYTES as i64,
        MAX_PARTS as i64
    ])?;
    let mut fold = Fold::default();
    while let Some(row) = rows.next()? {
        fold.part(Part {
            message: row.get(0)?,
            role: row.get(1)?,
            summary: row.get(2)?,
            created: row.get(3)?,
            kind: row.get(4)?,
            synthetic: row.get(5)?,
            text: row.get(6)?,
        });
    }
    Ok(Some(fold.finish(updated)))
}

/// One row of the conversation query: a text or compaction part with its message's fields.
struct Part {
    message: String,
    role: Option<String>,
    summary: bool,
    created: i64,
    kind: Option<String>,
    synthetic: bool,
    /// `None` for a part without text, or one over [`MAX_PART_BYTES`].
    text: Option<String>,
}

/// The projection, fed parts in conversation order; holds only what it keeps.
#[derive(Default)]
struct Fold {
    items: Vec<Item>,
    /// The message the item being built comes from, with the item.
    current: Option<(String, Item)>,
    parts: u64,
    last_time: Option<i64>,
}

impl Fold {
    fn flush(&mut self) {
        if let Some((_, item)) = self.current.take() {
            if !item.text.trim().is_empty() {
                self.items.push(item);
            }
        }
    }

    fn part(&mut self, part: Part) {
        self.parts += 1;
        self.last_time = Some(self.last_time.map_or(part.created, |t| t.max(part.created)));
        if self
            .current
            .as_ref()
            .is_some_and(|(message, _)| *message != part.message)
        {
            self.flush();
        }
        // The compaction part only marks the request; its summary message does the replacing.
        if part.kind.as_deref() != Some("text") || part.synthetic {
            return;
        }
        let Some(text) = part.text else {
            return;
        };
        let (kind, text) = match part.role.as_deref() {
            Some("user") => (ItemKind::User, unquoted(&text)),
            Some("assistant") if part.summary => (ItemKind::Summary, text.trim().to_string()),
            Some("assistant") => (ItemKind::Assistant, text.trim().to_string()),
            _ => return,
        };
        if text.trim().is_empty() {
            return;
        }
        match &mut self.current {
            Some((_, item)) if item.kind == kind => {
                item.text.push('\n');
                item.text.push_str(&text);
            }
            _ => {
                self.flush();
                if kind == ItemKind::Summary {
                    // The latest summary stands in for everything before it.
                    self.items.clear();
                }
                self.current = Some((
                    part.message,
                    Item {
                        kind,
                        text,
                        time: part.created,
                    },
                ));
            }
        }
    }

    fn finish(mut self, updated: Option<i64>) -> Conversation {
        self.flush();
        let last_activity = match (self.last_time, updated) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Conversation {
            items: self.items,
            last_line: self.parts.checked_sub(1),
            last_activity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_titles_are_opencodes_own_pattern_exactly() {
        assert!(is_default_title("New session - 2026-12-04T00:55:02.600Z"));
        assert!(is_default_title("Child session - 2026-12-04T00:55:02.600Z"));
        for not in [
            "New session - my plan",
            "OC Renamed Session ✓",
            "New session - 2026-12-04T00:55:02Z",
            "New session - 2026-12-04T00:55:02.600Z and more",
            "new session - 2026-12-04T00:55:02.600Z",
            "New session - 2026-12-04 00:55:02.600Z",
            "New session - ２026-12-04T00:55:02.600Z",
            "",
        ] {
            assert!(!is_default_title(not), "{not}");
        }
    }

    #[test]
    fn only_the_quotes_opencode_run_adds_are_taken_off() {
        assert_eq!(unquoted("\"fix the bug\""), "fix the bug");
        // run escapes every quote inside; they come back as typed.
        assert_eq!(unquoted(r#""say \"hi\" twice""#), r#"say "hi" twice"#);
        assert_eq!(
            unquoted(r#""a back\\slash \" kept""#),
            r#"a back\\slash " kept"#
        );
        // run leaves an argument without a space alone: these quotes were typed.
        assert_eq!(unquoted("\"word\""), "\"word\"");
        // An unescaped quote inside: not run's doing.
        assert_eq!(unquoted(r#""a" and "b""#), r#""a" and "b""#);
        assert_eq!(unquoted("\"open only"), "\"open only");
        assert_eq!(unquoted("\""), "\"");
        assert_eq!(unquoted("typed in the TUI"), "typed in the TUI");
        // The known cost: a TUI prompt typed whole in quotes looks exactly like run's.
        assert_eq!(unquoted("\"quoted in the TUI\""), "quoted in the TUI");
    }

    const SCHEMA: &str = "CREATE TABLE session (id text PRIMARY KEY, project_id text, parent_id text, directory text NOT NULL, title text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, time_archived integer);
         CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
         CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);";

    /// A data directory whose database holds `rows` (SQL) after the schema.
    fn home_with(rows: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("opencode");
        std::fs::create_dir(&home).unwrap();
        let conn = Connection::open(home.join(DB)).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn.execute_batch(rows).unwrap();
        (dir, home)
    }

    /// SQL inserting message `m` (role JSON fields) of session `s` at `t`, with parts
    /// `(part id, part JSON)`.
    fn message(s: &str, m: &str, t: i64, data: &str, parts: &[(&str, &str)]) -> String {
        let mut sql = format!("INSERT INTO message VALUES ('{m}', '{s}', {t}, {t}, '{data}');\n");
        for (p, json) in parts {
            sql.push_str(&format!(
                "INSERT INTO part VALUES ('{p}', '{m}', '{s}', {t}, {t}, '{json}');\n"
            ));
        }
        sql
    }

    fn items(home: &Path, id: &str) -> Vec<(ItemKind, String)> {
        Opencode
            .conversation(home, id)
            .unwrap()
            .unwrap()
            .items
            .into_iter()
            .map(|i| (i.kind, i.text))
            .collect()
    }

    const USER: &str = r#"{"role":"user","summary":{"diffs":[]}}"#;
    const ASSISTANT: &str = r#"{"role":"assistant","mode":"build"}"#;
    const SUMMARY: &str = r#"{"role":"assistant","mode":"compaction","summary":true}"#;
    const COMPACTION: &str = r#"{"type":"compaction","auto":false}"#;

    #[test]
    fn listing_leaves_children_out_keeps_archived_and_titles_by_the_rules() {
        let mut rows = String::from(
            "INSERT INTO session VALUES ('ses_a', 'global', NULL, '/w/a', 'New session - 2026-12-04T00:55:02.600Z', 10, 90, NULL);
             INSERT INTO session VALUES ('ses_child', 'global', 'ses_a', '/w/a', 'Child session - 2026-12-04T00:55:02.600Z', 11, 12, NULL);
             INSERT INTO session VALUES ('ses_named', 'global', NULL, '/w/b', 'Named by the person ✓', 20, 30, NULL);
             INSERT INTO session VALUES ('ses_archived', 'global', NULL, '', '   ', 5, 6, 7);
             INSERT INTO session VALUES ('ses_empty', 'global', NULL, '/w/c', 'New session - 2026-12-04T00:55:03.600Z', 1, 1, NULL);",
        );
        rows += &message(
            "ses_a",
            "msg_1",
            20,
            USER,
            &[
                (
                    "prt_0",
                    r#"{"type":"text","text":"attached file","synthetic":true}"#,
                ),
                (
                    "prt_1",
                    r#"{"type":"text","text":"\"OA first question\nsecond line\""}"#,
                ),
            ],
        );
        rows += &message(
            "ses_archived",
            "msg_2",
            6,
            USER,
            &[("prt_2", r#"{"type":"text","text":"archived prompt"}"#)],
        );
        let (_dir, home) = home_with(&rows);
        let listed = Opencode.list(&home).unwrap();
        let got: Vec<(&str, Option<&str>, Option<&str>, i64)> = listed
            .iter()
            .map(|r| {
                (
                    r.head.id.as_str(),
                    r.head.cwd.as_deref(),
                    r.title.as_deref(),
                    r.head.created_at,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("ses_named", Some("/w/b"), Some("Named by the person ✓"), 20),
                ("ses_a", Some("/w/a"), Some("OA first question"), 10),
                ("ses_archived", None, Some("archived prompt"), 5),
                ("ses_empty", Some("/w/c"), None, 1),
            ],
            "no child; the default title and a blank one fall back to the first prompt"
        );
    }

    #[test]
    fn the_conversation_is_text_in_order_without_thinking_tools_or_opencodes_own_text() {
        let mut rows = String::from(
            "INSERT INTO session VALUES ('ses_1', 'global', NULL, '/w', 't', 10, 90, NULL);",
        );
        // Inserted out of order: messages by (time_created, id), parts by id.
        rows += &message(
            "ses_1",
            "msg_b",
            30,
            ASSISTANT,
            &[
                ("prt_4", r#"{"type":"text","text":"second half"}"#),
                ("prt_1", r#"{"type":"step-start"}"#),
                ("prt_2", r#"{"type":"reasoning","text":"THINK"}"#),
                ("prt_3", r#"{"type":"text","text":"first half"}"#),
                (
                    "prt_5",
                    r#"{"type":"tool","tool":"bash","state":{"output":"TOOL-OUT"}}"#,
                ),
                ("prt_6", r#"{"type":"patch","hash":"x"}"#),
                ("prt_7", r#"{"type":"step-finish","reason":"stop"}"#),
            ],
        );
        rows += &message(
            "ses_1",
            "msg_a",
            30,
            USER,
            &[(
                "prt_0",
                r#"{"type":"text","text":"\"OA-T1 a question, é ✓\""}"#,
            )],
        );
        rows += &message(
            "ses_1",
            "msg_c",
            40,
            USER,
            &[
                ("prt_8", r#"{"type":"text","text":"OA-T2 typed"}"#),
                (
                    "prt_9",
                    r#"{"type":"text","text":"file contents","synthetic":true}"#,
                ),
                ("prt_a", r#"{"type":"file","url":"file:///x"}"#),
            ],
        );
        rows += &message(
            "ses_1",
            "msg_d",
            50,
            ASSISTANT,
            &[("prt_b", r#"{"type":"text","text":"  "}"#)],
        );
        rows += &message(
            "ses_1",
            "msg_e",
            60,
            r#"{"role":"system"}"#,
            &[("prt_c", r#"{"type":"text","text":"not a role we show"}"#)],
        );
        let (_dir, home) = home_with(&rows);
        assert_eq!(
            items(&home, "ses_1"),
            [
                (ItemKind::User, "OA-T1 a question, é ✓".to_string()),
                (ItemKind::Assistant, "first half\nsecond half".to_string()),
                (ItemKind::User, "OA-T2 typed".to_string()),
            ]
        );
        let conversation = Opencode.conversation(&home, "ses_1").unwrap().unwrap();
        assert_eq!(
            conversation.last_activity,
            Some(90),
            "the session's time_updated"
        );
        assert_eq!(Opencode.conversation(&home, "ses_none").unwrap(), None);
    }

    #[test]
    fn the_latest_compaction_summary_replaces_what_came_before_it() {
        let mut rows = String::from(
            "INSERT INTO session VALUES ('ses_1', 'global', NULL, '/w', 't', 10, 90, NULL);",
        );
        rows += &message(
            "ses_1",
            "msg_01",
            10,
            USER,
            &[("prt_01", r#"{"type":"text","text":"first question"}"#)],
        );
        rows += &message(
            "ses_1",
            "msg_02",
            11,
            ASSISTANT,
            &[("prt_02", r#"{"type":"text","text":"first answer"}"#)],
        );
        rows += &message("ses_1", "msg_03", 12, USER, &[("prt_03", COMPACTION)]);
        rows += &message(
            "ses_1",
            "msg_04",
            13,
            SUMMARY,
            &[("prt_04", r#"{"type":"text","text":"SUMMARY ONE"}"#)],
        );
        rows += &message(
            "ses_1",
            "msg_05",
            14,
            USER,
            &[("prt_05", r#"{"type":"text","text":"between"}"#)],
        );
        rows += &message("ses_1", "msg_06", 15, USER, &[("prt_06", COMPACTION)]);
        rows += &message(
            "ses_1",
            "msg_07",
            16,
            SUMMARY,
            &[
                ("prt_07", r#"{"type":"text","text":"SUMMARY TWO"}"#),
                ("prt_08", r#"{"type":"text","text":"its second part"}"#),
            ],
        );
        rows += &message(
            "ses_1",
            "msg_08",
            17,
            USER,
            &[
                (
                    "prt_09",
                    r#"{"type":"text","text":"Continue if you have next steps","synthetic":true,"metadata":{"compaction_continue":true}}"#,
                ),
                ("prt_10", r#"{"type":"text","text":"after"}"#),
            ],
        );
        rows += &message(
            "ses_1",
            "msg_09",
            18,
            ASSISTANT,
            &[("prt_11", r#"{"type":"text","text":"answer after"}"#)],
        );
        // A compaction whose summary never came (the request failed) drops nothing.
        rows += &message("ses_1", "msg_10", 19, USER, &[("prt_12", COMPACTION)]);
        rows += &message(
            "ses_1",
            "msg_11",
            20,
            r#"{"role":"assistant","mode":"compaction","summary":true,"error":{"name":"APIError"}}"#,
            &[],
        );
        let (_dir, home) = home_with(&rows);
        assert_eq!(
            items(&home, "ses_1"),
            [
                (
                    ItemKind::Summary,
                    "SUMMARY TWO\nits second part".to_string()
                ),
                (ItemKind::User, "after".to_string()),
                (ItemKind::Assistant, "answer after".to_string()),
            ]
        );
    }

    #[test]
    fn a_part_over_the_limit_is_left_out_not_cut() {
        let big = "x".repeat(MAX_PART_BYTES);
        let mut rows = String::from(
            "INSERT INTO session VALUES ('ses_1', 'global', NULL, '/w', 'New session - 2026-12-04T00:55:02.600Z', 10, 90, NULL);",
        );
        rows += &message(
            "ses_1",
            "msg_1",
            10,
            USER,
            &[
                ("prt_1", &format!(r#"{{"type":"text","text":"{big}"}}"#)),
                ("prt_2", r#"{"type":"text","text":"small"}"#),
            ],
        );
        let (_dir, home) = home_with(&rows);
        assert_eq!(
            items(&home, "ses_1"),
            [(ItemKind::User, "small".to_string())]
        );
        assert_eq!(
            Opencode.list(&home).unwrap()[0].title,
            None,
            "the first prompt was too big"
        );
    }

    #[test]
    fn a_file_that_is_not_opencodes_database_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DB), b"not a database at all, just bytes").unwrap();
        let err = Opencode.list(dir.path()).unwrap_err().to_string();
        assert!(err.contains("opencode.db"), "{err}");
        let (_dir, home) = home_with("");
        let conn = Connection::open(home.join(DB)).unwrap();
        conn.execute_batch("DROP TABLE part").unwrap();
        drop(conn);
        let err = Opencode.conversation(&home, "ses_1").map(|_| ());
        assert!(err.is_ok(), "no such session yet: {err:?}");
        conn_insert(
            &home,
            "INSERT INTO session VALUES ('ses_1', 'g', NULL, '/w', 't', 1, 2, NULL);",
        );
        let err = Opencode
            .conversation(&home, "ses_1")
            .unwrap_err()
            .to_string();
        assert!(err.contains("opencode.db") && err.contains("part"), "{err}");
    }

    fn conn_insert(home: &Path, sql: &str) {
        Connection::open(home.join(DB))
            .unwrap()
            .execute_batch(sql)
            .unwrap();
    }
}
