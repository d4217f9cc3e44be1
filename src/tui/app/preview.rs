//! The preview pane over the `@` popup: the highlighted session's last messages, drawn from
//! the answer of its background preview (SPEC §5.6). A widget of its own: it borrows the
//! preview's state and draws into the rect the app anchors above the popup. Pure.

use super::PopupPreview;
use crate::tui::render::{clip, Renderable};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::{Block, BorderType, Clear, Widget};

/// Draws a [`PopupPreview`]: a bordered pane titled with the session's label, one row per
/// message (its role, then its text on one line, cut to the width).
pub(super) struct PopupPreviewView<'a> {
    pub(super) preview: &'a PopupPreview,
}

impl PopupPreviewView<'_> {
    /// The rows shown: the last messages, else what the preview is waiting for or why none.
    fn rows(&self) -> Vec<(String, String)> {
        match &self.preview.result {
            None => vec![(String::new(), "reading…".to_string())],
            Some(Err(e)) => vec![(String::new(), format!("cannot be read: {e}"))],
            Some(Ok(p)) if p.last.is_empty() => {
                vec![(String::new(), "no conversation to send".to_string())]
            }
            Some(Ok(p)) => p.last.clone(),
        }
    }
}

impl Renderable for PopupPreviewView<'_> {
    /// Draws nothing in fewer than 3 rows (a border and one message).
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.height < 3 {
            return;
        }
        let preview = self.preview;
        let rows = self.rows();
        Clear.render(area, buf);
        let mut title = crate::tui::text::StyledText::new();
        title.push(" preview · ", crate::tui::style::dim());
        title.push_untrusted(
            &preview.label,
            crate::tui::escape::EscapeMode::SingleLine,
            crate::tui::style::dim(),
        );
        title.push(" ", crate::tui::style::dim());
        let block = Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(crate::tui::style::border())
            .title(
                title
                    .truncate(usize::from(area.width.saturating_sub(4)))
                    .to_line(),
            );
        let inner = block.inner(area);
        block.render(area, buf);
        for (n, (role, text)) in rows.iter().enumerate().take(usize::from(inner.height)) {
            let mut line = crate::tui::text::StyledText::new();
            if !role.is_empty() {
                line.push_untrusted(
                    role,
                    crate::tui::escape::EscapeMode::SingleLine,
                    crate::tui::style::key(),
                );
                line.push(": ", crate::tui::style::dim());
            }
            // One row per message: its text on one line (line breaks and runs of blanks read as
            // one space, not as escapes), cut to the width.
            let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
            line.push_untrusted(
                &one_line,
                crate::tui::escape::EscapeMode::SingleLine,
                crate::tui::style::dim(),
            );
            let y = inner.y + u16::try_from(n).unwrap_or(0);
            buf.set_line(
                inner.x,
                y,
                &line.truncate(usize::from(inner.width)).to_line(),
                inner.width,
            );
        }
    }

    /// Two border rows and one per message.
    fn desired_height(&self, _width: u16) -> u16 {
        u16::try_from(self.rows().len() + 2).unwrap_or(u16::MAX)
    }
}
