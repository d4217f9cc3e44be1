//! Fuzzy file rows for the `@` popup.
//!
//! The caller owns the file walk (it is I/O); this module only scores. Paths are converted to
//! matcher strings once, when the index is built, so a keystroke costs one scoring pass, and
//! match indices (for highlighting) are computed only for the rows that will be shown. Haystacks
//! are built one code point per element, so nucleo's indices are plain `char` indices into the
//! path.

use nucleo::pattern::{AtomKind, CaseMatching, Normalization, Pattern};
use nucleo::{Config, Matcher, Utf32String};

/// A file the popup can offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRow {
    /// Relative path, as supplied by the caller.
    pub path: String,
    /// `char` indices of `path` that matched, ascending.
    pub indices: Vec<u32>,
    /// The matcher's score (higher is better); rows are sorted by it.
    pub score: u32,
}

/// Relative paths prepared for repeated matching.
#[derive(Debug, Clone, Default)]
pub struct FileIndex {
    entries: Vec<(String, Utf32String)>,
}

impl FileIndex {
    /// An index of `paths`, each a path relative to the cwd, in the order given.
    pub fn new<I, S>(paths: I) -> FileIndex
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let entries = paths
            .into_iter()
            .map(Into::into)
            .map(|path: String| {
                let hay = if path.is_ascii() {
                    Utf32String::Ascii(path.clone().into_boxed_str())
                } else {
                    Utf32String::Unicode(path.chars().collect())
                };
                (path, hay)
            })
            .collect();
        FileIndex { entries }
    }

    /// How many paths it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no path.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A reusable matcher (nucleo's scratch space is large; keep one per popup).
#[derive(Debug)]
pub struct FileMatcher {
    matcher: Matcher,
}

impl Default for FileMatcher {
    fn default() -> Self {
        FileMatcher {
            matcher: Matcher::new(Config::DEFAULT.match_paths()),
        }
    }
}

impl Clone for FileMatcher {
    fn clone(&self) -> Self {
        FileMatcher::default()
    }
}

impl FileMatcher {
    /// The best `limit` rows for `query`, best first (ties: shorter path, then path order). An
    /// empty query matches nothing: listing arbitrary files is noise.
    pub fn best(&mut self, index: &FileIndex, query: &str, limit: usize) -> Vec<FileRow> {
        // Fuzzy atoms without nucleo's `^ $ ! '` syntax: paths use those characters literally.
        let pattern = Pattern::new(
            query,
            CaseMatching::Smart,
            Normalization::Smart,
            AtomKind::Fuzzy,
        );
        if pattern.atoms.is_empty() || limit == 0 {
            return Vec::new();
        }
        let mut scored: Vec<(u32, usize)> = index
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, (_, hay))| {
                pattern
                    .score(hay.slice(..), &mut self.matcher)
                    .map(|s| (s, i))
            })
            .collect();
        let order = |a: &(u32, usize), b: &(u32, usize)| {
            let (pa, pb) = (&index.entries[a.1].0, &index.entries[b.1].0);
            b.0.cmp(&a.0).then(pa.len().cmp(&pb.len())).then(pa.cmp(pb))
        };
        if scored.len() > limit {
            scored.select_nth_unstable_by(limit - 1, order);
            scored.truncate(limit);
        }
        scored.sort_unstable_by(order);
        scored
            .into_iter()
            .map(|(score, i)| {
                let (path, hay) = &index.entries[i];
                let mut indices = Vec::new();
                pattern.indices(hay.slice(..), &mut self.matcher, &mut indices);
                indices.sort_unstable();
                indices.dedup();
                FileRow {
                    path: path.clone(),
                    indices,
                    score,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzzy_rows_are_score_sorted_with_indices() {
        let index = FileIndex::new([
            "src/main.rs",
            "src/tui/popup.rs",
            "README.md",
            "tests/tui/popup.rs",
        ]);
        let rows = FileMatcher::default().best(&index, "popup", 10);
        let paths: Vec<&str> = rows.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["src/tui/popup.rs", "tests/tui/popup.rs"]);
        assert_eq!(rows[0].indices, vec![8, 9, 10, 11, 12]);
        assert!(FileMatcher::default().best(&index, "", 10).is_empty());
        assert!(FileMatcher::default().best(&index, "zzz", 10).is_empty());
    }

    #[test]
    fn indices_are_char_indices_for_non_ascii() {
        let index = FileIndex::new(["dóc/ñame.txt"]);
        let rows = FileMatcher::default().best(&index, "name", 10);
        assert_eq!(rows.len(), 1);
        let chars: Vec<char> = rows[0].path.chars().collect();
        let hit: String = rows[0].indices.iter().map(|&i| chars[i as usize]).collect();
        assert_eq!(hit, "ñame");
    }

    #[test]
    fn special_characters_are_literal() {
        let index = FileIndex::new(["a/$weird!.rs", "a/plain.rs"]);
        let rows = FileMatcher::default().best(&index, "$weird!", 10);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].path, "a/$weird!.rs");
    }

    #[test]
    fn many_files_keep_the_best_few() {
        let paths: Vec<String> = (0..20_000)
            .map(|i| format!("crates/c{}/src/module_{i}.rs", i % 97))
            .collect();
        let index = FileIndex::new(paths);
        let mut matcher = FileMatcher::default();
        let started = std::time::Instant::now();
        let rows = matcher.best(&index, "mod1234", 20);
        let elapsed = started.elapsed();
        assert_eq!(rows.len(), 20);
        assert!(rows.windows(2).all(|w| w[0].score >= w[1].score));
        // Generous bound: a debug build on a loaded CI box, still far below a keystroke's worth.
        assert!(elapsed.as_millis() < 2_000, "took {elapsed:?}");
    }
}
