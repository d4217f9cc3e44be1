//! Everything the app loop reacts to, as one enum: terminal input, agent reports and the
//! answers of the app's background tasks (each carrying the serial it was started with, so a
//! stale one is dropped by [`super::tasks`]).

use crate::agent::AgentEvent;
use crate::reference::Candidate;
use crate::tui::attach;
use crate::tui::mount::{Preview, SubmitError, Submitted};
use crate::tui::popup::QueryId;
use crossterm::event::Event as TermEvent;
use std::sync::Arc;

/// Everything the loop reacts to.
#[derive(Debug)]
pub enum AppEvent {
    /// A key, paste, mouse or resize event from the terminal.
    Input(TermEvent),
    /// Something the agent reported (logged batch, delta, status, error).
    Agent(AgentEvent),
    /// The popup rows for one lookup, or why there are none; a stale lookup's are dropped.
    Lookup(QueryId, Result<Vec<Candidate>, String>),
    /// Discovery's details for the rows of a lookup (SPEC §8), sent before its `Lookup`.
    Discovered(QueryId, Option<Arc<crate::tui::discovery::SessionDetails>>),
    /// The end of a submit transaction (SPEC §5.3).
    Submitted(Result<Submitted, SubmitError>),
    /// A mention's badge: (session id, serial of the preview, its result).
    Badge(String, u64, Result<Preview, String>),
    /// The file finder has new rows (its walk found files, or a match finished).
    FilesChanged,
    /// The popup's preview of its highlighted session: (session id, serial, result).
    PopupPreview(String, u64, Result<Preview, String>),
    /// The session `/resume PREFIX` names (`Ok(Err(word))`: a word that starts no id), or why
    /// none.
    Resolved(Result<Result<String, String>, String>),
    /// The finder's answer to one `/resume` picker query: (its generation, hits and total).
    Picker(u64, Result<(Vec<crate::discovery::Hit>, usize), String>),
    /// The answer to `/sessions`.
    Listed(Result<Vec<Candidate>, String>),
    /// Discovery answered without its index (busy, a full disk…): said once in the transcript.
    DiscoveryNote(String),
    /// Periodic wake-up (expiring "press again to quit", ages in the popup).
    Tick,
    /// What a typed or picked `@path` names (serial of the inspection, the file or why not).
    Inspected(u64, Result<attach::Inspected, String>),
    /// A send stopped before anything went: an attached file could not be read as chosen, or a
    /// typed `@PREFIX` names several sessions.
    NotSent(String),
    /// What a typed `@PREFIX` taken with Tab names: (its token, the prefix, the one session id
    /// or none, or why several).
    TypedId(
        crate::tui::composer::PlainToken,
        String,
        Result<Option<String>, String>,
    ),
}
