//! The session-bound agent: admission (`followup`, `steer`, `inject`), the next-step acceptance
//! window, one FIFO outbox drained at safe boundaries, turns and steps, and cancellation
//! (SPEC §4).
//!
//! One task owns the turn loop. Window state, the prompt queue and the outbox share one mutex,
//! so "inside or outside the window?" is decided atomically with the staging itself. Appends
//! that follow from such a decision are handed to the log under that same lock (state before
//! log, never the reverse), so the log order is the decision order.
//!
//! The log has one writer: a dedicated thread (`dsh-log-writer`) that owns the
//! [`SessionWriter`] and runs every append, take-over and re-read in the order the jobs were
//! handed over. Its blocking file I/O (the writer lock, `fsync`) never runs on an async worker,
//! and no async task holds a lock across it. Each job is acknowledged over a oneshot once its
//! batch is written, taken into the in-memory surface and announced, in log order; the
//! acknowledgement carries the outcome, so failures are reported exactly as before. Proof:
//! the file I/O paths assert (in debug builds, so in every agent test) that they run on that
//! thread; order and failures: `tests/agent/runtime.rs`, `tests/agent/write_failures.rs`,
//! `tests/tui/write_safety.rs`.
//!
//! No typed message is lost silently: a prompt or steering message whose batch cannot be written
//! (full disk, a damaged log, another writer holding the session) is reported as
//! [`AgentEvent::Unsent`], and nothing of its turn is logged. A resumed session that another
//! writer of ours holds is read-only until that writer lets go; records other writers append
//! are adopted into the surface before ours (see [`crate::session::writer`]). Shutting down
//! releases the log. Proof: `tests/agent/write_failures.rs`, `tests/tui/write_safety.rs`.
//!
//! A step logs what dsh logs for a model request (SPEC §7): `request/header` before the first
//! request of a session, after a resume and on a change of provider or model; the streamed
//! reasoning and text as packed chunk rows; then one `assistant/message` with `reasoning` and
//! `text` blocks, the model source and `usage`. A step that fails or is cancelled after text
//! arrived still logs that partial answer, marked `"interrupted": true`, and the turn ends
//! with `{kind:"error", step, failure:{message, code}}` (or `aborted`). Proof:
//! `tests/agent/provider_openai.rs` (the agent half) and `tests/agent/runtime.rs`.

use super::hooks::{AgentInfo, ContextWrapper, HookError, PromptDecision, PromptSubmitHooks};
use super::provider::{ModelError, ModelEvent, ModelOutput, ModelProvider, ModelRequest, Usage};
use crate::session::clock::now_ms;
use crate::session::format::{PackedChunks, PackedKind};
use crate::session::{
    ContentBlock, Encoding, Event, EventData, LiveSession, LiveSessions, Message, MessageSource,
    NewEvent, Record, SessionError, SessionHeader, SessionWriter,
};
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio_util::sync::CancellationToken;

/// Everything an agent needs to run.
pub struct AgentConfig {
    /// The dsh home (SPEC §1.1); the log is created under it on the first append.
    pub home: PathBuf,
    /// The new session's header (id, cwd, …), the log's first record.
    pub header: SessionHeader,
    /// Plain `session.jsonl` or zstd `session.jsonl.zstd`.
    pub encoding: Encoding,
    /// The model that answers turns.
    pub model: Arc<dyn ModelProvider>,
    /// The registry the agent's live session joins, so references see it while it runs.
    pub live: LiveSessions,
}

/// What the UI hears from the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// One batch, as appended to the log.
    Logged(Vec<Event>),
    /// Streaming text of the current step.
    Delta(String),
    /// Streaming reasoning of the current step (shown dim, never sent back to the model).
    Reasoning(String),
    /// Token usage of the last model request.
    Usage(Usage),
    /// The model request failed in a retryable way; the next attempt starts after `delay`.
    Retrying {
        /// This retry's number, counting from 1.
        attempt: u32,
        /// The most retries allowed.
        max: u32,
        /// The wait before the next attempt.
        delay: std::time::Duration,
        /// What failed, e.g. `HTTP 429`.
        reason: String,
    },
    /// The admission state changed (turn, window, queue or outbox).
    Status(AgentStatus),
    /// Admission refused a prompt; nothing was logged for it.
    PromptBlocked {
        /// The id of the blocked prompt's message.
        message_id: String,
        /// The listener's reason, for the user.
        reason: String,
    },
    /// A log write or a model request failed.
    Error(AgentError),
    /// Messages that were taken in (queued or staged) but could not be written to the log, so
    /// they were neither logged nor sent: the UI gives their text back to the user.
    Unsent {
        /// The ids of the messages that were not written, in the order they were taken in.
        message_ids: Vec<String>,
        /// The store's error.
        reason: String,
    },
}

/// A failure the agent reports to its listeners (the turn or the session goes on).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AgentError {
    /// A batch could not be written to the session log; `reason` is the store's error.
    #[error("could not write the session log: {reason}")]
    LogWrite {
        /// The store's error.
        reason: String,
    },
    /// The model request of a step failed; the turn ended with this failure.
    #[error("{}", .0.failure().1)]
    Model(ModelError),
}

/// The agent's admission state at one moment, for the status line and the submit path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentStatus {
    /// A turn is open.
    pub running: bool,
    /// The next-step acceptance window is open.
    pub window_open: bool,
    /// Prompts queued by `followup` and not yet claimed.
    pub queued_prompts: usize,
    /// Steering messages staged in the outbox for the next safe boundary.
    pub staged_steering: usize,
}

/// How a message was taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Queued as a prompt that starts its own turn (through `prompt-submit`).
    Queued,
    /// Staged in the outbox for the next safe boundary of the open window.
    Staged,
    /// Appended to the log at once.
    Appended,
}

#[derive(Debug, Clone)]
enum Staged {
    Steering(Message),
    Context(Message),
}

struct QueuedPrompt {
    message: Message,
    cancel: CancellationToken,
}

#[derive(Default)]
struct State {
    queue: VecDeque<QueuedPrompt>,
    outbox: VecDeque<Staged>,
    window_open: bool,
    turn_open: bool,
    /// Cancels the prompt under admission or the open turn.
    current: Option<CancellationToken>,
    turns: u64,
    titled: bool,
    stopped: bool,
    /// The config of the last `request/header` in the log, if any.
    last_header: Option<Value>,
    /// A `request/header` was logged by this process.
    header_logged: bool,
}

enum LogSlot {
    /// Created on the first append.
    Pending {
        home: PathBuf,
        header: SessionHeader,
        encoding: Encoding,
    },
    Open(SessionWriter),
    /// A resumed log that another writer of ours holds: read-only until that one lets go; every
    /// append tries to take the log over again.
    Held {
        path: PathBuf,
        /// The seq after the records this agent already holds (`None`: none).
        known_next: Option<u64>,
    },
    /// The agent was shut down: its writer (and the session's writer lock) is released.
    Closed,
}

/// A job for the log's writer thread, acknowledged over `reply`.
enum LogJob {
    /// Append one batch (creating or taking over the log first when needed).
    Append {
        batch: Vec<NewEvent>,
        reply: oneshot::Sender<Result<Vec<Event>, SessionError>>,
    },
    /// Append the end of a step (packed rows, then `tail`).
    Step {
        turn: u64,
        step: u64,
        streamed: Streamed,
        tail: Vec<NewEvent>,
        reply: oneshot::Sender<Result<Vec<Event>, SessionError>>,
    },
    /// Read in what another writer appended since the last look.
    Refresh { reply: oneshot::Sender<()> },
    /// Let go of the log (and the session's writer lock).
    Close,
}

/// The acknowledgement of an append handed to the writer thread.
struct LogAck(oneshot::Receiver<Result<Vec<Event>, SessionError>>);

impl LogAck {
    /// Waits until the batch is written (or failed).
    async fn written(self) -> Result<Vec<Event>, SessionError> {
        self.0.await.unwrap_or_else(|_| Err(writer_gone()))
    }
}

fn writer_gone() -> SessionError {
    SessionError::Closed {
        why: "its writer stopped",
    }
}

/// The name of the log's writer thread.
const WRITER_THREAD: &str = "dsh-log-writer";

/// Debug builds check that the log's file I/O runs on its writer thread, never on an async
/// worker.
fn on_writer_thread() -> bool {
    std::thread::current().name() == Some(WRITER_THREAD)
}

/// The writer thread: runs `jobs` in order until the agent is gone.
fn log_writer(inner: Weak<Inner>, jobs: std::sync::mpsc::Receiver<LogJob>) {
    while let Ok(job) = jobs.recv() {
        let Some(inner) = inner.upgrade() else {
            return;
        };
        match job {
            LogJob::Append { batch, reply } => {
                let _ = reply.send(inner.append_now(batch));
            }
            LogJob::Step {
                turn,
                step,
                streamed,
                tail,
                reply,
            } => {
                let _ = reply.send(inner.append_step_now(turn, step, streamed, tail));
            }
            LogJob::Refresh { reply } => {
                inner.refresh_now();
                let _ = reply.send(());
            }
            LogJob::Close => {
                *inner.log.lock().expect("log lock") = LogSlot::Closed;
                inner.closed.send_replace(true);
            }
        }
    }
}

struct Inner {
    info: AgentInfo,
    header: SessionHeader,
    state: Mutex<State>,
    /// The log, written only by the writer thread; others only peek (`write_blocker`).
    log: Mutex<LogSlot>,
    /// Hands jobs to the writer thread, in order.
    jobs: std::sync::mpsc::Sender<LogJob>,
    /// Becomes true once the writer thread let go of the log.
    closed: watch::Sender<bool>,
    wake: Notify,
    hooks: PromptSubmitHooks,
    listeners: Mutex<Vec<mpsc::UnboundedSender<AgentEvent>>>,
    live: Arc<LiveSession>,
    registry: LiveSessions,
    /// The model that answers; `/model` swaps it in place (the next request uses it).
    model: std::sync::RwLock<Arc<dyn ModelProvider>>,
    /// The highest turn number, and whether a title, seen in records of another writer.
    adopted_turns: AtomicU64,
    adopted_title: AtomicBool,
}

/// A handle to a running agent. Clones share the agent.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

impl Agent {
    /// Starts a new session (its log is created on the first append).
    pub fn start(config: AgentConfig) -> Agent {
        let live = Arc::new(LiveSession::new(config.header.clone()));
        let slot = LogSlot::Pending {
            home: config.home,
            header: config.header.clone(),
            encoding: config.encoding,
        };
        Agent::spawn(
            config.header,
            slot,
            live,
            config.live,
            config.model,
            State::default(),
        )
    }

    /// Continues the session whose log is at `path`. Nothing of the log changes here (a torn
    /// tail is judged by the first append). A log that another writer of ours holds is resumed
    /// read-only: [`Agent::write_blocker`] says why, and appends fail until that writer is gone.
    pub fn resume(
        path: &std::path::Path,
        model: Arc<dyn ModelProvider>,
        registry: LiveSessions,
    ) -> Result<Agent, SessionError> {
        Self::resume_with_history(path, model, registry).map(|(agent, _)| agent)
    }

    /// [`Agent::resume`], also returning the records the log holds (read once).
    pub fn resume_with_history(
        path: &std::path::Path,
        model: Arc<dyn ModelProvider>,
        registry: LiveSessions,
    ) -> Result<(Agent, Vec<Record>), SessionError> {
        let mut records = Vec::new();
        let opened = SessionWriter::open_with(path, &mut |record| {
            records.push(record);
            Ok(())
        });
        let (slot, header) = match opened {
            Ok((writer, scan)) => (LogSlot::Open(writer), scan.header),
            Err(SessionError::NotWritable { reason, .. }) => {
                tracing::warn!(path = %path.display(), %reason, "resuming read-only");
                records.clear();
                let (scan, read) = crate::session::reader::read_log(path)?;
                records = read;
                (
                    LogSlot::Held {
                        path: path.to_path_buf(),
                        known_next: scan.has_events.then_some(scan.next_seq),
                    },
                    scan.header,
                )
            }
            Err(e) => return Err(e),
        };
        let live = Arc::new(LiveSession::new(header.clone()));
        let mut state = State::default();
        for record in &records {
            if let Record::Event(event) = record {
                if event.kind == crate::session::format::TURN_START {
                    if let Ok(EventData::TurnStart { turn, .. }) = event.decode(&header.id) {
                        state.turns = state.turns.max(turn);
                    }
                }
                state.titled |= event.kind == crate::session::format::SESSION_TITLE;
                if event.kind == crate::session::format::REQUEST_HEADER {
                    if let Ok(EventData::RequestHeader(data)) = event.decode(&header.id) {
                        state.last_header =
                            data.get("header").and_then(|h| h.get("config")).cloned();
                    }
                }
            }
        }
        live.record_records(records.clone())?;
        live.set_persisted(true);
        let agent = Agent::spawn(header, slot, live, registry, model, state);
        Ok((agent, records))
    }

    fn spawn(
        header: SessionHeader,
        slot: LogSlot,
        live: Arc<LiveSession>,
        registry: LiveSessions,
        model: Arc<dyn ModelProvider>,
        state: State,
    ) -> Agent {
        registry.insert(live.clone());
        let (jobs, queue) = std::sync::mpsc::channel();
        let inner = Arc::new(Inner {
            info: AgentInfo {
                session_id: header.id.clone(),
                cwd: header.cwd.clone(),
            },
            header,
            state: Mutex::new(state),
            log: Mutex::new(slot),
            jobs,
            closed: watch::Sender::new(false),
            wake: Notify::new(),
            hooks: PromptSubmitHooks::default(),
            listeners: Mutex::new(Vec::new()),
            live,
            registry,
            model: std::sync::RwLock::new(model),
            adopted_turns: AtomicU64::new(0),
            adopted_title: AtomicBool::new(false),
        });
        let writer = Arc::downgrade(&inner);
        if let Err(e) = std::thread::Builder::new()
            .name(WRITER_THREAD.into())
            .spawn(move || log_writer(writer, queue))
        {
            // Without its thread every append fails (and says so); the agent still runs.
            tracing::error!(error = %e, "could not start the session log's writer thread");
            *inner.log.lock().expect("log lock") = LogSlot::Closed;
            inner.closed.send_replace(true);
        }
        tokio::spawn(run_loop(inner.clone()));
        Agent { inner }
    }

    /// The session id and cwd that `prompt-submit` listeners see.
    pub fn info(&self) -> &AgentInfo {
        &self.inner.info
    }

    /// The session's header, the first record of its log.
    pub fn header(&self) -> &SessionHeader {
        &self.inner.header
    }

    /// The `prompt-submit` listeners; prepend or remove them at any time.
    pub fn hooks(&self) -> &PromptSubmitHooks {
        &self.inner.hooks
    }

    /// The agent's live session: its in-memory surface, served to references.
    pub fn live(&self) -> &Arc<LiveSession> {
        &self.inner.live
    }

    /// Why a message sent now could not be written to the log, if that is known without
    /// trying: another writer of ours holds the session, its log is damaged past the valid
    /// prefix, or the agent was shut down. `None` does not promise the append will succeed.
    pub fn write_blocker(&self) -> Option<String> {
        // Never waits for an append in progress (a UI asks this): then nothing is known.
        let log = match self.inner.log.try_lock() {
            Ok(log) => log,
            Err(std::sync::TryLockError::WouldBlock) => return None,
            Err(std::sync::TryLockError::Poisoned(e)) => panic!("log lock poisoned: {e}"),
        };
        match &*log {
            LogSlot::Pending { .. } => None,
            LogSlot::Open(writer) => writer.blocked(),
            LogSlot::Held { path, .. } => crate::session::writer::held_by_another_writer(path)
                .then(|| {
                    "another dsh-refs is writing this session (it holds the session's writer \
                     lock); this one takes over once that one quits"
                        .to_string()
                }),
            LogSlot::Closed => Some("the agent was shut down".into()),
        }
    }

    /// What lay past the valid prefix of the log when its writer last looked, if anything.
    pub fn log_tail(&self) -> Option<crate::session::writer::TailSeen> {
        match &*self.inner.log.lock().expect("log lock") {
            LogSlot::Open(writer) => writer.tail().cloned(),
            _ => None,
        }
    }

    #[doc(hidden)]
    /// Test seam: makes the log's next writes fail (see [`crate::session::writer::WriteFault`]).
    pub fn set_write_fault(&self, fault: Option<crate::session::writer::WriteFault>) {
        if let LogSlot::Open(writer) = &mut *self.inner.log.lock().expect("log lock") {
            writer.set_write_fault(fault);
        }
    }

    /// Receives every event from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<AgentEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.inner
            .listeners
            .lock()
            .expect("listeners lock")
            .push(tx);
        rx
    }

    /// Answers the following requests with `model` (a step already streaming finishes with the
    /// one it started with); the next request logs a `request/header` with reason `change` when
    /// the request config differs. Nothing is re-read or rebuilt.
    pub fn set_model(&self, model: Arc<dyn ModelProvider>) {
        *self.inner.model.write().expect("model lock") = model;
    }

    /// The admission state now.
    pub fn status(&self) -> AgentStatus {
        status_of(&self.inner.state.lock().expect("state lock"))
    }

    /// A fresh direct-prompt message.
    pub fn user_message(&self, text: &str) -> Message {
        Message::new(
            "user",
            vec![ContentBlock::text(text)],
            MessageSource::user(),
            new_message_id(),
        )
    }

    /// Queues a prompt that starts its own turn.
    pub fn followup(&self, message: Message) -> Admission {
        let mut state = self.inner.state.lock().expect("state lock");
        self.enqueue(&mut state, message);
        Admission::Queued
    }

    /// Inside the window: staged as steering for the next safe boundary; else a followup.
    pub fn steer(&self, message: Message) -> Admission {
        let mut state = self.inner.state.lock().expect("state lock");
        if state.window_open {
            state.outbox.push_back(Staged::Steering(message));
            self.inner.emit(AgentEvent::Status(status_of(&state)));
            Admission::Staged
        } else {
            self.enqueue(&mut state, message);
            Admission::Queued
        }
    }

    /// Inside the window: staged as a context for the next safe boundary; else appended at once
    /// (resolving once it is written).
    pub async fn inject(&self, context: Message) -> Result<Admission, SessionError> {
        let ack = {
            let mut state = self.inner.state.lock().expect("state lock");
            if state.window_open {
                state.outbox.push_back(Staged::Context(context));
                return Ok(Admission::Staged);
            }
            // Handed to the log under the state lock: the window cannot open in between.
            self.inner.send_append(vec![context_event(context)])
        };
        ack.written().await?;
        Ok(Admission::Appended)
    }

    /// Dispatches a message with its prepared snapshot (SPEC §4, the last step of the submit
    /// transaction of §5.3): inside the window, `inject(contexts)` + `steer(message)` at the
    /// same boundary; outside it, a one-shot outermost `prompt-submit` wrapper bound to this
    /// message, then `followup`. Decided under one lock, so the window cannot close between the
    /// two halves.
    pub fn dispatch_with_contexts(&self, message: Message, contexts: Vec<Message>) -> Admission {
        let mut state = self.inner.state.lock().expect("state lock");
        if state.window_open {
            state
                .outbox
                .extend(contexts.into_iter().map(Staged::Context));
            state.outbox.push_back(Staged::Steering(message));
            self.inner.emit(AgentEvent::Status(status_of(&state)));
            Admission::Staged
        } else {
            if !contexts.is_empty() {
                self.inner
                    .hooks
                    .prepend(Arc::new(ContextWrapper::new(message.id.clone(), contexts)));
            }
            self.enqueue(&mut state, message);
            Admission::Queued
        }
    }

    /// Dispatches a message by state: `steer` inside the window, else `followup` (which is what
    /// [`Agent::steer`] does; this is its name in the submit transaction).
    pub fn dispatch(&self, message: Message) -> Admission {
        self.steer(message)
    }

    /// Removes a queued prompt that was not claimed yet; its one-shot wrappers are released.
    pub fn discard(&self, message_id: &str) -> bool {
        let mut state = self.inner.state.lock().expect("state lock");
        let before = state.queue.len();
        state.queue.retain(|p| p.message.id != message_id);
        let removed = state.queue.len() != before;
        if removed {
            self.inner.hooks.release_bound(message_id);
            self.inner.emit(AgentEvent::Status(status_of(&state)));
        }
        removed
    }

    /// Cancels the prompt under admission or the open turn (Esc). Returns whether anything was
    /// running.
    pub fn cancel(&self) -> bool {
        let state = self.inner.state.lock().expect("state lock");
        match &state.current {
            Some(token) if !token.is_cancelled() => {
                token.cancel();
                true
            }
            _ => false,
        }
    }

    /// Stops the agent: queued prompts are discarded (wrappers released), the turn is cancelled.
    /// The log (and the session's writer lock) is let go once what was handed to it is written:
    /// at once when idle, else when the cancelled turn has ended; [`Agent::closed`] waits for it.
    pub fn shutdown(&self) {
        let mut state = self.inner.state.lock().expect("state lock");
        state.stopped = true;
        for prompt in state.queue.drain(..) {
            self.inner.hooks.release_bound(&prompt.message.id);
        }
        if let Some(token) = &state.current {
            token.cancel();
        }
        if state.current.is_none() {
            // Idle: let go of the log now (a running turn lets go when it ends).
            self.inner.close_log();
        }
        drop(state);
        self.inner.registry.remove(&self.inner.info.session_id);
        self.inner.wake.notify_one();
    }

    /// Resolves once the log is let go after [`Agent::shutdown`] (everything handed to it before
    /// is written by then).
    pub async fn closed(&self) {
        let mut closed = self.inner.closed.subscribe();
        // The sender lives in `Inner`, which `self` keeps: this returns only once it is true.
        let _ = closed.wait_for(|closed| *closed).await;
    }

    fn enqueue(&self, state: &mut State, message: Message) {
        state.queue.push_back(QueuedPrompt {
            message,
            cancel: CancellationToken::new(),
        });
        self.inner.emit(AgentEvent::Status(status_of(state)));
        self.inner.wake.notify_one();
    }
}

fn status_of(state: &State) -> AgentStatus {
    AgentStatus {
        running: state.turn_open,
        window_open: state.window_open,
        queued_prompts: state.queue.len(),
        staged_steering: state
            .outbox
            .iter()
            .filter(|s| matches!(s, Staged::Steering(_)))
            .count(),
    }
}

/// A fresh message id: a random UUID v4.
pub fn new_message_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn context_event(context: Message) -> NewEvent {
    NewEvent::new(EventData::UserMessage(context))
}

fn steering_event(turn: u64, message: Message) -> NewEvent {
    NewEvent::new(EventData::SteeringMessage {
        turn: turn.into(),
        message,
        extra: Map::new(),
    })
}

/// The ids of the typed (steering) messages among `staged`.
fn steering_ids(staged: &[Staged]) -> Vec<String> {
    staged
        .iter()
        .filter_map(|s| match s {
            Staged::Steering(m) => Some(m.id.clone()),
            Staged::Context(_) => None,
        })
        .collect()
}

fn staged_events(turn: u64, staged: impl IntoIterator<Item = Staged>) -> Vec<NewEvent> {
    staged
        .into_iter()
        .map(|s| match s {
            Staged::Context(m) => context_event(m),
            Staged::Steering(m) => steering_event(turn, m),
        })
        .collect()
}

impl Inner {
    /// The model answering now.
    fn model(&self) -> Arc<dyn ModelProvider> {
        self.model.read().expect("model lock").clone()
    }

    fn emit(&self, event: AgentEvent) {
        let mut listeners = self.listeners.lock().expect("listeners lock");
        listeners.retain(|tx| tx.send(event.clone()).is_ok());
    }

    fn emit_status(&self) {
        let status = status_of(&self.state.lock().expect("state lock"));
        self.emit(AgentEvent::Status(status));
    }

    /// Hands a job to the writer thread (in the order of the calls).
    fn send(&self, job: LogJob) {
        // A stopped thread drops the job, and with it the reply: the waiter hears `writer_gone`.
        let _ = self.jobs.send(job);
    }

    /// Hands one batch to the writer; the returned acknowledgement resolves once it is written.
    /// Called under the state lock where the log order must follow a decision.
    fn send_append(&self, batch: Vec<NewEvent>) -> LogAck {
        let (reply, ack) = oneshot::channel();
        if batch.is_empty() {
            let _ = reply.send(Ok(Vec::new()));
        } else {
            self.send(LogJob::Append { batch, reply });
        }
        LogAck(ack)
    }

    /// Appends one batch through the writer thread.
    async fn append(&self, batch: Vec<NewEvent>) -> Result<Vec<Event>, SessionError> {
        self.send_append(batch).written().await
    }

    /// Appends one batch (creating the log on first use) and tells the listeners. Writer thread
    /// only.
    fn append_now(&self, batch: Vec<NewEvent>) -> Result<Vec<Event>, SessionError> {
        debug_assert!(on_writer_thread(), "log I/O off its writer thread");
        let mut log = self.log.lock().expect("log lock");
        let mut adopted = Vec::new();
        let appended = match self.writer(&mut log, &mut adopted) {
            Ok(writer) => {
                let appended = writer.append(batch);
                adopted.extend(writer.take_adopted());
                appended
            }
            Err(e) => Err(e),
        };
        drop(log);
        self.adopt(adopted)?;
        let events = appended?;
        self.live.record(&events)?;
        self.emit(AgentEvent::Logged(events.clone()));
        Ok(events)
    }

    /// Takes in records another writer appended (re-read by our writer): the in-memory surface
    /// and the UI must include them before what we append after them.
    fn adopt(&self, records: Vec<Record>) -> Result<(), SessionError> {
        if records.is_empty() {
            return Ok(());
        }
        let events: Vec<Event> = records
            .iter()
            .filter_map(|r| match r {
                Record::Event(e) => Some(e.clone()),
                Record::Packed(_) => None,
            })
            .collect();
        // Not under the state lock (an append may run with it held): the next turn reads these.
        for event in &events {
            if event.kind == crate::session::format::TURN_START {
                if let Ok(EventData::TurnStart { turn, .. }) = event.decode(&self.info.session_id) {
                    self.adopted_turns.fetch_max(turn, Ordering::Relaxed);
                }
            }
            if event.kind == crate::session::format::SESSION_TITLE {
                self.adopted_title.store(true, Ordering::Relaxed);
            }
        }
        self.live.record_records(records)?;
        if !events.is_empty() {
            self.emit(AgentEvent::Logged(events));
        }
        Ok(())
    }

    /// Reads in what another writer appended since our last look (its turns and title count
    /// before ours are numbered). Failures are left for the append to report.
    async fn refresh_log(&self) {
        let (reply, done) = oneshot::channel();
        self.send(LogJob::Refresh { reply });
        let _ = done.await;
    }

    /// [`Inner::refresh_log`] on the writer thread.
    fn refresh_now(&self) {
        debug_assert!(on_writer_thread(), "log I/O off its writer thread");
        let mut log = self.log.lock().expect("log lock");
        let mut adopted = Vec::new();
        // A held log is taken over here if its writer is gone (what it wrote is adopted).
        if let Ok(writer) = self.writer(&mut log, &mut adopted) {
            if let Err(e) = writer.refresh() {
                tracing::info!(error = %e, "could not re-read the session log before a turn");
            }
            adopted.extend(writer.take_adopted());
        }
        drop(log);
        if let Err(e) = self.adopt(adopted) {
            tracing::warn!(error = %e, "could not take in another writer's records");
        }
    }

    /// Lets go of the log (and the session's writer lock), after the appends handed over before.
    fn close_log(&self) {
        self.send(LogJob::Close);
    }

    /// Appends the end of a step through the writer thread.
    async fn append_step(
        &self,
        turn: u64,
        step: u64,
        streamed: Streamed,
        tail: Vec<NewEvent>,
    ) -> Result<Vec<Event>, SessionError> {
        let (reply, ack) = oneshot::channel();
        self.send(LogJob::Step {
            turn,
            step,
            streamed,
            tail,
            reply,
        });
        LogAck(ack).written().await
    }

    /// Appends the end of a step: the streamed reasoning and text as packed rows (reasoning at
    /// block index 0, text after it, as dsh numbers blocks), then `tail` events. Writer thread
    /// only.
    fn append_step_now(
        &self,
        turn: u64,
        step: u64,
        streamed: Streamed,
        tail: Vec<NewEvent>,
    ) -> Result<Vec<Event>, SessionError> {
        debug_assert!(on_writer_thread(), "log I/O off its writer thread");
        let mut log = self.log.lock().expect("log lock");
        let mut adopted = Vec::new();
        let mut events = Vec::new();
        let appended = match self.writer(&mut log, &mut adopted) {
            Ok(writer) => {
                let appended = writer.append_built(|next_seq| {
                    let (records, built) = step_records(next_seq, turn, step, streamed, tail);
                    events = built;
                    records
                });
                adopted.extend(writer.take_adopted());
                appended
            }
            Err(e) => Err(e),
        };
        drop(log);
        self.adopt(adopted)?;
        let records = appended?;
        self.live.record_records(records)?;
        self.emit(AgentEvent::Logged(events.clone()));
        Ok(events)
    }

    /// The open writer: created on first use, or taken over once the writer that held a resumed
    /// log is gone (records appended meanwhile go to `adopted`).
    fn writer<'a>(
        &self,
        log: &'a mut LogSlot,
        adopted: &mut Vec<Record>,
    ) -> Result<&'a mut SessionWriter, SessionError> {
        match log {
            LogSlot::Pending {
                home,
                header,
                encoding,
            } => {
                let writer = SessionWriter::create(home, header.clone(), *encoding)?;
                self.live.set_persisted(true);
                *log = LogSlot::Open(writer);
            }
            LogSlot::Held { path, known_next } => {
                let known_next = *known_next;
                // Kept only if the log opens: a failed attempt must not adopt anything twice.
                let mut since = Vec::new();
                let (writer, _) = SessionWriter::open_with(path, &mut |record: Record| {
                    if known_next.is_none_or(|next| record.first_seq() >= next) {
                        since.push(record);
                    }
                    Ok(())
                })?;
                adopted.extend(since);
                *log = LogSlot::Open(writer);
            }
            LogSlot::Open(_) => {}
            LogSlot::Closed => {
                return Err(SessionError::Closed {
                    why: "the agent was shut down",
                })
            }
        }
        match log {
            LogSlot::Open(writer) => Ok(writer),
            _ => unreachable!("opened above"),
        }
    }

    /// Hands a batch to the log under the state lock, so that the log order follows the
    /// admission order. Awaited after the lock is released: if the write fails, the messages
    /// in `unsent` (typed by the user) are reported back as unsent.
    fn append_locked(&self, _state: &State, batch: Vec<NewEvent>, unsent: Vec<String>) -> Pending {
        Pending {
            ack: self.send_append(batch),
            unsent,
        }
    }

    /// Tells the listeners that a write failed, and which typed messages it took with it.
    fn report_unsent(&self, message_ids: Vec<String>, error: &SessionError) {
        self.emit(AgentEvent::Error(AgentError::LogWrite {
            reason: error.to_string(),
        }));
        if !message_ids.is_empty() {
            self.emit(AgentEvent::Unsent {
                message_ids,
                reason: error.to_string(),
            });
        }
    }
}

/// A batch handed to the log under the state lock, with the typed messages it carries.
#[must_use = "a pending batch reports its failure only when settled"]
struct Pending {
    ack: LogAck,
    unsent: Vec<String>,
}

impl Pending {
    /// Waits for the write; a failure reports the typed messages as unsent.
    async fn settle(self, inner: &Inner) {
        if let Err(e) = self.ack.written().await {
            inner.report_unsent(self.unsent, &e);
        }
    }
}

/// The records of a step's end: the streamed text as one packed row, then `tail` events, from
/// seq `seq` on; also the events (for listeners).
fn step_records(
    mut seq: u64,
    turn: u64,
    step: u64,
    streamed: Streamed,
    tail: Vec<NewEvent>,
) -> (Vec<Record>, Vec<Event>) {
    let mut records = Vec::new();
    let mut index = 0u64;
    for (kind, pieces) in [
        (PackedKind::Reasoning, streamed.reasoning),
        (PackedKind::Text, streamed.text),
    ] {
        let Some((time0, _)) = pieces.first() else {
            continue;
        };
        let time0 = *time0;
        let dt = pieces.windows(2).map(|w| w[1].0 - w[0].0).collect();
        let packed = PackedChunks {
            kind,
            seq0: seq,
            time0,
            turn: turn.into(),
            step: step.into(),
            index: index.into(),
            dt,
            pieces: pieces.into_iter().map(|(_, text)| text).collect(),
            id: None,
            name: None,
            extra: Map::new(),
            row_extra: Map::new(),
        };
        index += 1;
        seq += packed.len() as u64;
        records.push(Record::Packed(Box::new(packed)));
    }
    let now = now_ms();
    let mut events = Vec::new();
    for new in tail {
        let mut event = Event::new(seq, new.time.unwrap_or(now), &new.data);
        if new.surface_op.is_some() {
            event.surface_op = new.surface_op;
        }
        seq += 1;
        events.push(event.clone());
        records.push(Record::Event(event));
    }
    (records, events)
}

async fn run_loop(inner: Arc<Inner>) {
    loop {
        let claimed = {
            let mut state = inner.state.lock().expect("state lock");
            if state.stopped {
                return;
            }
            match state.queue.pop_front() {
                Some(prompt) => {
                    // The window opens when a queued prompt is claimed, before admission runs.
                    state.window_open = true;
                    state.current = Some(prompt.cancel.clone());
                    Some(prompt)
                }
                None => None,
            }
        };
        let Some(prompt) = claimed else {
            inner.wake.notified().await;
            continue;
        };
        inner.emit_status();
        admit_and_run(&inner, prompt).await;
        let mut state = inner.state.lock().expect("state lock");
        state.current = None;
        state.turn_open = false;
        state.window_open = false;
        let status = status_of(&state);
        if state.stopped {
            // Shut down during the turn: let go of the log now that the turn is written.
            inner.close_log();
        }
        drop(state);
        inner.emit(AgentEvent::Status(status));
    }
}

async fn admit_and_run(inner: &Arc<Inner>, prompt: QueuedPrompt) {
    let QueuedPrompt {
        mut message,
        cancel,
    } = prompt;
    let decision = inner.hooks.run(&inner.info, &message, &cancel).await;
    inner.hooks.release_bound(&message.id);
    let decision = match decision {
        Ok(_) if cancel.is_cancelled() => Err(HookError::Cancelled),
        other => other,
    };
    let contexts = match decision {
        Ok(PromptDecision::Allow {
            content,
            additional_contexts,
        }) => {
            if let Some(content) = content {
                message.content = content;
            }
            additional_contexts
        }
        Ok(PromptDecision::Block { reason }) => {
            close_without_turn(inner).await;
            inner.emit(AgentEvent::PromptBlocked {
                message_id: message.id.clone(),
                reason,
            });
            return;
        }
        Err(error) => {
            close_without_turn(inner).await;
            inner.emit(AgentEvent::PromptBlocked {
                message_id: message.id.clone(),
                reason: error.to_string(),
            });
            return;
        }
    };

    // The turn begins: turn/start, the contexts, then the prompt, as one batch. Its number
    // follows every turn in the log, another writer's included.
    inner.refresh_log().await;
    let (turn, title) = {
        let mut state = inner.state.lock().expect("state lock");
        state.turns = state.turns.max(inner.adopted_turns.load(Ordering::Relaxed)) + 1;
        state.titled |= inner.adopted_title.load(Ordering::Relaxed);
        state.turn_open = true;
        let title = (!state.titled)
            .then(|| title_for(&message, &contexts))
            .flatten();
        state.titled |= title.is_some();
        (state.turns, title)
    };
    let mut batch = vec![NewEvent::new(EventData::TurnStart {
        turn,
        trigger: json!({"kind": "message", "source": message.source}),
        extra: Map::new(),
    })];
    batch.extend(contexts.into_iter().map(context_event));
    let message_id = message.id.clone();
    batch.push(NewEvent::new(EventData::UserMessage(message)));
    let events = match inner.append(batch).await {
        Ok(events) => events,
        Err(e) => {
            // Nothing of this turn was written: its number and title are still free.
            {
                let mut state = inner.state.lock().expect("state lock");
                state.turns -= 1;
                state.titled &= title.is_none();
                state.turn_open = false;
            }
            inner.report_unsent(vec![message_id], &e);
            close_without_turn(inner).await;
            return;
        }
    };
    if let (Some(title), Some(prompt_event)) = (title, events.last()) {
        let _ = inner
            .append(vec![NewEvent::new(EventData::SessionTitle {
                title,
                message_seqs: vec![prompt_event.seq],
                source: json!({"kind": "fallback"}),
                extra: Map::new(),
            })])
            .await;
    }
    inner.emit_status();
    let reason = run_turn(inner, turn, &cancel).await;
    let _ = inner
        .append(vec![NewEvent::new(EventData::TurnEnd {
            turn,
            reason,
            extra: Map::new(),
        })])
        .await;
}

/// Admission refused the prompt: the window closes; what was staged meanwhile is not lost:
/// steering becomes followups (a context staged before a steering message travels with it),
/// trailing contexts are appended at once.
async fn close_without_turn(inner: &Arc<Inner>) {
    let pending = close_without_turn_locked(inner);
    if let Some(pending) = pending {
        pending.settle(inner).await;
    }
}

fn close_without_turn_locked(inner: &Arc<Inner>) -> Option<Pending> {
    let mut state = inner.state.lock().expect("state lock");
    state.window_open = false;
    let staged: Vec<Staged> = state.outbox.drain(..).collect();
    let mut pending_contexts = Vec::new();
    for item in staged {
        match item {
            Staged::Context(context) => pending_contexts.push(context),
            Staged::Steering(message) => {
                let contexts = std::mem::take(&mut pending_contexts);
                if !contexts.is_empty() {
                    inner
                        .hooks
                        .prepend(Arc::new(ContextWrapper::new(message.id.clone(), contexts)));
                }
                state.queue.push_back(QueuedPrompt {
                    message,
                    cancel: CancellationToken::new(),
                });
            }
        }
    }
    let pending = (!pending_contexts.is_empty()).then(|| {
        let batch = pending_contexts.into_iter().map(context_event).collect();
        inner.append_locked(&state, batch, Vec::new())
    });
    inner.wake.notify_one();
    pending
}

/// Runs steps until the model stops with nothing staged; returns the `turn/end` reason.
async fn run_turn(inner: &Arc<Inner>, turn: u64, cancel: &CancellationToken) -> Value {
    let mut step = 0;
    loop {
        // Safe boundary: before each model request the outbox drains, in FIFO order.
        let pending = {
            let mut state = inner.state.lock().expect("state lock");
            let staged: Vec<Staged> = state.outbox.drain(..).collect();
            (!staged.is_empty()).then(|| {
                let ids = steering_ids(&staged);
                let pending = inner.append_locked(&state, staged_events(turn, staged), ids);
                (pending, status_of(&state))
            })
        };
        if let Some((pending, status)) = pending {
            pending.settle(inner).await;
            inner.emit(AgentEvent::Status(status));
        }
        if cancel.is_cancelled() {
            return abort(inner, turn).await;
        }
        step += 1;
        let _ = inner
            .append(vec![NewEvent::new(EventData::StepStart {
                turn,
                step,
                extra: Map::new(),
            })])
            .await;
        log_request_header(inner).await;
        let request = ModelRequest {
            session_id: inner.info.session_id.clone(),
            messages: model_messages(inner),
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<ModelEvent>();
        let model = inner.model();
        let token = cancel.clone();
        let mut response = tokio::spawn(async move { model.stream(request, tx, token).await });
        let mut streamed = Streamed::default();
        let result = loop {
            tokio::select! {
                Some(event) = rx.recv() => streamed.take(inner, event),
                done = &mut response => {
                    while let Ok(event) = rx.try_recv() {
                        streamed.take(inner, event);
                    }
                    break done.unwrap_or_else(|e| Err(ModelError::TaskStopped(e.to_string())));
                }
            }
        };
        let end = NewEvent::new(EventData::StepEnd {
            turn,
            step,
            extra: Map::new(),
        });
        match result {
            Ok(output) => {
                let assistant = assistant_event(inner, turn, step, &output, None);
                let _ = inner
                    .append_step(turn, step, streamed, vec![assistant, end])
                    .await;
            }
            Err(error) => {
                // Partial text already streamed is kept, marked interrupted, and logged.
                let mut tail = Vec::new();
                if !streamed.is_empty() {
                    let partial = streamed.output();
                    tail.push(assistant_event(inner, turn, step, &partial, Some(&error)));
                }
                tail.push(end);
                let _ = inner.append_step(turn, step, streamed, tail).await;
                if error == ModelError::Cancelled {
                    return abort(inner, turn).await;
                }
                let (code, message) = error.failure();
                inner.emit(AgentEvent::Error(AgentError::Model(error)));
                close_turn(inner, turn).await;
                return json!({"kind": "error", "step": step, "failure": {"message": message, "code": code}});
            }
        }
        // Turn stop: staged steering earns another step; contexts drain; the window closes
        // before turn/end, in the same critical section that saw no steering left.
        let pending = {
            let mut state = inner.state.lock().expect("state lock");
            if state
                .outbox
                .iter()
                .any(|s| matches!(s, Staged::Steering(_)))
                && !cancel.is_cancelled()
            {
                continue;
            }
            state.window_open = false;
            let staged: Vec<Staged> = state.outbox.drain(..).collect();
            (!staged.is_empty()).then(|| {
                let ids = steering_ids(&staged);
                inner.append_locked(&state, staged_events(turn, staged), ids)
            })
        };
        if let Some(pending) = pending {
            pending.settle(inner).await;
        }
        inner.emit_status();
        if cancel.is_cancelled() {
            return json!({"kind": "aborted"});
        }
        return json!({"kind": "completed"});
    }
}

/// Cancelled: the window closes, and whatever was staged is still logged (nothing is lost).
async fn abort(inner: &Arc<Inner>, turn: u64) -> Value {
    close_turn(inner, turn).await;
    json!({"kind": "aborted"})
}

async fn close_turn(inner: &Arc<Inner>, turn: u64) {
    let pending = {
        let mut state = inner.state.lock().expect("state lock");
        state.window_open = false;
        let staged: Vec<Staged> = state.outbox.drain(..).collect();
        (!staged.is_empty()).then(|| {
            let ids = steering_ids(&staged);
            inner.append_locked(&state, staged_events(turn, staged), ids)
        })
    };
    if let Some(pending) = pending {
        pending.settle(inner).await;
    }
}

/// The model-visible conversation: the current surface, as messages.
fn model_messages(inner: &Inner) -> Vec<Message> {
    let snapshot = inner.live.snapshot();
    snapshot
        .events
        .iter()
        .filter_map(|e| e.message(&snapshot.session.id).ok().flatten())
        .collect()
}

/// dsh's fallback title of a direct prompt: its first words, the sessions it references
/// (`contexts`' session-reference labels) taken out and named after them.
fn title_for(message: &Message, contexts: &[Message]) -> Option<String> {
    if !message.source.is_direct_user() {
        return None;
    }
    let labels = crate::session::title::reference_labels(contexts);
    crate::session::title::prompt_title(&message.display_text(), &labels)
}

/// What one step streamed, with arrival times, for the packed chunk rows and a partial answer.
#[derive(Default)]
struct Streamed {
    text: Vec<(i64, String)>,
    reasoning: Vec<(i64, String)>,
    usage: Option<Usage>,
}

impl Streamed {
    fn take(&mut self, inner: &Inner, event: ModelEvent) {
        match event {
            ModelEvent::Text(delta) => {
                self.text.push((now_ms(), delta.clone()));
                inner.emit(AgentEvent::Delta(delta));
            }
            ModelEvent::Reasoning(delta) => {
                self.reasoning.push((now_ms(), delta.clone()));
                inner.emit(AgentEvent::Reasoning(delta));
            }
            ModelEvent::Usage(usage) => {
                self.usage = Some(usage);
                inner.emit(AgentEvent::Usage(usage));
            }
            ModelEvent::Retrying {
                attempt,
                max,
                delay,
                reason,
            } => inner.emit(AgentEvent::Retrying {
                attempt,
                max,
                delay,
                reason,
            }),
        }
    }

    fn is_empty(&self) -> bool {
        self.text.is_empty() && self.reasoning.is_empty()
    }

    /// The partial answer so far.
    fn output(&self) -> ModelOutput {
        ModelOutput {
            text: self.text.iter().map(|(_, t)| t.as_str()).collect(),
            reasoning: self.reasoning.iter().map(|(_, t)| t.as_str()).collect(),
            usage: self.usage,
        }
    }
}

/// The `assistant/message` of a step: `reasoning` then `text` blocks, the model source, and
/// `usage` beside the message as dsh logs it. A partial answer also carries
/// `"interrupted": true`.
fn assistant_event(
    inner: &Inner,
    turn: u64,
    step: u64,
    output: &ModelOutput,
    interrupted: Option<&ModelError>,
) -> NewEvent {
    let mut content = Vec::new();
    if !output.reasoning.is_empty() {
        content.push(ContentBlock::Reasoning {
            text: output.reasoning.clone(),
            extra: Map::new(),
        });
    }
    if !output.text.is_empty() || output.reasoning.is_empty() {
        content.push(ContentBlock::text(output.text.clone()));
    }
    let (provider, model) = inner.model().identity();
    let message = Message::new(
        "assistant",
        content,
        MessageSource::model(provider, model),
        new_message_id(),
    );
    let mut extra = Map::new();
    if let Some(usage) = output.usage {
        extra.insert("usage".into(), usage.to_json());
    }
    if interrupted.is_some() {
        extra.insert("interrupted".into(), Value::Bool(true));
    }
    NewEvent::new(EventData::AssistantMessage {
        turn: turn.into(),
        step: step.into(),
        message,
        extra,
    })
}

/// Logs `request/header` before a request when dsh would: before the session's first request
/// (`initial`), on the first request after a resume (`resume`, or `change` when the model
/// differs from the log's last header), and whenever the provider or model changed (`change`).
/// A model without a request config (the offline one) logs nothing.
async fn log_request_header(inner: &Arc<Inner>) {
    let Some(config) = inner.model().request_config() else {
        return;
    };
    let reason = {
        let mut state = inner.state.lock().expect("state lock");
        let reason = match (&state.last_header, state.header_logged) {
            (None, _) => "initial",
            (Some(last), _) if *last != config => "change",
            (Some(_), false) => "resume",
            (Some(_), true) => return,
        };
        state.last_header = Some(config.clone());
        state.header_logged = true;
        reason
    };
    let mut data = Map::new();
    data.insert("header".into(), json!({ "config": config }));
    data.insert("reason".into(), reason.into());
    if let Err(e) = inner
        .append(vec![NewEvent::new(EventData::RequestHeader(data))])
        .await
    {
        inner.emit(AgentEvent::Error(AgentError::LogWrite {
            reason: e.to_string(),
        }));
    }
}
