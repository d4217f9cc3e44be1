//! The log's writer thread and what is handed to it.
//!
//! Purpose: every append, take-over and re-read of the session log runs on one dedicated thread
//! (`dsh-log-writer`) that owns the [`SessionWriter`], in the order the jobs were handed over;
//! async tasks only hand over jobs and await their acknowledgement ([`LogAck`], [`Pending`]).
//!
//! Invariant: the log's blocking file I/O (the writer lock, `fsync`) never runs on an async
//! worker, and no async task holds a lock across it; jobs are written in the order they were
//! sent, and each is acknowledged once its batch is written, taken into the in-memory surface
//! and announced. Records another writer appended are adopted before ours. Proof: the file I/O
//! paths `debug_assert!` that they run on the writer thread (so every agent test checks it);
//! order and failures: `tests/agent/runtime.rs`, `tests/agent/write_failures.rs`,
//! `tests/tui/write_safety.rs`.

use super::state::{staged_events, steering_ids, Staged, State};
use super::step::Streamed;
use super::{AgentError, AgentEvent, Inner};
use crate::session::clock::now_ms;
use crate::session::format::{PackedChunks, PackedKind};
use crate::session::{
    Encoding, Event, EventData, NewEvent, Record, SessionError, SessionHeader, SessionWriter,
};
use crate::sync::LockExt;
use serde_json::Map;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Weak;
use tokio::sync::oneshot;

pub(super) enum LogSlot {
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
pub(super) enum LogJob {
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
pub(super) struct LogAck(oneshot::Receiver<Result<Vec<Event>, SessionError>>);

impl LogAck {
    /// Waits until the batch is written (or failed).
    pub(super) async fn written(self) -> Result<Vec<Event>, SessionError> {
        self.0.await.unwrap_or_else(|_| Err(writer_gone()))
    }
}

pub(super) fn writer_gone() -> SessionError {
    SessionError::Closed {
        why: "its writer stopped",
    }
}

/// The name of the log's writer thread.
pub(super) const WRITER_THREAD: &str = "dsh-log-writer";

/// Debug builds check that the log's file I/O runs on its writer thread, never on an async
/// worker.
pub(super) fn on_writer_thread() -> bool {
    std::thread::current().name() == Some(WRITER_THREAD)
}

/// The writer thread: runs `jobs` in order until the agent is gone.
pub(super) fn log_writer(inner: Weak<Inner>, jobs: std::sync::mpsc::Receiver<LogJob>) {
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
                *inner.log.locked() = LogSlot::Closed;
                inner.closed.send_replace(true);
            }
        }
    }
}

impl Inner {
    /// Hands a job to the writer thread (in the order of the calls).
    pub(super) fn send(&self, job: LogJob) {
        // A stopped thread drops the job, and with it the reply: the waiter hears `writer_gone`.
        let _ = self.jobs.send(job);
    }

    /// Hands one batch to the writer; the returned acknowledgement resolves once it is written.
    /// Called under the state lock where the log order must follow a decision.
    pub(super) fn send_append(&self, batch: Vec<NewEvent>) -> LogAck {
        let (reply, ack) = oneshot::channel();
        if batch.is_empty() {
            let _ = reply.send(Ok(Vec::new()));
        } else {
            self.send(LogJob::Append { batch, reply });
        }
        LogAck(ack)
    }

    /// Appends one batch through the writer thread.
    pub(super) async fn append(&self, batch: Vec<NewEvent>) -> Result<Vec<Event>, SessionError> {
        self.send_append(batch).written().await
    }

    /// Appends one batch (creating the log on first use) and tells the listeners. Writer thread
    /// only.
    pub(super) fn append_now(&self, batch: Vec<NewEvent>) -> Result<Vec<Event>, SessionError> {
        debug_assert!(on_writer_thread(), "log I/O off its writer thread");
        let mut log = self.log.locked();
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
    pub(super) fn adopt(&self, records: Vec<Record>) -> Result<(), SessionError> {
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
    pub(super) async fn refresh_log(&self) {
        let (reply, done) = oneshot::channel();
        self.send(LogJob::Refresh { reply });
        let _ = done.await;
    }

    /// [`Inner::refresh_log`] on the writer thread.
    pub(super) fn refresh_now(&self) {
        debug_assert!(on_writer_thread(), "log I/O off its writer thread");
        let mut log = self.log.locked();
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
    pub(super) fn close_log(&self) {
        self.send(LogJob::Close);
    }

    /// Appends the end of a step through the writer thread.
    pub(super) async fn append_step(
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
    pub(super) fn append_step_now(
        &self,
        turn: u64,
        step: u64,
        streamed: Streamed,
        tail: Vec<NewEvent>,
    ) -> Result<Vec<Event>, SessionError> {
        debug_assert!(on_writer_thread(), "log I/O off its writer thread");
        let mut log = self.log.locked();
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
    pub(super) fn writer<'a>(
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
    pub(super) fn append_locked(
        &self,
        _state: &State,
        batch: Vec<NewEvent>,
        unsent: Vec<String>,
    ) -> Pending {
        Pending {
            ack: self.send_append(batch),
            unsent,
        }
    }

    /// Tells the listeners that a write failed, and which typed messages it took with it.
    pub(super) fn report_unsent(&self, message_ids: Vec<String>, error: &SessionError) {
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

impl Inner {
    /// Takes everything staged in the outbox (FIFO) and hands it to the log as one batch, under
    /// `state`'s lock; `None` when nothing was staged. Events of turn `turn`.
    pub(super) fn drain_outbox(&self, state: &mut State, turn: u64) -> Option<Pending> {
        let staged: Vec<Staged> = state.outbox.drain(..).collect();
        (!staged.is_empty()).then(|| {
            let ids = steering_ids(&staged);
            self.append_locked(state, staged_events(turn, staged), ids)
        })
    }
}

/// A batch handed to the log under the state lock, with the typed messages it carries.
#[must_use = "a pending batch reports its failure only when settled"]
pub(super) struct Pending {
    pub(super) ack: LogAck,
    pub(super) unsent: Vec<String>,
}

impl Pending {
    /// Waits for the write; a failure reports the typed messages as unsent.
    pub(super) async fn settle(self, inner: &Inner) {
        if let Err(e) = self.ack.written().await {
            inner.report_unsent(self.unsent, &e);
        }
    }
}

/// The records of a step's end: the streamed text as one packed row, then `tail` events, from
/// seq `seq` on; also the events (for listeners).
pub(super) fn step_records(
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
