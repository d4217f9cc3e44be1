//! The session layer: the dsh log format, the on-disk store, sessions live in this process, and
//! the `SessionQuery` read interface that everything above consumes.

pub mod error;
pub mod format;
pub mod paths;
pub mod query;

pub use error::SessionError;
pub use format::{
    ContentBlock, Event, EventData, Message, MessageSource, Record, SessionHeader, SurfaceOp,
};
pub use query::{BoxFuture, SessionQuery, SessionSummary, SurfaceSnapshot};
