//! A map bounded by the bytes its values cost, least recently used dropped first.
//!
//! Purpose: the store keeps folded conversations between reads, and what they may cost is a
//! number of bytes, not a number of entries (one big source outweighs a thousand small ones).
//! This room is that bound and nothing else; what an entry is, and what it costs, the caller
//! says ([`ByteLru::put`] takes the cost).
//!
//! Invariant: after every call the costs of the entries held sum to [`ByteLru::bytes`], that sum
//! is at most `max_bytes`, and no entry costs more than `max_entry`; what has to go to keep it so
//! is the entry used least recently (a [`ByteLru::put`] counts as a use; a [`ByteLru::take`]
//! removes). Eviction is written once ([`ByteLru::evict_over_bound`]) and runs after every
//! insertion and every change of the bounds. Proof: `lru::tests` (a random sequence of puts,
//! takes and bound changes against a plain model list), and at the store's level
//! `the_conversation_cache_is_bounded_by_bytes` and `tests/session/reliability_conversation_cache.rs`.
//!
//! The least recently used entry is the first of an ordered index of last uses (a `BTreeMap`
//! from use clock to key): a cache of thousands of small conversations (a home of 100,000
//! short sessions, read once each by the indexer) evicts in `O(log n)`, not by a scan of the
//! map per insertion.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Values by key, bounded by the sum of their costs.
pub(super) struct ByteLru<K, V> {
    entries: HashMap<K, Slot<V>>,
    /// Each entry's key by its `used` clock: the first is the least recently used.
    order: BTreeMap<u64, K>,
    /// Advances on every use; an entry's `used` is the clock at its last use.
    clock: u64,
    /// The sum of the entries' `bytes`.
    bytes: usize,
    max_bytes: usize,
    max_entry: usize,
}

struct Slot<V> {
    value: V,
    bytes: usize,
    used: u64,
}

impl<K: Eq + Hash + Clone, V> ByteLru<K, V> {
    /// An empty map holding at most `max_bytes` in all and `max_entry` for one value.
    pub(super) fn new(max_bytes: usize, max_entry: usize) -> Self {
        ByteLru {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
            bytes: 0,
            max_bytes,
            max_entry,
        }
    }

    /// Whether a value costing `bytes` may be kept at all (at most `max_entry`).
    pub(super) fn admits(&self, bytes: usize) -> bool {
        bytes <= self.max_entry
    }

    /// Removes and returns the value under `key`.
    pub(super) fn take<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.entries.remove(key)?;
        self.order.remove(&slot.used);
        self.bytes -= slot.bytes;
        Some(slot.value)
    }

    /// Keeps `value` (costing `bytes`) under `key` as the most recently used entry, replacing
    /// what the key held; then drops the least recently used entries while over the bound (the
    /// new one too, if it alone is). A value over `max_entry` is not kept.
    pub(super) fn put(&mut self, key: K, value: V, bytes: usize) {
        if !self.admits(bytes) {
            self.take(&key);
            return;
        }
        self.clock += 1;
        let slot = Slot {
            value,
            bytes,
            used: self.clock,
        };
        self.bytes += bytes;
        self.order.insert(self.clock, key.clone());
        if let Some(old) = self.entries.insert(key, slot) {
            self.order.remove(&old.used);
            self.bytes -= old.bytes;
        }
        self.evict_over_bound();
    }

    /// New bounds: entries over `max_entry` are dropped, then the least recently used ones
    /// while over `max_bytes`.
    pub(super) fn set_limits(&mut self, max_bytes: usize, max_entry: usize) {
        self.max_bytes = max_bytes;
        self.max_entry = max_entry;
        let over: Vec<K> = self
            .entries
            .iter()
            .filter(|(_, slot)| slot.bytes > max_entry)
            .map(|(key, _)| key.clone())
            .collect();
        for key in over {
            self.take(&key);
        }
        self.evict_over_bound();
    }

    /// How many entries are held.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// What the entries held cost in all.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drops the least recently used entries until the sum is within `max_bytes`.
    fn evict_over_bound(&mut self) {
        while self.bytes > self.max_bytes {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some(slot) = self.entries.remove(&oldest) {
                self.bytes -= slot.bytes;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ByteLru;
    use crate::test_rng::TestRng;

    /// The model: (key, cost) from least to most recently used.
    fn model_put(model: &mut Vec<(u8, usize)>, key: u8, bytes: usize, max: (usize, usize)) {
        model.retain(|(k, _)| *k != key);
        if bytes <= max.1 {
            model.push((key, bytes));
        }
        while model.iter().map(|(_, b)| b).sum::<usize>() > max.0 {
            model.remove(0);
        }
    }

    #[test]
    fn the_map_matches_a_model_list_and_keeps_its_bound() {
        let mut rng = TestRng::new(22);
        for _ in 0..200 {
            let mut max = (1 + rng.below(100), 1 + rng.below(60));
            let mut lru: ByteLru<u8, usize> = ByteLru::new(max.0, max.1);
            let mut model: Vec<(u8, usize)> = Vec::new();
            for _ in 0..200 {
                let key = rng.below(8) as u8;
                match rng.below(10) {
                    0..=5 => {
                        let bytes = rng.below(70);
                        lru.put(key, bytes, bytes);
                        model_put(&mut model, key, bytes, max);
                    }
                    6..=8 => {
                        let taken = lru.take(&key);
                        let at = model.iter().position(|(k, _)| *k == key);
                        assert_eq!(taken, at.map(|at| model.remove(at).1));
                    }
                    _ => {
                        max = (1 + rng.below(100), 1 + rng.below(60));
                        lru.set_limits(max.0, max.1);
                        model.retain(|(_, b)| *b <= max.1);
                        while model.iter().map(|(_, b)| b).sum::<usize>() > max.0 {
                            model.remove(0);
                        }
                    }
                }
                let sum: usize = model.iter().map(|(_, b)| b).sum();
                assert_eq!((lru.len(), lru.bytes()), (model.len(), sum));
                assert!(lru.bytes() <= max.0);
                // The order of uses names every entry once, least recent first, as the model.
                let order: Vec<u8> = lru.order.values().copied().collect();
                let keys: Vec<u8> = model.iter().map(|(k, _)| *k).collect();
                assert_eq!(order, keys);
            }
        }
    }
}
