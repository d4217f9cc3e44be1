//! A seeded generator for the unit tests that try many generated inputs, so that a failure
//! reproduces (and no `rand` dependency is needed).

pub(crate) struct TestRng(u64);

impl TestRng {
    pub(crate) fn new(seed: u64) -> TestRng {
        TestRng(seed)
    }

    /// The next state of a 64-bit linear congruential generator (its high bits are the good ones).
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0
    }

    /// Uniform enough in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() >> 33) as usize % n
    }
}
