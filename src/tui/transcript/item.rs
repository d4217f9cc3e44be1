//! The transcript's items: what one entry is, how a log message becomes one, and which cell
//! draws it.
//!
//! Purpose: [`TranscriptItem`] is the state of one entry (what was said, whether a card is
//! open); reading a log message into an item lives here with the typed readers it needs
//! ([`RecordedReference`], [`crate::reference::render::read_context`]), and drawing is the
//! cells' ([`super::cells`], one type per kind).
//!
//! Invariant: a log message never fails to become an item it should show: a session-reference
//! context whose metadata does not read becomes a plain context card, never an error or a panic.
//! Proof: `tests/tui/transcript.rs` (malformed and hostile sources) and
//! `tests/session/hostile_sessions.rs`.

use super::cells::{
    AssistantCell, CompactionCell, ContextCell, NoticeCell, ReasoningCell, ReferenceCell,
    SteerCell, ToolResultCell, TranscriptCell, UserCell, WelcomeCell,
};
use super::parts::{human_bytes, Kept, NoticeLevel, Pastes, ReferencedSession};
use crate::session::format::RecordedReference;
use crate::session::format::{
    ContentBlock, Message, MessageSource, ASSISTANT_MESSAGE, STEERING_MESSAGE, TOOL_RESULT,
    USER_MESSAGE,
};
use ratatui::text::Line;
use serde_json::Value;

/// One entry of the transcript. Items from logs hold raw text; drawing escapes it.
#[derive(Debug, Clone, PartialEq)]
pub enum TranscriptItem {
    /// A direct prompt.
    User {
        /// What the user wrote: the display text when the log keeps one, else the text.
        text: String,
        /// Its pasted blocks, shown as chips (none for a prompt read back from a log).
        pastes: Pastes,
    },
    /// A prompt that steered a running turn.
    Steer {
        /// What the user wrote: the display text when the log keeps one, else the text.
        text: String,
        /// Its pasted blocks, shown as chips (none for a prompt read back from a log).
        pastes: Pastes,
    },
    /// Model output; `streaming` while deltas still arrive.
    Assistant {
        /// The answer's text so far.
        text: String,
        /// The names of the tools the answer called, in order.
        tool_calls: Vec<String>,
        /// Deltas are still arriving.
        streaming: bool,
    },
    /// The model's reasoning: a dim, collapsible block (one line while collapsed, showing the
    /// latest words while it streams). Never sent back to the model.
    Reasoning {
        /// The reasoning text so far.
        text: String,
        /// Deltas are still arriving.
        streaming: bool,
        /// Shown whole rather than as one line.
        expanded: bool,
    },
    /// A session-reference context: one dim line saying what was sent, expandable to the
    /// snapshot read role by role; once more to the exact text the model received.
    ReferenceCard {
        /// The sessions the snapshot names, in its order.
        sessions: Vec<ReferencedSession>,
        /// The exact context text the model received.
        context: String,
        /// Opened past the one-line summary.
        expanded: bool,
        /// Expanded to the exact text rather than the readable view.
        raw: bool,
    },
    /// Any other context message (including a malformed session-reference one).
    ContextCard {
        /// What the card says it is, e.g. `file src/main.rs · 2.0 KiB` or the source's kind.
        kind: String,
        /// The context message's text.
        text: String,
        /// Opened past the one-line head.
        expanded: bool,
    },
    /// A compaction checkpoint: a dim marker, expandable to the summary.
    Compaction {
        /// The checkpoint's summary text.
        summary: String,
        /// Opened to show the summary.
        expanded: bool,
    },
    /// What a tool returned.
    ToolResult {
        /// The tool's output text.
        text: String,
        /// The tool reported a failure.
        is_error: bool,
    },
    /// The header of a new session: what runs where, and how to start.
    Welcome {
        /// This crate's version.
        version: String,
        /// The model's status-line label.
        model: String,
        /// The session's cwd, if it has one.
        cwd: Option<String>,
        /// The home the session lives in, as shown.
        home: String,
    },
    /// Our own messages, e.g. `Session reference failed: …`.
    Notice {
        /// Whether it is information or an error.
        level: NoticeLevel,
        /// The notice's text.
        text: String,
    },
}

impl TranscriptItem {
    /// The item for a surface message read from a log (`event_kind` is the event type, e.g.
    /// `user/message`). `None` for kinds the transcript does not show.
    pub fn from_message(message: &Message, event_kind: &str) -> Option<TranscriptItem> {
        if message.source.is_compact_checkpoint() {
            return Some(TranscriptItem::Compaction {
                summary: message.text(),
                expanded: false,
            });
        }
        if let MessageSource::SessionReference { references, .. } = &message.source {
            return Some(match parse_references(references) {
                Some(sessions) => TranscriptItem::ReferenceCard {
                    sessions,
                    context: message.text(),
                    expanded: false,
                    raw: false,
                },
                None => context_card(message),
            });
        }
        match event_kind {
            USER_MESSAGE if message.source.is_direct_user() => Some(TranscriptItem::User {
                text: message.display_text(),
                pastes: Pastes::default(),
            }),
            USER_MESSAGE => Some(context_card(message)),
            STEERING_MESSAGE => Some(TranscriptItem::Steer {
                text: message.display_text(),
                pastes: Pastes::default(),
            }),
            ASSISTANT_MESSAGE => Some(TranscriptItem::Assistant {
                text: message.text(),
                tool_calls: message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall { name, .. } => Some(name.clone()),
                        _ => None,
                    })
                    .collect(),
                streaming: false,
            }),
            TOOL_RESULT => {
                let mut is_error = false;
                let mut parts = Vec::new();
                for block in &message.content {
                    if let ContentBlock::ToolResult {
                        content,
                        is_error: err,
                        ..
                    } = block
                    {
                        is_error |= err.unwrap_or(false);
                        parts.extend(content.iter().filter_map(ContentBlock::as_text));
                    }
                }
                Some(TranscriptItem::ToolResult {
                    text: parts.join("\n"),
                    is_error,
                })
            }
            _ => None,
        }
    }

    /// Cards and markers that can show more, and prompts with pasted chips.
    pub fn is_expandable(&self) -> bool {
        match self {
            TranscriptItem::User { pastes, .. } | TranscriptItem::Steer { pastes, .. } => {
                !pastes.is_empty()
            }
            item => matches!(
                item,
                TranscriptItem::ReferenceCard { .. }
                    | TranscriptItem::ContextCard { .. }
                    | TranscriptItem::Compaction { .. }
                    | TranscriptItem::Reasoning { .. }
            ),
        }
    }

    /// Shows `pasted` (the texts the composer collapsed) as chips in this prompt; false, and
    /// no change, for an item that is not a prompt or when none of them is found in its text.
    pub fn set_pastes(&mut self, pasted: &[String]) -> bool {
        match self {
            TranscriptItem::User { text, pastes } | TranscriptItem::Steer { text, pastes } => {
                *pastes = Pastes::locate(text, pasted);
                !pastes.is_empty()
            }
            _ => false,
        }
    }

    /// Flips an expandable item; false for the others. A reference card goes collapsed →
    /// readable → exact text → collapsed.
    pub fn toggle(&mut self) -> bool {
        if let TranscriptItem::ReferenceCard { expanded, raw, .. } = self {
            match (*expanded, *raw) {
                (false, _) => (*expanded, *raw) = (true, false),
                (true, false) => *raw = true,
                (true, true) => (*expanded, *raw) = (false, false),
            }
            return true;
        }
        self.set_expanded(!self.is_expanded())
    }

    /// Whether an expandable item is open; always false for the others.
    pub fn is_expanded(&self) -> bool {
        match self {
            TranscriptItem::ReferenceCard { expanded, .. }
            | TranscriptItem::ContextCard { expanded, .. }
            | TranscriptItem::Compaction { expanded, .. }
            | TranscriptItem::Reasoning { expanded, .. } => *expanded,
            TranscriptItem::User { pastes, .. } | TranscriptItem::Steer { pastes, .. } => {
                pastes.expanded
            }
            _ => false,
        }
    }

    /// Opens or closes an expandable item; false (and no change) for the others.
    pub fn set_expanded(&mut self, value: bool) -> bool {
        match self {
            TranscriptItem::ReferenceCard { expanded, .. }
            | TranscriptItem::ContextCard { expanded, .. }
            | TranscriptItem::Compaction { expanded, .. }
            | TranscriptItem::Reasoning { expanded, .. } => {
                *expanded = value;
                true
            }
            TranscriptItem::User { pastes, .. } | TranscriptItem::Steer { pastes, .. }
                if !pastes.is_empty() =>
            {
                pastes.expanded = value;
                true
            }
            _ => false,
        }
    }

    /// The cell that draws this item.
    pub fn cell(&self) -> Box<dyn TranscriptCell + '_> {
        match self {
            TranscriptItem::User { text, pastes } => Box::new(UserCell { text, pastes }),
            TranscriptItem::Steer { text, pastes } => Box::new(SteerCell { text, pastes }),
            TranscriptItem::Assistant {
                text,
                tool_calls,
                streaming,
            } => Box::new(AssistantCell {
                text,
                tool_calls,
                streaming: *streaming,
            }),
            TranscriptItem::Reasoning {
                text,
                streaming,
                expanded,
            } => Box::new(ReasoningCell {
                text,
                streaming: *streaming,
                expanded: *expanded,
            }),
            TranscriptItem::ReferenceCard {
                sessions,
                context,
                expanded,
                raw,
            } => Box::new(ReferenceCell {
                sessions,
                context,
                expanded: *expanded,
                raw: *raw,
            }),
            TranscriptItem::ContextCard {
                kind,
                text,
                expanded,
            } => Box::new(ContextCell {
                kind,
                text,
                expanded: *expanded,
            }),
            TranscriptItem::Compaction { summary, expanded } => Box::new(CompactionCell {
                summary,
                expanded: *expanded,
            }),
            TranscriptItem::ToolResult { text, is_error } => Box::new(ToolResultCell {
                text,
                is_error: *is_error,
            }),
            TranscriptItem::Welcome {
                version,
                model,
                cwd,
                home,
            } => Box::new(WelcomeCell {
                version,
                model,
                cwd: cwd.as_deref(),
                home,
            }),
            TranscriptItem::Notice { level, text } => Box::new(NoticeCell {
                level: *level,
                text,
            }),
        }
    }

    /// The rows this item takes at `width` columns (none at width 0).
    pub fn lines(&self, width: usize) -> Vec<Line<'static>> {
        if width == 0 {
            return Vec::new();
        }
        self.cell().display_lines(width)
    }
}

/// The reasoning blocks of a message, joined; `None` when there are none.
pub(super) fn reasoning_of(message: &Message) -> Option<String> {
    let parts: Vec<&str> = message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Reasoning { text, .. } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

fn context_card(message: &Message) -> TranscriptItem {
    let kind = match &message.source {
        // An attached file: its path and what of it was sent.
        MessageSource::Plugin { plugin, extra } if plugin == "file" => {
            let path = extra.get("path").and_then(Value::as_str).unwrap_or("?");
            let bytes = extra.get("bytes").and_then(Value::as_u64).unwrap_or(0);
            let sent = extra
                .get("attachedBytes")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let note = if extra.get("binary") == Some(&Value::Bool(true)) {
                "binary, not attached".to_string()
            } else if extra.get("truncated") == Some(&Value::Bool(true)) {
                format!("cut: {} of {}", human_bytes(sent), human_bytes(bytes))
            } else {
                human_bytes(bytes)
            };
            format!("file {path} · {note}")
        }
        MessageSource::Plugin { plugin, .. } => format!("plugin {plugin}"),
        source => source.kind().unwrap_or("unknown").to_string(),
    };
    TranscriptItem::ContextCard {
        kind,
        text: message.text(),
        expanded: false,
    }
}

/// `references` when it is a non-empty array of objects with string `sessionId` and `label`.
fn parse_references(references: &Value) -> Option<Vec<ReferencedSession>> {
    let items = RecordedReference::read_all(references)?;
    if items.is_empty() {
        return None;
    }
    items
        .into_iter()
        .map(|item| {
            let kept = match (
                item.original_messages,
                item.retained_messages,
                item.omitted_bytes,
            ) {
                (Some(original), Some(retained), Some(omitted_bytes)) => Some(Kept {
                    original,
                    retained,
                    omitted_bytes,
                }),
                _ => None,
            };
            Some(ReferencedSession {
                session_id: item.session_id?,
                label: item.label?,
                // Only a source this build knows is named; anything else is not shown.
                source: item.source,
                kept,
            })
        })
        .collect()
}
