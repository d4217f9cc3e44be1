//! `@[label](dsh-session:…)` mentions (SPEC §2): formatting, and a hand-written linear-time
//! scanner that rewrites mentions and bare URIs to readable `@label` text.
//!
//! The scanner reproduces the left-to-right semantics of one global regular expression with two
//! alternatives (an explicit Markdown mention, else a bare URI) without its worst cases. Two
//! observations keep it linear:
//!
//! * A label is tokenized deterministically (a backslash always starts a two-character escape),
//!   and any later `@[` found inside a scanned label starts at a token boundary of that same
//!   scan, so its label ends (or fails) exactly where the earlier one did. One failed attempt
//!   therefore rules out every attempt whose label starts before its stopping point.
//! * The end of a URI tail is the first whitespace or `)` at or after its start, so one scan
//!   answers every later tail that starts before that stop.

use super::error::Result;
use super::uri::{decode_session_reference_uri, is_payload_byte, SESSION_URI_PREFIX};
use serde::Serialize;
use std::ops::Range;

/// One reference found by [`parse_session_reference_text`], in order of appearance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParsedReference {
    /// `sessionId`: the decoded id.
    #[serde(rename = "sessionId")]
    pub session_id: String,
    /// The label: an explicit mention's LABEL with its escapes removed, or a bare URI's id.
    pub label: String,
}

/// The readable text (`@label` in place of each mention) and the references in it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ParsedText {
    /// The text with each mention and bare URI replaced by `@` + its label.
    pub text: String,
    /// One entry per match, in order of appearance; duplicates kept (the service dedupes).
    pub references: Vec<ParsedReference>,
}

/// `@[<label>](<uri>)` with the label (default: the id) escaped so that it parses back exactly.
pub fn format_session_reference_mention(id: &str, label: Option<&str>) -> String {
    let label = label.unwrap_or(id);
    let uri = super::uri::encode_session_reference_uri(id);
    let mut out = String::with_capacity(label.len() + uri.len() + 4);
    out.push_str("@[");
    for ch in label.chars() {
        if matches!(ch, '\\' | ']') {
            out.push('\\');
        }
        out.push(ch);
    }
    out.push_str("](");
    out.push_str(&uri);
    out.push(')');
    out
}

/// Replaces every explicit mention and bare canonical URI with `@label` and lists the
/// references in order of appearance (no dedupe). Any matched URI that does not decode strictly
/// fails the whole parse with `SESSION_REFERENCE_INVALID_REFERENCE`.
pub fn parse_session_reference_text(text: &str) -> Result<ParsedText> {
    let mut scanner = Scanner::new(text);
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut references = Vec::new();
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        // Both alternatives start with an ASCII byte, so stepping bytewise never matches inside a
        // multi-byte character.
        let found = match bytes[at] {
            b'@' => scanner.explicit_at(at),
            b'd' => scanner.bare_at(at),
            _ => None,
        };
        let Some(found) = found else {
            at += 1;
            continue;
        };
        let session_id = decode_session_reference_uri(&text[found.uri])?;
        let label = match found.label {
            Some(range) => unescape_label(&text[range]),
            None => session_id.clone(),
        };
        out.push_str(&text[copied..at]);
        out.push('@');
        out.push_str(&label);
        references.push(ParsedReference { session_id, label });
        at = found.end;
        copied = at;
    }
    out.push_str(&text[copied..]);
    Ok(ParsedText {
        text: out,
        references,
    })
}

/// The byte ranges of every explicit mention and bare canonical URI in `text`, as
/// [`parse_session_reference_text`] finds them (whatever their URIs decode to): text inside them
/// is not the person's own prose (a label is a session's title), so callers that look for
/// `@path` tokens skip it.
pub fn session_reference_spans(text: &str) -> Vec<Range<usize>> {
    let mut scanner = Scanner::new(text);
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let found = match bytes[at] {
            b'@' => scanner.explicit_at(at),
            b'd' => scanner.bare_at(at),
            _ => None,
        };
        match found {
            Some(found) => {
                spans.push(at..found.end);
                at = found.end;
            }
            None => at += 1,
        }
    }
    spans
}

/// Characters of the ECMAScript `\s` class.
pub fn is_js_whitespace(ch: char) -> bool {
    matches!(
        ch,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// Line terminators, which a backslash cannot escape inside a label.
fn is_line_terminator(ch: char) -> bool {
    matches!(ch, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// Drops the backslash in front of each escaped character.
fn unescape_label(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut escaped = false;
    for ch in raw.chars() {
        if ch == '\\' && !escaped {
            escaped = true;
            continue;
        }
        escaped = false;
        out.push(ch);
    }
    out
}

/// `](dsh-session:`: what must follow the closing bracket of a label.
const LABEL_TO_URI: &str = "](dsh-session:";

struct Found {
    /// The raw (escaped) label of an explicit mention; `None` for a bare URI.
    label: Option<Range<usize>>,
    uri: Range<usize>,
    end: usize,
}

enum Label {
    /// The label closes with the `]` at this byte index.
    Closed(usize),
    /// The label cannot close: the scan stopped failing at this byte index.
    Open(usize),
}

struct Scanner<'t> {
    text: &'t str,
    /// Explicit attempts whose label starts at or before this index are known to fail.
    explicit_dead_through: Option<usize>,
    /// `(start, stop)` of the last tail scan: every tail starting in `start..=stop` stops there.
    tail: Option<(usize, usize)>,
}

impl<'t> Scanner<'t> {
    fn new(text: &'t str) -> Self {
        Scanner {
            text,
            explicit_dead_through: None,
            tail: None,
        }
    }

    /// Alternative A at `at` (which holds `@`).
    fn explicit_at(&mut self, at: usize) -> Option<Found> {
        let bytes = self.text.as_bytes();
        if bytes.get(at + 1) != Some(&b'[') {
            return None;
        }
        let label_start = at + 2;
        if self
            .explicit_dead_through
            .is_some_and(|dead| label_start <= dead)
        {
            return None;
        }
        let close = match self.scan_label(label_start) {
            Label::Closed(close) => close,
            Label::Open(stop) => {
                self.explicit_dead_through = Some(stop);
                return None;
            }
        };
        if self.text[close..].starts_with(LABEL_TO_URI) {
            let tail_start = close + LABEL_TO_URI.len();
            let stop = self.tail_stop(tail_start);
            if bytes.get(stop) == Some(&b')') {
                return Some(Found {
                    label: Some(label_start..close),
                    uri: close + 2..stop,
                    end: stop + 1,
                });
            }
        }
        self.explicit_dead_through = Some(close);
        None
    }

    /// Alternative B at `at`: `dsh-session:` and one or more payload bytes, greedy.
    fn bare_at(&self, at: usize) -> Option<Found> {
        if !self.text[at..].starts_with(SESSION_URI_PREFIX) {
            return None;
        }
        let bytes = self.text.as_bytes();
        let payload_start = at + SESSION_URI_PREFIX.len();
        let payload_len = bytes[payload_start..]
            .iter()
            .take_while(|b| is_payload_byte(**b))
            .count();
        (payload_len > 0).then(|| Found {
            label: None,
            uri: at..payload_start + payload_len,
            end: payload_start + payload_len,
        })
    }

    fn scan_label(&self, start: usize) -> Label {
        let bytes = self.text.as_bytes();
        let mut i = start;
        loop {
            match bytes.get(i) {
                None => return Label::Open(i),
                Some(b']') => return Label::Closed(i),
                Some(b'\\') => match self.text[i + 1..].chars().next() {
                    Some(next) if !is_line_terminator(next) => i += 1 + next.len_utf8(),
                    _ => return Label::Open(i),
                },
                // Continuation bytes are never `]` or `\`, so a bytewise step is safe.
                Some(_) => i += 1,
            }
        }
    }

    /// The index of the first whitespace or `)` at or after `start` (the text length if none).
    fn tail_stop(&mut self, start: usize) -> usize {
        if let Some((from, stop)) = self.tail {
            if (from..=stop).contains(&start) {
                return stop;
            }
        }
        let stop = self.text[start..]
            .char_indices()
            .find(|&(_, ch)| ch == ')' || is_js_whitespace(ch))
            .map_or(self.text.len(), |(offset, _)| start + offset);
        self.tail = Some((start, stop));
        stop
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::error::ErrorCode;

    fn parse(text: &str) -> (String, Vec<(String, String)>) {
        let parsed = parse_session_reference_text(text).unwrap();
        let refs = parsed
            .references
            .into_iter()
            .map(|r| (r.session_id, r.label))
            .collect();
        (parsed.text, refs)
    }

    #[test]
    fn formats_and_escapes_labels() {
        assert_eq!(
            format_session_reference_mention("target", None),
            "@[target](dsh-session:InRhcmdldCI)"
        );
        assert_eq!(
            format_session_reference_mention("target", Some("a]b\\c[d")),
            "@[a\\]b\\\\c[d](dsh-session:InRhcmdldCI)"
        );
    }

    #[test]
    fn explicit_and_bare() {
        let (text, refs) = parse("hi @[a \\] b](dsh-session:InRhcmdldCI) dsh-session:IiI!");
        assert_eq!(text, "hi @a ] b @!");
        assert_eq!(
            refs,
            vec![
                ("target".to_string(), "a ] b".to_string()),
                (String::new(), String::new())
            ]
        );
    }

    #[test]
    fn escaped_line_terminator_ends_the_label_attempt() {
        // `\` + newline cannot be part of a label, so the explicit form fails and the bare URI
        // inside is picked up on its own.
        let (text, refs) = parse("@[a\\\nb](dsh-session:InRhcmdldCI)");
        assert_eq!(text, "@[a\\\nb](@target)");
        assert_eq!(refs.len(), 1);
    }

    #[test]
    fn tail_stops_at_js_whitespace() {
        for ws in ['\u{feff}', '\u{a0}', '\u{3000}', '\u{b}'] {
            let input = format!("@[x](dsh-session:InRhcmdldCI{ws})");
            let (text, refs) = parse(&input);
            assert_eq!(text, format!("@[x](@target{ws})"));
            assert_eq!(refs.len(), 1);
        }
        // U+0085 is Unicode whitespace but not JavaScript whitespace: it stays in the tail.
        let err = parse_session_reference_text("@[x](dsh-session:InRhcmdldCI\u{85})").unwrap_err();
        assert_eq!(err.kind(), ErrorCode::InvalidReference);
    }

    #[test]
    fn nested_attempts_inside_a_failed_label() {
        // `[` is an ordinary label character, so the outer attempt wins.
        let (text, refs) = parse("@[@[x](dsh-session:InRhcmdldCI)");
        assert_eq!(text, "@@[x");
        assert_eq!(refs, vec![("target".to_string(), "@[x".to_string())]);
        // The outer attempt fails after its `]`, and so does the inner one that shares it.
        let (text, refs) = parse("@[a @[b]c](dsh-session:InRhcmdldCI)");
        assert_eq!(text, "@[a @[b]c](@target)");
        assert_eq!(refs, vec![("target".to_string(), "target".to_string())]);
    }
}
