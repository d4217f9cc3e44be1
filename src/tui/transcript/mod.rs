//! The conversation as the user sees it (SPEC §5.4).
//!
//! Items are built either live (the runtime pushes prompts, deltas and notices) or from log
//! messages via [`TranscriptItem::from_message`], so a resumed session reads the same as a live
//! one. Everything that came from a log is untrusted and escaped for multi-line display.
//! A session-reference context is folded into one dim card: the snapshot is for the model, and
//! the user only needs to know which sessions went along, with the full text a toggle away.
//!
//! Rooms: `item` (what one entry is, and a log message read into one), `cells` (one type
//! per kind that draws it, `display_lines(width)`), `parts` (what an item carries and a cell
//! draws), and here the [`Transcript`]: the list, its wrap cache and its scroll.

pub(crate) mod cells;
pub(crate) mod item;
pub(crate) mod parts;

pub use cells::TranscriptCell;
pub use item::TranscriptItem;
pub use parts::{human_bytes, readable_snapshot, Kept, NoticeLevel, Pastes, ReferencedSession};

use super::render::{clip, Renderable};
use super::style;
use super::text::StyledText;
use crate::escape::EscapeMode;
use crate::session::format::{Event, Message, ASSISTANT_MESSAGE};
use cells::text as text_of;
use item::reasoning_of;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use std::cell::{Cell, RefCell};

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
    /// Items before this one were written into the terminal's scrollback (inline mode,
    /// [`Transcript::take_finished`]) and are no longer drawn by [`Transcript::render_live`].
    printed: usize,
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

    /// Shows `pasted` (the blocks the composer collapsed) as chips in the newest item, the
    /// prompt just logged; false when it is no prompt or holds none of them.
    pub fn set_last_pastes(&mut self, pasted: &[String]) -> bool {
        let Some(last) = self.items.len().checked_sub(1) else {
            return false;
        };
        let set = self.items[last].set_pastes(pasted);
        self.invalidate(last);
        set
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
        self.printed = 0;
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

    /// Inline mode: the rows at `width` of each finished item not yet taken, oldest first, and
    /// marks them taken. An item still streaming stops the run (every item after it waits, so
    /// the scrollback keeps the order); `all` takes it too, as it stands (the session is
    /// closing). The rows are the same ones the full screen draws (one renderer per cell).
    pub fn take_finished(&mut self, width: usize, all: bool) -> Vec<Vec<Line<'static>>> {
        self.printed = self.printed.min(self.items.len());
        let end = if all {
            self.items.len()
        } else {
            (self.printed..self.items.len())
                .find(|&i| streaming(&self.items[i]))
                .unwrap_or(self.items.len())
        };
        if end == self.printed {
            return Vec::new();
        }
        self.wrap(width);
        let cache = self.cache.borrow();
        let taken = (self.printed..end)
            .map(|i| {
                cache
                    .get(i)
                    .and_then(Option::as_ref)
                    .map(|w| w.lines.clone())
                    .unwrap_or_else(|| self.items[i].lines(width))
            })
            .collect();
        drop(cache);
        self.printed = end;
        taken
    }

    /// Inline mode: the rows of the items not taken yet (the streaming answer and what follows
    /// it), each after one blank row (which parts it from what is above).
    fn live_lines(&self, width: usize) -> Vec<Line<'static>> {
        self.wrap(width);
        let cache = self.cache.borrow();
        let mut out = vec![Line::default()];
        for (n, wrapped) in cache.iter().skip(self.printed).flatten().enumerate() {
            if n > 0 {
                out.push(Line::default());
            }
            out.extend(wrapped.lines.iter().cloned());
        }
        out
    }

    /// Inline mode: how many rows [`Transcript::render_live`] wants at `width`.
    pub fn live_height(&self, width: u16) -> u16 {
        u16::try_from(self.live_lines(usize::from(width)).len()).unwrap_or(u16::MAX)
    }

    /// Inline mode: draws the items not taken yet into `area`, from its top; when they are
    /// taller, their last rows.
    pub fn render_live(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        let lines = self.live_lines(usize::from(area.width));
        let skip = lines.len().saturating_sub(usize::from(area.height));
        for (y, line) in (area.y..area.bottom()).zip(lines.iter().skip(skip)) {
            buf.set_line(area.x, y, line, area.width);
        }
    }
}

/// An answer or reasoning whose deltas still arrive (inline mode keeps it in the viewport).
fn streaming(item: &TranscriptItem) -> bool {
    matches!(
        item,
        TranscriptItem::Assistant {
            streaming: true,
            ..
        } | TranscriptItem::Reasoning {
            streaming: true,
            ..
        }
    )
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
