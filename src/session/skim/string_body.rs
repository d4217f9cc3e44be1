//! String bodies, scanned sixty-four bytes at a time from the block's bit masks.
//!
//! Purpose: strings are most of a log's bytes (tool output, chunk texts), so the scan after an
//! opening quote classifies a block at once (`simd.rs`) and decides from the masks alone when
//! the block is plain text whose only escapes are `\n`, `\"`, `\\`, `\t` and `\r`
//! ([`plain_block`]); otherwise
//! it visits each flagged byte (quote, backslash, control, non-ASCII) from the mask, and over an
//! array's elements passes a run of plain strings separated by `","` whole ([`separated_run`]).
//! Invariant: a body is accepted only if serde accepts it as a string: every escape valid
//! ([`escape_len`]; surrogates are left to serde), no raw control character, valid UTF-8
//! ([`utf8_len`]); the fast steps answer `None` for anything they do not decide, and the
//! byte-by-byte loop takes the block then. The masks are the same bits with SSE2 and
//! AVX-512BW, so the path taken never changes the answer.
//! Proof: `skim::tests` (`string_bodies_agree_with_serde_at_every_alignment`: escapes, quotes,
//! controls and non-ASCII bytes across 131 alignments of a 64-byte edge, each compared with
//! serde), `simd::tests` (the masks) and `tests/session/reliability_skim.rs`.

use super::cursor::{short_plain_end, Cursor};
use super::simd::{self, eq_mask, string_masks, MaskedScan, StringMasks, Wide};

impl<'a> Cursor<'a> {
    /// The rest of a string after its opening quote: escapes checked, no raw control characters,
    /// valid UTF-8. On a CPU with AVX-512BW the block loop runs in a frame compiled for it, so
    /// its masks are computed inline ([`simd::with_cpu_masks`]).
    ///
    /// Most strings of a record are short (keys, ids, times, types: three in four under 16
    /// bytes in a heavy Claude Code session) and plain. Those are answered here, sixteen bytes at
    /// a time with SSE2 (the x86_64 baseline, so inlined into the caller), without the call into
    /// the wide frame and its setup, which cost more than such a string's bytes; a string whose
    /// first flagged byte is anything but its closing quote, or that goes on past
    /// [`SHORT_BYTES`](super::cursor::SHORT_BYTES), is left to the block loop from its start.
    pub(super) fn string_body(&mut self) -> Option<()> {
        if let Some(end) = short_plain_end(self.b, self.i) {
            self.i = end;
            return Some(());
        }
        self.long_string_body()
    }

    /// [`Cursor::string_body`] without its short step: for a caller that tried that step
    /// already (`Walk::string`, which keeps the short body's text) and must not pay it twice.
    pub(super) fn long_string_body(&mut self) -> Option<()> {
        simd::with_cpu_masks(StringBody(self))
    }

    /// Scans string bodies from just after an opening quote. At each closing quote `after`
    /// decides: the scan either ends, or goes on with the body of a next string (an array's
    /// elements) without leaving the block loop.
    ///
    /// Sixty-four bytes are classified at once; every flagged byte of the block (quote,
    /// backslash, control, non-ASCII) is then handled from the block's bit mask, so long text
    /// costs a few instructions per block and escape-dense text (code, logs) does not pay a
    /// reload per flagged byte.
    ///
    /// With `elements`, the scan is over an array's elements, and a block holding nothing but
    /// plain strings separated by `","` is checked as a whole (see [`separated_run`]); each
    /// element it passes is counted there, as `after` would have. `wide`: the masks come from the
    /// widest instructions the CPU has ([`Wide::detect`]: AVX-512BW, AVX2 or SSE2).
    #[inline(always)]
    pub(super) fn strings(
        &mut self,
        mut elements: Option<&mut u64>,
        wide: Wide,
        mut after: impl FnMut(&'a [u8], usize) -> AfterQuote,
    ) -> Option<()> {
        let bytes = self.b;
        let mut i = self.i;
        // Bytes before `skip` were consumed already (an escape, a multi-byte character, the
        // separator between two strings).
        let mut skip = i;
        let mut padded = [b' '; 64];
        loop {
            let (block, full): (&[u8; 64], bool) = match bytes.get(i..i + 64) {
                Some(block) => (block.try_into().ok()?, true),
                None => {
                    // The last bytes, padded with spaces (never flagged).
                    let rest = bytes.get(i..).filter(|rest| !rest.is_empty())?;
                    padded[..rest.len()].copy_from_slice(rest);
                    (&padded, false)
                }
            };
            let live = bits_from(skip - i);
            simd::prefetch(bytes, i + PREFETCH_AHEAD);
            let masks = string_masks(block, wide);
            if elements.is_none() {
                match plain_block(masks, live) {
                    Some(Some(at)) => {
                        self.i = i + at as usize + 1;
                        return Some(());
                    }
                    Some(None) if full => {
                        i += 64;
                        skip = skip.max(i);
                        continue;
                    }
                    Some(None) => return None,
                    None => {}
                }
            }
            let mut mask = masks.special() & live;
            if let Some(count) = elements.as_deref_mut() {
                if let Some((passed, rest)) = separated_run(block, mask) {
                    *count += u64::from(passed);
                    mask = rest;
                }
            }
            while mask != 0 {
                let at = i + mask.trailing_zeros() as usize;
                mask &= mask - 1;
                if at < skip {
                    continue;
                }
                match bytes[at] {
                    b'"' => match after(bytes, at) {
                        AfterQuote::Next(start) => skip = start,
                        AfterQuote::End(end) => {
                            self.i = end;
                            return Some(());
                        }
                    },
                    b'\\' => skip = at + escape_len(bytes, at)?,
                    0..=0x1F => return None,
                    _ => skip = at + utf8_len(bytes, at)?,
                }
            }
            if !full {
                return None;
            }
            i += 64;
            skip = skip.max(i);
        }
    }
}

/// How far ahead of the block being scanned its bytes are asked for: a page. A long string of
/// a mapped file is read from memory, not from the caches, and the CPU's own prefetcher stops
/// at each page's end, so each new page began with a wait (in a 60 MB first read, the string
/// loop spent most of its time on its loads; asking a page ahead took about 1 ms of 17).
const PREFETCH_AHEAD: usize = 4096;

/// The body of one string as a [`MaskedScan`], so that its block loop is compiled into the
/// AVX-512BW frame where the CPU has it.
struct StringBody<'c, 'a>(&'c mut Cursor<'a>);

impl MaskedScan for StringBody<'_, '_> {
    type Output = Option<()>;

    #[inline(always)]
    fn scan(self, wide: Wide) -> Option<()> {
        self.0.strings(None, wide, |_, at| AfterQuote::End(at + 1))
    }
}

/// What follows a closing quote in [`Cursor::strings`].
pub(super) enum AfterQuote {
    /// Another string's body starts at this index.
    Next(usize),
    /// The scan ends; the cursor moves to this index.
    End(usize),
}

/// The length of the escape sequence at `bytes[at]` (a backslash), if valid.
#[inline(always)]
fn escape_len(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(2),
        b'u' => {
            let hex = bytes.get(at + 2..at + 6)?;
            let mut unit = 0u32;
            for &h in hex {
                unit = unit * 16 + (h as char).to_digit(16)?;
            }
            // Surrogate pairs have rules of their own: leave them to serde.
            (!(0xD800..=0xDFFF).contains(&unit)).then_some(6)
        }
        _ => None,
    }
}

/// The length of the UTF-8 character starting at `bytes[at]` (a non-ASCII byte), if valid.
fn utf8_len(bytes: &[u8], at: usize) -> Option<usize> {
    let width = match bytes[at] {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    };
    let end = (at + 4).min(bytes.len());
    let valid = match std::str::from_utf8(&bytes[at..end]) {
        Ok(text) => text.len(),
        Err(e) => e.valid_up_to(),
    };
    // `valid` covers the first character whole only if it decoded.
    (valid >= width).then_some(width)
}

/// The block step of an array scan ([`Cursor::strings`] with `elements`): `flagged`, the block's
/// flagged bytes from where the scan stands (inside a string), holding only quotes, which
/// alternate closing and opening. When every closing quote but possibly the last one is
/// followed by exactly `,` and an opening quote, that stretch is a run of plain string elements:
/// the answer is how many elements it closes and the bits left to the byte-by-byte loop (the
/// last quote, if it closes, whatever follows it). `None`, and the loop takes the whole block,
/// for anything else (an escape, a control or non-ASCII byte, other separators, the array's
/// end).
#[inline(always)]
fn separated_run(block: &[u8; 64], flagged: u64) -> Option<(u32, u64)> {
    let quotes = eq_mask64(block, b'"') & flagged;
    if quotes != flagged || quotes == 0 {
        return None;
    }
    // Bit k: an odd number of quotes at or before k, i.e. the quote at k (if any) closes.
    let mut odd = quotes;
    for shift in [1, 2, 4, 8, 16, 32] {
        odd ^= odd << shift;
    }
    let closing = quotes & odd;
    let opening = quotes & !odd;
    let last = 1u64 << (63 - quotes.leading_zeros());
    let tail = closing & last;
    let paired = closing & !tail;
    let separated = opening == paired << 2 && (paired << 1) & !eq_mask64(block, b',') == 0;
    separated.then_some((paired.count_ones(), tail))
}

/// [`eq_mask`] over sixty-four bytes.
#[inline(always)]
fn eq_mask64(block: &[u8; 64], byte: u8) -> u64 {
    let (chunks, _) = block.as_chunks::<16>();
    chunks.iter().enumerate().fold(0, |mask, (k, chunk)| {
        mask | u64::from(eq_mask(chunk, byte)) << (16 * k)
    })
}

/// Bits `n` and up of a 64-bit mask (none when `n >= 64`).
#[inline(always)]
fn bits_from(n: usize) -> u64 {
    u64::MAX.checked_shl(n as u32).unwrap_or(0)
}

/// The fast step of a string scan over one block, for text whose escapes are all two bytes
/// long and common (`\n`, `\"`, `\\`, `\t`, `\r`: what prose, code and tool output hold),
/// decided from the block's masks without a loop over its flagged bytes: `Some(Some(k))` when
/// the string closes at byte `k` of the block, `Some(None)` when the whole block (from `live`)
/// is plain string text, and `None` when the block holds anything else before its closing quote
/// (another escape, a backslash as the last byte, a control or non-ASCII byte): the
/// byte-by-byte loop takes the block then.
///
/// `live` starts where the scan stands, never inside an escape (the loop moves past a whole
/// escape), so a run of backslashes starts in this block; one reaching its last byte may go on
/// in the next and is left to the loop.
#[inline(always)]
fn plain_block(masks: StringMasks, live: u64) -> Option<Option<u32>> {
    let backslash = masks.backslash & live;
    // The byte after each run of an odd number of backslashes: the escaped letter (an even
    // run is pairs of `\\`, all valid).
    let escaped = after_odd_runs(backslash);
    let closing = masks.quote & live & !escaped;
    // The bits before the closing quote (all of them while the string goes on).
    let within = if closing == 0 {
        u64::MAX
    } else {
        (closing & closing.wrapping_neg()) - 1
    };
    let plain = (backslash & within) >> 63 == 0
        && masks.outside & live & within == 0
        && escaped & within & !(masks.quote | masks.n | masks.t | masks.r) == 0;
    plain.then(|| (closing != 0).then(|| closing.trailing_zeros()))
}

/// The bit just after each run of set bits of odd length in `backslash` (a run reaching bit 63
/// has no such bit here). Each run is ended by adding its lowest bit: the carry lands just past
/// it; a run starting at an even bit ends past an odd length exactly when it ends at an odd bit,
/// and one starting at an odd bit at an even bit.
#[inline(always)]
fn after_odd_runs(backslash: u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let starts = backslash & !(backslash << 1);
    let ends_of_even_starts = backslash.wrapping_add(starts & EVEN) & !backslash;
    let ends_of_odd_starts = backslash.wrapping_add(starts & !EVEN) & !backslash;
    (ends_of_even_starts & !EVEN) | (ends_of_odd_starts & EVEN)
}

#[cfg(test)]
mod tests {
    use super::{after_odd_runs, StringBody};
    use crate::session::skim::cursor::{short_plain_end, Cursor};
    use crate::session::skim::simd;
    use crate::test_rng::TestRng;

    /// The short-string step answers only where the block loop gives the same end, and a
    /// string body read with it (`string_body`) ends where the block loop alone ends, or fails
    /// where it fails: over bodies of every length to past `SHORT_BYTES`, with a quote, an
    /// escape, a control or a non-ASCII byte at every place, and every number of bytes after
    /// the body (fewer than sixteen included).
    #[test]
    fn short_strings_end_where_the_block_loop_ends() {
        let pieces: [&[u8]; 8] = [
            b"a",
            b"\"",
            b"\\n",
            b"\\",
            b"\x01",
            "é".as_bytes(),
            b"\xff",
            b"n",
        ];
        let mut rng = TestRng::new(11);
        let mut answered = 0;
        for _ in 0..200_000 {
            let mut bytes = Vec::new();
            let len = rng.below(90);
            while bytes.len() < len {
                let piece = if rng.below(6) == 0 {
                    pieces[1 + rng.below(pieces.len() - 1)]
                } else {
                    pieces[0]
                };
                bytes.extend_from_slice(piece);
            }
            bytes.extend((0..rng.below(24)).map(|_| *rng.pick(b"a\",:}\\")));
            let blocks = |bytes: &[u8]| {
                let mut cursor = Cursor { b: bytes, i: 0 };
                simd::with_cpu_masks(StringBody(&mut cursor)).map(|()| cursor.i)
            };
            let mut cursor = Cursor { b: &bytes, i: 0 };
            let read = cursor.string_body().map(|()| cursor.i);
            assert_eq!(
                read,
                blocks(&bytes),
                "{:?}",
                String::from_utf8_lossy(&bytes)
            );
            if let Some(end) = short_plain_end(&bytes, 0) {
                answered += 1;
                assert_eq!(
                    Some(end),
                    blocks(&bytes),
                    "{:?}",
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
        assert!(
            answered > 10_000,
            "the short step answered only {answered} times"
        );
    }

    /// The byte after each odd run, by counting: the reference `after_odd_runs` is checked
    /// against, over random masks (runs of every length, at every position, bit 63 included).
    #[test]
    fn after_odd_runs_marks_the_byte_after_each_odd_run() {
        let naive = |mask: u64| {
            let mut out = 0u64;
            let mut run = 0;
            for k in 0..64 {
                if mask >> k & 1 == 1 {
                    run += 1;
                } else {
                    if run % 2 == 1 {
                        out |= 1 << k;
                    }
                    run = 0;
                }
            }
            out
        };
        let mut rng = TestRng::new(3);
        for round in 0..100_000 {
            // Sparse, dense and run-heavy masks alike.
            let a = rng.next_u64();
            let mask = match round % 3 {
                0 => a & rng.next_u64(),
                1 => a | rng.next_u64(),
                _ => a,
            };
            assert_eq!(after_odd_runs(mask), naive(mask), "{mask:064b}");
        }
        for mask in [0, 1, 3, 7, u64::MAX, 1 << 63, 3 << 62, 0b1011_0111] {
            assert_eq!(after_odd_runs(mask), naive(mask), "{mask:064b}");
        }
    }
}
