//! The preview pane over the `@` popup: the highlighted session's last messages, drawn from
//! the answer of its background preview.

use super::App;
use ratatui::layout::Rect;

impl App {
    /// The preview pane over the popup: the highlighted session's last messages.
    pub(super) fn render_popup_preview(&self, above: Rect, buf: &mut ratatui::buffer::Buffer) {
        use ratatui::widgets::{Block, BorderType, Clear, Widget};
        let Some(preview) = &self.popup_preview else {
            return;
        };
        let rows: Vec<(String, String)> = match &preview.result {
            None => vec![(String::new(), "reading…".to_string())],
            Some(Err(e)) => vec![(String::new(), format!("cannot be read: {e}"))],
            Some(Ok(p)) if p.last.is_empty() => {
                vec![(String::new(), "no conversation to send".to_string())]
            }
            Some(Ok(p)) => p.last.clone(),
        };
        let height = u16::try_from(rows.len() + 2)
            .unwrap_or(u16::MAX)
            .min(above.height);
        if height < 3 {
            return;
        }
        let area = Rect {
            y: above.y + above.height - height,
            height,
            ..above
        };
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
}
