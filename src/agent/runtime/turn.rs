//! The turn loop: a claimed prompt through admission, its turn's steps, and the `turn/end`
//! that says how the turn ended.
//!
//! Purpose: one task owns the loop ([`run_loop`]); a prompt goes through three phases —
//! [`admit`] (the `prompt-submit` listeners decide), [`begin_turn`] (`turn/start`, the contexts
//! and the prompt as one batch, then the fallback title), [`run_turn`] (steps until the model
//! stops with nothing staged) — and [`TurnOutcome`] is the typed `reason` of its `turn/end`.
//!
//! Invariant: the window opens when a prompt is claimed and closes in the same critical section
//! that saw no steering left (or on cancel, failure or refusal); whatever was staged when it
//! closes is still logged — steering staged while admission refused the prompt becomes followups
//! ([`close_without_turn`]) — so no message is lost. A turn whose first batch cannot be written
//! gives back its number and title. Proof: `tests/agent/runtime.rs` (window, staging, steering,
//! cancellation, blocked prompts), `tests/agent/write_failures.rs`, and `turn::tests` (the
//! outcome's JSON, byte for byte as it was built with `json!`).

use super::log::Pending;
use super::state::{context_event, status_of, QueuedPrompt, Staged};
use super::step::{run_step, StepEnd};
use super::{AgentError, AgentEvent, Inner};
use crate::agent::hooks::{ContextWrapper, HookError, PromptDecision};
use crate::agent::provider::ModelError;
use crate::session::{EventData, Message, NewEvent};
use crate::sync::LockExt;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// How a turn ended: the `reason` of its `turn/end` (SPEC §4), `{"kind":"completed"}`,
/// `{"kind":"aborted"}` or `{"kind":"error","step":…,"failure":{"message":…,"code":…}}` (keys
/// in that order: the crate's JSON keeps insertion order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(super) enum TurnOutcome {
    /// The model stopped with nothing staged.
    Completed,
    /// Cancelled (Esc, or the agent shutting down).
    Aborted,
    /// A model request failed; the turn ended at that step.
    Error {
        /// The step whose request failed.
        step: u64,
        /// What the provider said.
        failure: Failure,
    },
}

/// The failure of a model request as a `turn/end` carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Failure {
    message: String,
    code: String,
}

impl TurnOutcome {
    /// The outcome of a step whose request failed with `error`.
    fn failed(step: u64, error: &ModelError) -> TurnOutcome {
        let (code, message) = error.failure();
        TurnOutcome::Error {
            step,
            failure: Failure { message, code },
        }
    }

    /// As the `reason` of `turn/end`.
    fn into_value(self) -> Value {
        // Strings and an integer: serializing cannot fail (no map keys, no floats).
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The turn loop: claims queued prompts one at a time until the agent stops.
pub(super) async fn run_loop(inner: Arc<Inner>) {
    loop {
        let claimed = {
            let mut state = inner.state.locked();
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
        let mut state = inner.state.locked();
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

/// One claimed prompt: admission, then its turn (if admitted and written).
async fn admit_and_run(inner: &Arc<Inner>, prompt: QueuedPrompt) {
    let QueuedPrompt {
        mut message,
        cancel,
    } = prompt;
    let Some(contexts) = admit(inner, &mut message, &cancel).await else {
        return;
    };
    let Some(turn) = begin_turn(inner, message, contexts).await else {
        return;
    };
    inner.emit_status();
    let outcome = run_turn(inner, turn, &cancel).await;
    let _ = inner
        .append(vec![NewEvent::new(EventData::TurnEnd {
            turn,
            reason: outcome.into_value(),
            extra: Map::new(),
        })])
        .await;
}

/// Runs the `prompt-submit` listeners on `message` (which they may rewrite); the additional
/// contexts when it is allowed, `None` (the window closed, the refusal announced) when not.
async fn admit(
    inner: &Arc<Inner>,
    message: &mut Message,
    cancel: &CancellationToken,
) -> Option<Vec<Message>> {
    let decision = inner.hooks.run(&inner.info, message, cancel).await;
    inner.hooks.release_bound(&message.id);
    let decision = match decision {
        Ok(_) if cancel.is_cancelled() => Err(HookError::Cancelled),
        other => other,
    };
    let reason = match decision {
        Ok(PromptDecision::Allow {
            content,
            additional_contexts,
        }) => {
            if let Some(content) = content {
                message.content = content;
            }
            return Some(additional_contexts);
        }
        Ok(PromptDecision::Block { reason }) => reason,
        Err(error) => error.to_string(),
    };
    close_without_turn(inner).await;
    inner.emit(AgentEvent::PromptBlocked {
        message_id: message.id.clone(),
        reason,
    });
    None
}

/// The turn begins: `turn/start`, the contexts, then the prompt, as one batch; then the
/// fallback title if the session has none. Its number follows every turn in the log, another
/// writer's included. `None` when the batch could not be written (reported, nothing of the
/// turn logged, its number and title free again).
async fn begin_turn(inner: &Arc<Inner>, message: Message, contexts: Vec<Message>) -> Option<u64> {
    inner.refresh_log().await;
    let (turn, title) = {
        let mut state = inner.state.locked();
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
                let mut state = inner.state.locked();
                state.turns -= 1;
                state.titled &= title.is_none();
                state.turn_open = false;
            }
            inner.report_unsent(vec![message_id], &e);
            close_without_turn(inner).await;
            return None;
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
    Some(turn)
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
    let mut state = inner.state.locked();
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

/// Runs steps until the model stops with nothing staged; returns how the turn ended.
async fn run_turn(inner: &Arc<Inner>, turn: u64, cancel: &CancellationToken) -> TurnOutcome {
    let mut step = 0;
    loop {
        // Safe boundary: before each model request the outbox drains, in FIFO order.
        let pending = {
            let mut state = inner.state.locked();
            let pending = inner.drain_outbox(&mut state, turn);
            pending.map(|pending| (pending, status_of(&state)))
        };
        if let Some((pending, status)) = pending {
            pending.settle(inner).await;
            inner.emit(AgentEvent::Status(status));
        }
        if cancel.is_cancelled() {
            return abort(inner, turn).await;
        }
        step += 1;
        if let StepEnd::Failed(error) = run_step(inner, turn, step, cancel).await {
            if error == ModelError::Cancelled {
                return abort(inner, turn).await;
            }
            let outcome = TurnOutcome::failed(step, &error);
            inner.emit(AgentEvent::Error(AgentError::Model(error)));
            close_turn(inner, turn).await;
            return outcome;
        }
        if let Some(outcome) = stop(inner, turn, cancel).await {
            return outcome;
        }
    }
}

/// The model stopped: staged steering earns another step (`None`); otherwise the window closes
/// before `turn/end`, in the same critical section that saw no steering left, and what was
/// staged (contexts) is logged.
async fn stop(inner: &Arc<Inner>, turn: u64, cancel: &CancellationToken) -> Option<TurnOutcome> {
    let pending = {
        let mut state = inner.state.locked();
        if state
            .outbox
            .iter()
            .any(|s| matches!(s, Staged::Steering(_)))
            && !cancel.is_cancelled()
        {
            return None;
        }
        state.window_open = false;
        inner.drain_outbox(&mut state, turn)
    };
    if let Some(pending) = pending {
        pending.settle(inner).await;
    }
    inner.emit_status();
    Some(if cancel.is_cancelled() {
        TurnOutcome::Aborted
    } else {
        TurnOutcome::Completed
    })
}

/// Cancelled: the window closes, and whatever was staged is still logged (nothing is lost).
async fn abort(inner: &Arc<Inner>, turn: u64) -> TurnOutcome {
    close_turn(inner, turn).await;
    TurnOutcome::Aborted
}

/// The window closes and the outbox drains (a cancelled or failed turn).
async fn close_turn(inner: &Arc<Inner>, turn: u64) {
    let pending = {
        let mut state = inner.state.locked();
        state.window_open = false;
        inner.drain_outbox(&mut state, turn)
    };
    if let Some(pending) = pending {
        pending.settle(inner).await;
    }
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

#[cfg(test)]
mod tests {
    use super::{Failure, TurnOutcome};
    use serde_json::json;

    /// The typed outcome serializes to the bytes the `json!` literals it replaced produced.
    #[test]
    fn the_outcome_is_the_json_it_replaced() {
        let cases = [
            (TurnOutcome::Completed, json!({"kind": "completed"})),
            (TurnOutcome::Aborted, json!({"kind": "aborted"})),
            (
                TurnOutcome::Error {
                    step: 3,
                    failure: Failure {
                        message: "rate limited \"x\"".into(),
                        code: "HTTP_429".into(),
                    },
                },
                json!({"kind": "error", "step": 3u64, "failure": {"message": "rate limited \"x\"", "code": "HTTP_429"}}),
            ),
        ];
        for (outcome, old) in cases {
            let new = outcome.into_value();
            assert_eq!(new.to_string(), old.to_string());
            assert_eq!(new, old);
        }
    }
}
