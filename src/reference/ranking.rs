//! Filtering and ranking candidates (SPEC §3.3 steps 3–6) fast enough for every keystroke.
//!
//! With 100,000 sessions, doing §3.3 literally per keystroke (lowercase every id and cwd, filter,
//! stable-sort by group) costs tens of milliseconds. `RankIndex` does the query-independent work
//! once per session list — the store hands out the same `Arc` while nothing changed, so the index
//! is keyed by that pointer and by the agent — and keeps:
//! - the rank order (same-cwd group, then no-cwd, then the rest, list order within each), so an
//!   empty query costs `limit` steps;
//! - every id lowercased, and every distinct cwd lowercased once, so a query tests each cwd once
//!   and each id once;
//! - the complete match list of the previous query: typing usually extends the query, and a
//!   session that contains the longer query contains the shorter one, so the next query only
//!   re-tests the previous matches.
//!
//! The result is exactly §3.3's: the same filter (Unicode lowercase, substring of id or cwd) and
//! the same order. The filter rule itself is [`CandidateFilter`], exported so that a view
//! narrowing rows it already has (the popup while a lookup runs) applies the same rule.

use super::identity::AgentIdentity;
use crate::session::SessionSummary;
use std::collections::HashMap;
use std::sync::Arc;

/// No cwd (the index into the distinct cwds).
const NO_CWD: u32 = u32::MAX;

/// The candidate filter of SPEC §3.3 step 4: a session matches a query when the query,
/// Unicode-lowercased, is a substring of its lowercased id or of its lowercased cwd. An empty
/// query matches every session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateFilter {
    needle: Box<str>,
}

impl CandidateFilter {
    /// The filter for `query`.
    pub fn new(query: &str) -> CandidateFilter {
        CandidateFilter {
            needle: lowercase(query),
        }
    }

    /// Whether the query is empty (every session matches).
    pub fn is_empty(&self) -> bool {
        self.needle.is_empty()
    }

    /// Whether the session with this id and cwd matches.
    pub fn matches(&self, id: &str, cwd: Option<&str>) -> bool {
        self.is_empty()
            || self.within(&lowercase(id))
            || cwd.is_some_and(|cwd| self.within(&lowercase(cwd)))
    }

    /// Whether the query is in `lowered`, a field already lowercased by this module's rule.
    fn within(&self, lowered: &str) -> bool {
        lowered.contains(&*self.needle)
    }
}

pub(crate) struct RankIndex {
    list: Arc<Vec<SessionSummary>>,
    agent: AgentIdentity,
    /// Positions in `list`, in rank order, the agent's own session left out.
    order: Vec<u32>,
    /// Lowercased id of `order[k]`.
    ids: Vec<Box<str>>,
    /// Distinct cwd of `order[k]`, or `NO_CWD`.
    cwd_of: Vec<u32>,
    /// Distinct cwds, lowercased.
    cwds: Vec<Box<str>>,
    /// The previous non-empty query and all its matches (indices into `order`).
    last: Option<(String, Vec<u32>)>,
}

impl RankIndex {
    pub(crate) fn new(list: Arc<Vec<SessionSummary>>, agent: &AgentIdentity) -> RankIndex {
        let group = |session: &SessionSummary| match (session.cwd(), agent.cwd.as_deref()) {
            (Some(cwd), Some(own)) if cwd == own => 0,
            (None, _) => 1,
            _ => 2,
        };
        let mut groups: [Vec<u32>; 3] = Default::default();
        for (position, session) in list.iter().enumerate() {
            if session.id() != agent.id {
                groups[group(session)].push(position as u32);
            }
        }
        let order: Vec<u32> = groups.concat();
        let mut cwd_index: HashMap<&str, u32> = HashMap::new();
        let mut cwds = Vec::new();
        let mut ids = Vec::with_capacity(order.len());
        let mut cwd_of = Vec::with_capacity(order.len());
        for &position in &order {
            let session = &list[position as usize];
            ids.push(lowercase(session.id()));
            cwd_of.push(match session.cwd() {
                Some(cwd) => *cwd_index.entry(cwd).or_insert_with(|| {
                    cwds.push(lowercase(cwd));
                    (cwds.len() - 1) as u32
                }),
                None => NO_CWD,
            });
        }
        RankIndex {
            list: list.clone(),
            agent: agent.clone(),
            order,
            ids,
            cwd_of,
            cwds,
            last: None,
        }
    }

    /// Whether this index answers for `list` and `agent`.
    pub(crate) fn serves(&self, list: &Arc<Vec<SessionSummary>>, agent: &AgentIdentity) -> bool {
        Arc::ptr_eq(&self.list, list) && self.agent == *agent
    }

    /// The first `limit` sessions matching `query`, in rank order.
    pub(crate) fn rank(&mut self, query: &str, limit: usize) -> Vec<SessionSummary> {
        let filter = CandidateFilter::new(query);
        if filter.is_empty() {
            return self.take(self.order.iter().enumerate().map(|(k, _)| k as u32), limit);
        }
        let cwd_matches: Vec<bool> = self.cwds.iter().map(|cwd| filter.within(cwd)).collect();
        let matches = |k: u32| {
            let cwd = self.cwd_of[k as usize];
            (cwd != NO_CWD && cwd_matches[cwd as usize]) || filter.within(&self.ids[k as usize])
        };
        let needle = filter.needle.to_string();
        let found: Vec<u32> = match &self.last {
            // Narrowing: whatever matches `needle` matched the shorter query it contains.
            Some((previous, previous_matches)) if needle.contains(previous.as_str()) => {
                previous_matches
                    .iter()
                    .copied()
                    .filter(|&k| matches(k))
                    .collect()
            }
            _ => (0..self.order.len() as u32)
                .filter(|&k| matches(k))
                .collect(),
        };
        let ranked = self.take(found.iter().copied(), limit);
        self.last = Some((needle, found));
        ranked
    }

    fn take(&self, picks: impl Iterator<Item = u32>, limit: usize) -> Vec<SessionSummary> {
        picks
            .take(limit)
            .map(|k| self.list[self.order[k as usize] as usize].clone())
            .collect()
    }
}

/// `str::to_lowercase`, without its allocation-heavy path for the common ASCII case.
fn lowercase(text: &str) -> Box<str> {
    if text.is_ascii() {
        text.to_ascii_lowercase().into_boxed_str()
    } else {
        text.to_lowercase().into_boxed_str()
    }
}

#[cfg(test)]
mod tests {
    use super::CandidateFilter;

    #[test]
    fn the_filter_is_a_lowercase_substring_of_id_or_cwd() {
        let filter = CandidateFilter::new("ÉTÉ");
        assert!(filter.matches("x-été-1", None));
        assert!(filter.matches("x", Some("/home/Été")));
        assert!(!filter.matches("x", None));
        let filter = CandidateFilter::new("Work");
        assert!(filter.matches("a", Some("/WORK/b")));
        assert!(filter.matches("WORKER", Some("/x")));
        assert!(!filter.matches("a", Some("/wo rk")));
        assert!(CandidateFilter::new("").matches("anything", None));
    }
}
