//! What `resources/list` shows for each session (SPEC §10): the ranking, the label, the
//! description and the pages.
//!
//! Purpose: one concrete resource per session of the merged listing, the sessions of the
//! server's cwd first, then by last activity (newest first, ties by id), at most
//! `max_resources` of them, handed out a page at a time.
//! Invariant: every resource's `uri` is the canonical `dsh-session:` URI of its id, which
//! always ends in a letter (the payload is base64url of a JSON string, whose closing `"` makes
//! the last character `i`, `g` or `I` whatever the length), so Claude Code's `@server:uri`
//! recognizer takes it whole; labels and descriptions hold no control character.
//! Proof: the unit tests below (a property test over every id shape for the URI, ranking and
//! pages), and `tests/mcp/` over the real binary.

use crate::discovery::{SessionInfo, SessionMeta};
use crate::escape::is_control;
use crate::reference::encode_session_reference_uri;
use crate::session::external::{source_of, ExternalAgent};
use crate::session::SessionSummary;
use std::collections::HashMap;

/// Resources per `resources/list` page.
pub const PAGE_SIZE: usize = 50;
/// A label longer than this many characters is cut (with `…`).
pub const MAX_LABEL_CHARS: usize = 160;

/// One session as a resource shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The whole session id.
    pub id: String,
    /// Title, else first prompt, else id; control characters removed.
    pub label: String,
    /// `dsh`, `Claude Code` or `Codex`.
    pub source: &'static str,
    /// The session's cwd, control characters removed.
    pub cwd: Option<String>,
    /// Last activity (the index's), else creation time; epoch ms.
    pub last_activity: i64,
    /// Projected messages and their UTF-8 bytes, when the index has the session.
    pub messages: Option<(u64, u64)>,
}

impl Entry {
    /// The canonical `dsh-session:` URI of the session.
    pub fn uri(&self) -> String {
        encode_session_reference_uri(&self.id)
    }

    /// The label first (Claude Code's `@` menu shows the description, not the name), then
    /// source · cwd · last activity (its age at `now_ms`, in the one age format of every face,
    /// [`crate::host::format_age`]: a listing is reused for a second at most) · messages · size.
    pub fn description(&self, now_ms: i64) -> String {
        let mut parts = vec![
            self.label.clone(),
            self.source.to_string(),
            self.cwd.clone().unwrap_or_else(|| "(no cwd)".into()),
            crate::host::format_age(self.last_activity, now_ms),
        ];
        if let Some((messages, bytes)) = self.messages {
            parts.push(format!(
                "{messages} message{}",
                if messages == 1 { "" } else { "s" }
            ));
            parts.push(size(bytes));
        }
        parts.join(" · ")
    }
}

/// `text` with control characters removed (SPEC §5.2): line breaks and tabs become spaces,
/// other C0/C1 characters, DEL and bidi controls are dropped; runs of spaces are kept as one,
/// the ends trimmed.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\n' | '\r' | '\t' | '\u{2028}' | '\u{2029}') || c == ' ' {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else if is_control(c) || crate::escape::is_bidi_or_separator(c) {
            continue;
        } else {
            out.push(c);
        }
    }
    out.trim().to_string()
}

/// Title, else first prompt, else id, cleaned, cut at [`MAX_LABEL_CHARS`]; the id when the
/// others clean to nothing (an id that cleans to nothing stays as it is, escaped by the host).
pub fn label(id: &str, row: Option<&SessionInfo>) -> String {
    label_of(
        id,
        row.and_then(|r| r.title.as_deref()),
        row.and_then(|r| r.first_prompt.as_deref()),
    )
}

/// [`label`] of a session's title and first prompt.
pub fn label_of(id: &str, title: Option<&str>, first_prompt: Option<&str>) -> String {
    let chosen = [title, first_prompt]
        .into_iter()
        .flatten()
        .map(clean)
        .find(|l| !l.is_empty())
        .unwrap_or_else(|| {
            let cleaned = clean(id);
            if cleaned.is_empty() {
                id.escape_debug().to_string()
            } else {
                cleaned
            }
        });
    cut(&chosen)
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_LABEL_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The first `max` sessions of `listing`, ranked: same cwd as `cwd` first, then last activity
/// (newest first), then id.
pub fn ranked(
    listing: &[SessionSummary],
    rows: &HashMap<&str, &SessionInfo>,
    cwd: Option<&str>,
    max: usize,
) -> Vec<Entry> {
    let activity = |s: &SessionSummary| {
        rows.get(s.id())
            .map(|r| r.last_activity)
            .unwrap_or_else(|| s.created_at())
    };
    let mut order: Vec<(bool, i64, &SessionSummary)> = listing
        .iter()
        .map(|s| {
            let same = cwd.is_some() && s.cwd() == cwd;
            (!same, -activity(s), s)
        })
        .collect();
    let key = |a: &(bool, i64, &SessionSummary)| (a.0, a.1);
    let keep = max.min(order.len());
    if keep < order.len() && keep > 0 {
        order.select_nth_unstable_by(keep - 1, |a, b| {
            key(a).cmp(&key(b)).then_with(|| a.2.id().cmp(b.2.id()))
        });
        order.truncate(keep);
    } else if keep == 0 {
        order.clear();
    }
    order.sort_by(|a, b| key(a).cmp(&key(b)).then_with(|| a.2.id().cmp(b.2.id())));
    order
        .into_iter()
        .map(|(_, _, s)| entry(s, rows.get(s.id()).copied()))
        .collect()
}

/// The resource entry of one listed session.
pub fn entry(summary: &SessionSummary, row: Option<&SessionInfo>) -> Entry {
    Entry {
        id: summary.id().to_string(),
        label: label(summary.id(), row),
        source: source_name(source_of(&summary.header)),
        cwd: summary.cwd().map(clean),
        last_activity: row
            .map(|r| r.last_activity)
            .unwrap_or_else(|| summary.created_at()),
        messages: row.map(|r| (r.messages, r.conversation_bytes)),
    }
}

/// The resource entry of one session as the index has it ([`SessionMeta`]): what [`entry`]
/// gives for the same session and row.
pub fn entry_of_row(row: &SessionMeta) -> Entry {
    Entry {
        id: row.id.clone(),
        label: label_of(&row.id, row.title.as_deref(), row.first_prompt.as_deref()),
        source: source_name(row.source.as_deref().and_then(ExternalAgent::parse)),
        cwd: row.cwd.as_deref().map(clean),
        last_activity: row.last_activity,
        messages: Some((row.messages, row.conversation_bytes)),
    }
}

/// The first `max` entries of a cold start: `rows`, the index's first rows in rank order (only
/// sessions still on disk), merged with `unknown`, the listed sessions the index does not hold
/// yet (written while no server ran; ranked by creation time, labelled here by id and titled by
/// the server from their sources' own listings before the list goes out), in the order
/// [`ranked`] gives: same cwd first, then last activity (newest first), then id.
pub fn reconciled(
    rows: &[SessionMeta],
    unknown: &[&SessionSummary],
    cwd: Option<&str>,
    max: usize,
) -> Vec<Entry> {
    use std::cmp::Reverse;
    let other = |c: Option<&str>| !(cwd.is_some() && c == cwd);
    let mut keyed: Vec<((bool, Reverse<i64>), Entry)> = rows
        .iter()
        .map(|r| {
            let key = (other(r.cwd.as_deref()), Reverse(r.last_activity));
            (key, entry_of_row(r))
        })
        .collect();
    keyed.extend(unknown.iter().map(|s| {
        let key = (other(s.cwd()), Reverse(s.created_at()));
        (key, entry(s, None))
    }));
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
    keyed.truncate(max);
    keyed.into_iter().map(|(_, e)| e).collect()
}

fn source_name(agent: Option<ExternalAgent>) -> &'static str {
    agent.map_or("dsh", ExternalAgent::product)
}

/// The page of `entries` a cursor asks for, and the cursor of the next page. A cursor is the
/// offset of its page's first entry; anything else is `Err` (invalid params).
pub fn page<T: Clone>(
    entries: &[T],
    cursor: Option<&str>,
) -> Result<(Vec<T>, Option<String>), String> {
    let start = match cursor {
        None => 0,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= entries.len() && text == n.to_string())
            .ok_or_else(|| format!("invalid cursor {text:?}"))?,
    };
    let end = (start + PAGE_SIZE).min(entries.len());
    let next = (end < entries.len()).then(|| end.to_string());
    Ok((entries[start..end].to_vec(), next))
}

/// `812 B`, `12.3 KB`, `4.1 MB` (powers of 1000).
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1000 => format!("{b} B"),
        b if b < 1_000_000 => format!("{:.1} KB", b as f64 / 1e3),
        b if b < 1_000_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b => format!("{:.1} GB", b as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionHeader;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn summary(id: &str, created: i64, cwd: Option<&str>) -> SessionSummary {
        SessionSummary {
            header: Arc::new(SessionHeader::new(id, created, cwd.map(str::to_string))),
            live: false,
            persisted: true,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Any id: ASCII, control characters, quotes and backslashes (escaped in the JSON),
        /// non-ASCII, astral characters, every length mod 3.
        #[test]
        fn every_uri_ends_in_a_letter(id in "(\\PC|[\\x00-\\x1f\"\\\\\u{7f}\u{2028}😀])*") {
            let uri = encode_session_reference_uri(&id);
            let last = uri.chars().last().unwrap();
            prop_assert!(last.is_ascii_alphabetic(), "{uri} for {id:?}");
            prop_assert!(matches!(last, 'i' | 'g' | 'I'), "{uri}");
        }
    }

    #[test]
    fn a_cold_start_merges_unindexed_sessions_in_rank_order() {
        let row = |id: &str, cwd: &str, last: i64| SessionMeta {
            id: id.into(),
            cwd: Some(cwd.into()),
            created_at: last,
            last_activity: last,
            ..SessionMeta::default()
        };
        let rows = [row("a", "/here", 10), row("b", "/else", 30)];
        let (c, d) = (
            summary("c", 20, Some("/here")),
            summary("d", 5, Some("/else")),
        );
        let ids = |entries: Vec<Entry>| entries.into_iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(
            ids(reconciled(&rows, &[&c, &d], Some("/here"), 10)),
            ["c", "a", "b", "d"]
        );
        assert_eq!(
            ids(reconciled(&rows, &[&c, &d], Some("/here"), 2)),
            ["c", "a"]
        );
        assert_eq!(ids(reconciled(&rows, &[], Some("/here"), 10)), ["a", "b"]);
        let merged = reconciled(&rows, &[&d], None, 10);
        assert_eq!(merged[2].label, "d", "labelled by id until indexed");
        assert_eq!(ids(merged), ["b", "a", "d"]);
    }

    #[test]
    fn uris_of_each_length_class_end_in_i_g_or_capital_i() {
        // JSON `""` (2 bytes), `"a"` (3), `"ab"` (4): the three residues mod 3.
        assert!(encode_session_reference_uri("").ends_with('I'));
        assert!(encode_session_reference_uri("a").ends_with('i'));
        assert!(encode_session_reference_uri("ab").ends_with('g'));
    }

    #[test]
    fn same_cwd_first_then_newest_and_capped() {
        let listing = vec![
            summary("a", 5, Some("/other")),
            summary("b", 1, Some("/p")),
            summary("c", 3, None),
            summary("d", 2, Some("/p")),
            summary("e", 4, Some("/other")),
        ];
        let rows = HashMap::new();
        let ids = |v: Vec<Entry>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(
            ids(ranked(&listing, &rows, Some("/p"), 10)),
            ["d", "b", "a", "e", "c"]
        );
        assert_eq!(ids(ranked(&listing, &rows, Some("/p"), 3)), ["d", "b", "a"]);
        assert_eq!(ids(ranked(&listing, &rows, None, 2)), ["a", "e"]);
    }

    #[test]
    fn labels_drop_control_characters_and_fall_back_to_the_id() {
        assert_eq!(clean("\u{1b}[31mred\u{7}\nline\ttab "), "[31mred line tab");
        assert_eq!(label("id\u{1b}x", None), "idx");
        assert_eq!(label("\u{1b}", None), "\\u{1b}");
    }

    #[test]
    fn pages_follow_cursors_and_refuse_others() {
        let items: Vec<u32> = (0..120).collect();
        let (first, next) = page(&items, None).unwrap();
        assert_eq!((first.len(), next.as_deref()), (50, Some("50")));
        let (second, next) = page(&items, next.as_deref()).unwrap();
        assert_eq!((second[0], next.as_deref()), (50, Some("100")));
        let (third, next) = page(&items, next.as_deref()).unwrap();
        assert_eq!((third.len(), next), (20, None));
        for bad in ["x", "-1", "121", "050", " 5"] {
            assert!(page(&items, Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn descriptions_start_with_the_label() {
        let e = Entry {
            id: "s".into(),
            label: "Fix the tokenizer".into(),
            source: "dsh",
            cwd: Some("/p".into()),
            last_activity: 1_785_004_180_013,
            messages: Some((4, 12_345)),
        };
        assert_eq!(
            e.description(1_785_004_180_013 + 3 * 3_600_000),
            "Fix the tokenizer · dsh · /p · 3h · 4 messages · 12.3 KB"
        );
    }
}
