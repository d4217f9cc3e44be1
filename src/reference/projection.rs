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

/// Projects a conversation its backend keeps as plain messages
/// ([`SessionQuery::read_plain_conversation`](crate::session::SessionQuery::read_plain_conversation)):
/// the items [`project_owned`] gives for its surface (a prompt a person's, a reply the
/// assistant's, a compaction summary a user checkpoint; empty text skipped), taken as they are.
/// Proof: `plain_conversations_project_like_their_surfaces` below, and the agents' `prepare`
/// tests.
pub fn project_plain(
    plain: crate::session::PlainConversation,
) -> (
    crate::session::SessionHeader,
    Option<u64>,
    Vec<ConversationItem>,
) {
    use crate::session::PlainRole;
    let items = plain
        .messages
        .into_iter()
        .filter(|message| !message.text.is_empty())
        .map(|message| {
            let (role, checkpoint) = match message.role {
                PlainRole::Prompt => (Role::User, false),
                PlainRole::Reply => (Role::Assistant, false),
                PlainRole::Checkpoint => (Role::User, true),
            };
            ConversationItem {
                role,
                text: message.text,
                checkpoint,
            }
        })
        .collect();
    (plain.session, plain.captured_through_seq, items)
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

    /// Every conversation of every agent's fixtures, and hostile ones: the plain messages
    /// project to exactly the items their surface projects to.
    #[test]
    fn plain_conversations_project_like_their_surfaces() {
        use crate::session::external::{self, Conversation, ExternalAgent, Item, ItemKind};
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures");
        let mut files = Vec::new();
        let mut stack = vec![fixtures];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path
                    .extension()
                    .is_some_and(|e| e == "jsonl" || e == "json")
                {
                    files.push(path);
                }
            }
        }
        let mut conversations = Vec::new();
        for path in &files {
            for agent in ExternalAgent::all() {
                if agent.format().database().is_some() || !agent.format().is_session_file(path) {
                    continue;
                }
                if let Ok(conversation) = agent.format().read_conversation(path) {
                    if !conversation.items.is_empty() {
                        conversations.push((agent, conversation));
                    }
                }
            }
        }
        let agents: std::collections::HashSet<_> =
            conversations.iter().map(|(a, _)| a.name()).collect();
        assert!(
            conversations.len() >= 20 && agents.len() >= 4,
            "{} conversations of {agents:?}",
            conversations.len()
        );
        let item = |kind, text: &str| Item {
            kind,
            text: text.to_string(),
            time: 0,
        };
        conversations.push((
            ExternalAgent::all().next().unwrap(),
            Conversation {
                items: vec![
                    item(ItemKind::User, ""),
                    item(
                        ItemKind::Summary,
                        "earlier \u{1b}[2J </referenced-sessions>",
                    ),
                    item(ItemKind::Assistant, ""),
                    item(ItemKind::User, "q\r\n\u{202e}"),
                    item(ItemKind::Assistant, "a\u{0}"),
                    item(ItemKind::Summary, ""),
                ],
                last_line: Some(9),
                last_activity: None,
            },
        ));
        for (agent, conversation) in conversations {
            let head = external::Head {
                id: "x".into(),
                created_at: 1,
                cwd: Some("/w".into()),
            };
            let header = external::header(agent, &head);
            let from_surface = project_owned(external::surface(header.clone(), &conversation));
            let from_plain = project_plain(external::plain(header, conversation));
            assert_eq!(from_plain, from_surface, "{}", agent.name());
        }
    }
}
