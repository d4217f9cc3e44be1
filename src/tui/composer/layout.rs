//! Wrapping and drawing the composer: cell widths per cluster, rows at a width, the cursor's
//! cell, and the view.
//!
//! Invariant: a row never breaks inside a cluster, the cursor is drawn where the buffer puts the
//! text before it, and one layout (widths and rows) serves `desired_height`, the drawing and the
//! cursor of a frame: it is cached by content generation, cursor and width. Proof: the unit
//! tests `rows_never_wrap_inside_a_cluster`, `cursor_column_counts_cells_per_cluster` and
//! `the_layout_is_computed_once_per_frame`.

use super::{Composer, Elem, FileElement, MentionElement, GUTTER, TAB_WIDTH};
use crate::escape::{self, EscapeMode, Shown};
use crate::tui::render::{clip, Renderable};
use crate::tui::style;
use crate::tui::text::{char_width, cluster_cells, str_width, StyledText};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;
use ratatui::widgets::{Block, BorderType, Widget};
use std::ops::Range;
use std::sync::Arc;
use unicode_segmentation::UnicodeSegmentation;

/// One computed layout and what it was computed for.
#[derive(Debug, Clone)]
pub(super) struct Laid {
    generation: u64,
    cursor: usize,
    width: usize,
    widths: Arc<Vec<usize>>,
    rows: Arc<Vec<Range<usize>>>,
}

impl Composer {
    /// Widths and rows at `width` text columns, from the cache when nothing changed.
    pub(super) fn laid_out(&self, width: usize) -> (Arc<Vec<usize>>, Arc<Vec<Range<usize>>>) {
        let width = width.max(1);
        if let Some(laid) = self.laid.borrow().as_ref() {
            if laid.generation == self.generation
                && laid.cursor == self.cursor
                && laid.width == width
            {
                return (laid.widths.clone(), laid.rows.clone());
            }
        }
        let widths = match self.laid.borrow().as_ref() {
            Some(laid) if laid.generation == self.generation => laid.widths.clone(),
            _ => Arc::new(self.cell_widths()),
        };
        let rows = Arc::new(self.layout_with(width, &widths));
        self.layouts.set(self.layouts.get() + 1);
        *self.laid.borrow_mut() = Some(Laid {
            generation: self.generation,
            cursor: self.cursor,
            width,
            widths: widths.clone(),
            rows: rows.clone(),
        });
        (widths, rows)
    }

    /// Cells each element takes when drawn: a grapheme cluster's width (as the buffer draws
    /// it) on its first element and 0 on the rest; a tab [`TAB_WIDTH`]; a control its visible
    /// escape; a mention its `@label`. `\n` gets 0 (rows never include it).
    pub(super) fn cell_widths(&self) -> Vec<usize> {
        let mut widths = vec![0; self.elems.len()];
        let mut i = 0;
        while i < self.elems.len() {
            match &self.elems[i] {
                Elem::Mention(m) => {
                    widths[i] = mention_name(m).width();
                    if let Some(badge) = self.badge(&m.session_id) {
                        widths[i] += badge_cells(badge);
                    }
                    i += 1;
                    continue;
                }
                Elem::Paste(p) => {
                    widths[i] = cluster_cells(&p.display());
                    i += 1;
                    continue;
                }
                Elem::File(f) => {
                    widths[i] = file_name(f).width() + badge_cells(&f.badge());
                    i += 1;
                    continue;
                }
                Elem::Char(_) => {}
            }
            // From one fixed boundary to the next: mostly a single character, measured alone;
            // otherwise the stretch is segmented (linear overall, however long the text).
            let mut end = i + 1;
            while !self.is_inert_boundary(end) {
                end += 1;
            }
            if end == i + 1 {
                widths[i] = match self.elems[i] {
                    Elem::Char('\n') => 0,
                    Elem::Char(c) => char_cells(c),
                    _ => unreachable!("handled above"),
                };
                i = end;
                continue;
            }
            let run: String = self.elems[i..end]
                .iter()
                .map(|e| match e {
                    Elem::Char(c) => *c,
                    _ => unreachable!("an atom's edges are fixed boundaries"),
                })
                .collect();
            let mut at = i;
            for cluster in run.graphemes(true) {
                widths[at] = if cluster == "\n" {
                    0
                } else {
                    cluster_width(cluster)
                };
                at += cluster.chars().count();
            }
            i = end;
        }
        widths
    }

    /// Visual rows at `width` text columns. Rows cover element ranges without the `\n`s.
    /// Lines break after whitespace when they can, else mid-word; a full last row with the
    /// cursor at its end gets an empty row after it so the cursor has a cell to sit in.
    #[cfg(test)]
    pub(super) fn layout(&self, width: usize) -> Vec<Range<usize>> {
        self.laid_out(width).1.as_ref().clone()
    }

    /// [`layout`](Self::layout) with the [`cell_widths`](Self::cell_widths) already known. A
    /// row only ever breaks before an element with a width, so never inside a cluster.
    pub(super) fn layout_with(&self, width: usize, widths: &[usize]) -> Vec<Range<usize>> {
        let width = width.max(1);
        let mut rows = Vec::new();
        let mut line_start = 0;
        loop {
            let line_end = self.elems[line_start..]
                .iter()
                .position(|e| e.is('\n'))
                .map_or(self.elems.len(), |i| line_start + i);
            let mut row_start = line_start;
            let mut used = 0;
            let mut after_space = None;
            let mut i = line_start;
            while i < line_end {
                let w = widths[i];
                // Whitespace may hang past the edge; the next word then starts the new row.
                if w > 0 && used + w > width && i > row_start && !self.elems[i].is_whitespace() {
                    let brk = match after_space {
                        Some(b) if b > row_start => b,
                        _ => i,
                    };
                    rows.push(row_start..brk);
                    row_start = brk;
                    used = widths[brk..i].iter().sum();
                    after_space = None;
                }
                used += w;
                // A break after whitespace must not split it from a mark that extends it.
                if self.elems[i].is_whitespace() && widths.get(i + 1).is_none_or(|w| *w > 0) {
                    after_space = Some(i + 1);
                }
                i += 1;
            }
            rows.push(row_start..line_end);
            if used >= width && self.cursor == line_end && line_end > row_start {
                rows.push(line_end..line_end);
            }
            if line_end >= self.elems.len() {
                break;
            }
            line_start = line_end + 1;
        }
        rows
    }

    /// The row holding the cursor (the later one at a wrap boundary) and its column.
    pub(super) fn cursor_row_x(&self, rows: &[Range<usize>], widths: &[usize]) -> (usize, usize) {
        let row = rows
            .iter()
            .rposition(|r| r.start <= self.cursor && self.cursor <= r.end)
            .unwrap_or(0);
        let x = rows.get(row).map_or(0, |r| {
            widths[r.start..self.cursor.max(r.start)].iter().sum()
        });
        (row, x)
    }

    pub(super) fn block() -> Block<'static> {
        Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(style::border())
    }

    /// Text area inside the border and the gutter.
    pub(super) fn text_area(area: Rect) -> Rect {
        let inner = Self::block().inner(area);
        Rect {
            x: inner.x.saturating_add(GUTTER),
            width: inner.width.saturating_sub(GUTTER),
            ..inner
        }
    }

    /// First visible row: the cursor row stays on screen.
    pub(super) fn top_row(cursor_row: usize, height: u16) -> usize {
        cursor_row.saturating_sub(usize::from(height.max(1)) - 1)
    }

    /// Where the terminal cursor goes when the composer is drawn in `area`.
    pub fn cursor_position(&self, area: Rect) -> Option<Position> {
        let text = Self::text_area(area);
        if text.is_empty() {
            return None;
        }
        let (widths, rows) = self.laid_out(usize::from(text.width));
        let (row, x) = self.cursor_row_x(&rows, &widths);
        let top = Self::top_row(row, text.height);
        let x = u16::try_from(x).unwrap_or(u16::MAX).min(text.width - 1);
        let y = u16::try_from(row - top).unwrap_or(0);
        Some(Position::new(text.x + x, text.y + y))
    }

    pub(super) fn row_text(&self, row: Range<usize>) -> StyledText {
        let mut out = StyledText::new();
        for elem in &self.elems[row] {
            match elem {
                Elem::Char('\t') => {
                    out.push(&" ".repeat(TAB_WIDTH), Style::new());
                }
                Elem::Char(c) => {
                    let mut buf = [0u8; 4];
                    out.push_untrusted(
                        c.encode_utf8(&mut buf),
                        EscapeMode::SingleLine,
                        Style::new(),
                    );
                }
                Elem::Mention(m) => {
                    out.append(mention_name(m));
                    if let Some(badge) = self.badge(&m.session_id) {
                        out.push(&format!(" ⟨{badge}⟩"), style::dim());
                    }
                }
                Elem::Paste(p) => {
                    out.push(&p.display(), style::dim());
                }
                Elem::File(f) => {
                    out.append(file_name(f));
                    out.push(&format!(" ⟨{}⟩", f.badge()), style::dim());
                }
            }
        }
        out
    }
}

/// The most cells a chip's name takes on screen (a mention's `@label`, a file chip's `@path`,
/// badge aside): a longer one is cut with `…` (a label keeps its start, a path its end, where
/// the file name is), so a chip stays a short unit on its row and never wraps. What is sent is
/// untouched: the whole label and path.
pub(super) const CHIP_NAME_CELLS: usize = 40;

/// A mention as drawn: `@label`, escaped (labels from `from_candidate` are already safe; one
/// built elsewhere may not be) and cut to [`CHIP_NAME_CELLS`].
fn mention_name(m: &MentionElement) -> StyledText {
    let mut name = StyledText::new();
    name.push_untrusted(&m.display(), EscapeMode::SingleLine, style::mention());
    name.truncate(CHIP_NAME_CELLS)
}

/// A file chip's name as drawn: `@path` escaped (a path may hold any character a file name
/// can), keeping its end when cut to [`CHIP_NAME_CELLS`] (`@…/deep/dir/name.rs`).
fn file_name(f: &FileElement) -> StyledText {
    let token = f.token();
    let mut name = StyledText::new();
    name.push_untrusted(&token, EscapeMode::SingleLine, style::mention());
    if name.width() <= CHIP_NAME_CELLS {
        return name;
    }
    let mut path = StyledText::new();
    path.push_untrusted(&token[1..], EscapeMode::SingleLine, style::mention());
    let mut cut = StyledText::new();
    cut.push("@", style::mention());
    cut.append(path.truncate_left(CHIP_NAME_CELLS - 1));
    cut
}

/// Cells of a badge as drawn: ` ⟨badge⟩`.
fn badge_cells(badge: &str) -> usize {
    str_width(&format!(" ⟨{badge}⟩"))
}

/// Cells one grapheme cluster takes on screen: a tab or a control is spelled out (each is a
/// cluster of its own, CR LF aside), anything else is as wide as the buffer draws it.
pub(super) fn cluster_width(cluster: &str) -> usize {
    let mut chars = cluster.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return char_cells(c);
    }
    if !cluster
        .chars()
        .any(|c| c == '\t' || escape::needs_escape(c, EscapeMode::SingleLine))
    {
        // One cluster: as wide as the buffer draws it.
        return str_width(cluster);
    }
    cluster.chars().map(char_cells).sum()
}

/// Cells one character takes drawn alone: a tab [`TAB_WIDTH`], a control its visible escape.
fn char_cells(c: char) -> usize {
    if c == '\t' {
        return TAB_WIDTH;
    }
    match escape::shown(c, None, EscapeMode::SingleLine) {
        Shown::Plain(c) => char_width(c),
        shown => {
            let mut s = String::new();
            shown.push_to(&mut s);
            s.len()
        }
    }
}

impl Renderable for Composer {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        Self::block().render(area, buf);
        let text = Self::text_area(area);
        self.last_width.set(text.width);
        if text.is_empty() {
            return;
        }
        let gutter_x = text.x - GUTTER;
        if self.elems.is_empty() {
            buf.set_string(gutter_x, text.y, "›", style::user_prefix());
            let mut placeholder = StyledText::new();
            placeholder.push_untrusted(&self.placeholder, EscapeMode::SingleLine, style::dim());
            let line = placeholder.truncate(usize::from(text.width)).to_line();
            buf.set_line(text.x, text.y, &line, text.width);
            return;
        }
        let (widths, rows) = self.laid_out(usize::from(text.width));
        let (cursor_row, _) = self.cursor_row_x(&rows, &widths);
        let top = Self::top_row(cursor_row, text.height);
        for (n, row) in rows
            .iter()
            .cloned()
            .enumerate()
            .skip(top)
            .take(usize::from(text.height))
        {
            let y = text.y + u16::try_from(n - top).unwrap_or(0);
            if n == 0 {
                buf.set_string(gutter_x, y, "›", style::user_prefix());
            }
            buf.set_line(text.x, y, &self.row_text(row).to_line(), text.width);
        }
    }

    fn desired_height(&self, width: u16) -> u16 {
        let text_width = width.saturating_sub(2 + GUTTER);
        let rows = self.laid_out(usize::from(text_width)).1.len();
        let rows = u16::try_from(rows)
            .unwrap_or(u16::MAX)
            .clamp(1, self.max_rows);
        rows + 2
    }

    fn cursor_pos(&self, area: Rect) -> Option<Position> {
        self.cursor_position(area)
    }
}
