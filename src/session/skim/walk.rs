//! A forward walk over the JSON objects of another agent's record line, for readers that keep a
//! few fields and pass over the rest without decoding it.
//!
//! Purpose: the records of Claude Code and Codex are mostly values their readers drop (tool
//! results stored twice, base64 images, thinking, encrypted reasoning); serde validates and
//! often copies every byte of them. [`Walk`] steps through an object key by key, gives the
//! strings and flags a reader keeps, and checks the values it skips with the skimmer's block
//! loop (`string_body.rs`), which reads a string sixty-four bytes at a time and decodes
//! nothing.
//!
//! Invariant: every method answers `None` for anything it does not vouch for, and the reader
//! then gives the line to serde, which stays the one definition of what the line holds. A
//! `Some` means the bytes consumed are JSON that serde accepts in that place: [`Walk::skip`] is
//! a value serde ignores or keeps raw (any depth, any number), [`Walk::skip_decoded`] one serde
//! decodes into a buffered value (at most [`VALUE_DEPTH`] deep, only short integers, as the
//! skimmer's decoded values); a string ([`Walk::string_or_null`]) is valid UTF-8 with valid
//! escapes and no surrogate escape, and its text is exactly what serde decodes. Keys are plain
//! ASCII without escapes (a key with an escape is `None`). Proof: the unit tests below (each
//! accepted piece against serde) and the differential tests of the readers built on it
//! (`tests/session/reliability_agent_skim.rs`, `fuzz/fuzz_targets/agent_skim.rs`).

use super::cursor::{Cursor, SHORT_BYTES, VALUE_DEPTH};
use super::simd::short_plain;
use std::borrow::Cow;

/// A position in one line of JSON: `bytes[i..]` is what is left to read.
pub struct Walk<'a> {
    c: Cursor<'a>,
}

impl<'a> Walk<'a> {
    /// A walk from the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Walk<'a> {
        Walk {
            c: Cursor { b: bytes, i: 0 },
        }
    }

    /// The next byte that is not whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        self.c.ws();
        self.c.peek()
    }

    /// An object's `{`: `Some(true)` when a member follows, `Some(false)` for `{}` (read whole).
    pub fn object(&mut self) -> Option<bool> {
        self.c.ws();
        self.c.expect(b'{')?;
        self.c.ws();
        if self.c.peek()? == b'}' {
            self.c.i += 1;
            return Some(false);
        }
        Some(true)
    }

    /// A member's key (plain ASCII, no escape) and its colon.
    pub fn key(&mut self) -> Option<&'a [u8]> {
        self.c.ws();
        let key = self.c.simple_string()?;
        self.c.ws();
        self.c.expect(b':')?;
        self.c.ws();
        Some(key)
    }

    /// After a member's value: `Some(true)` at `,` (another member follows), `Some(false)` at
    /// `}` (the object ends).
    pub fn member_end(&mut self) -> Option<bool> {
        self.c.ws();
        match self.c.next()? {
            b',' => Some(true),
            b'}' => Some(false),
            _ => None,
        }
    }

    /// An array's `[`: `Some(true)` when an element follows, `Some(false)` for `[]` (read whole).
    pub fn array(&mut self) -> Option<bool> {
        self.c.ws();
        self.c.expect(b'[')?;
        self.c.ws();
        if self.c.peek()? == b']' {
            self.c.i += 1;
            return Some(false);
        }
        Some(true)
    }

    /// After an element: `Some(true)` at `,`, `Some(false)` at `]`.
    pub fn element_end(&mut self) -> Option<bool> {
        self.c.ws();
        match self.c.next()? {
            b',' => Some(true),
            b']' => Some(false),
            _ => None,
        }
    }

    /// `null`, read whole; `false` (nothing consumed) for anything else.
    pub fn null(&mut self) -> bool {
        self.c.ws();
        self.c.peek() == Some(b'n') && self.c.literal(b"null").is_some()
    }

    /// A string (its decoded text, borrowed when it has no escape) or `null`.
    pub fn string_or_null(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// A string's decoded text, borrowed when it has no escape.
    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        self.c.ws();
        let open = self.c.i;
        self.c.expect(b'"')?;
        // A short plain body (most ids, times, types) is its own text: no escape to decode,
        // every byte ASCII.
        if let Some((text, end)) = short_plain(self.c.b, self.c.i, SHORT_BYTES) {
            self.c.i = end;
            return Some(Cow::Borrowed(text));
        }
        self.c.long_string_body()?;
        let quoted = &self.c.b[open..self.c.i];
        let body = &quoted[1..quoted.len() - 1];
        if memchr::memchr(b'\\', body).is_none() {
            return std::str::from_utf8(body).ok().map(Cow::Borrowed);
        }
        // Valid escapes without surrogates (checked above): serde decodes it.
        serde_json::from_slice::<String>(quoted)
            .ok()
            .map(Cow::Owned)
    }

    /// `true`, `false` or `null`.
    pub fn bool_or_null(&mut self) -> Option<Option<bool>> {
        self.c.ws();
        match self.c.peek()? {
            b't' => self.c.literal(b"true").map(|()| Some(true)),
            b'f' => self.c.literal(b"false").map(|()| Some(false)),
            b'n' => self.c.literal(b"null").map(|()| None),
            _ => None,
        }
    }

    /// Any value, checked as serde checks one it ignores or keeps raw; its bytes.
    pub fn skip(&mut self) -> Option<&'a [u8]> {
        self.c.ws();
        let start = self.c.i;
        self.c.value(usize::MAX, false)?;
        Some(&self.c.b[start..self.c.i])
    }

    /// Any value, checked as serde checks one it decodes (into a buffered value, as an untagged
    /// enum does): at most [`VALUE_DEPTH`] containers deep, numbers only short integers.
    pub fn skip_decoded(&mut self) -> Option<()> {
        self.c.value(VALUE_DEPTH, true)
    }

    /// Where the walk stands: the index of the next byte to read.
    pub fn position(&self) -> usize {
        self.c.i
    }

    /// Goes back to `at`, a [`Walk::position`] this walk stood at before: the bytes after it
    /// are read again.
    pub fn rewind(&mut self, at: usize) {
        debug_assert!(at <= self.c.i);
        self.c.i = at.min(self.c.i);
    }

    /// The bytes from `start` (a [`Walk::position`] this walk stood at before) to where it
    /// stands now.
    pub fn since(&self, start: usize) -> &'a [u8] {
        &self.c.b[start.min(self.c.i)..self.c.i]
    }

    /// Whether only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.c.ws();
        self.c.i == self.c.b.len()
    }

    /// Where the line ends, when only blanks are left before a newline: the newline's index.
    /// (The walk never passes a newline: [`Cursor::ws`] stops at one and a string may not hold
    /// one raw, so every byte read before it is of the same line.)
    pub fn line_end(&mut self) -> Option<usize> {
        self.c.ws();
        (self.c.peek()? == b'\n').then_some(self.c.i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_decode_as_serde_does_and_escapes_of_surrogates_fall_back() {
        for (json, text) in [
            (r#""plain""#, Some("plain")),
            (r#""é \u00e9 \n \" \\ \/""#, Some("é é \n \" \\ /")),
            (r#""\ud83d\ude00""#, None),
            (r#""\x""#, None),
            ("\"tab\tinside\"", None),
            (r#""unterminated"#, None),
        ] {
            let mut walk = Walk::new(json.as_bytes());
            let got = walk.string();
            assert_eq!(got.as_deref(), text, "{json}");
            if let Some(text) = text {
                assert_eq!(serde_json::from_str::<String>(json).unwrap(), text);
                assert!(walk.at_end());
            }
        }
        let mut walk = Walk::new(b"\"a\xffb\"");
        assert_eq!(walk.string(), None);
    }

    #[test]
    fn skipping_agrees_with_serde() {
        for json in [
            r#"{"a":[1,2.5e300,-0,{"b":null}],"c":"x"}"#,
            r#"[[[[]]]]"#,
            r#"1e999"#,
            r#"{"a":1,}"#,
            r#"[1 2]"#,
            r#"{"k\u0065y":true}"#,
        ] {
            let mut walk = Walk::new(json.as_bytes());
            let ignored = walk.skip().is_some() && walk.at_end();
            let serde_ignored = serde_json::from_str::<serde::de::IgnoredAny>(json).is_ok();
            if ignored {
                assert!(serde_ignored, "{json}");
            }
            let mut walk = Walk::new(json.as_bytes());
            if walk.skip_decoded().is_some() && walk.at_end() {
                assert!(
                    serde_json::from_str::<serde_json::Value>(json).is_ok(),
                    "{json}"
                );
            }
        }
        // A number serde cannot decode is only skipped where serde ignores it.
        let mut walk = Walk::new(b"1e999");
        assert!(walk.skip_decoded().is_none());
        assert!(Walk::new(b"1e999").skip().is_some());
    }

    #[test]
    fn objects_and_arrays_step_member_by_member() {
        let mut walk = Walk::new(br#" { "a" : [ ] , "b":{}, "c":[1,{"d":true}] } "#);
        assert_eq!(walk.object(), Some(true));
        assert_eq!(walk.key(), Some(&b"a"[..]));
        assert_eq!(walk.array(), Some(false));
        assert_eq!(walk.member_end(), Some(true));
        assert_eq!(walk.key(), Some(&b"b"[..]));
        assert_eq!(walk.object(), Some(false));
        assert_eq!(walk.member_end(), Some(true));
        assert_eq!(walk.key(), Some(&b"c"[..]));
        assert_eq!(walk.skip(), Some(&br#"[1,{"d":true}]"#[..]));
        assert_eq!(walk.member_end(), Some(false));
        assert!(walk.at_end());
    }
}
