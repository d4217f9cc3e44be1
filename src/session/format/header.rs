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
    pub extra: Map<String, Value>,
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
            extra: Map::new(),
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
