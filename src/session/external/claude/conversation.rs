//! The conversation of one Claude Code transcript: the `parentUuid` tree, walked from the
//! newest main-chain record back to the root or the last compaction, with the replies that
//! share an assistant message id merged into one message.
//!
//! Purpose: the fold [`ConversationScan`] does, apart from the record parsing in the parent
//! module. Invariant: one node per record with a uuid, a fixed size each (text lives once, in
//! `items`); the walk visits each node at most once (a cycle ends it); merging a reply's pieces
//! is linear in the reply (each piece found by its hash). Proof: the parent module's tests and
//! `tests/reliability_linear_readers.rs`.

use super::{
    is_marker, is_prompt, parse_line_in, parse_serde, parse_with_message, preserved_segment,
    strip_injected, Message, PreservedSegment, Record, SYNTHETIC_MODEL,
};
use crate::session::external::scan::LineSink;
use crate::session::external::{parse_time, Conversation, Item, ItemKind};
use std::collections::HashMap;

/// A record's `uuid` as a compact key: a canonical (lowercase) UUID as its 128 bits in two
/// words, anything else by its text. Exact either way: no two records share a key unless they
/// share a uuid.
enum Key {
    Uuid((u64, u64)),
    Other(Box<str>),
}

impl Key {
    fn of(text: &str) -> Key {
        let b = text.as_bytes();
        if b.len() == 36 && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-') {
            // The 32 digits, each through the table (an invalid one sets a high bit).
            let mut value: u128 = 0;
            let mut invalid = 0u8;
            for (k, &c) in b.iter().enumerate() {
                if !matches!(k, 8 | 13 | 18 | 23) {
                    let digit = HEX[c as usize];
                    invalid |= digit;
                    value = value << 4 | u128::from(digit & 0x0f);
                }
            }
            if invalid & 0x80 == 0 {
                return Key::Uuid(((value >> 64) as u64, value as u64));
            }
        }
        Key::Other(text.into())
    }
}

/// Each byte's value as a lowercase hexadecimal digit, or `0x80` when it is none.
const HEX: [u8; 256] = {
    let mut table = [0x80u8; 256];
    let mut d = 0;
    while d < 10 {
        table[b'0' as usize + d] = d as u8;
        d += 1;
    }
    let mut d = 0;
    while d < 6 {
        table[b'a' as usize + d] = 10 + d as u8;
        d += 1;
    }
    table
};

/// No node, no item.
const NONE: u32 = u32::MAX;
/// The record was read (not only named as a parent).
const PRESENT: u8 = 1;
/// A compaction boundary: the chain before it is replaced by the summary after it.
const BOUNDARY: u8 = 2;
/// A user or assistant record, or a boundary: one the newest leaf may be.
const CONVERSATIONAL: u8 = 4;

/// Node ids by key. The keys come from the file, so the table's hash is seeded afresh in every
/// process (no file can be written to collide in it), and it is foldhash, not the standard
/// SipHash: interning two keys a record is about a tenth of a heavy session's scan.
type IdTable<K> = HashMap<K, u32, foldhash::fast::RandomState>;

/// One record of the tree: 16 bytes, whatever the record held (its text, if it is part of the
/// conversation, lives in `ConversationScan::items`). Saved packed in 13 bytes
/// ([`packed_nodes`]): a heavy session has tens of thousands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Node {
    parent: u32,
    item: u32,
    /// Position in the file (saturating).
    order: u32,
    flags: u8,
}

const EMPTY: Node = Node {
    parent: NONE,
    item: NONE,
    order: 0,
    flags: 0,
};

/// Builds the main-chain conversation.
///
/// Memory: a record costs its node (16 bytes) and its key in the id table (24 bytes, about 30
/// with the table's slack), plus the text of the records the projection keeps; nothing else of a
/// record is kept, so a session of millions of tiny records stays within a small multiple of
/// its file.
#[derive(Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct ConversationScan {
    /// Ids of canonical UUIDs (24 bytes an entry) and of anything else.
    #[serde(with = "packed_uuids")]
    uuids: IdTable<(u64, u64)>,
    others: IdTable<Box<str>>,
    #[serde(with = "packed_nodes")]
    nodes: Vec<Node>,
    items: Vec<Option<(Item, Option<String>)>>,
    leaf: Option<u32>,
    /// The newest compaction's preserved segment, if it kept one.
    preserved: Option<PreservedSegment>,
    /// Whether a compaction boundary was read (a later part's segment then replaces this one's).
    compacted: bool,
    last_line: Option<u64>,
    last_activity: Option<i64>,
    /// Every record read by serde alone (the reference the walk is tested against).
    serde_only: bool,
}

impl ConversationScan {
    /// Whether a scan read back from disk holds together: every node, item and leaf it names
    /// is one it has (a saved state is checksummed, but a scan indexes by these, so one that
    /// does not is refused rather than trusted).
    pub fn consistent(&self) -> bool {
        let nodes = self.nodes.len();
        let node = |at: u32| at == NONE || (at as usize) < nodes;
        let item = |at: u32| at == NONE || (at as usize) < self.items.len();
        nodes < NONE as usize
            && self.nodes.iter().all(|n| node(n.parent) && item(n.item))
            && self
                .uuids
                .values()
                .chain(self.others.values())
                .all(|&at| (at as usize) < nodes)
            && self.leaf.is_none_or(|at| (at as usize) < nodes)
    }

    /// A scan that reads every record by serde alone, never walking it: the reference the
    /// fast path is compared with (`tests/session/reliability_agent_skim.rs`).
    #[doc(hidden)]
    pub fn serde_only() -> ConversationScan {
        ConversationScan {
            serde_only: true,
            ..ConversationScan::default()
        }
    }

    fn message<'a>(&self, raw: Option<&'a [u8]>) -> Message<'a> {
        if self.serde_only {
            Message::of_serde(raw)
        } else {
            Message::of(raw)
        }
    }

    fn intern(&mut self, uuid: &str) -> u32 {
        self.intern_key(Key::of(uuid))
    }

    fn intern_key(&mut self, key: Key) -> u32 {
        let next = self.nodes.len() as u32;
        let at = *match key {
            Key::Uuid(key) => self.uuids.entry(key).or_insert(next),
            Key::Other(key) => self.others.entry(key).or_insert(next),
        };
        if at == next {
            self.nodes.push(EMPTY);
        }
        at
    }

    fn lookup(&self, uuid: &str) -> u32 {
        match Key::of(uuid) {
            Key::Uuid(key) => self.uuids.get(&key),
            Key::Other(key) => self.others.get(&key),
        }
        .copied()
        .unwrap_or(NONE)
    }
}

impl LineSink for ConversationScan {
    fn line(&mut self, index: u64, bytes: &[u8]) -> bool {
        let parsed = if self.serde_only {
            parse_serde(bytes).map(|line| (line, None))
        } else {
            parse_with_message(bytes, wanted)
        };
        self.fold(index, parsed);
        true
    }

    /// The record's walk finds where its line ends (`record::parse_line_in`), so the reader
    /// needs no pass of its own over the line's bytes to find it.
    fn line_in(&mut self, index: u64, rest: &[u8]) -> Option<(usize, bool)> {
        if self.serde_only {
            return None;
        }
        let (line, walked, len) = parse_line_in(rest, wanted)?;
        self.fold(index, Some((line, walked)));
        Some((len, true))
    }
}

/// Whether the record's message will be read, given its fields before the message.
/// The message of a user or assistant record of the main chain is read in the walk's pass over
/// the line (most of a heavy line's bytes are its message and the tool result stored beside
/// it): the same message `Message::of` gives. Claude Code writes an assistant record's
/// `message` before its `type`, so the message of a record whose type is not known yet is read
/// in place too: records with a message are user or assistant records, and another's message
/// is dropped unused.
fn wanted(line: &Record<'_>) -> bool {
    matches!(line.kind.as_deref(), None | Some("user" | "assistant"))
        && line.is_sidechain != Some(true)
}

impl ConversationScan {
    /// Folds in line `index`, as parsed (`None`: not a record).
    fn fold(&mut self, index: u64, parsed: Option<(Record<'_>, Option<Message<'_>>)>) {
        self.last_line = Some(index);
        let Some((line, mut walked)) = parsed else {
            return;
        };
        let time = line.timestamp.as_deref().and_then(parse_time);
        if let Some(t) = time {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
        let Some(uuid) = line.uuid.as_deref() else {
            return;
        };
        if line.is_sidechain == Some(true) {
            return;
        }
        // Past four billion records the table is full: the rest are not part of the tree.
        if self.nodes.len() >= (NONE - 1) as usize {
            return;
        }
        let boundary = line.kind.as_deref() == Some("system")
            && line.subtype.as_deref() == Some("compact_boundary");
        if boundary {
            // A later compaction without a preserved segment replaces an earlier one with it.
            self.preserved = preserved_segment(&line);
            self.compacted = true;
        }
        let conversational = boundary || matches!(line.kind.as_deref(), Some("user" | "assistant"));
        let time = time.unwrap_or(0);
        let item = match line.kind.as_deref() {
            Some("user") if line.is_compact_summary == Some(true) => {
                let message = walked.take().unwrap_or_else(|| self.message(line.message));
                Some((
                    Item {
                        kind: ItemKind::Summary,
                        text: message.text.trim().to_string(),
                        time,
                    },
                    None,
                ))
            }
            Some("user") if is_prompt(&line) => {
                let message = walked.take().unwrap_or_else(|| self.message(line.message));
                let text = strip_injected(&message.text);
                (!message.only_tools && !is_marker(&text)).then_some((
                    Item {
                        kind: ItemKind::User,
                        text,
                        time,
                    },
                    None,
                ))
            }
            Some("assistant") => {
                let message = walked.take().unwrap_or_else(|| self.message(line.message));
                (message.model.as_deref() != Some(SYNTHETIC_MODEL)).then(|| {
                    (
                        Item {
                            kind: ItemKind::Assistant,
                            text: message.text.trim().to_string(),
                            time,
                        },
                        message.id.map(|id| id.into_owned()),
                    )
                })
            }
            _ => None,
        };
        let at = self.intern(uuid);
        let parent = line.parent_uuid.as_deref().map_or(NONE, |p| self.intern(p));
        // Only conversation records and boundaries can be the newest leaf; progress, attachments
        // and bookkeeping records hang off the chain without moving it.
        if item.is_some() || boundary {
            self.leaf = Some(at);
        }
        let item = match item {
            Some(item) => {
                self.items.push(Some(item));
                (self.items.len() - 1) as u32
            }
            None => NONE,
        };
        let flags = PRESENT
            | if boundary { BOUNDARY } else { 0 }
            | if conversational { CONVERSATIONAL } else { 0 };
        self.nodes[at as usize] = Node {
            parent,
            item,
            order: u32::try_from(index).unwrap_or(u32::MAX),
            flags,
        };
    }
}

impl ConversationScan {
    /// The newest conversation record at or below `leaf` (by file position), following children.
    fn descend(&self, leaf: u32) -> u32 {
        // Children as one flat array (offsets by parent), built in two passes over the nodes.
        let n = self.nodes.len();
        let mut start = vec![0u32; n + 1];
        for node in &self.nodes {
            if node.flags & PRESENT != 0 && node.parent != NONE {
                start[node.parent as usize + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut children = vec![0u32; start[n] as usize];
        for (i, node) in self.nodes.iter().enumerate() {
            if node.flags & PRESENT != 0 && node.parent != NONE {
                let slot = &mut fill[node.parent as usize];
                children[*slot as usize] = i as u32;
                *slot += 1;
            }
        }
        // Any conversation descendant is newer along the chain than the leaf, whatever its place
        // in the file; among them the one written last wins (the newest branch).
        let mut best: Option<(u32, u32)> = None;
        let mut seen = vec![false; n];
        let mut stack = vec![leaf];
        while let Some(at) = stack.pop() {
            let at = at as usize;
            if std::mem::replace(&mut seen[at], true) {
                continue;
            }
            for &child in &children[start[at] as usize..start[at + 1] as usize] {
                let node = &self.nodes[child as usize];
                let candidate = node.flags & CONVERSATIONAL != 0
                    && (node.item != NONE || node.flags & BOUNDARY != 0)
                    && best.is_none_or(|(order, _)| node.order > order);
                if candidate {
                    best = Some((node.order, child));
                }
                stack.push(child);
            }
        }
        best.map_or(leaf, |(_, child)| child)
    }

    /// The main chain from the newest leaf back to the latest compaction boundary, newest
    /// first, as item indices: each node walked once (`taken`; a cycle ends the walk).
    ///
    /// The leaf is the newest conversation record in the file, moved down to its newest
    /// conversation descendant when it has one (an interactive session can write a reply before
    /// its prompt). A preserved segment is re-linked as Claude Code does: its head's parent is the
    /// summary (`anchorUuid`), and when the chain reaches the summary without having passed
    /// through the segment, the segment (tail back to head) is put right after it.
    fn chain(&self) -> Vec<u32> {
        let mut taken = vec![false; self.nodes.len()];
        // Node `at` once: `None` when it was never read or was walked already.
        let mut take = |at: u32| {
            let node = *self.nodes.get(at as usize)?;
            if node.flags & PRESENT == 0 || std::mem::replace(&mut taken[at as usize], true) {
                return None;
            }
            Some(node)
        };
        let leaf = self.leaf.map(|leaf| self.descend(leaf));
        let preserved = self.preserved.as_ref().map(|seg| {
            (
                self.lookup(&seg.anchor_uuid),
                self.lookup(&seg.head_uuid),
                self.lookup(&seg.tail_uuid),
            )
        });
        let mut chain: Vec<u32> = Vec::new();
        let mut at = leaf;
        let mut spliced = false;
        while let Some(here) = at {
            if let Some((anchor, head, tail)) = preserved {
                if !spliced && here == anchor && anchor != NONE {
                    spliced = true;
                    let mut inner = Some(tail);
                    while let Some(kept) = inner {
                        let Some(node) = take(kept) else {
                            break;
                        };
                        if node.item != NONE {
                            chain.push(node.item);
                        }
                        inner = (kept != head && node.parent != NONE).then_some(node.parent);
                    }
                }
            }
            let Some(node) = take(here) else {
                break;
            };
            if node.flags & BOUNDARY != 0 {
                break;
            }
            at = match preserved {
                Some((anchor, head, _)) if here == head && head != NONE => {
                    spliced = true;
                    Some(anchor)
                }
                _ => (node.parent != NONE).then_some(node.parent),
            };
            if node.item != NONE {
                chain.push(node.item);
            }
        }
        chain
    }

    /// The main-chain conversation (the walk `chain` gives), in order; an assistant reply
    /// split over records of one message id becomes one item.
    pub fn finish(self) -> Conversation {
        self.conversation_now()
    }

    /// [`ConversationScan::finish`] of the scan as it is, which goes on (a scan about to be
    /// saved is walked while another thread encodes it): each item's text is copied once, into
    /// the item it becomes part of.
    pub fn conversation_now(&self) -> Conversation {
        let mut picked_once = vec![false; self.items.len()];
        let chain = self.chain().into_iter().rev().filter_map(|i| {
            let once = !std::mem::replace(picked_once.get_mut(i as usize)?, true);
            let (item, id) = self.items[i as usize].as_ref().filter(|_| once)?;
            Some((item, id.as_deref()))
        });
        Conversation {
            items: merged(chain),
            last_line: self.last_line,
            last_activity: self.last_activity,
        }
    }
}

/// The items of the chain `chain`, oldest first, with their message ids: the replies that
/// share an assistant message id merged into one item, empty items dropped.
fn merged<'a>(chain: impl Iterator<Item = (&'a Item, Option<&'a str>)>) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    let mut last_id: Option<&str> = None;
    // The pieces already in the reply being merged (by hash, then compared whole): a record
    // that repeats one adds nothing, and the check costs its own length, not the reply's (a
    // reply split over thousands of records stays linear).
    let mut pieces: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
    for (item, id) in chain {
        if item.kind == ItemKind::Assistant {
            if let (Some(id), Some(prev)) = (id, items.last_mut()) {
                if last_id == Some(id) && prev.kind == ItemKind::Assistant {
                    if !item.text.is_empty() && !has_piece(&pieces, &prev.text, &item.text) {
                        if !prev.text.is_empty() {
                            prev.text.push('\n');
                        }
                        let start = prev.text.len();
                        prev.text.push_str(&item.text);
                        add_piece(&mut pieces, &prev.text, start);
                    }
                    continue;
                }
            }
            last_id = id;
            pieces.clear();
            if !item.text.is_empty() {
                add_piece(&mut pieces, &item.text, 0);
            }
        } else if !item.text.is_empty() {
            last_id = None;
        }
        if !item.text.is_empty() {
            items.push(item.clone());
        }
    }
    items
}

fn piece_hash(text: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(text)
}

/// Whether `piece` is already one of the pieces of `reply`.
fn has_piece(pieces: &HashMap<u64, Vec<(usize, usize)>>, reply: &str, piece: &str) -> bool {
    pieces
        .get(&piece_hash(piece))
        .is_some_and(|spans| spans.iter().any(|&(a, b)| &reply[a..b] == piece))
}

/// Records `reply[start..]` as a piece of the reply.
fn add_piece(pieces: &mut HashMap<u64, Vec<(usize, usize)>>, reply: &str, start: usize) {
    pieces
        .entry(piece_hash(&reply[start..]))
        .or_default()
        .push((start, reply.len()));
}

impl crate::session::external::agent::ConversationScan for ConversationScan {
    fn conversation(self: Box<Self>) -> Conversation {
        (*self).finish()
    }

    fn conversation_now(&self) -> Conversation {
        ConversationScan::conversation_now(self)
    }

    fn save_into(&self, out: &mut Vec<u8>) -> bool {
        // Room for the whole state first (a little over: the packed tables, each item's text
        // and id with their lengths, kind and time): a heavy session's state is megabytes, and
        // grown by doubling it would be written over twice as many fresh pages, then copied.
        let items: usize = (self.items.iter().flatten())
            .map(|(item, id)| item.text.len() + id.as_ref().map_or(0, String::len) + 24)
            .sum();
        let others: usize = self.others.keys().map(|key| key.len() + 10).sum();
        out.reserve(self.uuids.len() * 20 + self.nodes.len() * 13 + others + items + 64);
        crate::session::external::agent::save_state_into(self, out)
    }

    fn part(&self) -> Option<Box<dyn crate::session::external::agent::ConversationScan>> {
        Some(Box::new(ConversationScan {
            serde_only: self.serde_only,
            ..ConversationScan::default()
        }))
    }

    fn absorb(
        &mut self,
        later: Box<dyn crate::session::external::agent::ConversationScan>,
        lines_before: u64,
    ) -> bool {
        let later: Box<dyn std::any::Any> = later;
        match later.downcast::<ConversationScan>() {
            Ok(later) => {
                self.take_in(*later, lines_before);
                true
            }
            Err(_) => false,
        }
    }
}

impl ConversationScan {
    /// [`absorb`](crate::session::external::agent::ConversationScan::absorb) of a part of this
    /// kind. A single scan interns a record's uuid, then its parent's, line by line; the later
    /// part did the same from an empty table, so its node ids are in the order their uuids
    /// first appeared there. Interning its keys here in that order therefore gives every new
    /// uuid the id the single scan would have given it, and every known one its id here; a
    /// record read in the later part then overwrites its node as the single scan's later line
    /// would have, with its parent, item and line renumbered.
    fn take_in(&mut self, later: ConversationScan, lines_before: u64) {
        // Nearly every key of a later part is new here: room for all at once, so that the
        // table is not rehashed as it fills.
        self.uuids.reserve(later.uuids.len());
        self.others.reserve(later.others.len());
        self.nodes.reserve(later.nodes.len());
        self.items.reserve(later.items.len());
        let mut keys: Vec<Option<Key>> = Vec::new();
        keys.resize_with(later.nodes.len(), || None);
        for (key, at) in later.uuids {
            keys[at as usize] = Some(Key::Uuid(key));
        }
        for (key, at) in later.others {
            keys[at as usize] = Some(Key::Other(key));
        }
        let ids: Vec<u32> = keys
            .into_iter()
            .map(|key| key.map_or(NONE, |key| self.intern_key(key)))
            .collect();
        let id = |at: u32| ids.get(at as usize).copied().unwrap_or(NONE);
        let items_before = self.items.len() as u32;
        for (at, node) in later.nodes.iter().enumerate() {
            if node.flags & PRESENT == 0 || ids[at] == NONE {
                continue;
            }
            let order = (u64::from(node.order) + lines_before).min(u64::from(u32::MAX));
            self.nodes[ids[at] as usize] = Node {
                parent: if node.parent == NONE {
                    NONE
                } else {
                    id(node.parent)
                },
                item: if node.item == NONE {
                    NONE
                } else {
                    node.item + items_before
                },
                order: order as u32,
                flags: node.flags,
            };
        }
        self.items.extend(later.items);
        if let Some(leaf) = later.leaf {
            self.leaf = Some(id(leaf));
        }
        if later.compacted {
            self.preserved = later.preserved;
            self.compacted = true;
        }
        if let Some(line) = later.last_line {
            self.last_line = Some(line + lines_before);
        }
        if let Some(t) = later.last_activity {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
    }
}

/// Fixed-size entries saved as one run of their little-endian bytes: a heavy session has tens
/// of thousands of nodes and UUIDs, and their numbers written one by one cost several times
/// their bytes to write and to read back.
mod packed {
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], to: S) -> Result<S::Ok, S::Error> {
        to.serialize_bytes(bytes)
    }

    /// The entries of `width` bytes of a saved run, each given to `entry`.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        from: D,
        width: usize,
        entry: impl FnMut(&[u8]),
    ) -> Result<(), D::Error> {
        from.deserialize_bytes(Entries { width, entry })
    }

    /// Hands a run of bytes to `entry`, `width` at a time (a run of part of an entry is refused).
    struct Entries<F> {
        width: usize,
        entry: F,
    }

    impl<F: FnMut(&[u8])> Visitor<'_> for Entries<F> {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a packed table of {}-byte entries", self.width)
        }

        fn visit_bytes<E: Error>(mut self, bytes: &[u8]) -> Result<(), E> {
            if !bytes.len().is_multiple_of(self.width) {
                return Err(E::custom("a packed table of whole entries"));
            }
            bytes.chunks_exact(self.width).for_each(&mut self.entry);
            Ok(())
        }
    }

    pub fn word<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&bytes[at..at + N]);
        out
    }
}

/// A saved state with its packed table `field` (`"uuids"` or `"nodes"`) replaced by `bytes`:
/// the tests' way to damage a state the way a bit flip past the checksum would.
#[cfg(test)]
pub(super) fn with_packed(saved: &[u8], field: &str, bytes: &[u8]) -> Vec<u8> {
    /// The scan's fields in their order, the packed tables as their bytes (a field the scan
    /// gains and this lacks fails every test that uses it, at the decode).
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Raw {
        #[serde(with = "raw")]
        uuids: Vec<u8>,
        others: HashMap<Box<str>, u32>,
        #[serde(with = "raw")]
        nodes: Vec<u8>,
        items: Vec<Option<(Item, Option<String>)>>,
        leaf: Option<u32>,
        preserved: Option<PreservedSegment>,
        compacted: bool,
        last_line: Option<u64>,
        last_activity: Option<i64>,
        serde_only: bool,
    }
    mod raw {
        pub fn serialize<S: serde::Serializer>(bytes: &[u8], to: S) -> Result<S::Ok, S::Error> {
            super::packed::serialize(bytes, to)
        }
        pub fn deserialize<'de, D: serde::Deserializer<'de>>(from: D) -> Result<Vec<u8>, D::Error> {
            let mut bytes = Vec::new();
            super::packed::deserialize(from, 1, |b| bytes.push(b[0]))?;
            Ok(bytes)
        }
    }
    let mut raw: Raw = crate::session::external::agent::load_state(saved).unwrap();
    match field {
        "uuids" => raw.uuids = bytes.to_vec(),
        "nodes" => raw.nodes = bytes.to_vec(),
        _ => panic!("no packed table {field}"),
    }
    crate::session::external::agent::save_state(&raw)
}

/// The UUID map, packed: 20 bytes an entry (the two halves, then the node).
mod packed_uuids {
    use super::packed::{self, word};
    use serde::{Deserializer, Serializer};
    type Map = super::IdTable<(u64, u64)>;

    pub fn serialize<S: Serializer>(map: &Map, to: S) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::with_capacity(map.len() * 20);
        for (&(a, b), &n) in map {
            bytes.extend_from_slice(&a.to_le_bytes());
            bytes.extend_from_slice(&b.to_le_bytes());
            bytes.extend_from_slice(&n.to_le_bytes());
        }
        packed::serialize(&bytes, to)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Map, D::Error> {
        let mut map = Map::default();
        packed::deserialize(from, 20, |e| {
            let key = (
                u64::from_le_bytes(word(e, 0)),
                u64::from_le_bytes(word(e, 8)),
            );
            map.insert(key, u32::from_le_bytes(word(e, 16)));
        })?;
        Ok(map)
    }
}

/// The nodes, packed: 13 bytes a node (parent, item, order, flags).
mod packed_nodes {
    use super::packed::{self, word};
    use super::Node;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(nodes: &[Node], to: S) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::with_capacity(nodes.len() * 13);
        for node in nodes {
            bytes.extend_from_slice(&node.parent.to_le_bytes());
            bytes.extend_from_slice(&node.item.to_le_bytes());
            bytes.extend_from_slice(&node.order.to_le_bytes());
            bytes.push(node.flags);
        }
        packed::serialize(&bytes, to)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Vec<Node>, D::Error> {
        let mut nodes = Vec::new();
        packed::deserialize(from, 13, |e| {
            nodes.push(Node {
                parent: u32::from_le_bytes(word(e, 0)),
                item: u32::from_le_bytes(word(e, 4)),
                order: u32::from_le_bytes(word(e, 8)),
                flags: e[12],
            });
        })?;
        Ok(nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::{ConversationScan, Key};
    use crate::session::external::agent::ConversationScan as _;
    use crate::session::external::scan::LineSink;
    use crate::test_rng::TestRng;

    /// Records of a session that branches, rewinds, repeats a uuid, names parents never read,
    /// mixes canonical UUIDs and other ids, has sidechains, bookkeeping records and compactions
    /// with and without a preserved segment.
    fn tangled_session(rng: &mut TestRng) -> Vec<String> {
        let ids: Vec<String> = (0..40)
            .map(|k| {
                if k % 3 == 0 {
                    format!("id-{k}")
                } else {
                    format!("{k:08x}-0000-4000-8000-{:012x}", k * 7919)
                }
            })
            .collect();
        let pick = |rng: &mut TestRng| ids[rng.below(ids.len())].clone();
        (0..60)
            .map(|n| {
                let uuid = pick(rng);
                let parent = match rng.below(5) {
                    0 => "null".to_string(),
                    _ => format!("\"{}\"", pick(rng)),
                };
                let time = format!("2026-01-01T00:{:02}:{:02}Z", n / 60, n % 60);
                let head = format!(
                    r#""uuid":"{uuid}","parentUuid":{parent},"timestamp":"{time}""#
                );
                match rng.below(8) {
                    0 | 1 => format!(
                        r#"{{"type":"user",{head},"message":{{"role":"user","content":"prompt {n}"}}}}"#
                    ),
                    2 | 3 => format!(
                        r#"{{"type":"assistant",{head},"message":{{"id":"m{}","content":[{{"type":"text","text":"reply {n}"}}]}}}}"#,
                        rng.below(4)
                    ),
                    4 => format!(
                        r#"{{"type":"user","isSidechain":true,{head},"message":{{"role":"user","content":"aside {n}"}}}}"#
                    ),
                    5 => format!(r#"{{"type":"progress",{head}}}"#),
                    6 => format!(
                        r#"{{"type":"system","subtype":"compact_boundary",{head},"compactMetadata":{{"preservedSegment":{{"headUuid":"{}","anchorUuid":"{}","tailUuid":"{}"}}}}}}"#,
                        pick(rng),
                        pick(rng),
                        pick(rng)
                    ),
                    _ => format!(r#"{{"type":"system","subtype":"compact_boundary",{head}}}"#),
                }
            })
            .collect()
    }

    fn fed(lines: &[String], first: u64) -> ConversationScan {
        let mut scan = ConversationScan::default();
        for (i, line) in lines.iter().enumerate() {
            scan.line(first + i as u64, line.as_bytes());
        }
        scan
    }

    /// A scan fed a session in parts and taken in part by part is, field by field, the scan
    /// fed the whole session: the same node for every id (so the same parents, items, line
    /// numbers and flags), the same uuid tables, items, leaf, segment and times; over tangled
    /// sessions cut into 2 to 4 parts at every place.
    #[test]
    fn a_scan_taken_in_part_by_part_is_the_whole_scan_field_by_field() {
        let mut rng = TestRng::new(41);
        for round in 0..60 {
            let lines = tangled_session(&mut rng);
            let whole = fed(&lines, 0);
            for _ in 0..10 {
                let mut bounds: Vec<usize> = (0..1 + rng.below(3))
                    .map(|_| rng.below(lines.len() + 1))
                    .collect();
                bounds.push(0);
                bounds.push(lines.len());
                bounds.sort_unstable();
                let mut scan = fed(&lines[..bounds[1]], 0);
                for pair in bounds[1..].windows(2) {
                    let part = fed(&lines[pair[0]..pair[1]], 0);
                    assert!(scan.absorb(Box::new(part), pair[0] as u64));
                }
                let at = format!("round {round}, cut at {bounds:?}");
                assert_eq!(scan.nodes, whole.nodes, "{at}");
                assert_eq!(scan.uuids, whole.uuids, "{at}");
                assert_eq!(scan.others, whole.others, "{at}");
                assert_eq!(scan.items, whole.items, "{at}");
                assert_eq!(scan.leaf, whole.leaf, "{at}");
                assert_eq!(scan.preserved, whole.preserved, "{at}");
                assert_eq!(scan.compacted, whole.compacted, "{at}");
                assert_eq!(scan.last_line, whole.last_line, "{at}");
                assert_eq!(scan.last_activity, whole.last_activity, "{at}");
                assert_eq!(scan.finish(), whole.clone().finish(), "{at}");
            }
        }
    }

    /// A key is a UUID's 128 bits exactly when the text is a canonical lowercase UUID: checked
    /// against counting its digits, over UUIDs with one byte changed at every position.
    #[test]
    fn keys_are_uuids_exactly_for_canonical_text() {
        let counted = |text: &str| {
            let b = text.as_bytes();
            let hyphens = b.len() == 36 && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-');
            let digits = b
                .iter()
                .filter(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
                .count();
            (hyphens && digits == 32).then(|| u128::from_str_radix(&text.replace('-', ""), 16))
        };
        let uuid = "0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9";
        let mut texts = vec![
            uuid.to_string(),
            uuid.to_uppercase(),
            "b".into(),
            String::new(),
        ];
        for at in 0..36 {
            for c in [b'-', b'g', b'A', b'0', b'f', b' '] {
                let mut bytes = uuid.as_bytes().to_vec();
                bytes[at] = c;
                texts.push(String::from_utf8(bytes).unwrap());
            }
        }
        for text in &texts {
            match (Key::of(text), counted(text)) {
                (Key::Uuid((hi, lo)), Some(Ok(value))) => {
                    assert_eq!((u128::from(hi) << 64) | u128::from(lo), value, "{text}");
                }
                (Key::Other(other), None) => assert_eq!(&*other, text.as_str()),
                _ => panic!("{text}"),
            }
        }
    }
}
