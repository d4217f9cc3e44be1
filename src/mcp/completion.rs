//! The `reference` prompt's argument: what a host may send in place of one, and the completion
//! values offered for it (SPEC §10 "Prompt").
//!
//! Purpose: a completion value must name one session when the host sends it back, exactly as
//! `--resume` resolves a prefix, and hosts split arguments on whitespace.
//! Invariant: every value [`unique_tokens`] gives resolves (by `resolve_prefix`) to the id it was
//! made from, holds no whitespace, and is at least 8 characters or the whole id.
//! Proof: the property test below over ids of every shape, and `tests/mcp/server.rs` (the prompt
//! and its completion over the real binary).

use crate::discovery::lifecycle::resolve_prefix;
use crate::session::SessionSummary;

/// Values a completion offers.
pub const COMPLETIONS: usize = 20;

/// Whether `value` is a host's own argument placeholder (`$1`, `$ARGUMENTS`), as opencode sends
/// to `prompts/get` (it substitutes the person's words into the returned text itself), rather
/// than anything a person typed for a session.
pub(super) fn is_placeholder(value: &str) -> bool {
    value.strip_prefix('$').is_some_and(|rest| {
        rest == "ARGUMENTS" || (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// For each of `ids` (in order, at most [`COMPLETIONS`]), the shortest prefix that names it
/// alone in `listing` as `--resume` resolves a prefix (an exact id always names its session):
/// at least 8 characters, and longer than `typed` when `typed` is a prefix of it; ids whose
/// prefix would hold whitespace are left out (hosts split arguments on spaces).
pub(super) fn unique_tokens(
    listing: &[SessionSummary],
    ids: &[String],
    typed: &str,
) -> Vec<String> {
    let mut sorted: Vec<&str> = listing.iter().map(|s| s.id()).collect();
    sorted.sort_unstable();
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let mut values = Vec::new();
    for id in ids {
        let Ok(at) = sorted.binary_search(&id.as_str()) else {
            continue;
        };
        let before = at.checked_sub(1).map_or(0, |i| common(sorted[i], id));
        let after = sorted.get(at + 1).map_or(0, |next| common(next, id));
        let floor = if id.starts_with(typed) {
            typed.chars().count().max(8)
        } else {
            8
        };
        let chars = (before.max(after) + 1).max(floor);
        let value: String = id.chars().take(chars).collect();
        if value.contains(char::is_whitespace) || values.contains(&value) {
            continue;
        }
        debug_assert!(matches!(resolve_prefix(listing, &value), Ok(found) if found == *id));
        values.push(value);
        if values.len() == COMPLETIONS {
            break;
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionHeader;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn listing(ids: &[String]) -> Vec<SessionSummary> {
        ids.iter()
            .map(|id| SessionSummary {
                header: Arc::new(SessionHeader::new(id.clone(), 0, None)),
                live: false,
                persisted: true,
            })
            .collect()
    }

    proptest! {
        /// Every completion value resolves, as `--resume` resolves a prefix, to its own id.
        #[test]
        fn completion_values_resolve_uniquely(
            ids in proptest::collection::btree_set("[ab]{1,10}|[a-c ]{1,12}|ab😀{0,3}", 1..40),
            typed in "[ab]{0,3}",
        ) {
            let ids: Vec<String> = ids.into_iter().collect();
            let listed = listing(&ids);
            let chosen: Vec<String> = ids.iter().filter(|id| id.starts_with(&typed)).cloned().collect();
            for value in unique_tokens(&listed, &chosen, &typed) {
                prop_assert!(!value.contains(char::is_whitespace));
                let found = resolve_prefix(&listed, &value);
                prop_assert!(found.is_ok(), "{value:?} of {ids:?}");
                prop_assert!(found.unwrap().starts_with(&value));
            }
        }
    }

    #[test]
    fn host_placeholders_are_told_apart_from_typed_values() {
        for yes in ["$1", "$12", "$ARGUMENTS"] {
            assert!(is_placeholder(yes), "{yes}");
        }
        for no in ["$", "$x", "1", "$1a", "f382", "$arguments"] {
            assert!(!is_placeholder(no), "{no}");
        }
    }

    #[test]
    fn an_id_that_prefixes_another_completes_whole() {
        let ids: Vec<String> = ["abcdefghij", "abcdefghijk", "zzzzzzzzzz1"]
            .map(String::from)
            .into();
        let values = unique_tokens(&listing(&ids), &ids, "");
        assert_eq!(values, ["abcdefghij", "abcdefghijk", "zzzzzzzz"]);
    }
}
