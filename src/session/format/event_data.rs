//! The typed payload of an event, by event type (SPEC §1.3–§1.4).

use super::legacy;
use super::*;
use serde::de;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The typed payload of an event, by event type. Surface messages are normalized to the
/// identified shape; flat (older) messages get the id `legacy-message:<sessionId>:<seq>`.
#[derive(Debug, Clone, PartialEq)]
pub enum EventData {
    /// `user/message`: data is the message itself (SPEC §1.3).
    UserMessage(Message),
    /// `steering/message`: data `{turn, message}` (flat: `{turn, content, source}`).
    SteeringMessage {
        /// `turn` as written (any JSON; `null` when absent).
        turn: Value,
        /// The message added to the running turn.
        message: Message,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `assistant/message`: data `{turn, step, message, …}` (flat: `{turn, step, content,
    /// provenance}`).
    AssistantMessage {
        /// `turn` as written (any JSON; `null` when absent).
        turn: Value,
        /// `step` as written (any JSON; `null` when absent).
        step: Value,
        /// The assistant's message of that step.
        message: Message,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `tool/result`: data `{turn, step, message, …}` (flat: `{turn, step, callId, content,
    /// isError}`).
    ToolResult {
        /// `turn` as written (any JSON; `null` when absent).
        turn: Value,
        /// `step` as written (any JSON; `null` when absent).
        step: Value,
        /// The tool's result message (its source names the call).
        message: Message,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `turn/start`: data `{turn, trigger}`.
    TurnStart {
        /// The turn number; required, a non-negative integer.
        turn: u64,
        /// What started the turn, as written (`null` when absent).
        trigger: Value,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `turn/end`: data `{turn, reason}`.
    TurnEnd {
        /// The turn number; required, a non-negative integer.
        turn: u64,
        /// Why the turn ended, as written (`null` when absent).
        reason: Value,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `step/start`: data `{turn, step}`.
    StepStart {
        /// The turn number; required, a non-negative integer.
        turn: u64,
        /// The step number within the turn; required, a non-negative integer.
        step: u64,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `step/end`: data `{turn, step}`.
    StepEnd {
        /// The turn number; required, a non-negative integer.
        turn: u64,
        /// The step number within the turn; required, a non-negative integer.
        step: u64,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `assistant/chunk`: data `{turn, step, chunk}`, one streamed delta (in a log usually a
    /// member of a packed chunk row).
    AssistantChunk {
        /// `turn` as written (any JSON; `null` when absent).
        turn: Value,
        /// `step` as written (any JSON; `null` when absent).
        step: Value,
        /// The delta as written (`null` when absent).
        chunk: Value,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `tool/call`: data `{turn, step, callId, name, arguments}`.
    ToolCall {
        /// `turn` as written (any JSON; `null` when absent).
        turn: Value,
        /// `step` as written (any JSON; `null` when absent).
        step: Value,
        /// `callId`; required, a string.
        call_id: String,
        /// The tool's name (`name`); required, a string.
        name: String,
        /// The arguments as written (`null` when absent).
        arguments: Value,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `session/title`: data `{title, messageSeqs, source}`.
    SessionTitle {
        /// The title; required, a string. The last one in the raw log is the session's title.
        title: String,
        /// `messageSeqs`: seqs of the messages the title was made from (empty when absent).
        message_seqs: Vec<u64>,
        /// Who made the title, as written (`null` when absent).
        source: Value,
        /// Fields beyond the known ones, in the order read; written back after them.
        extra: Map<String, Value>,
    },
    /// `compact/start`: the whole data object, kept as read.
    CompactStart(Map<String, Value>),
    /// `compact/summary`: the whole data object, kept as read.
    CompactSummary(Map<String, Value>),
    /// `compact/end`: the whole data object, kept as read.
    CompactEnd(Map<String, Value>),
    /// `request/header`: the whole data object, kept as read.
    RequestHeader(Map<String, Value>),
    /// Any other event type, kept as it was.
    Other {
        /// The event's `type`.
        kind: String,
        /// The event's `data`, as read.
        data: Value,
    },
}

impl EventData {
    /// The event type this payload belongs to (the wire string, such as `"user/message"`).
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
        match self {
            EventData::UserMessage(message) => json(message),
            EventData::SteeringMessage {
                turn,
                message,
                extra,
            } => object([("turn", turn.clone()), ("message", json(message))], extra),
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
            } => object(
                [
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
            } => object(
                [("turn", (*turn).into()), ("trigger", trigger.clone())],
                extra,
            ),
            EventData::TurnEnd {
                turn,
                reason,
                extra,
            } => object(
                [("turn", (*turn).into()), ("reason", reason.clone())],
                extra,
            ),
            EventData::StepStart { turn, step, extra }
            | EventData::StepEnd { turn, step, extra } => {
                object([("turn", (*turn).into()), ("step", (*step).into())], extra)
            }
            EventData::AssistantChunk {
                turn,
                step,
                chunk,
                extra,
            } => object(
                [
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
            } => object(
                [
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
            } => object(
                [
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

    /// [`EventData::to_value`] as raw JSON text, for an [`Event`]'s `data`.
    pub fn to_raw(&self) -> Box<RawValue> {
        /// The shape of an assistant message or tool result, written straight from its fields.
        #[derive(Serialize)]
        struct TurnStep<'a> {
            turn: &'a Value,
            step: &'a Value,
            message: &'a Message,
        }
        // The events a projection makes by the thousand are written straight from their fields:
        // the same bytes as through `to_value` (no flattened map can repeat a field's key while
        // the maps are empty), without a tree of values built and dropped for each. Proof:
        // `to_raw_is_to_value_written_out` below, over every event of the dsh fixtures.
        let text = match self {
            EventData::UserMessage(message) if message.extra.is_empty() => {
                serde_json::to_string(message)
            }
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
            } if extra.is_empty() && message.extra.is_empty() => serde_json::to_string(&TurnStep {
                turn,
                step,
                message,
            }),
            _ => Ok(self.to_value().to_string()),
        };
        let text = text.expect("model types serialize to JSON");
        RawValue::from_string(text).expect("serde_json writes valid JSON")
    }

    /// Decodes `data` for event type `kind`. Unknown types decode to [`EventData::Other`].
    pub fn decode(
        kind: &str,
        data: &RawValue,
        session_id: &str,
        seq: u64,
    ) -> Result<EventData, serde_json::Error> {
        let legacy_id = || legacy::legacy_id(session_id, seq);
        let map = || -> Result<Map<String, Value>, serde_json::Error> {
            serde_json::from_str(data.get())
        };
        Ok(match kind {
            USER_MESSAGE => {
                let mut m = map()?;
                legacy::upgrade_user_message(&mut m, legacy_id);
                EventData::UserMessage(serde_json::from_value(Value::Object(m))?)
            }
            STEERING_MESSAGE => {
                let mut m = map()?;
                let turn = m.remove("turn").unwrap_or(Value::Null);
                let message = match m.remove("message") {
                    Some(message) => serde_json::from_value(message)?,
                    None => legacy::steering_message(&mut m, legacy_id())?,
                };
                EventData::SteeringMessage {
                    turn,
                    message,
                    extra: m,
                }
            }
            ASSISTANT_MESSAGE | TOOL_RESULT => reply_event(kind, map()?, legacy_id)?,
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

/// An assistant message or a tool result (`kind`), from its data `m`; a record of an older
/// version is upgraded with the legacy message id.
fn reply_event(
    kind: &str,
    mut m: Map<String, Value>,
    legacy_id: impl Fn() -> String,
) -> Result<EventData, serde_json::Error> {
    let turn = m.remove("turn").unwrap_or(Value::Null);
    let step = m.remove("step").unwrap_or(Value::Null);
    let message = match m.remove("message") {
        Some(message) => serde_json::from_value(message)?,
        None if kind == ASSISTANT_MESSAGE => legacy::assistant_message(&mut m, legacy_id())?,
        None => legacy::tool_result(&mut m, legacy_id())?,
    };
    Ok(if kind == ASSISTANT_MESSAGE {
        EventData::AssistantMessage {
            turn,
            step,
            message,
            extra: m,
        }
    } else {
        EventData::ToolResult {
            turn,
            step,
            message,
            extra: m,
        }
    })
}

fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("model types serialize to JSON")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of every dsh fixture log, decoded, written both ways: the same bytes.
    #[test]
    fn to_raw_is_to_value_written_out() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures/dsh-logs");
        let (mut events, mut direct) = (0, 0);
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            for (n, line) in std::fs::read_to_string(&path).unwrap().lines().enumerate() {
                let record: Map<String, Value> = serde_json::from_str(line).unwrap();
                let (Some(Value::String(kind)), Some(data)) =
                    (record.get("type"), record.get("data"))
                else {
                    continue;
                };
                let raw = RawValue::from_string(data.to_string()).unwrap();
                let Ok(data) = EventData::decode(kind, &raw, "s", n as u64) else {
                    continue;
                };
                events += 1;
                direct += usize::from(matches!(
                    data,
                    EventData::UserMessage(_)
                        | EventData::AssistantMessage { .. }
                        | EventData::ToolResult { .. }
                ));
                assert_eq!(
                    data.to_raw().get(),
                    data.to_value().to_string(),
                    "{path:?} line {n}"
                );
            }
        }
        assert!(
            events > 500 && direct > 100,
            "{events} events, {direct} written directly"
        );
        // And the shapes a projection of another agent makes, with every kind of text.
        let text = "q \"\\ \u{1b}[31m </x> \u{2028} é 😀\n\t";
        for data in [
            EventData::UserMessage(Message::new(
                "user",
                vec![ContentBlock::text(text.to_string())],
                MessageSource::user(),
                "a:0".into(),
            )),
            EventData::AssistantMessage {
                turn: Value::Null,
                step: 3.into(),
                message: Message::new(
                    "assistant",
                    vec![ContentBlock::text(text.to_string())],
                    MessageSource::model("claude", "unknown"),
                    "a:1".into(),
                ),
                extra: Map::new(),
            },
        ] {
            assert_eq!(data.to_raw().get(), data.to_value().to_string());
        }
    }
}
