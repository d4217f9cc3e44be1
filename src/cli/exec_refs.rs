//! References for `exec` without the base64 dance (issue 24): `@ID` and `@PREFIX` typed in the
//! prompt, and `--ref ID|PREFIX|WORD`, become `@[title](dsh-session:…)` mentions before the
//! prompt goes through the mount like any other.
//!
//! Invariant: a token becomes a reference only when it names sessions; an ambiguous one is an
//! error listing the candidates, never a guess. In the prompt, `@TOKEN` (at the start or after
//! whitespace, trailing `,.;:!?)` left out) is a reference when TOKEN is a listed id, or a prefix
//! of listed ids that looks like one (`session-…`, `claude:…`, `codex:…`, or at least four hex
//! digits, which stand for `session-<hex>`); a prefix that names no session is left as text
//! (`@README.md` stays a file for the attachment rules), except a `session-…`/`claude:`/`codex:`
//! token, which is an error. `--ref` resolves the same way as `--resume` does (exact id, then a
//! unique prefix), and a WORD that is no id prefix through discovery search: one matching
//! session is taken, several are listed. Labels are the sessions' titles (else their ids).
//!
//! Proof: `tests/agent/exec_refs.rs` runs the binary on a home with sessions whose ids share
//! prefixes.

use crate::discovery::lifecycle::{resolve_prefix, ResolveError};
use crate::discovery::{listed_ids, SearchQuery};
use crate::escape;
use crate::host::Workspace;
use crate::reference::format_session_reference_mention;
use crate::session::external::ExternalAgent;
use crate::session::{SessionQuery, SessionSummary};
use std::sync::Arc;

/// Why a reference could not be resolved: lines for stderr, each already made inert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefError(pub Vec<String>);

impl RefError {
    fn line(text: String) -> RefError {
        RefError(vec![escape::diagnostic(&text).into_owned()])
    }
}

/// How many candidates an ambiguous reference lists.
const SHOWN: usize = 10;

/// Whether `token` is spelled like a session id (so naming nothing is an error, not text).
fn looks_like_an_id(token: &str) -> bool {
    token.starts_with("session-") || ExternalAgent::of_id(token).is_some()
}

/// At least four hex digits (and dashes): the start of a dsh uuid.
fn hex_start(token: &str) -> bool {
    token.chars().filter(char::is_ascii_hexdigit).count() >= 4
        && token.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// The session `token` names by id or prefix: `Ok(None)` when it names none.
fn by_id(listing: &[SessionSummary], token: &str) -> Result<Option<String>, RefError> {
    let mut tries = vec![token.to_string()];
    if hex_start(token) {
        tries.push(format!("session-{token}"));
    }
    for prefix in tries {
        match resolve_prefix(listing, &prefix) {
            Ok(id) => return Ok(Some(id)),
            Err(ResolveError::NotFound { .. } | ResolveError::Empty) => {}
            Err(ResolveError::Ambiguous {
                candidates, total, ..
            }) => {
                let mut lines = vec![format!(
                    "{total} sessions start with {}; give more of the id:",
                    escape::escape_line(&format!("{prefix:?}"))
                )];
                lines.extend(
                    candidates
                        .iter()
                        .map(|id| format!("  {}", escape::escape_line(id))),
                );
                if total > candidates.len() {
                    lines.push(format!("  … and {} more", total - candidates.len()));
                }
                return Err(RefError(lines));
            }
        }
    }
    Ok(None)
}

/// The mention of `id`, labelled with its title (else the id).
async fn mention(query: &dyn SessionQuery, id: &str) -> String {
    let title = query
        .read_title(id)
        .await
        .ok()
        .flatten()
        .filter(|t| !t.trim().is_empty());
    format_session_reference_mention(id, Some(title.as_deref().unwrap_or(id)))
}

/// `prompt` with `--ref` mentions first and `@ID`/`@PREFIX` tokens made mentions.
pub async fn rewrite(
    prompt: &str,
    refs: &[String],
    query: &Arc<dyn SessionQuery>,
    workspace: &Workspace,
) -> Result<String, RefError> {
    let needs_listing = !refs.is_empty() || prompt.contains('@');
    if !needs_listing {
        return Ok(prompt.to_string());
    }
    let listing = query
        .list_sessions()
        .await
        .map_err(|e| RefError::line(format!("could not list the sessions: {e}")))?;
    let mut out = String::new();
    for word in refs {
        let id = match by_id(&listing, word)? {
            Some(id) => id,
            None => search_one(workspace, &listing, word).await?,
        };
        out.push_str(&mention(query.as_ref(), &id).await);
        out.push(' ');
    }
    let mut rest = prompt;
    let mut at_start = true;
    while let Some(pos) = rest.find('@') {
        let before_ok = if pos == 0 {
            at_start
        } else {
            rest[..pos]
                .chars()
                .next_back()
                .is_some_and(char::is_whitespace)
        };
        let after = &rest[pos + 1..];
        let end = after.find(char::is_whitespace).unwrap_or(after.len());
        let token = after[..end].trim_end_matches([',', '.', ';', ':', '!', '?', ')']);
        let candidate = before_ok
            && !token.is_empty()
            && (listing.iter().any(|s| s.id() == token)
                || looks_like_an_id(token)
                || hex_start(token));
        let named = if candidate {
            match by_id(&listing, token)? {
                Some(id) => Some(id),
                None if looks_like_an_id(token) => {
                    return Err(RefError::line(format!(
                        "no session id is or starts with {} (list them with dsh-refs sessions, \
                         or find one with dsh-refs search WORDS)",
                        escape::escape_line(&format!("{token:?}"))
                    )))
                }
                None => None,
            }
        } else {
            None
        };
        out.push_str(&rest[..pos]);
        match named {
            Some(id) => {
                out.push_str(&mention(query.as_ref(), &id).await);
                rest = &after[token.len()..];
            }
            None => {
                out.push('@');
                rest = after;
            }
        }
        at_start = false;
    }
    out.push_str(rest);
    Ok(out)
}

/// The one session a search for `word` finds (the index is brought up to date first).
async fn search_one(
    workspace: &Workspace,
    listing: &Arc<Vec<SessionSummary>>,
    word: &str,
) -> Result<String, RefError> {
    let discovery = workspace.discovery().clone();
    let listed = listed_ids(listing);
    let query = SearchQuery {
        text: word.to_string(),
        agent: None,
        cwd: std::env::current_dir()
            .ok()
            .map(|d| d.to_string_lossy().into_owned()),
        limit: SHOWN,
        now_ms: crate::session::clock::now_ms(),
        snippets: false,
    };
    let result = tokio::task::spawn_blocking(move || {
        discovery
            .refresh_blocking()
            .and_then(|_| discovery.search_blocking(&query, Some(&listed)))
    })
    .await
    .map_err(|e| RefError::line(format!("the search for --ref stopped: {e}")))?
    .map_err(|e| RefError::line(format!("could not search for --ref {word:?}: {e}")))?;
    match result.hits.as_slice() {
        [] => Err(RefError::line(format!(
            "--ref {word:?}: no session id starts with it and no session matches it (list them \
             with dsh-refs sessions)"
        ))),
        [one] if result.total == 1 => Ok(one.id.clone()),
        hits => {
            let mut lines = vec![format!(
                "--ref {}: {} sessions match; name one by id (--ref ID):",
                escape::escape_line(&format!("{word:?}")),
                result.total
            )];
            for hit in hits {
                let title = hit
                    .title
                    .as_deref()
                    .or(hit.first_prompt.as_deref())
                    .unwrap_or("(untitled)");
                lines.push(format!(
                    "  {}  {}",
                    escape::escape_line(&hit.id),
                    escape::escape_line(title)
                ));
            }
            if result.total > hits.len() {
                lines.push(format!("  … and {} more", result.total - hits.len()));
            }
            Err(RefError(lines))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_looks_like_an_id() {
        assert!(looks_like_an_id("session-3f"));
        assert!(looks_like_an_id("claude:abc"));
        assert!(!looks_like_an_id("README.md"));
        assert!(hex_start("3f2a"));
        assert!(hex_start("3f2a-9c"));
        assert!(!hex_start("3f2"));
        assert!(!hex_start("beefy"));
    }
}
