//! The best hits of a search, kept as they are offered.
//!
//! Purpose: a bounded top-k heap instead of sorting every match, with lazy tie-breaks, and the
//! bound on recency that lets a row be turned away without scoring it. Invariant: the hits kept
//! are the best `limit` of those offered, best first, ties broken by recency then id. Proof:
//! `tests/discovery/search.rs` (rankings over the demo home and a generated one).

use super::rank::{self, Matches};
use super::rows::SessionInfo;

/// An upper bound of the recency of a row active at `last_activity`: the recency of a row at
/// least as recent, computed at most 256 bounds ago (`slot`), else computed here. Rows mostly
/// come newest first, so one `exp` serves many rows.
pub(super) fn recency_at_most(
    slot: &mut Option<(i64, f64, u32)>,
    last_activity: i64,
    now_ms: i64,
) -> f64 {
    match *slot {
        Some((at, recency, uses)) if last_activity <= at && uses < 256 => {
            *slot = Some((at, recency, uses + 1));
            recency
        }
        _ => {
            let recency = rank::recency(last_activity, now_ms);
            *slot = Some((last_activity, recency, 0));
            recency
        }
    }
}

/// A scored hit before it becomes a [`Hit`].
pub(super) struct Ranked<'a> {
    pub(super) score: f64,
    pub(super) info: &'a SessionInfo,
    pub(super) matches: Matches,
}

impl Ranked<'_> {
    /// Best first: higher score, then more recent activity, then id.
    pub(super) fn order(&self, other: &Self) -> std::cmp::Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| other.info.last_activity.cmp(&self.info.last_activity))
            .then_with(|| self.info.id.cmp(&other.info.id))
    }
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.order(other).is_eq()
    }
}
impl Eq for Ranked<'_> {}
impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked<'_> {
    /// Worse is greater, so a max-heap's top is the worst hit kept.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order(other)
    }
}

/// The best `limit` hits offered and how many were offered: memory and work in proportion to
/// what is shown, not to how many sessions matched (a common word matches all of them).
pub(super) struct TopK<'a> {
    pub(super) limit: usize,
    pub(super) heap: std::collections::BinaryHeap<Ranked<'a>>,
    pub(super) offered: usize,
}

impl<'a> TopK<'a> {
    pub(super) fn new(limit: usize) -> TopK<'a> {
        TopK {
            limit,
            heap: std::collections::BinaryHeap::with_capacity(limit.min(4096) + 1),
            offered: 0,
        }
    }

    pub(super) fn push(&mut self, hit: Ranked<'a>) {
        self.offered += 1;
        if self.heap.len() < self.limit {
            self.heap.push(hit);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if hit.order(&worst).is_lt() {
                *worst = hit;
            }
        }
    }

    /// Whether as many hits as shown are kept already (only then can a row be turned away).
    pub(super) fn is_full(&self) -> bool {
        self.heap.len() >= self.limit
    }

    /// Whether `hit` would be kept now.
    pub(super) fn would_take(&self, hit: &Ranked<'_>) -> bool {
        if !self.is_full() {
            return true;
        }
        self.heap
            .peek()
            .is_some_and(|worst| hit.order(worst).is_lt())
    }

    pub(super) fn into_best_first(self) -> Vec<Ranked<'a>> {
        self.heap.into_sorted_vec()
    }
}
