//! Session references: `dsh-session:` URIs, `@`-mentions, and the service that turns a mentioned
//! session into a bounded, read-only, untrusted snapshot for the model (SPEC §2–§3).
//!
//! Everything except `service` is pure and synchronous: the URI codec (`uri`), mention
//! formatting and parsing (`mention`), projection of a folded surface ([`project`]),
//! retention under the byte budget (`retention`) and the model-facing text (`render`, [`context_json`]).

pub(crate) mod candidate;
pub(crate) mod config;
pub(crate) mod error;
pub(crate) mod identity;
pub(crate) mod json;
pub(crate) mod mention;
pub(crate) mod projection;
pub(crate) mod ranking;
// Parts of this room serve only the faces (the TUI, the command line, the MCP server); a
// build without them leaves those parts unused.
#[cfg_attr(partial_faces, allow(dead_code))]
pub(crate) mod render;
pub(crate) mod retention;
pub(crate) mod service;
pub(crate) mod uri;

pub use candidate::Candidate;
pub use config::SessionReferenceConfig;
pub use error::{ErrorCode, SessionReferenceError};
pub use json::{stringify, tag_safe};
pub use mention::{
    format_session_reference_mention, parse_session_reference_text, session_reference_spans,
    ParsedReference, ParsedText,
};
pub use projection::{project, ConversationItem, Role};
pub use ranking::CandidateFilter;
pub use render::{context_json, ReferenceMeta, RetentionStats, SourceData, CLOSE_TAG, OPEN_TAG};
pub use service::{AgentIdentity, Prepared, ReferenceInput, ReferencePreview, SessionReferences};
pub use uri::{decode_session_reference_uri, encode_session_reference_uri, SESSION_URI_PREFIX};
