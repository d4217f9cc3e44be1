//! A packed chunk row's `data`, checked the way serde decodes it (not kept raw, unlike an
//! event's).
//!
//! Purpose: `text-chunks`, `reasoning-chunks` and `tool-call-chunks` rows hold one member per
//! element of their `texts` or `args` array, and the reader needs only that count. Their `dt`
//! arrays are read sixteen bytes at a time while they hold short plain integers
//! ([`short_int_run`]), and their string arrays in one block loop that passes the canonical
//! `","` between elements without leaving it (`string_body.rs`).
//! Invariant: the count is `Some` only for data serde decodes as the row's type: no repeated
//! key, `dt` of `i64`s, strings or `null` where serde wants them, other fields decodable values
//! ([`super::cursor::VALUE_DEPTH`]); `,,`, a leading zero or `-0` in `dt` falls back.
//! Proof: `skim::tests` (`packed_arrays_agree_with_serde_at_every_alignment`: rows built from
//! valid, invalid and unusual pieces at every alignment, each compared with serde) and
//! `tests/session/reliability_skim.rs` (`regression_negative_zero_in_a_packed_row`,
//! `regression_out_of_range_number_in_a_packed_row`).

use super::cursor::{ArrayStart, Cursor, VALUE_DEPTH};
use super::simd::{digit_mask, eq_mask, Wide};
use super::string_body::AfterQuote;
use crate::session::format::PackedKind;

impl Cursor<'_> {
    /// A packed row's `data`, checked the way serde decodes it; returns its member count.
    pub(super) fn packed_data(&mut self, kind: PackedKind) -> Option<u64> {
        self.expect(b'{')?;
        // Keys seen so far (serde rejects a repeated field); more than a row ever has falls back.
        let mut seen: [&[u8]; 8] = [b""; 8];
        let mut seen_len = 0;
        let mut texts = None;
        let mut args = None;
        self.ws();
        if self.peek()? == b'}' {
            return None;
        }
        loop {
            self.ws();
            let key = self.simple_string()?;
            if seen_len == seen.len() || seen[..seen_len].contains(&key) {
                return None;
            }
            seen[seen_len] = key;
            seen_len += 1;
            self.ws();
            self.expect(b':')?;
            self.ws();
            match key {
                b"dt" => self.int_array()?,
                b"texts" => texts = self.string_array_or_null()?,
                b"args" => args = self.string_array_or_null()?,
                b"id" | b"name" => self.string_or_null()?,
                _ => self.value(VALUE_DEPTH, true)?,
            }
            self.ws();
            match self.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
        match kind {
            PackedKind::ToolCall => args,
            PackedKind::Text | PackedKind::Reasoning => texts,
        }
    }

    /// `[i64, …]`, as a packed row's `dt`.
    fn int_array(&mut self) -> Option<()> {
        if let ArrayStart::Empty = self.open_array(false)? {
            return Some(());
        }
        loop {
            // An element starts here. Runs of short plain integers go sixteen bytes at a time.
            if let Some(block) = self.b.get(self.i..self.i + 16) {
                let taken = short_int_run(block.try_into().ok()?)?;
                if taken > 0 {
                    self.i += taken;
                    continue;
                }
            }
            self.int()?;
            match self.next()? {
                b',' => {}
                b']' => return Some(()),
                _ => {
                    // Whitespace around elements is rare; take the general path for it.
                    self.i -= 1;
                    self.ws();
                    match self.next()? {
                        b',' => {}
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            self.ws();
        }
    }

    /// `["…", …]` or `null`, as a packed row's `texts` or `args`; the element count.
    fn string_array_or_null(&mut self) -> Option<Option<u64>> {
        match self.open_array(true)? {
            ArrayStart::Null => return Some(None),
            ArrayStart::Empty => return Some(Some(0)),
            ArrayStart::Elements => {}
        }
        let mut count = 0u64;
        loop {
            self.expect(b'"')?;
            count += 1;
            // The canonical `","` between elements and the final `"]` are taken inside the scan.
            let mut closed = false;
            let mut passed = 0;
            self.strings(Some(&mut passed), Wide::detect(), |bytes, at| {
                if bytes.get(at + 1..at + 3) == Some(b",\"") {
                    count += 1;
                    AfterQuote::Next(at + 3)
                } else if bytes.get(at + 1) == Some(&b']') {
                    closed = true;
                    AfterQuote::End(at + 2)
                } else {
                    AfterQuote::End(at + 1)
                }
            })?;
            count += passed;
            if closed {
                return Some(Some(count));
            }
            self.ws();
            match self.next()? {
                b',' => {}
                b']' => return Some(Some(count)),
                _ => return None,
            }
            self.ws();
        }
    }

    fn string_or_null(&mut self) -> Option<()> {
        match self.next()? {
            b'n' => self.literal(b"ull"),
            b'"' => self.string_body(),
            _ => None,
        }
    }
}

/// For sixteen bytes at the start of an array element: how many bytes, up to and including the
/// last comma, hold nothing but short plain integers (`0` or `[1-9][0-9]*`), each followed by a
/// comma. `Some(0)` when the block does not start such a run (a sign, whitespace, a number with
/// no comma after it in the block: the caller reads one element the long way); `None` when the
/// run is invalid JSON (`,,` or a leading zero), which serde rejects too.
#[inline] // As it was inlined into `packed_data` while the skimmer was one file.
fn short_int_run(block: &[u8; 16]) -> Option<usize> {
    let digits = digit_mask(block);
    let commas = eq_mask(block, b',');
    let others = !(digits | commas) & 0xFFFF;
    let before_others = match others {
        0 => 0xFFFF,
        _ => (1u32 << others.trailing_zeros()) - 1,
    };
    let commas = commas & before_others;
    if commas == 0 || digits & 1 == 0 {
        return Some(0);
    }
    let last = 31 - commas.leading_zeros();
    let digits = digits & ((1u32 << last) - 1);
    if commas & (commas >> 1) != 0 {
        return None;
    }
    let starts = digits & !(digits << 1);
    let leading_zeros = eq_mask(block, b'0') & starts;
    if (leading_zeros << 1) & digits != 0 {
        return None;
    }
    // Each number lies between two commas of the block: at most 15 digits, within `i64`.
    Some(last as usize + 1)
}
