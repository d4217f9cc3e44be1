//! One line after the header: an event record or a packed chunk row (SPEC §1.2, §1.5).

use super::{is_surface_type, json_i64, Event, EventKind, PackedChunks, PackedKind, SurfaceOp};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;

/// One line after the header.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// An event record.
    Event(Event),
    /// A packed chunk row standing for a run of `assistant/chunk` events.
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
    /// The record's `type`: the event type, or the packed row type.
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

/// A record's key: a known one is matched where it lies in the line (no `String` per key); an
/// unknown one is kept, in order, among the record's `extra` fields.
enum Field {
    Type,
    Seq,
    Time,
    Seq0,
    Time0,
    Data,
    SourceEventSeqs,
    SurfaceOp,
    Other(String),
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Key;
        impl Visitor<'_> for Key {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Field, E> {
                Ok(match key {
                    "type" => Field::Type,
                    "seq" => Field::Seq,
                    "time" => Field::Time,
                    "seq0" => Field::Seq0,
                    "time0" => Field::Time0,
                    "data" => Field::Data,
                    "sourceEventSeqs" => Field::SourceEventSeqs,
                    "surfaceOp" => Field::SurfaceOp,
                    other => Field::Other(other.to_string()),
                })
            }
        }
        deserializer.deserialize_str(Key)
    }
}

impl<'de> Visitor<'de> for RecordVisitor {
    type Value = Record;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an event record object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Record, A::Error> {
        let mut kind: Option<EventKind> = None;
        let mut seq: Option<u64> = None;
        let mut time: Option<Value> = None;
        let mut seq0: Option<u64> = None;
        let mut time0: Option<Value> = None;
        let mut data: Option<Box<RawValue>> = None;
        let mut source_event_seqs: Option<Vec<u64>> = None;
        let mut surface_op: Option<SurfaceOp> = None;
        let mut extra = Map::new();
        while let Some(key) = access.next_key::<Field>()? {
            match key {
                Field::Type => kind = Some(access.next_value()?),
                Field::Seq => seq = Some(access.next_value()?),
                Field::Time => time = Some(access.next_value()?),
                Field::Seq0 => seq0 = Some(access.next_value()?),
                Field::Time0 => time0 = Some(access.next_value()?),
                Field::Data => data = Some(access.next_value()?),
                Field::SourceEventSeqs => source_event_seqs = access.next_value()?,
                Field::SurfaceOp => surface_op = access.next_value()?,
                Field::Other(key) => {
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
            data: data.into(),
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

#[cfg(test)]
mod tests {
    use super::SurfaceOp;

    #[test]
    fn surface_ops_read_in_both_shapes_and_refuse_the_rest() {
        let read = |json: &str| serde_json::from_str::<SurfaceOp>(json).map_err(|e| e.to_string());
        assert_eq!(read("\"append\""), Ok(SurfaceOp::Append));
        assert_eq!(
            read(r#"{"end":4,"x":[1],"op":"replace","start":2}"#),
            Ok(SurfaceOp::Replace { start: 2, end: 4 })
        );
        assert!(read("\"prepend\"")
            .unwrap_err()
            .contains("unknown surfaceOp \"prepend\""));
        assert!(read(r#"{"op":"splice","start":1,"end":1}"#)
            .unwrap_err()
            .contains("unknown surfaceOp \"splice\""));
        assert!(read(r#"{"op":"replace","start":1}"#)
            .unwrap_err()
            .contains("end"));
        assert!(read(r#"{"op":"replace","start":-1,"end":1}"#).is_err());
        assert!(read("7").is_err());
    }
}
