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

//!
//! Rooms (the API is [`Agent`] and the types beside it; the rooms are private):
//! `runtime/state.rs` (admission state and the one outbox drain), `runtime/turn.rs` (the turn
//! loop: admission, turns, their outcome), `runtime/step.rs` (one model request and its
//! logging), `runtime/log.rs` (the writer thread and the jobs handed to it).

use super::hooks::{AgentInfo, ContextWrapper, PromptSubmitHooks};
use super::provider::{ModelError, ModelProvider, Usage};
use crate::session::{
    ContentBlock, Encoding, Event, EventData, LiveSession, LiveSessions, Message, MessageSource,
    Record, SessionError, SessionHeader, SessionWriter,
};
use crate::sync::{LockExt, RwLockExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;

mod log;
mod state;
mod step;
mod turn;

use log::{log_writer, LogJob, LogSlot, WRITER_THREAD};
use state::{context_event, status_of, QueuedPrompt, Staged, State};

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
            *inner.log.locked() = LogSlot::Closed;
            inner.closed.send_replace(true);
        }
        tokio::spawn(turn::run_loop(inner.clone()));
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
        match &*self.inner.log.locked() {
            LogSlot::Open(writer) => writer.tail().cloned(),
            _ => None,
        }
    }

    #[doc(hidden)]
    /// Test seam: makes the log's next writes fail (see [`crate::session::writer::WriteFault`]).
    pub fn set_write_fault(&self, fault: Option<crate::session::writer::WriteFault>) {
        if let LogSlot::Open(writer) = &mut *self.inner.log.locked() {
            writer.set_write_fault(fault);
        }
    }

    /// Receives every event from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<AgentEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.inner.listeners.locked().push(tx);
        rx
    }

    /// Answers the following requests with `model` (a step already streaming finishes with the
    /// one it started with); the next request logs a `request/header` with reason `change` when
    /// the request config differs. Nothing is re-read or rebuilt.
    pub fn set_model(&self, model: Arc<dyn ModelProvider>) {
        *self.inner.model.write_locked() = model;
    }

    /// The admission state now.
    pub fn status(&self) -> AgentStatus {
        status_of(&self.inner.state.locked())
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
        let mut state = self.inner.state.locked();
        self.enqueue(&mut state, message);
        Admission::Queued
    }

    /// Inside the window: staged as steering for the next safe boundary; else a followup.
    pub fn steer(&self, message: Message) -> Admission {
        let mut state = self.inner.state.locked();
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
            let mut state = self.inner.state.locked();
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
        let mut state = self.inner.state.locked();
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
        let mut state = self.inner.state.locked();
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
        let state = self.inner.state.locked();
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
        let mut state = self.inner.state.locked();
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

/// A fresh message id: a random UUID v4.
pub fn new_message_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl Inner {
    /// The model answering now.
    fn model(&self) -> Arc<dyn ModelProvider> {
        self.model.read_locked().clone()
    }

    fn emit(&self, event: AgentEvent) {
        let mut listeners = self.listeners.locked();
        listeners.retain(|tx| tx.send(event.clone()).is_ok());
    }

    fn emit_status(&self) {
        let status = status_of(&self.state.locked());
        self.emit(AgentEvent::Status(status));
    }
}
