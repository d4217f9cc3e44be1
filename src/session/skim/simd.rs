//! Byte classification with SIMD, one of the library's rooms that hold `unsafe` (with
//! `external/mapped.rs`, and `mallopt` in `main.rs`), behind a safe API; the prefetch hint
//! the string loop gives a page ahead ([`prefetch`]); and the text of a short plain string
//! made from the masks that found its end ([`short_plain`]).
//!
//! Purpose: the skimmer asks, of 16 or 64 bytes at a time, which are quotes, backslashes, the
//! letters of common escapes, digits, a given byte, or outside printable ASCII, as bit masks
//! ([`StringMasks`], [`eq_mask`], [`digit_mask`], [`outside_mask`]). SSE2 (the x86_64 baseline)
//! answers 16 bytes in a few instructions; AVX2, when the CPU has it, 64 bytes in two loads and
//! twelve compares; AVX-512BW 64 bytes in one load and six compares; elsewhere a portable loop
//! gives the same
//! bits.
//!
//! Invariant: every function here is safe to call with any input, and answers the same bits on
//! every path. The only proof obligations of the `unsafe` blocks are the CPU features the
//! intrinsics need: SSE2 is checked at compile time (the `cfg`s), AVX2 and AVX-512BW at run
//! time and carried by the [`Wide`] token, which only [`Wide::detect`] can make wide, so no
//! caller can claim a feature without the CPU having it; the unaligned loads read a
//! `&[u8; 64]`. [`short_plain`] makes a `&str` without a UTF-8 check only of bytes its own
//! [`special_mask`] found all ASCII (it flags every byte of 0x80 and up).
//! Proof: `simd::tests` (each SIMD mask against the portable one and against the bytes' own
//! classification, on the SSE2 path and on each wider one the CPU has;
//! `short_plain_bodies_are_their_ascii_bytes`), and the skimmer's property and differential
//! tests against serde (`cargo test skim`, `fuzz/fuzz_targets/skim_vs_serde.rs`).
//!
//! `unsafe_code` is denied crate-wide (Cargo.toml) and allowed in this file only, item by item.

/// Which instructions the block masks may come from: wider than SSE2 only when the CPU was
/// seen to have them ([`Wide::detect`]), which is what makes [`string_masks`] and
/// [`with_cpu_masks`] safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Wide(Level);

/// The widest byte comparisons a [`Wide`] token vouches for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// SSE2 (or the portable loop).
    Narrow,
    /// AVX2: 32 bytes per comparison.
    Avx2,
    /// AVX-512BW: 64 bytes compared into a mask register.
    Avx512,
}

impl Wide {
    /// SSE2 (or portable) masks, whatever the CPU has.
    pub(super) const NARROW: Wide = Wide(Level::Narrow);

    /// The widest the CPU has (AVX-512BW, else AVX2, else SSE2), asked once.
    pub(super) fn detect() -> Wide {
        #[cfg(target_arch = "x86_64")]
        {
            static LEVEL: std::sync::OnceLock<Level> = std::sync::OnceLock::new();
            Wide(*LEVEL.get_or_init(|| {
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    Level::Avx512
                } else if std::arch::is_x86_feature_detected!("avx2") {
                    Level::Avx2
                } else {
                    Level::Narrow
                }
            }))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Wide(Level::Narrow)
        }
    }

    /// Every token up to what the CPU has, narrowest first (for tests of each path).
    #[cfg(test)]
    pub(super) fn each() -> Vec<Wide> {
        let top = Wide::detect().0;
        [Level::Narrow, Level::Avx2, Level::Avx512]
            .into_iter()
            .filter(|level| *level as u8 <= top as u8)
            .map(Wide)
            .collect()
    }
}

/// A block loop that can run with any kind of masks. Its `scan` is meant to be
/// `#[inline(always)]`: [`with_cpu_masks`] calls it from a frame compiled for AVX2 or
/// AVX-512BW, and only an always-inlined body is compiled into that frame (a closure would stay
/// a separate function, calling out for every block's masks).
pub(super) trait MaskedScan {
    /// What the scan answers.
    type Output;
    /// Runs the loop, its masks from the widest instructions `wide` vouches for.
    fn scan(self, wide: Wide) -> Self::Output;
}

/// Runs `scan` with the widest masks the CPU has: on a CPU with AVX-512BW or AVX2 from a frame
/// compiled for it, so the block loop inlined there computes its masks inline; elsewhere with
/// [`Wide::NARROW`].
#[inline(always)]
#[allow(unsafe_code)] // The AVX2 and AVX-512 frames below.
pub(super) fn with_cpu_masks<S: MaskedScan>(scan: S) -> S::Output {
    #[cfg(target_arch = "x86_64")]
    match Wide::detect().0 {
        // SAFETY: a level above `Narrow` comes only from `Wide::detect`, which names one only
        // when the CPU has it, and that feature is all each frame requires.
        Level::Avx512 => return unsafe { wide_frame(scan) },
        Level::Avx2 => return unsafe { avx2_frame(scan) },
        Level::Narrow => {}
    }
    scan.scan(Wide::NARROW)
}

/// [`with_cpu_masks`]'s frame compiled for AVX-512BW. The token is a constant here, so the
/// other paths fold away from the loop compiled into it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn wide_frame<S: MaskedScan>(scan: S) -> S::Output {
    scan.scan(Wide(Level::Avx512))
}

/// [`with_cpu_masks`]'s frame compiled for AVX2, as [`wide_frame`] is for AVX-512BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2_frame<S: MaskedScan>(scan: S) -> S::Output {
    scan.scan(Wide(Level::Avx2))
}

/// What a string scan needs to know of a 64-byte block: bit `k` of each mask is byte `k`.
#[derive(Clone, Copy)]
pub(super) struct StringMasks {
    pub(super) quote: u64,
    pub(super) backslash: u64,
    /// `n`, the letter of the escape text holds most (`\n`).
    pub(super) n: u64,
    /// `t` and `r`, the letters of the next most common escapes (`\t` in code and diffs,
    /// `\r` in text from Windows).
    pub(super) t: u64,
    pub(super) r: u64,
    /// Below 0x20 or 0x80 and up.
    pub(super) outside: u64,
}

impl StringMasks {
    /// Every byte the byte-by-byte loop must look at (what `special_mask` flags).
    pub(super) fn special(self) -> u64 {
        self.quote | self.backslash | self.outside
    }
}

/// The [`StringMasks`] of `block`, from the widest instructions `wide` vouches for.
#[inline(always)]
#[allow(unsafe_code)] // The AVX2 and AVX-512 calls below; see `mod avx2` and `mod avx512`.
pub(super) fn string_masks(block: &[u8; 64], wide: Wide) -> StringMasks {
    #[cfg(target_arch = "x86_64")]
    match wide.0 {
        // SAFETY: a level above `Narrow` comes only from `Wide::detect`, which names one only
        // when the CPU has it, and that feature is all each `string_masks` requires.
        Level::Avx512 => return unsafe { avx512::string_masks(block) },
        Level::Avx2 => return unsafe { avx2::string_masks(block) },
        Level::Narrow => {}
    }
    let _ = wide;
    let (chunks, _) = block.as_chunks::<16>();
    let mut masks = StringMasks {
        quote: 0,
        backslash: 0,
        n: 0,
        t: 0,
        r: 0,
        outside: 0,
    };
    for (k, chunk) in chunks.iter().enumerate() {
        let shift = 16 * k;
        masks.quote |= u64::from(eq_mask(chunk, b'"')) << shift;
        masks.backslash |= u64::from(eq_mask(chunk, b'\\')) << shift;
        masks.n |= u64::from(eq_mask(chunk, b'n')) << shift;
        masks.t |= u64::from(eq_mask(chunk, b't')) << shift;
        masks.r |= u64::from(eq_mask(chunk, b'r')) << shift;
        masks.outside |= u64::from(outside_mask(chunk)) << shift;
    }
    masks
}

/// The body of the short plain string starting at `bytes[start]` (its text, and the index
/// just past its closing quote), when that quote comes within `limit` bytes and every byte
/// before it is printable ASCII other than a backslash (such a body is what serde accepts
/// without a check more, and decodes to these very bytes). `None` for anything else, or when
/// fewer than sixteen bytes are left to load. The bytes are classified sixteen at a time
/// ([`special_mask`]), so the text is made here without a second UTF-8 validation
/// (`str::from_utf8` is an out-of-line call that costs more than a short key's or id's bytes).
#[inline(always)]
pub(super) fn short_plain(bytes: &[u8], start: usize, limit: usize) -> Option<(&str, usize)> {
    let mut at = start;
    while at < start + limit {
        let chunk: &[u8; 16] = bytes.get(at..at + 16)?.try_into().ok()?;
        let flagged = special_mask(chunk);
        if flagged != 0 {
            let first = at + flagged.trailing_zeros() as usize;
            if bytes[first] != b'"' {
                return None;
            }
            let body = &bytes[start..first];
            debug_assert!(body.is_ascii());
            #[allow(unsafe_code)]
            // SAFETY: `special_mask` flags every byte of 0x80 and up (the test
            // `masks_report_every_flagged_byte`), and the first flagged byte from `start` is
            // this quote, so every byte of `body` is ASCII, which is valid UTF-8.
            let text = unsafe { std::str::from_utf8_unchecked(body) };
            return Some((text, first + 1));
        }
        at += 16;
    }
    None
}

/// Asks the CPU to bring `bytes[at]` into its caches ahead of a scan that will reach it; a
/// hint only, nothing when `at` is past the end.
#[inline(always)]
pub(super) fn prefetch(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(byte) = bytes.get(at) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        #[allow(unsafe_code)]
        // SAFETY: a prefetch only hints the caches; the pointer is to a byte of `bytes`.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>((byte as *const u8).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

/// Bit `k` set when byte `k` of `chunk` is `"`, `\\`, below 0x20 or non-ASCII (the tests
/// check the string masks, which hold the same bits, against it; short strings are scanned
/// with it).
#[inline(always)]
#[allow(unsafe_code)] // The SSE2 call below; see `mod sse2`.
pub(super) fn special_mask(chunk: &[u8; 16]) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: the cfg above makes this code exist only where SSE2 is enabled at compile
        // time (it is part of the x86_64 baseline), which is all the `sse2` functions require.
        unsafe { sse2::special_mask(chunk) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        portable::special_mask(chunk)
    }
}

/// Bit `k` set when byte `k` of `chunk` is an ASCII digit.
#[allow(unsafe_code)] // The SSE2 call below; see `mod sse2`.
pub(super) fn digit_mask(chunk: &[u8; 16]) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: as in `special_mask`.
        unsafe { sse2::digit_mask(chunk) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        portable::digit_mask(chunk)
    }
}

/// Bit `k` set when byte `k` of `chunk` is `byte`.
#[allow(unsafe_code)] // The SSE2 call below; see `mod sse2`.
pub(super) fn eq_mask(chunk: &[u8; 16], byte: u8) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: as in `special_mask`.
        unsafe { sse2::eq_mask(chunk, byte) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        portable::eq_mask(chunk, byte)
    }
}

/// Bit `k` set when byte `k` of `chunk` is below 0x20 or 0x80 and up.
#[allow(unsafe_code)] // The SSE2 call below; see `mod sse2`.
pub(super) fn outside_mask(chunk: &[u8; 16]) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: as in `special_mask`.
        unsafe { sse2::outside_mask(chunk) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        portable::outside_mask(chunk)
    }
}

/// Byte classification with SSE2: sixteen bytes in a handful of instructions. The functions
/// are safe but compiled for SSE2; their callers above are where `unsafe` is needed.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8, _mm_set_epi64x,
    };

    #[inline]
    #[target_feature(enable = "sse2")]
    fn load(chunk: &[u8; 16]) -> __m128i {
        let lo = u64::from_le_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]);
        let hi = u64::from_le_bytes([
            chunk[8], chunk[9], chunk[10], chunk[11], chunk[12], chunk[13], chunk[14], chunk[15],
        ]);
        _mm_set_epi64x(hi as i64, lo as i64)
    }

    #[inline]
    #[target_feature(enable = "sse2")]
    pub(super) fn special_mask(chunk: &[u8; 16]) -> u32 {
        let v = load(chunk);
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // A signed comparison: below 0x20, or 0x80 and up (negative as i8).
        let outside = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), outside)) as u32
    }

    #[inline]
    #[target_feature(enable = "sse2")]
    pub(super) fn outside_mask(chunk: &[u8; 16]) -> u32 {
        // A signed comparison: below 0x20, or 0x80 and up (negative as i8).
        _mm_movemask_epi8(_mm_cmplt_epi8(load(chunk), _mm_set1_epi8(0x20))) as u32
    }

    #[inline]
    #[target_feature(enable = "sse2")]
    pub(super) fn digit_mask(chunk: &[u8; 16]) -> u32 {
        let v = load(chunk);
        // Digits are positive as i8, so signed comparisons bracket them.
        let above = _mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1));
        let below = _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1));
        _mm_movemask_epi8(_mm_and_si128(above, below)) as u32
    }

    #[inline]
    #[target_feature(enable = "sse2")]
    pub(super) fn eq_mask(chunk: &[u8; 16], byte: u8) -> u32 {
        _mm_movemask_epi8(_mm_cmpeq_epi8(load(chunk), _mm_set1_epi8(byte as i8))) as u32
    }
}

/// The string masks with AVX-512BW: one load and six comparisons into mask registers per 64
/// bytes. Called only when the CPU was seen to have AVX-512BW (see `Wide::detect`).
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::StringMasks;
    use std::arch::x86_64::{
        _mm512_cmpeq_epi8_mask, _mm512_cmplt_epi8_mask, _mm512_loadu_si512, _mm512_set1_epi8,
    };

    #[inline]
    #[target_feature(enable = "avx512bw")]
    #[allow(unsafe_code)]
    pub(super) fn string_masks(block: &[u8; 64]) -> StringMasks {
        // SAFETY: `block` is 64 readable bytes; the load has no alignment requirement.
        let v = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
        StringMasks {
            quote: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8)),
            backslash: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8)),
            n: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'n' as i8)),
            t: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b't' as i8)),
            r: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'r' as i8)),
            // Signed: below 0x20, or 0x80 and up (negative as i8).
            outside: _mm512_cmplt_epi8_mask(v, _mm512_set1_epi8(0x20)),
        }
    }
}

/// The string masks with AVX2: two loads and six comparisons each per 64 bytes. Called only
/// when the CPU was seen to have AVX2 (see `Wide::detect`).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::StringMasks;
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256, _mm256_movemask_epi8,
        _mm256_set1_epi8,
    };

    /// The 64 bits of one comparison over both halves.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn bits(lo: __m256i, hi: __m256i, compare: impl Fn(__m256i) -> __m256i) -> u64 {
        let lo = _mm256_movemask_epi8(compare(lo)) as u32;
        let hi = _mm256_movemask_epi8(compare(hi)) as u32;
        u64::from(lo) | u64::from(hi) << 32
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    #[allow(unsafe_code)]
    pub(super) fn string_masks(block: &[u8; 64]) -> StringMasks {
        let (halves, _) = block.as_chunks::<32>();
        // SAFETY: each half is 32 readable bytes; the loads have no alignment requirement.
        let (lo, hi) = unsafe {
            (
                _mm256_loadu_si256(halves[0].as_ptr().cast()),
                _mm256_loadu_si256(halves[1].as_ptr().cast()),
            )
        };
        let eq = |byte: u8| {
            let wanted = _mm256_set1_epi8(byte as i8);
            move |v| _mm256_cmpeq_epi8(v, wanted)
        };
        let space = _mm256_set1_epi8(0x20);
        StringMasks {
            quote: bits(lo, hi, eq(b'"')),
            backslash: bits(lo, hi, eq(b'\\')),
            n: bits(lo, hi, eq(b'n')),
            t: bits(lo, hi, eq(b't')),
            r: bits(lo, hi, eq(b'r')),
            // Signed: below 0x20, or 0x80 and up (negative as i8).
            outside: bits(lo, hi, |v| _mm256_cmpgt_epi8(space, v)),
        }
    }
}

/// The portable fallback: the same masks, one byte at a time (every flagged byte is reported,
/// as the block loop of `string_body` requires).
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
mod portable {
    fn mask(chunk: &[u8; 16], flag: impl Fn(u8) -> bool) -> u32 {
        chunk
            .iter()
            .enumerate()
            .fold(0, |mask, (k, &b)| mask | (u32::from(flag(b)) << k))
    }

    pub(super) fn special_mask(chunk: &[u8; 16]) -> u32 {
        mask(chunk, |b| {
            b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b)
        })
    }

    pub(super) fn eq_mask(chunk: &[u8; 16], byte: u8) -> u32 {
        mask(chunk, |b| b == byte)
    }

    pub(super) fn outside_mask(chunk: &[u8; 16]) -> u32 {
        mask(chunk, |b| !(0x20..0x80).contains(&b))
    }

    pub(super) fn digit_mask(chunk: &[u8; 16]) -> u32 {
        mask(chunk, |b| b.is_ascii_digit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::TestRng;

    /// A short plain body is answered exactly when the bytes up to the first quote within the
    /// limit are printable ASCII without a backslash, and its text is those bytes (what serde
    /// decodes): over bodies with a non-ASCII byte (a lone continuation, a lead, a whole
    /// character), a control, a backslash or a quote at every place, and every length around
    /// the limit.
    #[test]
    fn short_plain_bodies_are_their_ascii_bytes() {
        let odd: [&[u8]; 6] = [
            b"\x80",
            b"\xc3",
            "\u{e9}".as_bytes(),
            b"\x01",
            b"\\",
            b"\x7f",
        ];
        let mut rng = TestRng::new(5);
        let mut answered = 0;
        for _ in 0..100_000 {
            let mut bytes = vec![b'a'; rng.below(80)];
            if rng.below(2) == 0 && !bytes.is_empty() {
                let at = rng.below(bytes.len());
                let piece = odd[rng.below(odd.len())];
                bytes.splice(at..at + 1, piece.iter().copied());
            }
            let quote = bytes.len();
            bytes.push(b'"');
            bytes.extend((0..rng.below(20)).map(|_| *rng.pick(b"a\",}\x80")));
            let limit = 16 * (1 + rng.below(4));
            let got = short_plain(&bytes, 0, limit);
            let body = &bytes[..quote];
            let plain = body
                .iter()
                .all(|&b| (0x20..0x80).contains(&b) && b != b'\\');
            if let Some((text, end)) = got {
                answered += 1;
                assert!(plain, "{body:?}");
                assert_eq!((text.as_bytes(), end), (body, quote + 1));
                let quoted = &bytes[..=quote];
                let mut json = vec![b'"'];
                json.extend_from_slice(quoted);
                assert_eq!(
                    serde_json::from_slice::<String>(&json).ok().as_deref(),
                    Some(text)
                );
            } else if plain && quote / 16 * 16 < limit && bytes.len() >= 16 * (quote / 16 + 1) {
                panic!("a plain body of {quote} bytes was not answered: {body:?}");
            }
        }
        assert!(answered > 10_000, "answered only {answered} times");
    }

    #[test]
    fn masks_report_every_flagged_byte() {
        let mut rng = TestRng::new(7);
        for _ in 0..20_000 {
            let mut chunk = [0u8; 16];
            for byte in &mut chunk {
                let seed = rng.next_u64();
                *byte = match seed >> 60 {
                    0 => b'"',
                    1 => b'\\',
                    2 => (seed >> 40) as u8 & 0x1F,
                    3 => 0x80 | (seed >> 40) as u8,
                    4..=6 => b'/' + (seed >> 40) as u8 % 12,
                    7 => (seed >> 40) as u8,
                    _ => b'a' + (seed >> 40) as u8 % 26,
                };
            }
            assert_eq!(special_mask(&chunk), portable::special_mask(&chunk));
            assert_eq!(outside_mask(&chunk), portable::outside_mask(&chunk));
            assert_eq!(eq_mask(&chunk, b'"'), portable::eq_mask(&chunk, b'"'));
            assert_eq!(digit_mask(&chunk), portable::digit_mask(&chunk));
        }
    }

    /// Every way of computing a block's string masks the CPU has (SSE2, AVX2, AVX-512BW) gives
    /// the bytes' own classification.
    #[test]
    fn string_masks_report_every_byte() {
        let mut rng = TestRng::new(11);
        for _ in 0..5_000 {
            let mut block = [0u8; 64];
            for byte in &mut block {
                let seed = rng.next_u64();
                *byte = match seed >> 61 {
                    0 => b'"',
                    1 => b'\\',
                    2 => [b'n', b't', b'r'][(seed >> 40) as usize % 3],
                    3 => (seed >> 40) as u8,
                    _ => b'a' + (seed >> 40) as u8 % 26,
                };
            }
            let bits = |flag: &dyn Fn(u8) -> bool| {
                block
                    .iter()
                    .enumerate()
                    .fold(0u64, |m, (k, &b)| m | (u64::from(flag(b)) << k))
            };
            for wide in Wide::each() {
                let masks = string_masks(&block, wide);
                assert_eq!(masks.quote, bits(&|b| b == b'"'));
                assert_eq!(masks.backslash, bits(&|b| b == b'\\'));
                assert_eq!(masks.n, bits(&|b| b == b'n'));
                assert_eq!(masks.t, bits(&|b| b == b't'));
                assert_eq!(masks.r, bits(&|b| b == b'r'));
                assert_eq!(masks.outside, bits(&|b| !(0x20..0x80).contains(&b)));
            }
        }
    }

    /// The widest frame runs the scan with the detected token.
    #[test]
    fn the_wide_frame_passes_the_detected_token() {
        struct Token;
        impl MaskedScan for Token {
            type Output = Wide;
            fn scan(self, wide: Wide) -> Wide {
                wide
            }
        }
        assert_eq!(with_cpu_masks(Token), Wide::detect());
    }
}
