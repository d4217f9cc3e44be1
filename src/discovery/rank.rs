//! The ranking blend of discovery search (SPEC §8): pure arithmetic, no I/O.
//!
//! A hit's score is its match quality plus recency plus same-cwd affinity:
//! - match quality: the best of its field matches (each in `0..=1`: fuzzy title, id prefix, cwd
//!   substring, first prompt, conversation full text), plus a quarter of the others (a session
//!   matched in its title *and* its conversation beats one matched in either), times
//!   [`MATCH_WEIGHT`];
//! - recency: [`RECENCY_WEIGHT`] halved every [`RECENCY_HALF_LIFE_DAYS`] days since last activity;
//! - affinity: [`AFFINITY_WEIGHT`] when the session's cwd is the agent's.
//!
//! The weights are chosen so that a good match always beats recency and affinity alone (a
//! perfect match is worth 1.0, recency and affinity together at most 0.45), while among similar
//! matches the recent session of the same project wins: that is what "the session you mean" is
//! for a person who just typed a word from its title.
//!
//! Invariant: scores are finite and ordering is total (ties by last activity, then id).
//! Proof: the unit tests below, and the labelled queries of `tests/discovery/search.rs`.

use serde::Serialize;

/// What match quality (`0..=2`, [`Matches::quality`]) is multiplied by in a score.
pub const MATCH_WEIGHT: f64 = 1.0;
/// The recency part of a score for a session active just now.
pub const RECENCY_WEIGHT: f64 = 0.3;
/// Days of inactivity after which the recency part is halved.
pub const RECENCY_HALF_LIFE_DAYS: f64 = 7.0;
/// Added to a score when the session's cwd is the agent's.
pub const AFFINITY_WEIGHT: f64 = 0.15;

/// A field a hit matched in (JSON names in `matched`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Field {
    /// `title`: a fuzzy match on the session's title.
    #[serde(rename = "title")]
    Title,
    /// `id`: the id (or its part after an agent namespace) starts with the query, of at least
    /// two characters.
    #[serde(rename = "id")]
    Id,
    /// `cwd`: the query is a substring of the working directory.
    #[serde(rename = "cwd")]
    Cwd,
    /// `firstPrompt`: the query's words are in the heading row (title and first prompt) while
    /// the fuzzy title match did not count.
    #[serde(rename = "firstPrompt")]
    FirstPrompt,
    /// `conversation`: the query's words are in the projected conversation text.
    #[serde(rename = "conversation")]
    Conversation,
}

impl Field {
    /// The JSON name, as serialized in `matched`.
    pub fn name(self) -> &'static str {
        match self {
            Field::Title => "title",
            Field::Id => "id",
            Field::Cwd => "cwd",
            Field::FirstPrompt => "firstPrompt",
            Field::Conversation => "conversation",
        }
    }
}

/// How well each field matched, each in `0..=1` (0: no match).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Matches {
    /// Fuzzy title quality relative to a perfect match ([`fuzzy_quality`]).
    pub title: f64,
    /// 1 for an id prefix of at least two characters.
    pub id: f64,
    /// 0.7 when the cwd's last component contains the query, 0.5 for elsewhere in it.
    pub cwd: f64,
    /// Full-text quality of the heading row (title and first prompt), when the fuzzy title
    /// match did not count.
    pub first_prompt: f64,
    /// Full-text quality of the best conversation chunk ([`conversation_quality`]).
    pub conversation: f64,
}

impl Matches {
    fn all(&self) -> [(Field, f64); 5] {
        [
            (Field::Title, self.title),
            (Field::Id, self.id),
            (Field::Cwd, self.cwd),
            (Field::FirstPrompt, self.first_prompt),
            (Field::Conversation, self.conversation),
        ]
    }

    /// The fields with a match, strongest first.
    pub fn fields(&self) -> Vec<Field> {
        let mut fields: Vec<(Field, f64)> =
            self.all().into_iter().filter(|(_, v)| *v > 0.0).collect();
        fields.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        fields.into_iter().map(|(f, _)| f).collect()
    }

    /// Whether any field matched (is above 0).
    pub fn any(&self) -> bool {
        self.all().iter().any(|(_, v)| *v > 0.0)
    }

    /// Best field plus a quarter of the rest, in `0..=2`.
    pub fn quality(&self) -> f64 {
        let values = self.all().map(|(_, v)| clamp01(v));
        let best = values.iter().copied().fold(0.0, f64::max);
        let sum: f64 = values.iter().sum();
        best + 0.25 * (sum - best)
    }
}

fn clamp01(v: f64) -> f64 {
    if v.is_finite() {
        v.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// Recency in `0..=RECENCY_WEIGHT`: halved every [`RECENCY_HALF_LIFE_DAYS`].
pub fn recency(last_activity_ms: i64, now_ms: i64) -> f64 {
    let age_days = (now_ms.saturating_sub(last_activity_ms)).max(0) as f64 / 86_400_000.0;
    // 0.5^(age / half-life), as an exponential (cheaper than `powf`, once per row and search).
    RECENCY_WEIGHT * (-std::f64::consts::LN_2 * age_days / RECENCY_HALF_LIFE_DAYS).exp()
}

/// The whole score of a hit.
pub fn score(matches: &Matches, last_activity_ms: i64, now_ms: i64, same_cwd: bool) -> f64 {
    score_with_recency(matches, recency(last_activity_ms, now_ms), same_cwd)
}

/// [`score`] with the recency given (an upper bound of it gives an upper bound of the score).
pub fn score_with_recency(matches: &Matches, recency: f64, same_cwd: bool) -> f64 {
    let affinity = if same_cwd { AFFINITY_WEIGHT } else { 0.0 };
    MATCH_WEIGHT * matches.quality() + recency + affinity
}

/// bm25 (negative: better is lower) mapped to `0..=1`, saturating for strong matches.
pub fn conversation_quality(bm25: f64) -> f64 {
    let x = (-bm25).max(0.0);
    if !x.is_finite() {
        return 0.0;
    }
    // A chunk that mentions the words a few times lands near 0.5-0.7; a passing mention lower.
    0.8 * x / (x + 4.0)
}

/// A nucleo score relative to the needle matched against itself (a perfect, contiguous match at a
/// word start), in `0..=1`.
pub fn fuzzy_quality(score: u32, perfect: u32) -> f64 {
    if perfect == 0 {
        return 0.0;
    }
    (f64::from(score) / f64::from(perfect)).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    #[test]
    fn a_good_match_beats_recency_and_affinity_alone() {
        let now = 100 * DAY;
        let old_match = score(
            &Matches {
                title: 0.9,
                ..Matches::default()
            },
            now - 60 * DAY,
            now,
            false,
        );
        let fresh_weak = score(
            &Matches {
                conversation: 0.2,
                ..Matches::default()
            },
            now,
            now,
            true,
        );
        assert!(old_match > fresh_weak, "{old_match} > {fresh_weak}");
    }

    #[test]
    fn among_equal_matches_recent_and_same_cwd_win() {
        let now = 100 * DAY;
        let m = Matches {
            title: 0.8,
            ..Matches::default()
        };
        assert!(score(&m, now - DAY, now, false) > score(&m, now - 30 * DAY, now, false));
        assert!(score(&m, now - DAY, now, true) > score(&m, now - DAY, now, false));
    }

    #[test]
    fn two_fields_beat_one() {
        let one = Matches {
            title: 0.8,
            ..Matches::default()
        };
        let two = Matches {
            title: 0.8,
            conversation: 0.4,
            ..Matches::default()
        };
        assert!(two.quality() > one.quality());
        assert_eq!(two.fields(), vec![Field::Title, Field::Conversation]);
    }

    #[test]
    fn scores_stay_finite_and_bounded() {
        let m = Matches {
            title: f64::NAN,
            id: f64::INFINITY,
            cwd: -1.0,
            first_prompt: 2.0,
            conversation: conversation_quality(f64::NEG_INFINITY),
        };
        let s = score(&m, i64::MIN, i64::MAX, true);
        assert!(s.is_finite() && s <= 2.0 + RECENCY_WEIGHT + AFFINITY_WEIGHT);
        assert_eq!(fuzzy_quality(5, 0), 0.0);
        assert_eq!(fuzzy_quality(50, 10), 1.0);
        assert!(conversation_quality(-8.0) > conversation_quality(-1.0));
        assert_eq!(conversation_quality(3.0), 0.0);
    }
}
