//! Admission state: the prompt queue, the outbox and the window, and the one drain of the
//! outbox.
//!
//! Purpose: what the agent decides under its state lock — is the window open, what is queued,
//! what is staged — and how the staged messages become log events, in one room. The outbox is
//! drained at three boundaries (before a model request, at a turn's stop, when a turn is
//! cancelled or fails), all through [`Inner::drain_outbox`](super::Inner::drain_outbox).
//!
//! Invariant: the outbox drains whole and in FIFO order, as one batch handed to the log under
//! the state lock that took it out (so the log order is the staging order, and a message staged
//! after the drain waits for the next boundary); the steering messages of a batch are the ones
//! reported unsent if it fails. Proof: `tests/agent/runtime.rs` (staging order, boundaries,
//! steering earning another step) and `tests/agent/write_failures.rs` (unsent reports).

use super::AgentStatus;
use crate::session::{EventData, Message, NewEvent};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub(super) enum Staged {
    Steering(Message),
    Context(Message),
}

pub(super) struct QueuedPrompt {
    pub(super) message: Message,
    pub(super) cancel: CancellationToken,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) queue: VecDeque<QueuedPrompt>,
    pub(super) outbox: VecDeque<Staged>,
    pub(super) window_open: bool,
    pub(super) turn_open: bool,
    /// Cancels the prompt under admission or the open turn.
    pub(super) current: Option<CancellationToken>,
    pub(super) turns: u64,
    pub(super) titled: bool,
    pub(super) stopped: bool,
    /// The config of the last `request/header` in the log, if any.
    pub(super) last_header: Option<Value>,
    /// A `request/header` was logged by this process.
    pub(super) header_logged: bool,
}

pub(super) fn status_of(state: &State) -> AgentStatus {
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

pub(super) fn context_event(context: Message) -> NewEvent {
    NewEvent::new(EventData::UserMessage(context))
}

pub(super) fn steering_event(turn: u64, message: Message) -> NewEvent {
    NewEvent::new(EventData::SteeringMessage {
        turn: turn.into(),
        message,
        extra: Map::new(),
    })
}

/// The ids of the typed (steering) messages among `staged`.
pub(super) fn steering_ids(staged: &[Staged]) -> Vec<String> {
    staged
        .iter()
        .filter_map(|s| match s {
            Staged::Steering(m) => Some(m.id.clone()),
            Staged::Context(_) => None,
        })
        .collect()
}

pub(super) fn staged_events(turn: u64, staged: impl IntoIterator<Item = Staged>) -> Vec<NewEvent> {
    staged
        .into_iter()
        .map(|s| match s {
            Staged::Context(m) => context_event(m),
            Staged::Steering(m) => steering_event(turn, m),
        })
        .collect()
}
