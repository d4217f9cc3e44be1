//! The dsh session log format, version 0 (SPEC §1.2–§1.4).
//!
//! An [`Event`] keeps its `data` as raw JSON text so that unknown event types, unknown fields and
//! shapes we only partly understand survive a read/write cycle untouched, and so that readers only
//! pay for parsing the payloads they actually look at. Typed views ([`EventData`], [`Message`])
//! are decoded on demand; both on-disk message shapes (identified and flat) decode to the same
//! [`Message`].

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;

/// The only format version this crate reads and writes.
pub const FORMAT_VERSION: u64 = 0;

pub const USER_MESSAGE: &str = "user/message";
pub const STEERING_MESSAGE: &str = "steering/message";
pub const ASSISTANT_MESSAGE: &str = "assistant/message";
pub const TOOL_RESULT: &str = "tool/result";
pub const TURN_START: &str = "turn/start";
pub const TURN_END: &str = "turn/end";
pub const STEP_START: &str = "step/start";
pub const STEP_END: &str = "step/end";
pub const ASSISTANT_CHUNK: &str = "assistant/chunk";
pub const TOOL_CALL: &str = "tool/call";
pub const SESSION_TITLE: &str = "session/title";
pub const COMPACT_START: &str = "compact/start";
pub const COMPACT_SUMMARY: &str = "compact/summary";
pub const COMPACT_END: &str = "compact/end";
pub const REQUEST_HEADER: &str = "request/header";

/// Event types that carry a `surfaceOp` and take part in the surface fold.
pub fn is_surface_type(kind: &str) -> bool {
    matches!(
        kind,
        USER_MESSAGE | STEERING_MESSAGE | ASSISTANT_MESSAGE | TOOL_RESULT
    )
}

/// Line 0 of every log.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    pub version: u64,
    pub id: String,
    pub created_at: i64,
    pub cwd: Option<String>,
    pub delegation_depth: i64,
    /// Header fields this crate does not know, kept in their original order.
    pub extra: Map<String, Value>,
}

impl SessionHeader {
    pub fn new(id: impl Into<String>, created_at: i64, cwd: Option<String>) -> Self {
        SessionHeader {
            version: FORMAT_VERSION,
            id: id.into(),
            created_at,
            cwd,
            delegation_depth: 0,
            extra: Map::new(),
        }
    }
}

impl Serialize for SessionHeader {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", "session")?;
        map.serialize_entry("version", &self.version)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("createdAt", &self.created_at)?;
        if let Some(cwd) = &self.cwd {
            map.serialize_entry("cwd", cwd)?;
        }
        map.serialize_entry("delegationDepth", &self.delegation_depth)?;
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for SessionHeader {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut map = Map::<String, Value>::deserialize(deserializer)?;
        match map.remove("type") {
            Some(Value::String(t)) if t == "session" => {}
            Some(other) => {
                return Err(de::Error::custom(format!(
                    "header type must be \"session\", found {other}"
                )))
            }
            None => return Err(de::Error::custom("header has no \"type\"")),
        }
        let version = match map.remove("version") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_u64().ok_or_else(|| {
                de::Error::custom(format!("header version {v} is not an integer"))
            })?,
        };
        let id = match map.remove("id") {
            Some(Value::String(id)) => id,
            _ => return Err(de::Error::custom("header \"id\" must be a string")),
        };
        let created_at = match map.remove("createdAt") {
            Some(v) => json_i64(&v)
                .ok_or_else(|| de::Error::custom("header \"createdAt\" must be a number"))?,
            None => return Err(de::Error::custom("header has no \"createdAt\"")),
        };
        let cwd = match map.remove("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(cwd)) => Some(cwd),
            Some(_) => return Err(de::Error::custom("header \"cwd\" must be a string")),
        };
        let delegation_depth = match map.remove("delegationDepth") {
            None | Some(Value::Null) => 0,
            Some(v) => json_i64(&v).ok_or_else(|| {
                de::Error::custom("header \"delegationDepth\" must be an integer")
            })?,
        };
        Ok(SessionHeader {
            version,
            id,
            created_at,
            cwd,
            delegation_depth,
            extra: map,
        })
    }
}

fn json_i64(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0)
            .map(|f| f as i64)
    })
}

/// How a surface event changes the current surface (SPEC §1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    Append,
    /// Splice the current surface nodes whose event seqs are `start` through `end` (inclusive, in
    /// surface order) out, put this event there. Seqs, not positions (see [`super::surface`]).
    Replace {
        start: u64,
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
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Name(String),
            Replace { op: String, start: u64, end: u64 },
        }
        match Wire::deserialize(deserializer)? {
            Wire::Name(name) if name == "append" => Ok(SurfaceOp::Append),
            Wire::Name(name) => Err(de::Error::custom(format!("unknown surfaceOp \"{name}\""))),
            Wire::Replace { op, start, end } if op == "replace" => {
                Ok(SurfaceOp::Replace { start, end })
            }
            Wire::Replace { op, .. } => {
                Err(de::Error::custom(format!("unknown surfaceOp \"{op}\"")))
            }
        }
    }
}

/// One event record: `{"type","seq","time","data","sourceEventSeqs"?,"surfaceOp"?}`.
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: String,
    pub seq: u64,
    pub time: i64,
    /// The `data` payload exactly as it was read (or as it was encoded when written).
    pub data: Box<RawValue>,
    pub source_event_seqs: Option<Vec<u64>>,
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
        let kind = data.kind().to_string();
        let surface_op = is_surface_type(&kind).then_some(SurfaceOp::Append);
        Event {
            kind,
            seq,
            time,
            data: data.to_raw(),
            source_event_seqs: None,
            surface_op,
            extra: Map::new(),
        }
    }

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
        let mut map = serializer.serialize_map(None)?;
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
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// A packed run of `assistant/chunk` deltas (`text-chunks`, `reasoning-chunks`,
/// `tool-call-chunks`). Member `k` has `seq0 + k` and `time0 + sum(dt[..k])`.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedChunks {
    pub kind: PackedKind,
    pub seq0: u64,
    pub time0: i64,
    pub turn: Value,
    pub step: Value,
    pub index: Value,
    pub dt: Vec<i64>,
    /// `texts` (text, reasoning) or `args` (tool calls).
    pub pieces: Vec<String>,
    /// Tool call id and name (tool-call rows only).
    pub id: Option<String>,
    pub name: Option<String>,
    pub extra: Map<String, Value>,
    pub row_extra: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackedKind {
    Text,
    Reasoning,
    ToolCall,
}

impl PackedKind {
    pub fn from_type(kind: &str) -> Option<PackedKind> {
        match kind {
            "text-chunks" => Some(PackedKind::Text),
            "reasoning-chunks" => Some(PackedKind::Reasoning),
            "tool-call-chunks" => Some(PackedKind::ToolCall),
            _ => None,
        }
    }
    pub fn type_name(self) -> &'static str {
        match self {
            PackedKind::Text => "text-chunks",
            PackedKind::Reasoning => "reasoning-chunks",
            PackedKind::ToolCall => "tool-call-chunks",
        }
    }
}

impl PackedChunks {
    pub fn len(&self) -> usize {
        self.pieces.len()
    }
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }
    /// The seq of the last member, or `None` for an empty row.
    pub fn last_seq(&self) -> Option<u64> {
        (!self.pieces.is_empty()).then(|| self.seq0 + self.pieces.len() as u64 - 1)
    }

    /// The `assistant/chunk` events this row stands for.
    pub fn unpack(&self) -> Vec<Event> {
        let mut time = self.time0;
        let mut events = Vec::with_capacity(self.pieces.len());
        for (k, piece) in self.pieces.iter().enumerate() {
            if k > 0 {
                time += self.dt.get(k - 1).copied().unwrap_or(0);
            }
            let mut chunk = Map::new();
            match self.kind {
                PackedKind::Text | PackedKind::Reasoning => {
                    let name = if self.kind == PackedKind::Text {
                        "text-delta"
                    } else {
                        "reasoning-delta"
                    };
                    chunk.insert("type".into(), name.into());
                    chunk.insert("index".into(), self.index.clone());
                    chunk.insert("text".into(), piece.clone().into());
                }
                PackedKind::ToolCall => {
                    chunk.insert("type".into(), "tool-call-delta".into());
                    chunk.insert("index".into(), self.index.clone());
                    if let Some(id) = &self.id {
                        chunk.insert("id".into(), id.clone().into());
                    }
                    if let Some(name) = &self.name {
                        chunk.insert("name".into(), name.clone().into());
                    }
                    chunk.insert("argumentsDelta".into(), piece.clone().into());
                }
            }
            let data = EventData::AssistantChunk {
                turn: self.turn.clone(),
                step: self.step.clone(),
                chunk: Value::Object(chunk),
                extra: Map::new(),
            };
            events.push(Event::new(self.seq0 + k as u64, time, &data));
        }
        events
    }
}

impl Serialize for PackedChunks {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut data = Map::new();
        data.insert("turn".into(), self.turn.clone());
        data.insert("step".into(), self.step.clone());
        data.insert("index".into(), self.index.clone());
        data.insert("dt".into(), self.dt.clone().into());
        if self.kind == PackedKind::ToolCall {
            if let Some(id) = &self.id {
                data.insert("id".into(), id.clone().into());
            }
            if let Some(name) = &self.name {
                data.insert("name".into(), name.clone().into());
            }
            data.insert("args".into(), self.pieces.clone().into());
        } else {
            data.insert("texts".into(), self.pieces.clone().into());
        }
        for (key, value) in &self.extra {
            data.insert(key.clone(), value.clone());
        }
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", self.kind.type_name())?;
        map.serialize_entry("seq0", &self.seq0)?;
        map.serialize_entry("time0", &self.time0)?;
        map.serialize_entry("data", &data)?;
        for (key, value) in &self.row_extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// One line after the header.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Event(Event),
    Packed(Box<PackedChunks>),
}

impl Record {
    /// The first seq this record covers.
    pub fn first_seq(&self) -> u64 {
        match self {
            Record::Event(e) => e.seq,
            Record::Packed(p) => p.seq0,
        }
    }
    /// How many seqs this record covers (a packed row covers one per member).
    pub fn seq_count(&self) -> u64 {
        match self {
            Record::Event(_) => 1,
            Record::Packed(p) => p.len() as u64,
        }
    }
    pub fn kind(&self) -> &str {
        match self {
            Record::Event(e) => &e.kind,
            Record::Packed(p) => p.kind.type_name(),
        }
    }
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Record::Event(e) => e.serialize(serializer),
            Record::Packed(p) => p.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RecordVisitor)
    }
}

struct RecordVisitor;

impl<'de> Visitor<'de> for RecordVisitor {
    type Value = Record;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an event record object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Record, A::Error> {
        let mut kind: Option<String> = None;
        let mut seq: Option<u64> = None;
        let mut time: Option<Value> = None;
        let mut seq0: Option<u64> = None;
        let mut time0: Option<Value> = None;
        let mut data: Option<Box<RawValue>> = None;
        let mut source_event_seqs: Option<Vec<u64>> = None;
        let mut surface_op: Option<SurfaceOp> = None;
        let mut extra = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            match key.as_str() {
                "type" => kind = Some(access.next_value()?),
                "seq" => seq = Some(access.next_value()?),
                "time" => time = Some(access.next_value()?),
                "seq0" => seq0 = Some(access.next_value()?),
                "time0" => time0 = Some(access.next_value()?),
                "data" => data = Some(access.next_value()?),
                "sourceEventSeqs" => source_event_seqs = access.next_value()?,
                "surfaceOp" => surface_op = access.next_value()?,
                _ => {
                    let value: Value = access.next_value()?;
                    extra.insert(key, value);
                }
            }
        }
        let kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        let data = data.ok_or_else(|| de::Error::missing_field("data"))?;
        if let Some(packed) = PackedKind::from_type(&kind) {
            let seq0 = seq0.ok_or_else(|| de::Error::missing_field("seq0"))?;
            let time0 = time0
                .as_ref()
                .and_then(json_i64)
                .ok_or_else(|| de::Error::missing_field("time0"))?;
            let body: PackedBody = serde_json::from_str(data.get()).map_err(de::Error::custom)?;
            let pieces = match packed {
                PackedKind::ToolCall => body.args,
                _ => body.texts,
            }
            .ok_or_else(|| de::Error::custom(format!("{kind} row has no pieces")))?;
            return Ok(Record::Packed(Box::new(PackedChunks {
                kind: packed,
                seq0,
                time0,
                turn: body.turn,
                step: body.step,
                index: body.index,
                dt: body.dt,
                pieces,
                id: body.id,
                name: body.name,
                extra: body.extra,
                row_extra: extra,
            })));
        }
        let seq = seq.ok_or_else(|| de::Error::missing_field("seq"))?;
        let time = time
            .as_ref()
            .and_then(json_i64)
            .ok_or_else(|| de::Error::missing_field("time"))?;
        if is_surface_type(&kind) && surface_op.is_none() {
            return Err(de::Error::custom(format!("{kind} event has no surfaceOp")));
        }
        Ok(Record::Event(Event {
            kind,
            seq,
            time,
            data,
            source_event_seqs,
            surface_op,
            extra,
        }))
    }
}

#[derive(Deserialize)]
struct PackedBody {
    #[serde(default)]
    turn: Value,
    #[serde(default)]
    step: Value,
    #[serde(default)]
    index: Value,
    #[serde(default)]
    dt: Vec<i64>,
    texts: Option<Vec<String>>,
    args: Option<Vec<String>>,
    id: Option<String>,
    name: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// A content block (SPEC §1.3). Unknown block types are kept whole.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    Text {
        text: String,
        extra: Map<String, Value>,
    },
    Reasoning {
        text: String,
        extra: Map<String, Value>,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
        extra: Map<String, Value>,
    },
    ToolResult {
        tool_call_id: String,
        content: Vec<ContentBlock>,
        is_error: Option<bool>,
        extra: Map<String, Value>,
    },
    Other(Map<String, Value>),
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text {
            text: text.into(),
            extra: Map::new(),
        }
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text, .. } => Some(text),
            _ => None,
        }
    }

    fn from_map(mut map: Map<String, Value>) -> ContentBlock {
        let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
        let take_str = |map: &mut Map<String, Value>, key: &str| match map.get(key) {
            Some(Value::String(_)) => match map.remove(key) {
                Some(Value::String(s)) => Some(s),
                _ => None,
            },
            _ => None,
        };
        match kind {
            "text" | "reasoning" if matches!(map.get("text"), Some(Value::String(_))) => {
                let is_text = kind == "text";
                map.remove("type");
                let text = take_str(&mut map, "text").unwrap_or_default();
                if is_text {
                    ContentBlock::Text { text, extra: map }
                } else {
                    ContentBlock::Reasoning { text, extra: map }
                }
            }
            "tool-call"
                if matches!(map.get("id"), Some(Value::String(_)))
                    && matches!(map.get("name"), Some(Value::String(_))) =>
            {
                map.remove("type");
                let id = take_str(&mut map, "id").unwrap_or_default();
                let name = take_str(&mut map, "name").unwrap_or_default();
                let arguments = map.remove("arguments").unwrap_or(Value::Null);
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                    extra: map,
                }
            }
            "tool-result"
                if matches!(map.get("toolCallId"), Some(Value::String(_)))
                    && matches!(map.get("content"), Some(Value::Array(_)) | None)
                    && matches!(map.get("isError"), Some(Value::Bool(_)) | None) =>
            {
                map.remove("type");
                let tool_call_id = take_str(&mut map, "toolCallId").unwrap_or_default();
                let content = match map.remove("content") {
                    Some(Value::Array(items)) => {
                        items.into_iter().map(ContentBlock::from_value).collect()
                    }
                    _ => Vec::new(),
                };
                let is_error = map.remove("isError").and_then(|v| v.as_bool());
                ContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    is_error,
                    extra: map,
                }
            }
            _ => ContentBlock::Other(map),
        }
    }

    fn from_value(value: Value) -> ContentBlock {
        match value {
            Value::Object(map) => ContentBlock::from_map(map),
            other => {
                let mut map = Map::new();
                map.insert("value".into(), other);
                ContentBlock::Other(map)
            }
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        let extra = match self {
            ContentBlock::Text { text, extra } => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
                extra
            }
            ContentBlock::Reasoning { text, extra } => {
                map.serialize_entry("type", "reasoning")?;
                map.serialize_entry("text", text)?;
                extra
            }
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
                extra,
            } => {
                map.serialize_entry("type", "tool-call")?;
                map.serialize_entry("id", id)?;
                map.serialize_entry("name", name)?;
                map.serialize_entry("arguments", arguments)?;
                extra
            }
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
                extra,
            } => {
                map.serialize_entry("type", "tool-result")?;
                map.serialize_entry("toolCallId", tool_call_id)?;
                map.serialize_entry("content", content)?;
                if let Some(is_error) = is_error {
                    map.serialize_entry("isError", is_error)?;
                }
                extra
            }
            ContentBlock::Other(extra) => extra,
        };
        for (key, value) in extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(ContentBlock::from_value(Value::deserialize(deserializer)?))
    }
}

/// Where a message came from (`source`, keyed by `kind`). Unknown kinds are kept whole.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageSource {
    /// A direct human prompt. Extra fields such as `rpcId` are kept.
    User {
        extra: Map<String, Value>,
    },
    Plugin {
        plugin: String,
        extra: Map<String, Value>,
    },
    Model {
        provider: String,
        model: String,
        extra: Map<String, Value>,
    },
    Tool {
        call_id: String,
        extra: Map<String, Value>,
    },
    /// A session-reference context (SPEC §3.9). The fields stay as JSON so that a malformed
    /// source written by someone else still round-trips.
    SessionReference {
        version: Value,
        references: Value,
        extra: Map<String, Value>,
    },
    Other(Map<String, Value>),
}

/// The plugin name of a compaction checkpoint source.
pub const COMPACT_PLUGIN: &str = "compact";

impl MessageSource {
    pub fn user() -> MessageSource {
        MessageSource::User { extra: Map::new() }
    }
    pub fn plugin(name: impl Into<String>) -> MessageSource {
        MessageSource::Plugin {
            plugin: name.into(),
            extra: Map::new(),
        }
    }
    pub fn model(provider: impl Into<String>, model: impl Into<String>) -> MessageSource {
        MessageSource::Model {
            provider: provider.into(),
            model: model.into(),
            extra: Map::new(),
        }
    }

    pub fn kind(&self) -> Option<&str> {
        match self {
            MessageSource::User { .. } => Some("user"),
            MessageSource::Plugin { .. } => Some("plugin"),
            MessageSource::Model { .. } => Some("model"),
            MessageSource::Tool { .. } => Some("tool"),
            MessageSource::SessionReference { .. } => Some("session-reference"),
            MessageSource::Other(map) => map.get("kind").and_then(Value::as_str),
        }
    }

    /// A direct human prompt (`{kind:"user"}`).
    pub fn is_direct_user(&self) -> bool {
        matches!(self, MessageSource::User { .. })
    }

    /// The canonical compaction checkpoint marker `{kind:"plugin", plugin:"compact"}`.
    pub fn is_compact_checkpoint(&self) -> bool {
        matches!(self, MessageSource::Plugin { plugin, .. } if plugin == COMPACT_PLUGIN)
    }

    fn from_map(mut map: Map<String, Value>) -> MessageSource {
        let kind = map
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let is_str =
            |map: &Map<String, Value>, key: &str| matches!(map.get(key), Some(Value::String(_)));
        let take = |map: &mut Map<String, Value>, key: &str| match map.remove(key) {
            Some(Value::String(s)) => s,
            _ => String::new(),
        };
        match kind.as_str() {
            "user" => {
                map.remove("kind");
                MessageSource::User { extra: map }
            }
            "plugin" if is_str(&map, "plugin") => {
                map.remove("kind");
                let plugin = take(&mut map, "plugin");
                MessageSource::Plugin { plugin, extra: map }
            }
            "model" if is_str(&map, "provider") && is_str(&map, "model") => {
                map.remove("kind");
                let provider = take(&mut map, "provider");
                let model = take(&mut map, "model");
                MessageSource::Model {
                    provider,
                    model,
                    extra: map,
                }
            }
            "tool" if is_str(&map, "callId") => {
                map.remove("kind");
                let call_id = take(&mut map, "callId");
                MessageSource::Tool {
                    call_id,
                    extra: map,
                }
            }
            "session-reference" => {
                map.remove("kind");
                let version = map.remove("version").unwrap_or(Value::Null);
                let references = map.remove("references").unwrap_or(Value::Null);
                MessageSource::SessionReference {
                    version,
                    references,
                    extra: map,
                }
            }
            _ => MessageSource::Other(map),
        }
    }
}

impl Serialize for MessageSource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        let extra = match self {
            MessageSource::User { extra } => {
                map.serialize_entry("kind", "user")?;
                extra
            }
            MessageSource::Plugin { plugin, extra } => {
                map.serialize_entry("kind", "plugin")?;
                map.serialize_entry("plugin", plugin)?;
                extra
            }
            MessageSource::Model {
                provider,
                model,
                extra,
            } => {
                map.serialize_entry("kind", "model")?;
                map.serialize_entry("provider", provider)?;
                map.serialize_entry("model", model)?;
                extra
            }
            MessageSource::Tool { call_id, extra } => {
                map.serialize_entry("kind", "tool")?;
                map.serialize_entry("callId", call_id)?;
                extra
            }
            MessageSource::SessionReference {
                version,
                references,
                extra,
            } => {
                map.serialize_entry("kind", "session-reference")?;
                map.serialize_entry("version", version)?;
                map.serialize_entry("references", references)?;
                extra
            }
            MessageSource::Other(extra) => extra,
        };
        for (key, value) in extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for MessageSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(MessageSource::from_map(Map::deserialize(deserializer)?))
    }
}

/// A message in the identified shape `{role?, content, source, id, …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub content: Vec<ContentBlock>,
    pub source: MessageSource,
    pub id: String,
    /// Baked prefix context of a direct prompt (SPEC §1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<Envelope>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Message {
    pub fn new(role: &str, content: Vec<ContentBlock>, source: MessageSource, id: String) -> Self {
        Message {
            role: Some(role.to_string()),
            content,
            source,
            id,
            envelope: None,
            extra: Map::new(),
        }
    }

    /// The `text` blocks joined with `\n`.
    pub fn text(&self) -> String {
        join_text(&self.content)
    }

    /// What a person typed: the display content when a baked prefix context is present.
    pub fn display_text(&self) -> String {
        match self
            .envelope
            .as_ref()
            .and_then(|e| e.display_content.as_ref())
        {
            Some(DisplayContent::Text(text)) => text.clone(),
            Some(DisplayContent::Blocks(blocks)) => join_text(blocks),
            None => self.text(),
        }
    }
}

pub fn join_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    let mut first = true;
    for text in blocks.iter().filter_map(ContentBlock::as_text) {
        if !first {
            out.push('\n');
        }
        out.push_str(text);
        first = false;
    }
    out
}

/// `envelope: {displayContent, prefixContexts}` beside a prompt's model-visible content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(
        rename = "displayContent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub display_content: Option<DisplayContent>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DisplayContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

/// The typed payload of an event, by event type. Surface messages are normalized to the
/// identified shape; flat (older) messages get the id `legacy-message:<sessionId>:<seq>`.
#[derive(Debug, Clone, PartialEq)]
pub enum EventData {
    UserMessage(Message),
    SteeringMessage {
        turn: Value,
        message: Message,
        extra: Map<String, Value>,
    },
    AssistantMessage {
        turn: Value,
        step: Value,
        message: Message,
        extra: Map<String, Value>,
    },
    ToolResult {
        turn: Value,
        step: Value,
        message: Message,
        extra: Map<String, Value>,
    },
    TurnStart {
        turn: u64,
        trigger: Value,
        extra: Map<String, Value>,
    },
    TurnEnd {
        turn: u64,
        reason: Value,
        extra: Map<String, Value>,
    },
    StepStart {
        turn: u64,
        step: u64,
        extra: Map<String, Value>,
    },
    StepEnd {
        turn: u64,
        step: u64,
        extra: Map<String, Value>,
    },
    AssistantChunk {
        turn: Value,
        step: Value,
        chunk: Value,
        extra: Map<String, Value>,
    },
    ToolCall {
        turn: Value,
        step: Value,
        call_id: String,
        name: String,
        arguments: Value,
        extra: Map<String, Value>,
    },
    SessionTitle {
        title: String,
        message_seqs: Vec<u64>,
        source: Value,
        extra: Map<String, Value>,
    },
    CompactStart(Map<String, Value>),
    CompactSummary(Map<String, Value>),
    CompactEnd(Map<String, Value>),
    RequestHeader(Map<String, Value>),
    /// Any other event type, kept as it was.
    Other {
        kind: String,
        data: Value,
    },
}

impl EventData {
    pub fn kind(&self) -> &str {
        match self {
            EventData::UserMessage(_) => USER_MESSAGE,
            EventData::SteeringMessage { .. } => STEERING_MESSAGE,
            EventData::AssistantMessage { .. } => ASSISTANT_MESSAGE,
            EventData::ToolResult { .. } => TOOL_RESULT,
            EventData::TurnStart { .. } => TURN_START,
            EventData::TurnEnd { .. } => TURN_END,
            EventData::StepStart { .. } => STEP_START,
            EventData::StepEnd { .. } => STEP_END,
            EventData::AssistantChunk { .. } => ASSISTANT_CHUNK,
            EventData::ToolCall { .. } => TOOL_CALL,
            EventData::SessionTitle { .. } => SESSION_TITLE,
            EventData::CompactStart(_) => COMPACT_START,
            EventData::CompactSummary(_) => COMPACT_SUMMARY,
            EventData::CompactEnd(_) => COMPACT_END,
            EventData::RequestHeader(_) => REQUEST_HEADER,
            EventData::Other { kind, .. } => kind,
        }
    }

    /// The JSON value of `data` in the identified shape.
    pub fn to_value(&self) -> Value {
        fn with(pairs: Vec<(&str, Value)>, extra: &Map<String, Value>) -> Value {
            let mut map = Map::new();
            for (key, value) in pairs {
                map.insert(key.to_string(), value);
            }
            for (key, value) in extra {
                map.insert(key.clone(), value.clone());
            }
            Value::Object(map)
        }
        match self {
            EventData::UserMessage(message) => json(message),
            EventData::SteeringMessage {
                turn,
                message,
                extra,
            } => with(
                vec![("turn", turn.clone()), ("message", json(message))],
                extra,
            ),
            EventData::AssistantMessage {
                turn,
                step,
                message,
                extra,
            }
            | EventData::ToolResult {
                turn,
                step,
                message,
                extra,
            } => with(
                vec![
                    ("turn", turn.clone()),
                    ("step", step.clone()),
                    ("message", json(message)),
                ],
                extra,
            ),
            EventData::TurnStart {
                turn,
                trigger,
                extra,
            } => with(
                vec![("turn", (*turn).into()), ("trigger", trigger.clone())],
                extra,
            ),
            EventData::TurnEnd {
                turn,
                reason,
                extra,
            } => with(
                vec![("turn", (*turn).into()), ("reason", reason.clone())],
                extra,
            ),
            EventData::StepStart { turn, step, extra }
            | EventData::StepEnd { turn, step, extra } => with(
                vec![("turn", (*turn).into()), ("step", (*step).into())],
                extra,
            ),
            EventData::AssistantChunk {
                turn,
                step,
                chunk,
                extra,
            } => with(
                vec![
                    ("turn", turn.clone()),
                    ("step", step.clone()),
                    ("chunk", chunk.clone()),
                ],
                extra,
            ),
            EventData::ToolCall {
                turn,
                step,
                call_id,
                name,
                arguments,
                extra,
            } => with(
                vec![
                    ("turn", turn.clone()),
                    ("step", step.clone()),
                    ("callId", call_id.clone().into()),
                    ("name", name.clone().into()),
                    ("arguments", arguments.clone()),
                ],
                extra,
            ),
            EventData::SessionTitle {
                title,
                message_seqs,
                source,
                extra,
            } => with(
                vec![
                    ("title", title.clone().into()),
                    ("messageSeqs", message_seqs.clone().into()),
                    ("source", source.clone()),
                ],
                extra,
            ),
            EventData::CompactStart(map)
            | EventData::CompactSummary(map)
            | EventData::CompactEnd(map)
            | EventData::RequestHeader(map) => Value::Object(map.clone()),
            EventData::Other { data, .. } => data.clone(),
        }
    }

    pub fn to_raw(&self) -> Box<RawValue> {
        RawValue::from_string(self.to_value().to_string()).expect("serde_json writes valid JSON")
    }

    /// Decodes `data` for event type `kind`. Unknown types decode to [`EventData::Other`].
    pub fn decode(
        kind: &str,
        data: &RawValue,
        session_id: &str,
        seq: u64,
    ) -> Result<EventData, serde_json::Error> {
        let legacy_id = || format!("legacy-message:{session_id}:{seq}");
        let map = || -> Result<Map<String, Value>, serde_json::Error> {
            serde_json::from_str(data.get())
        };
        Ok(match kind {
            USER_MESSAGE => {
                let mut m = map()?;
                if !m.contains_key("id") {
                    m.insert("id".into(), legacy_id().into());
                    if !m.contains_key("role") {
                        m.insert("role".into(), "user".into());
                    }
                }
                EventData::UserMessage(serde_json::from_value(Value::Object(m))?)
            }
            STEERING_MESSAGE => {
                let mut m = map()?;
                let turn = m.remove("turn").unwrap_or(Value::Null);
                let message = match m.remove("message") {
                    Some(message) => serde_json::from_value(message)?,
                    None => {
                        let content = take_content(&mut m)?;
                        let source = take_source(&mut m)?;
                        Message::new("user", content, source, legacy_id())
                    }
                };
                EventData::SteeringMessage {
                    turn,
                    message,
                    extra: m,
                }
            }
            ASSISTANT_MESSAGE => {
                let mut m = map()?;
                let turn = m.remove("turn").unwrap_or(Value::Null);
                let step = m.remove("step").unwrap_or(Value::Null);
                let message = match m.remove("message") {
                    Some(message) => serde_json::from_value(message)?,
                    None => {
                        let content = take_content(&mut m)?;
                        let source = match m.remove("provenance") {
                            Some(Value::Object(mut p)) => {
                                p.insert("kind".into(), "model".into());
                                let reordered: Map<String, Value> =
                                    std::iter::once(("kind".to_string(), Value::from("model")))
                                        .chain(p.into_iter().filter(|(k, _)| k != "kind"))
                                        .collect();
                                serde_json::from_value(Value::Object(reordered))?
                            }
                            _ => MessageSource::Other(Map::new()),
                        };
                        Message::new("assistant", content, source, legacy_id())
                    }
                };
                EventData::AssistantMessage {
                    turn,
                    step,
                    message,
                    extra: m,
                }
            }
            TOOL_RESULT => {
                let mut m = map()?;
                let turn = m.remove("turn").unwrap_or(Value::Null);
                let step = m.remove("step").unwrap_or(Value::Null);
                let message = match m.remove("message") {
                    Some(message) => serde_json::from_value(message)?,
                    None => {
                        let call_id = match m.remove("callId") {
                            Some(Value::String(id)) => id,
                            _ => String::new(),
                        };
                        let content = take_content(&mut m)?;
                        let is_error = m.remove("isError").and_then(|v| v.as_bool());
                        let block = ContentBlock::ToolResult {
                            tool_call_id: call_id.clone(),
                            content,
                            is_error,
                            extra: Map::new(),
                        };
                        let source = MessageSource::Tool {
                            call_id,
                            extra: Map::new(),
                        };
                        Message::new("user", vec![block], source, legacy_id())
                    }
                };
                EventData::ToolResult {
                    turn,
                    step,
                    message,
                    extra: m,
                }
            }
            TURN_START => {
                let mut m = map()?;
                EventData::TurnStart {
                    turn: take_u64(&mut m, "turn")?,
                    trigger: m.remove("trigger").unwrap_or(Value::Null),
                    extra: m,
                }
            }
            TURN_END => {
                let mut m = map()?;
                EventData::TurnEnd {
                    turn: take_u64(&mut m, "turn")?,
                    reason: m.remove("reason").unwrap_or(Value::Null),
                    extra: m,
                }
            }
            STEP_START | STEP_END => {
                let mut m = map()?;
                let turn = take_u64(&mut m, "turn")?;
                let step = take_u64(&mut m, "step")?;
                if kind == STEP_START {
                    EventData::StepStart {
                        turn,
                        step,
                        extra: m,
                    }
                } else {
                    EventData::StepEnd {
                        turn,
                        step,
                        extra: m,
                    }
                }
            }
            ASSISTANT_CHUNK => {
                let mut m = map()?;
                EventData::AssistantChunk {
                    turn: m.remove("turn").unwrap_or(Value::Null),
                    step: m.remove("step").unwrap_or(Value::Null),
                    chunk: m.remove("chunk").unwrap_or(Value::Null),
                    extra: m,
                }
            }
            TOOL_CALL => {
                let mut m = map()?;
                let turn = m.remove("turn").unwrap_or(Value::Null);
                let step = m.remove("step").unwrap_or(Value::Null);
                let call_id = take_string(&mut m, "callId")?;
                let name = take_string(&mut m, "name")?;
                EventData::ToolCall {
                    turn,
                    step,
                    call_id,
                    name,
                    arguments: m.remove("arguments").unwrap_or(Value::Null),
                    extra: m,
                }
            }
            SESSION_TITLE => {
                let mut m = map()?;
                let title = take_string(&mut m, "title")?;
                let message_seqs = match m.remove("messageSeqs") {
                    Some(v) => serde_json::from_value(v)?,
                    None => Vec::new(),
                };
                EventData::SessionTitle {
                    title,
                    message_seqs,
                    source: m.remove("source").unwrap_or(Value::Null),
                    extra: m,
                }
            }
            COMPACT_START => EventData::CompactStart(map()?),
            COMPACT_SUMMARY => EventData::CompactSummary(map()?),
            COMPACT_END => EventData::CompactEnd(map()?),
            REQUEST_HEADER => EventData::RequestHeader(map()?),
            other => EventData::Other {
                kind: other.to_string(),
                data: serde_json::from_str(data.get())?,
            },
        })
    }
}

fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("model types serialize to JSON")
}

fn take_content(map: &mut Map<String, Value>) -> Result<Vec<ContentBlock>, serde_json::Error> {
    match map.remove("content") {
        Some(v) => serde_json::from_value(v),
        None => Err(de::Error::missing_field("content")),
    }
}

fn take_source(map: &mut Map<String, Value>) -> Result<MessageSource, serde_json::Error> {
    match map.remove("source") {
        Some(v) => serde_json::from_value(v),
        None => Err(de::Error::missing_field("source")),
    }
}

fn take_u64(map: &mut Map<String, Value>, key: &'static str) -> Result<u64, serde_json::Error> {
    match map.remove(key) {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| de::Error::custom(format!("\"{key}\" must be a non-negative integer"))),
        None => Err(de::Error::missing_field(key)),
    }
}

fn take_string(
    map: &mut Map<String, Value>,
    key: &'static str,
) -> Result<String, serde_json::Error> {
    match map.remove(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(de::Error::custom(format!("\"{key}\" must be a string"))),
        None => Err(de::Error::missing_field(key)),
    }
}
