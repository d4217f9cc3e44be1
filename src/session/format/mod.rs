//! The dsh session log format, version 0 (SPEC §1.2–§1.4).
//!
//! An [`Event`] keeps its `data` as raw JSON text so that unknown event types, unknown fields and
//! shapes we only partly understand survive a read/write cycle untouched, and so that readers only
//! pay for parsing the payloads they actually look at. Typed views ([`EventData`], [`Message`])
//! are decoded on demand; both on-disk message shapes (identified and flat) decode to the same
//! [`Message`].
//!
//! One room per record kind: `header` (line 0), `record` (an event or a packed row, and the
//! record visitor), `packed` (packed chunk rows), `content` (content blocks), `message`
//! (messages and their sources), `reference_meta` (a session-reference source's entries read
//! back), `shared` (an event's type and payload, held so that stubs and clones allocate
//! nothing), `event_data` (the typed payload per event type), and
//! `legacy` (the upgrade of the flat, older message shapes to the identified one, kept out of
//! the decoder). Every writer of a "type + known fields + unknown fields" object goes through
//! `write_map` (serde) or `object` (a JSON value), so known fields always come first, in the
//! SPEC's order, and unknown ones follow in the order they were read.
//!
//! Invariant: reading a record and writing it back gives the same JSON value, known fields first
//! in the SPEC's order. Proof: `tests/session/store.rs` (every fixture log read plain and zstd,
//! `round_trip_through_the_writer`, `flat_and_identified_shapes_fold_alike`),
//! `tests/reference/conformance.rs` (the SPEC's vectors, byte for byte) and
//! `tests/session/versions.rs`.

use serde::ser::SerializeMap;
use serde::Serializer;
use serde_json::{Map, Value};

pub(crate) mod content;
pub(crate) mod event;
pub(crate) mod event_data;
pub(crate) mod header;
mod legacy;
pub(crate) mod message;
pub(crate) mod packed;
mod record;
pub(crate) mod reference_meta;
pub(crate) mod shared;

pub use content::ContentBlock;
pub use event::{Event, SurfaceOp};
pub use event_data::EventData;
pub use header::{Extra, SessionHeader};
pub use message::{join_text, DisplayContent, Envelope, Message, MessageSource, COMPACT_PLUGIN};
pub use packed::{PackedChunks, PackedKind};
pub use record::Record;
pub use reference_meta::RecordedReference;
pub use shared::{EventKind, RawData};

/// The only format version this crate reads and writes.
pub const FORMAT_VERSION: u64 = 0;

/// `type` of a direct prompt or other user-role message (a surface event, SPEC §1.4).
pub const USER_MESSAGE: &str = "user/message";
/// `type` of a message added while a turn runs (a surface event; data `{turn, message}`).
pub const STEERING_MESSAGE: &str = "steering/message";
/// `type` of a finished assistant message of one step (a surface event).
pub const ASSISTANT_MESSAGE: &str = "assistant/message";
/// `type` of a tool's result message (a surface event; never projected into a snapshot).
pub const TOOL_RESULT: &str = "tool/result";
/// `type` of the start of a turn: data `{turn, trigger}` (log-only).
pub const TURN_START: &str = "turn/start";
/// `type` of the end of a turn: data `{turn, reason}` (log-only). A torn tail is only possible
/// after the last one.
pub const TURN_END: &str = "turn/end";
/// `type` of the start of a model step within a turn: data `{turn, step}` (log-only).
pub const STEP_START: &str = "step/start";
/// `type` of the end of a model step: data `{turn, step}` (log-only).
pub const STEP_END: &str = "step/end";
/// `type` of one streamed delta of an assistant step (log-only; runs of them are stored as
/// packed chunk rows, see [`PackedKind`]).
pub const ASSISTANT_CHUNK: &str = "assistant/chunk";
/// `type` of a tool call the model asked for: data `{turn, step, callId, name, arguments}`.
pub const TOOL_CALL: &str = "tool/call";
/// `type` of a title record: data `{title, messageSeqs, source}`; the last one in the raw log is
/// the session's title (SPEC §1.5).
pub const SESSION_TITLE: &str = "session/title";
/// `type` that opens a compaction (its seq leads a checkpoint's `sourceEventSeqs`).
pub const COMPACT_START: &str = "compact/start";
/// `type` of a compaction's summary, written before the checkpoint `user/message`.
pub const COMPACT_SUMMARY: &str = "compact/summary";
/// `type` that closes a compaction, written after the checkpoint.
pub const COMPACT_END: &str = "compact/end";
/// `type` of the model request header: data `{header:{config:{provider, model, …}}, reason}`,
/// logged before a session's first request and whenever the provider or model changes (SPEC §7).
pub const REQUEST_HEADER: &str = "request/header";

/// Event types that carry a `surfaceOp` and take part in the surface fold.
pub fn is_surface_type(kind: &str) -> bool {
    matches!(
        kind,
        USER_MESSAGE | STEERING_MESSAGE | ASSISTANT_MESSAGE | TOOL_RESULT
    )
}

/// A JSON number that is a whole number, as an `i64` (`3.0` counts: other writers emit it).
fn json_i64(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0)
            .map(|f| f as i64)
    })
}

/// Writes an object whose leading entries `known` writes (the type tag and known fields, in the
/// SPEC's order), followed by `extra` (unknown fields, in the order they were read).
fn write_map<S: Serializer>(
    serializer: S,
    extra: &Map<String, Value>,
    known: impl FnOnce(&mut S::SerializeMap) -> Result<(), S::Error>,
) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(None)?;
    known(&mut map)?;
    for (key, value) in extra {
        map.serialize_entry(key, value)?;
    }
    map.end()
}

/// The JSON object of `known` fields (in order) followed by `extra`; an unknown field named like
/// a known one replaces it in place.
fn object<'a>(
    known: impl IntoIterator<Item = (&'a str, Value)>,
    extra: &Map<String, Value>,
) -> Value {
    let mut map = Map::new();
    for (key, value) in known {
        map.insert(key.to_string(), value);
    }
    for (key, value) in extra {
        map.insert(key.clone(), value.clone());
    }
    Value::Object(map)
}
