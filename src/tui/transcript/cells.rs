//! One cell type per transcript kind, each drawing itself (`display_lines(width)`).
//!
//! Purpose: what a prompt, an answer, a reference card or a notice looks like is decided in one
//! small type per kind instead of one long match, so a kind's look is read, changed and tested
//! on its own. The cells borrow the item they draw ([`super::TranscriptItem::cell`] makes them),
//! so the item stays the one owner of the state and the cache of wrapped rows stays in
//! [`super::Transcript`].
//!
//! Invariant: drawing is pure; every text that came from a log is pushed as untrusted (escaped,
//! SPEC §5.2), and no row is wider than `width` (heads are truncated, bodies wrapped). Width 0
//! draws nothing ([`super::TranscriptItem::lines`]). A prompt's pasted blocks are drawn as the
//! composer's chips until the details key opens them (issue 38 item 4; every face that draws
//! these cells, the inline scrollback too, shows the same chips). Proof: the transcript
//! snapshots (`tests/tui/transcript.rs`, `tests/tui/pastes.rs`), `tui::transcript::tests` and
//! `tests/e2e/tmux_paste.rs`.

use super::parts::{human_bytes, Kept, NoticeLevel, Pastes, ReferencedSession};
use crate::escape::EscapeMode;
use crate::reference::render::RecordedSource;
use crate::tui::style;
use crate::tui::text::StyledText;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;

/// Something the transcript shows: its rows at `width` columns (`width` > 0).
pub trait TranscriptCell {
    /// The rows this cell takes at `width` columns.
    fn display_lines(&self, width: usize) -> Vec<Line<'static>>;
}

/// A direct prompt: `› text`, its pasted blocks as the composer's chips (`[Pasted 4 lines]`,
/// opened by the details key), a long prompt without chips collapsed to its head.
pub struct UserCell<'a> {
    /// What the user wrote.
    pub text: &'a str,
    /// Its pasted blocks.
    pub pastes: &'a Pastes,
}

impl TranscriptCell for UserCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        prompt_lines(
            text("› ", style::user_prefix()),
            self.text,
            self.pastes,
            width,
        )
    }
}

/// A prompt that steered a running turn: `› steer text`.
pub struct SteerCell<'a> {
    /// What the user wrote.
    pub text: &'a str,
    /// Its pasted blocks.
    pub pastes: &'a Pastes,
}

impl TranscriptCell for SteerCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut first = text("› ", style::user_prefix());
        first.push("steer ", style::steer_tag());
        prompt_lines(first, self.text, self.pastes, width)
    }
}

/// The rows of a prompt after its `first` prefix. With pasted blocks: each closed one as its
/// chip between the typed text, or, opened, the whole text. Without: the text (collapsed when
/// it is as long as a paste), then the note of what else was sent.
fn prompt_lines(
    first: StyledText,
    body: &str,
    pastes: &Pastes,
    width: usize,
) -> Vec<Line<'static>> {
    if pastes.expanded {
        return multi(body, Style::new()).wrap(width, &first, &indent());
    }
    if !pastes.is_empty() {
        let mut t = StyledText::new();
        let mut at = 0;
        for range in &pastes.ranges {
            // Ranges come from `Pastes::locate` over this text; anything else reads as text.
            if range.start < at || body.get(range.clone()).is_none() {
                continue;
            }
            t.push_untrusted(&body[at..range.start], EscapeMode::MultiLine, Style::new());
            let chip = crate::tui::composer::PastedText {
                text: body[range.clone()].to_string(),
            };
            t.push(&chip.display(), style::dim());
            at = range.end;
        }
        t.push_untrusted(&body[at..], EscapeMode::MultiLine, Style::new());
        return t.wrap(width, &first, &indent());
    }
    let (shown, rest) = collapse_paste(body);
    let mut lines = multi(shown, Style::new()).wrap(width, &first, &indent());
    lines.extend(rest.map(|r| {
        text(&format!("  {r}"), style::dim())
            .truncate(width)
            .to_line()
    }));
    lines
}

/// Model output: `• text`, a cursor while it streams, then one row per tool call.
pub struct AssistantCell<'a> {
    /// The answer's text so far.
    pub text: &'a str,
    /// The names of the tools the answer called.
    pub tool_calls: &'a [String],
    /// Deltas are still arriving.
    pub streaming: bool,
}

impl TranscriptCell for AssistantCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut t = multi(self.text, Style::new());
        if self.streaming {
            t.push("▍", style::user_prefix());
        }
        let mut lines = t.wrap(width, &text("• ", style::dim()), &indent());
        for name in self.tool_calls {
            let mut call = text("  → tool ", style::dim());
            call.push_untrusted(name, EscapeMode::SingleLine, style::dim());
            lines.push(call.truncate(width).to_line());
        }
        lines
    }
}

/// The model's reasoning: one dim line (the latest words while it streams), or the whole text.
pub struct ReasoningCell<'a> {
    /// The reasoning so far.
    pub text: &'a str,
    /// Deltas are still arriving.
    pub streaming: bool,
    /// Shown whole.
    pub expanded: bool,
}

impl TranscriptCell for ReasoningCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut head = text(marker(self.expanded), style::dim());
        let words = self.text.split_whitespace().count();
        head.push(
            &format!(
                "thinking{} · {words} word{}",
                if self.streaming { "…" } else { "" },
                if words == 1 { "" } else { "s" }
            ),
            style::dim(),
        );
        if self.streaming && !self.expanded {
            // The latest words, so a long think visibly progresses on one line.
            let tail: Vec<&str> = self.text.split_whitespace().rev().take(12).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            head.push(" · ", style::dim());
            head.push_untrusted(&tail.join(" "), EscapeMode::SingleLine, style::dim());
        }
        card(head, self.text, self.expanded, width)
    }
}

/// A session-reference context: which sessions went and how much, then the snapshot read role
/// by role, then the exact text the model received.
pub struct ReferenceCell<'a> {
    /// The sessions the snapshot names.
    pub sessions: &'a [ReferencedSession],
    /// The exact context text.
    pub context: &'a str,
    /// Opened past the summary.
    pub expanded: bool,
    /// Opened to the exact text.
    pub raw: bool,
}

impl TranscriptCell for ReferenceCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut head = text(marker(self.expanded), style::dim());
        head.push("Referenced sessions · ", style::dim());
        for (i, s) in self.sessions.iter().enumerate() {
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
                head.push(&format!(" · {}", Kept::describe(&kept)), style::dim());
            }
        }
        head.push(
            &format!(" · {} sent", human_bytes(self.context.len() as u64)),
            style::dim(),
        );
        if self.expanded && !self.raw {
            if let Some(readable) = super::parts::readable_snapshot(self.context) {
                let mut lines = vec![head.truncate(width).to_line()];
                lines.extend(readable_lines(&readable, width));
                let mut hint = text("  ", Style::new());
                hint.push("(again: the exact text the model received)", style::dim());
                lines.push(hint.truncate(width).to_line());
                return lines;
            }
        }
        card(head, self.context, self.expanded, width)
    }
}

/// Any other context message: `context · kind`, and its text when opened.
pub struct ContextCell<'a> {
    /// What the card says it is.
    pub kind: &'a str,
    /// The context's text.
    pub text: &'a str,
    /// Opened.
    pub expanded: bool,
}

impl TranscriptCell for ContextCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut head = text(marker(self.expanded), style::dim());
        head.push("context · ", style::dim());
        head.push_untrusted(self.kind, EscapeMode::SingleLine, style::dim());
        card(head, self.text, self.expanded, width)
    }
}

/// A compaction checkpoint: a dim marker, and the summary when opened.
pub struct CompactionCell<'a> {
    /// The checkpoint's summary.
    pub summary: &'a str,
    /// Opened.
    pub expanded: bool,
}

impl TranscriptCell for CompactionCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut head = text(marker(self.expanded), style::dim());
        head.push("earlier context was compacted", style::dim());
        card(head, self.summary, self.expanded, width)
    }
}

/// What a tool returned: its first line, `…` when there is more.
pub struct ToolResultCell<'a> {
    /// The output text.
    pub text: &'a str,
    /// The tool reported a failure.
    pub is_error: bool,
}

impl TranscriptCell for ToolResultCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        let style = if self.is_error {
            style::error()
        } else {
            style::dim()
        };
        let mut t = text("  ↳ ", style);
        let first = self.text.lines().next().unwrap_or("");
        t.push_untrusted(first, EscapeMode::SingleLine, style);
        if self.text.lines().nth(1).is_some() {
            t.push(" …", style);
        }
        vec![t.truncate(width).to_line()]
    }
}

/// The header of a new session: version, model, cwd, home, and two tips.
pub struct WelcomeCell<'a> {
    /// This crate's version.
    pub version: &'a str,
    /// The model's label.
    pub model: &'a str,
    /// The session's cwd.
    pub cwd: Option<&'a str>,
    /// The home, as shown.
    pub home: &'a str,
}

impl TranscriptCell for WelcomeCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut lines = Vec::new();
        let mut title = text("✻ ", style::user_prefix());
        title.push("dsh-refs", Style::new().add_modifier(Modifier::BOLD));
        title.push(
            &format!(" {} · cross-session references", self.version),
            style::dim(),
        );
        lines.push(title.truncate(width).to_line());
        for (name, value) in [
            ("model", self.model),
            ("cwd  ", self.cwd.unwrap_or("(none)")),
            ("home ", self.home),
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
}

/// Our own message: `· info` dim, `! error` in the error style.
pub struct NoticeCell<'a> {
    /// Information or an error.
    pub level: NoticeLevel,
    /// The notice.
    pub text: &'a str,
}

impl TranscriptCell for NoticeCell<'_> {
    fn display_lines(&self, width: usize) -> Vec<Line<'static>> {
        let (style, prefix) = match self.level {
            NoticeLevel::Info => (style::dim(), "· "),
            NoticeLevel::Error => (style::error(), "! "),
        };
        multi(self.text, style).wrap(width, &text(prefix, style), &indent())
    }
}

/// `s` in `style`, as trusted text of ours.
pub(super) fn text(s: &str, style: Style) -> StyledText {
    let mut t = StyledText::new();
    t.push(s, style);
    t
}

/// Untrusted multi-line `body` in `style`.
fn multi(body: &str, style: Style) -> StyledText {
    let mut t = StyledText::new();
    t.push_untrusted(body, EscapeMode::MultiLine, style);
    t
}

/// The two-column indent of continuation rows.
fn indent() -> StyledText {
    text("  ", Style::new())
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
        let indent = indent();
        lines.extend(t.wrap(width, &indent, &indent));
    }
    lines
}

/// Lines of a long message shown before the rest is collapsed.
const PASTE_PREVIEW_LINES: usize = 4;

/// Lines of a prompt without chips (read back from a log, or typed) from which it is shown
/// collapsed.
const LONG_PROMPT_LINES: usize = 10;

/// A message without chips longer than [`LONG_PROMPT_LINES`] lines or
/// [`crate::tui::composer::PASTE_COLLAPSE_CHARS`] characters is shown as its first
/// [`PASTE_PREVIEW_LINES`] lines and a note of what else was sent (display only: the log and
/// what the model got are whole). Returns the text shown and the note.
fn collapse_paste(body: &str) -> (&str, Option<String>) {
    use crate::tui::composer::PASTE_COLLAPSE_CHARS;
    let lines = body.lines().count();
    if lines <= LONG_PROMPT_LINES && body.chars().count() <= PASTE_COLLAPSE_CHARS {
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
