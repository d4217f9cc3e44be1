//! One step of a turn: a model request streamed, then its answer logged as dsh logs it.
//!
//! Purpose: the request (the model-visible conversation and, when dsh would, a
//! `request/header` first), the stream taken in with arrival times ([`Streamed`]), and the
//! step's end: the streamed reasoning and text as packed chunk rows, one `assistant/message`
//! and `step/end` (SPEC §7).
//!
//! Invariant: a step that fails or is cancelled after text arrived still logs that partial
//! answer, marked `"interrupted": true`; every streamed delta is announced to the listeners as
//! it arrives, and the stream's events that raced the response's end are taken in before the
//! step ends. Proof: `tests/agent/provider_openai.rs` (the agent half) and
//! `tests/agent/runtime.rs`.

use super::{new_message_id, AgentError, AgentEvent, Inner};
use crate::agent::provider::{ModelError, ModelEvent, ModelOutput, ModelRequest, Usage};
use crate::session::clock::now_ms;
use crate::session::{ContentBlock, EventData, Message, MessageSource, NewEvent};
use crate::sync::LockExt;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How a step's model request ended.
pub(super) enum StepEnd {
    /// The model answered; its answer is logged.
    Answered,
    /// The request failed or was cancelled; what streamed before is logged as interrupted.
    Failed(ModelError),
}

/// Runs step `step` of turn `turn`: `step/start`, the request (after a `request/header` when
/// dsh would log one), the stream, then the step's end as one append.
pub(super) async fn run_step(
    inner: &Arc<Inner>,
    turn: u64,
    step: u64,
    cancel: &CancellationToken,
) -> StepEnd {
    let _ = inner
        .append(vec![NewEvent::new(EventData::StepStart {
            turn,
            step,
            extra: Map::new(),
        })])
        .await;
    log_request_header(inner).await;
    let (streamed, result) = stream(inner, cancel).await;
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
            StepEnd::Answered
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
            StepEnd::Failed(error)
        }
    }
}

/// The model request over the current conversation, streamed: every event is taken in (and
/// announced) as it arrives, those that raced the response's end included.
async fn stream(
    inner: &Arc<Inner>,
    cancel: &CancellationToken,
) -> (Streamed, Result<ModelOutput, ModelError>) {
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
    (streamed, result)
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

/// What one step streamed, with arrival times, for the packed chunk rows and a partial answer.
#[derive(Default)]
pub(super) struct Streamed {
    pub(super) text: Vec<(i64, String)>,
    pub(super) reasoning: Vec<(i64, String)>,
    pub(super) usage: Option<Usage>,
}

impl Streamed {
    pub(super) fn take(&mut self, inner: &Inner, event: ModelEvent) {
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

    pub(super) fn is_empty(&self) -> bool {
        self.text.is_empty() && self.reasoning.is_empty()
    }

    /// The partial answer so far.
    pub(super) fn output(&self) -> ModelOutput {
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
        let mut state = inner.state.locked();
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
