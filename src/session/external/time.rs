//! RFC 3339 times of other agents' records, as epoch milliseconds.
//!
//! Purpose: every agent stamps its records with an RFC 3339 time; listings and "last activity"
//! need epoch milliseconds. Invariant: a pure function of the text, constant work, `None` for
//! anything that is not a valid time (never a panic). Proof: the unit tests of
//! `session/external/mod.rs` and the parsers' tests over real records.

/// Milliseconds since the epoch of an RFC 3339 time (`2026-01-02T16:39:45.349Z`, offsets too).
pub fn parse_time(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded: String = frac[..digits]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        millis = padded.parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" | "" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let r = &rest[1..];
            if r.len() != 5 || r.as_bytes()[2] != b':' {
                return None;
            }
            let h: i64 = r[0..2].parse().ok()?;
            let m: i64 = r[3..5].parse().ok()?;
            sign * (h * 60 + m)
        }
    };
    let days = crate::session::civil::days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}
