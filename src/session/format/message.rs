//! Messages in the identified shape and where they came from (SPEC §1.3).

use super::{write_map, ContentBlock};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Where a message came from (`source`, keyed by `kind`). Unknown kinds are kept whole.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageSource {
    /// A direct human prompt. Extra fields such as `rpcId` are kept.
    User {
        /// Fields beside `kind` (such as `rpcId`), in the order read; written back after it.
        extra: Map<String, Value>,
    },
    /// `{kind:"plugin",plugin}`: a message a plugin generated. `plugin:"compact"` is the
    /// compaction checkpoint marker ([`COMPACT_PLUGIN`]).
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `{kind:"model",provider,model}`: written by a model.
    Model {
        /// The model provider's name, as the agent that wrote the message configured it.
        provider: String,
        /// The model's name at that provider.
        model: String,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `{kind:"tool",callId}`: a tool's result.
    Tool {
        /// The `callId` of the tool call this answers.
        call_id: String,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// A session-reference context (SPEC §3.9). The fields stay as JSON so that a malformed
    /// source written by someone else still round-trips.
    SessionReference {
        /// `version` as written (1 for ours; `null` when absent).
        version: Value,
        /// `references` as written: one metadata object per source (`null` when absent).
        references: Value,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// Any other `kind`, or a known kind whose fields have the wrong JSON types: the whole
    /// object, `kind` included, kept and written back as read.
    Other(Map<String, Value>),
}

/// The plugin name of a compaction checkpoint source.
pub const COMPACT_PLUGIN: &str = "compact";

impl MessageSource {
    /// `{kind:"user"}`: a direct human prompt.
    pub fn user() -> MessageSource {
        MessageSource::User { extra: Map::new() }
    }
    /// `{kind:"plugin",plugin:name}`.
    pub fn plugin(name: impl Into<String>) -> MessageSource {
        MessageSource::Plugin {
            plugin: name.into(),
            extra: Map::new(),
        }
    }
    /// `{kind:"model",provider,model}`.
    pub fn model(provider: impl Into<String>, model: impl Into<String>) -> MessageSource {
        MessageSource::Model {
            provider: provider.into(),
            model: model.into(),
            extra: Map::new(),
        }
    }

    /// The wire `kind` (`"user"`, `"plugin"`, …); for [`MessageSource::Other`] its `kind` field,
    /// `None` when that is missing or not a string.
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
        match self {
            MessageSource::User { extra } => {
                write_map(serializer, extra, |map| map.serialize_entry("kind", "user"))
            }
            MessageSource::Plugin { plugin, extra } => write_map(serializer, extra, |map| {
                map.serialize_entry("kind", "plugin")?;
                map.serialize_entry("plugin", plugin)
            }),
            MessageSource::Model {
                provider,
                model,
                extra,
            } => write_map(serializer, extra, |map| {
                map.serialize_entry("kind", "model")?;
                map.serialize_entry("provider", provider)?;
                map.serialize_entry("model", model)
            }),
            MessageSource::Tool { call_id, extra } => write_map(serializer, extra, |map| {
                map.serialize_entry("kind", "tool")?;
                map.serialize_entry("callId", call_id)
            }),
            MessageSource::SessionReference {
                version,
                references,
                extra,
            } => write_map(serializer, extra, |map| {
                map.serialize_entry("kind", "session-reference")?;
                map.serialize_entry("version", version)?;
                map.serialize_entry("references", references)
            }),
            MessageSource::Other(extra) => write_map(serializer, extra, |_| Ok(())),
        }
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
    /// `role` (this crate writes `"user"` or `"assistant"`; any other is kept); `None` when
    /// absent (then not written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `content`: the model-visible content blocks.
    pub content: Vec<ContentBlock>,
    /// `source`: who wrote the message (SPEC §1.3).
    pub source: MessageSource,
    /// `id`: the message id; a flat (older) message read gets `legacy-message:<sessionId>:<seq>`.
    pub id: String,
    /// Baked prefix context of a direct prompt (SPEC §1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<Envelope>,
    /// Fields beyond the known ones, in the order read; written back after them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Message {
    /// A message with `role`, no envelope and no extra fields.
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

/// The `text` blocks' strings joined with `\n` (reasoning, tool calls and unknown blocks
/// dropped): the text a snapshot projects (SPEC §3.5).
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
    /// `displayContent`: the prompt as the person typed it, without the baked context; `None`
    /// when absent.
    #[serde(
        rename = "displayContent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub display_content: Option<DisplayContent>,
    /// The other envelope fields (`prefixContexts`, …), kept and written back as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An envelope's `displayContent`: a plain string or content blocks, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DisplayContent {
    /// A plain string.
    Text(String),
    /// Content blocks (only their `text` blocks are shown).
    Blocks(Vec<ContentBlock>),
}
