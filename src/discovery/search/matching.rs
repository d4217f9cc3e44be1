//! A row's in-memory fields matched against a query: fuzzy titles (nucleo), id prefixes, cwd
//! substrings, and the prefilters that skip most rows before any scoring.
//!
//! Purpose: cheap checks first (character masks, plain subsequences, contiguous words), nucleo
//! only for what may match. Invariant: a prefilter only ever turns away rows nucleo would not
//! match (or would match below the floor). Proof: the property tests below, each against
//! nucleo.

use super::rank;
use super::rows::char_bit;
use nucleo_matcher::pattern::Pattern;
use nucleo_matcher::{Matcher, Utf32Str};

/// A fuzzy title or first-prompt match below this quality does not count.
pub(super) const FUZZY_FLOOR: f64 = 0.4;

/// The characters every in-memory match of `text` needs (whitespace only separates words);
/// 0 (no filtering) for text outside plain ASCII or with escapes.
pub(super) fn query_mask(text: &str) -> u64 {
    if !text.is_ascii() || text.contains('\\') {
        return 0;
    }
    text.bytes()
        .filter(|c| !c.is_ascii_whitespace())
        .fold(0, |mask, c| mask | 1 << char_bit(c))
}

pub(super) fn perfect_score(pattern: &Pattern, text: &str, matcher: &mut Matcher) -> u32 {
    let mut buf = Vec::new();
    let hay = Utf32Str::new(text, &mut buf);
    pattern.score(hay, matcher).unwrap_or(0)
}

/// The query's words as the fuzzy pattern splits them (at whitespace), lower-cased, when the
/// query is plain ASCII without escapes; `None` otherwise (no prefilter).
pub(super) fn fuzzy_words(text: &str) -> Option<Vec<Vec<u8>>> {
    if !text.is_ascii() || text.contains('\\') {
        return None;
    }
    let words: Vec<Vec<u8>> = text
        .split_ascii_whitespace()
        .map(|w| w.to_ascii_lowercase().into_bytes())
        .collect();
    (!words.is_empty()).then_some(words)
}

/// Whether every word's characters occur in `hay` in order (each word on its own, as the fuzzy
/// matcher needs them): a title for which this fails is no fuzzy match, so it is not scored.
/// Both sides are lower-cased ASCII.
pub(super) fn subsequences(hay: &[u8], words: &[Vec<u8>]) -> bool {
    words.iter().all(|word| {
        let mut rest = hay.iter();
        word.iter().all(|c| rest.any(|h| h == c))
    })
}

/// Whether every word occurs in `hay` as it is (contiguously). Such a title is a fuzzy match
/// whose quality is at least [`FUZZY_FLOOR`]: each word's contiguous run scores at least its
/// plain per-character score, which is more than the floor's share of a perfect match
/// (property-tested below against nucleo).
pub(super) fn contains_words(hay: &[u8], words: &[Vec<u8>]) -> bool {
    // Titles are short: a plain scan beats a vectorized searcher's set-up.
    words.iter().all(|word| match word.split_first() {
        None => true,
        Some((&first, rest)) => hay
            .iter()
            .enumerate()
            .any(|(i, &c)| c == first && hay[i + 1..].starts_with(rest)),
    })
}

/// The quality of a fuzzy match (0 below [`FUZZY_FLOOR`]) and whether it matched at all.
pub(super) fn fuzzy(
    pattern: &Pattern,
    haystack: &str,
    perfect: u32,
    matcher: &mut Matcher,
    buf: &mut Vec<char>,
) -> (f64, bool) {
    if pattern.atoms.is_empty() {
        return (0.0, false);
    }
    let hay = Utf32Str::new(haystack, buf);
    match pattern.score(hay, matcher) {
        Some(score) => {
            let q = rank::fuzzy_quality(score, perfect);
            (if q >= FUZZY_FLOOR { q } else { 0.0 }, true)
        }
        None => (0.0, false),
    }
}

/// Whether the lower-cased `id` (or its part from `own_start`, after an agent namespace) starts
/// with the lower-cased query, and the score: 1 for a prefix of at least two characters.
pub(super) fn id_prefix(id: &[u8], own_start: usize, lower: &[u8]) -> (f64, bool) {
    let hit = id.starts_with(lower) || id[own_start..].starts_with(lower);
    let score = if hit && lower.len() >= 2 { 1.0 } else { 0.0 };
    (score, hit)
}

/// 0.7 when the (lower-cased) cwd's last component contains the query, 0.5 for elsewhere in it.
pub(super) fn cwd_match(cwd: &str, lower: &str) -> f64 {
    if lower.is_empty() {
        return 0.0;
    }
    if !cwd.contains(lower) {
        return 0.0;
    }
    let last = cwd
        .rsplit(['/', '\\'])
        .find(|s| !s.is_empty())
        .unwrap_or("");
    if last.contains(lower) {
        0.7
    } else {
        0.5
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::char_mask;
    use super::*;
    use nucleo_matcher::pattern::{AtomKind, CaseMatching, Normalization};
    use nucleo_matcher::Config;

    #[test]
    fn id_and_cwd_matches() {
        assert_eq!(id_prefix(b"claude:abcd-1", 7, b"ab"), (1.0, true));
        assert_eq!(
            id_prefix(b"7a712ba3", 0, b"7A71"),
            (0.0, false),
            "callers lower-case both"
        );
        assert_eq!(id_prefix(b"7a712ba3", 0, b"7a71"), (1.0, true));
        assert_eq!(
            id_prefix(b"7a712ba3", 0, b"7"),
            (0.0, true),
            "too short to score"
        );
        assert_eq!(cwd_match("/home/dev/parser", "parser"), 0.7);
        assert_eq!(cwd_match("/home/dev/parser", "dev"), 0.5);
        assert_eq!(cwd_match("/home/dev/parser", "web"), 0.0);
    }

    #[test]
    fn the_subsequence_prefilter_only_ever_lets_matches_through() {
        let words = fuzzy_words("Si CUNA").unwrap();
        assert!(subsequences(b"speed up the sicunar", &words));
        assert!(
            !subsequences(b"speed up the anucis", &words),
            "letters present, order wrong"
        );
        assert!(fuzzy_words("café").is_none());
        assert!(fuzzy_words("a\\ b").is_none());
        assert!(fuzzy_words("   ").is_none());
        // Agreement with the fuzzy matcher on generated titles and queries: whenever the
        // prefilter says no, nucleo finds no match either.
        let mut rng = crate::test_rng::TestRng::new(7);
        let mut matcher = Matcher::new(Config::DEFAULT);
        let mut buf = Vec::new();
        let alphabet = b"abcdeSTU -";
        for _ in 0..5000 {
            let title: String = (0..rng.below(24))
                .map(|_| alphabet[rng.below(alphabet.len())] as char)
                .collect();
            let query: String = (0..1 + rng.below(5))
                .map(|_| alphabet[rng.below(alphabet.len())] as char)
                .collect();
            let Some(words) = fuzzy_words(&query) else {
                continue;
            };
            let pattern = Pattern::new(
                &query,
                CaseMatching::Ignore,
                Normalization::Smart,
                AtomKind::Fuzzy,
            );
            let nucleo = pattern
                .score(Utf32Str::new(&title, &mut buf), &mut matcher)
                .is_some();
            let lower = title.to_ascii_lowercase();
            assert_eq!(
                subsequences(lower.as_bytes(), &words),
                nucleo,
                "title {title:?} query {query:?}"
            );
        }
    }

    #[test]
    fn a_title_holding_the_words_is_a_match_above_the_floor() {
        let mut rng = crate::test_rng::TestRng::new(11);
        let mut matcher = Matcher::new(Config::DEFAULT);
        let mut buf = Vec::new();
        let alphabet = b"abcdeSTU -_/.";
        let mut tried = 0;
        for _ in 0..20_000 {
            let title: String = (0..rng.below(60))
                .map(|_| alphabet[rng.below(alphabet.len())] as char)
                .collect();
            // Words cut out of the title (so it holds them), one to three of them.
            let mut query = String::new();
            for _ in 0..1 + rng.below(3) {
                if title.len() < 2 {
                    break;
                }
                let from = rng.below(title.len() - 1);
                let to = (from + 1 + rng.below(8)).min(title.len());
                query.push_str(title[from..to].trim());
                query.push(' ');
            }
            let Some(words) = fuzzy_words(&query) else {
                continue;
            };
            let lower = title.to_ascii_lowercase();
            if !contains_words(lower.as_bytes(), &words) {
                continue;
            }
            tried += 1;
            let pattern = Pattern::new(
                &query,
                CaseMatching::Ignore,
                Normalization::Smart,
                AtomKind::Fuzzy,
            );
            let perfect = perfect_score(&pattern, &query, &mut matcher);
            let (quality, hit) = fuzzy(&pattern, &title, perfect, &mut matcher, &mut buf);
            assert!(
                hit && quality >= FUZZY_FLOOR,
                "title {title:?} query {query:?}: {quality}"
            );
        }
        assert!(tried > 10_000, "{tried}");
    }

    #[test]
    fn character_masks_only_ever_let_matches_through() {
        let need = query_mask("Dark m");
        assert_eq!(need & char_mask("add a dark mode toggle"), need);
        assert_ne!(need & char_mask("tokenizer"), need);
        assert_eq!(
            query_mask("résumé"),
            0,
            "non-ASCII queries are not filtered"
        );
        assert_eq!(
            char_mask("café"),
            u64::MAX,
            "normalization may match anything"
        );
        assert_eq!(query_mask("a\\ b"), 0);
        assert_eq!(query_mask(""), 0);
    }
}
