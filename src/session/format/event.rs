//! One event record and the surface operation it may carry (SPEC §1.2, §1.5), apart from the
//! line that holds it ([`super::Record`]), so a packed chunk row expands into events without
//! knowing the record that holds rows.

use super::{is_surface_type, write_map, EventData, EventKind, Message, RawData};
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::fmt;

/// How a surface event changes the current surface (SPEC §1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    /// `"append"`: push the event onto the end of the current surface.
    Append,
    /// Splice the current surface nodes whose event seqs are `start` through `end` (inclusive, in
    /// surface order) out, put this event there. Seqs, not positions (see [`crate::session::surface`]).
    Replace {
        /// Seq of the first shadowed node.
        start: u64,
        /// Seq of the last shadowed node (equal to `start` for one node).
        end: u64,
    },
}

impl Serialize for SurfaceOp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SurfaceOp::Append => serializer.serialize_str("append"),
            SurfaceOp::Replace { start, end } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("op", "replace")?;
                map.serialize_entry("start", start)?;
                map.serialize_entry("end", end)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for SurfaceOp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SurfaceOpVisitor)
    }
}

/// `"append"`, or `{"op":"replace","start":S,"end":E}` (other keys ignored), read in place: an
/// op costs no allocation.
struct SurfaceOpVisitor;

impl<'de> Visitor<'de> for SurfaceOpVisitor {
    type Value = SurfaceOp;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("\"append\" or a replace object")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<SurfaceOp, E> {
        match name {
            "append" => Ok(SurfaceOp::Append),
            other => Err(E::custom(format!("unknown surfaceOp \"{other}\""))),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<SurfaceOp, A::Error> {
        #[derive(Deserialize)]
        #[serde(field_identifier, rename_all = "lowercase")]
        enum Key {
            Op,
            Start,
            End,
            #[serde(other)]
            Other,
        }
        let (mut op, mut start, mut end) = (None::<OpName>, None::<u64>, None::<u64>);
        while let Some(key) = access.next_key::<Key>()? {
            match key {
                Key::Op => op = Some(access.next_value()?),
                Key::Start => start = Some(access.next_value()?),
                Key::End => end = Some(access.next_value()?),
                Key::Other => {
                    access.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let op = op.ok_or_else(|| de::Error::missing_field("op"))?;
        let start = start.ok_or_else(|| de::Error::missing_field("start"))?;
        let end = end.ok_or_else(|| de::Error::missing_field("end"))?;
        match op {
            OpName::Replace => Ok(SurfaceOp::Replace { start, end }),
            OpName::Other(name) => Err(de::Error::custom(format!("unknown surfaceOp \"{name}\""))),
        }
    }
}

/// A replace object's `op`: `replace`, or the unknown name (for the error).
enum OpName {
    Replace,
    Other(String),
}

impl<'de> Deserialize<'de> for OpName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = OpName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<OpName, E> {
                Ok(match name {
                    "replace" => OpName::Replace,
                    other => OpName::Other(other.to_string()),
                })
            }
        }
        deserializer.deserialize_str(Name)
    }
}

/// One event record: `{"type","seq","time","data","sourceEventSeqs"?,"surfaceOp"?}`.
#[derive(Debug, Clone)]
pub struct Event {
    /// `type`: the event type (`"user/message"`, …; see the constants in [`super`]).
    pub kind: EventKind,
    /// `seq`: the event's sequence number, from 0 and contiguous over the whole log (packed members
    /// included).
    pub seq: u64,
    /// `time`: when the event happened, in epoch milliseconds.
    pub time: i64,
    /// The `data` payload exactly as it was read (or as it was encoded when written).
    pub data: RawData,
    /// `sourceEventSeqs`: the seqs this event was made from (a replace must list every node it
    /// shadows); `None` when absent (then not written).
    pub source_event_seqs: Option<Vec<u64>>,
    /// `surfaceOp`: `None` for log-only events; required on surface events.
    pub surface_op: Option<SurfaceOp>,
    /// Top-level fields this crate does not know.
    pub extra: Map<String, Value>,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.seq == other.seq
            && self.time == other.time
            && self.data.get() == other.data.get()
            && self.source_event_seqs == other.source_event_seqs
            && self.surface_op == other.surface_op
            && self.extra == other.extra
    }
}

impl Event {
    /// Builds an event from typed data. Surface types get `surfaceOp: "append"` unless `op` says
    /// otherwise; other types get none.
    pub fn new(seq: u64, time: i64, data: &EventData) -> Event {
        let kind = EventKind::new(data.kind());
        let surface_op = is_surface_type(&kind).then_some(SurfaceOp::Append);
        Event {
            kind,
            seq,
            time,
            data: data.to_raw().into(),
            source_event_seqs: None,
            surface_op,
            extra: Map::new(),
        }
    }

    /// Whether the event's type is one of the four surface types (it then carries a `surfaceOp`).
    pub fn is_surface(&self) -> bool {
        is_surface_type(&self.kind)
    }

    /// The typed payload. `session_id` names legacy (flat-shape) messages.
    pub fn decode(&self, session_id: &str) -> Result<EventData, serde_json::Error> {
        EventData::decode(&self.kind, &self.data, session_id, self.seq)
    }

    /// The message carried by a surface event, in the identified shape.
    pub fn message(&self, session_id: &str) -> Result<Option<Message>, serde_json::Error> {
        Ok(match self.decode(session_id)? {
            EventData::UserMessage(message) => Some(message),
            EventData::SteeringMessage { message, .. }
            | EventData::AssistantMessage { message, .. }
            | EventData::ToolResult { message, .. } => Some(message),
            _ => None,
        })
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        write_map(serializer, &self.extra, |map| {
            map.serialize_entry("type", &self.kind)?;
            map.serialize_entry("seq", &self.seq)?;
            map.serialize_entry("time", &self.time)?;
            map.serialize_entry("data", &self.data)?;
            if let Some(seqs) = &self.source_event_seqs {
                map.serialize_entry("sourceEventSeqs", seqs)?;
            }
            if let Some(op) = &self.surface_op {
                map.serialize_entry("surfaceOp", op)?;
            }
            Ok(())
        })
    }
}
