//! One read session as rows: its `sessions` row, its heading row and its conversation chunks.
//!
//! Purpose: the write path every pass and targeted refresh shares. Invariant: a grown log whose
//! indexed items are still a prefix of its items (by the hash chain) has only its last chunk and
//! new items written; anything else has its chunks replaced; the full-text table gets each row's
//! distinct words ([`crate::discovery::terms`]). Proof: the chunking, chain and clipping tests
//! below, and the growth and compaction cases of `tests/discovery/index.rs`.

use super::{CHUNK_BYTES, FIRST_PROMPT_BYTES};
use crate::discovery::meta::SessionMeta;
use crate::discovery::terms::index_terms;
use crate::reference::projection::{ConversationItem, Role};
use crate::session::external;
use crate::session::title::{own_words, own_words_of_title, reference_labels};
use crate::session::SessionSummary;
use rusqlite::{params, Connection, OptionalExtension};

/// Records a session the store could not read: its header fields and `error`, no text (it is
/// read again once its stamp changes).
pub(super) fn record_failure(
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

pub(super) struct Outcome {
    pub(super) appended: bool,
    pub(super) bytes: u64,
}

impl SessionMeta {
    pub(super) fn of(
        summary: &SessionSummary,
        title: Option<String>,
        last_event: Option<i64>,
        items: &[ConversationItem],
        labels: &[String],
    ) -> SessionMeta {
        // The person's own words: the labels of the sessions it referenced taken out.
        let first_prompt = items
            .iter()
            .find(|i| i.role == Role::User && !i.checkpoint)
            .map(|i| own_words(&i.text, labels))
            .filter(|t| !t.is_empty())
            .map(|t| clip_bytes(&t, FIRST_PROMPT_BYTES).to_string());
        SessionMeta {
            id: summary.id().to_string(),
            title,
            cwd: summary.cwd().map(str::to_string),
            created_at: summary.created_at(),
            last_activity: last_event.unwrap_or(0).max(summary.created_at()),
            messages: items.len() as u64,
            conversation_bytes: items.iter().map(|i| i.text.len() as u64).sum(),
            first_prompt,
            source: external::source_of(&summary.header).map(|a| a.name().to_string()),
        }
    }
}

/// The labels of the session references made before the session's first direct prompt (the
/// contexts of that prompt), from a conversation surface.
pub(super) fn first_prompt_labels(snapshot: &crate::session::SurfaceSnapshot) -> Vec<String> {
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

pub(super) fn chunk_text(items: &[ConversationItem]) -> String {
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
pub(super) fn delete_rows(conn: &Connection, sid: i64, kind: Option<i64>) -> rusqlite::Result<()> {
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

pub(super) fn delete_session(conn: &Connection, id: &str) -> rusqlite::Result<()> {
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
pub(super) type Indexed = (i64, i64, i64, Option<i64>, i64, Option<String>);

/// Writes one session's row and text: appends when the indexed items are a prefix of `items`,
/// else replaces them. Phases: what is indexed now ([`indexed_state`]), where writing starts
/// ([`start_point`]), the rows ([`insert_rows`]), then the session's row ([`update_session`]).
pub(super) fn write_session(
    conn: &Connection,
    doc: &SessionMeta,
    stamp: Option<String>,
    items: &[ConversationItem],
) -> rusqlite::Result<Outcome> {
    let chains = chain(items);
    let old = indexed_state(conn, &doc.id)?;
    let Start {
        rowid,
        from,
        appended,
    } = start_point(conn, &doc.id, old, &chains)?;
    let (bytes, tail) = insert_rows(conn, rowid, doc, items, from)?;
    update_session(
        conn,
        rowid,
        doc,
        stamp,
        items.len(),
        chains.last().copied().unwrap_or(0),
        tail,
    )?;
    Ok(Outcome { appended, bytes })
}

/// What the index holds of session `id` now, if anything.
fn indexed_state(conn: &Connection, id: &str) -> rusqlite::Result<Option<Indexed>> {
    conn.prepare_cached(
        "SELECT rowid, items, chain, tail_chunk, tail_items, title FROM sessions WHERE id = ?1",
    )?
    .query_row([id], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        ))
    })
    .optional()
}

/// Where writing a session starts: its row, the first item to write, and whether this only
/// appends.
struct Start {
    rowid: i64,
    from: usize,
    appended: bool,
}

/// Where writing starts: after the indexed prefix if it is still a prefix of the items whose
/// chain is `chains` (minus the last, partial chunk, deleted here and rewritten with the new
/// items), else from scratch (the session's rows deleted, or its row made).
fn start_point(
    conn: &Connection,
    id: &str,
    old: Option<Indexed>,
    chains: &[i64],
) -> rusqlite::Result<Start> {
    Ok(match old {
        Some((rowid, n, old_chain, tail_chunk, tail_items, _))
            if n > 0
                && (n as usize) <= chains.len()
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
            Start {
                rowid,
                from: (n - tail_items) as usize,
                appended: true,
            }
        }
        Some((rowid, _, _, _, _, _)) => {
            delete_rows(conn, rowid, None)?;
            Start {
                rowid,
                from: 0,
                appended: false,
            }
        }
        None => {
            conn.prepare_cached(
                "INSERT INTO sessions(id, created_at, last_activity, messages, conversation_bytes,
                    items, chain, tail_items) VALUES (?1, 0, 0, 0, 0, 0, 0, 0)",
            )?
            .execute([id])?;
            Start {
                rowid: conn.last_insert_rowid(),
                from: 0,
                appended: false,
            }
        }
    })
}

/// Inserts session `rowid`'s heading row and its conversation chunks from item `from` on: the
/// conversation bytes written, and the last chunk's row and item count.
fn insert_rows(
    conn: &Connection,
    rowid: i64,
    doc: &SessionMeta,
    items: &[ConversationItem],
    from: usize,
) -> rusqlite::Result<(u64, Option<(i64, i64)>)> {
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
    Ok((bytes, tail))
}

/// Writes session `rowid`'s row: the facts of `doc`, the stamp it was read at, and the state of
/// its indexed conversation (`items` items whose chain ends in `total_chain`, the last chunk).
fn update_session(
    conn: &Connection,
    rowid: i64,
    doc: &SessionMeta,
    stamp: Option<String>,
    items: usize,
    total_chain: i64,
    tail: Option<(i64, i64)>,
) -> rusqlite::Result<()> {
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
        items as i64,
        total_chain,
        tail_chunk,
        tail_items,
    ])?;
    Ok(())
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
    fn clipping_keeps_whole_characters() {
        assert_eq!(clip_bytes("héllo", 2), "h");
        assert_eq!(clip_bytes("héllo", 3), "hé");
        assert_eq!(clip_bytes("hi", 10), "hi");
    }
}
