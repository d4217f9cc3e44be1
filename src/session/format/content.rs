//! Content blocks (SPEC §1.3).

use super::write_map;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A content block (SPEC §1.3). Unknown block types are kept whole.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `{"type":"text","text"}`: text the model sees (the only kind a snapshot projects).
    Text {
        /// The text, as written.
        text: String,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `{"type":"reasoning","text"}`: the model's reasoning (never projected).
    Reasoning {
        /// The reasoning text.
        text: String,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `{"type":"tool-call","id","name","arguments"}`: a call the model asked for.
    ToolCall {
        /// The call id a `tool-result` answers with `toolCallId`.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments as written (any JSON; `null` when the block had none).
        arguments: Value,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `{"type":"tool-result","toolCallId","content":[…],"isError"?}`: a tool's answer.
    ToolResult {
        /// The `id` of the `tool-call` this answers.
        tool_call_id: String,
        /// The result's own content blocks (empty when the block had none).
        content: Vec<ContentBlock>,
        /// `isError`; `None` when the block did not carry it (then it is not written either).
        is_error: Option<bool>,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// Any other block type, or a known type whose fields have the wrong JSON types: the whole
    /// object, `type` included, kept and written back as read (a non-object block is kept as
    /// `{"value": …}`).
    Other(Map<String, Value>),
}

impl ContentBlock {
    /// A `text` block with no extra fields.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text {
            text: text.into(),
            extra: Map::new(),
        }
    }

    /// The text of a `text` block; `None` for every other kind (reasoning included).
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
        match self {
            ContentBlock::Text { text, extra } => write_map(serializer, extra, |map| {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)
            }),
            ContentBlock::Reasoning { text, extra } => write_map(serializer, extra, |map| {
                map.serialize_entry("type", "reasoning")?;
                map.serialize_entry("text", text)
            }),
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
                extra,
            } => write_map(serializer, extra, |map| {
                map.serialize_entry("type", "tool-call")?;
                map.serialize_entry("id", id)?;
                map.serialize_entry("name", name)?;
                map.serialize_entry("arguments", arguments)
            }),
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
                extra,
            } => write_map(serializer, extra, |map| {
                map.serialize_entry("type", "tool-result")?;
                map.serialize_entry("toolCallId", tool_call_id)?;
                map.serialize_entry("content", content)?;
                match is_error {
                    Some(is_error) => map.serialize_entry("isError", is_error),
                    None => Ok(()),
                }
            }),
            ContentBlock::Other(extra) => write_map(serializer, extra, |_| Ok(())),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(ContentBlock::from_value(Value::deserialize(deserializer)?))
    }
}
