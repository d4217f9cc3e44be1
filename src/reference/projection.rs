//! Projection (SPEC §3.5): which parts of a source's folded surface a snapshot may carry.
//!
//! Only what people said and what the model answered crosses sessions: direct prompts and
//! steering, assistant text, and compaction checkpoints (which stand for the shadowed history).
//! Plugin and runtime context, earlier snapshots, tools and reasoning stay behind, so a snapshot
//! never smuggles another session's injected context into this one.

use crate::session::format::{ASSISTANT_MESSAGE, STEERING_MESSAGE, USER_MESSAGE};
use crate::session::message_text::{message_text, SourceClass};
use crate::session::SurfaceSnapshot;
use serde::Serialize;

/// The speaker of a conversation item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A person: direct prompts, steering and compaction checkpoints.
    User,
    /// The model: assistant text.
    Assistant,
}

impl Role {
    /// The `role` string of the context JSON: `"user"` or `"assistant"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One projected message of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationItem {
    /// Who spoke (`role` in the context JSON).
    pub role: Role,
    /// The `text` blocks joined with `\n` (a prompt's display content when it carries baked
    /// context); never empty.
    pub text: String,
    /// A compaction checkpoint: retention never drops it.
    pub checkpoint: bool,
}

/// Projects a folded surface into conversation items, in surface order; items with empty text
/// are skipped.
pub fn project(snapshot: &SurfaceSnapshot) -> Vec<ConversationItem> {
    let session_id = snapshot.session.id.as_str();
    snapshot
        .events
        .iter()
        .filter_map(|event| project_event(session_id, event))
        .collect()
}

/// [`project`], consuming the snapshot: each event's payload is freed as soon as its text is
/// taken, so a big source never holds its raw surface and its projected text in full at once
/// (peak near the larger of the two, not their sum). Returns the header and the captured seq
/// beside the items.
pub fn project_owned(
    snapshot: SurfaceSnapshot,
) -> (
    crate::session::SessionHeader,
    Option<u64>,
    Vec<ConversationItem>,
) {
    let SurfaceSnapshot {
        session,
        captured_through_seq,
        events,
    } = snapshot;
    let items = events
        .into_iter()
        .filter_map(|event| project_event(&session.id, &event))
        .collect();
    (session, captured_through_seq, items)
}

/// The conversation item of one surface event, if it is one.
fn project_event(session_id: &str, event: &crate::session::Event) -> Option<ConversationItem> {
    if !matches!(
        event.kind.as_str(),
        USER_MESSAGE | STEERING_MESSAGE | ASSISTANT_MESSAGE
    ) {
        return None;
    }
    // The text-only reading answers for ordinary messages; the full decode for the rest.
    let (source, text) = match message_text(&event.kind, &event.data) {
        // No `envelope`: what a person typed is the text itself.
        Some(message) => (message.source, message.text),
        None => match event.message(session_id) {
            Ok(Some(message)) => {
                let source = SourceClass::of(&message.source);
                let text = match (event.kind.as_str(), source) {
                    (USER_MESSAGE | STEERING_MESSAGE, SourceClass::DirectUser) => {
                        message.display_text()
                    }
                    _ => message.text(),
                };
                (source, text)
            }
            Ok(None) => return None,
            Err(err) => {
                // An undecodable payload cannot be shown to be a direct prompt, so it is
                // left out like any other unrecognized traffic.
                tracing::warn!(
                    session = session_id,
                    seq = event.seq,
                    error = %err,
                    "skipping an undecodable surface message in a session reference"
                );
                return None;
            }
        },
    };
    let (role, checkpoint) = match (event.kind.as_str(), source) {
        (USER_MESSAGE, SourceClass::CompactCheckpoint) => (Role::User, true),
        (USER_MESSAGE | STEERING_MESSAGE, SourceClass::DirectUser) => (Role::User, false),
        (ASSISTANT_MESSAGE, _) => (Role::Assistant, false),
        _ => return None,
    };
    (!text.is_empty()).then_some(ConversationItem {
        role,
        text,
        checkpoint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::format::{ContentBlock, EventData, Message, MessageSource};
    use crate::session::{Event, SessionHeader};
    use serde_json::Value;

    fn snapshot(events: Vec<EventData>) -> SurfaceSnapshot {
        let events: Vec<Event> = events
            .iter()
            .enumerate()
            .map(|(seq, data)| Event::new(seq as u64, 0, data))
            .collect();
        SurfaceSnapshot {
            session: SessionHeader::new("s", 0, None),
            captured_through_seq: events.last().map(|e| e.seq),
            events,
        }
    }

    fn message(role: &str, source: MessageSource, blocks: Vec<ContentBlock>) -> Message {
        Message::new(role, blocks, source, "m".into())
    }

    #[test]
    fn keeps_direct_user_steering_assistant_and_checkpoints() {
        let user = |text: &str| {
            EventData::UserMessage(message(
                "user",
                MessageSource::user(),
                vec![ContentBlock::text(text)],
            ))
        };
        let items = project(&snapshot(vec![
            EventData::UserMessage(message(
                "user",
                MessageSource::plugin("compact"),
                vec![ContentBlock::text("summary")],
            )),
            user("hello"),
            EventData::UserMessage(message(
                "user",
                MessageSource::plugin("workspace"),
                vec![ContentBlock::text("ctx")],
            )),
            EventData::SteeringMessage {
                turn: Value::from(1),
                message: message("user", MessageSource::user(), vec![ContentBlock::text("s")]),
                extra: Default::default(),
            },
            EventData::AssistantMessage {
                turn: Value::from(1),
                step: Value::from(1),
                message: message(
                    "assistant",
                    MessageSource::model("p", "m"),
                    vec![
                        ContentBlock::Reasoning {
                            text: "hidden".into(),
                            extra: Default::default(),
                        },
                        ContentBlock::text("a"),
                        ContentBlock::text("b"),
                    ],
                ),
                extra: Default::default(),
            },
            user(""),
        ]));
        let got: Vec<(Role, &str, bool)> = items
            .iter()
            .map(|i| (i.role, i.text.as_str(), i.checkpoint))
            .collect();
        assert_eq!(
            got,
            vec![
                (Role::User, "summary", true),
                (Role::User, "hello", false),
                (Role::User, "s", false),
                (Role::Assistant, "a\nb", false),
            ]
        );
    }

    #[test]
    fn baked_prefix_context_contributes_only_display_content() {
        let data: Value = serde_json::json!({
            "content": [{"type": "text", "text": "## Referenced sessions …"}, {"type": "text", "text": "typed"}],
            "source": {"kind": "user"},
            "role": "user",
            "id": "u1",
            "envelope": {"displayContent": "typed", "prefixContexts": []}
        });
        let message: Message = serde_json::from_value(data).unwrap();
        let items = project(&snapshot(vec![EventData::UserMessage(message)]));
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].text, "typed");
    }
}
