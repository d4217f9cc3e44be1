//! The one age format every face shows (issue 38 item 3): the `@` popup, the `/resume` picker,
//! `dsh-refs search`, `dsh-refs sessions` and the MCP server's resource descriptions.
//!
//! Purpose: a time is shown as how long ago it was, in one compact token: `now`, `45s`, `5m`,
//! `3h`, `2d`, `3w`, `1y` (the largest unit that fits, counted down, never rounded up). The
//! token is short enough for a four-column list column, reads the same in a row and in a
//! sentence, and is the format Codex CLI and Claude Code users already read in their pickers;
//! no face appends `ago` or spells the unit out. It lives in the host room, below the faces, so
//! the TUI, the command line and the MCP server (which may not use the TUI) share it.
//!
//! Invariant: pure and total: any pair of `i64` times gives a token without overflow or panic; a
//! time in the future (another machine's clock, a skewed log) reads `now`, never a negative age.
//! Proof: the unit tests below, at every unit's boundaries and at the `i64` extremes.

/// Seconds in a minute, an hour, a day, a week and a (365-day) year.
const MIN: i64 = 60;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
const WEEK: i64 = 7 * DAY;
const YEAR: i64 = 365 * DAY;

/// The age of something that happened at `then_ms`, seen at `now_ms` (both Unix
/// milliseconds): `now`, `45s`, `5m`, `3h`, `2d`, `3w`, `1y`.
pub fn format_age(then_ms: i64, now_ms: i64) -> String {
    format_age_secs(now_ms.saturating_sub(then_ms) / 1000)
}

/// An age of `secs` seconds in the one compact format: under a second (or negative) is `now`;
/// then whole seconds, minutes, hours, days, weeks and years.
pub fn format_age_secs(secs: i64) -> String {
    match secs {
        s if s < 1 => "now".into(),
        s if s < MIN => format!("{s}s"),
        s if s < HOUR => format!("{}m", s / MIN),
        s if s < DAY => format!("{}h", s / HOUR),
        s if s < WEEK => format!("{}d", s / DAY),
        s if s < YEAR => format!("{}w", s / WEEK),
        s => format!("{}y", s / YEAR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_unit_starts_at_its_boundary() {
        assert_eq!(format_age_secs(0), "now");
        assert_eq!(format_age_secs(1), "1s");
        assert_eq!(format_age_secs(59), "59s");
        assert_eq!(format_age_secs(60), "1m");
        assert_eq!(format_age_secs(HOUR - 1), "59m");
        assert_eq!(format_age_secs(HOUR), "1h");
        assert_eq!(format_age_secs(DAY - 1), "23h");
        assert_eq!(format_age_secs(DAY), "1d");
        assert_eq!(format_age_secs(WEEK - 1), "6d");
        assert_eq!(format_age_secs(WEEK), "1w");
        assert_eq!(format_age_secs(YEAR - 1), "52w");
        assert_eq!(format_age_secs(YEAR), "1y");
        assert_eq!(format_age_secs(10 * YEAR + DAY), "10y");
    }

    #[test]
    fn milliseconds_count_down_to_whole_seconds() {
        let m = 60_000;
        assert_eq!(format_age(0, 0), "now");
        assert_eq!(format_age(0, 999), "now");
        assert_eq!(format_age(0, 1_000), "1s");
        assert_eq!(format_age(0, 59_999), "59s");
        assert_eq!(format_age(0, 60_000), "1m");
        assert_eq!(format_age(0, 5 * m), "5m");
        assert_eq!(format_age(0, 180 * m), "3h");
        assert_eq!(format_age(0, 49 * 60 * m), "2d");
        assert_eq!(format_age(0, 22 * 24 * 60 * m), "3w");
        assert_eq!(format_age(0, 400 * 24 * 60 * m), "1y");
        // Real epoch times, not only small ones.
        let t = 1_785_004_180_013;
        assert_eq!(format_age(t, t + 3 * 3_600_000 + 59_000), "3h");
    }

    #[test]
    fn a_future_time_is_now() {
        assert_eq!(format_age(10, 0), "now");
        assert_eq!(
            format_age(1_785_004_180_013 + 86_400_000, 1_785_004_180_013),
            "now"
        );
        assert_eq!(format_age_secs(-1), "now");
        assert_eq!(format_age_secs(i64::MIN), "now");
    }

    #[test]
    fn the_extremes_do_not_overflow() {
        assert_eq!(format_age(i64::MIN, i64::MAX), "292471208y");
        assert_eq!(format_age(i64::MAX, i64::MIN), "now");
        assert_eq!(format_age(i64::MIN, 0), "292471208y");
        assert_eq!(format_age(0, i64::MIN), "now");
        assert_eq!(format_age_secs(i64::MAX), "292471208677y");
    }
}
