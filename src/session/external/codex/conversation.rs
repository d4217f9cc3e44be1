//! A Codex rollout's conversation, folded record by record: prompts, replies, rollbacks and
//! compactions, in file order.
//!
//! Purpose: the fold [`ConversationScan`] does, apart from the record parsing in the parent
//! module. Each record's effect on the conversation ([`Effect`]) is worked out from the record
//! alone, then applied; a part of a file read on another thread keeps its effects and has them
//! applied after the parts before it (`absorb`), so a rollback or a compaction reaches back
//! across a cut as it does in one read. Invariant: the conversation after any run of records is
//! the one their effects give applied in file order, however the file was cut. Proof: the tests
//! below (rollouts whose records reach back across every cut), the parent module's tests and
//! `tests/session/agent_conversation_cache.rs` (every fixture read in parts).

use super::super::scan::LineSink;
use super::{
    blocks_text, envelope, envelope_in, envelope_serde, is_injected, payload, payload_is_one_of,
    Line, Payload,
};
use crate::session::external::{parse_time, Conversation, Item, ItemKind};
use serde::Deserialize;

/// Builds the conversation in file order.
#[derive(Default, Clone, serde::Serialize, Deserialize)]
pub struct ConversationScan {
    items: Vec<Item>,
    last_line: Option<u64>,
    last_activity: Option<i64>,
    /// Every envelope and payload decoded by serde (the reference the walk is tested against).
    serde_only: bool,
    /// A part of a file read on another thread ([`ConversationScan::part`]): what its lines do
    /// to the conversation, in order, to be applied after the lines before them (a rollback
    /// or a compaction reaches back into those). Never saved: a part is taken in first.
    #[serde(skip)]
    deferred: Option<Vec<Effect>>,
}

/// What one record does to the conversation: all a line's reading that needs no earlier line,
/// so that a later part of a file can be read apart and applied in order.
#[derive(Clone, Debug)]
enum Effect {
    /// A prompt or a reply.
    Push(ItemKind, String, i64),
    /// The newest turns undone (`thread_rolled_back`).
    RollBack(u64),
    /// A compaction that gave the history it keeps: the conversation is that.
    Replace(Vec<Item>),
    /// A compaction without one: the prompts are kept, then its summary (if any).
    KeepPrompts(Option<Item>),
}

/// The payload types a conversation takes from each record type (others it drops unread).
fn wanted_payloads(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "event_msg" => Some(&["user_message", "thread_rolled_back"]),
        "response_item" => Some(&["message"]),
        "compacted" => None,
        _ => Some(&[]),
    }
}

impl LineSink for ConversationScan {
    fn line(&mut self, index: u64, bytes: &[u8]) -> bool {
        let line = if self.serde_only {
            envelope_serde(bytes)
        } else {
            envelope(bytes)
        };
        self.fold(index, line);
        true
    }

    /// The envelope's walk finds where its line ends (`codex_record::envelope_in`), so the
    /// reader needs no pass of its own over the line's bytes to find it.
    fn line_in(&mut self, index: u64, rest: &[u8]) -> Option<(usize, bool)> {
        if self.serde_only {
            return None;
        }
        let (line, len) = envelope_in(rest)?;
        self.fold(index, Some(line));
        Some((len, true))
    }
}

impl ConversationScan {
    /// Folds in line `index`, its envelope as read (`None`: not a record).
    fn fold(&mut self, index: u64, line: Option<Line<'_>>) {
        self.last_line = Some(index);
        if let Some(effect) = line.and_then(|line| self.effect(line)) {
            match &mut self.deferred {
                Some(deferred) => deferred.push(effect),
                None => self.apply(effect),
            }
        }
    }

    /// What the record `line` does to the conversation (`None`: nothing), its time folded in.
    fn effect(&mut self, line: Line<'_>) -> Option<Effect> {
        let time = line.timestamp.as_deref().and_then(parse_time);
        if let Some(t) = time {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
        let time = time.unwrap_or(0);
        let dropped = wanted_payloads(&line.kind)
            .is_some_and(|kinds| !self.serde_only && !payload_is_one_of(line.payload, kinds));
        if dropped {
            return None;
        }
        let p = payload(&line)?;
        match (&*line.kind, p.kind.as_deref()) {
            ("event_msg", Some("user_message")) => {
                let text = p.message.unwrap_or_default().trim().to_string();
                Some(Effect::Push(ItemKind::User, text, time))
            }
            ("event_msg", Some("thread_rolled_back")) => {
                Some(Effect::RollBack(p.num_turns.unwrap_or(0)))
            }
            ("response_item", Some("message")) if p.role.as_deref() == Some("assistant") => Some(
                Effect::Push(ItemKind::Assistant, blocks_text(p.content), time),
            ),
            // 0.17x: the prompt is a user message marked `user.text` (no `user_message` event).
            ("response_item", Some("message")) => p
                .typed_prompt()
                .map(|text| Effect::Push(ItemKind::User, text, time)),
            ("compacted", _) => {
                let summary = p.message.as_deref().map(str::trim).unwrap_or_default();
                let summary = (!summary.is_empty()).then(|| Item {
                    kind: ItemKind::Summary,
                    text: summary.to_string(),
                    time,
                });
                Some(match p.replacement_history {
                    Some(history) => {
                        let mut items = kept_history(&history, summary.as_ref(), time);
                        items.extend(summary);
                        Effect::Replace(items)
                    }
                    None => Effect::KeepPrompts(summary),
                })
            }
            _ => None,
        }
    }

    /// Applies what one record does to the conversation.
    fn apply(&mut self, effect: Effect) {
        match effect {
            Effect::Push(kind, text, time) => self.push(kind, text, time),
            Effect::RollBack(turns) => {
                let mut seen = 0;
                let mut cut = self.items.len();
                for (at, item) in self.items.iter().enumerate().rev() {
                    if seen == turns {
                        break;
                    }
                    if item.kind == ItemKind::User {
                        seen += 1;
                        cut = at;
                    }
                }
                if turns > 0 {
                    self.items.truncate(cut);
                }
            }
            Effect::Replace(items) => self.items = items,
            Effect::KeepPrompts(summary) => {
                self.items.retain(|i| i.kind == ItemKind::User);
                self.items.extend(summary);
            }
        }
    }
}

/// The messages a compaction's replacement history keeps (prompts a person typed and replies),
/// without the copy of the summary 0.17x puts last (`summary` is shown once, after them).
fn kept_history(
    history: &[&serde_json::value::RawValue],
    summary: Option<&Item>,
    time: i64,
) -> Vec<Item> {
    let summary = summary.map_or("", |s| s.text.as_str());
    // 0.17x also ends the history with the summary as a user message: it is shown once, as
    // the summary.
    let ends_with_copy = history.last().is_some_and(|last| {
        serde_json::from_str::<Payload>(last.get()).is_ok_and(|e| {
            e.role.as_deref() == Some("user")
                && is_summary_copy(blocks_text(e.content).trim(), summary)
        })
    });
    let keep = history.len() - usize::from(ends_with_copy);
    let mut items = Vec::new();
    for entry in &history[..keep] {
        let Ok(e) = serde_json::from_str::<Payload>(entry.get()) else {
            continue;
        };
        if e.kind.as_deref() != Some("message") {
            continue;
        }
        let text = blocks_text(e.content).trim().to_string();
        let typed = match e.item_kinds() {
            // Marked items: only what a person typed is a prompt.
            Some(_) => e.typed_prompt().is_some(),
            None => !is_injected(&text),
        };
        let kind = match e.role.as_deref() {
            Some("user") if typed => ItemKind::User,
            Some("assistant") => ItemKind::Assistant,
            _ => continue,
        };
        if !text.is_empty() {
            items.push(Item { kind, text, time });
        }
    }
    items
}

/// Whether a replacement-history message is the compaction summary itself (0.17x marks it
/// `compaction.summary` too; builds that do not mark it still give the same text).
fn is_summary_copy(text: &str, summary: &str) -> bool {
    !summary.is_empty() && text == summary
}

impl ConversationScan {
    /// A scan that decodes every envelope and payload by serde: the reference the fast path
    /// is compared with (`tests/session/reliability_agent_skim.rs`).
    #[doc(hidden)]
    pub fn serde_only() -> ConversationScan {
        ConversationScan {
            serde_only: true,
            ..ConversationScan::default()
        }
    }

    fn push(&mut self, kind: ItemKind, text: String, time: i64) {
        if text.is_empty() {
            return;
        }
        // A build that writes both a `user_message` event and a marked user message gives one
        // prompt twice in a row: keep one.
        if kind == ItemKind::User {
            if let Some(last) = self.items.last() {
                if last.kind == ItemKind::User && last.text == text {
                    return;
                }
            }
        }
        self.items.push(Item { kind, text, time });
    }

    /// [`ConversationScan::finish`] of the scan as it is, which goes on (its items copied).
    pub fn conversation_now(&self) -> Conversation {
        Conversation {
            items: self.items.clone(),
            last_line: self.last_line,
            last_activity: self.last_activity,
        }
    }

    /// The conversation read so far, with the last complete line and the newest record time.
    pub fn finish(self) -> Conversation {
        Conversation {
            items: self.items,
            last_line: self.last_line,
            last_activity: self.last_activity,
        }
    }
}

impl super::super::agent::ConversationScan for ConversationScan {
    fn conversation(self: Box<Self>) -> Conversation {
        (*self).finish()
    }

    fn conversation_now(&self) -> Conversation {
        ConversationScan::conversation_now(self)
    }

    fn save_into(&self, out: &mut Vec<u8>) -> bool {
        // Room for the whole state first (each item's text with its length, kind and time):
        // grown by doubling, megabytes would be written over twice as many fresh pages.
        let items: usize = self.items.iter().map(|item| item.text.len() + 24).sum();
        out.reserve(items + 64);
        super::super::agent::save_state_into(self, out)
    }

    fn part(&self) -> Option<Box<dyn super::super::agent::ConversationScan>> {
        Some(Box::new(ConversationScan {
            serde_only: self.serde_only,
            deferred: Some(Vec::new()),
            ..ConversationScan::default()
        }))
    }

    fn absorb(
        &mut self,
        later: Box<dyn super::super::agent::ConversationScan>,
        lines_before: u64,
    ) -> bool {
        let later: Box<dyn std::any::Any> = later;
        let Ok(later) = later.downcast::<ConversationScan>() else {
            return false;
        };
        let later = *later;
        for effect in later.deferred.into_iter().flatten() {
            self.apply(effect);
        }
        if let Some(line) = later.last_line {
            self.last_line = Some(line + lines_before);
        }
        if let Some(t) = later.last_activity {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::external::agent::ConversationScan as _;

    /// A rollout whose later records reach back: prompts said twice in a row, rollbacks of more
    /// turns than came since, compactions with and without a replacement history.
    fn reaching_rollout(rng: &mut crate::test_rng::TestRng) -> Vec<String> {
        (0..50)
            .map(|n| {
                let time = format!("2026-01-01T00:{:02}:{:02}Z", n / 60, n % 60);
                let head = format!(r#"{{"timestamp":"{time}","#);
                match rng.below(9) {
                    0..=2 => format!(
                        r#"{head}"type":"event_msg","payload":{{"type":"user_message","message":"prompt {}"}}}}"#,
                        rng.below(3)
                    ),
                    3 | 4 => format!(
                        r#"{head}"type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"reply {n}"}}]}}}}"#
                    ),
                    5 => format!(
                        r#"{head}"type":"event_msg","payload":{{"type":"thread_rolled_back","num_turns":{}}}}}"#,
                        rng.below(4)
                    ),
                    6 => format!(
                        r#"{head}"type":"compacted","payload":{{"message":"summary {n}"}}}}"#
                    ),
                    7 => format!(
                        r#"{head}"type":"compacted","payload":{{"message":"summary {n}","replacement_history":[{{"type":"message","role":"user","content":[{{"type":"input_text","text":"kept {n}"}}]}}]}}}}"#
                    ),
                    _ => format!(r#"{head}"type":"turn_context","payload":{{}}}}"#),
                }
            })
            .collect()
    }

    /// A rollout read in parts, each part's records applied after the parts before it, is the
    /// rollout read whole: over rollouts whose records reach back across every cut.
    #[test]
    fn a_scan_taken_in_part_by_part_is_the_whole_scan() {
        let mut rng = crate::test_rng::TestRng::new(7);
        let fed = |scan: &mut ConversationScan, lines: &[String]| {
            for (i, line) in lines.iter().enumerate() {
                scan.line(i as u64, line.as_bytes());
            }
        };
        for round in 0..200 {
            let lines = reaching_rollout(&mut rng);
            let mut whole = ConversationScan::default();
            fed(&mut whole, &lines);
            let mut bounds: Vec<usize> = (0..1 + rng.below(3))
                .map(|_| rng.below(lines.len() + 1))
                .collect();
            bounds.extend([0, lines.len()]);
            bounds.sort_unstable();
            let mut scan = ConversationScan::default();
            fed(&mut scan, &lines[..bounds[1]]);
            for pair in bounds[1..].windows(2) {
                let mut part = scan.part().unwrap();
                for (i, line) in lines[pair[0]..pair[1]].iter().enumerate() {
                    part.line(i as u64, line.as_bytes());
                }
                assert!(scan.absorb(part, pair[0] as u64));
            }
            let at = format!("round {round}, cut at {bounds:?}");
            assert_eq!(scan.items, whole.items, "{at}");
            assert_eq!(scan.last_line, whole.last_line, "{at}");
            assert_eq!(scan.last_activity, whole.last_activity, "{at}");
        }
    }
}
