//! Styled text as a flat run of characters, so widgets can escape, highlight, truncate and wrap
//! with exact cell widths before anything reaches a ratatui buffer.
//!
//! Widths come from ratatui's own `Span::width` so our arithmetic agrees with what the buffer
//! will draw. The buffer draws extended grapheme clusters (within one span, i.e. one run of
//! equally styled cells), so truncation and wrapping measure and cut whole clusters: a ZWJ
//! family, a flag or a letter with its marks is never split into pieces that draw as something
//! else, and a cluster's width is the one the buffer gives it.

use crate::escape::{self, EscapeMode, Shown};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

/// Display width of one character, in cells.
pub fn char_width(c: char) -> usize {
    // Printable ASCII and Latin up to the combining marks, soft hyphen aside: one cell each
    // (a test checks this against the general path).
    if matches!(c, ' '..='~' | '\u{a0}'..='\u{ac}' | '\u{ae}'..='\u{2ff}') {
        return 1;
    }
    let mut bytes = [0u8; 4];
    Span::raw(&*c.encode_utf8(&mut bytes)).width()
}

/// Display width of a string, in cells.
pub fn str_width(s: &str) -> usize {
    Span::raw(s).width()
}

/// Display width of a string as the buffer draws it: the sum of the widths of its extended
/// grapheme clusters (ratatui draws cluster by cluster, and skips one that holds a control).
/// Differs from [`str_width`] where a sequence is drawn narrower or wider than its characters
/// measure alone.
pub fn cluster_cells(s: &str) -> usize {
    s.graphemes(true)
        .filter(|g| !g.contains(char::is_control))
        .map(str_width)
        .sum()
}

const TAB: &str = "    ";
/// What stands in for text cut to fit a width.
pub const ELLIPSIS: char = '…';

/// Characters with their styles. Every character in here is safe to draw except `\n`, which
/// separates lines for [`StyledText::wrap`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StyledText {
    cells: Vec<(char, Style)>,
}

impl StyledText {
    /// An empty text.
    pub fn new() -> Self {
        StyledText::default()
    }

    /// Terminal columns the text takes when drawn on one line (wide characters count two).
    pub fn width(&self) -> usize {
        units(&self.cells).map(|u| u.width).sum()
    }

    /// Appends trusted text (our own labels and punctuation).
    pub fn push(&mut self, text: &str, style: Style) -> &mut Self {
        self.cells.extend(text.chars().map(|c| (c, style)));
        self
    }

    /// Appends untrusted text, escaped for `mode`; escape sequences get the escape colour.
    pub fn push_untrusted(&mut self, raw: &str, mode: EscapeMode, style: Style) -> &mut Self {
        self.push_highlighted(raw, mode, style, |_| false, style)
    }

    /// Like [`push_untrusted`](Self::push_untrusted), drawing raw character `i` in `hl` when
    /// `is_hl(i)` (indices count raw characters, before escaping).
    pub fn push_highlighted(
        &mut self,
        raw: &str,
        mode: EscapeMode,
        style: Style,
        is_hl: impl Fn(usize) -> bool,
        hl: Style,
    ) -> &mut Self {
        let mut chars = raw.chars().enumerate().peekable();
        let mut spelled = String::new();
        while let Some((i, c)) = chars.next() {
            let base = if is_hl(i) { hl } else { style };
            match escape::shown(c, chars.peek().map(|(_, c)| *c), mode) {
                Shown::Plain('\t') => {
                    self.push(TAB, base);
                }
                Shown::Plain(c) => self.cells.push((c, base)),
                Shown::Nothing => {}
                shown => {
                    spelled.clear();
                    shown.push_to(&mut spelled);
                    self.push(&spelled, base.patch(super::style::escaped()));
                }
            }
        }
        self
    }

    /// Appends `other`, its styles kept.
    pub fn append(&mut self, other: StyledText) -> &mut Self {
        self.cells.extend(other.cells);
        self
    }

    /// Patches `style` over every cell (e.g. a selection background).
    pub fn patch_style(&mut self, style: Style) {
        for (_, s) in &mut self.cells {
            *s = s.patch(style);
        }
    }

    /// Cut to `max` cells, ending in `…` when something was cut. One pass that stops at the
    /// cut: a huge text costs what is shown of it.
    pub fn truncate(&self, max: usize) -> StyledText {
        let mut used = 0;
        // Where the `…` goes if the text turns out too wide: before the first unit that does
        // not fit in `max - 1` cells.
        let mut cut: Option<(usize, Style)> = None;
        for unit in units(&self.cells) {
            if used + unit.width > max {
                let Some((at, style)) = cut.filter(|_| max > 0) else {
                    return StyledText::new();
                };
                let mut cells = self.cells[..at].to_vec();
                cells.push((ELLIPSIS, style));
                return StyledText { cells };
            }
            if cut.is_none() && used + unit.width > max.saturating_sub(1) {
                cut = Some((unit.start, self.cells[unit.start].1));
            }
            used += unit.width;
        }
        self.clone()
    }

    /// Cut to `max` cells from the left, starting with `…` when something was cut (keeps the
    /// file name of a long path).
    pub fn truncate_left(&self, max: usize) -> StyledText {
        if self.width() <= max {
            return self.clone();
        }
        let mut out = Vec::new();
        if max == 0 {
            return StyledText::new();
        }
        let mut used = 0;
        let mut start = self.cells.len();
        let mut cut = None;
        let all: Vec<Unit> = units(&self.cells).collect();
        for unit in all.into_iter().rev() {
            if used + unit.width > max - 1 {
                cut = Some(self.cells[unit.start].1);
                break;
            }
            used += unit.width;
            start = unit.start;
        }
        if let Some(style) = cut {
            out.push((ELLIPSIS, style));
        }
        out.extend_from_slice(&self.cells[start..]);
        StyledText { cells: out }
    }

    /// One line (any `\n` is drawn as a space; callers of single-line text never have one).
    pub fn to_line(&self) -> Line<'static> {
        spans_of(&self.cells).into()
    }

    /// Word-wraps to `width` cells: each `\n` starts a new line; a line breaks after a space
    /// when it can, else mid-word. `first` prefixes the first row, `rest` every later row; both
    /// count against the width.
    pub fn wrap(&self, width: usize, first: &StyledText, rest: &StyledText) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        if width == 0 {
            return out;
        }
        let mut first_row = true;
        for logical in self.cells.split(|(c, _)| *c == '\n') {
            let units: Vec<Unit> = units(logical).collect();
            let mut start = 0;
            loop {
                let prefix = if first_row { first } else { rest };
                let avail = width.saturating_sub(prefix.width()).max(1);
                let (end, next) = break_row(logical, &units, start, avail);
                let mut cells = prefix.cells.clone();
                cells.extend_from_slice(&logical[start..end]);
                out.push(spans_of(&cells).into());
                first_row = false;
                if next >= logical.len() {
                    break;
                }
                start = next;
            }
        }
        out
    }
}

/// One thing the buffer draws: cells `start..end` (a grapheme cluster within a run of one
/// style) taking `width` cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unit {
    start: usize,
    end: usize,
    width: usize,
}

/// Whether an extended grapheme cluster boundary certainly falls between `a` and `b`, whatever
/// comes before or after, by a range check alone: both are characters that never extend, join,
/// prepend or pair (below U+0300, where combining marks start; CJK unified ideographs;
/// precomposed Hangul syllables, which only join conjoining jamo), and they are not CR LF.
/// `false` means "look closer". Cheap enough to ask of every character.
pub(crate) fn inert_boundary(a: char, b: char) -> bool {
    fn inert(c: char) -> bool {
        (c as u32) < 0x300
            || ('\u{4e00}'..='\u{9fff}').contains(&c)
            || ('\u{ac00}'..='\u{d7a3}').contains(&c)
    }
    inert(a) && inert(b) && !(a == '\r' && b == '\n')
}

/// Whether an extended grapheme cluster boundary falls between `a` and `b` whatever comes
/// before or after; `false` means "it depends" or "no". Beyond [`inert_boundary`]: the only
/// rules that look behind `a` (GB9c, GB11, GB12/13) need `a` to be a mark or joiner (which
/// attach to the character before them) or a regional indicator; for any other `a` except a
/// Prepend character, segmenting the pair alone gives the answer.
pub(crate) fn certain_boundary(a: char, b: char) -> bool {
    fn parts(a: char, b: char) -> usize {
        let mut buf = [0u8; 8];
        let len = a.encode_utf8(&mut buf).len();
        let len = len + b.encode_utf8(&mut buf[len..]).len();
        std::str::from_utf8(&buf[..len]).map_or(1, |pair| pair.graphemes(true).count())
    }
    if inert_boundary(a, b) {
        return true;
    }
    if a == '\r' && b == '\n' {
        return false;
    }
    let plain_leader = (a as u32) < 0x300
        || (!('\u{1f1e6}'..='\u{1f1ff}').contains(&a) && parts('x', a) == 2 && parts(a, 'x') == 2);
    plain_leader && parts(a, b) == 2
}

/// The drawn units of `cells`, in order, covering every cell.
fn units(cells: &[(char, Style)]) -> Units<'_> {
    Units {
        cells,
        pos: 0,
        pending: std::collections::VecDeque::new(),
        scratch: String::new(),
    }
}

/// Lazy [`units`]: a character with an [`inert_boundary`] after it (most text) is a unit of
/// its own, found without segmenting; anything else is
/// segmented a window at a time, starting at a known boundary, and only clusters that end
/// before the window does (or at a boundary no later text can move) are trusted, so the cost
/// stays linear however long the text and whatever clusters it holds.
struct Units<'a> {
    cells: &'a [(char, Style)],
    /// Cells before `pos` are covered by returned or pending units; `pos` is a boundary.
    pos: usize,
    pending: std::collections::VecDeque<Unit>,
    scratch: String,
}

const UNIT_WINDOW: usize = 64;

impl Units<'_> {
    /// A cluster boundary falls before cell `i` whatever the text around: the ends, a style
    /// change, or an [`inert_boundary`].
    fn fixed_boundary(&self, i: usize) -> bool {
        let cells = self.cells;
        if i == 0 || i >= cells.len() {
            return true;
        }
        let ((a, sa), (b, sb)) = (cells[i - 1], cells[i]);
        sa != sb || inert_boundary(a, b)
    }

    fn segment_window(&mut self) {
        let start = self.pos;
        let style = self.cells[start].1;
        let mut window = UNIT_WINDOW;
        loop {
            let mut end = start;
            while end < self.cells.len() && end - start < window && self.cells[end].1 == style {
                end += 1;
            }
            let complete = self.fixed_boundary(end);
            self.scratch.clear();
            self.scratch
                .extend(self.cells[start..end].iter().map(|(c, _)| *c));
            let clusters: Vec<&str> = self.scratch.graphemes(true).collect();
            // The last cluster may go on past the window unless the window ends at a boundary.
            let keep = if complete {
                clusters.len()
            } else {
                clusters.len() - 1
            };
            if keep == 0 {
                window *= 2;
                continue;
            }
            let mut at = start;
            for cluster in &clusters[..keep] {
                let len = cluster.chars().count();
                let width = if len == 1 {
                    char_width(self.cells[at].0)
                } else if cluster.contains(char::is_control) {
                    cluster.chars().map(char_width).sum()
                } else {
                    str_width(cluster)
                };
                self.pending.push_back(Unit {
                    start: at,
                    end: at + len,
                    width,
                });
                at += len;
            }
            self.pos = at;
            return;
        }
    }
}

impl Iterator for Units<'_> {
    type Item = Unit;

    fn next(&mut self) -> Option<Unit> {
        if let Some(unit) = self.pending.pop_front() {
            return Some(unit);
        }
        let i = self.pos;
        let (c, _) = *self.cells.get(i)?;
        if self.fixed_boundary(i + 1) {
            self.pos += 1;
            return Some(Unit {
                start: i,
                end: i + 1,
                width: char_width(c),
            });
        }
        self.segment_window();
        self.pending.pop_front()
    }
}

/// Where the row starting at cell `start` ends (exclusive) and where the next one begins;
/// `units` are the drawn units of `line`. Rows break between units only.
fn break_row(line: &[(char, Style)], units: &[Unit], start: usize, width: usize) -> (usize, usize) {
    let is_space = |u: &Unit| u.end == u.start + 1 && line[u.start].0 == ' ';
    let mut used = 0;
    let mut after_space = None;
    let first = units.partition_point(|u| u.start < start);
    for unit in &units[first..] {
        if used + unit.width > width && unit.start > start {
            if is_space(unit) {
                return (unit.start, unit.end);
            }
            if let Some(b) = after_space {
                return (b, b);
            }
            return (unit.start, unit.start);
        }
        used += unit.width;
        if is_space(unit) {
            after_space = Some(unit.end);
        }
    }
    (line.len(), line.len())
}

fn spans_of(cells: &[(char, Style)]) -> Vec<Span<'static>> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut text = String::new();
    let mut current: Option<Style> = None;
    for &(c, style) in cells {
        if current != Some(style) {
            if let Some(s) = current {
                spans.push(Span::styled(std::mem::take(&mut text), s));
            }
            current = Some(style);
        }
        text.push(if c == '\n' { ' ' } else { c });
    }
    if let Some(s) = current {
        spans.push(Span::styled(text, s));
    }
    spans
}

/// Which raw characters of `haystack` fall inside a case-insensitive occurrence of `needle`
/// (Unicode lowercase, like the candidate filter of SPEC §3.3).
pub fn ci_matches(haystack: &str, needle: &str) -> Vec<bool> {
    let mut marks = vec![false; haystack.chars().count()];
    let needle: Vec<char> = needle.chars().flat_map(char::to_lowercase).collect();
    if needle.is_empty() {
        return marks;
    }
    // Lowercased haystack, each lowered char remembering which raw char it came from.
    let mut lowered: Vec<(char, usize)> = Vec::with_capacity(marks.len());
    for (i, c) in haystack.chars().enumerate() {
        lowered.extend(c.to_lowercase().map(|l| (l, i)));
    }
    if lowered.len() < needle.len() {
        return marks;
    }
    for start in 0..=lowered.len() - needle.len() {
        let window = &lowered[start..start + needle.len()];
        if window.iter().zip(&needle).all(|((l, _), n)| l == n) {
            for (_, raw) in window {
                marks[*raw] = true;
            }
        }
    }
    marks
}

pub use crate::host::{format_age, format_size};

#[cfg(test)]
mod tests;
