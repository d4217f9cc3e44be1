//! Packed runs of `assistant/chunk` deltas (`text-chunks`, `reasoning-chunks`,
//! `tool-call-chunks`; SPEC §1.4).

use super::{object, write_map, Event, EventData};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

/// A packed run of `assistant/chunk` deltas (`text-chunks`, `reasoning-chunks`,
/// `tool-call-chunks`). Member `k` has `seq0 + k` and `time0 + sum(dt[..k])`.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedChunks {
    /// Which row `type` this is (and so which delta type its members unpack to).
    pub kind: PackedKind,
    /// `seq0`: the seq of the first member; member `k` has `seq0 + k`.
    pub seq0: u64,
    /// `time0`: the time of the first member, in epoch milliseconds.
    pub time0: i64,
    /// `data.turn`, as written; every member's `turn`.
    pub turn: Value,
    /// `data.step`, as written; every member's `step`.
    pub step: Value,
    /// `data.index`, as written; every member's chunk `index`.
    pub index: Value,
    /// `data.dt`: milliseconds from each member to the next (a missing entry counts as 0).
    pub dt: Vec<i64>,
    /// `texts` (text, reasoning) or `args` (tool calls).
    pub pieces: Vec<String>,
    /// Tool call id and name (tool-call rows only).
    pub id: Option<String>,
    /// The tool call's `name` (tool-call rows only; `None` when absent).
    pub name: Option<String>,
    /// Fields of `data` beyond the known ones, in the order read; written back after them.
    pub extra: Map<String, Value>,
    /// Fields of the row beyond `type`, `seq0`, `time0` and `data`, in the order read.
    pub row_extra: Map<String, Value>,
}

/// The three packed row types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackedKind {
    /// `text-chunks`: members unpack to `text-delta` chunks.
    Text,
    /// `reasoning-chunks`: members unpack to `reasoning-delta` chunks.
    Reasoning,
    /// `tool-call-chunks`: members unpack to `tool-call-delta` chunks (`argumentsDelta`).
    ToolCall,
}

impl PackedKind {
    /// The kind of a row `type`; `None` when `kind` is not a packed row type (an event's `type`).
    pub fn from_type(kind: &str) -> Option<PackedKind> {
        match kind {
            "text-chunks" => Some(PackedKind::Text),
            "reasoning-chunks" => Some(PackedKind::Reasoning),
            "tool-call-chunks" => Some(PackedKind::ToolCall),
            _ => None,
        }
    }
    /// The row `type` (`"text-chunks"`, `"reasoning-chunks"`, `"tool-call-chunks"`).
    pub fn type_name(self) -> &'static str {
        match self {
            PackedKind::Text => "text-chunks",
            PackedKind::Reasoning => "reasoning-chunks",
            PackedKind::ToolCall => "tool-call-chunks",
        }
    }
}

impl PackedChunks {
    /// How many members (delta events) the row stands for.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }
    /// A row with no members (it stands for no event and takes no seq).
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
        let mut known = vec![
            ("turn", self.turn.clone()),
            ("step", self.step.clone()),
            ("index", self.index.clone()),
            ("dt", self.dt.clone().into()),
        ];
        if self.kind == PackedKind::ToolCall {
            if let Some(id) = &self.id {
                known.push(("id", id.clone().into()));
            }
            if let Some(name) = &self.name {
                known.push(("name", name.clone().into()));
            }
            known.push(("args", self.pieces.clone().into()));
        } else {
            known.push(("texts", self.pieces.clone().into()));
        }
        let data = object(known, &self.extra);
        write_map(serializer, &self.row_extra, |map| {
            map.serialize_entry("type", self.kind.type_name())?;
            map.serialize_entry("seq0", &self.seq0)?;
            map.serialize_entry("time0", &self.time0)?;
            map.serialize_entry("data", &data)
        })
    }
}
