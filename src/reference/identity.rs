//! Who the reference service works for: the agent's own session and its working directory.
//!
//! Purpose: the one type both the ranking and the service need, in a file of its own so that
//! neither has to import the other. Invariant and proof: plain data, built only by
//! [`AgentIdentity::new`]; the service's tests use it throughout.

/// The session on whose behalf the service works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentIdentity {
    /// The agent's own session id: never a candidate, and mentioning it is `SELF_REFERENCE`.
    pub id: String,
    /// The agent's working directory; sessions with the same cwd rank first. `None`: no cwd.
    pub cwd: Option<String>,
}

impl AgentIdentity {
    /// The agent of session `id` working in `cwd`.
    pub fn new(id: impl Into<String>, cwd: Option<String>) -> Self {
        AgentIdentity { id: id.into(), cwd }
    }
}
