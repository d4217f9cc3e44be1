//! One session's row in the index: the facts a listing shows about a session.
//!
//! Purpose: the indexer writes these facts from a session it read ([`super::index`]), and a
//! listing straight from the index reads them back ([`super::recent`], the MCP server's
//! `resources/list`), and the searcher's in-memory rows (`SessionInfo`) carry it beside what
//! matching needs (lower-cased copies, masks, arena spans; its fields read through `Deref`).
//! A search hit (`Hit`) stays its own type: it is the wire form `dsh-refs search --json`
//! prints, with its own key order and the score, matched fields and snippet.
//!
//! Invariant: `last_activity` is never before `created_at`; `source` is `None` for a dsh
//! session and the other agent's name (`claude`, `codex`) otherwise; `first_prompt` holds at
//! most 512 bytes. Proof: the indexer's unit tests in `index/write.rs` and the listing's in
//! `recent.rs`.

/// The per-session fields of the index (one row of `sessions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMeta {
    /// The whole session id (`claude:<uuid>` / `codex:<uuid>` for other agents' sessions).
    pub id: String,
    /// The session's current title; `None` when it has none or it could not be read.
    pub title: Option<String>,
    /// The working directory of the session header; `None` when the header has none.
    pub cwd: Option<String>,
    /// Creation time from the header, epoch milliseconds.
    pub created_at: i64,
    /// The time of the latest event, epoch milliseconds; never before `created_at`.
    pub last_activity: i64,
    /// Projected conversation items (SPEC §3.5), checkpoints included.
    pub messages: u64,
    /// UTF-8 bytes of the projected items' text, summed.
    pub conversation_bytes: u64,
    /// The first direct user prompt (not a checkpoint), trimmed and cut to at most 512 bytes.
    pub first_prompt: Option<String>,
    /// The other agent it came from (`claude`, `codex`); `None` for a dsh session.
    pub source: Option<String>,
}
