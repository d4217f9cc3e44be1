//! Retention (SPEC §3.6): fit one source's data object under `max_reference_bytes`.
//!
//! The order of sacrifices keeps what matters most: older ordinary messages go first, while
//! compaction checkpoints (the only record of shadowed history) and the newest message survive;
//! then the longest remaining texts are cut in the middle, keeping their beginning and end and
//! saying exactly how many bytes were left out. Sizes are tracked incrementally, so retention is
//! linear in the source size rather than re-serializing the object after every step.

use super::error::{ErrorCode, Result, SessionReferenceError};
use super::json::{string_literal, stringify_tag_safe};
use super::projection::{ConversationItem, Role};
use super::render::{entry_size, ConversationEntry, RetentionStats, SourceData};

/// Identity fields of a source's data object (everything but the conversation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceMeta {
    /// `sessionId` of the data object.
    pub session_id: String,
    /// `label` of the data object.
    pub label: String,
    /// `cwd` of the data object (`null` when `None`).
    pub cwd: Option<String>,
    /// `capturedThroughSeq` of the data object (`null` for an empty log).
    pub captured_through_seq: Option<u64>,
}

/// A source after retention: the data object to render and its statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retained {
    /// The data object as it fits under the budget.
    pub data: SourceData,
    /// What retention did to it (the source's §3.9 metadata).
    pub stats: RetentionStats,
}

struct Slot {
    role: Role,
    original: String,
    /// `None` while the text is untouched.
    cut: Option<String>,
    checkpoint: bool,
    /// Bytes left out of `original` by the latest cut.
    omitted: usize,
    alive: bool,
}

impl Slot {
    fn text(&self) -> &str {
        self.cut.as_deref().unwrap_or(&self.original)
    }
    fn size(&self) -> usize {
        entry_size(self.role, self.text())
    }
}

/// Running serialized size of the data object.
#[derive(Clone, Copy)]
struct Size {
    fixed: usize,
    entries: usize,
    alive: usize,
}

impl Size {
    fn total(&self) -> usize {
        self.fixed + self.entries + self.alive.saturating_sub(1)
    }
}

/// Applies §3.6 to the projected `items` of one source.
pub fn retain(
    meta: SourceMeta,
    items: Vec<ConversationItem>,
    max_bytes: usize,
) -> Result<Retained> {
    let mut shell = SourceData {
        session_id: meta.session_id,
        label: meta.label,
        cwd: meta.cwd,
        captured_through_seq: meta.captured_through_seq,
        conversation: Vec::new(),
    };
    let original_messages = items.len();
    let compacted = items.iter().any(|item| item.checkpoint);
    let mut slots: Vec<Slot> = items
        .into_iter()
        .map(|item| Slot {
            role: item.role,
            original: item.text,
            cut: None,
            checkpoint: item.checkpoint,
            omitted: 0,
            alive: true,
        })
        .collect();
    // Step 1: drop the earliest ordinary messages, never a checkpoint nor the last message,
    // while the object is over the budget. The object shrinks with every drop, so the messages
    // kept are the newest droppable ones that fit beside those that always stay: measured from
    // the newest back, a conversation of megabytes costs the measure of about the budget, not
    // of every message (each message's serialized size is a pass over its text).
    let droppable = slots.len().saturating_sub(1);
    let staying: usize = slots
        .iter()
        .enumerate()
        .filter(|(at, slot)| *at >= droppable || slot.checkpoint)
        .map(|(_, slot)| slot.size())
        .sum();
    let order: Vec<usize> = (0..droppable).filter(|&at| !slots[at].checkpoint).collect();
    let mut size = Size {
        fixed: stringify_tag_safe(&shell).len(),
        entries: staying,
        alive: slots.len() - order.len(),
    };
    // `order[dropped..]` stay: the fewest drops at which the object fits, else all go.
    let mut dropped = order.len();
    while dropped > 0 {
        let grown = Size {
            entries: size.entries + slots[order[dropped - 1]].size(),
            alive: size.alive + 1,
            ..size
        };
        if grown.total() > max_bytes {
            break;
        }
        size = grown;
        dropped -= 1;
    }
    let omitted_messages = dropped;
    let mut dropped_bytes = 0;
    for &at in &order[..dropped] {
        slots[at].alive = false;
        dropped_bytes += slots[at].original.len();
    }

    // Step 2: cut the longest remaining text until the object fits.
    while size.total() > max_bytes {
        let longest =
            slots
                .iter_mut()
                .filter(|slot| slot.alive)
                .fold(None::<&mut Slot>, |best, slot| match best {
                    Some(best) if best.text().len() >= slot.text().len() => Some(best),
                    _ => Some(slot),
                });
        let Some(slot) = longest.filter(|slot| !slot.text().is_empty()) else {
            return Err(budget_exceeded(&shell.session_id, max_bytes));
        };
        let overflow = size.total() - max_bytes;
        let target = slot.text().len().saturating_sub(overflow);
        let (text, omitted) = truncate(&slot.original, target);
        if text == slot.text() {
            return Err(budget_exceeded(&shell.session_id, max_bytes));
        }
        size.entries -= slot.size();
        slot.cut = Some(text);
        slot.omitted = omitted;
        size.entries += slot.size();
    }

    let mut omitted_bytes = dropped_bytes;
    for slot in slots.into_iter().filter(|slot| slot.alive) {
        omitted_bytes += slot.omitted;
        let text = match slot.cut {
            Some(cut) => cut,
            None => slot.original,
        };
        shell.conversation.push(ConversationEntry {
            role: slot.role,
            text,
        });
    }
    let stats = RetentionStats {
        compacted,
        original_messages,
        retained_messages: shell.conversation.len(),
        omitted_messages,
        omitted_bytes,
        truncated: omitted_messages > 0 || omitted_bytes > 0,
    };
    debug_assert_eq!(size.total(), shell.to_json().len());
    Ok(Retained { data: shell, stats })
}

fn budget_exceeded(session_id: &str, max_bytes: usize) -> SessionReferenceError {
    SessionReferenceError::new(
        ErrorCode::BudgetExceeded,
        format!(
            "the snapshot of session {} does not fit in max_reference_bytes ({max_bytes})",
            string_literal(session_id)
        ),
    )
}

/// The omission notice that ends a cut text.
fn notice(omitted: usize) -> String {
    format!("\n[\u{2026} omitted {omitted} UTF-8 bytes \u{2026}]")
}

fn notice_len(omitted: usize) -> usize {
    const FIXED: usize = "\n[\u{2026} omitted  UTF-8 bytes \u{2026}]".len();
    let mut digits = 1;
    let mut rest = omitted / 10;
    while rest > 0 {
        digits += 1;
        rest /= 10;
    }
    FIXED + digits
}

/// Head and tail byte ranges kept for a budget of `r` raw bytes.
fn split(text: &str, r: usize) -> (usize, usize) {
    let total = text.len();
    let mut head = r.div_ceil(2).min(total);
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail_start = total - (r / 2).min(total);
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    (head, tail_start.max(head))
}

/// `truncate(text, target)` of SPEC §3.6: the longest head-and-tail cut of `text` that, with its
/// omission notice, fits in `target` bytes; `""` when not even the notice fits. Returns the new
/// text and the number of bytes it leaves out. A text that already fits is returned whole.
pub fn truncate(text: &str, target: usize) -> (String, usize) {
    let total = text.len();
    if total <= target {
        return (text.to_string(), 0);
    }
    let cut_len = |r: usize| {
        let (head, tail_start) = split(text, r);
        let kept = head + (total - tail_start);
        kept + notice_len(total - kept)
    };
    if cut_len(0) > target {
        return (String::new(), total);
    }
    // Largest r in [0, target] whose cut fits; the cut length never decreases as r grows.
    let (mut low, mut high) = (0, target);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if cut_len(mid) <= target {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    let (head, tail_start) = split(text, low);
    let omitted = tail_start - head;
    let mut out = String::with_capacity(target);
    out.push_str(&text[..head]);
    out.push_str(&text[tail_start..]);
    out.push_str(&notice(omitted));
    (out, omitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> SourceMeta {
        SourceMeta {
            session_id: "s".into(),
            label: "s".into(),
            cwd: None,
            captured_through_seq: Some(1),
        }
    }

    fn item(text: &str, checkpoint: bool) -> ConversationItem {
        ConversationItem {
            role: Role::User,
            text: text.into(),
            checkpoint,
        }
    }

    /// Step 1 as SPEC §3.6 states it: the object serialized again after every drop, the
    /// earliest ordinary message going first, never a checkpoint nor the last message. Which
    /// messages stay, and whether the object then fits.
    fn alive_after_reserializing(items: &[ConversationItem], max: usize) -> (Vec<bool>, bool) {
        let mut alive = vec![true; items.len()];
        let size = |alive: &[bool]| {
            let conversation = items
                .iter()
                .zip(alive)
                .filter(|(_, alive)| **alive)
                .map(|(item, _)| ConversationEntry {
                    role: item.role,
                    text: item.text.clone(),
                })
                .collect();
            let data = SourceData {
                session_id: "s".into(),
                label: "s".into(),
                cwd: None,
                captured_through_seq: Some(1),
                conversation,
            };
            data.to_json().len()
        };
        let droppable = items.len().saturating_sub(1);
        let mut next = 0;
        while size(&alive) > max {
            while next < droppable && items[next].checkpoint {
                next += 1;
            }
            if next >= droppable {
                break;
            }
            alive[next] = false;
            next += 1;
        }
        let fits = size(&alive) <= max;
        (alive, fits)
    }

    /// Retention measures messages from the newest back and stops about the budget's worth in;
    /// the messages it keeps are the ones re-serializing after every drop keeps, for
    /// conversations of every shape (checkpoints anywhere, texts that escape, budgets from
    /// nothing fitting to everything fitting).
    #[test]
    fn the_messages_kept_are_those_dropping_one_by_one_keeps() {
        let mut rng = crate::test_rng::TestRng::new(35);
        let pieces = [
            "plain words ",
            "line\n",
            "\"q\" ",
            "<tag>",
            "\u{1}",
            "é😀",
            "\t",
        ];
        for round in 0..3_000 {
            let n = rng.below(12);
            let items: Vec<ConversationItem> = (0..n)
                .map(|_| {
                    let text: String = (0..rng.below(30)).map(|_| *rng.pick(&pieces)).collect();
                    ConversationItem {
                        role: *rng.pick(&[Role::User, Role::Assistant]),
                        text,
                        checkpoint: rng.below(5) == 0,
                    }
                })
                .collect();
            let max = 80 + rng.below(if round % 3 == 0 { 400 } else { 3_000 });
            let (alive, fits) = alive_after_reserializing(&items, max);
            let dropped = alive.iter().filter(|a| !**a).count();
            match retain(meta(), items.clone(), max) {
                Ok(retained) => {
                    assert_eq!(retained.stats.omitted_messages, dropped, "{items:?} {max}");
                    let expected: Vec<&ConversationItem> = items
                        .iter()
                        .zip(&alive)
                        .filter(|(_, a)| **a)
                        .map(|(item, _)| item)
                        .collect();
                    let kept = &retained.data.conversation;
                    assert_eq!(kept.len(), expected.len(), "{items:?} {max}");
                    for (entry, item) in kept.iter().zip(expected) {
                        assert_eq!(entry.role, item.role);
                        // Step 2 may have cut it (to a head, a tail and its notice, or to
                        // nothing when not even the notice fits), never swapped it.
                        assert!(
                            entry.text == item.text
                                || entry.text.is_empty()
                                || entry.text.contains("[\u{2026} omitted"),
                            "{items:?} {max}"
                        );
                    }
                    assert!(retained.data.to_json().len() <= max);
                    // Nothing is cut when dropping alone made it fit.
                    if fits {
                        assert_eq!(retained.stats.omitted_bytes, {
                            items
                                .iter()
                                .zip(&alive)
                                .filter(|(_, a)| !**a)
                                .map(|(i, _)| i.text.len())
                                .sum::<usize>()
                        });
                    }
                }
                // Not even cut texts fit: dropping alone had not made it fit either.
                Err(_) => assert!(!fits, "{items:?} {max}"),
            }
        }
    }

    #[test]
    fn truncate_keeps_head_and_tail_with_exact_notice() {
        let text = "abcdefghijklmnopqrstuvwxyz".repeat(4); // 104 bytes
        let (cut, omitted) = truncate(&text, 60);
        assert!(cut.len() <= 60, "{}", cut.len());
        assert!(cut.ends_with(&format!("\n[… omitted {omitted} UTF-8 bytes …]")));
        let kept = cut.len() - notice_len(omitted);
        assert_eq!(kept + omitted, text.len());
        assert!(text.starts_with(&cut[..kept.div_ceil(2)]));
        // One more kept byte would not fit.
        assert!(kept + 1 + notice_len(omitted - 1) > 60);
    }

    #[test]
    fn truncate_never_splits_characters() {
        let text = "é😀".repeat(20);
        for target in 0..text.len() {
            let (cut, omitted) = truncate(&text, target);
            assert!(cut.len() <= target);
            if cut.is_empty() {
                assert_eq!(omitted, text.len());
            } else {
                let kept = cut.len() - notice_len(omitted);
                assert_eq!(kept + omitted, text.len());
            }
        }
    }

    #[test]
    fn truncate_to_nothing_when_notice_does_not_fit() {
        assert_eq!(truncate(&"x".repeat(49), 10), (String::new(), 49));
    }

    #[test]
    fn drops_oldest_ordinary_messages_first() {
        let items = vec![
            item("checkpoint", true),
            item(&"a".repeat(100), false),
            item(&"b".repeat(100), false),
            item("last", false),
        ];
        let retained = retain(meta(), items, 160).unwrap();
        let texts: Vec<&str> = retained
            .data
            .conversation
            .iter()
            .map(|e| e.text.as_str())
            .collect();
        assert_eq!(texts, vec!["checkpoint", "last"]);
        assert_eq!(retained.stats.omitted_messages, 2);
        assert_eq!(retained.stats.omitted_bytes, 200);
        assert!(retained.stats.truncated);
        assert!(retained.data.to_json().len() <= 160);
    }

    #[test]
    fn budget_exceeded_when_fixed_fields_do_not_fit() {
        let err = retain(meta(), vec![item("x", false)], 20).unwrap_err();
        assert_eq!(err.kind(), ErrorCode::BudgetExceeded);
        let err = retain(meta(), vec![], 20).unwrap_err();
        assert_eq!(err.kind(), ErrorCode::BudgetExceeded);
    }

    #[test]
    fn cuts_account_for_escapes_and_record_exact_omissions() {
        // Escapes make serialized text longer than its raw bytes, so one cut may not be enough;
        // whatever the number of cuts, the recorded omission is that of the final cut.
        let text = format!("{}{}", "a".repeat(200), "\u{1}".repeat(60));
        for max in (100..700).step_by(7) {
            let Ok(retained) = retain(meta(), vec![item(&text, false)], max) else {
                continue;
            };
            assert!(retained.data.to_json().len() <= max, "{max}");
            let kept_text = &retained.data.conversation[0].text;
            let omitted = retained.stats.omitted_bytes;
            if kept_text.is_empty() {
                assert_eq!(omitted, text.len());
            } else if omitted > 0 {
                assert_eq!(kept_text.len() - notice_len(omitted) + omitted, text.len());
            } else {
                assert_eq!(kept_text, &text);
            }
        }
    }
}
