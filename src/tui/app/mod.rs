//! The standard TUI: one loop that owns every widget state and reacts to one channel of events
//! (keys, agent events, lookup answers, submit results). Nothing slow runs on it: candidate
//! lookups, file indexing and the submit transaction are tasks that answer through the channel,
//! so typing never waits, and answers to stale lookups are dropped by query id.
//!
//! No typed key is lost (SPEC §5.5): Enter takes the message out of the composer at once, so
//! keys and pastes that arrive while it is being prepared and sent (in the same input burst or
//! later) land in a fresh draft. A send that fails or is cancelled puts the message back in
//! front of that draft; one that succeeds files it in history. While a send is in flight Enter
//! sends nothing more (no duplicates) and Esc cancels it.
//!
//! Sent text also survives a failed log write: an accepted message's text is kept by message id
//! until the log shows it; an unsent or blocked report puts it back in front of the draft. A
//! session that cannot be written (held by another writer, damaged) opens read-only: Enter keeps
//! the text and says why.
//!
//! Keys go through one [`Keymap`](crate::tui::keys::Keymap) (SPEC §5.5) and one focus stack (`focus.rs`): the picker,
//! the outside-file prompt and the `?` overlay on top (modal), then the app's guard keys
//! (Ctrl-C: clear a draft, cancel a send, interrupt, or quit on a second idle press; Esc
//! cancelling a send), the `/` menu, the `@` popup (which leaves keys it has no use for to the
//! composer), the composer (`?` on an empty one), and last the session keys (Esc, scrolling,
//! cards). A key goes down the stack until a layer takes it, and a frame draws the same stack
//! bottom-up, so what is on top takes keys first. A `/` line runs here and never reaches the
//! model. `--resume` with no id opens the app with the picker up, on this one loop.
//!
//! The rooms: `event.rs` (what the loop reacts to), `state.rs` (the [`App`] struct), `input.rs`
//! (one event, one key), `focus.rs`, `tasks.rs` (the one helper every background task is started
//! through: a cancel token and a serial, stale answers dropped — the popup's lookup, badges, the
//! popup preview, the picker's searches, `/resume PREFIX`, `/sessions`), `commands.rs`,
//! `send.rs` (the submit transaction and giving text back), `feed.rs` (agent events into the
//! transcript), `draw.rs` (the frame; the popup's preview pane is `tui::popup::PreviewPane`), `file_chips.rs`, `wiring.rs` ([`build`])
//! and `run.rs` (the one terminal loop, under the panic hook). Also off the loop: the file
//! matcher ([`FileFinder`](crate::tui::file_index::FileFinder)), `@path` reads and
//! prompt-history appends. Proof: `tests/tui/app.rs`, `tests/tui/keys.rs`,
//! `tests/tui/resume_start.rs`, the unit tests of `focus.rs` and `tasks.rs`, and the tmux runs
//! in `tests/e2e/tmux.rs` and `tests/e2e/cli_lifecycle.rs`.

mod chip_state;
mod commands;
mod draw;
mod event;
mod feed;
mod file_chips;
mod focus;
mod inline;
mod input;
mod run;
mod send;
mod state;
mod task_slot;
mod tasks;
mod wiring;

pub use event::AppEvent;
pub use file_chips::ConfirmOutside;
pub use run::{run_inline_loop, run_loop, run_terminal, run_terminal_on, run_terminal_picking};
pub use state::App;
use state::{BadgeSlot, PopupPreview};
pub use wiring::{build, Wiring};

use crate::session::{Encoding, SessionError};
use std::path::PathBuf;
use std::time::Duration;

/// How the TUI should start.
#[derive(Debug, Clone)]
pub struct AppOptions {
    /// The dsh home the sessions live in (SPEC §1.1).
    pub home: PathBuf,
    /// The id of the session to continue; `None` starts a new one.
    pub resume: Option<String>,
    /// The offline model's pause between streamed words.
    pub offline_delay: Duration,
    /// Encoding for a new session's log; `None`: the home's existing one, else zstd.
    pub encoding: Option<Encoding>,
    /// The new session's cwd (the current directory).
    pub cwd: Option<String>,
    /// Other agents' sessions served beside ours (SPEC §9); the default adds none.
    pub sources: crate::session::external::SourceSet,
}

/// Why the TUI could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The session store failed (opening, resuming or creating the log).
    #[error("{0}")]
    Session(#[from] SessionError),
    /// The terminal could not be set up, drawn to or restored.
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
    /// The configured model could not be built.
    #[error("{0}")]
    Model(#[from] crate::agent::ModelSetupError),
    /// The session-reference service refused its configuration.
    #[error("{0}")]
    References(#[from] crate::reference::SessionReferenceError),
}

const QUIT_WINDOW: Duration = Duration::from_secs(2);
/// File rows a query shows at most, and a bare `@` (beside recent sessions).
const FILE_ROWS: usize = 50;
const BARE_FILE_ROWS: usize = 5;
/// Transcript rows one wheel notch scrolls.
const WHEEL_ROWS: usize = 3;
/// Sessions `/sessions` lists before pointing at `@`.
const SESSIONS_SHOWN: usize = 10;

/// The session to open after this one closes (`/new`, `/resume ID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextSession {
    /// Start a new session.
    New,
    /// Continue the session with this id.
    Resume(String),
}
