//! One line of key help that follows the context, so the keys that matter right now are the
//! ones on screen (Enter means "insert" in the popup, "steer" while a turn runs).

use super::render::{clip, Renderable};
use super::style;
use super::text::StyledText;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyHelp {
    pub popup_open: bool,
    pub running: bool,
    /// A submit transaction is preparing a snapshot.
    pub preparing: bool,
    /// Ctrl+C was pressed once; a second press quits.
    pub quit_pending: bool,
    /// The transcript has a card that can be expanded.
    pub has_details: bool,
}

impl KeyHelp {
    /// `(key, action)` pairs for the current context, most important first.
    pub fn entries(&self) -> Vec<(&'static str, &'static str)> {
        if self.quit_pending {
            return vec![("ctrl+c", "again to quit")];
        }
        // Over the popup, Esc closes it; the send in flight is cancelled by the next one.
        if self.preparing && !self.popup_open {
            return vec![("esc", "cancel"), ("ctrl+c", "quit")];
        }
        if self.popup_open {
            return vec![
                ("↑↓", "select"),
                ("tab/enter", "insert"),
                ("pgup/pgdn", "page"),
                ("esc", "close"),
            ];
        }
        let mut entries = if self.running {
            vec![("enter", "steer"), ("esc", "interrupt")]
        } else {
            vec![("enter", "send")]
        };
        entries.push(("alt+enter", "newline"));
        entries.push(("@", "mention"));
        if self.has_details {
            entries.push(("ctrl+o", "details"));
        }
        entries.push(("ctrl+c", "quit"));
        entries
    }
}

impl Renderable for KeyHelp {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        let mut t = StyledText::new();
        for (i, (key, action)) in self.entries().into_iter().enumerate() {
            if i > 0 {
                t.push(" · ", style::dim());
            }
            t.push(key, style::key());
            t.push(" ", style::dim());
            t.push(action, style::dim());
        }
        let line = t.truncate(usize::from(area.width)).to_line();
        buf.set_line(area.x, area.y, &line, area.width);
    }

    fn desired_height(&self, _width: u16) -> u16 {
        1
    }
}
