//! `dsh-refs sessions`: the store as the command line sees it (SPEC §6).
//!
//! Everything printed comes from a home someone else may have written (directory names, ids,
//! titles, cwds, corruption reports quoting a record), so every byte of it reaches the terminal
//! escaped as on screen (SPEC §5.2): table fields and diagnostics through
//! [`crate::escape::escape_line`], the JSON listing through [`crate::escape::json_for_terminal`].
//!
//! Proof: `tests/cli/diagnostics.rs`, `tests/cli/reliability_hostile_home.rs` and the unit test of
//! `utc_timestamp` below.

use crate::escape;
use crate::host::Workspace;
use crate::session::external::{self, SourceSet};
use crate::session::query::{sort_sessions, SessionSummary};
use crate::session::store::DiskStore;
use crate::session::SessionError;
use serde::Serialize;
use std::io::Write;

#[derive(Serialize)]
struct SessionRow<'a> {
    #[serde(rename = "sessionId")]
    session_id: &'a str,
    title: Option<String>,
    cwd: Option<&'a str>,
    #[serde(rename = "createdAt")]
    created_at: i64,
    live: bool,
    persisted: bool,
    /// The agent that wrote the session, for other agents' sessions (SPEC §9).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'static str>,
    /// When it was last written (the table's LAST ACTIVE; not in the JSON, whose keys SPEC §6
    /// fixes).
    #[serde(skip)]
    last_active: i64,
}

/// Prints every session (newest first) as a table or a JSON array; returns the exit code.
pub fn sessions(workspace: &Workspace, json: bool) -> i32 {
    let store = workspace.store();
    let sources = workspace.sources();
    match render(store, sources, json) {
        Ok(out) => {
            // The listing leaves out logs it cannot read; say so instead of hiding them.
            for skipped in store.unsupported_logs() {
                eprintln!("dsh-refs: not listed: {skipped}");
            }
            let own = if sources.hide_dsh {
                Vec::new()
            } else {
                store.unreadable_logs()
            };
            let unreadable = own
                .into_iter()
                .chain(sources.external.iter().flat_map(|s| s.unreadable_files()));
            for why in unreadable {
                eprintln!("dsh-refs: not listed: {}", escape::diagnostic(&why));
            }
            let mut stdout = std::io::stdout().lock();
            let _ = stdout
                .write_all(out.as_bytes())
                .and_then(|_| stdout.flush());
            0
        }
        Err(e) => {
            eprintln!("dsh-refs: {}", escape::diagnostic(&e.to_string()));
            1
        }
    }
}

fn render(store: &DiskStore, sources: &SourceSet, json: bool) -> Result<String, SessionError> {
    let mut sessions = Vec::new();
    if !sources.hide_dsh {
        sessions.extend(store.list_sessions_blocking()?.iter().cloned());
    }
    // Each agent's listing and titles on a thread of its own (a warm listing is a `stat` per
    // file and a cache to read per agent; a first one reads every file's tail, on every core).
    let listed: Vec<Listed> = std::thread::scope(|scope| {
        let workers: Vec<_> = sources
            .external
            .iter()
            .map(|source| scope.spawn(move || list_with_titles(source)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_default())
            .collect()
    });
    let mut titles: std::collections::HashMap<String, Option<String>> =
        std::collections::HashMap::new();
    for (list, source_titles) in listed {
        sessions.extend(list);
        titles.extend(source_titles);
    }
    sort_sessions(&mut sessions);
    let mut rows = Vec::with_capacity(sessions.len());
    for summary in sessions.iter() {
        let agent = external::source_of(&summary.header);
        let title = match titles.remove(summary.id()) {
            Some(title) => title,
            None => store.read_title_blocking(summary.id()).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "title unreadable");
                None
            }),
        };
        rows.push(SessionRow {
            session_id: summary.id(),
            title,
            cwd: summary.cwd(),
            created_at: summary.created_at(),
            live: summary.live,
            persisted: summary.persisted,
            source: agent.map(external::ExternalAgent::name),
            last_active: match agent {
                None => super::lifecycle::last_active(store, summary),
                Some(_) => summary.created_at(),
            },
        });
    }
    if json {
        let mut out =
            escape::json_for_terminal(serde_json::to_string(&rows).expect("rows serialize"));
        out.push('\n');
        return Ok(out);
    }
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str(&format!(
            "no sessions under {}\n",
            visible(&store.sessions_dir().display().to_string())
        ));
        return Ok(out);
    }
    let id_width = rows
        .iter()
        .map(|r| escape::escape_line(r.session_id).chars().count())
        .max()
        .unwrap_or(2)
        .max(2);
    // Written in place: a warm listing of thousands of rows spent a tenth of its time on each
    // field's own `String`.
    use std::fmt::Write as _;
    out.reserve(rows.len() * (id_width + 120));
    let _ = writeln!(
        out,
        "{:<id_width$}  {:<20}  {:<11}  {:<30}  CWD",
        "ID", "CREATED (UTC)", "LAST ACTIVE", "TITLE"
    );
    let now = crate::session::clock::now_ms();
    for row in &rows {
        let title = row
            .title
            .as_deref()
            .map(escape::escape_line)
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<id_width$}  {:<20}  {:<11}  {:<30}  {}",
            // Whole ids: a cut id cannot be pasted into `--resume`.
            escape::escape_line(row.session_id),
            Utc(row.created_at),
            // The one age format of every face.
            crate::host::format_age(row.last_active, now),
            clip(&title, 30),
            row.cwd
                .map(escape::escape_line)
                .unwrap_or(std::borrow::Cow::Borrowed("(no cwd)")),
        );
    }
    Ok(out)
}

/// One agent's sessions and their titles by id.
type Listed = (Vec<SessionSummary>, Vec<(String, Option<String>)>);

/// One agent's sessions with their titles (a source that cannot list is named on stderr and
/// lists nothing).
fn list_with_titles(source: &external::ExternalSessions) -> Listed {
    let list = match source.list_sessions_blocking() {
        Ok(list) => list,
        Err(e) => {
            eprintln!(
                "dsh-refs: not listed: {} sessions: {e}",
                source.agent().name()
            );
            return Default::default();
        }
    };
    let ids: Vec<&str> = list.iter().map(|s| s.id()).collect();
    let titles = ids
        .iter()
        .zip(source.read_titles_blocking(&ids))
        .map(|(id, title)| {
            let title = title.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "title unreadable");
                None
            });
            (id.to_string(), title)
        })
        .collect();
    (list.to_vec(), titles)
}

/// Control characters from logs never reach the terminal.
fn visible(text: &str) -> String {
    escape::escape_line(text).into_owned()
}

fn clip(text: &str, width: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(width) {
        None => std::borrow::Cow::Borrowed(text),
        Some(_) => {
            let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
            out.push('…');
            std::borrow::Cow::Owned(out)
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS` for epoch milliseconds.
pub fn utc_timestamp(ms: i64) -> String {
    Utc(ms).to_string()
}

/// Epoch milliseconds shown as `YYYY-MM-DD HH:MM:SS` (padded as a string is: `{:<20}`),
/// written without a `String` of its own.
struct Utc(i64);

impl std::fmt::Display for Utc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::io::Write as _;
        let t = crate::session::civil::UtcTime::from_epoch_ms(self.0);
        let mut buf = [0u8; 48];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        write!(
            cursor,
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            t.year, t.month, t.day, t.hour, t.minute, t.second
        )
        .map_err(|_| std::fmt::Error)?;
        let len = usize::try_from(cursor.position()).map_err(|_| std::fmt::Error)?;
        f.pad(std::str::from_utf8(&buf[..len]).map_err(|_| std::fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_timestamps() {
        assert_eq!(utc_timestamp(0), "1970-01-01 00:00:00");
        assert_eq!(utc_timestamp(1_785_004_180_013), "2026-07-25 18:29:40");
        assert_eq!(utc_timestamp(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc_timestamp(-1000), "1969-12-31 23:59:59");
    }
}
