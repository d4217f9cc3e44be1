//! The standard TUI: one loop that owns every widget state and reacts to one channel of events
//! (keys, agent events, lookup answers, submit results). Nothing slow runs on it: candidate
//! lookups, file indexing and the submit transaction are tasks that answer through the channel,
//! so typing never waits, and answers to stale lookups are dropped by query id.

use super::composer::{Composer, ComposerOutcome};
use super::file_match::FileIndex;
use super::help::KeyHelp;
use super::mount::{SessionReferenceMount, SubmitError, Submitted};
use super::popup::{LookupRequest, PopupOutcome, PopupState, QueryId};
use super::render::Renderable;
use super::status::StatusLine;
use super::transcript::{NoticeLevel, Transcript};
use crate::agent::config::ModelChoice;
use crate::agent::{Agent, AgentConfig, AgentEvent, AgentStatus};
use crate::reference::{Candidate, SessionReferenceConfig, SessionReferences};
use crate::session::writer::now_ms;
use crate::session::{
    DiskStore, Encoding, Event, HostSessions, LiveSessions, Record, SessionError, SessionHeader,
};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::backend::Backend;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::Terminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How the TUI should start.
#[derive(Debug, Clone)]
pub struct AppOptions {
    pub home: PathBuf,
    pub resume: Option<String>,
    pub offline_delay: Duration,
    /// Encoding for a new session's log; `None`: the home's existing one, else zstd.
    pub encoding: Option<Encoding>,
    /// The new session's cwd (the current directory).
    pub cwd: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Session(#[from] SessionError),
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

/// Everything the loop reacts to.
#[derive(Debug)]
pub enum AppEvent {
    Input(TermEvent),
    Agent(AgentEvent),
    Lookup(QueryId, Result<Vec<Candidate>, String>),
    Submitted(Result<Submitted, SubmitError>),
    Files(Arc<FileIndex>),
    /// Periodic wake-up (expiring "press again to quit", ages in the popup).
    Tick,
}

const QUIT_WINDOW: Duration = Duration::from_secs(2);
const MAX_INDEXED_FILES: usize = 20_000;

/// The app state: pure enough to drive from tests with a `TestBackend`.
pub struct App {
    pub agent: Agent,
    pub mount: SessionReferenceMount,
    pub composer: Composer,
    pub popup: PopupState,
    pub transcript: Transcript,
    status: AgentStatus,
    model: String,
    /// Cancels the submit transaction in flight (Esc).
    preparing: Option<CancellationToken>,
    lookup_cancel: Option<CancellationToken>,
    streaming: bool,
    /// Context tokens of the last request, and every request's tokens so far.
    context_tokens: Option<u64>,
    session_tokens: u64,
    /// Shown in the status line while a model request is being retried.
    provider_notice: Option<String>,
    quit_armed: Option<Instant>,
    pub should_quit: bool,
    tx: mpsc::UnboundedSender<AppEvent>,
}

impl App {
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
            preparing: None,
            lookup_cancel: None,
            streaming: false,
            context_tokens: None,
            session_tokens: 0,
            provider_notice: None,
            quit_armed: None,
            should_quit: false,
            tx,
        }
    }

    /// Shows what a resumed log already holds, shadowed messages included.
    pub fn show_history(&mut self, records: &[Record]) {
        let id = self.agent.info().session_id.clone();
        for record in records {
            if let Record::Event(event) = record {
                self.show_event(&id, event);
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

    pub fn handle(&mut self, event: AppEvent) {
        match event {
            AppEvent::Input(TermEvent::Key(key)) if key.kind != KeyEventKind::Release => {
                self.on_key(key)
            }
            AppEvent::Input(TermEvent::Paste(text)) => {
                if self.preparing.is_none() {
                    self.composer.handle_paste(&text);
                    self.sync_popup();
                }
            }
            AppEvent::Input(_) => {}
            AppEvent::Agent(event) => self.on_agent(event),
            AppEvent::Lookup(id, result) => {
                self.popup.apply_results(id, result);
            }
            AppEvent::Submitted(result) => self.on_submitted(result),
            AppEvent::Files(index) => self.popup.set_file_index(index),
            AppEvent::Tick => {
                if self.quit_armed.is_some_and(|t| t.elapsed() > QUIT_WINDOW) {
                    self.quit_armed = None;
                }
            }
        }
    }

    fn on_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            return self.on_ctrl_c();
        }
        self.quit_armed = None;
        if let Some(cancel) = &self.preparing {
            // The input is frozen while its snapshot is prepared: no duplicate sends.
            if key.code == KeyCode::Esc {
                cancel.cancel();
            }
            return;
        }
        if self.popup.is_open() {
            match self.popup.handle_key(key) {
                PopupOutcome::Handled => return,
                PopupOutcome::Accept(item) => {
                    self.composer.insert_item(&item);
                    self.popup.close();
                    self.sync_popup();
                    return;
                }
                PopupOutcome::Close => {
                    self.popup.dismiss();
                    return;
                }
                PopupOutcome::Ignored => {}
            }
        }
        match self.composer.handle_key(key) {
            ComposerOutcome::Submit => self.submit(),
            ComposerOutcome::Edited | ComposerOutcome::Moved => self.sync_popup(),
            ComposerOutcome::Ignored => self.on_app_key(key),
        }
    }

    fn on_app_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => {
                self.agent.cancel();
            }
            KeyCode::PageUp => self.transcript.scroll_up(10),
            KeyCode::PageDown => self.transcript.scroll_down(10),
            KeyCode::Char('o') if ctrl => {
                self.transcript.toggle_last_card();
            }
            _ => {}
        }
    }

    fn on_ctrl_c(&mut self) {
        if self.quit_armed.is_some_and(|t| t.elapsed() <= QUIT_WINDOW) {
            self.should_quit = true;
            return;
        }
        self.quit_armed = Some(Instant::now());
        if let Some(cancel) = &self.preparing {
            cancel.cancel();
        } else {
            self.agent.cancel();
        }
    }

    /// Keeps the popup on the `@` token under the cursor and starts its lookup.
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
        tokio::spawn(async move {
            let result = mount
                .candidates(&request.query, &cancel)
                .await
                .map_err(|e| e.message().to_string());
            if !cancel.is_cancelled() {
                let _ = tx.send(AppEvent::Lookup(request.id, result));
            }
        });
    }

    fn submit(&mut self) {
        if self.composer.is_blank() {
            return;
        }
        self.popup.close();
        // Trailing whitespace (such as the space after an inserted mention) is not content.
        let text = self.composer.submission_text().trim_end().to_string();
        let cancel = CancellationToken::new();
        self.preparing = Some(cancel.clone());
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = mount.submit(&text, &cancel).await;
            let _ = tx.send(AppEvent::Submitted(result));
        });
    }

    fn on_submitted(&mut self, result: Result<Submitted, SubmitError>) {
        self.preparing = None;
        match result {
            Ok(_) => {
                let (_, snapshot) = self.composer.take_submission();
                self.composer.push_history(snapshot);
                self.sync_popup();
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
                    self.show_event(&id, event);
                }
            }
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
            AgentEvent::PromptBlocked { reason, .. } => self
                .transcript
                .push_notice(NoticeLevel::Error, format!("Prompt blocked: {reason}")),
            AgentEvent::Error(text) => self.transcript.push_notice(NoticeLevel::Error, text),
        }
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
            notice: self.provider_notice.clone(),
        }
    }

    fn key_help(&self) -> KeyHelp {
        KeyHelp {
            popup_open: self.popup.is_open(),
            running: self.status.running,
            preparing: self.preparing.is_some(),
            quit_pending: self.quit_armed.is_some(),
            has_details: self.transcript.items().iter().any(|i| i.is_expandable()),
        }
    }

    /// Draws one frame into `area` of `buf`.
    pub fn render(&self, area: Rect, buf: &mut ratatui::buffer::Buffer) {
        let composer_height = self.composer.desired_height(area.width).max(1);
        let [transcript, composer, status, help] = Layout::vertical([
            Constraint::Min(1),
            Constraint::Length(composer_height),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(area);
        self.transcript.render(transcript, buf);
        self.composer.render(composer, buf);
        self.status_line().render(status, buf);
        self.key_help().render(help, buf);
        if self.popup.is_open() {
            let view = self.popup.view(now_ms());
            let height = view.desired_height(transcript.width).min(transcript.height);
            let popup = Rect {
                x: transcript.x,
                y: transcript.y + transcript.height - height,
                width: transcript.width,
                height,
            };
            view.render(popup, buf);
        }
    }

    /// Where the terminal cursor belongs.
    pub fn cursor(&self, area: Rect) -> Option<ratatui::layout::Position> {
        let composer_height = self.composer.desired_height(area.width).max(1);
        let [_, composer, _, _] = Layout::vertical([
            Constraint::Min(1),
            Constraint::Length(composer_height),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(area);
        self.composer.cursor_position(composer)
    }
}

/// Builds the agent, the service and the mount for `options`, with the offline model.
pub fn build(
    options: &AppOptions,
    tx: mpsc::UnboundedSender<AppEvent>,
) -> Result<(App, Vec<Record>), AppError> {
    build_with(options, &ModelChoice::Offline, tx)
}

/// [`build`] with the model `choice`.
pub fn build_with(
    options: &AppOptions,
    choice: &ModelChoice,
    tx: mpsc::UnboundedSender<AppEvent>,
) -> Result<(App, Vec<Record>), AppError> {
    let disk = DiskStore::new(&options.home);
    let live = LiveSessions::default();
    let (model, model_label) =
        crate::agent::model_for(choice, options.offline_delay).map_err(AppError::Other)?;
    let (agent, history) = match &options.resume {
        Some(id) => {
            let path = disk.log_path(id)?;
            let (_, records) = crate::session::reader::read_log(&path)?;
            (Agent::resume(&path, model, live.clone())?, records)
        }
        None => {
            let encoding = options
                .encoding
                .unwrap_or_else(|| disk.preferred_encoding());
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
    let query = Arc::new(HostSessions::new(disk, live));
    let service = SessionReferences::new(query, SessionReferenceConfig::default())
        .map_err(|e| AppError::Other(e.to_string()))?;
    let mount = SessionReferenceMount::new(Some(service), Arc::new(agent.clone()));
    let mut app = App::new(agent, mount, model_label, tx);
    app.show_history(&history);
    Ok((app, history))
}

/// Indexes files under `cwd` for the popup's file rows, off the UI thread.
pub fn index_files(cwd: PathBuf, tx: mpsc::UnboundedSender<AppEvent>) {
    std::thread::spawn(move || {
        let mut paths = Vec::new();
        let mut stack = vec![cwd.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') || matches!(name.as_ref(), "target" | "node_modules") {
                    continue;
                }
                let path = entry.path();
                match entry.file_type() {
                    Ok(t) if t.is_dir() => stack.push(path),
                    Ok(t) if t.is_file() => {
                        if let Ok(rel) = path.strip_prefix(&cwd) {
                            paths.push(rel.to_string_lossy().into_owned());
                        }
                    }
                    _ => {}
                }
                if paths.len() >= MAX_INDEXED_FILES {
                    break;
                }
            }
            if paths.len() >= MAX_INDEXED_FILES {
                break;
            }
        }
        paths.sort();
        let _ = tx.send(AppEvent::Files(Arc::new(FileIndex::new(paths))));
    });
}

/// Runs the app loop on `terminal` until the user quits.
pub async fn run_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    mut app: App,
    mut rx: mpsc::UnboundedReceiver<AppEvent>,
) -> Result<(), AppError> {
    let mut agent_events = app.agent.subscribe();
    let tx = app.tx.clone();
    tokio::spawn(async move {
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
            app.render(area, frame.buffer_mut());
            if let Some(position) = app.cursor(area) {
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
        if app.should_quit {
            break;
        }
    }
    app.agent.shutdown();
    Ok(())
}

/// Restores the terminal even if the loop panics.
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> std::io::Result<TerminalGuard> {
        use crossterm::{event, execute, terminal};
        terminal::enable_raw_mode()?;
        let guard = TerminalGuard;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            event::EnableBracketedPaste
        )?;
        Ok(guard)
    }

    fn restore() {
        use crossterm::{cursor, event, execute, terminal};
        let _ = execute!(
            std::io::stdout(),
            event::DisableBracketedPaste,
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
        let _ = terminal::disable_raw_mode();
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        TerminalGuard::restore();
    }
}

/// Opens the TUI on the real terminal.
pub async fn run_terminal(options: AppOptions) -> Result<(), AppError> {
    run_terminal_with(options, ModelChoice::Offline).await
}

/// [`run_terminal`] with the model resolved from configuration (SPEC §7).
pub async fn run_terminal_with(options: AppOptions, choice: ModelChoice) -> Result<(), AppError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let (app, _) = build_with(&options, &choice, tx.clone())?;
    if let Some(cwd) = &options.cwd {
        index_files(PathBuf::from(cwd), tx.clone());
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        TerminalGuard::restore();
        previous(info);
    }));
    // Warm the session index now: a first listing of a very large home reads every header,
    // and the first `@` should not be the one to wait for it.
    {
        let mount = app.mount.clone();
        tokio::spawn(async move {
            let _ = mount.candidates("", &CancellationToken::new()).await;
        });
    }
    let _guard = TerminalGuard::enter()?;
    // Keys are read on their own thread: crossterm's read blocks.
    let input_tx = tx.clone();
    std::thread::spawn(move || loop {
        match crossterm::event::read() {
            Ok(event) => {
                if input_tx.send(AppEvent::Input(event)).is_err() {
                    break;
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "terminal input failed");
                break;
            }
        }
    });
    let backend = ratatui::backend::CrosstermBackend::new(std::io::stdout());
    let mut terminal = Terminal::new(backend)?;
    terminal.clear()?;
    run_loop(&mut terminal, app, rx).await
}
