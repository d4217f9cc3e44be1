//! The app as inline content ([`crate::tui::inline`]): which finished items go into the
//! scrollback, and how tall the viewport must be for what is still live and the open layers.
//! The frame itself is the app's one [`App::draw`], its transcript area showing only the items
//! not written above.

use super::focus::{self, DrawCx, Focus, Layer};
use super::App;
use crate::session::clock::now_ms;
use crate::tui::inline::InlineContent;
use crate::tui::render::Renderable;
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::Line;

impl App {
    /// Draws for inline mode from now on: the transcript area shows the items not yet written
    /// into the scrollback.
    pub fn set_inline(&mut self, inline: bool) {
        self.inline = inline;
    }

    /// Rows the open layers want over the transcript area at `width` (`u16::MAX`: a layer that
    /// fills it, such as the picker).
    fn layer_rows(&self, width: u16) -> u16 {
        let cx = DrawCx {
            keymap: &self.keymap,
            now_ms: now_ms(),
        };
        let mut rows = 0u16;
        for layer in focus::stack(self.open_layers()) {
            let focus: &dyn Focus = match layer {
                Layer::Popup => &self.popup,
                Layer::Slash => &self.slash,
                Layer::Overlay => match &self.overlay {
                    Some(overlay) => overlay,
                    None => continue,
                },
                Layer::Picker | Layer::Confirm => return u16::MAX,
                Layer::Guard | Layer::Composer | Layer::Session => continue,
            };
            let mut wanted = focus.view(&cx).desired_height(width);
            if layer == Layer::Popup {
                if let Some(preview) = &self.popup_preview {
                    let pane = crate::tui::popup::PreviewPane::new(
                        &preview.label,
                        preview.result.as_ref(),
                    );
                    wanted = wanted.saturating_add(pane.desired_height(width));
                }
            }
            rows = rows.max(wanted);
        }
        rows
    }
}

impl InlineContent for App {
    fn take_history(&mut self, width: u16, all: bool) -> Vec<Vec<Line<'static>>> {
        self.transcript.take_finished(usize::from(width), all)
    }

    fn viewport_height(&self, width: u16) -> u16 {
        let fixed = self
            .queued_panel()
            .height()
            .saturating_add(self.composer.desired_height(width).max(1))
            .saturating_add(2);
        let over = self
            .transcript
            .live_height(width)
            .max(self.layer_rows(width));
        fixed.saturating_add(over)
    }

    fn layers_open(&self) -> bool {
        let open = self.open_layers();
        open.picker || open.confirm || open.overlay || open.slash || open.popup
    }

    fn draw(&self, area: Rect, buf: &mut Buffer) -> Option<Position> {
        App::draw(self, area, buf)
    }
}
