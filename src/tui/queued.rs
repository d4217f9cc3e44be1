//! The messages waiting for the running turn, listed above the composer (as Codex does) rather
//! than only counted in the status line.
//!
//! Purpose: a person who types while a turn runs sees what they queued (steering for the next
//! boundary, or a prompt for the next turn) and that it was not lost. Invariant: at most
//! [`MAX_ROWS`] rows, each one line (a message's first line, escaped, cut to the width), the rest
//! counted in a last row; nothing is drawn when nothing waits. Proof: `tests/tui/daily.rs`
//! snapshots the panel with a running turn and two queued messages.

use super::render::clip;
use super::style;
use super::text::StyledText;
use crate::escape::EscapeMode;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

/// Rows the panel takes at most (the last one may say how many more wait).
pub const MAX_ROWS: usize = 3;

/// The texts of the messages waiting, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueuedPanel {
    /// Each waiting message as it was typed.
    pub messages: Vec<String>,
}

impl QueuedPanel {
    /// Rows it needs: 0 when nothing waits.
    pub fn height(&self) -> u16 {
        self.messages.len().min(MAX_ROWS) as u16
    }

    /// Draws one row per waiting message into `area`.
    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() || self.messages.is_empty() {
            return;
        }
        let rows = usize::from(area.height).min(MAX_ROWS);
        let width = usize::from(area.width);
        let overflow = self.messages.len() > rows;
        let shown = if overflow { rows - 1 } else { rows };
        for (i, text) in self.messages.iter().take(shown).enumerate() {
            let mut row = StyledText::new();
            row.push("  ↳ queued  ", style::dim());
            let first = text.lines().next().unwrap_or("");
            row.push_untrusted(first, EscapeMode::SingleLine, Style::new());
            if text.lines().nth(1).is_some() {
                row.push(" …", style::dim());
            }
            buf.set_line(
                area.x,
                area.y + i as u16,
                &row.truncate(width).to_line(),
                area.width,
            );
        }
        if overflow {
            let mut row = StyledText::new();
            row.push(
                &format!("  ↳ and {} more queued", self.messages.len() - shown),
                style::dim(),
            );
            buf.set_line(
                area.x,
                area.y + shown as u16,
                &row.truncate(width).to_line(),
                area.width,
            );
        }
    }
}
