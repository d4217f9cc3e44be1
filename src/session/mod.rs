//! The session layer: the dsh log format, the on-disk store, sessions live in this process, and
//! the `SessionQuery` read interface that everything above consumes.

pub(crate) mod checksum;
// Parts of this room serve only the faces (the TUI, the command line, the MCP server); a
// build without them leaves those parts unused.
#[cfg_attr(partial_faces, allow(dead_code))]
pub(crate) mod civil;
pub(crate) mod clock;
pub mod error;
pub mod external;
pub(crate) mod files;
pub mod format;
pub(crate) mod live;
pub(crate) mod message_text;
pub mod paths;
pub(crate) mod query;
pub mod reader;
mod skim;
pub mod store;
pub mod surface;
// Parts of this room serve only the faces (the TUI, the command line, the MCP server); a
// build without them leaves those parts unused.
#[cfg_attr(partial_faces, allow(dead_code))]
pub(crate) mod title;
pub mod writer;

pub use clock::now_ms;
pub use error::SessionError;
pub use format::{
    ContentBlock, Event, EventData, Message, MessageSource, Record, SessionHeader, SurfaceOp,
};
pub use live::{HostSessions, LiveSession, LiveSessions};
pub use message_text::{message_text, MessageText, SourceClass};
pub use query::{
    sort_sessions, BoxFuture, PlainConversation, PlainMessage, PlainRole, SessionQuery,
    SessionSummary, SurfaceSnapshot,
};
pub use reader::Encoding;
pub use skim::skim;
pub use store::DiskStore;
pub use writer::{NewEvent, SessionWriter};
