//! Which session `--resume PREFIX` and `--continue` mean (SPEC §8): pure choices over a listing.
//!
//! Invariant: an exact id always wins; otherwise a prefix must name exactly one session, and an
//! ambiguous prefix is an error listing the candidates (never a guess); `--continue` picks the
//! session of the given cwd with the latest activity, ties by newest creation, then id.
//! Proof: the unit tests below; `tests/e2e/cli_lifecycle.rs` runs both flags through the binary.

use crate::session::SessionSummary;

/// Candidates shown in an ambiguous-prefix error.
pub const SHOWN_CANDIDATES: usize = 10;

/// Why `--resume PREFIX` names no one session; its text is the error the command line (which
/// words a not-found prefix its own way) and the TUI's resume show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// No listed session id is, or starts with, the prefix.
    #[error("no session id is or starts with {prefix:?}")]
    NotFound {
        /// The prefix as given.
        prefix: String,
    },
    /// More than one listed session id starts with the prefix (and none is it exactly).
    #[error("{}", ambiguous_message(prefix, candidates, *total))]
    Ambiguous {
        /// The prefix as given.
        prefix: String,
        /// Up to [`SHOWN_CANDIDATES`] whole ids, newest first.
        candidates: Vec<String>,
        /// How many ids start with the prefix (the message says how many are not shown).
        total: usize,
    },
    /// The prefix was empty.
    #[error("an empty id cannot name a session")]
    Empty,
}

fn ambiguous_message(prefix: &str, candidates: &[String], total: usize) -> String {
    let mut text = format!(
        "{total} sessions start with {prefix:?}; give more of the id:\n  {}",
        candidates.join("\n  ")
    );
    if total > candidates.len() {
        text.push_str(&format!("\n  … and {} more", total - candidates.len()));
    }
    text
}

/// The one session `prefix` names in `listing` (newest first, as `list_sessions` answers).
pub fn resolve_prefix(listing: &[SessionSummary], prefix: &str) -> Result<String, ResolveError> {
    if prefix.is_empty() {
        return Err(ResolveError::Empty);
    }
    if let Some(exact) = listing.iter().find(|s| s.id() == prefix) {
        return Ok(exact.id().to_string());
    }
    let matching: Vec<&SessionSummary> = listing
        .iter()
        .filter(|s| s.id().starts_with(prefix))
        .collect();
    match matching.as_slice() {
        [] => Err(ResolveError::NotFound {
            prefix: prefix.to_string(),
        }),
        [one] => Ok(one.id().to_string()),
        many => Err(ResolveError::Ambiguous {
            prefix: prefix.to_string(),
            candidates: many
                .iter()
                .take(SHOWN_CANDIDATES)
                .map(|s| s.id().to_string())
                .collect(),
            total: many.len(),
        }),
    }
}

/// The session of `cwd` last active, by `last_activity(summary)` (epoch ms).
pub fn newest_in_cwd(
    listing: &[SessionSummary],
    cwd: &str,
    last_activity: impl Fn(&SessionSummary) -> i64,
) -> Option<String> {
    listing
        .iter()
        .filter(|s| s.cwd() == Some(cwd))
        .max_by(|a, b| {
            last_activity(a)
                .cmp(&last_activity(b))
                .then(a.created_at().cmp(&b.created_at()))
                .then(b.id().cmp(a.id()))
        })
        .map(|s| s.id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionHeader;
    use std::sync::Arc;

    fn summary(id: &str, created: i64, cwd: Option<&str>) -> SessionSummary {
        SessionSummary {
            header: Arc::new(SessionHeader::new(id, created, cwd.map(str::to_string))),
            live: false,
            persisted: true,
        }
    }

    #[test]
    fn prefixes_resolve_only_when_unique() {
        let listing = vec![
            summary("7a712ba3-aaaa", 3, None),
            summary("7a71ffff-bbbb", 2, None),
            summary("be266e1a", 1, None),
            summary("be", 0, None),
        ];
        assert_eq!(resolve_prefix(&listing, "be266").unwrap(), "be266e1a");
        assert_eq!(resolve_prefix(&listing, "be").unwrap(), "be", "exact wins");
        assert_eq!(resolve_prefix(&listing, "7a712").unwrap(), "7a712ba3-aaaa");
        let err = resolve_prefix(&listing, "7a71").unwrap_err();
        assert_eq!(
            err,
            ResolveError::Ambiguous {
                prefix: "7a71".into(),
                candidates: vec!["7a712ba3-aaaa".into(), "7a71ffff-bbbb".into()],
                total: 2
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("7a712ba3-aaaa") && text.contains("7a71ffff-bbbb"),
            "{text}"
        );
        assert!(matches!(
            resolve_prefix(&listing, "zz"),
            Err(ResolveError::NotFound { .. })
        ));
        assert_eq!(resolve_prefix(&listing, ""), Err(ResolveError::Empty));
    }

    #[test]
    fn continue_picks_the_last_active_session_of_the_cwd() {
        let listing = vec![
            summary("new-elsewhere", 30, Some("/b")),
            summary("newer", 20, Some("/a")),
            summary("older-but-used", 10, Some("/a")),
            summary("no-cwd", 40, None),
        ];
        let by_created = |s: &SessionSummary| s.created_at();
        assert_eq!(
            newest_in_cwd(&listing, "/a", by_created).as_deref(),
            Some("newer")
        );
        let used = |s: &SessionSummary| {
            if s.id() == "older-but-used" {
                99
            } else {
                s.created_at()
            }
        };
        assert_eq!(
            newest_in_cwd(&listing, "/a", used).as_deref(),
            Some("older-but-used")
        );
        assert_eq!(newest_in_cwd(&listing, "/c", by_created), None);
    }
}
