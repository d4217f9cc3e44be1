//! A mention candidate (SPEC §3.3 step 7).

use serde::Serialize;

/// `{sessionId, label, cwd?, createdAt}`; `cwd` is absent (not null) when the session has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// `sessionId`: the id to mention (a dsh id, or `claude:`/`codex:` namespaced).
    #[serde(rename = "sessionId")]
    pub session_id: String,
    /// The latest title, else the session id. Raw: escape before drawing (SPEC §5.2).
    pub label: String,
    /// `cwd`: the session's working directory; `None` when it has none (then not written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `createdAt`: when the session was created, in epoch milliseconds.
    #[serde(rename = "createdAt")]
    pub created_at: i64,
}
