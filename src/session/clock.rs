//! The wall clock as the session layer stamps it: epoch milliseconds.
//!
//! Purpose: one place every layer asks "what time is it" in the unit logs carry (`time`,
//! `createdAt`), so the agent, the front ends and the command line no longer import it from the
//! log writer, which only happens to be its first user.
//!
//! Invariant: [`now_ms`] never panics and never goes negative: a clock set before 1970 answers 0.
//! Proof: the function is a total composition (`duration_since` errs → 0, the milliseconds of any
//! `SystemTime` after the epoch fit `i64` for 292 million years); `clock::tests` pins the unit
//! against `SystemTime` directly.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in epoch milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::now_ms;
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn now_is_epoch_milliseconds() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let now = now_ms();
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        assert!(before.as_millis() as i64 <= now && now <= after.as_millis() as i64);
    }
}
