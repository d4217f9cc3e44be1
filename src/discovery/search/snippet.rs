//! A hit's excerpt: a window of a chunk's text around the first word a query term matches.
//!
//! Purpose: FTS5's own `snippet()` evaluates the whole query again for each hit; the row's text
//! alone is one lookup. Invariant: a snippet is one line, cut at characters. Proof: the tests
//! below.

use rusqlite::{Connection, OptionalExtension};

/// Snippet length in tokens.
pub(super) const SNIPPET_TOKENS: usize = 16;

/// The snippet of row `row` (a conversation chunk that matched): a window of its text around
/// the first word a query term matches ([`snippet_of`]). FTS5's own `snippet()` would evaluate
/// the whole query again for the row, and a prefix term expands over the whole index each time
/// (13 ms per snippet for `the*` over 100,000 sessions); the row's text alone is one lookup.
pub(super) fn snippet(
    conn: &Connection,
    terms: &[(String, bool)],
    row: i64,
) -> rusqlite::Result<Option<String>> {
    let mut stmt = conn.prepare_cached("SELECT body FROM chunk WHERE row = ?1")?;
    let body: Option<String> = stmt.query_row([row], |r| r.get(0)).optional()?;
    Ok(body.map(|body| snippet_of(&body, terms, SNIPPET_TOKENS)))
}

/// About `tokens` words of `body` on one line, starting up to three words before the first
/// word that equals a term (or starts with it, for a prefix term), case-insensitively; from the
/// start of `body` when no word does (FTS5 also matched it after folding diacritics). `…` marks
/// a cut at either end.
pub fn snippet_of(body: &str, terms: &[(String, bool)], tokens: usize) -> String {
    // Word spans: maximal runs of alphanumeric characters, as the tokenizer splits them.
    let mut words: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (i, c) in body.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                words.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, body.len()));
    }
    let matches = |word: &str, term: &str, prefix: bool| {
        if word.is_ascii() {
            // No allocation for the common case: compared as bytes, case folded.
            let (word, term) = (word.as_bytes(), term.as_bytes());
            let head = if prefix {
                word.get(..term.len())
            } else {
                Some(word)
            };
            head.is_some_and(|head| head.eq_ignore_ascii_case(term))
        } else {
            let word = word.to_lowercase();
            word == term || (prefix && word.starts_with(term))
        }
    };
    let hit = words.iter().position(|&(s, e)| {
        terms
            .iter()
            .any(|(term, prefix)| matches(&body[s..e], term, *prefix))
    });
    let first = hit.map_or(0, |i| i.saturating_sub(3));
    let last = (first + tokens.max(1)).min(words.len());
    if first >= last {
        return short_keep(body);
    }
    let from = if first == 0 { 0 } else { words[first].0 };
    let to = if last == words.len() {
        body.len()
    } else {
        words[last - 1].1
    };
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    out.push_str(&short_keep(&body[from..to]));
    if to < body.len() && !body[to..].trim().is_empty() {
        out.push('…');
    }
    out
}

/// A one-line excerpt of at most 80 characters.
pub(super) fn short(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= 80 {
        return line;
    }
    let mut out: String = line.chars().take(79).collect();
    out.push('…');
    out
}

/// Whitespace folded to single spaces (a snippet is shown on one line).
pub(super) fn short_keep(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::super::fts::query_terms;
    use super::*;

    #[test]
    fn a_snippet_is_a_window_around_the_first_matching_word() {
        let body = "one two three four five six seven\neight Lexer nine ten eleven twelve";
        assert_eq!(
            snippet_of(body, &query_terms("lexer"), 4),
            "…six seven eight Lexer…",
            "three words before the match, cut marks at both ends"
        );
        // A prefix term matches the start of a word; a whole term only a whole word.
        assert_eq!(
            snippet_of(body, &query_terms("ele"), 5),
            "…Lexer nine ten eleven twelve"
        );
        assert_eq!(snippet_of(body, &query_terms("ele x"), 2), "one two…");
        // No word matches (FTS5 matched after folding diacritics): the start of the text.
        assert_eq!(
            snippet_of("café au lait", &query_terms("cafe"), 16),
            "café au lait"
        );
        assert_eq!(snippet_of("", &query_terms("x"), 16), "");
        assert_eq!(snippet_of("  ?? ", &query_terms("x"), 16), "??");
    }

    #[test]
    fn snippets_and_excerpts_are_one_line() {
        assert_eq!(short("a\n b\tc"), "a b c");
        assert_eq!(short(&"x ".repeat(100)).chars().count(), 80);
    }
}
