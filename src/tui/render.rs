//! The one trait every widget of the bundle implements.
//!
//! Widgets here borrow their state and draw into a buffer; they never own a terminal, so the app
//! loop (or a host mounting single pieces) decides layout from `desired_height` and tests can
//! draw them into a `TestBackend`. A widget that owns the terminal cursor says where it goes
//! from the same layout it draws with (`cursor_pos`), so the two can never disagree.

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

/// A widget of the bundle: it borrows its state, draws into a buffer and says how tall it wants to
/// be and where the cursor goes. It never owns the terminal.
pub trait Renderable {
    /// Draws into `area`. Never panics, whatever the size (including zero).
    fn render(&self, area: Rect, buf: &mut Buffer);

    /// Rows this widget would like at `width` columns.
    fn desired_height(&self, width: u16) -> u16;

    /// Where the terminal cursor belongs when drawn in `area`; `None` hides it.
    fn cursor_pos(&self, _area: Rect) -> Option<Position> {
        None
    }
}

/// `area` clipped to the buffer, so widgets never index outside it.
pub(crate) fn clip(area: Rect, buf: &Buffer) -> Rect {
    area.intersection(buf.area)
}
