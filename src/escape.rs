//! Making untrusted text safe to show on a terminal (SPEC §5.2).
//!
//! Session ids, titles, cwds, directory names and transcript bodies come from logs and homes that
//! anyone may have written. A raw ESC or CSI would let such text move the cursor, recolour the
//! screen or retitle the terminal, and bidi controls can make text read differently from what it
//! is. Every such character is replaced by a visible, inert spelling before it reaches a widget
//! or a diagnostic line, so what the user sees is what the bytes are.
//!
//! This module sits at the crate root, below every layer: the session and reference layers use
//! it for the command line's diagnostics, the TUI for every widget.
//!
//! Invariant: the output of [`escape`] never holds a character [`needs_escape`] flags for its
//! mode, and [`json_for_terminal`] never changes the JSON value. Proof: the property tests below
//! over arbitrary strings.

use std::borrow::Cow;

/// Where the text is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EscapeMode {
    /// Labels, ids, cwds, status fields: every control is escaped, line breaks included.
    SingleLine,
    /// Transcript bodies: `\n` stays a line break (a `\r\n` pair becomes `\n`) and `\t` stays a
    /// tab for the layout to expand; every other control is escaped.
    MultiLine,
}

/// How one character is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Drawn as itself.
    Plain(char),
    /// A C0/C1 control, drawn as `\xNN`.
    Hex(u8),
    /// A bidi control or U+2028/U+2029, drawn as `\u{XXXX}`.
    Unicode(char),
    /// Dropped: the `\r` of a `\r\n` pair in multi-line text.
    Nothing,
}

impl Shown {
    /// Appends the visible spelling to `out`.
    pub fn push_to(self, out: &mut String) {
        use std::fmt::Write;
        match self {
            Shown::Plain(c) => out.push(c),
            Shown::Hex(b) => {
                let _ = write!(out, "\\x{b:02X}");
            }
            Shown::Unicode(c) => {
                let _ = write!(out, "\\u{{{:04X}}}", c as u32);
            }
            Shown::Nothing => {}
        }
    }

    /// Whether the character is shown as an escape (`\xNN` or `\u{XXXX}`), not as itself.
    pub fn is_escaped(self) -> bool {
        matches!(self, Shown::Hex(_) | Shown::Unicode(_))
    }
}

/// C0, DEL and C1.
pub fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1F}' | '\u{7F}'..='\u{9F}')
}

/// Bidi embeddings, overrides, isolates and marks, plus the Unicode line/paragraph separators.
pub fn is_bidi_or_separator(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{061C}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Whether `c` must not reach the terminal raw in `mode`.
pub fn needs_escape(c: char, mode: EscapeMode) -> bool {
    if mode == EscapeMode::MultiLine && (c == '\n' || c == '\t') {
        return false;
    }
    is_control(c) || is_bidi_or_separator(c)
}

/// How `c` is shown; `next` is the following character (a `\r` before `\n` disappears in
/// multi-line text).
pub fn shown(c: char, next: Option<char>, mode: EscapeMode) -> Shown {
    if !needs_escape(c, mode) {
        return Shown::Plain(c);
    }
    if mode == EscapeMode::MultiLine && c == '\r' && next == Some('\n') {
        return Shown::Nothing;
    }
    if is_control(c) {
        Shown::Hex(c as u32 as u8)
    } else {
        Shown::Unicode(c)
    }
}

/// `text` made safe to draw; borrowed when nothing needed escaping.
pub fn escape(text: &str, mode: EscapeMode) -> Cow<'_, str> {
    let Some(first) = text.find(|c| needs_escape(c, mode)) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    let mut chars = text[first..].chars().peekable();
    while let Some(c) = chars.next() {
        shown(c, chars.peek().copied(), mode).push_to(&mut out);
    }
    Cow::Owned(out)
}

/// [`escape`] for single-line places.
pub fn escape_line(text: &str) -> Cow<'_, str> {
    escape(text, EscapeMode::SingleLine)
}

/// [`escape`] for transcript bodies.
pub fn escape_multiline(text: &str) -> Cow<'_, str> {
    escape(text, EscapeMode::MultiLine)
}

/// [`escape_multiline`] for text that arrives in pieces (a streamed answer): the pieces'
/// outputs joined are what escaping the whole text gives, however it was split. A `\r` that
/// ends a piece waits for the next one (it disappears before a `\n`); [`Self::finish`] spells a
/// last one out.
#[derive(Debug, Default, Clone)]
pub struct MultiLineStream {
    held_cr: bool,
}

impl MultiLineStream {
    /// The inert spelling of the next piece.
    pub fn push(&mut self, piece: &str) -> String {
        let mut text = String::with_capacity(piece.len() + 1);
        if std::mem::take(&mut self.held_cr) {
            text.push('\r');
        }
        text.push_str(piece);
        if text.ends_with('\r') {
            text.pop();
            self.held_cr = true;
        }
        escape_multiline(&text).into_owned()
    }

    /// What is still held at the end of the text.
    pub fn finish(&mut self) -> String {
        if std::mem::take(&mut self.held_cr) {
            escape_multiline("\r").into_owned()
        } else {
            String::new()
        }
    }
}

/// A diagnostic line for stderr: every control (line breaks included), DEL, C1 and bidi
/// character spelled visibly, as on screen.
pub fn diagnostic(text: &str) -> Cow<'_, str> {
    escape_line(text)
}

/// JSON text made safe to print on a terminal without changing its value: every character that
/// [`escape_line`] would spell out (in practice DEL, C1 and bidi controls, which JSON writers
/// leave raw) becomes a `\uXXXX` escape. In JSON text such characters can only occur inside
/// string literals, where the escape means the same character.
pub fn json_for_terminal(json: String) -> String {
    let Some(first) = first_single_line_escape(&json) else {
        return json;
    };
    use std::fmt::Write;
    let mut out = String::with_capacity(json.len() + 16);
    out.push_str(&json[..first]);
    for c in json[first..].chars() {
        if needs_escape(c, EscapeMode::SingleLine) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// Where the first character [`needs_escape`] in a single line starts, found by its first
/// byte. Every such character starts with a byte below 0x20, 0x7F, 0xC2 (C1), 0xD8 (U+061C) or
/// 0xE2 (the bidi controls and separators, U+200E to U+2069): sixty-four bytes at a time are
/// looked at for one of those (a loop the compiler makes SIMD), and only a character starting
/// with one is decoded. A reply of tens of KB was decoded character by character before.
fn first_single_line_escape(text: &str) -> Option<usize> {
    let first_byte = |b: u8| b < 0x20 || b == 0x7F || b == 0xC2 || b == 0xD8 || b == 0xE2;
    let bytes = text.as_bytes();
    let mut at = 0;
    for chunk in bytes.chunks(64) {
        if chunk.iter().fold(false, |any, &b| any | first_byte(b)) {
            for (k, &b) in chunk.iter().enumerate() {
                // Each of those bytes is ASCII or a lead byte: a character starts there.
                let escaped = first_byte(b)
                    && text[at + k..]
                        .chars()
                        .next()
                        .is_some_and(|c| needs_escape(c, EscapeMode::SingleLine));
                if escaped {
                    return Some(at + k);
                }
            }
        }
        at += chunk.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The byte search finds the first character the character scan finds, over every
    /// character that needs escaping and its neighbours in UTF-8 (same lead byte, other
    /// values), at every place around a 64-byte edge.
    #[test]
    fn the_first_escape_is_found_by_its_first_byte() {
        let near: Vec<char> = [
            '\u{0}', '\u{1f}', ' ', '\u{7e}', '\u{7f}', '\u{80}', '\u{9f}',
        ]
        .into_iter()
        .chain([
            '\u{a0}', '\u{bf}', '\u{61b}', '\u{61c}', '\u{61d}', '\u{600}', '\u{63f}',
        ])
        .chain([
            '\u{200d}', '\u{200e}', '\u{200f}', '\u{2010}', '\u{2026}', '\u{2027}',
        ])
        .chain([
            '\u{2028}', '\u{2029}', '\u{202a}', '\u{202e}', '\u{202f}', '\u{2065}',
        ])
        .chain([
            '\u{2066}', '\u{2069}', '\u{206a}', '\u{2000}', '\u{20ac}', '\u{2fff}',
        ])
        .chain(['é', '😀', 'a'])
        .collect();
        let by_chars = |t: &str| {
            t.char_indices()
                .find(|&(_, c)| needs_escape(c, EscapeMode::SingleLine))
        };
        for &c in &near {
            for &d in &near {
                for pad in 55..70 {
                    let text = format!("{}{c}{}{d}x", "a".repeat(pad), "…".repeat(pad % 3));
                    assert_eq!(
                        first_single_line_escape(&text),
                        by_chars(&text).map(|(i, _)| i),
                        "{text:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(escape_line("hello wörld 😀"), Cow::Borrowed(_)));
        assert!(matches!(escape_multiline("a\nb\tc"), Cow::Borrowed(_)));
    }

    #[test]
    fn controls_become_hex() {
        assert_eq!(escape_line("a\u{1b}[31mb\u{7}"), "a\\x1B[31mb\\x07");
        assert_eq!(escape_line("x\ny\rz\t"), "x\\x0Ay\\x0Dz\\x09");
        assert_eq!(
            escape_line("\u{7f}\u{80}\u{9b}\u{9f}"),
            "\\x7F\\x80\\x9B\\x9F"
        );
        assert_eq!(escape_line("\u{0}"), "\\x00");
    }

    #[test]
    fn multiline_keeps_line_breaks_and_tabs() {
        assert_eq!(escape_multiline("a\nb\tc"), "a\nb\tc");
        assert_eq!(escape_multiline("a\r\nb"), "a\nb");
        assert_eq!(escape_multiline("a\rb\u{1b}"), "a\\x0Db\\x1B");
        assert_eq!(escape_multiline("end\r"), "end\\x0D");
    }

    #[test]
    fn bidi_and_separators_become_code_points() {
        assert_eq!(escape_line("a\u{202E}b"), "a\\u{202E}b");
        assert_eq!(
            escape_multiline("\u{2066}\u{2069}\u{200E}\u{200F}\u{61C}\u{2028}\u{2029}"),
            "\\u{2066}\\u{2069}\\u{200E}\\u{200F}\\u{061C}\\u{2028}\\u{2029}"
        );
    }

    #[test]
    fn non_controls_are_untouched() {
        // U+00A0 is just past C1; U+200B is invisible but harmless.
        assert_eq!(escape_line("\u{a0}\u{200b}é"), "\u{a0}\u{200b}é");
    }

    fn forbidden(c: char, mode: EscapeMode) -> bool {
        needs_escape(c, mode)
    }

    #[test]
    fn json_for_terminal_spells_out_what_json_writers_leave_raw() {
        let json = serde_json::to_string("a\u{1b}\u{7}\u{9b}2J\u{7f}\u{202e}é").unwrap();
        assert!(json.contains('\u{9b}'), "serde_json leaves C1 raw: {json}");
        let safe = json_for_terminal(json);
        assert_eq!(safe, r#""a\u001b\u0007\u009b2J\u007f\u202eé""#);
        let plain = r#"{"a":"b"}"#.to_string();
        assert_eq!(json_for_terminal(plain.clone()), plain);
    }

    proptest! {
        #[test]
        fn json_for_terminal_keeps_the_value(s in any::<String>()) {
            let json = serde_json::to_string(&serde_json::json!({"k": s.clone(), "n": [s.clone()]})).unwrap();
            let safe = json_for_terminal(json);
            prop_assert!(!safe.chars().any(|c| needs_escape(c, EscapeMode::SingleLine)));
            let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
            prop_assert_eq!(back["k"].as_str(), Some(s.as_str()));
            prop_assert_eq!(back["n"][0].as_str(), Some(s.as_str()));
        }

        #[test]
        fn output_never_contains_controls(s in any::<String>()) {
            let line = escape_line(&s);
            prop_assert!(!line.chars().any(|c| forbidden(c, EscapeMode::SingleLine)));
            let multi = escape_multiline(&s);
            prop_assert!(!multi.chars().any(|c| forbidden(c, EscapeMode::MultiLine)));
            prop_assert!(!multi.contains('\r'));
        }

        #[test]
        fn a_stream_in_pieces_escapes_as_the_whole(s in "[\\x00-\\x1f\\x7f-\\x9f\u{202a}-\u{202e}a\n\r]{0,40}", cuts in proptest::collection::vec(0usize..40, 0..6)) {
            let chars: Vec<char> = s.chars().collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(chars.len())).collect();
            cuts.sort();
            let mut stream = MultiLineStream::default();
            let mut out = String::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([chars.len()]) {
                let piece: String = chars[from..cut].iter().collect();
                out.push_str(&stream.push(&piece));
                from = cut;
            }
            out.push_str(&stream.finish());
            prop_assert_eq!(out, escape_multiline(&s).into_owned());
        }

        #[test]
        fn controls_heavy_input(s in "[\\x00-\\x1f\\x7f-\\x9f\u{202a}-\u{202e}a\n\r]{0,40}") {
            let line = escape_line(&s);
            prop_assert!(!line.chars().any(|c| is_control(c) || is_bidi_or_separator(c)));
            prop_assert_eq!(s.chars().filter(|c| *c == '\n').count(),
                escape_multiline(&s).chars().filter(|c| *c == '\n').count());
        }
    }
}
