//! Full-text rows for a query: FTS5 over the index's distinct words, and bm25 where it is cheap.
//!
//! Purpose: turn a query's words into an FTS5 expression (each quoted, all required, the last a
//! prefix) and find the newest matching rows, ranked by bm25 over the query's selective words
//! only. Invariant: query text is only ever words to FTS5 (no operator syntax gets through).
//! Proof: the expression test below; `tests/discovery/search.rs`.

use rusqlite::{params, Connection};
use std::collections::HashMap;

/// Full-text rows considered per query (best bm25 first).
pub(super) const FTS_ROWS: usize = 1000;

/// The words of a query as full-text terms: lower-cased, at most 16, each with whether it is
/// matched as a prefix (only the word being typed, and only from three characters on: a short
/// prefix expands to thousands of terms whose lists FTS5 must merge).
pub fn query_terms(text: &str) -> Vec<(String, bool)> {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .take(16)
        .collect();
    let last = words.len().saturating_sub(1);
    words
        .iter()
        .enumerate()
        .map(|(i, word)| (word.to_lowercase(), i == last && word.chars().count() >= 3))
        .collect()
}

/// Terms as an FTS5 expression: each quoted (a prefix marked `*`), all required. `None` when
/// there are none.
pub(super) fn expression(terms: &[(String, bool)]) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    let quoted: Vec<String> = terms
        .iter()
        .map(|(word, prefix)| format!("\"{word}\"{}", if *prefix { "*" } else { "" }))
        .collect();
    Some(quoted.join(" AND "))
}

/// The words of a query as an FTS5 expression (see [`query_terms`]). `None` when the query has
/// no word characters.
#[cfg(test)]
fn fts_expression(text: &str) -> Option<String> {
    expression(&query_terms(text))
}

/// (row, session rowid, row kind, bm25) of the newest matching rows. Rows are written oldest
/// activity first (and appended chunks last), so the newest rows are the recently active
/// sessions.
///
/// FTS5's `bm25()` first counts, for every term of the expression, all the rows that hold it
/// (its inverse document frequency), which for a word in every session is a walk over 100,000
/// rows per query. So the rows are found without it, and bm25 is computed over the query's
/// selective terms only: whole words held by fewer than [`FTS_ROWS`] rows. A word held by more
/// weighs next to nothing in bm25 anyway (FTS5 floors the weight of a word in half the rows at
/// ~0); when no term is selective every row gets that floor (a match, ranked by recency).
pub(super) fn fts_hits(
    conn: &Connection,
    text: &str,
) -> rusqlite::Result<Vec<(i64, i64, i64, f64)>> {
    let terms = query_terms(text);
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    // The owner join sits outside the limited subquery: FTS5 walks its lists newest row first
    // and stops at the limit only when it alone answers the ORDER BY.
    let mut stmt = conn.prepare_cached(
        "SELECT f.rowid, o.sid, o.kind FROM
            (SELECT rowid FROM doc WHERE doc MATCH ?1 ORDER BY rowid DESC LIMIT ?2) AS f
         JOIN owner AS o ON o.row = f.rowid",
    )?;
    let mut newest = |terms: &[(String, bool)]| -> rusqlite::Result<Vec<(i64, i64, i64)>> {
        let expr = expression(terms).expect("terms");
        stmt.query_map(params![expr, FTS_ROWS as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect()
    };
    // A word being typed is a prefix, and FTS5 answers a prefix by merging the whole list of
    // every word it starts (`the*`: ~25 ms over 100,000 sessions) before it can stop at the
    // limit. So the whole word is tried first: when it alone fills the window (a complete,
    // common word), the window is its rows and the longer words are not looked up.
    let whole: Vec<(String, bool)> = terms.iter().map(|(w, _)| (w.clone(), false)).collect();
    let mut found = newest(&whole)?;
    if found.len() < FTS_ROWS && terms.iter().any(|(_, prefix)| *prefix) {
        found = newest(&terms)?;
    }
    let Some(oldest) = found.iter().map(|f| f.0).min() else {
        return Ok(Vec::new());
    };
    let mut selective = Vec::new();
    for (word, prefix) in &terms {
        if *prefix {
            continue;
        }
        let one = expression(&[(word.clone(), false)]).expect("a word");
        let mut count = conn.prepare_cached(
            "SELECT count(*) FROM (SELECT rowid FROM doc WHERE doc MATCH ?1 LIMIT ?2)",
        )?;
        let held: i64 = count.query_row(params![one, FTS_ROWS as i64], |r| r.get(0))?;
        if (held as usize) < FTS_ROWS {
            selective.push((word.clone(), false));
        }
    }
    let mut ranks: HashMap<i64, f64> = HashMap::new();
    if let Some(rare) = expression(&selective) {
        // Fewer than FTS_ROWS rows hold these words: their bm25 is cheap to compute.
        let mut stmt = conn.prepare_cached(
            "SELECT rowid, bm25(doc) FROM doc WHERE doc MATCH ?1 AND rowid >= ?2",
        )?;
        let rows = stmt.query_map(params![rare, oldest], |r| Ok((r.get(0)?, r.get(1)?)))?;
        for row in rows {
            let (rowid, bm25): (i64, f64) = row?;
            ranks.insert(rowid, bm25);
        }
    }
    Ok(found
        .into_iter()
        .map(|(row, sid, kind)| {
            (
                row,
                sid,
                kind,
                ranks.get(&row).copied().unwrap_or(BM25_FLOOR),
            )
        })
        .collect())
}

/// The bm25 of a row matched only by words most rows hold (FTS5's own floor for such a word's
/// weight, 1e-6, times a typical term-frequency factor).
pub(super) const BM25_FLOOR: f64 = -1e-6;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_become_quoted_prefix_terms() {
        assert_eq!(
            fts_expression("Dark mode").as_deref(),
            Some("\"dark\" AND \"mode\"*")
        );
        assert_eq!(fts_expression("to").as_deref(), Some("\"to\""));
        // FTS syntax in a query is only ever words.
        assert_eq!(
            fts_expression("a\" OR b* NEAR(").as_deref(),
            Some("\"a\" AND \"or\" AND \"b\" AND \"near\"*")
        );
        assert_eq!(fts_expression("  -- ?? "), None);
        assert_eq!(fts_expression(""), None);
    }
}
