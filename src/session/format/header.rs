//! Line 0 of a log: the session header (SPEC §1.2).

use super::{json_i64, write_map, FORMAT_VERSION};
use serde::de;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Line 0 of every log.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    /// `version`: the dsh format version; a missing or `null` one reads as 0, and only 0 is read.
    pub version: u64,
    /// `id`: the session's id, the truth about it (directory names are not).
    pub id: String,
    /// `createdAt`: when the session was created, in epoch milliseconds.
    pub created_at: i64,
    /// `cwd`: the working directory the session ran in; `None` when absent or `null` (not written
    /// then; such a session lives under `sessions/_no-cwd/`).
    pub cwd: Option<String>,
    /// `delegationDepth`: how many delegations deep the session was started (0 for a session a
    /// human started; a missing or `null` one reads as 0).
    pub delegation_depth: i64,
    /// Header fields this crate does not know, kept in their original order.
    pub extra: Extra,
}

/// The header fields this crate does not know, in their original order: a map that reads and
/// writes as [`Map`] (through `Deref`), held on the heap only when there is any (a listing keeps
/// 100,000 headers, nearly all without: an empty map inline was 72 of a header's 160 bytes).
#[derive(Clone, Default)]
pub struct Extra(Option<Box<Map<String, Value>>>);

impl std::ops::Deref for Extra {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        match &self.0 {
            Some(map) => map,
            None => EMPTY.get_or_init(Map::new),
        }
    }
}

impl std::ops::DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.0.get_or_insert_with(Default::default)
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Extra {
        Extra((!map.is_empty()).then(|| Box::new(map)))
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Extra) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl SessionHeader {
    /// A version-0 header with delegation depth 0 and no extra fields. `created_at` is in epoch
    /// milliseconds.
    pub fn new(id: impl Into<String>, created_at: i64, cwd: Option<String>) -> Self {
        SessionHeader {
            version: FORMAT_VERSION,
            id: id.into(),
            created_at,
            cwd,
            delegation_depth: 0,
            extra: Extra::default(),
        }
    }
}

impl Serialize for SessionHeader {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        write_map(serializer, &self.extra, |map| {
            map.serialize_entry("type", "session")?;
            map.serialize_entry("version", &self.version)?;
            map.serialize_entry("id", &self.id)?;
            map.serialize_entry("createdAt", &self.created_at)?;
            if let Some(cwd) = &self.cwd {
                map.serialize_entry("cwd", cwd)?;
            }
            map.serialize_entry("delegationDepth", &self.delegation_depth)
        })
    }
}

/// A header key: one of the six the header names, or another (kept in `extra`). Only another
/// key is copied: a listing decodes 100,000 headers, and a map of every key was six
/// allocations per header (and a map's spare capacity kept for life).
enum Field {
    Type,
    Version,
    Id,
    CreatedAt,
    Cwd,
    DelegationDepth,
    Other(String),
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Key;
        impl de::Visitor<'_> for Key {
            type Value = Field;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Field, E> {
                Ok(match key {
                    "type" => Field::Type,
                    "version" => Field::Version,
                    "id" => Field::Id,
                    "createdAt" => Field::CreatedAt,
                    "cwd" => Field::Cwd,
                    "delegationDepth" => Field::DelegationDepth,
                    other => Field::Other(other.to_string()),
                })
            }
        }
        deserializer.deserialize_str(Key)
    }
}

impl<'de> Deserialize<'de> for SessionHeader {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(HeaderVisitor)
    }
}

/// The header's fields as read, before they are checked (a repeated key: the last wins, as in
/// a JSON map; an unknown one keeps the place it was first seen).
struct HeaderVisitor;

impl<'de> de::Visitor<'de> for HeaderVisitor {
    type Value = SessionHeader;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut access: A) -> Result<SessionHeader, A::Error> {
        let mut map = Map::new();
        let mut known: [Option<Value>; 6] = Default::default();
        while let Some(field) = access.next_key::<Field>()? {
            let slot = match field {
                Field::Type => 0,
                Field::Version => 1,
                Field::Id => 2,
                Field::CreatedAt => 3,
                Field::Cwd => 4,
                Field::DelegationDepth => 5,
                Field::Other(key) => {
                    map.insert(key, access.next_value()?);
                    continue;
                }
            };
            known[slot] = Some(access.next_value()?);
        }
        let [kind, version, id, created_at, cwd, delegation_depth] = known;
        header_from(kind, version, id, created_at, cwd, delegation_depth, map)
    }
}

/// Checks the known fields, in the SPEC's order, and builds the header.
fn header_from<E: de::Error>(
    kind: Option<Value>,
    version: Option<Value>,
    id: Option<Value>,
    created_at: Option<Value>,
    cwd: Option<Value>,
    delegation_depth: Option<Value>,
    map: Map<String, Value>,
) -> Result<SessionHeader, E> {
    match kind {
        Some(Value::String(t)) if t == "session" => {}
        Some(other) => {
            return Err(de::Error::custom(format!(
                "header type must be \"session\", found {other}"
            )))
        }
        None => return Err(de::Error::custom("header has no \"type\"")),
    }
    let version = match version {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| de::Error::custom(format!("header version {v} is not an integer")))?,
    };
    let id = match id {
        Some(Value::String(id)) => id,
        _ => return Err(de::Error::custom("header \"id\" must be a string")),
    };
    let created_at = match created_at {
        Some(v) => json_i64(&v)
            .ok_or_else(|| de::Error::custom("header \"createdAt\" must be a number"))?,
        None => return Err(de::Error::custom("header has no \"createdAt\"")),
    };
    let cwd = match cwd {
        None | Some(Value::Null) => None,
        Some(Value::String(cwd)) => Some(cwd),
        Some(_) => return Err(de::Error::custom("header \"cwd\" must be a string")),
    };
    let delegation_depth = match delegation_depth {
        None | Some(Value::Null) => 0,
        Some(v) => json_i64(&v)
            .ok_or_else(|| de::Error::custom("header \"delegationDepth\" must be an integer"))?,
    };
    Ok(SessionHeader {
        version,
        id,
        created_at,
        cwd,
        delegation_depth,
        extra: map.into(),
    })
}
