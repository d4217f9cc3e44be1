//! The in-memory copy of the session rows a search walks.
//!
//! Purpose: per-session fields (id, title, cwd, times, sizes, first prompt) are loaded from the
//! database once per change and kept in scan order: most recent activity first, lower-cased
//! titles and ids in two arenas, each distinct cwd once, and per row the characters its fields
//! hold. Invariant: a row's masks and spans describe its own fields (a row fetched outside the
//! copy has none and is matched field by field). Proof: the mask test in [`super::matching`],
//! and `tests/discovery/search.rs`.

use crate::discovery::meta::SessionMeta;
use crate::discovery::recent::{meta_at, COLUMNS};
use crate::session::title::own_words_of_title;
use rusqlite::{Connection, OptionalExtension};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The `cwd_key` of a row without an interned cwd.
pub(super) const NO_CWD: u32 = u32::MAX;

/// One session as the index describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    /// The row's SQLite rowid in `sessions` (stable until the session is removed or the
    /// database rebuilt; full-text rows name their session by it).
    pub rowid: i64,
    /// The session's facts as the index holds them (its fields read through `Deref`:
    /// `info.title` is `info.meta.title`).
    pub meta: SessionMeta,
    /// The id and cwd lower-cased once, for matching, and where the id's own part starts
    /// (after an agent namespace).
    pub(super) id_lower: String,
    pub(super) own_start: usize,
    /// Where `id_lower` sits in the searcher's id arena (start, length), as titles do.
    pub(super) id_span: Option<(u32, u32)>,
    pub(super) cwd_lower: Option<String>,
    /// Which of the searcher's distinct cwds this row's is ([`NO_CWD`] for none, or for a row
    /// fetched outside the in-memory copy): a cwd is matched once per search, not once per row.
    pub(super) cwd_key: u32,
    /// Which characters title, id and cwd hold ([`char_mask`]): a row whose fields lack one of
    /// the query's characters cannot match in memory and is skipped without matching.
    pub(super) masks: [u64; 3],
    /// Where the title, lower-cased, sits in the searcher's title arena when it is plain ASCII
    /// (start, length): a query's words are first tried on it as plain subsequences
    /// ([`subsequences`]), and only a title holding them all is scored. One arena in scan
    /// order, not a buffer per row: the scan reads it sequentially instead of missing the
    /// cache on every row.
    pub(super) title_span: Option<(u32, u32)>,
}

impl std::ops::Deref for SessionInfo {
    type Target = SessionMeta;

    fn deref(&self) -> &SessionMeta {
        &self.meta
    }
}

impl SessionInfo {
    /// A row for a session known from a listing only (no index): `rowid` is any number unique
    /// among the rows searched together; no messages, sizes or first prompt are known, and the
    /// last activity is taken to be the creation time.
    pub fn listed(
        rowid: i64,
        id: String,
        title: Option<String>,
        cwd: Option<String>,
        created_at: i64,
        source: Option<String>,
    ) -> SessionInfo {
        SessionInfo::of(
            rowid,
            SessionMeta {
                id,
                title,
                cwd,
                created_at,
                last_activity: created_at,
                messages: 0,
                conversation_bytes: 0,
                first_prompt: None,
                source,
            },
        )
    }

    /// The row `rowid` of `meta`, ready for matching.
    pub(super) fn of(rowid: i64, meta: SessionMeta) -> SessionInfo {
        SessionInfo {
            rowid,
            meta,
            id_lower: String::new(),
            own_start: 0,
            id_span: None,
            cwd_lower: None,
            cwd_key: NO_CWD,
            masks: [0; 3],
            title_span: None,
        }
        .matchable()
    }

    /// Fills in the lower-cased fields and character masks matching reads.
    pub(super) fn matchable(mut self) -> SessionInfo {
        self.id_lower = self.meta.id.to_lowercase();
        self.own_start = self.id_lower.find(':').map_or(0, |i| i + 1);
        self.cwd_lower = self.meta.cwd.as_deref().map(str::to_lowercase);
        self.masks = [
            self.meta
                .title
                .as_deref()
                .map_or(0, |t| char_mask(own_words_of_title(t))),
            char_mask(&self.id_lower),
            self.cwd_lower.as_deref().map_or(0, char_mask),
        ];
        self
    }
}

/// An in-memory copy of the session rows built off the searcher (`Searcher::load`).
pub struct Loaded {
    pub(super) rows: Arc<Vec<SessionInfo>>,
    pub(super) at: Arc<HashMap<i64, u32>>,
    pub(super) cwds: Arc<Vec<(String, String)>>,
    pub(super) titles: Arc<Vec<u8>>,
    pub(super) ids: Arc<Vec<u8>>,
    pub(super) cost: Duration,
}

/// The in-memory copy as searches walk it: most recent activity first (the best hits by recency
/// come first, so the top-k keeps them and turns the rest away cheaply), where each rowid sits,
/// and the distinct cwds with each row's key into them.
#[allow(clippy::type_complexity)]
pub(super) fn arrange(
    mut rows: Vec<SessionInfo>,
) -> (
    Vec<SessionInfo>,
    HashMap<i64, u32>,
    Vec<(String, String)>,
    Vec<u8>,
    Vec<u8>,
) {
    rows.sort_by(|a, b| {
        b.last_activity
            .cmp(&a.last_activity)
            .then_with(|| b.rowid.cmp(&a.rowid))
    });
    let at = rows
        .iter()
        .enumerate()
        .map(|(i, info)| (info.rowid, i as u32))
        .collect();
    let mut keys: HashMap<String, u32> = HashMap::new();
    let mut cwds = Vec::new();
    let mut titles = Vec::new();
    let mut ids = Vec::new();
    for info in &mut rows {
        if let (Ok(start), Ok(len)) = (u32::try_from(ids.len()), u32::try_from(info.id_lower.len()))
        {
            ids.extend_from_slice(info.id_lower.as_bytes());
            info.id_span = Some((start, len));
        }
        if let Some(title) = info
            .meta
            .title
            .as_deref()
            .map(own_words_of_title)
            .filter(|t| t.is_ascii())
        {
            if let (Ok(start), Ok(len)) = (u32::try_from(titles.len()), u32::try_from(title.len()))
            {
                titles.extend(title.bytes().map(|b| b.to_ascii_lowercase()));
                info.title_span = Some((start, len));
            }
        }
        if let (Some(cwd), Some(lower)) = (&info.meta.cwd, &info.cwd_lower) {
            info.cwd_key = *keys.entry(cwd.clone()).or_insert_with(|| {
                cwds.push((cwd.clone(), lower.clone()));
                (cwds.len() - 1) as u32
            });
        }
    }
    (rows, at, cwds, titles, ids)
}

pub(super) fn load_rows(
    conn: &Connection,
    rowid: Option<i64>,
) -> rusqlite::Result<Vec<SessionInfo>> {
    let sql = format!("SELECT rowid, {COLUMNS} FROM sessions");
    let sql = sql.as_str();
    let map = |r: &rusqlite::Row<'_>| Ok(SessionInfo::of(r.get(0)?, meta_at(r, 1)?));
    match rowid {
        Some(rowid) => Ok(conn
            .query_row(&format!("{sql} WHERE rowid = ?1"), [rowid], map)
            .optional()?
            .into_iter()
            .collect()),
        None => {
            let mut stmt = conn.prepare(sql)?;
            let rows = stmt.query_map([], map)?;
            rows.collect()
        }
    }
}

/// A set of the characters `text` holds, as bits: ASCII letters (case-folded) and digits one bit
/// each, other ASCII characters sharing the rest. Text with any other character may match
/// anything after normalization (`é` matches `e`), so it holds every bit.
pub(super) fn char_mask(text: &str) -> u64 {
    let mut mask = 0u64;
    for c in text.bytes() {
        if !c.is_ascii() {
            return u64::MAX;
        }
        mask |= 1 << char_bit(c);
    }
    mask
}

pub(super) fn char_bit(c: u8) -> u32 {
    match c.to_ascii_lowercase() {
        c @ b'a'..=b'z' => u32::from(c - b'a'),
        c @ b'0'..=b'9' => 26 + u32::from(c - b'0'),
        c => 36 + u32::from(c) % 28,
    }
}
