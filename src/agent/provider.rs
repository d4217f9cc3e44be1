//! Model providers. The runtime needs a stream of events (text, reasoning, usage, retries) for
//! a list of messages, and the provider's identity for the log.
//!
//! The offline model is the default: it needs no network and answers by describing what it
//! received, which makes the reference machinery visible (and testable) end to end. A provider
//! that only knows text implements [`ModelProvider::respond`]; [`ModelProvider::stream`] wraps
//! it. The OpenAI-compatible provider (`super::openai`) implements `stream` itself.

use crate::session::format::RecordedReference;
use crate::session::{BoxFuture, Message, MessageSource};
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// What the model is asked to continue: the model-visible conversation, oldest first.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The session whose conversation this is.
    pub session_id: String,
    /// The model-visible surface (SPEC §1.5), oldest first; the provider maps it to chat messages.
    pub messages: Vec<Message>,
}

/// Why a model request ended without an answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The request was cancelled (Esc or shutdown); recorded as `ABORTED`.
    #[error("model request cancelled")]
    Cancelled,
    /// The task running the model request stopped without an answer (it panicked).
    #[error("model failed: the model request task stopped: {0}")]
    TaskStopped(String),
    /// A provider failure with a stable code (`AUTH`, `NOT_FOUND`, `BAD_REQUEST`, `RATE_LIMIT`,
    /// `SERVER`, `TRANSPORT`, `TLS`, `TIMEOUT`, `STREAM_CLOSED`, `MALFORMED_RESPONSE`, …), as
    /// dsh records it in `turn/end.reason.failure`.
    #[error("{message}")]
    Provider {
        /// The stable code, e.g. `RATE_LIMIT`.
        code: String,
        /// What happened, for the user (the key never appears in it).
        message: String,
    },
}

impl ModelError {
    /// `(code, message)` for `turn/end {kind:"error", failure}`.
    pub fn failure(&self) -> (String, String) {
        match self {
            ModelError::Cancelled => ("ABORTED".into(), self.to_string()),
            ModelError::TaskStopped(_) => ("MODEL".into(), self.to_string()),
            ModelError::Provider { code, message } => (code.clone(), message.clone()),
        }
    }
}

/// Token counts as dsh logs them: disjoint (`inputTokens` excludes cache reads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// `inputTokens`: prompt tokens not read from the cache.
    pub input_tokens: u64,
    /// `outputTokens`: completion tokens, reasoning included.
    pub output_tokens: u64,
    /// `cacheReadTokens`: prompt tokens served from the provider's cache; `None` when not reported.
    pub cache_read_tokens: Option<u64>,
    /// `reasoningTokens`: the part of the output spent reasoning; `None` when not reported.
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// The `usage` object of `assistant/message`, keys in dsh's order.
    pub fn to_json(&self) -> Value {
        let mut map = serde_json::Map::new();
        map.insert("inputTokens".into(), self.input_tokens.into());
        map.insert("outputTokens".into(), self.output_tokens.into());
        if let Some(n) = self.cache_read_tokens {
            map.insert("cacheReadTokens".into(), n.into());
        }
        if let Some(n) = self.reasoning_tokens {
            map.insert("reasoningTokens".into(), n.into());
        }
        Value::Object(map)
    }

    /// Tokens of context the request carried (fresh input plus cache reads).
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens.unwrap_or(0)
    }
}

/// What a provider reports while it answers.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A piece of the answer's text, in order.
    Text(String),
    /// A piece of reasoning (`delta.reasoning_content`): shown and logged, never sent back.
    Reasoning(String),
    /// The request's token usage (once, near the end of the stream).
    Usage(Usage),
    /// A retryable failure; the next attempt starts after `delay`.
    Retrying {
        /// This retry's number, counting from 1.
        attempt: u32,
        /// The most retries allowed (the provider settings' `max_retries`).
        max: u32,
        /// The wait before the next attempt: the server's `Retry-After`, else the backoff.
        delay: Duration,
        /// What failed, e.g. `HTTP 503`.
        reason: String,
    },
}

/// A completed answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelOutput {
    /// The whole answer text.
    pub text: String,
    /// The whole reasoning text; empty when the model gave none.
    pub reasoning: String,
    /// Token usage, when the provider reported it.
    pub usage: Option<Usage>,
}

/// A model the runtime can ask for an answer. Implement [`ModelProvider::respond`] for text only,
/// or [`ModelProvider::stream`] for reasoning, usage and retries too; either resolves with
/// [`ModelError::Cancelled`] once `cancel` fires.
pub trait ModelProvider: Send + Sync {
    /// `(provider, model)` as recorded in assistant message sources.
    fn identity(&self) -> (String, String);

    /// `request/header.header.config` (`{provider, model, reasoningEffort?, maxTokens?}`), or
    /// `None` for a model that dsh could not call (the offline one logs no header).
    fn request_config(&self) -> Option<Value> {
        None
    }

    /// Streams the answer as text deltas into `deltas`; resolves with the whole text.
    fn respond<'a>(
        &'a self,
        request: ModelRequest,
        deltas: UnboundedSender<String>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<String, ModelError>>;

    /// Streams text, reasoning, usage and retry events; resolves with the whole answer. The
    /// default forwards [`ModelProvider::respond`]'s text deltas.
    fn stream<'a>(
        &'a self,
        request: ModelRequest,
        events: UnboundedSender<ModelEvent>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ModelOutput, ModelError>> {
        Box::pin(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            let answer = self.respond(request, tx, cancel);
            tokio::pin!(answer);
            loop {
                tokio::select! {
                    Some(delta) = rx.recv() => {
                        let _ = events.send(ModelEvent::Text(delta));
                    }
                    done = &mut answer => {
                        while let Ok(delta) = rx.try_recv() {
                            let _ = events.send(ModelEvent::Text(delta));
                        }
                        return done.map(|text| ModelOutput {
                            text,
                            ..ModelOutput::default()
                        });
                    }
                }
            }
        })
    }
}

/// Describes, in plain words, what it received; streamed word by word.
#[derive(Debug, Clone)]
pub struct OfflineModel {
    /// The pause between streamed words (`--offline-delay-ms`); zero streams the answer at once.
    pub delay: Duration,
}

impl OfflineModel {
    /// An offline model that pauses `delay` between words.
    pub fn new(delay: Duration) -> Self {
        OfflineModel { delay }
    }
}

impl ModelProvider for OfflineModel {
    fn identity(&self) -> (String, String) {
        ("offline".into(), "describe".into())
    }

    fn respond<'a>(
        &'a self,
        request: ModelRequest,
        deltas: UnboundedSender<String>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<String, ModelError>> {
        Box::pin(async move {
            let answer = describe(&request.messages);
            let mut sent = String::new();
            for word in answer.split_inclusive(' ') {
                if cancel.is_cancelled() {
                    return Err(ModelError::Cancelled);
                }
                if !self.delay.is_zero() {
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                        _ = tokio::time::sleep(self.delay) => {}
                    }
                }
                sent.push_str(word);
                let _ = deltas.send(word.to_string());
            }
            Ok(sent)
        })
    }
}

/// The offline model's answer for a conversation.
pub fn describe(messages: &[Message]) -> String {
    let mut direct = 0;
    let mut assistant = 0;
    let mut contexts = 0;
    let mut references = Vec::new();
    for message in messages {
        match &message.source {
            MessageSource::User { .. } => direct += 1,
            MessageSource::Model { .. } => assistant += 1,
            MessageSource::SessionReference {
                references: refs, ..
            } => {
                contexts += 1;
                references.extend(describe_references(refs));
            }
            _ if message.role.as_deref() == Some("assistant") => assistant += 1,
            _ => contexts += 1,
        }
    }
    let mut out = format!(
        "Offline model here. I received {} message{}: {direct} from you, {assistant} from me, {contexts} context{}.",
        messages.len(),
        plural(messages.len()),
        plural(contexts),
    );
    if references.is_empty() {
        out.push_str(" No sessions were referenced.");
    } else {
        out.push_str(&format!(
            " Referenced session{}: {}.",
            plural(references.len()),
            references.join("; ")
        ));
    }
    let last_direct = messages
        .iter()
        .rev()
        .find(|m| m.source.is_direct_user())
        .map(|m| m.text());
    if let Some(text) = last_direct {
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let clipped: String = text.chars().take(200).collect();
        let ellipsis = if clipped.len() < text.len() {
            "…"
        } else {
            ""
        };
        out.push_str(&format!(" Your last message: \"{clipped}{ellipsis}\""));
    }
    out
}

fn describe_references(refs: &Value) -> Vec<String> {
    let Some(items) = RecordedReference::read_all(refs) else {
        return vec!["(malformed reference metadata)".into()];
    };
    items
        .iter()
        .map(|r| {
            let label = r.label.as_deref().unwrap_or("?");
            let id = r.session_id.as_deref().unwrap_or("?");
            let retained = r.retained_messages.unwrap_or(0);
            let original = r.original_messages.unwrap_or(0);
            let omitted = r.omitted_messages.unwrap_or(0);
            let name = if label == id {
                format!("\"{label}\"")
            } else {
                format!("\"{label}\" ({id})")
            };
            let mut text = format!("{name} with {retained} of {original} messages retained");
            if omitted > 0 {
                text.push_str(&format!(", {omitted} omitted"));
            }
            if r.truncated == Some(true) {
                text.push_str(", truncated");
            }
            text
        })
        .collect()
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::ContentBlock;

    fn user(text: &str) -> Message {
        Message::new(
            "user",
            vec![ContentBlock::text(text)],
            MessageSource::user(),
            "u".into(),
        )
    }

    #[test]
    fn describes_references_and_last_prompt() {
        let context = Message::new(
            "user",
            vec![ContentBlock::text("## Referenced sessions")],
            MessageSource::SessionReference {
                version: 1.into(),
                references: serde_json::json!([{"sessionId":"s1","label":"Fix the parser","retainedMessages":3,"originalMessages":5,"omittedMessages":2,"truncated":true}]),
                extra: Default::default(),
            },
            "c".into(),
        );
        let text = describe(&[context, user("what did  we\ndecide?")]);
        assert_eq!(
            text,
            "Offline model here. I received 2 messages: 1 from you, 0 from me, 1 context. Referenced session: \"Fix the parser\" (s1) with 3 of 5 messages retained, 2 omitted, truncated. Your last message: \"what did we decide?\""
        );
        assert!(describe(&[user("hi")]).contains("No sessions were referenced."));
    }

    #[tokio::test]
    async fn streams_word_by_word_and_stops_on_cancel() {
        let model = OfflineModel::new(Duration::ZERO);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let request = ModelRequest {
            session_id: "s".into(),
            messages: vec![user("hello there")],
        };
        let answer = model
            .respond(request.clone(), tx, CancellationToken::new())
            .await
            .unwrap();
        let mut streamed = String::new();
        while let Ok(delta) = rx.try_recv() {
            streamed.push_str(&delta);
        }
        assert_eq!(streamed, answer);
        let cancel = CancellationToken::new();
        cancel.cancel();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        assert_eq!(
            model.respond(request, tx, cancel).await,
            Err(ModelError::Cancelled)
        );
    }
}
