//! One session's row: the facts a listing, a search hit and the popup show about a session.
//!
//! Purpose: one type for a session's row wherever it travels. The indexer writes these facts
//! from a session it read ([`super::index`]), and a listing straight from the index reads them
//! back (`recent.rs`, the MCP server's `resources/list`). Everything else that shows a row
//! wraps it and adds only what is its own, reading the row's fields through `Deref`: the
//! searcher's in-memory rows (`SessionInfo`) add what matching needs (lower-cased copies,
//! masks, arena spans); a search hit (`Hit`) adds its score, matched fields and snippet; the
//! `@` popup's row (`tui::lookup::PopupRow`) adds the live badge and the snippet. No field of
//! the row is repeated in another struct.
//!
//! The row is also its own wire form: serialized, its keys come in the order of its fields,
//! named in camelCase (`sessionId`, `title`, `firstPrompt`, `cwd`, `createdAt`,
//! `lastActivity`, `messages`, `conversationBytes`, `source`; absent values are `null`), and a
//! hit's JSON (`dsh-refs search --json`) is that object followed by `score`, `matched` and
//! `snippet`.
//!
//! Invariant: `last_activity` is never before `created_at`; `source` is `None` for a dsh
//! session and the other agent's name (`claude`, `codex`) otherwise; `first_prompt` holds at
//! most 512 bytes; the serialized keys are exactly the nine above, in that order. Proof: the
//! indexer's unit tests in `index/write.rs` and the listing's in `recent.rs`; the key order by
//! the unit test below, the hit's bytes by the one in `search/mod.rs`, and the printed keys by
//! `tests/discovery/search.rs` over the real binary.

use serde::Serialize;

/// The per-session fields of the index (one row of `sessions`). The fields are in wire order:
/// serialized, each is a key named in camelCase (`id` is `sessionId`), in this order, `null`
/// when absent. `Default` is the row of nothing known: an empty id, zeros and `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// `sessionId`: the whole session id (`claude:<uuid>` / `codex:<uuid>` for other agents'
    /// sessions).
    #[serde(rename = "sessionId")]
    pub id: String,
    /// `title`: the session's current title; `None` when it has none or it could not be read.
    pub title: Option<String>,
    /// `firstPrompt`: the first direct user prompt (not a checkpoint), trimmed and cut to at
    /// most 512 bytes.
    pub first_prompt: Option<String>,
    /// `cwd`: the working directory of the session header; `None` when the header has none.
    pub cwd: Option<String>,
    /// `createdAt`: creation time from the header, epoch milliseconds.
    pub created_at: i64,
    /// `lastActivity`: the time of the latest event, epoch milliseconds; never before
    /// `created_at`.
    pub last_activity: i64,
    /// `messages`: projected conversation items (SPEC §3.5), checkpoints included.
    pub messages: u64,
    /// `conversationBytes`: UTF-8 bytes of the projected items' text, summed.
    pub conversation_bytes: u64,
    /// `source`: the other agent it came from (`claude`, `codex`); `None` for a dsh session.
    pub source: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::SessionMeta;

    #[test]
    fn a_row_serializes_its_keys_in_wire_order() {
        let row = SessionMeta {
            id: "codex:1".into(),
            title: None,
            first_prompt: Some("hi".into()),
            cwd: Some("/w".into()),
            created_at: 1,
            last_activity: 2,
            messages: 3,
            conversation_bytes: 4,
            source: Some("codex".into()),
        };
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            concat!(
                r#"{"sessionId":"codex:1","title":null,"firstPrompt":"hi","cwd":"/w","#,
                r#""createdAt":1,"lastActivity":2,"messages":3,"conversationBytes":4,"#,
                r#""source":"codex"}"#
            )
        );
    }
}
