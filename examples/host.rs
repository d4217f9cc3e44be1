//! A host application that mounts dsh's session references into a TUI of its own.
//!
//! Run it with `cargo run --example host` (it opens a fresh copy of the bundled demo home; pass
//! a directory to use that home instead). Type `@` and a few letters, pick a session with Tab
//! or Enter, write a question and press Enter: the message goes out with a snapshot of the
//! referenced session, shown as a reference card. Ctrl-C (or Esc with the popup closed) quits.
//!
//! What is the host's own, and what comes from the bundle:
//! - its layout (a title bar, a framed pane of sent messages, the composer and a status line)
//!   and its event loop are its own;
//! - its agent is its own: [`HostAgent`] implements [`AgentSurface`] and only records what the
//!   submit transaction dispatched, where a real host would hand it to its model;
//! - its sessions are its own: [`HostStore`] is its [`SessionQuery`] (here over the dsh
//!   store of a home; a host with its own store answers the same three reads from it);
//! - mounted from the bundle: the `@` popup ([`PopupState`] and its view), the composer's
//!   mention handling ([`Composer`]: the `@` token, a picked session inserted as one unit), the
//!   submit transaction ([`SessionReferenceMount::submit`]) and the reference card
//!   ([`TranscriptItem::ReferenceCard`]).
//!
//! `tests/tui/host_example.rs` drives this application headless through ratatui's `TestBackend`.

use crossterm::event::{self, Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use dsh_session_references::agent::Admission;
use dsh_session_references::host::{AgentSurface, SessionReferenceMount, SubmitError, Submitted};
use dsh_session_references::reference::{
    AgentIdentity, Candidate, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::format::USER_MESSAGE;
use dsh_session_references::session::{
    BoxFuture, DiskStore, Message, SessionQuery, SessionSummary, SurfaceSnapshot,
};
use dsh_session_references::tui::composer::{Composer, ComposerSnapshot};
use dsh_session_references::tui::focus::{Command, Handled};
use dsh_session_references::tui::popup::{LookupRequest, PopupState, QueryId};
use dsh_session_references::tui::transcript::TranscriptItem;
use dsh_session_references::tui::Renderable;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Widget};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The host's own agent: it takes what the submit transaction dispatches and keeps it.
pub struct HostAgent {
    session_id: String,
    cwd: Option<String>,
    dispatched: Mutex<Vec<Dispatched>>,
}

/// One message as the host's agent received it, with the contexts that went along.
#[derive(Debug, Clone)]
pub struct Dispatched {
    /// The user's message, its content as `prepare` rewrote it when it referenced sessions.
    pub message: Message,
    /// The context messages dispatched with it at the same boundary: the session-reference
    /// context (all its snapshots in one message) when it referenced sessions, else none.
    pub contexts: Vec<Message>,
}

impl HostAgent {
    /// An agent that is the host's session `session_id`, working in `cwd`; nothing dispatched
    /// yet.
    pub fn new(session_id: &str, cwd: Option<&str>) -> HostAgent {
        HostAgent {
            session_id: session_id.to_string(),
            cwd: cwd.map(str::to_string),
            dispatched: Mutex::new(Vec::new()),
        }
    }

    /// Everything dispatched so far, oldest first.
    pub fn dispatched(&self) -> Vec<Dispatched> {
        self.dispatched.lock().expect("dispatched lock").clone()
    }
}

impl AgentSurface for HostAgent {
    fn identity(&self) -> AgentIdentity {
        AgentIdentity::new(self.session_id.clone(), self.cwd.clone())
    }

    fn dispatch(&self, message: Message) -> Admission {
        self.dispatch_with_contexts(message, Vec::new())
    }

    fn dispatch_with_contexts(&self, message: Message, contexts: Vec<Message>) -> Admission {
        let mut dispatched = self.dispatched.lock().expect("dispatched lock");
        dispatched.push(Dispatched { message, contexts });
        // This host has no acceptance window: every message is queued for its model.
        Admission::Queued
    }
}

/// The host's own session source: the three reads the reference service needs. This one
/// answers from the dsh logs of a home; `read_conversation_surface` keeps the store's lean read.
pub struct HostStore {
    store: DiskStore,
}

impl SessionQuery for HostStore {
    fn list_sessions(
        &self,
    ) -> BoxFuture<'_, dsh_session_references::session::error::Result<Arc<Vec<SessionSummary>>>>
    {
        self.store.list_sessions()
    }
    fn read_surface<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, dsh_session_references::session::error::Result<SurfaceSnapshot>> {
        self.store.read_surface(id)
    }
    fn read_title<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, dsh_session_references::session::error::Result<Option<String>>> {
        self.store.read_title(id)
    }
    fn read_conversation_surface<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, dsh_session_references::session::error::Result<SurfaceSnapshot>> {
        self.store.read_conversation_surface(id)
    }
}

/// What finished in the background, for the event loop to apply.
enum HostEvent {
    Lookup(QueryId, Result<Vec<Candidate>, String>),
    Submitted(Result<Submitted, SubmitError>, ComposerSnapshot),
}

/// A sent message as the host shows it: the text, and the reference card of its snapshot.
struct SentView {
    text: String,
    card: Option<TranscriptItem>,
}

/// The host application: its own state, with the bundle's pieces mounted in it.
pub struct HostApp {
    agent: Arc<HostAgent>,
    mount: SessionReferenceMount,
    composer: Composer,
    popup: PopupState,
    sent: Vec<SentView>,
    status: String,
    /// Epoch ms the popup measures ages against (fixed in tests, the clock otherwise).
    now_ms: Option<i64>,
    tx: mpsc::UnboundedSender<HostEvent>,
    rx: mpsc::UnboundedReceiver<HostEvent>,
    /// Background work not applied yet.
    pending: usize,
    lookup_cancel: Option<CancellationToken>,
    /// Set by Ctrl-C, or Esc with the popup closed: the event loop ends after this key.
    pub should_quit: bool,
}

impl HostApp {
    /// The application over the sessions of `home`, as the host's session `session_id` in `cwd`.
    pub fn new(home: &Path, session_id: &str, cwd: Option<&str>) -> Result<HostApp, String> {
        let sessions = HostStore {
            store: DiskStore::new(home),
        };
        let service = SessionReferences::new(Arc::new(sessions), SessionReferenceConfig::default())
            .map_err(|e| e.to_string())?;
        let agent = Arc::new(HostAgent::new(session_id, cwd));
        let mount = SessionReferenceMount::new(Some(service), agent.clone());
        let mut composer = Composer::new();
        composer.set_placeholder("Ask something; @ references another session");
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(HostApp {
            agent,
            mount,
            composer,
            popup: PopupState::new(),
            sent: Vec::new(),
            status: "type @ to reference a session".into(),
            now_ms: None,
            tx,
            rx,
            pending: 0,
            lookup_cancel: None,
            should_quit: false,
        })
    }

    /// The host's agent, to read what the submit transaction dispatched to it.
    pub fn agent(&self) -> &Arc<HostAgent> {
        &self.agent
    }

    /// Measures ages against `now_ms` instead of the clock (for reproducible frames).
    pub fn set_now_ms(&mut self, now_ms: i64) {
        self.now_ms = Some(now_ms);
    }

    /// One key: the popup first (while open), then the composer, then the host's own keys.
    pub fn handle_key(&mut self, key: KeyEvent) {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.should_quit = true;
            return;
        }
        // A closed popup ignores every key.
        match self.popup.handle_key(key) {
            Handled::Ignored => {}
            Handled::Emit(Command::Insert(item)) => {
                self.composer.insert_item(&item);
                self.popup.close();
                self.sync_popup();
                return;
            }
            // Moved, or closed itself (Esc).
            _ => return,
        }
        match self.composer.handle_key(key) {
            Handled::Emit(Command::Submit) => self.submit(),
            Handled::Emit(_) => self.sync_popup(),
            _ => {
                if key.code == KeyCode::Esc {
                    self.should_quit = true;
                }
            }
        }
    }

    /// Applies whatever background work has finished, without waiting.
    pub fn apply_ready(&mut self) {
        while let Ok(event) = self.rx.try_recv() {
            self.apply(event);
        }
    }

    /// Waits until every lookup and submission started so far is applied.
    pub async fn settle(&mut self) {
        while self.pending > 0 {
            match self.rx.recv().await {
                Some(event) => self.apply(event),
                None => break,
            }
        }
    }

    fn apply(&mut self, event: HostEvent) {
        self.pending = self.pending.saturating_sub(1);
        match event {
            HostEvent::Lookup(id, result) => {
                self.popup.apply_results(id, result);
            }
            HostEvent::Submitted(Ok(submitted), _) => {
                let dispatched = self.agent.dispatched();
                if let Some(last) = dispatched
                    .iter()
                    .rev()
                    .find(|d| d.message.id == submitted.message_id)
                {
                    let card = last
                        .contexts
                        .iter()
                        .find_map(|context| TranscriptItem::from_message(context, USER_MESSAGE));
                    self.sent.push(SentView {
                        text: last.message.display_text(),
                        card,
                    });
                }
                self.status = match submitted.referenced {
                    0 => "sent".into(),
                    1 => "sent with 1 referenced session".into(),
                    n => format!("sent with {n} referenced sessions"),
                };
            }
            HostEvent::Submitted(Err(error), draft) => {
                // Nothing went out: the text comes back, ahead of anything typed since.
                self.composer.restore_before(draft);
                self.status = error.to_string();
            }
        }
    }

    /// Keeps the popup on the `@` token under the cursor, and looks candidates up.
    fn sync_popup(&mut self) {
        let token = self.composer.active_token();
        if let Some(request) = self.popup.sync(token.as_ref()) {
            self.start_lookup(request);
        }
    }

    fn start_lookup(&mut self, request: LookupRequest) {
        if let Some(previous) = self.lookup_cancel.take() {
            previous.cancel();
        }
        let cancel = CancellationToken::new();
        self.lookup_cancel = Some(cancel.clone());
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        self.pending += 1;
        tokio::spawn(async move {
            let result = mount
                .candidates(&request.query, &cancel)
                .await
                .map_err(|e| e.message().to_string());
            // A cancelled lookup still answers: the popup drops answers it no longer waits for.
            let _ = tx.send(HostEvent::Lookup(request.id, result));
        });
    }

    /// The submit transaction: parse, prepare the referenced sessions, dispatch.
    fn submit(&mut self) {
        if self.composer.is_blank() {
            return;
        }
        self.popup.close();
        let draft = self.composer.take_draft();
        let text = draft.submission_text().trim_end().to_string();
        self.status = "preparing…".into();
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        self.pending += 1;
        tokio::spawn(async move {
            let result = mount.submit(&text, &CancellationToken::new()).await;
            let _ = tx.send(HostEvent::Submitted(result, draft));
        });
    }

    fn now_ms(&self) -> i64 {
        self.now_ms
            .unwrap_or_else(dsh_session_references::session::now_ms)
    }

    /// The host's layout: title, sent messages, the framed composer, status.
    fn areas(&self, area: Rect) -> [Rect; 4] {
        let composer_rows = self.composer.desired_height(area.width).max(1);
        Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(1),
            Constraint::Length(composer_rows),
            Constraint::Length(1),
        ])
        .areas(area)
    }

    /// Draws one frame into `area` of `buf`.
    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        let [title, sent, composer, status] = self.areas(area);
        Line::from(format!(
            " host · session {} · @ references another session",
            self.agent.session_id
        ))
        .style(Style::new().add_modifier(Modifier::REVERSED))
        .render(title, buf);

        let block = Block::new().borders(Borders::ALL).title(" Sent ");
        let inner = block.inner(sent);
        block.render(sent, buf);
        let width = usize::from(inner.width);
        let mut lines: Vec<Line<'static>> = Vec::new();
        for view in &self.sent {
            lines.push(Line::from(format!("› {}", view.text)));
            if let Some(card) = &view.card {
                lines.extend(card.lines(width));
            }
            lines.push(Line::default());
        }
        // The newest at the bottom, like a conversation.
        let skip = lines.len().saturating_sub(usize::from(inner.height));
        Paragraph::new(lines.split_off(skip)).render(inner, buf);

        // The composer draws its own frame.
        self.composer.render(composer, buf);

        Line::from(format!(" {}", self.status))
            .style(Style::new().add_modifier(Modifier::DIM))
            .render(status, buf);

        if self.popup.is_open() {
            // Floating right above the composer, over the sent pane.
            let view = self.popup.view(self.now_ms());
            let height = view.desired_height(composer.width).min(sent.height);
            let popup = Rect {
                x: composer.x,
                y: composer.y.saturating_sub(height),
                width: composer.width,
                height,
            };
            view.render(popup, buf);
        }
    }

    /// Where the terminal cursor belongs (in the composer).
    pub fn cursor(&self, area: Rect) -> Option<Position> {
        let [_, _, composer, _] = self.areas(area);
        self.composer.cursor_position(composer)
    }
}

#[allow(dead_code)] // The headless test includes this file as a module and drives `HostApp`.
fn main() {
    let home = match std::env::args_os().nth(1) {
        Some(home) => std::path::PathBuf::from(home),
        None => match dsh_session_references::demo::install_demo_home() {
            Ok(home) => home,
            Err(e) => {
                eprintln!("host: could not install the demo home: {e}");
                std::process::exit(1);
            }
        },
    };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let result = runtime.block_on(run(&home));
    if let Err(e) = result {
        eprintln!("host: {e}");
        std::process::exit(1);
    }
    println!("demo home at {}", home.display());
}

async fn run(home: &Path) -> Result<(), String> {
    let mut app = HostApp::new(home, "host-session", Some("/home/dev/projects/parser"))?;
    let mut terminal = ratatui::init();
    let result = loop {
        app.apply_ready();
        if let Err(e) = terminal.draw(|frame| {
            let area = frame.area();
            app.render(area, frame.buffer_mut());
            if let Some(position) = app.cursor(area) {
                frame.set_cursor_position(position);
            }
        }) {
            break Err(e.to_string());
        }
        if app.should_quit {
            break Ok(());
        }
        // Keys are read off the async workers; background answers are applied on the next turn.
        let key = tokio::task::spawn_blocking(|| -> std::io::Result<Option<TermEvent>> {
            if event::poll(Duration::from_millis(50))? {
                event::read().map(Some)
            } else {
                Ok(None)
            }
        })
        .await;
        match key {
            Ok(Ok(Some(TermEvent::Key(key)))) if key.kind == KeyEventKind::Press => {
                app.handle_key(key);
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => break Err(e.to_string()),
            Err(e) => break Err(e.to_string()),
        }
    };
    ratatui::restore();
    result
}
