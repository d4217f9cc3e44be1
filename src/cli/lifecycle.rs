//! The session lifecycle flags of the TUI (SPEC §8): `--resume PREFIX`, `--continue`, `--resume`
//! with no id, and the line printed on quitting.
//!
//! Only dsh sessions of the home can be resumed (other agents' sessions are read-only, SPEC §9).
//! The choice itself is pure (`crate::discovery::lifecycle`); this module reads the listing
//! and the logs' modification times (for "last active").

use crate::discovery::lifecycle::{newest_in_cwd, resolve_prefix, ResolveError};
use crate::escape;
use crate::host::Workspace;
use crate::session::external::ExternalAgent;
use crate::session::{DiskStore, SessionError, SessionSummary};
use std::path::Path;

/// What the TUI should open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// A new session.
    New,
    /// Resume this (whole) id.
    Resume(String),
    /// `--resume` without an id (empty), or with a word that starts no id: find sessions (this
    /// word typed) and let the user pick.
    Pick(String),
}

/// Resolves `--resume [ID]` and `--continue` against the home's sessions. `resume` is
/// `Some("")` for `--resume` with no id. Errors are messages for the user.
pub fn resolve_start(
    workspace: &Workspace,
    resume: Option<&str>,
    continue_last: bool,
    cwd: Option<&str>,
) -> Result<Start, String> {
    resolve_start_hinted(workspace, resume, continue_last, cwd, "dsh-refs")
}

/// [`resolve_start`], its hints spelling the command as `command` (`dsh-refs --demo`, …: see
/// [`command_prefix`]), so a hint can be pasted as it is.
pub fn resolve_start_hinted(
    workspace: &Workspace,
    resume: Option<&str>,
    continue_last: bool,
    cwd: Option<&str>,
    command: &str,
) -> Result<Start, String> {
    let store = workspace.store();
    if continue_last {
        let Some(cwd) = cwd else {
            return Err("--continue needs a current directory".into());
        };
        let listing = store
            .list_sessions_blocking()
            .map_err(|e| escape::diagnostic(&e.to_string()).into_owned())?;
        return match newest_in_cwd(&listing, cwd, |s| last_active(store, s)) {
            Some(id) => Ok(Start::Resume(id)),
            None => Err(format!(
                "no session of {} to continue (start one with {command}, or list them with \
                 {command} sessions)",
                escape::escape_line(cwd)
            )),
        };
    }
    let Some(prefix) = resume else {
        return Ok(Start::New);
    };
    if prefix.is_empty() {
        return Ok(Start::Pick(String::new()));
    }
    if let Some(agent) = ExternalAgent::of_id(prefix) {
        return Err(format!(
            "{} sessions are read-only: reference them with @ instead of resuming them",
            agent.product()
        ));
    }
    let listing = store
        .list_sessions_blocking()
        .map_err(|e| escape::diagnostic(&e.to_string()).into_owned())?;
    match resolve_prefix(&listing, prefix) {
        Ok(id) => Ok(Start::Resume(id)),
        // A log this build cannot list (another format version) still answers by its id with
        // the precise reason.
        Err(ResolveError::NotFound { .. }) => match store.log_path(prefix) {
            Err(e @ SessionError::UnsupportedVersion { .. }) => {
                Err(escape::diagnostic(&e.to_string()).into_owned())
            }
            // Not an id: a word to find the session by.
            _ => Ok(Start::Pick(prefix.to_string())),
        },
        // The candidates one per line: each line escaped, the line breaks kept.
        Err(e) => Err(e
            .to_string()
            .lines()
            .map(escape::diagnostic)
            .collect::<Vec<_>>()
            .join("\n")),
    }
}

/// When the session was last written: its log's modification time, else its creation.
pub fn last_active(store: &DiskStore, summary: &SessionSummary) -> i64 {
    store
        .log_path(summary.id())
        .ok()
        .and_then(|p| std::fs::metadata(p).ok())
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(summary.created_at(), |d| d.as_millis() as i64)
        .max(summary.created_at())
}

/// The recent sessions `--resume` with no id offers: this cwd's first, then the rest, each group
/// by last activity; at most `limit`.
pub fn recent_sessions(
    workspace: &Workspace,
    cwd: Option<&str>,
    limit: usize,
) -> Vec<(String, String)> {
    let store = workspace.store();
    let Ok(listing) = store.list_sessions_blocking() else {
        return Vec::new();
    };
    let mut rows: Vec<(bool, i64, &SessionSummary)> = listing
        .iter()
        .map(|s| (cwd.is_some() && s.cwd() == cwd, last_active(store, s), s))
        .collect();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    rows.into_iter()
        .take(limit)
        .map(|(_, _, s)| {
            let title = store
                .read_title_blocking(s.id())
                .ok()
                .flatten()
                .unwrap_or_default();
            (s.id().to_string(), title)
        })
        .collect()
}

/// This home's own sessions matching `query` through discovery (title, first prompt,
/// conversation, cwd), best first, at most `limit`: (id, title). The index is brought up to date
/// first. Errors are messages for the user.
pub fn find_sessions(
    workspace: &Workspace,
    query: &str,
    cwd: Option<&str>,
    limit: usize,
) -> Result<Vec<(String, String)>, String> {
    use crate::discovery::SearchQuery;
    let discovery = workspace.own_discovery();
    if let Err(e) = discovery.refresh_blocking() {
        tracing::warn!(error = %e, "resume: index not refreshed");
    }
    let found = discovery
        .search_blocking(
            &SearchQuery {
                text: query.to_string(),
                agent: None,
                cwd: cwd.map(str::to_string),
                limit,
                now_ms: crate::session::clock::now_ms(),
                snippets: false,
            },
            None,
        )
        .map_err(|e| escape::diagnostic(&e.to_string()).into_owned())?;
    Ok(found
        .hits
        .into_iter()
        .filter(|h| ExternalAgent::of_id(&h.id).is_none())
        .map(|h| {
            let title = h.meta.title.or(h.meta.first_prompt).unwrap_or_default();
            (h.meta.id, title)
        })
        .collect())
}

/// What to type to come back to session `id` (printed when the TUI quits).
pub fn resume_hint(id: &str, home_flag: Option<&Path>, demo: bool) -> String {
    format!(
        "{} --resume {}",
        command_prefix(home_flag, demo),
        shell_word(id)
    )
}

/// The command as a hint spells it: `dsh-refs`, with `--demo` or `--home DIR` when this run had
/// it, so every hint works as pasted.
pub fn command_prefix(home_flag: Option<&Path>, demo: bool) -> String {
    let mut line = String::from("dsh-refs");
    if demo {
        line.push_str(" --demo");
    } else if let Some(home) = home_flag {
        line.push_str(&format!(
            " --home {}",
            shell_word(&home.display().to_string())
        ));
    }
    line
}

/// `text` as one shell word (quoted when it holds anything but plain characters), with
/// control characters escaped.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        return text.to_string();
    }
    let quoted = format!("'{}'", text.replace('\'', r"'\''"));
    escape::escape_line(&quoted).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_one_shell_command() {
        assert_eq!(
            resume_hint("session-1", None, false),
            "dsh-refs --resume session-1"
        );
        assert_eq!(
            resume_hint("a b", Some(Path::new("/h x")), false),
            "dsh-refs --home '/h x' --resume 'a b'"
        );
        assert_eq!(
            resume_hint("it's", None, true),
            r"dsh-refs --demo --resume 'it'\''s'"
        );
        assert!(!resume_hint("a\u{1b}[2J", None, false).contains('\u{1b}'));
    }
}
