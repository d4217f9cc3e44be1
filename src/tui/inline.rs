//! Inline mode (`--inline`, `[tui] inline = true`): the TUI draws in a viewport at the bottom of
//! the normal screen and writes every finished transcript cell above it, into the terminal's
//! own scrollback, where the conversation stays after quitting.
//!
//! Purpose: a person who lives in a terminal searches, selects and scrolls what was said with
//! the terminal's tools. The viewport (ratatui's `Viewport::Inline`) holds what is still live:
//! the streaming answer, the queued messages, the composer, the status and help lines, and the
//! layers (popup, `/` menu, picker) over them. Finished cells go above it with
//! `Terminal::insert_before`, drawn from the same rows the full screen draws
//! ([`crate::tui::transcript::Transcript::take_finished`]), so log text is escaped by the one
//! renderer of each cell, never by a second one.
//!
//! The viewport is as tall as what it shows (at most the screen): it grows at once when a
//! layer or the streaming answer needs rows (a popup taller than the viewport grows it, rather
//! than being clamped), and shrinks only when no layer is open, so typing in the popup does
//! not make it jump. ratatui cannot change an inline viewport's height, so a new height is a
//! new `Terminal` anchored where the old viewport began, the old area cleared first. A resize
//! re-anchors the viewport where the terminal moved the cursor, asked of the terminal, and
//! redraws it whole. (A terminal that loses rows pushes the ones above the cursor into its
//! scrollback before the app hears of it: a shrink below the viewport's height can leave a copy
//! of the viewport's top rows there, as with any inline program.) A screen smaller than [`MIN_WIDTH`] × [`MIN_HEIGHT`] shows one line
//! saying so and keeps the history back until it grows again. On exit the viewport is cleared
//! and the cursor left at its top, so the shell prompt follows the last line written.
//!
//! Invariant: every transcript item is written above exactly once, in order, with the rows the
//! full screen draws; nothing from a log reaches the terminal but those escaped rows.
//! Proof: the unit tests below (`TestBackend`'s scrollback), `tests/tui/inline.rs` (a real app
//! over `TestBackend`) and `tests/e2e/tmux_inline.rs` (the binary in tmux: the scrollback after
//! quitting, a hostile resumed session read back with `capture-pane -e`, a resize).

use crate::tui::style;
use ratatui::backend::{Backend, ClearType};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect, Size};
use ratatui::text::Line;
use ratatui::{Terminal, TerminalOptions, Viewport};

/// The narrowest screen inline mode draws on.
pub const MIN_WIDTH: u16 = 20;
/// The lowest screen inline mode draws on (composer, status and help, one row above).
pub const MIN_HEIGHT: u16 = 4;
/// The most rows written above in one `insert_before` (its buffer is rows × width cells).
const CHUNK_ROWS: usize = 512;

/// What an inline viewport shows: the app, or a test's stand-in.
pub trait InlineContent {
    /// The rows of each finished item not written above yet, at `width`, marked written;
    /// `all`: the unfinished ones too (the session closes).
    fn take_history(&mut self, width: u16, all: bool) -> Vec<Vec<Line<'static>>>;
    /// The rows the viewport wants at `width` (clamped to the screen by the caller).
    fn viewport_height(&self, width: u16) -> u16;
    /// Whether a layer (popup, menu, picker, overlay, prompt) is open: the viewport does not
    /// shrink under it.
    fn layers_open(&self) -> bool;
    /// Draws the viewport into `area` of `buf`; where the cursor belongs.
    fn draw(&self, area: Rect, buf: &mut Buffer) -> Option<Position>;
}

/// The terminal in inline mode: one viewport at the bottom, history written above it.
pub struct InlineScreen<B: Backend> {
    terminal: Terminal<B>,
    /// A backend for the same terminal, for a viewport of another height.
    fresh: fn(&B) -> B,
    /// The viewport's height.
    height: u16,
    /// The screen size the viewport was laid out for.
    size: Size,
    /// The cursor's row in the viewport at the last frame (it was put there, shown or not).
    cursor_row: u16,
    /// Whether anything was written above yet (items are separated by one blank row).
    wrote: bool,
}

impl<B: Backend> InlineScreen<B> {
    /// A one-row viewport where the cursor is; `fresh` makes a backend for the same terminal
    /// (the real one: a new handle on stdout; a test's: a copy of its state).
    pub fn new(backend: B, fresh: fn(&B) -> B) -> Result<InlineScreen<B>, B::Error> {
        let size = backend.size()?;
        let terminal = Terminal::with_options(
            backend,
            TerminalOptions {
                viewport: Viewport::Inline(1),
            },
        )?;
        Ok(InlineScreen {
            terminal,
            fresh,
            height: 1,
            size,
            cursor_row: 0,
            wrote: false,
        })
    }

    /// The terminal (tests read its backend).
    pub fn terminal(&self) -> &Terminal<B> {
        &self.terminal
    }

    /// The viewport's area on the screen.
    fn area(&mut self) -> Rect {
        self.terminal.get_frame().area()
    }

    /// One frame: a resize is taken in, finished items are written above, the viewport takes
    /// the height it needs and is drawn.
    pub fn frame(&mut self, content: &mut impl InlineContent) -> Result<(), B::Error> {
        let size = self.terminal.size()?;
        if size != self.size {
            self.resized(size)?;
        }
        let small = too_small(size);
        let items = if small {
            Vec::new()
        } else {
            content.take_history(size.width, false)
        };
        let wanted = if small {
            1
        } else {
            content.viewport_height(size.width).clamp(1, size.height)
        };
        // Shrink before writing above, and never write under a viewport as tall as the screen
        // (the next session's welcome under the menu that ran `/new`): a real terminal keeps
        // rows of such a viewport on screen that ratatui counts as cleared.
        let mut height = self.height;
        if wanted < height && !content.layers_open() {
            height = wanted;
        }
        if !items.is_empty() && height >= size.height {
            height = size.height.saturating_sub(1).max(1);
        }
        if height != self.height {
            self.reanchor(None, height)?;
        }
        self.write_above(items)?;
        if wanted > self.height {
            self.reanchor(None, wanted)?;
        }
        let mut cursor = None;
        self.terminal.draw(|frame| {
            let area = frame.area();
            if small {
                let text = format!("terminal too small: need {MIN_WIDTH}×{MIN_HEIGHT}");
                frame.buffer_mut().set_stringn(
                    0,
                    area.y,
                    text,
                    usize::from(area.width),
                    style::dim(),
                );
            } else if let Some(at) = content.draw(area, frame.buffer_mut()) {
                frame.set_cursor_position(at);
                cursor = Some(at);
            }
        })?;
        let area = self.area();
        match cursor {
            Some(at) => self.cursor_row = at.y.saturating_sub(area.y),
            None => {
                // Hidden, but at a known place: a resize finds the viewport from it.
                self.terminal.set_cursor_position(area.as_position())?;
                self.cursor_row = 0;
            }
        }
        Ok(())
    }

    /// The session closes: what it still shows is written above, unfinished or not.
    pub fn close_session(&mut self, content: &mut impl InlineContent) -> Result<(), B::Error> {
        let width = self.terminal.size()?.width.max(1);
        let items = content.take_history(width, true);
        self.write_above(items)
    }

    /// The app ends: the viewport is cleared and the cursor left at its top, below the last
    /// line written, where the shell prompt goes.
    pub fn finish(&mut self) -> Result<(), B::Error> {
        let top = self.area().y;
        self.clear_from(top)?;
        let backend = self.terminal.backend_mut();
        backend.show_cursor()?;
        backend.flush()
    }

    /// Clears the screen from row `top` down, one row at a time, and leaves the cursor at the
    /// start of `top`. Not "erase below" (`ESC[J`): from the top-left corner, tmux (its
    /// `scroll-on-clear`) and some terminals push the screen into the scrollback instead of
    /// erasing it, which would keep a copy of the viewport there.
    fn clear_from(&mut self, top: u16) -> Result<(), B::Error> {
        let height = self.terminal.size()?.height;
        let backend = self.terminal.backend_mut();
        for y in top..height {
            backend.set_cursor_position(Position::new(0, y))?;
            backend.clear_region(ClearType::CurrentLine)?;
        }
        backend.set_cursor_position(Position::new(0, top))?;
        backend.flush()
    }

    /// Writes `items` above the viewport, one blank row between two.
    fn write_above(&mut self, items: Vec<Vec<Line<'static>>>) -> Result<(), B::Error> {
        let mut rows = Vec::new();
        for item in items {
            if self.wrote {
                rows.push(Line::default());
            }
            self.wrote = true;
            rows.extend(item);
        }
        for chunk in rows.chunks(CHUNK_ROWS) {
            let height = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
            self.terminal.insert_before(height, |buf| {
                for (y, line) in (0..height).zip(chunk) {
                    buf.set_line(0, y, line, buf.area.width);
                }
            })?;
        }
        Ok(())
    }

    /// The screen is now `size`: the viewport is found again from the cursor (the terminal
    /// moved both alike), cleared from there down and redrawn whole.
    fn resized(&mut self, size: Size) -> Result<(), B::Error> {
        let cursor = self.terminal.get_cursor_position()?;
        let top = cursor
            .y
            .saturating_sub(self.cursor_row)
            .min(size.height.saturating_sub(1));
        self.size = size;
        let height = self.height.min(size.height).max(1);
        self.reanchor(Some(top), height)
    }

    /// A new viewport of `height` rows starting at row `top` (default: where the viewport
    /// starts now), the old one's rows cleared first.
    fn reanchor(&mut self, top: Option<u16>, height: u16) -> Result<(), B::Error> {
        let top = match top {
            Some(top) => top,
            None => self.area().y,
        };
        self.clear_from(top)?;
        let backend = (self.fresh)(self.terminal.backend());
        self.terminal = Terminal::with_options(
            backend,
            TerminalOptions {
                viewport: Viewport::Inline(height),
            },
        )?;
        self.size = self.terminal.size()?;
        self.height = height;
        self.cursor_row = 0;
        Ok(())
    }
}

/// Whether `size` is below what inline mode draws on.
fn too_small(size: Size) -> bool {
    size.width < MIN_WIDTH || size.height < MIN_HEIGHT
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;

    /// A stand-in app: items finished so far, a streaming tail, a fixed composer row.
    #[derive(Default)]
    struct Fake {
        done: Vec<String>,
        taken: usize,
        streaming: Option<String>,
        popup: u16,
    }

    impl InlineContent for Fake {
        fn take_history(&mut self, _width: u16, all: bool) -> Vec<Vec<Line<'static>>> {
            let mut out: Vec<Vec<Line<'static>>> = self.done[self.taken..]
                .iter()
                .map(|t| vec![Line::from(t.clone())])
                .collect();
            self.taken = self.done.len();
            if all {
                if let Some(text) = self.streaming.take() {
                    out.push(vec![Line::from(text)]);
                }
            }
            out
        }
        fn viewport_height(&self, _width: u16) -> u16 {
            1 + u16::from(self.streaming.is_some()) + self.popup
        }
        fn layers_open(&self) -> bool {
            self.popup > 0
        }
        fn draw(&self, area: Rect, buf: &mut Buffer) -> Option<Position> {
            let mut y = area.y;
            if let Some(text) = &self.streaming {
                buf.set_string(0, y, text, ratatui::style::Style::new());
                y += 1;
            }
            for n in 0..self.popup.min(area.bottom() - 1 - y) {
                buf.set_string(0, y, format!("popup row {n}"), ratatui::style::Style::new());
                y += 1;
            }
            buf.set_string(
                0,
                area.bottom() - 1,
                "> composer",
                ratatui::style::Style::new(),
            );
            Some(Position::new(2, area.bottom() - 1))
        }
    }

    fn rows(buf: &Buffer) -> Vec<String> {
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect()
    }

    fn screen(backend: TestBackend) -> InlineScreen<TestBackend> {
        InlineScreen::new(backend, |b| b.clone()).unwrap()
    }

    /// Finished items go above the viewport in order, the streaming one stays in it until the
    /// session closes, and on exit the scrollback and screen hold the whole conversation with
    /// the cursor below it.
    #[test]
    fn finished_items_go_above_and_the_exit_leaves_them_all() {
        let mut screen = screen(TestBackend::new(30, 6));
        let mut app = Fake {
            done: vec!["first".into(), "second".into()],
            ..Fake::default()
        };
        screen.frame(&mut app).unwrap();
        let visible = rows(screen.terminal().backend().buffer());
        assert_eq!(visible[..4], ["first", "", "second", "> composer"]);
        app.streaming = Some("streaming…".into());
        screen.frame(&mut app).unwrap();
        let visible = rows(screen.terminal().backend().buffer());
        assert_eq!(visible[3..5], ["streaming…", "> composer"], "{visible:?}");
        for n in 0..4 {
            app.done.push(format!("more {n}"));
        }
        screen.frame(&mut app).unwrap();
        screen.close_session(&mut app).unwrap();
        screen.finish().unwrap();
        let cursor = screen.terminal.backend_mut().get_cursor_position().unwrap();
        let backend = screen.terminal().backend();
        let mut all = rows(backend.scrollback());
        all.extend(rows(backend.buffer()));
        let text: Vec<&str> = all
            .iter()
            .map(String::as_str)
            .filter(|r| !r.is_empty())
            .collect();
        assert_eq!(
            text,
            [
                "first",
                "second",
                "more 0",
                "more 1",
                "more 2",
                "more 3",
                "streaming…"
            ]
        );
        // The cursor sits on the first row after the last line written, and that row is clear.
        let last = all.iter().rposition(|r| !r.is_empty()).unwrap();
        let scrolled = usize::from(backend.scrollback().area.height);
        assert_eq!(usize::from(cursor.y) + scrolled, last + 1);
        assert_eq!(cursor.x, 0);
    }

    /// A popup taller than the viewport grows it (up to the screen) and the viewport keeps its
    /// height until the popup closes.
    #[test]
    fn a_tall_popup_grows_the_viewport_up_to_the_screen() {
        let mut screen = screen(TestBackend::new(30, 8));
        let mut app = Fake {
            done: vec!["hello".into()],
            popup: 3,
            ..Fake::default()
        };
        screen.frame(&mut app).unwrap();
        assert_eq!(screen.height, 4);
        app.popup = 20;
        screen.frame(&mut app).unwrap();
        assert_eq!(screen.height, 8);
        let visible = rows(screen.terminal().backend().buffer());
        assert_eq!(visible[0], "popup row 0");
        assert_eq!(visible[7], "> composer");
        // History went to the scrollback, not lost.
        assert!(rows(screen.terminal().backend().scrollback()).contains(&"hello".to_string()));
        app.popup = 0;
        screen.frame(&mut app).unwrap();
        assert_eq!(screen.height, 1);
    }

    /// A session that ends with the viewport at full height (a menu open): the next one's
    /// history is written above and nothing of the old viewport stays, on screen or above.
    #[test]
    fn history_written_under_a_full_height_viewport_leaves_nothing_of_it() {
        let mut screen = screen(TestBackend::new(30, 8));
        let mut app = Fake {
            done: vec!["hello".into()],
            popup: 20,
            ..Fake::default()
        };
        screen.frame(&mut app).unwrap();
        assert_eq!(screen.height, 8);
        let mut next = Fake {
            done: (0..5).map(|n| format!("welcome {n}")).collect(),
            ..Fake::default()
        };
        screen.frame(&mut next).unwrap();
        let backend = screen.terminal().backend();
        let mut all = rows(backend.scrollback());
        all.extend(rows(backend.buffer()));
        let text: Vec<&str> = all
            .iter()
            .map(String::as_str)
            .filter(|r| !r.is_empty())
            .collect();
        assert_eq!(
            text,
            [
                "hello",
                "welcome 0",
                "welcome 1",
                "welcome 2",
                "welcome 3",
                "welcome 4",
                "> composer"
            ],
            "{all:#?}"
        );
    }

    /// Too small a screen says so on one line and holds the history back; grown again, it is
    /// written, and the viewport is drawn without leftovers.
    #[test]
    fn a_screen_too_small_says_so_and_a_resize_redraws() {
        let mut screen = screen(TestBackend::new(40, 10));
        let mut app = Fake {
            done: vec!["one".into()],
            ..Fake::default()
        };
        screen.frame(&mut app).unwrap();
        screen.terminal.backend_mut().resize(12, 3);
        app.done.push("two".into());
        screen.frame(&mut app).unwrap();
        let visible = rows(screen.terminal().backend().buffer());
        assert!(
            visible.iter().any(|r| r.starts_with("terminal to")),
            "{visible:?}"
        );
        assert_eq!(app.taken, 1, "history waits while the screen is too small");
        screen.terminal.backend_mut().resize(40, 10);
        screen.frame(&mut app).unwrap();
        let visible = rows(screen.terminal().backend().buffer());
        assert!(
            !visible.iter().any(|r| r.contains("too small")),
            "{visible:?}"
        );
        assert_eq!(visible.iter().filter(|r| *r == "> composer").count(), 1);
        assert!(visible.contains(&"two".to_string()), "{visible:?}");
    }
}
