//! The app's state: one struct of widget states, the session's status and the slots of its
//! background tasks. Pure: nothing here does I/O or spawns work.

use super::chip_state::FileChips;
use super::task_slot::{Serials, TaskSlot};
use super::{AppEvent, NextSession};
use crate::agent::config::ModelChoice;
use crate::agent::{Agent, AgentStatus};
use crate::host::{Preview, SessionReferenceMount};
use crate::tui::composer::{Composer, ComposerSnapshot};
use crate::tui::file_index::FileFinder;
use crate::tui::help::KeyOverlay;
use crate::tui::keys::Keymap;
use crate::tui::picker::PickerState;
use crate::tui::popup::PopupState;
use crate::tui::slash::SlashMenu;
use crate::tui::transcript::Transcript;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The preview of the session highlighted in the popup.
pub(super) struct PopupPreview {
    pub(super) id: String,
    pub(super) label: String,
    /// Its preview task (cancelled when the slot goes).
    pub(super) task: TaskSlot,
    pub(super) result: Option<Result<Preview, String>>,
}

/// The background preview behind one mention's badge.
pub(super) struct BadgeSlot {
    /// Its preview task (cancelled when the slot goes).
    pub(super) task: TaskSlot,
    pub(super) preview: Option<Result<Preview, String>>,
}

/// The app state: pure enough to drive from tests with a `TestBackend`.
pub struct App {
    /// The agent of the open session.
    pub agent: Agent,
    /// The reference mount: popup lookups and the submit transaction.
    pub mount: SessionReferenceMount,
    /// The message being written.
    pub composer: Composer,
    /// The `@` popup's state.
    pub popup: PopupState,
    /// What the transcript shows.
    pub transcript: Transcript,
    pub(super) status: AgentStatus,
    pub(super) model: String,
    /// The configuration the model came from (`/model NAME` derives another from it and swaps
    /// it into the running agent).
    pub(super) model_choice: Option<ModelChoice>,
    /// Cancels the submit transaction in flight (Esc).
    pub(super) preparing: Option<CancellationToken>,
    /// The message of the submit transaction in flight, to restore if it fails.
    pub(super) in_flight: Option<ComposerSnapshot>,
    /// The `@` popup's lookup in flight.
    pub(super) lookup: TaskSlot,
    /// The next lookup is this app's first: it may show what the last process listed while
    /// the listing checks the files ([`crate::tui::lookup::remembered`]).
    pub(super) first_lookup: bool,
    /// The picker's search in flight.
    pub(super) picker_search: TaskSlot,
    /// `/resume PREFIX` being resolved.
    pub(super) resolving: TaskSlot,
    /// `/sessions` being listed.
    pub(super) listing: TaskSlot,
    pub(super) streaming: bool,
    /// Context tokens of the last request, and every request's tokens so far.
    pub(super) context_tokens: Option<u64>,
    pub(super) session_tokens: u64,
    /// Shown in the status line while a model request is being retried.
    pub(super) provider_notice: Option<String>,
    pub(super) quit_armed: Option<Instant>,
    /// Esc on an empty, idle composer: a second one soon after edits the last message.
    pub(super) esc_armed: Option<Instant>,
    /// `esc_armed` as it was when the key being handled arrived (the session layer reads it).
    pub(super) esc_before: Option<Instant>,
    /// The keys every handler, the help line and the overlay read.
    pub(super) keymap: Arc<Keymap>,
    /// The `?` key-help overlay, when open.
    pub(super) overlay: Option<KeyOverlay>,
    /// The finder as a picker (`/resume` with no id), when open.
    pub(super) picker: Option<PickerState>,
    /// The picker was opened at start (`--resume` with no id): closing it ends the app, as
    /// nothing was started yet.
    pub(super) picker_exits: bool,
    /// The `/` command menu.
    pub slash: SlashMenu,
    /// A `/word` line naming no command, shown once: the same line again is sent.
    pub(super) confirm_unknown: Option<String>,
    /// What the loop should do after quitting (a `/new` or `/resume` session).
    pub next: Option<NextSession>,
    /// The home whose `history.jsonl` keeps sent prompts (none: not kept).
    pub(super) history_home: Option<PathBuf>,
    /// The store of that home, as the workspace opened it (`/resume ID` resolves over it).
    pub(super) home_store: Option<crate::session::DiskStore>,
    /// The cwd's files, matched off the loop (none until started).
    pub(super) files: Option<FileFinder>,
    /// A `FilesChanged` is on its way (the finder's notifications are coalesced).
    pub(super) files_pending: Arc<AtomicBool>,
    /// Per mentioned session: the background preview behind its badge.
    pub(super) badges: std::collections::BTreeMap<String, BadgeSlot>,
    /// Where every task's serial comes from.
    pub(super) serials: Serials,
    /// The preview of the session highlighted in the popup (SPEC §5.6).
    pub(super) popup_preview: Option<PopupPreview>,
    /// Set once the loop should end (a second Ctrl-C, `/quit`, or a session switch in `next`).
    pub should_quit: bool,
    pub(super) tx: mpsc::UnboundedSender<AppEvent>,
    /// The composer text of each sent message not yet seen in the log, by message id: given back
    /// if the agent reports it unsent.
    pub(super) unlogged: Vec<(String, ComposerSnapshot)>,
    /// When the running turn started (for its elapsed time); `None` while idle.
    pub(super) turn_started: Option<Instant>,
    /// Text `/copy` put on the clipboard, until the terminal loop writes it.
    pub(super) clipboard: Option<String>,
    /// Unsent reports that arrived before their submission's result: (message id, why, reason).
    pub(super) unsent_early: Vec<(String, String, String)>,
    /// Full-text discovery merged into the popup's session rows (SPEC §8), when running.
    pub(super) discovery: Option<crate::discovery::Discovery>,
    /// Shown in the status line when nothing else is (e.g. where the demo home lives).
    pub(super) home_note: Option<String>,
    /// File chips being sized, and outside files waiting for a yes or no.
    pub(super) chips: FileChips,
    /// Inline mode: the transcript area shows only what is not in the scrollback yet.
    pub(super) inline: bool,
}

impl App {
    /// An app for `agent`, with `model` as the status line's model label; events for the loop go to
    /// `tx`.
    pub fn new(
        agent: Agent,
        mount: SessionReferenceMount,
        model: String,
        tx: mpsc::UnboundedSender<AppEvent>,
    ) -> App {
        let mut composer = Composer::new();
        composer.set_placeholder("Message (type @ to reference another session)");
        App {
            agent,
            mount,
            composer,
            popup: PopupState::new(),
            transcript: Transcript::new(),
            status: AgentStatus::default(),
            model,
            model_choice: None,
            preparing: None,
            in_flight: None,
            lookup: TaskSlot::default(),
            first_lookup: true,
            picker_search: TaskSlot::default(),
            resolving: TaskSlot::default(),
            listing: TaskSlot::default(),
            streaming: false,
            context_tokens: None,
            session_tokens: 0,
            provider_notice: None,
            quit_armed: None,
            esc_armed: None,
            esc_before: None,
            keymap: Arc::new(Keymap::standard()),
            overlay: None,
            picker: None,
            picker_exits: false,
            slash: SlashMenu::default(),
            confirm_unknown: None,
            next: None,
            history_home: None,
            home_store: None,
            files: None,
            files_pending: Arc::new(AtomicBool::new(false)),
            badges: Default::default(),
            serials: Serials::default(),
            popup_preview: None,
            should_quit: false,
            tx,
            unlogged: Vec::new(),
            turn_started: None,
            clipboard: None,
            unsent_early: Vec::new(),
            discovery: None,
            home_note: None,
            chips: Default::default(),
            inline: false,
        }
    }

    /// Uses `keymap` for every key handler, the help line and the overlay.
    pub fn set_keymap(&mut self, keymap: Arc<Keymap>) {
        self.composer.set_keymap(keymap.clone());
        self.keymap = keymap;
    }

    /// The keys in force.
    pub fn keymap(&self) -> &Keymap {
        &self.keymap
    }

    /// Whether the `?` overlay is open.
    pub fn overlay_open(&self) -> bool {
        self.overlay.is_some()
    }

    /// What `/copy` asked to put on the clipboard, taken (the terminal loop writes it).
    pub fn take_clipboard(&mut self) -> Option<String> {
        self.clipboard.take()
    }

    /// A note for the status line while no provider notice is shown.
    pub fn set_home_note(&mut self, note: impl Into<String>) {
        self.home_note = Some(note.into());
    }

    /// Merges discovery hits into the popup's session rows from now on.
    pub fn set_discovery(&mut self, discovery: crate::discovery::Discovery) {
        self.discovery = Some(discovery);
    }

    /// Whether the `/resume` picker is open.
    pub fn picker_open(&self) -> bool {
        self.picker.is_some()
    }
}
