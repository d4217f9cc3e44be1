//! Calendar time of the epoch-millisecond stamps logs carry (`createdAt`, event `time`), in UTC,
//! without a time-zone database: what listings print beside a session.
//!
//! Invariant: pure arithmetic, total over every `i64` (dates before 1970 and far ahead
//! included), proleptic Gregorian. Proof: the unit tests below pin known instants.

/// A UTC instant split into its calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// The year (proleptic Gregorian).
    pub year: i64,
    /// 1 to 12.
    pub month: i64,
    /// 1 to 31.
    pub day: i64,
    /// 0 to 23.
    pub hour: i64,
    /// 0 to 59.
    pub minute: i64,
    /// 0 to 59.
    pub second: i64,
}

impl UtcTime {
    /// The calendar fields of epoch milliseconds `ms`.
    pub fn from_epoch_ms(ms: i64) -> UtcTime {
        let secs = ms.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Days since 1970-01-01 to a civil date, counted in 400-year eras from 0000-03-01.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        UtcTime {
            year: yoe + era * 400 + i64::from(month <= 2),
            month,
            day,
            hour: rem / 3600,
            minute: rem % 3600 / 60,
            second: rem % 60,
        }
    }
}

/// Days since 1970-01-01 of the civil date `year-month-day` (proleptic Gregorian, counted in
/// 400-year eras from 0000-03-01): the inverse of [`UtcTime::from_epoch_ms`]'s date part, for the
/// readers of RFC 3339 and HTTP dates. `month` 1 to 12, `day` 1 to 31 (not checked further).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::{days_from_civil, UtcTime};

    #[test]
    fn days_from_civil_inverts_the_calendar_split() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        for ms in [
            0,
            1_709_251_199_999,
            -86_400_000 * 1000,
            253_402_300_799_000,
        ] {
            let t = UtcTime::from_epoch_ms(ms);
            let days = days_from_civil(t.year, t.month, t.day);
            assert_eq!(days, ms.div_euclid(86_400_000), "{t:?}");
        }
    }

    #[test]
    fn known_instants() {
        let t = UtcTime::from_epoch_ms(0);
        assert_eq!((t.year, t.month, t.day, t.hour), (1970, 1, 1, 0));
        // 2024-02-29 23:59:59.999 UTC, a leap day.
        let t = UtcTime::from_epoch_ms(1_709_251_199_999);
        assert_eq!(
            (t.year, t.month, t.day, t.hour, t.minute, t.second),
            (2024, 2, 29, 23, 59, 59)
        );
        // One millisecond before the epoch.
        let t = UtcTime::from_epoch_ms(-1);
        assert_eq!((t.year, t.month, t.day, t.second), (1969, 12, 31, 59));
        let _ = UtcTime::from_epoch_ms(i64::MIN);
        let _ = UtcTime::from_epoch_ms(i64::MAX);
    }
}
