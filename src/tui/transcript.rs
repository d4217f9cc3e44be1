//! The conversation as the user sees it (SPEC §5.4).
//!
//! Items are built either live (the runtime pushes prompts, deltas and notices) or from log
//! messages via [`TranscriptItem::from_message`], so a resumed session reads the same as a live
//! one. Everything that came from a log is untrusted and escaped for multi-line display.
//! A session-reference context is folded into one dim card: the snapshot is for the model, and
//! the user only needs to know which sessions went along, with the full text a toggle away.

use super::escape::EscapeMode;
use super::render::{clip, Renderable};
use super::style;
use super::text::StyledText;
use crate::reference::render::RecordedSource;
use crate::session::external::ExternalAgent;
use crate::session::format::RecordedReference;
use crate::session::format::{
    ContentBlock, Event, Message, MessageSource, ASSISTANT_MESSAGE, STEERING_MESSAGE, TOOL_RESULT,
    USER_MESSAGE,
};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use serde_json::Value;
use std::cell::{Cell, RefCell};

/// One referenced session named on a reference card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferencedSession {
    /// The referenced session's id, raw (escaped when drawn).
    pub session_id: String,
    /// The label the mention gave it, raw (escaped when drawn).
    pub label: String,
    /// The agent that wrote it, for another agent's session (SPEC §9).
    pub source: Option<ExternalAgent>,
    /// What the snapshot kept of it (SPEC §3.9), when the metadata says.
    pub kept: Option<Kept>,
}

/// What a snapshot kept of one source: `retained` of `original` messages, `omitted_bytes`
/// left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// Messages the source had (`originalMessages`).
    pub original: u64,
    /// Messages the snapshot kept (`retainedMessages`).
    pub retained: u64,
    /// Bytes of the source left out by retention (`omittedBytes`).
    pub omitted_bytes: u64,
}

impl Kept {
    /// `12/12 msgs` or `kept 1 of 104 · 3.0 MiB omitted`.
    pub fn describe(&self) -> String {
        if self.retained == self.original && self.omitted_bytes == 0 {
            format!("{}/{} msgs", self.retained, self.original)
        } else if self.omitted_bytes > 0 {
            format!(
                "kept {} of {} · {} omitted",
                self.retained,
                self.original,
                human_bytes(self.omitted_bytes)
            )
        } else {
            format!("kept {} of {}", self.retained, self.original)
        }
    }
}

/// How a notice is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeLevel {
    /// Plain information, drawn dim.
    Info,
    /// A failure, drawn in the error style.
    Error,
}

/// One entry of the transcript. Items from logs hold raw text; drawing escapes it.
#[derive(Debug, Clone, PartialEq)]
pub enum TranscriptItem {
    /// A direct prompt.
    User {
        /// What the user wrote: the display text when the log keeps one, else the text.
        text: String,
    },
    /// A prompt that steered a running turn.
    Steer {
        /// What the user wrote: the display text when the log keeps one, else the text.
        text: String,
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
            }),
            USER_MESSAGE => Some(context_card(message)),
            STEERING_MESSAGE => Some(TranscriptItem::Steer {
                text: message.display_text(),
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

    /// Cards and markers that can show more.
    pub fn is_expandable(&self) -> bool {
        matches!(
            self,
            TranscriptItem::ReferenceCard { .. }
                | TranscriptItem::ContextCard { .. }
                | TranscriptItem::Compaction { .. }
                | TranscriptItem::Reasoning { .. }
        )
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
            _ => false,
        }
    }

    /// The rows this item takes at `width` columns.
    pub fn lines(&self, width: usize) -> Vec<Line<'static>> {
        if width == 0 {
            return Vec::new();
        }
        let indent = text("  ", Style::new());
        let multi = |body: &str, style: Style| {
            let mut t = StyledText::new();
            t.push_untrusted(body, EscapeMode::MultiLine, style);
            t
        };
        match self {
            TranscriptItem::User { text: body } => {
                let (shown, rest) = collapse_paste(body);
                let mut lines = multi(shown, Style::new()).wrap(
                    width,
                    &text("› ", style::user_prefix()),
                    &indent,
                );
                lines.extend(rest.map(|r| {
                    text(&format!("  {r}"), style::dim())
                        .truncate(width)
                        .to_line()
                }));
                lines
            }
            TranscriptItem::Steer { text: body } => {
                let mut first = text("› ", style::user_prefix());
                first.push("steer ", style::steer_tag());
                let (shown, rest) = collapse_paste(body);
                let mut lines = multi(shown, Style::new()).wrap(width, &first, &indent);
                lines.extend(rest.map(|r| {
                    text(&format!("  {r}"), style::dim())
                        .truncate(width)
                        .to_line()
                }));
                lines
            }
            TranscriptItem::Assistant {
                text: body,
                tool_calls,
                streaming,
            } => {
                let mut t = multi(body, Style::new());
                if *streaming {
                    t.push("▍", style::user_prefix());
                }
                let mut lines = t.wrap(width, &text("• ", style::dim()), &indent);
                for name in tool_calls {
                    let mut call = text("  → tool ", style::dim());
                    call.push_untrusted(name, EscapeMode::SingleLine, style::dim());
                    lines.push(call.truncate(width).to_line());
                }
                lines
            }
            TranscriptItem::Reasoning {
                text: body,
                streaming,
                expanded,
            } => {
                let mut head = text(marker(*expanded), style::dim());
                let words = body.split_whitespace().count();
                head.push(
                    &format!(
                        "thinking{} · {words} word{}",
                        if *streaming { "…" } else { "" },
                        if words == 1 { "" } else { "s" }
                    ),
                    style::dim(),
                );
                if *streaming && !*expanded {
                    // The latest words, so a long think visibly progresses on one line.
                    let tail: Vec<&str> = body.split_whitespace().rev().take(12).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    head.push(" · ", style::dim());
                    head.push_untrusted(&tail.join(" "), EscapeMode::SingleLine, style::dim());
                }
                card(head, body, *expanded, width)
            }
            TranscriptItem::ReferenceCard {
                sessions,
                context,
                expanded,
                raw,
            } => {
                let mut head = text(marker(*expanded), style::dim());
                head.push("Referenced sessions · ", style::dim());
                for (i, s) in sessions.iter().enumerate() {
                    if i > 0 {
                        head.push(", ", style::dim());
                    }
                    head.push_untrusted(&s.label, EscapeMode::SingleLine, style::dim());
                    if s.label != s.session_id {
                        head.push(" (", style::dim());
                        head.push_untrusted(&s.session_id, EscapeMode::SingleLine, style::dim());
                        head.push(")", style::dim());
                    }
                    if let Some(agent) = s.source {
                        head.push(&format!(" · from {}", agent.product()), style::dim());
                    }
                    if let Some(kept) = s.kept {
                        head.push(&format!(" · {}", kept.describe()), style::dim());
                    }
                }
                head.push(
                    &format!(" · {} sent", human_bytes(context.len() as u64)),
                    style::dim(),
                );
                if *expanded && !*raw {
                    if let Some(readable) = readable_snapshot(context) {
                        let mut lines = vec![head.truncate(width).to_line()];
                        lines.extend(readable_lines(&readable, width));
                        let mut hint = text("  ", Style::new());
                        hint.push("(again: the exact text the model received)", style::dim());
                        lines.push(hint.truncate(width).to_line());
                        return lines;
                    }
                }
                card(head, context, *expanded, width)
            }
            TranscriptItem::ContextCard {
                kind,
                text: body,
                expanded,
            } => {
                let mut head = text(marker(*expanded), style::dim());
                head.push("context · ", style::dim());
                head.push_untrusted(kind, EscapeMode::SingleLine, style::dim());
                card(head, body, *expanded, width)
            }
            TranscriptItem::Compaction { summary, expanded } => {
                let mut head = text(marker(*expanded), style::dim());
                head.push("earlier context was compacted", style::dim());
                card(head, summary, *expanded, width)
            }
            TranscriptItem::ToolResult {
                text: body,
                is_error,
            } => {
                let style = if *is_error {
                    style::error()
                } else {
                    style::dim()
                };
                let mut t = text("  ↳ ", style);
                let first = body.lines().next().unwrap_or("");
                t.push_untrusted(first, EscapeMode::SingleLine, style);
                if body.lines().nth(1).is_some() {
                    t.push(" …", style);
                }
                vec![t.truncate(width).to_line()]
            }
            TranscriptItem::Welcome {
                version,
                model,
                cwd,
                home,
            } => {
                let mut lines = Vec::new();
                let mut title = text("✻ ", style::user_prefix());
                title.push("dsh-refs", Style::new().add_modifier(Modifier::BOLD));
                title.push(
                    &format!(" {version} · cross-session references"),
                    style::dim(),
                );
                lines.push(title.truncate(width).to_line());
                for (name, value) in [
                    ("model", model.as_str()),
                    ("cwd  ", cwd.as_deref().unwrap_or("(none)")),
                    ("home ", home.as_str()),
                ] {
                    let mut row = text(&format!("  {name}  "), style::dim());
                    row.push_untrusted(value, EscapeMode::SingleLine, Style::new());
                    lines.push(row.truncate(width).to_line());
                }
                lines.push(Line::default());
                for tip in [
                    "type @ to reference another session or a file",
                    "/ for commands · ? for keys · ctrl+o opens the last card",
                ] {
                    let mut row = text("  tip  ", style::dim());
                    row.push(tip, style::dim());
                    lines.extend(row.wrap(
                        width,
                        &text("", Style::new()),
                        &text("       ", Style::new()),
                    ));
                }
                lines
            }
            TranscriptItem::Notice { level, text: body } => {
                let style = match level {
                    NoticeLevel::Info => style::dim(),
                    NoticeLevel::Error => style::error(),
                };
                let prefix = match level {
                    NoticeLevel::Info => "· ",
                    NoticeLevel::Error => "! ",
                };
                multi(body, style).wrap(width, &text(prefix, style), &indent)
            }
        }
    }
}

fn text_of(s: &str, style: Style) -> StyledText {
    text(s, style)
}

fn text(s: &str, style: Style) -> StyledText {
    let mut t = StyledText::new();
    t.push(s, style);
    t
}

fn marker(expanded: bool) -> &'static str {
    if expanded {
        "▾ "
    } else {
        "▸ "
    }
}

/// A one-line head (truncated), plus the body when expanded.
fn card(head: StyledText, body: &str, expanded: bool, width: usize) -> Vec<Line<'static>> {
    let mut lines = vec![head.truncate(width).to_line()];
    if expanded {
        let mut t = StyledText::new();
        t.push_untrusted(body, EscapeMode::MultiLine, style::dim());
        let indent = text("  ", Style::new());
        lines.extend(t.wrap(width, &indent, &indent));
    }
    lines
}

/// The reasoning blocks of a message, joined; `None` when there are none.
fn reasoning_of(message: &Message) -> Option<String> {
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

/// Lines of a long message shown before the rest is collapsed.
const PASTE_PREVIEW_LINES: usize = 4;

/// A message as long as a paste the composer collapses ([`super::composer::PASTE_COLLAPSE_LINES`]
/// lines or [`super::composer::PASTE_COLLAPSE_CHARS`] characters) is shown as its first
/// [`PASTE_PREVIEW_LINES`] lines and a note of what else was sent (display only: the log and
/// what the model got are whole). Returns the text shown and the note.
fn collapse_paste(body: &str) -> (&str, Option<String>) {
    use super::composer::{PASTE_COLLAPSE_CHARS, PASTE_COLLAPSE_LINES};
    let lines = body.lines().count();
    if lines <= PASTE_COLLAPSE_LINES && body.chars().count() <= PASTE_COLLAPSE_CHARS {
        return (body, None);
    }
    // The first lines, and no more than the character budget of a paste preview.
    let mut end = 0;
    for (i, line) in body.split_inclusive('\n').enumerate() {
        if i == PASTE_PREVIEW_LINES || end + line.len() > 400 {
            break;
        }
        end += line.len();
    }
    if end == 0 {
        // One very long line: a character-boundary cut of it.
        end = body
            .char_indices()
            .nth(200)
            .map_or(body.len(), |(at, _)| at);
    }
    let shown = body[..end].trim_end_matches(['\n', '\r']);
    let rest = &body[end..];
    let note = format!(
        "[… {} more lines, {} — sent whole]",
        rest.lines().count(),
        human_bytes(rest.len() as u64)
    );
    (shown, Some(note))
}

/// `512 B`, `48 KiB`, `3.1 MiB`: [`super::text::format_size`].
pub fn human_bytes(n: u64) -> String {
    super::text::format_size(n)
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

/// The snapshot inside a session-reference context (SPEC §3.7), or `None` when the text is
/// not of that shape (then the card shows it as it is).
pub fn readable_snapshot(context: &str) -> Option<Vec<RecordedSource>> {
    crate::reference::render::read_context(context)
}

/// The rows of a readable snapshot: per source a heading, then each message under its role.
fn readable_lines(sources: &[RecordedSource], width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for source in sources {
        let mut head = text("  ── ", style::dim());
        head.push_untrusted(&source.label, EscapeMode::SingleLine, style::key());
        if source.label != source.session_id {
            head.push(" (", style::dim());
            head.push_untrusted(&source.session_id, EscapeMode::SingleLine, style::dim());
            head.push(")", style::dim());
        }
        if let Some(seq) = source.captured_through_seq {
            head.push(&format!(" · through seq {seq}"), style::dim());
        }
        lines.push(head.truncate(width).to_line());
        for entry in &source.conversation {
            let mut first = text("    ", Style::new());
            first.push_untrusted(&entry.role, EscapeMode::SingleLine, style::key());
            first.push(": ", style::dim());
            let mut t = StyledText::new();
            t.push_untrusted(&entry.text, EscapeMode::MultiLine, style::dim());
            lines.extend(t.wrap(width, &first, &text("      ", Style::new())));
        }
    }
    lines
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

/// The transcript: items plus a scroll position counted in rows from the bottom.
///
/// Wrapped rows are cached per item and width, and only the rows on screen are drawn, so a
/// frame costs what is visible, not the length of the conversation. Every mutation below drops
/// exactly the cache entries it affects.
///
/// A streaming answer only grows at its end, so its rows up to its last newline are wrapped
/// once and kept (`StreamPrefix`); each frame wraps only the last, still-growing paragraph.
/// Wrapping treats every newline-separated line on its own, so the rows are the same as a
/// whole re-wrap (proof: `streaming_rows_equal_a_full_wrap` below).
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    items: Vec<TranscriptItem>,
    /// Rows scrolled up from the bottom.
    scroll: Cell<usize>,
    /// Rows that fit above the bottom at the last draw (the largest useful scroll).
    max_scroll: Cell<usize>,
    /// Total rows at the last draw: new output while scrolled up keeps the view still.
    last_total: Cell<Option<usize>>,
    /// The card (expandable item) the details key acts on; none: the newest one.
    selected: Option<usize>,
    /// Rows of the last draw, to bring a selected card into view.
    last_height: Cell<usize>,
    cache: RefCell<Vec<Option<Wrapped>>>,
    stream_prefix: RefCell<Option<StreamPrefix>>,
}

/// The wrapped rows of a streaming answer's text up to (not including) byte `bytes`, which
/// follows a newline.
#[derive(Debug, Clone)]
struct StreamPrefix {
    index: usize,
    width: usize,
    bytes: usize,
    lines: Vec<Line<'static>>,
}

#[derive(Debug, Clone)]
struct Wrapped {
    width: usize,
    lines: Vec<Line<'static>>,
}

impl Transcript {
    /// An empty transcript, following the newest output.
    pub fn new() -> Transcript {
        Transcript::default()
    }

    /// The items, oldest first.
    pub fn items(&self) -> &[TranscriptItem] {
        &self.items
    }

    /// Mutable access to every item (drops the whole wrap cache).
    pub fn items_mut(&mut self) -> &mut [TranscriptItem] {
        self.cache.get_mut().clear();
        *self.stream_prefix.get_mut() = None;
        &mut self.items
    }

    fn invalidate(&mut self, index: usize) {
        if let Some(slot) = self.cache.get_mut().get_mut(index) {
            *slot = None;
        }
    }

    /// Appends `item` as it is.
    pub fn push(&mut self, item: TranscriptItem) {
        self.items.push(item);
    }

    /// Pushes the item for a log message; false when the message kind is not shown. An
    /// assistant message's reasoning comes first, as a collapsed reasoning block.
    pub fn push_message(&mut self, message: &Message, event_kind: &str) -> bool {
        if event_kind == ASSISTANT_MESSAGE {
            if let Some(reasoning) = reasoning_of(message) {
                self.items.push(TranscriptItem::Reasoning {
                    text: reasoning,
                    streaming: false,
                    expanded: false,
                });
            }
        }
        match TranscriptItem::from_message(message, event_kind) {
            Some(item) => {
                self.items.push(item);
                true
            }
            None => false,
        }
    }

    /// Pushes the item for a surface event of session `session_id` (history from a log).
    /// False when it carries no shown message; an undecodable one becomes an error notice.
    pub fn push_event(&mut self, event: &Event, session_id: &str) -> bool {
        match event.message(session_id) {
            Ok(Some(message)) => self.push_message(&message, &event.kind),
            Ok(None) => false,
            Err(err) => {
                self.push_notice(
                    NoticeLevel::Error,
                    format!("Unreadable {} event (seq {}): {err}", event.kind, event.seq),
                );
                true
            }
        }
    }

    /// The welcome header of a new session.
    pub fn push_welcome(&mut self, version: &str, model: &str, cwd: Option<&str>, home: &str) {
        self.items.push(TranscriptItem::Welcome {
            version: version.to_string(),
            model: model.to_string(),
            cwd: cwd.map(str::to_string),
            home: home.to_string(),
        });
    }

    /// Appends a notice of ours (never from a log).
    pub fn push_notice(&mut self, level: NoticeLevel, text: impl Into<String>) {
        self.items.push(TranscriptItem::Notice {
            level,
            text: text.into(),
        });
    }

    /// Appends streamed reasoning to the streaming reasoning block, starting one if needed.
    pub fn append_reasoning_delta(&mut self, delta: &str) {
        let last = self.items.len().wrapping_sub(1);
        if let Some(TranscriptItem::Reasoning {
            text,
            streaming: true,
            ..
        }) = self.items.last_mut()
        {
            text.push_str(delta);
            self.invalidate(last);
            return;
        }
        self.items.push(TranscriptItem::Reasoning {
            text: delta.to_string(),
            streaming: true,
            expanded: false,
        });
    }

    /// Ends a streaming reasoning block (text started, or the step ended).
    fn finish_reasoning(&mut self) {
        for index in (0..self.items.len()).rev().take(2) {
            if let TranscriptItem::Reasoning { streaming, .. } = &mut self.items[index] {
                if *streaming {
                    *streaming = false;
                    self.invalidate(index);
                }
            }
        }
    }

    /// Appends streamed model text to the streaming assistant item, starting one if needed.
    pub fn append_assistant_delta(&mut self, delta: &str) {
        self.finish_reasoning();
        let last = self.items.len().wrapping_sub(1);
        if let Some(TranscriptItem::Assistant {
            text,
            streaming: true,
            ..
        }) = self.items.last_mut()
        {
            text.push_str(delta);
            self.invalidate(last);
            return;
        }
        *self.stream_prefix.get_mut() = None;
        self.items.push(TranscriptItem::Assistant {
            text: delta.to_string(),
            tool_calls: Vec::new(),
            streaming: true,
        });
    }

    /// Ends streaming. With `final_text`, replaces the streamed text with the logged message
    /// (they differ only if a delta was lost).
    pub fn finish_assistant(&mut self, final_text: Option<&str>) {
        self.finish_reasoning();
        let last = self.items.len().wrapping_sub(1);
        if let Some(TranscriptItem::Assistant {
            text, streaming, ..
        }) = self.items.last_mut()
        {
            if *streaming {
                *streaming = false;
                if let Some(final_text) = final_text {
                    *text = final_text.to_string();
                }
                *self.stream_prefix.get_mut() = None;
                self.invalidate(last);
            }
        }
    }

    /// Flips item `index` if it is expandable.
    pub fn toggle(&mut self, index: usize) -> bool {
        let flipped = self
            .items
            .get_mut(index)
            .is_some_and(TranscriptItem::toggle);
        if flipped {
            self.invalidate(index);
        }
        flipped
    }

    /// Selects the previous (`up`) or next card; from no selection, `up` selects the newest.
    /// The transcript scrolls so the selected card shows. False when there is none to select.
    pub fn select_card(&mut self, up: bool) -> bool {
        let cards: Vec<usize> = (0..self.items.len())
            .filter(|&i| self.items[i].is_expandable())
            .collect();
        let next = match (self.selected, up) {
            (None, true) => cards.last().copied(),
            (None, false) => None,
            (Some(at), true) => cards.iter().rev().find(|&&i| i < at).copied().or(Some(at)),
            (Some(at), false) => cards.iter().find(|&&i| i > at).copied(),
        };
        let changed = next != self.selected;
        self.selected = next;
        if let Some(i) = next {
            self.scroll_to(i);
        } else {
            self.scroll.set(0);
        }
        changed
    }

    /// The selected card's index.
    pub fn selected_card(&self) -> Option<usize> {
        self.selected
    }

    /// Opens or closes the selected card, else the newest.
    pub fn toggle_selected_card(&mut self) -> bool {
        match self.selected {
            Some(i) => self.toggle(i),
            None => self.toggle_last_card(),
        }
    }

    /// Scrolls so item `index`'s first row is in view (near the middle when it can be).
    fn scroll_to(&mut self, index: usize) {
        let cache = self.cache.borrow();
        let rows = |i: usize| {
            cache
                .get(i)
                .and_then(Option::as_ref)
                .map_or(1, |w| w.lines.len())
        };
        // Rows from the item's first row to the bottom, separators included.
        let below: usize = (index..self.items.len())
            .map(|i| rows(i) + 1)
            .sum::<usize>()
            - 1;
        let height = self.last_height.get().max(1);
        let scroll = below
            .saturating_sub(height / 2 + 1)
            .min(self.max_scroll.get());
        drop(cache);
        self.scroll.set(scroll);
        self.last_total.set(None);
    }

    /// Flips the most recent expandable item (the natural target of a "details" key).
    pub fn toggle_last_card(&mut self) -> bool {
        match self.items.iter().rposition(TranscriptItem::is_expandable) {
            Some(i) => self.toggle(i),
            None => false,
        }
    }

    /// Opens or closes every expandable item.
    pub fn set_all_expanded(&mut self, expanded: bool) {
        for item in &mut self.items {
            item.set_expanded(expanded);
        }
        self.cache.get_mut().clear();
    }

    /// Removes every item and scrolls back to the bottom.
    pub fn clear(&mut self) {
        self.selected = None;
        self.items.clear();
        self.cache.get_mut().clear();
        *self.stream_prefix.get_mut() = None;
        self.scroll.set(0);
        self.last_total.set(None);
    }

    /// Rows scrolled up from the bottom (0: following the newest output).
    pub fn scroll_offset(&self) -> usize {
        self.scroll.get()
    }

    /// Scrolls `rows` rows toward older output, no further than the top.
    pub fn scroll_up(&mut self, rows: usize) {
        let scroll = self
            .scroll
            .get()
            .saturating_add(rows)
            .min(self.max_scroll.get());
        self.scroll.set(scroll);
    }

    /// Scrolls `rows` rows toward newer output, no further than the bottom.
    pub fn scroll_down(&mut self, rows: usize) {
        self.scroll.set(self.scroll.get().saturating_sub(rows));
    }

    /// Follows the newest output again.
    pub fn scroll_to_bottom(&mut self) {
        self.scroll.set(0);
    }

    /// Rows one page moves: the height of the last draw, one row kept for context.
    fn page_rows(&self) -> usize {
        self.last_height.get().saturating_sub(1).max(1)
    }

    /// One screen toward older output (PgUp).
    pub fn page_up(&mut self) {
        self.scroll_up(self.page_rows());
    }

    /// One screen toward newer output (PgDn).
    pub fn page_down(&mut self) {
        self.scroll_down(self.page_rows());
    }

    /// The oldest output (Home): as far up as the last draw allowed.
    pub fn scroll_to_top(&mut self) {
        self.scroll.set(self.max_scroll.get());
    }

    /// Wraps what is not cached at `width` yet; returns each item's row count.
    fn wrap(&self, width: usize) -> Vec<usize> {
        let mut cache = self.cache.borrow_mut();
        cache.resize(self.items.len(), None);
        self.items
            .iter()
            .zip(cache.iter_mut())
            .enumerate()
            .map(|(index, (item, slot))| {
                if slot.as_ref().is_none_or(|w| w.width != width) {
                    let lines = match item {
                        TranscriptItem::Assistant {
                            text,
                            tool_calls,
                            streaming: true,
                        } if tool_calls.is_empty() && width > 0 => {
                            self.streaming_rows(index, text, width)
                        }
                        _ => item.lines(width),
                    };
                    *slot = Some(Wrapped { width, lines });
                }
                slot.as_ref().map_or(0, |w| w.lines.len())
            })
            .collect()
    }

    /// The rows of the streaming answer `text` (item `index`): the kept rows up to its last
    /// newline, extended when new paragraphs completed, then the last paragraph and the cursor.
    fn streaming_rows(&self, index: usize, text: &str, width: usize) -> Vec<Line<'static>> {
        let mut kept = self.stream_prefix.borrow_mut();
        let valid = kept.as_ref().is_some_and(|p| {
            p.index == index
                && p.width == width
                && p.bytes <= text.len()
                && (p.bytes == 0 || text.as_bytes()[p.bytes - 1] == b'\n')
        });
        if !valid {
            *kept = Some(StreamPrefix {
                index,
                width,
                bytes: 0,
                lines: Vec::new(),
            });
        }
        let prefix = kept.as_mut().expect("set above");
        let bullet = || text_of("• ", style::dim());
        let indent = text_of("  ", Style::new());
        let first = |bytes: usize| if bytes == 0 { bullet() } else { indent.clone() };
        if let Some(newline) = text[prefix.bytes..].rfind('\n') {
            let end = prefix.bytes + newline;
            // A `\r` before the newline is not shown in multi-line text (CRLF).
            let part = &text[prefix.bytes..end];
            let part = part.strip_suffix('\r').unwrap_or(part);
            let mut done = StyledText::new();
            done.push_untrusted(part, EscapeMode::MultiLine, Style::new());
            let rows = done.wrap(width, &first(prefix.bytes), &indent);
            prefix.lines.extend(rows);
            prefix.bytes = end + 1;
        }
        let mut rest = StyledText::new();
        rest.push_untrusted(&text[prefix.bytes..], EscapeMode::MultiLine, Style::new());
        rest.push("▍", style::user_prefix());
        let mut lines = prefix.lines.clone();
        lines.extend(rest.wrap(width, &first(prefix.bytes), &indent));
        lines
    }

    /// All rows at `width`, one blank row between items.
    pub fn lines(&self, width: usize) -> Vec<Line<'static>> {
        self.wrap(width);
        let cache = self.cache.borrow();
        let mut out = Vec::new();
        for (i, wrapped) in cache.iter().flatten().enumerate() {
            if i > 0 {
                out.push(Line::default());
            }
            out.extend(wrapped.lines.iter().cloned());
        }
        out
    }

    /// Total rows at `width`, separators included.
    fn total_rows(counts: &[usize]) -> usize {
        counts.iter().sum::<usize>() + counts.len().saturating_sub(1)
    }
}

impl Renderable for Transcript {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        let counts = self.wrap(usize::from(area.width));
        let total = Transcript::total_rows(&counts);
        let height = usize::from(area.height);
        let max_scroll = total.saturating_sub(height);
        self.max_scroll.set(max_scroll);
        // While scrolled up, rows added at the bottom push the anchor up with them.
        let mut scroll = self.scroll.get();
        if let Some(last) = self.last_total.get() {
            if scroll > 0 && total > last {
                scroll += total - last;
            }
        }
        let scroll = scroll.min(max_scroll);
        self.scroll.set(scroll);
        self.last_total.set(Some(total));
        self.last_height.set(height);
        let start = total.saturating_sub(height + scroll);
        let end = start + height.min(total);
        let cache = self.cache.borrow();
        let mut row = 0;
        for (i, wrapped) in cache.iter().flatten().enumerate() {
            if row >= end {
                break;
            }
            let separator = usize::from(i > 0);
            let item_rows = wrapped.lines.len() + separator;
            if row + item_rows <= start {
                row += item_rows;
                continue;
            }
            row += separator;
            for (n, line) in wrapped.lines.iter().enumerate() {
                if row >= start && row < end {
                    let y = area.y + u16::try_from(row - start).unwrap_or(0);
                    buf.set_line(area.x, y, line, area.width);
                    if n == 0 && self.selected == Some(i) {
                        // The selected card's marker stands out.
                        let marker = Rect::new(area.x, y, area.width.min(2), 1);
                        buf.set_style(marker, Style::new().add_modifier(Modifier::REVERSED));
                    }
                }
                row += 1;
            }
        }
        if scroll > 0 {
            let hint = format!(" ↓ {scroll} more ");
            let w = u16::try_from(super::text::str_width(&hint)).unwrap_or(u16::MAX);
            if w <= area.width {
                let style = style::dim().add_modifier(Modifier::REVERSED);
                buf.set_string(area.right() - w, area.bottom() - 1, hint, style);
            }
        }
    }

    fn desired_height(&self, width: u16) -> u16 {
        let counts = self.wrap(usize::from(width));
        u16::try_from(Transcript::total_rows(&counts)).unwrap_or(u16::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The incremental rows of a streaming answer equal a full wrap of the same text, after
    /// every delta, at every width, whatever the chunking.
    #[test]
    fn streaming_rows_equal_a_full_wrap() {
        let texts = [
            "Hello there, this is a fairly long first paragraph that must wrap.\n\nSecond one.\nThird\n",
            "\nstarts with a newline\n\n\nand has empty lines",
            "averyveryveryverylongwordthatcannotbreakanywhere and then\nmore words 🌍👩‍👩‍👧 emoji",
            "control \u{1b}[2J chars\r\nand CRLF\u{7} lines\n\tTabbed",
            "no newline at all just a very long stream of words that goes on and on and on",
        ];
        for (n, full) in texts.iter().enumerate() {
            for width in [1usize, 7, 24, 80] {
                let mut transcript = Transcript::new();
                transcript.push_notice(NoticeLevel::Info, "before");
                let mut sent = 0;
                let mut step = n + 1;
                while sent < full.len() {
                    let mut end = (sent + step).min(full.len());
                    while !full.is_char_boundary(end) {
                        end += 1;
                    }
                    transcript.append_assistant_delta(&full[sent..end]);
                    sent = end;
                    step = step % 9 + 2;
                    let expected = TranscriptItem::Assistant {
                        text: full[..sent].to_string(),
                        tool_calls: Vec::new(),
                        streaming: true,
                    }
                    .lines(width);
                    let rows = transcript.lines(width);
                    // The notice, one separator row, then the answer.
                    let notice_rows = transcript.items()[0].lines(width).len();
                    assert_eq!(
                        rows[notice_rows + 1..],
                        expected[..],
                        "text {n} width {width} after {sent} bytes"
                    );
                }
                // A width change mid-stream re-wraps from scratch, still equal.
                let expected = transcript.items()[1].lines(width + 3);
                let rows = transcript.lines(width + 3);
                assert_eq!(rows[rows.len() - expected.len()..], expected[..]);
            }
        }
    }
}
