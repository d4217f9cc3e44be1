//! The cursor the skimmer reads a line with, and the parts of the grammar every record shares.
//!
//! Purpose: one forward pass over the bytes of a record: single tokens, keys and types (plain
//! ASCII strings), integers exactly as serde reads them into `u64` and `i64`, any JSON value
//! (iteratively, to a depth bound), the `surfaceOp` and `sourceEventSeqs` fields. Every method
//! answers `None` as soon as the bytes are not in the canonical layout it knows, and the caller
//! gives the line to serde then.
//! Invariant: a method that answers `Some` has consumed exactly a piece of JSON that serde
//! accepts where the record holds it (a float, `-0`, a leading zero or an integer out of range
//! is `None` where serde wants an integer; a value to be decoded holds only short integers and
//! at most [`VALUE_DEPTH`] containers); whitespace never includes `\n`, so no piece spans lines.
//! Proof: `skim::tests` (`canonical_lines_are_skimmed`, `anything_unusual_falls_back`),
//! `tests/session/reliability_skim.rs` and the fuzz target `fuzz/fuzz_targets/skim_vs_serde.rs`.
//!
//! The methods `skim_prefix` and the packed rows call per field are `#[inline]`: in a room of
//! their own they land in another codegen unit than their callers, and without the attribute
//! stop being inlined into them as they were while the skimmer was one file (the release
//! build's skim symbols were compared: the same functions stand alone, making the same calls,
//! at the same sizes but for `skim_prefix`'s register allocation).

use super::simd::short_plain;
use crate::session::format::SurfaceOp;

/// Depth serde allows for values it decodes (its recursion limit is 128); kept below it.
/// Such values (a packed row's `turn`, `step`, `index` and unknown fields) must also hold only
/// short integers: serde rejects numbers out of `f64` range there, which raw values keep.
pub(super) const VALUE_DEPTH: usize = 100;

/// How far [`Cursor::string_body`] and [`Cursor::simple_string`] look for the end of a short
/// plain string before they read it the long way (the block loop, the byte loop).
pub(super) const SHORT_BYTES: usize = 64;

/// Just past the closing quote of the string whose body starts at `bytes[start]`, when that
/// quote comes within [`SHORT_BYTES`] and every byte before it is printable ASCII other than a
/// backslash (such a body is what serde accepts without a check more). `None` for anything
/// else, or when fewer than sixteen bytes are left to load.
#[inline(always)]
pub(super) fn short_plain_end(bytes: &[u8], start: usize) -> Option<usize> {
    short_plain(bytes, start, SHORT_BYTES).map(|(_, end)| end)
}

/// A position in the bytes being skimmed: `b[i..]` is what is left to read.
pub(super) struct Cursor<'a> {
    pub(super) b: &'a [u8],
    pub(super) i: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    pub(super) fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.i += 1;
        Some(b)
    }

    pub(super) fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// JSON whitespace, except `\n`: a record never spans lines.
    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    pub(super) fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i.checked_add(word.len())?;
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// An ASCII string without escapes (keys, types); its bytes without the quotes.
    #[inline]
    pub(super) fn simple_string(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.i;
        if let Some(end) = short_plain_end(self.b, start) {
            self.i = end;
            return Some(&self.b[start..end - 1]);
        }
        let len = self.b[start..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b))?;
        if self.b[start + len] != b'"' {
            return None;
        }
        self.i = start + len + 1;
        Some(&self.b[start..start + len])
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.digit()?;
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.digit()?;
            self.digits();
        }
        Some(())
    }

    fn digit(&mut self) -> Option<()> {
        self.next()?.is_ascii_digit().then_some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
    }

    /// A non-negative integer that fits `u64`, in plain integer syntax.
    pub(super) fn uint(&mut self) -> Option<u64> {
        let bytes = self.b;
        let start = self.i;
        let mut end = start;
        while bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let digits = &bytes[start..end];
        // No digits, a leading zero, or a fraction or exponent (a float, which serde's integers
        // reject).
        if digits.is_empty()
            || (digits.len() > 1 && digits[0] == b'0')
            || matches!(bytes.get(end), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        let value = if digits.len() < 20 {
            // Nineteen digits always fit.
            digits
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'))
        } else {
            std::str::from_utf8(digits).ok()?.parse().ok()?
        };
        self.i = end;
        Some(value)
    }

    /// An integer that fits `i64`, in plain integer syntax.
    #[inline]
    pub(super) fn int(&mut self) -> Option<i64> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.i += 1;
        }
        let magnitude = self.uint()?;
        if negative {
            // serde_json reads `-0` as the float -0.0, which an `i64` rejects.
            if magnitude == 0 {
                return None;
            }
            0i64.checked_sub_unsigned(magnitude)
        } else {
            i64::try_from(magnitude).ok()
        }
    }

    /// Any JSON value, nested at most `max_depth` containers deep.
    ///
    /// `decoded`: the value will be decoded by serde (not kept raw), which also rejects numbers
    /// out of `f64` range; only short integers are accepted then.
    pub(super) fn value(&mut self, max_depth: usize, decoded: bool) -> Option<()> {
        // The open containers, innermost last: `true` for an object.
        let mut open = Nesting::default();
        loop {
            // A value starts here.
            self.ws();
            match self.next()? {
                b'{' => {
                    self.ws();
                    if self.peek()? == b'}' {
                        self.i += 1;
                    } else {
                        if open.len() >= max_depth {
                            return None;
                        }
                        open.push(true);
                        self.key()?;
                        continue;
                    }
                }
                b'[' => {
                    self.ws();
                    if self.peek()? == b']' {
                        self.i += 1;
                    } else {
                        if open.len() >= max_depth {
                            return None;
                        }
                        open.push(false);
                        continue;
                    }
                }
                b'"' => self.string_body()?,
                b't' => self.literal(b"rue")?,
                b'f' => self.literal(b"alse")?,
                b'n' => self.literal(b"ull")?,
                b'-' | b'0'..=b'9' if decoded => {
                    self.i -= 1;
                    let start = self.i;
                    self.int()?;
                    if self.i - start > 18 {
                        return None;
                    }
                }
                b'-' | b'0'..=b'9' => {
                    self.i -= 1;
                    self.number()?;
                }
                _ => return None,
            }
            // A value ended: close containers until one continues.
            loop {
                let Some(object) = open.last() else {
                    return Some(());
                };
                self.ws();
                match self.next()? {
                    b',' => {
                        if object {
                            self.ws();
                            self.key()?;
                        }
                        break;
                    }
                    b'}' if object => {
                        open.pop();
                    }
                    b']' if !object => {
                        open.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    /// An object key and its colon.
    fn key(&mut self) -> Option<()> {
        self.expect(b'"')?;
        self.string_body()?;
        self.ws();
        self.expect(b':')
    }

    #[inline]
    pub(super) fn surface_op(&mut self) -> Option<Option<SurfaceOp>> {
        match self.peek()? {
            b'n' => {
                self.literal(b"null")?;
                Some(None)
            }
            b'"' => (self.simple_string()? == b"append").then_some(Some(SurfaceOp::Append)),
            b'{' => {
                self.i += 1;
                let field = |c: &mut Self, name: &[u8]| -> Option<()> {
                    c.ws();
                    (c.simple_string()? == name).then_some(())?;
                    c.ws();
                    c.expect(b':')?;
                    c.ws();
                    Some(())
                };
                field(self, b"op")?;
                (self.simple_string()? == b"replace").then_some(())?;
                self.ws();
                self.expect(b',')?;
                field(self, b"start")?;
                let start = self.uint()?;
                self.ws();
                self.expect(b',')?;
                field(self, b"end")?;
                let end = self.uint()?;
                self.ws();
                self.expect(b'}')?;
                Some(Some(SurfaceOp::Replace { start, end }))
            }
            _ => None,
        }
    }

    /// The start of an array, or `null` when `nullable`: what follows.
    #[inline]
    pub(super) fn open_array(&mut self, nullable: bool) -> Option<ArrayStart> {
        if nullable && self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(ArrayStart::Null);
        }
        self.expect(b'[')?;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(ArrayStart::Empty);
        }
        Some(ArrayStart::Elements)
    }

    /// `[a, b, …]` with each element read by `element`; `null` when `nullable`.
    #[inline]
    fn array(
        &mut self,
        nullable: bool,
        mut element: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<Option<u64>> {
        match self.open_array(nullable)? {
            ArrayStart::Null => return Some(None),
            ArrayStart::Empty => return Some(Some(0)),
            ArrayStart::Elements => {}
        }
        let mut count = 0u64;
        loop {
            self.ws();
            element(self)?;
            count += 1;
            self.ws();
            match self.next()? {
                b',' => continue,
                b']' => return Some(Some(count)),
                _ => return None,
            }
        }
    }

    #[inline]
    pub(super) fn uint_array_or_null(&mut self) -> Option<Option<Vec<u64>>> {
        let mut values = Vec::new();
        let found = self.array(true, |c| {
            values.push(c.uint()?);
            Some(())
        })?;
        Some(found.map(|_| values))
    }
}

/// What [`Cursor::open_array`] found.
pub(super) enum ArrayStart {
    Null,
    /// `[]`, read whole.
    Empty,
    /// `[` and the first element next.
    Elements,
}

/// The containers a value has open, innermost last (`true` for an object): the first 128 levels
/// in a bit set on the stack, deeper ones (only hostile logs nest so far) in a vector, so a
/// record of ordinary depth allocates nothing.
#[derive(Default)]
struct Nesting {
    /// Bit `n`: whether level `n` (from 0) is an object, for the first 128 levels.
    shallow: u128,
    /// The levels past the first 128.
    deep: Vec<bool>,
    /// How many are open.
    len: usize,
}

impl Nesting {
    const SHALLOW: usize = 128;

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn push(&mut self, object: bool) {
        if self.len < Self::SHALLOW {
            let bit = 1u128 << self.len;
            if object {
                self.shallow |= bit;
            } else {
                self.shallow &= !bit;
            }
        } else {
            self.deep.push(object);
        }
        self.len += 1;
    }

    #[inline]
    fn last(&self) -> Option<bool> {
        match self.len {
            0 => None,
            n if n <= Self::SHALLOW => Some(self.shallow >> (n - 1) & 1 == 1),
            _ => self.deep.last().copied(),
        }
    }

    #[inline]
    fn pop(&mut self) {
        if self.len > Self::SHALLOW {
            self.deep.pop();
        }
        self.len = self.len.saturating_sub(1);
    }
}

#[cfg(test)]
mod nesting_tests {
    use super::Nesting;

    #[test]
    fn nesting_answers_like_a_stack_across_the_spill() {
        let mut nesting = Nesting::default();
        let mut model = Vec::new();
        // Pseudo-random pushes and pops well past the 128 levels kept on the stack.
        let mut x = 0x9e37_79b9_u32;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if x.is_multiple_of(3) && !model.is_empty() {
                model.pop();
                nesting.pop();
            } else {
                let object = x & 8 == 0;
                model.push(object);
                nesting.push(object);
            }
            assert_eq!(nesting.len(), model.len());
            assert_eq!(nesting.last(), model.last().copied());
        }
        assert!(model.len() > 128, "the walk reached the spilled levels");
    }
}
