//! The flat, older message shapes (SPEC §1.3), upgraded to the identified shape.
//!
//! Before messages carried an `id` and a `source`, surface events held their message's fields
//! flat in `data` (`content` beside `turn`, a model's `provenance`, a tool result's `callId`).
//! The decoder ([`super::EventData::decode`]) reads the identified shape; when `data` has no
//! `message` (or a `user/message` has no `id`), it asks this module for the same [`Message`] the
//! identified shape would give, with the id `legacy-message:<sessionId>:<seq>`. Nothing here
//! writes: a flat record is rewritten only by whoever rewrites the whole log.
//!
//! Proof: `tests/session/store.rs` (`flat_and_identified_shapes_fold_alike`,
//! `steering_scenario_concrete_values`) decodes flat shapes to their identified messages.

use super::{ContentBlock, Message, MessageSource};
use serde::de;
use serde_json::{Map, Value};

/// The id a flat message gets: `legacy-message:<sessionId>:<seq>`.
pub(super) fn legacy_id(session_id: &str, seq: u64) -> String {
    format!("legacy-message:{session_id}:{seq}")
}

/// A `user/message` payload without an `id` gets `id` (and `role: "user"` when it has none).
pub(super) fn upgrade_user_message(map: &mut Map<String, Value>, id: impl FnOnce() -> String) {
    if !map.contains_key("id") {
        map.insert("id".into(), id().into());
        if !map.contains_key("role") {
            map.insert("role".into(), "user".into());
        }
    }
}

/// A flat `steering/message`: `content` and `source` beside `turn`.
pub(super) fn steering_message(
    map: &mut Map<String, Value>,
    id: String,
) -> Result<Message, serde_json::Error> {
    let content = take_content(map)?;
    let source = take_source(map)?;
    Ok(Message::new("user", content, source, id))
}

/// A flat `assistant/message`: `content` and the model's `provenance` (its source without `kind`).
pub(super) fn assistant_message(
    map: &mut Map<String, Value>,
    id: String,
) -> Result<Message, serde_json::Error> {
    let content = take_content(map)?;
    let source = match map.remove("provenance") {
        Some(Value::Object(provenance)) => {
            let reordered: Map<String, Value> =
                std::iter::once(("kind".to_string(), Value::from("model")))
                    .chain(provenance.into_iter().filter(|(k, _)| k != "kind"))
                    .collect();
            serde_json::from_value(Value::Object(reordered))?
        }
        _ => MessageSource::Other(Map::new()),
    };
    Ok(Message::new("assistant", content, source, id))
}

/// A flat `tool/result`: `callId`, `content` and `isError`, which become one tool-result block.
pub(super) fn tool_result(
    map: &mut Map<String, Value>,
    id: String,
) -> Result<Message, serde_json::Error> {
    let call_id = match map.remove("callId") {
        Some(Value::String(id)) => id,
        _ => String::new(),
    };
    let content = take_content(map)?;
    let is_error = map.remove("isError").and_then(|v| v.as_bool());
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
    Ok(Message::new("user", vec![block], source, id))
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
