//! The preview pane over the `@` popup (SPEC §5.6): the highlighted session's last messages,
//! as the snapshot would send them.
//!
//! Pure: it draws what the mount's [`Preview`] says (or that it is still reading, or why it
//! cannot be read); the app runs the preview and owns its lifetime. Invariant: one row per
//! message, every text escaped for one line (line breaks and runs of blanks read as one
//! space), nothing drawn when fewer than three rows fit. Proof: the popup-preview snapshots in
//! `tests/tui/app.rs`.

use crate::escape::EscapeMode;
use crate::host::Preview;
use crate::tui::render::Renderable;
use crate::tui::style;
use crate::tui::text::StyledText;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::{Block, BorderType, Clear, Widget};

/// The pane for the session labelled `label`, in the state `result` (`None`: still reading).
#[derive(Debug, Clone, Copy)]
pub struct PreviewPane<'a> {
    label: &'a str,
    result: Option<&'a Result<Preview, String>>,
}

impl<'a> PreviewPane<'a> {
    /// The pane of `label`'s preview.
    pub fn new(label: &'a str, result: Option<&'a Result<Preview, String>>) -> PreviewPane<'a> {
        PreviewPane { label, result }
    }

    /// `(role, text)` per row; a state without messages is one row of ours.
    fn rows(&self) -> Vec<(String, String)> {
        match self.result {
            None => vec![(String::new(), "reading…".to_string())],
            Some(Err(e)) => vec![(String::new(), format!("cannot be read: {e}"))],
            Some(Ok(p)) if p.last.is_empty() => {
                vec![(String::new(), "no conversation to send".to_string())]
            }
            Some(Ok(p)) => p.last.clone(),
        }
    }
}

impl Renderable for PreviewPane<'_> {
    /// Draws at the bottom of `above` (the space over the popup), as tall as its rows.
    fn render(&self, above: Rect, buf: &mut Buffer) {
        let rows = self.rows();
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
        let mut title = StyledText::new();
        title.push(" preview · ", style::dim());
        title.push_untrusted(self.label, EscapeMode::SingleLine, style::dim());
        title.push(" ", style::dim());
        let block = Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(style::border())
            .title(
                title
                    .truncate(usize::from(area.width.saturating_sub(4)))
                    .to_line(),
            );
        let inner = block.inner(area);
        block.render(area, buf);
        for (n, (role, text)) in rows.iter().enumerate().take(usize::from(inner.height)) {
            let mut line = StyledText::new();
            if !role.is_empty() {
                line.push_untrusted(role, EscapeMode::SingleLine, style::key());
                line.push(": ", style::dim());
            }
            let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
            line.push_untrusted(&one_line, EscapeMode::SingleLine, style::dim());
            let y = inner.y + u16::try_from(n).unwrap_or(0);
            buf.set_line(
                inner.x,
                y,
                &line.truncate(usize::from(inner.width)).to_line(),
                inner.width,
            );
        }
    }

    fn desired_height(&self, _width: u16) -> u16 {
        u16::try_from(self.rows().len() + 2).unwrap_or(u16::MAX)
    }
}
