//! Styled text as a flat run of characters, so widgets can escape, highlight, truncate and wrap
//! with exact cell widths before anything reaches a ratatui buffer.
//!
//! Widths come from ratatui's own `Span::width` so our arithmetic agrees with what the buffer
//! will draw.

use super::escape::{self, EscapeMode, Shown};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

/// Display width of one character, in cells.
pub fn char_width(c: char) -> usize {
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
pub const ELLIPSIS: char = '…';

/// Characters with their styles. Every character in here is safe to draw except `\n`, which
/// separates lines for [`StyledText::wrap`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StyledText {
    cells: Vec<(char, Style)>,
}

impl StyledText {
    pub fn new() -> Self {
        StyledText::default()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    pub fn width(&self) -> usize {
        self.cells.iter().map(|(c, _)| char_width(*c)).sum()
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

    /// Cut to `max` cells, ending in `…` when something was cut.
    pub fn truncate(&self, max: usize) -> StyledText {
        if self.width() <= max {
            return self.clone();
        }
        let mut out = StyledText::new();
        if max == 0 {
            return out;
        }
        let mut used = 0;
        for &(c, style) in &self.cells {
            let w = char_width(c);
            if used + w > max - 1 {
                out.cells.push((ELLIPSIS, style));
                break;
            }
            used += w;
            out.cells.push((c, style));
        }
        out
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
        for &(c, style) in self.cells.iter().rev() {
            let w = char_width(c);
            if used + w > max - 1 {
                out.push((ELLIPSIS, style));
                break;
            }
            used += w;
            out.push((c, style));
        }
        out.reverse();
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
            let mut start = 0;
            loop {
                let prefix = if first_row { first } else { rest };
                let avail = width.saturating_sub(prefix.width()).max(1);
                let (end, next) = break_row(logical, start, avail);
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

/// Where the row starting at `start` ends (exclusive) and where the next one begins.
fn break_row(line: &[(char, Style)], start: usize, width: usize) -> (usize, usize) {
    let mut used = 0;
    let mut after_space = None;
    for (i, &(c, _)) in line.iter().enumerate().skip(start) {
        let w = char_width(c);
        if used + w > width && i > start {
            if c == ' ' {
                return (i, i + 1);
            }
            if let Some(b) = after_space {
                return (b, b);
            }
            return (i, i);
        }
        used += w;
        if c == ' ' {
            after_space = Some(i + 1);
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

/// Compact age of something created at `created_ms`, seen at `now_ms`: `now`, `45s`, `5m`,
/// `3h`, `2d`, `3w`, `1y`.
pub fn format_age(created_ms: i64, now_ms: i64) -> String {
    let secs = now_ms.saturating_sub(created_ms) / 1000;
    if secs < 1 {
        return "now".into();
    }
    const MIN: i64 = 60;
    const HOUR: i64 = 60 * MIN;
    const DAY: i64 = 24 * HOUR;
    const WEEK: i64 = 7 * DAY;
    const YEAR: i64 = 365 * DAY;
    match secs {
        s if s < MIN => format!("{s}s"),
        s if s < HOUR => format!("{}m", s / MIN),
        s if s < DAY => format!("{}h", s / HOUR),
        s if s < WEEK => format!("{}d", s / DAY),
        s if s < YEAR => format!("{}w", s / WEEK),
        s => format!("{}y", s / YEAR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    fn text(s: &str) -> StyledText {
        let mut t = StyledText::new();
        t.push(s, Style::default());
        t
    }

    #[test]
    fn wraps_on_spaces_then_mid_word() {
        let none = StyledText::new();
        let lines = text("hello brave new world").wrap(11, &none, &none);
        assert_eq!(plain(&lines), ["hello brave", "new world"]);
        let lines = text("abcdefghij").wrap(4, &none, &none);
        assert_eq!(plain(&lines), ["abcd", "efgh", "ij"]);
        let lines = text("a\n\nb").wrap(4, &none, &none);
        assert_eq!(plain(&lines), ["a", "", "b"]);
        let lines = text("one two").wrap(5, &text("> "), &text("  "));
        assert_eq!(plain(&lines), ["> one", "  two"]);
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(text("abcdef").truncate(4).to_line().to_string(), "abc…");
        assert_eq!(text("abcdef").truncate(6).to_line().to_string(), "abcdef");
        assert_eq!(
            text("abcdef").truncate_left(4).to_line().to_string(),
            "…def"
        );
        assert_eq!(text("漢字漢字").truncate(4).to_line().to_string(), "漢…");
        assert!(text("abc").truncate(0).is_empty());
    }

    #[test]
    fn case_insensitive_marks() {
        let marks = ci_matches("Fix LOGIN login", "login");
        let got: String = marks.iter().map(|m| if *m { '^' } else { ' ' }).collect();
        assert_eq!(got, "    ^^^^^ ^^^^^");
        assert!(ci_matches("abc", "").iter().all(|m| !m));
        assert!(ci_matches("ab", "abc").iter().all(|m| !m));
    }

    #[test]
    fn ages() {
        let m = 60_000;
        assert_eq!(format_age(0, 0), "now");
        assert_eq!(format_age(10, 0), "now");
        assert_eq!(format_age(0, 45_000), "45s");
        assert_eq!(format_age(0, 5 * m), "5m");
        assert_eq!(format_age(0, 180 * m), "3h");
        assert_eq!(format_age(0, 49 * 60 * m), "2d");
        assert_eq!(format_age(0, 22 * 24 * 60 * m), "3w");
        assert_eq!(format_age(0, 400 * 24 * 60 * m), "1y");
    }

    #[test]
    fn untrusted_text_is_escaped_and_tabs_expand() {
        let mut t = StyledText::new();
        t.push_untrusted("a\u{1b}\tb\r\nc", EscapeMode::MultiLine, Style::default());
        let none = StyledText::new();
        assert_eq!(plain(&t.wrap(40, &none, &none)), ["a\\x1B    b", "c"]);
    }
}
