//! The one seeded generator of the project's tests, benchmarks and generators (SplitMix64), so
//! that a generated input reproduces from its seed and no `rand` dependency is needed.
//!
//! Purpose: fixed streams that must replay — unit tests in `src/` that try many generated inputs,
//! a crash-test child regenerating its parent's batches, the benchmarks' generated homes
//! (`benches/support/gen.rs`) and the demo home (`examples/make_demo_home`). Integration tests
//! that check a property over random inputs use proptest's strategies instead (shrinking,
//! persisted failures).
//!
//! Invariant: the stream of a seed never changes — the demo home is checked byte for byte
//! against the committed one (`tests/cli/demo_home.rs`, `cargo run --example make-demo-home --
//! --check`), and the benchmarks' data must stay what BENCHMARKS.md measured;
//! `the_rng_is_stable` in `examples/make_demo_home/emit.rs` (run by `tests/cli/demo_home.rs`)
//! pins the first outputs.
//!
//! This file is compiled into the library only for its unit tests (`#[cfg(test)]`); the test
//! support tree, the benchmarks and the examples include the same file with `#[path]`, so every
//! user shares one implementation while the library's API does not grow.
#![allow(dead_code)]

/// SplitMix64's increment (the golden ratio in 64 bits).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A SplitMix64 generator: small, fast, and the same on every machine.
#[derive(Debug, Clone)]
pub struct TestRng(u64);

impl TestRng {
    /// Seeded by a number.
    pub fn new(seed: u64) -> TestRng {
        TestRng(seed ^ GOLDEN)
    }

    /// Seeded by the FNV-1a hash of a text (a name reads better than a number as a seed).
    pub fn from_text(seed: &str) -> TestRng {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in seed.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        TestRng(hash)
    }

    /// The next 64 bits (every bit is usable).
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform enough in `lo..=hi` (`lo <= hi`).
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi - lo) as u64 + 1;
        lo + (self.next_u64() % span) as i64
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}
