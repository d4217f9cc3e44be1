//! The words of a text as the full-text index stores them: each distinct word once, a word
//! the text repeats at most three times.
//!
//! Purpose: FTS5 spends most of an index build looking up every token of the text in its
//! in-memory term table, and a conversation repeats its words: in a 10 KB chunk of prose only
//! about three tokens in ten are a word's first occurrence. Handing FTS5 the distinct words
//! instead of the text makes it look up a third as many tokens and store a third as many
//! positions, while every query the index answers (whole words, prefixes, and words of several
//! tokens, all ANDed, never phrases of separate words) matches the same rows. The text itself
//! is kept beside the index for snippets.
//!
//! Invariant: FTS5's `unicode61` tokenizer yields, for [`index_terms`]`(text)`, exactly the set of
//! tokens it yields for `text`. A word is cut at ASCII bytes other than letters and digits
//! only; `unicode61` always ends a token at such a byte, so each word tokenizes alone exactly as
//! it does in place, and the tokens of one word stay adjacent (a word `unicode61` splits, such
//! as one holding a Devanagari vowel sign, still matches as the phrase it becomes in a query).
//! Words are compared after ASCII lower-casing, which `unicode61` also does. What changes is
//! the count: a word found `n` times is written `1 + [n ≥ 3] + [n ≥ 10]` times, so bm25 still
//! sees which words a chunk is about (its term frequency saturates near there anyway).
//!
//! Memory: a text past `SLICE_BYTES` (1 MiB; a huge message is one chunk) is counted a slice at a
//! time, so the word table never outgrows a slice's words, whatever the input.
//!
//! Proof: the unit tests below, and a property test that compares the token sets SQLite's own
//! FTS5 finds in generated texts (ASCII, punctuation, accents, combining marks, other scripts)
//! and in their terms.

/// How many times a word found `count` times is written.
fn copies(count: u32) -> usize {
    1 + usize::from(count >= 3) + usize::from(count >= 10)
}

/// Bit `i` set when byte `i` of `block` belongs to a word: an ASCII letter or digit, or any
/// byte of a non-ASCII character (`unicode61` decides those; they never split a word here).
/// Eight bytes at a time, without branches: every test leaves its answer in a byte's high bit.
fn word_mask(block: &[u8; 64]) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut mask = 0u64;
    for (n, piece) in block.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(piece.try_into().expect("eight bytes"));
        // Bytes below 0x80 (high bit cleared), so that the additions below never carry.
        let low = x & !HIGH;
        let folded = low | (ONES * 0x20);
        // `v + (0x80 - a)` has its high bit set when v >= a (for v < 0x80).
        let at_least = |v: u64, a: u8| v + ONES * u64::from(0x80 - a);
        let letter = at_least(folded, b'a') & !at_least(folded, b'z' + 1);
        let digit = at_least(low, b'0') & !at_least(low, b'9' + 1);
        let word = (x | letter | digit) & HIGH;
        // Gather the eight high bits into one byte, byte 0's bit lowest.
        let bits = (word >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= bits << (8 * n);
    }
    mask
}

/// The first (up to) eight bytes of `bytes[at..]` as a little-endian integer, the rest zero.
/// `bytes` holds at least eight bytes past every word (padding).
fn head(bytes: &[u8], at: usize, len: usize) -> u64 {
    let word = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    if len >= 8 {
        word
    } else {
        word & ((1u64 << (8 * len)) - 1)
    }
}

/// A word's hash: its eight-byte pieces mixed by multiplication.
fn hash(bytes: &[u8], at: usize, len: usize) -> u32 {
    const K: u64 = 0xf135_7aea_2e62_a9c5;
    let mut h = (len as u64).wrapping_mul(K);
    let mut i = 0;
    while i < len {
        h = (h.rotate_left(26) ^ head(bytes, at + i, len - i)).wrapping_mul(K);
        i += 8;
    }
    (h >> 32) as u32
}

/// A word seen in the text: where its first occurrence is in the lower-cased text, its first
/// eight bytes and hash (compared before the bytes) and how many times it was seen.
struct Seen {
    start: u32,
    len: u32,
    hash: u32,
    count: u32,
    head: u64,
}

/// Counts words in order of first occurrence: an open-addressing table of its own, since a
/// general map would hash each word a second time and call `memcmp` for every comparison.
struct Counter {
    seen: Vec<Seen>,
    /// 1 + an index into `seen`, 0 when free; never more than half full.
    slots: Vec<u32>,
    /// Bytes of output so far (each word and a space, per copy).
    out_len: usize,
}

impl Counter {
    fn new(text_len: usize) -> Counter {
        Counter {
            seen: Vec::new(),
            slots: vec![0; (text_len / 4).clamp(64, 1 << 16).next_power_of_two()],
            out_len: 0,
        }
    }

    fn add(&mut self, bytes: &[u8], start: usize, end: usize) {
        let len = end - start;
        let hash = hash(bytes, start, len);
        let head = head(bytes, start, len);
        let mask = self.slots.len() - 1;
        let mut slot = hash as usize & mask;
        loop {
            let held = self.slots[slot];
            if held == 0 {
                break;
            }
            let s = &mut self.seen[held as usize - 1];
            if s.hash == hash
                && s.head == head
                && s.len as usize == len
                && (len <= 8 || bytes[s.start as usize + 8..][..len - 8] == bytes[start + 8..end])
            {
                s.count += 1;
                if s.count == 3 || s.count == 10 {
                    self.out_len += len + 1;
                }
                return;
            }
            slot = (slot + 1) & mask;
        }
        self.slots[slot] = self.seen.len() as u32 + 1;
        self.seen.push(Seen {
            start: start as u32,
            len: len as u32,
            hash,
            count: 1,
            head,
        });
        self.out_len += len + 1;
        if self.seen.len() * 2 > self.slots.len() {
            self.slots = vec![0; self.slots.len() * 2];
            let mask = self.slots.len() - 1;
            for (n, s) in self.seen.iter().enumerate() {
                let mut to = s.hash as usize & mask;
                while self.slots[to] != 0 {
                    to = (to + 1) & mask;
                }
                self.slots[to] = n as u32 + 1;
            }
        }
    }
}

/// A text longer than this is counted a slice at a time (each slice's words once), so that the
/// word table of a huge message stays small; a slice ends at the first separator past this
/// length, never inside a word.
const SLICE_BYTES: usize = 1 << 20;
/// A slice never reaches this length (its positions are kept in `u32`): a single word longer
/// than that is cut at a character boundary, the one place a word is split.
const MAX_SLICE: usize = (u32::MAX as usize) - 64;

/// The distinct words of `text`, ASCII lower-cased, in order of first occurrence and separated
/// by single spaces; a repeated word is written up to three times (see the module doc). Texts
/// over 1 MiB are counted slice by slice (a word is then written once per slice).
pub fn index_terms(text: &str) -> String {
    sliced_terms(text, SLICE_BYTES)
}

fn sliced_terms(text: &str, slice_bytes: usize) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (slice, tail) = rest.split_at(slice_end(rest, slice_bytes));
        slice_terms(slice, &mut out);
        rest = tail;
    }
    out
}

/// Where the slice at the start of `text` ends: all of it when short; else at the first
/// separator byte from `slice_bytes` on (an ASCII byte, so a character boundary).
fn slice_end(text: &str, slice_bytes: usize) -> usize {
    if text.len() <= slice_bytes {
        return text.len();
    }
    let bytes = text.as_bytes();
    let end = bytes[slice_bytes..]
        .iter()
        .position(|&b| !word_byte(b))
        .map_or(text.len(), |n| slice_bytes + n);
    if end < MAX_SLICE {
        return end;
    }
    let mut cut = MAX_SLICE;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    cut
}

/// Appends the terms of one slice (shorter than [`MAX_SLICE`]) to `out`.
fn slice_terms(text: &str, out: &mut String) {
    // Lower-cased, then padded with NULs (separators) to whole 64-byte blocks and eight more
    // bytes, so every block and every eight-byte read is in bounds.
    let mut lower = text.to_ascii_lowercase();
    let blocks = text.len().div_ceil(64);
    lower.extend(std::iter::repeat_n('\0', blocks * 64 + 8 - text.len()));
    let bytes = lower.as_bytes();
    let mut counter = Counter::new(text.len());
    let mut open: Option<usize> = None;
    let mut carry = 0u64;
    for block in 0..blocks {
        let at = block * 64;
        let mask = word_mask(bytes[at..at + 64].try_into().expect("a block"));
        // Bit i of `edges` is set where byte i starts or ends a word (ends are exclusive).
        let mut edges = mask ^ ((mask << 1) | carry);
        carry = mask >> 63;
        while edges != 0 {
            let i = at + edges.trailing_zeros() as usize;
            edges &= edges - 1;
            match open.take() {
                None => open = Some(i),
                Some(start) => counter.add(bytes, start, i),
            }
        }
    }
    if let Some(start) = open {
        counter.add(bytes, start, text.len());
    }
    out.reserve(counter.out_len);
    for s in counter.seen {
        // Cut at ASCII bytes only, so both ends are character boundaries.
        let word = &lower[s.start as usize..(s.start + s.len) as usize];
        for _ in 0..copies(s.count) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(word);
        }
    }
}

/// Whether byte `b` belongs to a word (as [`word_mask`] decides it, one byte at a time).
fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;
    use std::collections::BTreeMap;

    #[test]
    fn distinct_words_in_first_order_with_repeats_capped() {
        assert_eq!(index_terms(""), "");
        assert_eq!(index_terms("  ,;  "), "");
        assert_eq!(
            index_terms("The cat saw the Cat. THE end!"),
            "the the cat saw end"
        );
        let many = "go ".repeat(12);
        assert_eq!(index_terms(&many), "go go go");
        assert_eq!(index_terms("a a b"), "a b");
        // Punctuation inside a word splits it, as unicode61 does; an underscore too.
        assert_eq!(
            index_terms("src/main.rs snake_case x-y"),
            "src main rs snake case x y"
        );
    }

    #[test]
    fn the_block_mask_agrees_with_the_byte_rule() {
        // Every byte value at every position, among neighbours of every kind.
        for fill in [0u8, b'a', b'Z', b'5', 0x80, 0xff, b' '] {
            for b in 0..=255u8 {
                for at in 0..64 {
                    let mut block = [fill; 64];
                    block[at] = b;
                    let mask = word_mask(&block);
                    for (i, &x) in block.iter().enumerate() {
                        assert_eq!(mask >> i & 1 == 1, word_byte(x), "byte {x:#x} at {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_huge_text_is_counted_in_slices_cut_between_words() {
        // Past a MiB a new slice begins at the next separator: a word is written once per
        // slice, and a word that straddles the slice length is never cut.
        let word = "x".repeat(SLICE_BYTES + 10);
        let text = format!("alpha {word} beta alpha");
        assert_eq!(index_terms(&text), format!("alpha {word} beta alpha"));
        let many = "gamma ".repeat(SLICE_BYTES / 3);
        assert_eq!(index_terms(&many), "gamma gamma gamma gamma gamma gamma");
        assert_eq!(sliced_terms("ab cd ab", 3), "ab cd ab");
        assert_eq!(sliced_terms("ab cd ab", 100), "ab cd");
    }

    #[test]
    fn non_ascii_stays_inside_words_and_is_never_cut() {
        assert_eq!(index_terms("Café CAFÉ café"), "café cafÉ");
        assert_eq!(index_terms("naïve—idea"), "naïve—idea");
        assert_eq!(index_terms("日本語 テキスト 日本語"), "日本語 テキスト");
    }

    /// Every token FTS5's `unicode61` (as the index configures it) finds in `text`, with counts.
    fn fts_tokens(conn: &Connection, text: &str) -> BTreeMap<String, i64> {
        conn.execute("DELETE FROM t", []).unwrap();
        conn.execute("INSERT INTO t(body) VALUES (?1)", [text])
            .unwrap();
        let mut stmt = conn.prepare("SELECT term, cnt FROM v").unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(Result::unwrap).collect()
    }

    fn tokenizer() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'unicode61 remove_diacritics 2');
             CREATE VIRTUAL TABLE v USING fts5vocab(t, row);",
        )
        .unwrap();
        conn
    }

    #[test]
    fn unicode61_finds_the_same_tokens_in_the_terms() {
        let conn = tokenizer();
        for text in [
            "Fix the flaky tokenizer test",
            "naïve Über straße ÉCOLE",
            "e\u{301}cole cafe\u{301} x\u{301}\u{302}y",
            "हिन्दी पाठ हिन्दी",
            "emoji 🎉party🎉 tab\tsep\u{a0}nbsp",
            "under_score hy-phen dot.ted 3.14 v2",
            "\u{e000}private\u{e001} use",
        ] {
            let original = fts_tokens(&conn, text);
            let terms = fts_tokens(&conn, &index_terms(text));
            assert_eq!(
                original.keys().collect::<Vec<_>>(),
                terms.keys().collect::<Vec<_>>(),
                "{text:?}"
            );
        }
    }

    /// The rule of [`index_terms`] written plainly: split, lower-case, count in a map.
    fn reference(text: &str) -> String {
        let lower = text.to_ascii_lowercase();
        let mut order: Vec<(&str, u32)> = Vec::new();
        let mut at: std::collections::HashMap<&str, usize> = Default::default();
        for word in lower.split(|c: char| c.is_ascii() && !c.is_ascii_alphanumeric()) {
            if word.is_empty() {
                continue;
            }
            match at.get(word) {
                Some(&n) => order[n].1 += 1,
                None => {
                    at.insert(word, order.len());
                    order.push((word, 1));
                }
            }
        }
        let mut out: Vec<&str> = Vec::new();
        for (word, count) in order {
            out.extend(std::iter::repeat_n(word, copies(count)));
        }
        out.join(" ")
    }

    #[test]
    fn long_texts_and_block_edges_match_the_plain_rule() {
        // Words across the 64-byte block edges, words longer than eight bytes sharing their
        // first eight, and enough distinct words to grow the table.
        let mut text = String::new();
        for n in 0..5000 {
            text.push_str(&format!("Prefix{n:04}Word "));
            text.push_str(["x", "é", "日本", "a1", ",.;"][n % 5]);
            text.push_str(&" ".repeat(n % 7));
        }
        for cut in [0, 1, 63, 64, 65, 127, 128, 1000, text.len()] {
            let cut = (0..=cut).rev().find(|&c| text.is_char_boundary(c)).unwrap();
            assert_eq!(index_terms(&text[..cut]), reference(&text[..cut]));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// The block scanner and the word table agree with the plain rule, byte for byte.
        #[test]
        fn the_fast_scan_is_the_plain_rule(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("[A-Za-z0-9]{1,20}").unwrap(),
                    proptest::sample::select(vec![
                        "abcdefgh".to_string(), "abcdefghi".to_string(), "ABCDEFGHIJ".to_string(),
                        "the".to_string(), "The".to_string(), "x".to_string(),
                    ]),
                    proptest::string::string_regex("[àé日\u{900}-\u{97f}\u{300}🎉]{1,4}").unwrap(),
                    proptest::string::string_regex(r"[ \t\n.,;\x00\x7f@\[`{_]{1,3}").unwrap(),
                ],
                0..300,
            )
        ) {
            let text: String = parts.concat();
            proptest::prop_assert_eq!(index_terms(&text), reference(&text));
        }

        /// Generated texts of words from several scripts, accents and combining marks, joined
        /// by ASCII and non-ASCII separators: FTS5 finds the same tokens in the terms, each at
        /// least once and at most three times as often as there were spellings of it.
        #[test]
        fn the_same_tokens_as_the_text(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("[A-Za-z0-9]{1,8}").unwrap(),
                    proptest::string::string_regex("[àéîõüÀÉÎÕÜßæ]{1,4}").unwrap(),
                    proptest::string::string_regex("[a-z][\u{300}-\u{36f}][a-z]?").unwrap(),
                    proptest::string::string_regex("[\u{900}-\u{97f}]{1,5}").unwrap(),
                    proptest::string::string_regex("[\u{3040}-\u{30ff}\u{4e00}-\u{4e20}]{1,3}").unwrap(),
                    proptest::string::string_regex("[ \t\n.,;:!?/_\\-'\"()\u{a0}\u{2014}\u{3000}🎉\u{e000}]{1,3}").unwrap(),
                    proptest::sample::select(vec!["the".to_string(), "The".to_string(), "THE".to_string()]),
                ],
                0..40,
            )
        ) {
            let conn = tokenizer();
            let text: String = parts.concat();
            let original = fts_tokens(&conn, &text);
            let terms = fts_tokens(&conn, &index_terms(&text));
            proptest::prop_assert_eq!(
                original.keys().collect::<Vec<_>>(),
                terms.keys().collect::<Vec<_>>(),
                "{:?} → {:?}", text, index_terms(&text)
            );
            for (token, n) in &terms {
                proptest::prop_assert!(*n <= 3 * original[token], "{} {:?}", token, text);
            }
            // Counted in slices of a few bytes (as a huge message is, in slices of a MiB): a
            // slice ends only at a separator, so the tokens are still the same.
            for slice in [1, 7, 40] {
                let sliced = fts_tokens(&conn, &sliced_terms(&text, slice));
                proptest::prop_assert_eq!(
                    original.keys().collect::<Vec<_>>(),
                    sliced.keys().collect::<Vec<_>>(),
                    "slices of {}: {:?}", slice, text
                );
            }
        }
    }
}
