//! Everything the app loop reacts to, as one enum: terminal input, agent reports and the
//! answers of the app's background tasks.
//!
//! Invariant: every answer of a task started through [`super::tasks::TaskSlot`] carries the
//! serial it was started with, and the loop uses it only while that serial is its slot's
//! current one; a lookup answers once, rows and discovery's details together, so nothing
//! depends on two events arriving in order. Proof: the unit tests of `tasks.rs` and
//! `tests/tui/app.rs`.

use crate::agent::AgentEvent;
use crate::discovery::Hit;
use crate::host::attach;
use crate::host::{Preview, SubmitError, Submitted};
use crate::reference::Candidate;
use crate::tui::composer::PlainToken;
use crate::tui::lookup::SessionDetails;
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
    /// The answer to one popup lookup: its rows (or why there are none) and discovery's details
    /// for them (SPEC §8); a stale lookup's answer is dropped by its id.
    Lookup {
        /// The lookup this answers.
        id: QueryId,
        /// The popup's session rows, or why there are none.
        result: Result<Vec<Candidate>, String>,
        /// What discovery knows of those rows, when it answered.
        details: Option<Arc<SessionDetails>>,
    },
    /// The end of a submit transaction (SPEC §5.3).
    Submitted(Result<Submitted, SubmitError>),
    /// The preview behind a mention's badge.
    Badge {
        /// The mentioned session.
        id: String,
        /// The serial of the preview task.
        serial: u64,
        /// The preview, or why it could not be made.
        result: Result<Preview, String>,
    },
    /// The file finder has new rows (its walk found files, or a match finished).
    FilesChanged,
    /// The popup's preview of its highlighted session.
    PopupPreview {
        /// The highlighted session.
        id: String,
        /// The serial of the preview task.
        serial: u64,
        /// The preview, or why it could not be made.
        result: Result<Preview, String>,
    },
    /// The session `/resume PREFIX` names (`Ok(Err(word))`: a word that starts no id), or why
    /// none.
    Resolved {
        /// The serial of the resolving task.
        serial: u64,
        /// The id, the word that starts none, or why the listing failed.
        result: Result<Result<String, String>, String>,
    },
    /// The finder's answer to one picker query.
    Picker {
        /// The serial of the search task.
        serial: u64,
        /// The picker's generation the query was typed in.
        generation: u64,
        /// The hits (this home's own sessions) and how many there are in all.
        result: Result<(Vec<Hit>, usize), String>,
    },
    /// The answer to `/sessions`.
    Listed {
        /// The serial of the listing task.
        serial: u64,
        /// The sessions, newest first, or why none.
        result: Result<Vec<Candidate>, String>,
    },
    /// Discovery answered without its index (busy, a full disk…): said once in the transcript.
    DiscoveryNote(String),
    /// Periodic wake-up (expiring "press again to quit", ages in the popup).
    Tick,
    /// What a typed or picked `@path` names.
    Inspected {
        /// The serial of the inspection.
        serial: u64,
        /// The file, or why not.
        result: Result<attach::Inspected, String>,
    },
    /// A send stopped before anything went: an attached file could not be read as chosen, or a
    /// typed `@PREFIX` names several sessions.
    NotSent(String),
    /// What a typed `@PREFIX` taken with Tab names.
    TypedId {
        /// The token typed.
        token: PlainToken,
        /// The prefix it spells.
        prefix: String,
        /// The one session id, none, or why several.
        result: Result<Option<String>, String>,
    },
}
