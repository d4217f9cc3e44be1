//! The checksum that ends every file kept beside the listings (the dsh listing cache, the
//! other agents' listings and their kept conversations).
//!
//! Purpose: a kept file is checked before anything in it is used, so that a torn or damaged
//! one is read again, never trusted; the check runs at every read of files of megabytes.
//! Invariant: the value is FxHash (`rustc_hash`) fed the bytes eight at a time (little-endian
//! words), then the remaining bytes, then the length: what files written by earlier builds
//! hold. It catches damage, not an adversary (one who can write the dsh home can write the
//! logs). Proof: `checksum_is_fx_over_the_words` below.

use std::hash::Hasher;

/// FxHash over the bytes, eight at a time: catches a torn or damaged file, not an adversary
/// (one who can write the dsh home can write far worse).
#[cfg(target_pointer_width = "64")]
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    let (words, rest) = bytes.as_chunks::<8>();
    let mut hasher = rustc_hash::FxHasher::with_seed(fx_words(words));
    hasher.write(rest);
    hasher.write_usize(bytes.len());
    hasher.finish()
}

/// [`checksum`] where the hasher's steps are not one multiply per word: the hasher's own loop.
#[cfg(not(target_pointer_width = "64"))]
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    word_by_word(bytes)
}

/// The checksum's definition: the hasher fed each word, the rest and the length.
#[cfg(any(test, not(target_pointer_width = "64")))]
fn word_by_word(bytes: &[u8]) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    let (words, rest) = bytes.as_chunks::<8>();
    for word in words {
        hasher.write_u64(u64::from_le_bytes(*word));
    }
    hasher.write(rest);
    hasher.write_usize(bytes.len());
    hasher.finish()
}

/// The state of an `FxHasher` from 0 after `write_u64` of each word (little-endian), four words
/// at a time. Each step is `h = (h + w)·K` (wrapping), which is linear, so four steps are
/// `h·K⁴ + w₀·K⁴ + w₁·K³ + w₂·K² + w₃·K`: the same value, with one multiply on the chain from
/// one group to the next instead of four (a kept file of megabytes is checked at every read;
/// the chain of multiplies was most of that check). `checksum_is_fx_over_the_words` holds it to
/// the hasher's own steps.
#[cfg(target_pointer_width = "64")]
fn fx_words(words: &[[u8; 8]]) -> usize {
    const K: u64 = 0xf1357aea2e62a9c5;
    const K2: u64 = K.wrapping_mul(K);
    const K3: u64 = K2.wrapping_mul(K);
    const K4: u64 = K3.wrapping_mul(K);
    let word = |w: &[u8; 8]| u64::from_le_bytes(*w);
    let (groups, tail) = words.as_chunks::<4>();
    let mut h = 0u64;
    for [a, b, c, d] in groups {
        let sum = word(a)
            .wrapping_mul(K4)
            .wrapping_add(word(b).wrapping_mul(K3))
            .wrapping_add(word(c).wrapping_mul(K2))
            .wrapping_add(word(d).wrapping_mul(K));
        h = h.wrapping_mul(K4).wrapping_add(sum);
    }
    for w in tail {
        h = h.wrapping_add(word(w)).wrapping_mul(K);
    }
    h as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksum four words at a time is FxHash fed word by word, as it was written before:
    /// files kept by an earlier build still check, for every length and every tail; and one
    /// value is pinned, computed apart from this code (a Python transcription of rustc-hash
    /// 2.1.3's steps), so the definition itself cannot drift.
    #[test]
    fn checksum_is_fx_over_the_words() {
        let mut rng = crate::test_rng::TestRng::new(35);
        for len in (0..200).chain([4095, 4096, 65_537]) {
            let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            assert_eq!(checksum(&bytes), word_by_word(&bytes), "{len} bytes");
        }
        // One value worked out by hand from rustc-hash 2.1's definition (outside this crate).
        assert_eq!(checksum(b"dsh-refs kept file\n{}\n"), 0x2d39_5fb6_420d_e7be);
    }
}
