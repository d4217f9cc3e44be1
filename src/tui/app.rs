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
//! Keys go through one [`Keymap`] (SPEC §5.5): the overlay first, then Ctrl-C (clear a draft,
//! cancel a send, interrupt, or quit on a second idle press), the `/` menu, the `@` popup (which
//! leaves keys it has no use for to the composer), `?` on an empty composer, the composer, and
//! last the session keys (Esc, scrolling, cards). A `/` line runs here and never reaches the
//! model. Also off the loop: the file matcher ([`FileFinder`]), the previews behind mention
//! badges (cancelled when the mention goes; an answer for a mention that left is dropped by
//! serial), `@path` reads and prompt-history appends. Proof: `tests/tui/app.rs`,
//! `tests/tui/keys.rs` and the tmux runs in `tests/e2e/tmux.rs`.

mod file_chips;

pub use file_chips::ConfirmOutside;

use super::attach;
use super::composer::{Composer, ComposerOutcome, ComposerSnapshot};
use super::file_index::FileFinder;
use super::help::{KeyHelp, KeyOverlay, OverlayOutcome};
use super::keys::{Action, KeyContext, Keymap};
use super::mount::{Preview, SessionReferenceMount, SubmitError, Submitted};
use super::picker::{PickerOutcome, PickerState};
use super::popup::{LookupRequest, PopupItem, PopupOutcome, PopupState, QueryId};
use super::prompt_history;
use super::render::Renderable;
use super::slash::{self, Command, SlashLine, SlashMenu, SlashOutcome};
use super::status::StatusLine;
use super::terminal;
use super::transcript::{NoticeLevel, Transcript};
use crate::agent::config::ModelChoice;
use crate::agent::{Agent, AgentConfig, AgentEvent, AgentStatus, ModelProvider};
use crate::reference::{Candidate, SessionReferenceConfig, SessionReferences};
use crate::session::writer::now_ms;
use crate::session::{
    DiskStore, Encoding, Event, HostSessions, LiveSessions, Record, SessionError, SessionHeader,
};
use crossterm::event::{Event as TermEvent, KeyEvent, KeyEventKind, MouseEventKind};
use ratatui::backend::Backend;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::Terminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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
    /// Anything else, e.g. the model could not be built; the text says what.
    #[error("{0}")]
    Other(String),
}

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
    Discovered(QueryId, Option<Arc<super::discovery::SessionDetails>>),
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
        super::composer::PlainToken,
        String,
        Result<Option<String>, String>,
    ),
}

const QUIT_WINDOW: Duration = Duration::from_secs(2);
/// File rows a query shows at most, and a bare `@` (beside recent sessions).
const FILE_ROWS: usize = 50;
const BARE_FILE_ROWS: usize = 5;
/// Transcript rows one wheel notch scrolls.
const WHEEL_ROWS: usize = 3;
/// Sessions `/sessions` lists before pointing at `@`.
const SESSIONS_SHOWN: usize = 10;

/// The preview of the session highlighted in the popup.
struct PopupPreview {
    id: String,
    label: String,
    serial: u64,
    cancel: CancellationToken,
    result: Option<Result<Preview, String>>,
}

/// The background preview behind one mention's badge.
struct BadgeSlot {
    serial: u64,
    cancel: CancellationToken,
    preview: Option<Result<Preview, String>>,
}

/// The session to open after this one closes (`/new`, `/resume ID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextSession {
    /// Start a new session.
    New,
    /// Continue the session with this id.
    Resume(String),
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
    status: AgentStatus,
    model: String,
    /// The configuration the model came from (`/model NAME` derives another from it and swaps
    /// it into the running agent).
    model_choice: Option<ModelChoice>,
    /// Cancels the submit transaction in flight (Esc).
    preparing: Option<CancellationToken>,
    /// The message of the submit transaction in flight, to restore if it fails.
    in_flight: Option<ComposerSnapshot>,
    lookup_cancel: Option<CancellationToken>,
    streaming: bool,
    /// Context tokens of the last request, and every request's tokens so far.
    context_tokens: Option<u64>,
    session_tokens: u64,
    /// Shown in the status line while a model request is being retried.
    provider_notice: Option<String>,
    quit_armed: Option<Instant>,
    /// Esc on an empty, idle composer: a second one soon after edits the last message.
    esc_armed: Option<Instant>,
    /// The keys every handler, the help line and the overlay read.
    keymap: Arc<Keymap>,
    /// The `?` key-help overlay, when open.
    overlay: Option<KeyOverlay>,
    /// The finder as a picker (`/resume` with no id), when open.
    picker: Option<PickerState>,
    /// The `/` command menu.
    pub slash: SlashMenu,
    /// A `/word` line naming no command, shown once: the same line again is sent.
    confirm_unknown: Option<String>,
    /// What the loop should do after quitting (a `/new` or `/resume` session).
    pub next: Option<NextSession>,
    /// The home whose `history.jsonl` keeps sent prompts (none: not kept).
    history_home: Option<PathBuf>,
    /// The cwd's files, matched off the loop (none until started).
    files: Option<FileFinder>,
    /// A `FilesChanged` is on its way (the finder's notifications are coalesced).
    files_pending: Arc<AtomicBool>,
    /// Per mentioned session: the background preview behind its badge.
    badges: std::collections::BTreeMap<String, BadgeSlot>,
    badge_serial: u64,
    /// The preview of the session highlighted in the popup (SPEC §5.6).
    popup_preview: Option<PopupPreview>,
    /// Set once the loop should end (a second Ctrl-C, `/quit`, or a session switch in `next`).
    pub should_quit: bool,
    tx: mpsc::UnboundedSender<AppEvent>,
    /// The composer text of each sent message not yet seen in the log, by message id: given back
    /// if the agent reports it unsent.
    unlogged: Vec<(String, ComposerSnapshot)>,
    /// When the running turn started (for its elapsed time); `None` while idle.
    turn_started: Option<Instant>,
    /// Text `/copy` put on the clipboard, until the terminal loop writes it.
    clipboard: Option<String>,
    /// Unsent reports that arrived before their submission's result: (message id, why, reason).
    unsent_early: Vec<(String, String, String)>,
    /// Full-text discovery merged into the popup's session rows (SPEC §8), when running.
    discovery: Option<crate::discovery::Discovery>,
    /// Shown in the status line when nothing else is (e.g. where the demo home lives).
    home_note: Option<String>,
    /// File chips being sized, and outside files waiting for a yes or no.
    chips: file_chips::FileChips,
}

/// The typed `@word` tokens of the composer that may name a session by id or id prefix (issue
/// 24 item 2): unquoted, no `/`, trailing punctuation off; each with the element range its
/// mention would take.
fn typed_session_ids(composer: &Composer) -> Vec<(std::ops::Range<usize>, String)> {
    composer
        .plain_tokens()
        .into_iter()
        .filter(|t| !t.quoted && !t.path.contains('/'))
        .filter_map(|t| {
            let id = t.path.trim_end_matches(|c: char| ",.;?!)]}'\"".contains(c));
            (!id.is_empty()).then(|| (t.start..t.start + 1 + id.chars().count(), id.to_string()))
        })
        .collect()
}

/// The files a draft's chips choose.
fn draft_files(draft: Option<&ComposerSnapshot>) -> Vec<attach::ChosenFile> {
    draft.map_or_else(Vec::new, |d| d.files().iter().map(|f| f.chosen()).collect())
}

/// At most this many sent messages wait for their log record (older ones were long logged).
const MAX_UNLOGGED: usize = 64;

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
            lookup_cancel: None,
            streaming: false,
            context_tokens: None,
            session_tokens: 0,
            provider_notice: None,
            quit_armed: None,
            esc_armed: None,
            keymap: Arc::new(Keymap::standard()),
            overlay: None,
            picker: None,
            slash: SlashMenu::default(),
            confirm_unknown: None,
            next: None,
            history_home: None,
            files: None,
            files_pending: Arc::new(AtomicBool::new(false)),
            badges: Default::default(),
            badge_serial: 0,
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
        }
    }

    /// Shows what a resumed log already holds, shadowed messages included.
    pub fn show_history(&mut self, records: &[Record]) {
        let id = self.agent.info().session_id.clone();
        for record in records {
            if let Record::Event(event) = record {
                self.show_event(&id, event);
                // A turn that failed says so again, as it did while it ran.
                if let Some(failure) = turn_failure(event) {
                    self.transcript.push_notice(NoticeLevel::Error, failure);
                }
            }
        }
    }

    fn show_event(&mut self, session_id: &str, event: &Event) {
        if !event.is_surface() {
            return;
        }
        let assistant = event.kind == crate::session::format::ASSISTANT_MESSAGE;
        let data: Option<serde_json::Value> = assistant
            .then(|| serde_json::from_str(event.data.get()).ok())
            .flatten();
        if let Some(usage) = data.as_ref().and_then(|d| d.get("usage")) {
            let count = |key: &str| {
                usage
                    .get(key)
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0)
            };
            let context = count("inputTokens") + count("cacheReadTokens");
            self.context_tokens = Some(context);
            self.session_tokens += context + count("outputTokens");
        }
        match event.message(session_id) {
            Ok(Some(message)) => {
                if assistant && self.streaming {
                    self.transcript.finish_assistant(Some(&message.text()));
                    self.streaming = false;
                } else {
                    self.transcript.push_message(&message, &event.kind);
                }
                if data.as_ref().and_then(|d| d.get("interrupted"))
                    == Some(&serde_json::Value::Bool(true))
                {
                    self.transcript
                        .push_notice(NoticeLevel::Info, "reply interrupted: partial answer kept");
                }
            }
            Ok(None) => {}
            Err(e) => self.transcript.push_notice(
                NoticeLevel::Error,
                format!("unreadable {} at seq {}: {e}", event.kind, event.seq),
            ),
        }
    }

    /// Reacts to one event: updates the state and starts any background work it asks for.
    pub fn handle(&mut self, event: AppEvent) {
        self.handle_event(event);
        self.sync_popup_preview();
    }

    fn handle_event(&mut self, event: AppEvent) {
        match event {
            AppEvent::Input(TermEvent::Key(key)) if key.kind != KeyEventKind::Release => {
                self.on_key(key)
            }
            AppEvent::Input(TermEvent::Paste(text)) => {
                self.composer.handle_paste(&text);
                self.sync_popup();
            }
            AppEvent::Input(TermEvent::Mouse(mouse)) => match mouse.kind {
                MouseEventKind::ScrollUp => self.transcript.scroll_up(WHEEL_ROWS),
                MouseEventKind::ScrollDown => self.transcript.scroll_down(WHEEL_ROWS),
                _ => {}
            },
            AppEvent::Input(_) => {}
            AppEvent::Agent(event) => self.on_agent(event),
            AppEvent::Lookup(id, result) => {
                self.popup.apply_results(id, result);
            }
            AppEvent::Discovered(id, details) => {
                self.popup.set_details(id, details);
            }
            AppEvent::DiscoveryNote(note) => self.transcript.push_notice(NoticeLevel::Info, note),
            AppEvent::Submitted(result) => self.on_submitted(result),
            AppEvent::Listed(result) => self.show_sessions(result),
            AppEvent::PopupPreview(id, serial, result) => {
                if let Some(preview) = self
                    .popup_preview
                    .as_mut()
                    .filter(|p| p.id == id && p.serial == serial)
                {
                    preview.result = Some(result);
                }
            }
            AppEvent::Resolved(Ok(Ok(id))) => {
                self.next = Some(NextSession::Resume(id));
                self.should_quit = true;
            }
            // A word that starts no id: find it.
            AppEvent::Resolved(Ok(Err(word))) if self.discovery.is_some() => {
                self.open_picker(&word)
            }
            AppEvent::Resolved(Ok(Err(word))) => self.transcript.push_notice(
                NoticeLevel::Error,
                format!(
                    "/resume: no session id is or starts with {}",
                    crate::escape::escape_line(&format!("{word:?}"))
                ),
            ),
            AppEvent::Resolved(Err(why)) => self
                .transcript
                .push_notice(NoticeLevel::Error, format!("/resume: {why}")),
            AppEvent::Picker(generation, result) => {
                if let Some(picker) = &mut self.picker {
                    picker.apply(generation, result);
                }
            }
            AppEvent::Badge(id, serial, result) => self.on_badge(id, serial, result),
            AppEvent::FilesChanged => {
                self.files_pending.store(false, Ordering::SeqCst);
                self.refresh_file_rows();
            }
            AppEvent::Inspected(serial, result) => self.on_inspected(serial, result),
            AppEvent::TypedId(token, prefix, result) => self.on_typed_id(token, prefix, result),
            AppEvent::NotSent(why) => {
                self.preparing = None;
                let sent = self.in_flight.take().unwrap_or_default();
                self.composer.restore_before(sent);
                self.sync_popup();
                self.transcript
                    .push_notice(NoticeLevel::Error, format!("Not sent: {why}"));
            }
            AppEvent::Tick => {
                if self.quit_armed.is_some_and(|t| t.elapsed() > QUIT_WINDOW) {
                    self.quit_armed = None;
                }
                if self.esc_armed.is_some_and(|t| t.elapsed() > QUIT_WINDOW) {
                    self.esc_armed = None;
                }
            }
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

    fn on_key(&mut self, key: KeyEvent) {
        if let Some(picker) = &mut self.picker {
            match picker.handle_key_with(&self.keymap, key) {
                PickerOutcome::Search(generation, query) => self.picker_search(generation, query),
                PickerOutcome::Picked(id) => {
                    self.picker = None;
                    self.next = Some(NextSession::Resume(id));
                    self.should_quit = true;
                }
                PickerOutcome::Cancelled => self.picker = None,
                PickerOutcome::Moved | PickerOutcome::Ignored => {}
            }
            return;
        }
        if self.chips.asking().is_some() && self.on_confirm_key(&key) {
            return;
        }
        if let Some(overlay) = &mut self.overlay {
            let action = self.keymap.action(KeyContext::Overlay, &key);
            if overlay.handle_action(action, &self.keymap) == OverlayOutcome::Close {
                self.overlay = None;
            }
            return;
        }
        let app_action = self.keymap.action(KeyContext::App, &key);
        if app_action == Some(Action::ClearOrQuit) {
            return self.on_ctrl_c();
        }
        self.quit_armed = None;
        let esc_armed = self.esc_armed.take();
        if let Some(cancel) = &self.preparing {
            // Typing goes on into the next draft; Esc (outside the popup) cancels the send.
            if app_action == Some(Action::Interrupt) && !self.popup.is_open() {
                cancel.cancel();
                return;
            }
        }
        if self.slash.is_open() {
            let action = self.keymap.action(KeyContext::Popup, &key);
            let enter = key.code == crossterm::event::KeyCode::Enter;
            match action.map(|a| self.slash.handle_action(a, enter)) {
                Some(SlashOutcome::Handled | SlashOutcome::Close) => return,
                Some(SlashOutcome::Complete(command)) => {
                    self.composer.set_text(&format!("/{} ", command.name()));
                    self.sync_popup();
                    return;
                }
                Some(SlashOutcome::Run(command)) => {
                    let draft = self.composer.take_draft();
                    self.composer.push_history(draft);
                    self.sync_popup();
                    self.run_command(command, "");
                    return;
                }
                Some(SlashOutcome::Ignored) | None => {}
            }
        }
        if self.popup.is_open() {
            match self.popup.handle_key_with(&self.keymap, key) {
                PopupOutcome::Handled => return,
                PopupOutcome::Accept(item) => {
                    self.composer.insert_item(&item);
                    self.popup.close();
                    self.sync_popup();
                    if matches!(item, PopupItem::File(_)) {
                        self.chip_after_pick();
                    }
                    return;
                }
                PopupOutcome::Close => {
                    self.popup.dismiss();
                    return;
                }
                PopupOutcome::Ignored => {}
            }
        }
        if app_action == Some(Action::Help) && self.composer.is_empty() {
            self.overlay = Some(KeyOverlay::new());
            return;
        }
        if self.chip_on_tab(&key) {
            return;
        }
        match self.composer.handle_key(key) {
            ComposerOutcome::Submit => self.submit(),
            ComposerOutcome::Edited => {
                self.sync_popup();
                self.chip_after_key(&key);
            }
            ComposerOutcome::Moved => self.sync_popup(),
            ComposerOutcome::Ignored => self.on_app_action(app_action, esc_armed),
        }
    }

    fn on_app_action(&mut self, action: Option<Action>, esc_armed: Option<Instant>) {
        match action {
            Some(Action::Interrupt) => {
                if self.status.running {
                    self.agent.cancel();
                } else if self.composer.is_empty() {
                    // Esc Esc on an empty, idle composer: the last message comes back to edit.
                    if esc_armed.is_some_and(|t| t.elapsed() <= QUIT_WINDOW) {
                        if self.composer.move_up() == ComposerOutcome::Edited {
                            self.sync_popup();
                        }
                    } else {
                        self.esc_armed = Some(Instant::now());
                    }
                }
            }
            Some(Action::ScrollUp) => self.transcript.page_up(),
            Some(Action::ScrollDown) => self.transcript.page_down(),
            Some(Action::ScrollTop) => self.transcript.scroll_to_top(),
            Some(Action::ScrollBottom) => self.transcript.scroll_to_bottom(),
            Some(Action::Details) => {
                self.transcript.toggle_selected_card();
            }
            Some(Action::CardPrev) => {
                self.transcript.select_card(true);
            }
            Some(Action::CardNext) => {
                self.transcript.select_card(false);
            }
            _ => {}
        }
    }

    /// Ctrl+C (SPEC §5.5): cancels a send in flight, else clears a draft (Up recalls it), else
    /// interrupts a running turn, and only quits on a second press with an empty, idle
    /// composer.
    fn on_ctrl_c(&mut self) {
        self.esc_armed = None;
        if let Some(cancel) = &self.preparing {
            cancel.cancel();
            self.quit_armed = None;
            return;
        }
        if !self.composer.is_empty() {
            let draft = self.composer.take_draft();
            self.composer.push_history(draft);
            self.sync_popup();
            self.quit_armed = None;
            return;
        }
        if self.status.running {
            self.agent.cancel();
            self.quit_armed = None;
            return;
        }
        if self.quit_armed.is_some_and(|t| t.elapsed() <= QUIT_WINDOW) {
            self.should_quit = true;
            return;
        }
        self.quit_armed = Some(Instant::now());
    }

    /// Starts walking and matching the files of `cwd` for the popup, off the loop.
    pub fn start_file_finder(&mut self, cwd: PathBuf) {
        let tx = self.tx.clone();
        let pending = self.files_pending.clone();
        let notify: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if !pending.swap(true, Ordering::SeqCst) {
                let _ = tx.send(AppEvent::FilesChanged);
            }
        });
        self.files = Some(FileFinder::start(cwd, notify));
    }

    /// Gives the popup the finder's rows for its query (never waits for the workers).
    fn refresh_file_rows(&mut self) {
        let Some(files) = &mut self.files else {
            return;
        };
        if !self.popup.is_open() {
            return;
        }
        let query = self.popup.query().to_string();
        let limit = if query.is_empty() {
            BARE_FILE_ROWS
        } else {
            FILE_ROWS
        };
        files.set_query(&query, limit);
        // The last rows the matcher published; the popup takes them only for its query.
        let published = files.rows();
        self.popup.set_file_rows(&published.query, published.rows);
    }

    /// Keeps prompt history in `<home>/history.jsonl` from now on, and loads what is there.
    pub fn keep_history_in(&mut self, home: &std::path::Path) {
        for entry in prompt_history::load(home) {
            self.composer.push_history(entry);
        }
        self.history_home = Some(home.to_path_buf());
    }

    /// Appends a sent message to the home's history, off the UI loop.
    fn persist_history(&self, sent: &ComposerSnapshot) {
        let Some(home) = self.history_home.clone() else {
            return;
        };
        let sent = sent.clone();
        let session_id = self.agent.info().session_id.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = prompt_history::append(&home, &session_id, now_ms(), &sent) {
                tracing::warn!(error = %e, "prompt history not kept");
            }
        });
    }

    /// Runs a `/` command locally: nothing of it reaches the model.
    fn run_command(&mut self, command: Command, arg: &str) {
        self.confirm_unknown = None;
        match command {
            Command::Help => {
                self.overlay = Some(KeyOverlay::new());
            }
            Command::New => {
                self.next = Some(NextSession::New);
                self.should_quit = true;
            }
            Command::Resume if arg.is_empty() && self.discovery.is_some() => self.open_picker(""),
            Command::Resume if arg.is_empty() => self.transcript.push_notice(
                NoticeLevel::Info,
                "Usage: /resume ID (/sessions lists them; @ finds one by id or cwd)",
            ),
            Command::Resume => self.resolve_resume(arg),
            Command::Model if arg.is_empty() => self.transcript.push_notice(
                NoticeLevel::Info,
                format!(
                    "Model: {}. /model NAME switches this session to another model of the \
                     provider; the [provider] table of config.toml in the home or --provider \
                     NAME changes the provider",
                    self.model
                ),
            ),
            Command::Model => self.switch_model(arg),
            Command::Sessions => {
                let mount = self.mount.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let result = mount
                        .candidates("", &CancellationToken::new())
                        .await
                        .map_err(|e| e.message().to_string());
                    let _ = tx.send(AppEvent::Listed(result));
                });
            }
            Command::Quit => self.should_quit = true,
            Command::Copy => self.copy_last_answer(),
        }
    }

    /// `/model NAME`: the configured provider's model `NAME` answers from the next request on,
    /// in this session as it is (nothing rebuilt from the log, every notice kept; the next
    /// request logs a `request/header` with reason `change`).
    fn switch_model(&mut self, name: &str) {
        let settings = match &self.model_choice {
            Some(ModelChoice::Remote(settings)) => settings,
            _ => {
                return self.transcript.push_notice(
                    NoticeLevel::Error,
                    format!(
                        "Could not switch to {name}: the offline model has no other models: \
                         configure a provider (--provider NAME, or the [provider] table of \
                         config.toml)"
                    ),
                )
            }
        };
        let mut settings = settings.clone();
        settings.model = name.to_string();
        let choice = ModelChoice::Remote(settings);
        match crate::agent::model_for(&choice, Duration::ZERO) {
            Ok((model, label)) => {
                self.agent.set_model(model);
                self.model = label;
                self.model_choice = Some(choice);
                self.transcript
                    .push_notice(NoticeLevel::Info, format!("Model: {}", self.model));
            }
            Err(e) => self.transcript.push_notice(
                NoticeLevel::Error,
                format!("Could not switch to {name}: {e}"),
            ),
        }
    }

    /// `/copy`: the last answer goes to the clipboard through OSC 52, written by the terminal
    /// loop after this key (never on its own: only a command the person ran sets it).
    fn copy_last_answer(&mut self) {
        let last = self
            .transcript
            .items()
            .iter()
            .rev()
            .find_map(|item| match item {
                super::transcript::TranscriptItem::Assistant { text, .. } if !text.is_empty() => {
                    Some(text.clone())
                }
                _ => None,
            });
        match last {
            Some(text) => {
                self.transcript.push_notice(
                    NoticeLevel::Info,
                    format!(
                        "Copied the last answer ({}) to the clipboard (OSC 52; a terminal that \
                         does not allow it ignores it)",
                        super::transcript::human_bytes(text.len() as u64)
                    ),
                );
                self.clipboard = Some(text);
            }
            None => self.transcript.push_notice(
                NoticeLevel::Info,
                "Nothing to copy yet: no answer in this session",
            ),
        }
    }

    /// What `/copy` asked to put on the clipboard, taken (the terminal loop writes it).
    pub fn take_clipboard(&mut self) -> Option<String> {
        self.clipboard.take()
    }

    /// The finder as a picker over this home's own sessions, `query` already typed.
    fn open_picker(&mut self, query: &str) {
        let mut picker = PickerState::with_query(query, self.agent.info().cwd.clone());
        let first = picker.start();
        self.picker = Some(picker);
        if let PickerOutcome::Search(generation, query) = first {
            self.picker_search(generation, query);
        }
    }

    /// `/resume ID`: an id or a unique prefix of one of this home's own sessions (SPEC §8),
    /// resolved off the loop; a word that is no id's start opens the picker with it typed
    /// (with discovery on), else the session stays open.
    fn resolve_resume(&mut self, prefix: &str) {
        if let Some(agent) = crate::session::external::Agent::of_id(prefix) {
            return self.transcript.push_notice(
                NoticeLevel::Error,
                format!(
                    "{} sessions are read-only: reference them with @ instead",
                    agent.product()
                ),
            );
        }
        let Some(home) = self.history_home.clone() else {
            // No home known (a host's app): take the id as given.
            self.next = Some(NextSession::Resume(prefix.to_string()));
            self.should_quit = true;
            return;
        };
        let prefix = prefix.to_string();
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let result = DiskStore::new(&home)
                .list_sessions_blocking()
                .map_err(|e| e.to_string())
                .and_then(|listing| {
                    match crate::discovery::lifecycle::resolve_prefix(&listing, &prefix) {
                        Err(crate::discovery::lifecycle::ResolveError::NotFound { .. }) => {
                            Ok(Err(prefix.clone()))
                        }
                        other => other.map(Ok).map_err(|e| e.to_string()),
                    }
                });
            let _ = tx.send(AppEvent::Resolved(result));
        });
    }

    /// The answer to `/sessions`: the newest few, one line each.
    fn show_sessions(&mut self, result: Result<Vec<Candidate>, String>) {
        match result {
            Ok(candidates) if candidates.is_empty() => self
                .transcript
                .push_notice(NoticeLevel::Info, "No other sessions yet"),
            Ok(candidates) => {
                let now = now_ms();
                let mut text = format!(
                    "{} session{} (newest first; /resume ID opens one):",
                    candidates.len(),
                    if candidates.len() == 1 { "" } else { "s" }
                );
                for c in candidates.iter().take(SESSIONS_SHOWN) {
                    text.push_str(&format!(
                        "\n{} · {} · {} · {}",
                        c.label,
                        c.session_id,
                        c.cwd.as_deref().unwrap_or("(no cwd)"),
                        super::text::format_age(c.created_at, now)
                    ));
                }
                if candidates.len() > SESSIONS_SHOWN {
                    text.push_str(&format!(
                        "\n… and {} more: type @ to search",
                        candidates.len() - SESSIONS_SHOWN
                    ));
                }
                self.transcript.push_notice(NoticeLevel::Info, text);
            }
            Err(e) => self
                .transcript
                .push_notice(NoticeLevel::Error, format!("Could not list sessions: {e}")),
        }
    }

    /// Starts a preview for each mention that has none, and cancels the previews of mentions
    /// that left the composer (SPEC §5.6). Never waits.
    fn sync_badges(&mut self) {
        let mentioned: Vec<(String, String)> = self
            .composer
            .mentions()
            .into_iter()
            .map(|m| (m.session_id.clone(), m.label.clone()))
            .collect();
        let before = self.badges.len();
        self.badges.retain(|id, slot| {
            let keep = mentioned.iter().any(|(m, _)| m == id);
            if !keep {
                slot.cancel.cancel();
            }
            keep
        });
        let mut changed = before != self.badges.len();
        for (id, label) in mentioned {
            if self.badges.contains_key(&id) || !self.mount.has_service() {
                continue;
            }
            self.badge_serial += 1;
            let serial = self.badge_serial;
            let cancel = CancellationToken::new();
            self.badges.insert(
                id.clone(),
                BadgeSlot {
                    serial,
                    cancel: cancel.clone(),
                    preview: None,
                },
            );
            changed = true;
            let mount = self.mount.clone();
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let result = mount
                    .preview(&id, &label, &cancel)
                    .await
                    .map_err(|e| e.to_string());
                if !cancel.is_cancelled() {
                    let _ = tx.send(AppEvent::Badge(id, serial, result));
                }
            });
        }
        if changed {
            self.show_badges();
        }
    }

    fn on_badge(&mut self, id: String, serial: u64, result: Result<Preview, String>) {
        let Some(slot) = self.badges.get_mut(&id).filter(|s| s.serial == serial) else {
            return; // The mention left (or came back) since: a stale answer.
        };
        slot.preview = Some(result);
        self.show_badges();
    }

    /// Hands the badge texts to the composer.
    fn show_badges(&mut self) {
        let texts = self
            .badges
            .iter()
            .map(|(id, slot)| {
                let text = match &slot.preview {
                    None => "sizing…".to_string(),
                    Some(Ok(preview)) => preview.badge(),
                    Some(Err(_)) => "cannot be read".to_string(),
                };
                (id.clone(), text)
            })
            .collect();
        self.composer.set_badges(texts);
    }

    /// Follows the popup's highlighted session: a new one starts its preview (the previous one
    /// is cancelled); none highlighted drops it.
    fn sync_popup_preview(&mut self) {
        let highlighted = match self
            .popup
            .is_open()
            .then(|| self.popup.selected())
            .flatten()
        {
            Some(PopupItem::Session(c)) => Some((c.session_id, c.label)),
            _ => None,
        };
        let Some((id, label)) = highlighted else {
            if let Some(old) = self.popup_preview.take() {
                old.cancel.cancel();
            }
            return;
        };
        if self.popup_preview.as_ref().is_some_and(|p| p.id == id) {
            return;
        }
        if let Some(old) = self.popup_preview.take() {
            old.cancel.cancel();
        }
        if !self.mount.has_service() {
            return;
        }
        self.badge_serial += 1;
        let serial = self.badge_serial;
        let cancel = CancellationToken::new();
        self.popup_preview = Some(PopupPreview {
            id: id.clone(),
            label: label.clone(),
            serial,
            cancel: cancel.clone(),
            result: None,
        });
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = mount
                .preview(&id, &label, &cancel)
                .await
                .map_err(|e| e.to_string());
            if !cancel.is_cancelled() {
                let _ = tx.send(AppEvent::PopupPreview(id, serial, result));
            }
        });
    }

    /// The preview pane over the popup: the highlighted session's last messages.
    fn render_popup_preview(&self, above: Rect, buf: &mut ratatui::buffer::Buffer) {
        if let Some(preview) = &self.popup_preview {
            super::popup::PreviewPane::new(&preview.label, preview.result.as_ref())
                .render(above, buf);
        }
    }

    /// What the mentions in the composer add to the next request, for the status line.
    fn next_context(&self) -> Option<String> {
        if self.badges.is_empty() {
            return None;
        }
        let ready: Vec<&Preview> = self
            .badges
            .values()
            .filter_map(|slot| slot.preview.as_ref()?.as_ref().ok())
            .collect();
        let bytes: u64 = ready.iter().map(|p| p.bytes).sum();
        let refs = self.badges.len();
        let mut text = format!(
            "+{refs} ref{} {}",
            if refs == 1 { "" } else { "s" },
            super::transcript::human_bytes(bytes)
        );
        if ready.len() < refs {
            text.push('…');
        }
        Some(text)
    }

    /// Keeps the popup on the `@` token under the cursor and starts its lookup.
    fn sync_popup(&mut self) {
        self.sync_badges();
        self.slash.sync(self.composer.slash_query().as_deref());
        let token = self.composer.active_token();
        if let Some(request) = self.popup.sync(token.as_ref()) {
            self.start_lookup(request);
        }
        self.refresh_file_rows();
    }

    /// A note for the status line while no provider notice is shown.
    pub fn set_home_note(&mut self, note: impl Into<String>) {
        self.home_note = Some(note.into());
    }

    /// Merges discovery hits into the popup's session rows from now on.
    pub fn set_discovery(&mut self, discovery: crate::discovery::Discovery) {
        self.discovery = Some(discovery);
    }

    /// Runs one `/resume` picker query through discovery, off the loop: only this home's own
    /// sessions (another agent's cannot be resumed), never the open one.
    fn picker_search(&self, generation: u64, text: String) {
        let Some(discovery) = self.discovery.clone() else {
            return;
        };
        let tx = self.tx.clone();
        let info = self.agent.info();
        let query = crate::discovery::SearchQuery {
            text,
            agent: Some(info.session_id.clone()),
            cwd: info.cwd.clone(),
            limit: 200,
            now_ms: now_ms(),
            snippets: false,
        };
        tokio::spawn(async move {
            let result = discovery
                .search(query)
                .await
                .map(|found| {
                    let own = |hit: &crate::discovery::Hit| {
                        crate::session::external::Agent::of_id(&hit.session_id).is_none()
                    };
                    let others = found.hits.iter().filter(|h| !own(h)).count();
                    let hits: Vec<_> = found.hits.into_iter().filter(own).collect();
                    (hits, found.total.saturating_sub(others))
                })
                .map_err(|e| e.to_string());
            let _ = tx.send(AppEvent::Picker(generation, result));
        });
    }

    /// Whether the `/resume` picker is open.
    pub fn picker_open(&self) -> bool {
        self.picker.is_some()
    }

    fn start_lookup(&mut self, request: LookupRequest) {
        if let Some(previous) = self.lookup_cancel.take() {
            previous.cancel();
        }
        let cancel = CancellationToken::new();
        self.lookup_cancel = Some(cancel.clone());
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        let discovery = self.discovery.clone();
        let info = self.agent.info();
        let agent = (info.session_id.clone(), info.cwd.clone());
        tokio::spawn(async move {
            let (result, details) = super::discovery::lookup(
                mount,
                discovery.clone(),
                agent,
                request.query,
                now_ms(),
                cancel.clone(),
            )
            .await;
            if let Some(note) = discovery.and_then(|d| d.take_note()) {
                let _ = tx.send(AppEvent::DiscoveryNote(note));
            }
            if !cancel.is_cancelled() {
                let _ = tx.send(AppEvent::Discovered(request.id, details));
                let _ = tx.send(AppEvent::Lookup(request.id, result));
            }
        });
    }

    fn submit(&mut self) {
        if self.composer.is_blank() || self.preparing.is_some() {
            // One send at a time: the draft stays for when this one settles.
            return;
        }
        if let Some(reason) = self.agent.write_blocker() {
            // Read-only: the text stays where it is.
            self.transcript.push_notice(
                NoticeLevel::Error,
                format!("Not sent (this session cannot be written): {reason}"),
            );
            return;
        }
        if self.chips.busy() {
            // Every file that goes is drawn as a chip, with its size, before the send.
            self.transcript.push_notice(
                NoticeLevel::Info,
                "Not sent yet: an attached file is still being sized; press Enter again",
            );
            return;
        }
        let typed = self.composer.submission_text();
        match slash::parse_line(&typed) {
            Some(SlashLine::Run(command, arg)) => {
                let draft = self.composer.take_draft();
                self.composer.push_history(draft);
                self.sync_popup();
                return self.run_command(command, &arg);
            }
            Some(SlashLine::Unknown(name)) if self.confirm_unknown.as_deref() != Some(&typed) => {
                self.transcript.push_notice(
                    NoticeLevel::Info,
                    format!(
                        "/{name} is not a command (/help lists them). Press Enter again to \
                         send the line to the model as it is"
                    ),
                );
                self.confirm_unknown = Some(typed);
                return;
            }
            _ => self.confirm_unknown = None,
        }
        self.popup.close();
        self.slash.close();
        // A send shows where it went: the transcript follows to the bottom again.
        self.transcript.scroll_to_bottom();
        let typed_ids = typed_session_ids(&self.composer);
        let draft = self.composer.take_draft();
        // Trailing whitespace (such as the space after an inserted mention) is not content.
        let text = draft.submission_text().trim_end().to_string();
        let typed_draft = (!typed_ids.is_empty()).then(|| draft.clone());
        self.in_flight = Some(draft);
        let cancel = CancellationToken::new();
        self.preparing = Some(cancel.clone());
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        let cwd = self.agent.info().cwd.clone().map(PathBuf::from);
        // Exactly the draft's file chips are read (never paths found in its text), off the
        // loop, bounded, and go with the message.
        let chosen: Vec<attach::ChosenFile> = draft_files(self.in_flight.as_ref());
        tokio::spawn(async move {
            // Typed `@ID` / `@PREFIX` tokens that name one session go as its mention.
            let text = match typed_draft {
                None => text,
                Some(draft) => {
                    let prefixes: Vec<String> = typed_ids.iter().map(|(_, p)| p.clone()).collect();
                    match mount.resolve_typed(&prefixes).await {
                        Ok(ids) => {
                            let replacements = typed_ids
                                .into_iter()
                                .zip(ids)
                                .filter_map(|((range, prefix), id)| {
                                    let mention = super::composer::MentionElement {
                                        label: super::escape::escape_line(&prefix).into_owned(),
                                        session_id: id?,
                                    };
                                    Some((range, mention))
                                })
                                .collect();
                            draft
                                .with_mentions(replacements)
                                .submission_text()
                                .trim_end()
                                .to_string()
                        }
                        Err(why) => {
                            let _ = tx.send(AppEvent::NotSent(why));
                            return;
                        }
                    }
                }
            };
            // The chips' files are read inside the transaction (host room).
            let result = mount.submit_files(&text, cwd, chosen, &cancel).await;
            let _ = tx.send(AppEvent::Submitted(result));
        });
    }

    fn on_submitted(&mut self, result: Result<Submitted, SubmitError>) {
        self.preparing = None;
        let sent = self.in_flight.take().unwrap_or_default();
        if result.is_ok() {
            self.composer.push_history(sent.clone());
            self.persist_history(&sent);
        } else {
            self.composer.restore_before(sent.clone());
        }
        self.sync_popup();
        match result {
            Ok(submitted) => {
                if self.unlogged.len() >= MAX_UNLOGGED {
                    self.unlogged.remove(0);
                }
                let id = submitted.message_id;
                self.unlogged.push((id.clone(), sent));
                if let Some(at) = self
                    .unsent_early
                    .iter()
                    .position(|(early, ..)| *early == id)
                {
                    let (_, why, reason) = self.unsent_early.remove(at);
                    self.give_back(&[id], &why, &reason);
                }
            }
            Err(e) if e.was_cancelled() => {
                self.transcript
                    .push_notice(NoticeLevel::Info, "Session reference preparation cancelled");
            }
            Err(e) => {
                tracing::info!(error = %e, "submit refused");
                self.transcript
                    .push_notice(NoticeLevel::Error, e.to_string());
            }
        }
    }

    fn on_agent(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Logged(events) => {
                let id = self.agent.info().session_id.clone();
                for event in &events {
                    if let Ok(Some(message)) = event.message(&id) {
                        self.unlogged.retain(|(sent, _)| *sent != message.id);
                    }
                    self.show_event(&id, event);
                }
            }
            AgentEvent::Unsent {
                message_ids,
                reason,
            } => self.give_back(
                &message_ids,
                "Message not sent (the session log could not be written)",
                &reason,
            ),
            AgentEvent::Delta(text) => {
                self.streaming = true;
                self.provider_notice = None;
                self.transcript.append_assistant_delta(&text);
            }
            AgentEvent::Reasoning(text) => {
                self.streaming = true;
                self.provider_notice = None;
                self.transcript.append_reasoning_delta(&text);
            }
            AgentEvent::Usage(usage) => self.context_tokens = Some(usage.context_tokens()),
            AgentEvent::Retrying {
                attempt,
                max,
                delay,
                reason,
            } => {
                self.provider_notice = Some(format!(
                    "retry {attempt}/{max} in {:.1}s ({reason})",
                    delay.as_secs_f64()
                ))
            }
            AgentEvent::Status(status) => {
                self.turn_started = match (status.running, self.turn_started) {
                    (true, None) => Some(Instant::now()),
                    (true, started) => started,
                    (false, _) => None,
                };
                if !status.running && self.streaming {
                    // An aborted step leaves its partial answer on screen, marked finished.
                    self.transcript.finish_assistant(None);
                    self.streaming = false;
                }
                if !status.running {
                    self.provider_notice = None;
                }
                self.status = status;
            }
            AgentEvent::PromptBlocked { message_id, reason } => {
                self.transcript
                    .push_notice(NoticeLevel::Error, format!("Prompt blocked: {reason}"));
                // Not sent either: its text comes back too.
                self.give_back(&[message_id], "Message not sent (blocked)", &reason);
            }
            AgentEvent::Error(error) => self
                .transcript
                .push_notice(NoticeLevel::Error, error.to_string()),
        }
    }

    /// Puts the text of messages that were not written back into the composer. A draft typed
    /// since goes to the history (Up brings it back): no text is dropped.
    fn give_back(&mut self, message_ids: &[String], why: &str, reason: &str) {
        let mut returned: Vec<ComposerSnapshot> = Vec::new();
        for id in message_ids {
            match self.unlogged.iter().position(|(sent, _)| sent == id) {
                Some(at) => returned.push(self.unlogged.remove(at).1),
                // Its submission's result is still on the way: given back when it arrives.
                None if self.preparing.is_some() => {
                    if self.unsent_early.len() >= MAX_UNLOGGED {
                        self.unsent_early.remove(0);
                    }
                    self.unsent_early
                        .push((id.clone(), why.to_string(), reason.to_string()));
                }
                None => {}
            }
        }
        let Some(snapshot) = returned.pop() else {
            return;
        };
        // Older unsent messages than the last one stay reachable with Up.
        for older in returned {
            self.composer.push_history(older);
        }
        let mut notice = format!("{why}: {reason}. Its text is back in the composer");
        if !self.composer.is_blank() {
            notice.push_str(", before your newer draft");
        }
        self.composer.restore_before(snapshot);
        self.sync_popup();
        self.transcript.push_notice(NoticeLevel::Error, notice);
    }

    fn status_line(&self) -> StatusLine {
        let info = self.agent.info();
        StatusLine {
            session_id: info.session_id.clone(),
            title: self.agent.live().title(),
            cwd: info.cwd.clone(),
            model: self.model.clone(),
            running: self.status.running,
            queued_steering: self.status.staged_steering + self.status.queued_prompts,
            preparing: self.preparing.is_some(),
            context_tokens: self.context_tokens,
            session_tokens: self.session_tokens,
            notice: self
                .provider_notice
                .clone()
                .or_else(|| self.home_note.clone()),
            next_context: self.next_context(),
            elapsed_secs: self.turn_started.map(|t| t.elapsed().as_secs()),
            interrupt_key: self.keymap.label(Action::Interrupt, 1),
        }
    }

    /// The messages sent while the turn runs that it has not taken yet, as typed.
    fn queued_panel(&self) -> super::queued::QueuedPanel {
        use super::composer::Part;
        if !self.status.running {
            return super::queued::QueuedPanel::default();
        }
        let messages = self
            .unlogged
            .iter()
            .map(|(_, sent)| {
                sent.parts()
                    .into_iter()
                    .map(|part| match part {
                        Part::Text(text) => text,
                        Part::Mention { label, .. } => format!("@{label}"),
                        Part::Paste(text) => format!("[pasted {} lines]", text.lines().count()),
                    })
                    .collect::<String>()
            })
            .collect();
        super::queued::QueuedPanel { messages }
    }

    fn key_help(&self) -> KeyHelp {
        KeyHelp {
            popup_open: self.popup.is_open() || self.slash.is_open(),
            running: self.status.running,
            preparing: self.preparing.is_some(),
            quit_pending: self.quit_armed.is_some(),
            has_details: self.transcript.items().iter().any(|i| i.is_expandable()),
            composer_empty: self.composer.is_empty(),
            has_draft: !self.composer.is_empty(),
            keymap: Some(self.keymap.clone()),
        }
    }

    /// Where each part goes in `area`: computed once per frame.
    fn areas(&self, area: Rect) -> AppAreas {
        let composer_height = self.composer.desired_height(area.width).max(1);
        let queued_height = self.queued_panel().height();
        let [transcript, queued, composer, status, help] = Layout::vertical([
            Constraint::Min(1),
            Constraint::Length(queued_height),
            Constraint::Length(composer_height),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(area);
        AppAreas {
            transcript,
            queued,
            composer,
            status,
            help,
        }
    }

    /// Draws one frame into `area` of `buf` and says where the terminal cursor belongs, from
    /// one layout.
    pub fn draw(&self, area: Rect, buf: &mut ratatui::buffer::Buffer) -> Option<Position> {
        let areas = self.areas(area);
        self.transcript.render(areas.transcript, buf);
        self.queued_panel().render(areas.queued, buf);
        self.composer.render(areas.composer, buf);
        self.status_line().render(areas.status, buf);
        self.key_help().render(areas.help, buf);
        if self.popup.is_open() {
            let view = self.popup.view(now_ms());
            let transcript = areas.transcript;
            let height = view.desired_height(transcript.width).min(transcript.height);
            let popup = Rect {
                x: transcript.x,
                y: transcript.y + transcript.height - height,
                width: transcript.width,
                height,
            };
            view.render(popup, buf);
            let above = Rect {
                height: popup.y - transcript.y,
                ..transcript
            };
            self.render_popup_preview(above, buf);
        }
        if self.slash.is_open() {
            let view = self.slash.view();
            let transcript = areas.transcript;
            let height = view.desired_height(transcript.width).min(transcript.height);
            let at = Rect {
                x: transcript.x,
                y: transcript.y + transcript.height - height,
                width: transcript.width,
                height,
            };
            view.render(at, buf);
        }
        if let Some(picker) = &self.picker {
            // Over the transcript, the composer and its draft kept below it.
            picker
                .view_with(now_ms(), &self.keymap)
                .render(areas.transcript, buf);
            return None;
        }
        if self.chips.asking().is_some() {
            self.render_confirm(areas.transcript, buf);
            return None;
        }
        if let Some(overlay) = &self.overlay {
            let view = overlay.view(&self.keymap);
            let transcript = areas.transcript;
            let height = view.desired_height(transcript.width).min(transcript.height);
            let width = transcript.width.min(100);
            let at = Rect {
                x: transcript.x + (transcript.width - width) / 2,
                y: transcript.y + transcript.height - height,
                width,
                height,
            };
            view.render(at, buf);
            return None;
        }
        self.composer.cursor_pos(areas.composer)
    }

    /// Draws one frame into `area` of `buf`.
    pub fn render(&self, area: Rect, buf: &mut ratatui::buffer::Buffer) {
        self.draw(area, buf);
    }

    /// Where the terminal cursor belongs.
    pub fn cursor(&self, area: Rect) -> Option<Position> {
        self.composer.cursor_pos(self.areas(area).composer)
    }
}

/// The rows of one frame.
struct AppAreas {
    transcript: Rect,
    queued: Rect,
    composer: Rect,
    status: Rect,
    help: Rect,
}

/// The failure message of a `turn/end` whose reason is `{kind:"error", failure:{message}}`.
fn turn_failure(event: &Event) -> Option<String> {
    if event.kind != crate::session::format::TURN_END {
        return None;
    }
    let data: serde_json::Value = serde_json::from_str(event.data.get()).ok()?;
    let reason = data.get("reason")?;
    if reason.get("kind")?.as_str()? != "error" {
        return None;
    }
    let message = reason
        .get("failure")
        .and_then(|f| f.get("message"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("the model request failed");
    Some(message.to_string())
}

/// What the binary wires into the app: the store sessions live in, the live sessions of this
/// process, and the model that answers (with its status-line label).
#[derive(Clone)]
pub struct Wiring {
    /// The session store.
    pub store: DiskStore,
    /// The sessions held by agents in this process.
    pub live: LiveSessions,
    /// The model that answers turns.
    pub model: Arc<dyn ModelProvider>,
    /// The model's status-line label, e.g. `deepseek/deepseek-v4-flash`.
    pub model_label: String,
    /// The keys (the standard ones, or with the user's `[keys]` overrides).
    pub keymap: Arc<Keymap>,
    /// The configuration the model came from, when known (`/model` derives another from it).
    pub choice: Option<ModelChoice>,
}

impl Wiring {
    /// The store of `home`, no live sessions yet, and `model`.
    pub fn new(home: &std::path::Path, model: Arc<dyn ModelProvider>, label: String) -> Wiring {
        Wiring {
            store: DiskStore::with_listing_cache(home),
            live: LiveSessions::default(),
            model,
            model_label: label,
            keymap: Arc::new(Keymap::standard()),
            choice: None,
        }
    }

    /// The store of `options.home` and the model a resolved configuration names (SPEC §7).
    pub fn for_choice(options: &AppOptions, choice: &ModelChoice) -> Result<Wiring, AppError> {
        let (model, label) =
            crate::agent::model_for(choice, options.offline_delay).map_err(AppError::Other)?;
        let mut wiring = Wiring::new(&options.home, model, label);
        wiring.choice = Some(choice.clone());
        Ok(wiring)
    }

    /// The same wiring with the configured provider's model `name` (SPEC §7: the next request
    /// logs a `request/header` with reason `change`). The offline model has no other models.
    pub fn with_model(&self, options: &AppOptions, name: &str) -> Result<Wiring, String> {
        let Some(ModelChoice::Remote(settings)) = &self.choice else {
            return Err(
                "the offline model has no other models: configure a provider \
                        (--provider NAME, or the [provider] table of config.toml)"
                    .to_string(),
            );
        };
        let mut settings = settings.clone();
        settings.model = name.to_string();
        let choice = ModelChoice::Remote(settings);
        let mut wiring = Wiring::for_choice(options, &choice).map_err(|e| e.to_string())?;
        wiring.keymap = self.keymap.clone();
        wiring.store = self.store.clone();
        wiring.live = self.live.clone();
        Ok(wiring)
    }
}

/// Builds the agent, the service and the mount for `options` over what `wiring` provides.
pub fn build(
    options: &AppOptions,
    wiring: Wiring,
    tx: mpsc::UnboundedSender<AppEvent>,
) -> Result<(App, Vec<Record>), AppError> {
    let Wiring {
        store: disk,
        live,
        model,
        model_label,
        keymap,
        choice,
    } = wiring;
    let mut resumed_log = None;
    let (agent, history) = match &options.resume {
        Some(id) => {
            let path = disk.log_path(id)?;
            let resumed = Agent::resume_with_history(&path, model, live.clone())?;
            resumed_log = Some(path);
            resumed
        }
        None => {
            let encoding = crate::session::writer::home_encoding(&options.home, options.encoding)?;
            let header = SessionHeader::new(
                format!("session-{}", uuid::Uuid::new_v4()),
                now_ms(),
                options.cwd.clone(),
            );
            let agent = Agent::start(AgentConfig {
                home: options.home.clone(),
                header,
                encoding,
                model,
                live: live.clone(),
            });
            (agent, Vec::new())
        }
    };
    let query = options
        .sources
        .serve(Arc::new(HostSessions::new(disk, live)));
    let service = SessionReferences::new(query, SessionReferenceConfig::default())
        .map_err(|e| AppError::Other(e.to_string()))?;
    let mount = SessionReferenceMount::new(Some(service), Arc::new(agent.clone()));
    let mut app = App::new(agent, mount, model_label.clone(), tx);
    app.model_choice = choice;
    app.set_keymap(keymap);
    app.keep_history_in(&options.home);
    if options.resume.is_none() {
        app.transcript.push_welcome(
            env!("CARGO_PKG_VERSION"),
            &model_label,
            options.cwd.as_deref(),
            &options.home.display().to_string(),
        );
    }
    app.show_history(&history);
    if let Some(reason) = app.agent.write_blocker() {
        app.transcript.push_notice(
            NoticeLevel::Error,
            format!("Read-only: {reason}. What you type stays in the composer until then"),
        );
    } else if let Some(age) = resumed_log
        .as_deref()
        .and_then(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
        .and_then(|modified| modified.elapsed().ok())
        .filter(|age| *age < crate::session::writer::SETTLE)
    {
        // dsh takes no lock: a log that just changed may be one it is writing right now.
        app.transcript.push_notice(
            NoticeLevel::Info,
            format!(
                "This log changed {:.1} s ago: another program may be writing this session. \
                 Nothing of it is cut while it may be, and what it appends is read in before \
                 each message is written",
                age.as_secs_f64()
            ),
        );
    } else if let Some(tail) = app.agent.log_tail() {
        app.transcript.push_notice(
            NoticeLevel::Info,
            format!(
                "The log ends in {} bytes that are not a complete batch ({}); they are left as \
                 they are unless the next message finds them unchanged and settled",
                tail.len - tail.at,
                tail.reason
            ),
        );
    }
    Ok((app, history))
}

/// Runs the app loop on `terminal` until the user quits; returns the session to open next
/// (`/new`, `/resume`), if any.
pub async fn run_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    mut app: App,
    mut rx: mpsc::UnboundedReceiver<AppEvent>,
) -> Result<(Option<NextSession>, Option<ModelChoice>), AppError> {
    let mut agent_events = app.agent.subscribe();
    let tx = app.tx.clone();
    let forward = tokio::spawn(async move {
        while let Some(event) = agent_events.recv().await {
            if tx.send(AppEvent::Agent(event)).is_err() {
                break;
            }
        }
    });
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        terminal.draw(|frame| {
            let area = frame.area();
            if let Some(position) = app.draw(area, frame.buffer_mut()) {
                frame.set_cursor_position(position);
            }
        })?;
        tokio::select! {
            event = rx.recv() => match event {
                Some(event) => app.handle(event),
                None => break,
            },
            _ = tick.tick() => app.handle(AppEvent::Tick),
        }
        // Take everything already waiting before drawing again: one frame per burst.
        while let Ok(event) = rx.try_recv() {
            app.handle(event);
        }
        if let Some(text) = app.take_clipboard() {
            // The terminal this loop draws on is stdout's (the sequence is base64: no raw byte
            // of the answer reaches it).
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = out
                .write_all(super::terminal::osc52(&text).as_bytes())
                .and_then(|_| out.flush());
        }
        if app.should_quit {
            break;
        }
    }
    forward.abort();
    app.agent.shutdown();
    // What was handed to the log is written before the next session or the exit (bounded:
    // never hang).
    let _ = tokio::time::timeout(Duration::from_secs(2), app.agent.closed()).await;
    Ok((app.next.take(), app.model_choice.take()))
}

/// Opens the TUI on the real terminal with what `wiring` provides; `/new` and `/resume` open
/// the next session on the same terminal. Answers the id of the last session it ran (to tell
/// the user how to come back to it).
pub async fn run_terminal(mut options: AppOptions, mut wiring: Wiring) -> Result<String, AppError> {
    terminal::install_panic_hook();
    // Discovery indexes on its own thread from now on; it stops when the TUI returns.
    let discovery = crate::discovery::Discovery::for_home(&options.home, &options.sources);
    let _indexer = discovery.spawn_indexer();
    let demo_note = (crate::demo::user_demo_home().as_deref() == Some(options.home.as_path()))
        .then(|| format!("demo home {}", options.home.display()));
    // Keys are read on their own thread (crossterm's read blocks) and go to the session open
    // now: each session has a channel of its own, so nothing of one reaches the next.
    let input: Arc<std::sync::Mutex<Option<mpsc::UnboundedSender<AppEvent>>>> =
        Arc::new(std::sync::Mutex::new(None));
    let mut notice: Option<String> = None;
    let mut info: Option<String> = None;
    let mut guard = None;
    let mut term: Option<Terminal<ratatui::backend::CrosstermBackend<std::io::Stdout>>> = None;
    loop {
        let (tx, rx) = mpsc::unbounded_channel();
        let (mut app, _) = match build(&options, wiring.clone(), tx.clone()) {
            Ok(built) => built,
            // A `/resume` that cannot open: a new session says why, rather than an exit.
            Err(e) if guard.is_some() && options.resume.is_some() => {
                notice = Some(format!(
                    "Could not resume {}: {e}",
                    options.resume.take().unwrap_or_default()
                ));
                continue;
            }
            Err(e) => return Err(e),
        };
        if let Some(text) = notice.take() {
            app.transcript.push_notice(NoticeLevel::Error, text);
        }
        if let Some(text) = info.take() {
            app.transcript.push_notice(NoticeLevel::Info, text);
        }
        let session_id = app.agent.info().session_id.clone();
        app.set_discovery(discovery.clone());
        if let Some(note) = &demo_note {
            app.set_home_note(note.clone());
        }
        if let Some(cwd) = &options.cwd {
            app.start_file_finder(PathBuf::from(cwd));
        }
        // Warm the session index now: a first listing of a very large home reads every
        // header, and the first `@` should not be the one to wait for it.
        {
            let mount = app.mount.clone();
            tokio::spawn(async move {
                let _ = mount.candidates("", &CancellationToken::new()).await;
            });
        }
        if let Ok(mut slot) = input.lock() {
            *slot = Some(tx.clone());
        }
        if guard.is_none() {
            guard = Some(terminal::TerminalGuard::enter()?);
            let input = input.clone();
            std::thread::spawn(move || loop {
                match crossterm::event::read() {
                    Ok(event) => {
                        let sent = input.lock().ok().and_then(|slot| {
                            slot.as_ref().map(|tx| tx.send(AppEvent::Input(event)))
                        });
                        if matches!(sent, Some(Err(_))) {
                            // Between sessions: the next one takes the following keys.
                            continue;
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "terminal input failed");
                        break;
                    }
                }
            });
        }
        let terminal = match &mut term {
            Some(terminal) => terminal,
            None => term.insert(Terminal::new(ratatui::backend::CrosstermBackend::new(
                std::io::stdout(),
            ))?),
        };
        terminal.clear()?;
        let (next, choice) = run_loop(terminal, app, rx).await?;
        // A model `/model` switched to stays for the sessions opened next.
        if let (Some(choice), true) = (choice, next.is_some()) {
            if wiring.choice.as_ref() != Some(&choice) {
                match Wiring::for_choice(&options, &choice) {
                    Ok(mut switched) => {
                        switched.keymap = wiring.keymap.clone();
                        switched.store = wiring.store.clone();
                        switched.live = wiring.live.clone();
                        wiring = switched;
                    }
                    Err(e) => notice = Some(format!("Could not keep the model: {e}")),
                }
            }
        }
        match next {
            Some(NextSession::New) => options.resume = None,
            Some(NextSession::Resume(id)) => options.resume = Some(id),
            None => return Ok(session_id),
        }
    }
}
