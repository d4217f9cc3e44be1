//! The walk of one search over the in-memory rows: each row's fields matched, completed with
//! its full-text qualities, scored and offered to the best hits.
//!
//! Purpose: the inner loop of a search, where most of its time goes, in one place: the cheap
//! checks first (character masks, plain subsequences, a title certain to match), then nucleo,
//! then a bound that turns away a row the kept hits cannot take without computing its score.
//! Invariant: the agent's own session and sessions the caller's listing does not hold are
//! never offered; a row is offered only when a field matched (or the query is empty); a row
//! turned away on a bound could not have been kept. Proof: the prefilter tests in
//! [`super::matching`] and `tests/discovery/search.rs`.

use super::matching::{contains_words, cwd_match, fuzzy, id_prefix, subsequences};
use super::rank::{self, Matches};
use super::rows::SessionInfo;
use super::top::{recency_at_most, Ranked, TopK};
use super::SearchQuery;
use crate::session::title::own_words_of_title;
use nucleo_matcher::pattern::Pattern;
use nucleo_matcher::Matcher;
use std::collections::{HashMap, HashSet};

/// What a search matches rows against, fixed for the whole walk.
/// Rows are borrowed for `'a` (the hits kept hold them), the rest only for `'q`.
pub(super) struct Scan<'a, 'q> {
    /// The search.
    pub(super) query: &'q SearchQuery,
    /// The sessions the caller lists (`None`: all).
    pub(super) listed: Option<&'q HashSet<String>>,
    /// The query text, trimmed, and lower-cased.
    pub(super) text: &'q str,
    pub(super) lower: &'q str,
    /// The in-memory rows and their title and id arenas.
    pub(super) rows: &'a [SessionInfo],
    pub(super) titles: &'q [u8],
    pub(super) ids: &'q [u8],
    /// Full-text qualities per session rowid: (conversation, heading row, best chunk).
    pub(super) fts: &'q HashMap<i64, (f64, f64, i64)>,
    /// One flag per row of `rows`: a full-text hit.
    pub(super) fts_here: &'q [bool],
    /// The query as nucleo's pattern, and the score a perfect title would get.
    pub(super) pattern: &'q Pattern,
    pub(super) perfect: u32,
    /// Each distinct cwd's (substring score, whether it is the agent's), by `cwd_key`.
    pub(super) cwd_scores: &'q [(f64, bool)],
    /// The query's character mask and its words for the title prefilters.
    pub(super) need: u64,
    pub(super) words: &'q Option<Vec<Vec<u8>>>,
}

/// What a walk gathers: the best hits, the rows that matched in memory (the next, narrower
/// query walks only them), and the scratch the matching reuses.
pub(super) struct Walk<'a> {
    pub(super) scored: TopK<'a>,
    pub(super) matched: Vec<u32>,
    /// See [`recency_at_most`].
    recency_bound: Option<(i64, f64, u32)>,
    buf: Vec<char>,
}

impl<'a> Walk<'a> {
    /// A walk keeping `limit` hits; `matched` is a spare buffer (cleared).
    pub(super) fn new(limit: usize, mut matched: Vec<u32>) -> Walk<'a> {
        matched.clear();
        Walk {
            scored: TopK::new(limit),
            matched,
            recency_bound: None,
            buf: Vec::new(),
        }
    }
}

impl<'a> Scan<'a, '_> {
    /// Whether `info` may be a hit at all (not the agent's own session, and listed).
    fn keep(&self, info: &SessionInfo) -> bool {
        self.query.agent.as_deref() != Some(info.id.as_str())
            && self.listed.is_none_or(|l| l.contains(&info.id))
    }

    /// Whether `info` is in the agent's own cwd.
    fn same_cwd(&self, info: &SessionInfo) -> bool {
        self.query.cwd.is_some()
            && match self.cwd_scores.get(info.cwd_key as usize) {
                Some(&(_, same)) => same,
                None => info.cwd == self.query.cwd,
            }
    }

    /// The score of a row that matched `m`, or `None` when it is no hit.
    fn score_row(&self, info: &SessionInfo, m: Matches) -> Option<f64> {
        if !self.text.is_empty() && !m.any() {
            return None;
        }
        if !self.keep(info) {
            return None;
        }
        Some(rank::score(
            &m,
            info.last_activity,
            self.query.now_ms,
            self.same_cwd(info),
        ))
    }

    /// Walks the rows: all of them, or the `narrow` ones the previous query matched plus the
    /// full-text hits at `fts_positions` outside them (they still count).
    pub(super) fn walk(
        &self,
        walk: &mut Walk<'a>,
        narrow: Option<&[u32]>,
        fts_positions: &[u32],
        matcher: &mut Matcher,
    ) {
        match narrow {
            Some(indices) => {
                for &i in indices {
                    self.consider(walk, i as usize, true, matcher);
                }
                if !fts_positions.is_empty() {
                    let mut listed_here = vec![false; self.rows.len()];
                    for &i in indices {
                        listed_here[i as usize] = true;
                    }
                    for &i in fts_positions {
                        if !listed_here[i as usize] {
                            self.consider(walk, i as usize, false, matcher);
                        }
                    }
                }
            }
            None => {
                for i in 0..self.rows.len() {
                    self.consider(walk, i, true, matcher);
                }
            }
        }
    }

    /// Offers a full-text hit on a session indexed after the in-memory copy was taken.
    pub(super) fn offer_fetched(&self, walk: &mut Walk<'a>, info: &'a SessionInfo) {
        let (conversation, heading, _) = self.fts[&info.rowid];
        let m = Matches {
            conversation,
            first_prompt: heading,
            ..Matches::default()
        };
        if let Some(score) = self.score_row(info, m) {
            walk.scored.push(Ranked {
                score,
                info,
                matches: m,
            });
        }
    }

    /// One row: its in-memory fields matched (`memory`: not for a full-text hit outside the
    /// narrowed rows), completed with its full-text ones, scored and offered.
    fn consider(&self, walk: &mut Walk<'a>, i: usize, memory: bool, matcher: &mut Matcher) {
        let (text, lower, query) = (self.text, self.lower, self.query);
        let rows: &'a [SessionInfo] = self.rows;
        let info = &rows[i];
        let mut m = Matches::default();
        let mut any = false;
        let mut title_pending = false;
        // The title holds every word as typed: a match above the floor ([`contains_words`]).
        let mut certain = false;
        if memory && !text.is_empty() {
            // A field lacking one of the query's characters cannot match: not even tried.
            let need = self.need;
            let [title_mask, id_mask, cwd_mask] = info.masks.map(|have| have & need == need);
            if info.title.is_some() && title_mask {
                // An ASCII title that lacks one of the words in order cannot match.
                let hay = info
                    .title_span
                    .map(|(at, len)| &self.titles[at as usize..(at + len) as usize]);
                title_pending = match (hay, self.words) {
                    (Some(hay), Some(words)) => {
                        certain = contains_words(hay, words);
                        certain || subsequences(hay, words)
                    }
                    _ => true,
                };
            }
            if id_mask {
                let id = match info.id_span {
                    Some((at, len)) => &self.ids[at as usize..(at + len) as usize],
                    None => info.id_lower.as_bytes(),
                };
                let (id, id_hit) = id_prefix(id, info.own_start, lower.as_bytes());
                m.id = id;
                any |= id_hit;
            }
            if let (Some(cwd), true) = (&info.cwd_lower, cwd_mask) {
                m.cwd = match self.cwd_scores.get(info.cwd_key as usize) {
                    Some(&(score, _)) => score,
                    None => cwd_match(cwd, lower),
                };
                any |= m.cwd > 0.0;
            }
        }
        let is_fts = self.fts_here.get(i).copied().unwrap_or(false);
        let (conversation, heading) = match is_fts.then(|| self.fts.get(&info.rowid)).flatten() {
            Some(&(conversation, heading, _)) => (conversation, heading),
            None => (0.0, 0.0),
        };
        m.conversation = conversation;
        if title_pending {
            // A title certain to match: when even a perfect title could not lift the row
            // into the best hits kept so far, it is counted without being scored (the rows
            // come newest first, so most old rows stop here for a word every title holds).
            if certain && walk.scored.is_full() {
                if !self.keep(info) {
                    // Never a hit (the agent's own or an unlisted session).
                    walk.matched.push(i as u32);
                    return;
                }
                let recency =
                    recency_at_most(&mut walk.recency_bound, info.last_activity, query.now_ms);
                let best_case = Matches { title: 1.0, ..m };
                let ranked = Ranked {
                    score: rank::score_with_recency(&best_case, recency, self.same_cwd(info)),
                    info,
                    matches: best_case,
                };
                if !walk.scored.would_take(&ranked) {
                    walk.matched.push(i as u32);
                    walk.scored.offered += 1;
                    return;
                }
            }
            // The person's own words: a label the session referenced is no title match.
            let title = own_words_of_title(info.title.as_deref().unwrap_or_default());
            let (q, hit) = fuzzy(self.pattern, title, self.perfect, matcher, &mut walk.buf);
            m.title = q;
            any |= hit;
        }
        if any {
            walk.matched.push(i as u32);
        }
        // The heading row holds the title and the first prompt: a word match there that
        // fuzzy title matching missed is the first prompt's.
        if heading > 0.0 && m.title == 0.0 {
            m.first_prompt = heading;
        }
        if !(m.any() || text.is_empty()) {
            return;
        }
        if walk.scored.is_full() {
            // Turned away on a bound when it cannot be kept: no `exp` for most rows.
            if !self.keep(info) {
                return;
            }
            let recency =
                recency_at_most(&mut walk.recency_bound, info.last_activity, query.now_ms);
            let bound = Ranked {
                score: rank::score_with_recency(&m, recency, self.same_cwd(info)),
                info,
                matches: m,
            };
            if !walk.scored.would_take(&bound) {
                walk.scored.offered += 1;
                return;
            }
        }
        if let Some(score) = self.score_row(info, m) {
            walk.scored.push(Ranked {
                score,
                info,
                matches: m,
            });
        }
    }
}
