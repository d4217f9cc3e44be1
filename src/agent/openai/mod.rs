//! The `openai-compatible` provider (SPEC §7): `POST {base_url}/chat/completions` with
//! `stream: true`, read as server-sent events. One implementation serves DeepSeek, OpenAI,
//! OpenRouter and local servers (Ollama, llama.cpp, vLLM); presets live in `super::config`.
//!
//! Three parts, the first two pure and unit-tested beside them:
//! - [`request_body`] (`request`) maps the model-visible conversation to chat messages: our short system
//!   prompt first; user, steering, checkpoint and context messages (the session-reference
//!   snapshot included) as separate `user` messages in log order; assistant text as
//!   `assistant`. Reasoning is never sent back. We declare no tools, so a log written by dsh
//!   that holds tool calls and tool results cannot be replayed as `tool_calls`/`tool` messages
//!   (servers reject tool messages without matching tool definitions): tool-call and
//!   tool-result blocks are dropped, and a message left without text is skipped. The model
//!   still sees every prompt and every answer text.
//! - [`StreamDecoder`] (`stream`) turns SSE `data:` payloads into [`ModelEvent`]s; `[DONE]` ends the
//!   answer, usage is mapped to dsh's disjoint counts (`inputTokens` excludes cache reads).
//! - [`OpenAiProvider`] (here) does the HTTP, its failures named by `errors` (reqwest, rustls); SSE framing is `super::sse`, linear in
//!   the bytes received whatever their split, with every line and event bounded.
//!   Invariant: every failure ends the request with a specific [`ModelError::Provider`]
//!   (status, transport, TLS, timeouts, a stream cut short or malformed, a line or answer over
//!   its limit, a 200 that is not an event stream, a redirect), never a hang: every wait is
//!   bounded by the connect or idle timeout, an error body by its own deadline and size, and
//!   the cancellation token wins over any bytes the server keeps sending (the stream loop
//!   checks it first, before each chunk); 429/5xx retries are bounded by `max_retries`, and a
//!   `Retry-After` longer than we wait fails the turn at once, naming the wait. Redirects are
//!   never followed. The API key only ever goes into the
//!   `Authorization` header (marked sensitive) and is redacted from any server text we show.
//!
//! Proof: the unit tests of each file; `tests/agent/provider_openai.rs` runs the provider
//! against a loopback HTTP server for every failure case, retries and cancellation.

mod errors;
mod request;
mod stream;

pub use errors::{
    human_wait, is_retryable, retry_after, server_message, status_error, ClientError,
};
pub use request::{chat_messages, header_config, request_body, SYSTEM_PROMPT};
pub use stream::{map_usage, StreamDecoder};

use super::config::ProviderSettings;
use super::provider::{ModelError, ModelEvent, ModelOutput, ModelProvider, ModelRequest};
use super::sse::{SseError, SseParser};
use crate::session::BoxFuture;
use errors::{
    chain, failure, not_an_event_stream, not_streaming_error, redirect_error, transport_error,
    wait_too_long, MAX_RETRY_AFTER,
};
use futures_util::StreamExt;
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// The longest backoff between retries when the server names no wait.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest SSE line, and the most `data` one event may carry: far above any real event (a
/// chat-completion chunk is well under 1 KiB), and small enough that a line that never ends is
/// refused within a second.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// The most of an error body we read.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// The longest we read an error body, in all (a server dripping it under the idle timeout
/// cannot hold the turn).
pub const ERROR_BODY_DEADLINE: Duration = Duration::from_secs(3);

/// The OpenAI-compatible provider.
pub struct OpenAiProvider {
    settings: ProviderSettings,
    client: reqwest::Client,
}

impl OpenAiProvider {
    /// A provider for `settings`; the error says why the HTTP client could not be built.
    pub fn new(settings: ProviderSettings) -> Result<OpenAiProvider, ClientError> {
        // reqwest is built without a crypto provider: ring's becomes the process default unless
        // the host installed one already (then that one stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            // A redirect is reported, never followed: a 307/308 would re-send the whole
            // conversation (snapshots included) to wherever it points.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("dsh-refs/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|source| ClientError {
                reason: chain(&source),
                source,
            })?;
        Ok(OpenAiProvider { settings, client })
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.settings.base_url)
    }

    /// One attempt's response headers, within the idle timeout.
    async fn send(
        &self,
        body: &Value,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ModelError> {
        let mut request = self.client.post(self.url()).json(body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key.expose());
        }
        let idle = self.settings.idle_timeout + self.settings.connect_timeout;
        tokio::select! {
            _ = cancel.cancelled() => Err(ModelError::Cancelled),
            sent = tokio::time::timeout(idle, request.send()) => match sent {
                Err(_) => Err(failure(
                    "TIMEOUT",
                    format!(
                        "{} sent no response for {:.1}s",
                        self.settings.base_url,
                        idle.as_secs_f64()
                    ),
                )),
                Ok(Err(e)) => Err(transport_error(&self.settings, &e)),
                Ok(Ok(response)) => Ok(response),
            },
        }
    }

    /// Reads an error body: at most [`MAX_ERROR_BODY`] bytes, for at most
    /// [`ERROR_BODY_DEADLINE`] in all (a body dripped under the idle timeout cannot hold the
    /// turn), and no longer than the idle timeout between two chunks.
    async fn error_body(&self, response: reqwest::Response, cancel: &CancellationToken) -> String {
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        let deadline = tokio::time::Instant::now() + ERROR_BODY_DEADLINE;
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep_until(deadline) => break,
                next = tokio::time::timeout(self.settings.idle_timeout, stream.next()) => next,
            };
            match next {
                Ok(Some(Ok(bytes))) => {
                    body.extend_from_slice(&bytes);
                    if body.len() >= MAX_ERROR_BODY {
                        body.truncate(MAX_ERROR_BODY);
                        break;
                    }
                }
                _ => break,
            }
        }
        String::from_utf8_lossy(&body).into_owned()
    }

    async fn run(
        &self,
        request: ModelRequest,
        events: UnboundedSender<ModelEvent>,
        cancel: CancellationToken,
    ) -> Result<ModelOutput, ModelError> {
        let body = request_body(&self.settings, &request.messages);
        let mut retries = 0;
        let response = loop {
            let response = self.send(&body, &cancel).await?;
            let status = response.status().as_u16();
            if (300..=399).contains(&status) {
                return Err(redirect_error(&self.settings, status, response.headers()));
            }
            if response.status().is_success() {
                if let Some(kind) = not_an_event_stream(response.headers()) {
                    let text = self.error_body(response, &cancel).await;
                    if cancel.is_cancelled() {
                        return Err(ModelError::Cancelled);
                    }
                    return Err(not_streaming_error(&self.settings, status, &kind, &text));
                }
                break response;
            }
            let wait = retry_after(response.headers());
            let text = self.error_body(response, &cancel).await;
            if cancel.is_cancelled() {
                return Err(ModelError::Cancelled);
            }
            if !is_retryable(status) || retries >= self.settings.max_retries {
                return Err(status_error(&self.settings, status, &text, retries));
            }
            // A server that asks for a longer wait than we are willing to sit through gets
            // its error shown now, with the wait it asked for.
            if let Some(seconds) = wait.filter(|w| *w > MAX_RETRY_AFTER.as_secs_f64()) {
                return Err(wait_too_long(
                    status_error(&self.settings, status, &text, retries),
                    seconds,
                ));
            }
            let backoff = self
                .settings
                .retry_base
                .saturating_mul(2u32.saturating_pow(retries))
                .min(MAX_BACKOFF);
            let delay = wait.map(Duration::from_secs_f64).unwrap_or(backoff);
            retries += 1;
            let _ = events.send(ModelEvent::Retrying {
                attempt: retries,
                max: self.settings.max_retries,
                delay,
                reason: format!("HTTP {status}"),
            });
            tracing::info!(
                status,
                retry = retries,
                delay_ms = delay.as_millis() as u64,
                "model request retry"
            );
            tokio::select! {
                _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                _ = tokio::time::sleep(delay) => {}
            }
        };
        self.read_stream(response, events, cancel).await
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        events: UnboundedSender<ModelEvent>,
        cancel: CancellationToken,
    ) -> Result<ModelOutput, ModelError> {
        let url = &self.settings.base_url;
        let limit = self.settings.max_stream_bytes;
        let idle = self.settings.idle_timeout;
        let mut body = response.bytes_stream();
        let mut parser = SseParser::new(MAX_LINE_BYTES);
        let mut decoder = StreamDecoder::default();
        let mut payloads = Vec::new();
        let mut total = 0u64;
        // The idle timeout counts bytes (keep-alive comments included), not whole events.
        let mut last_byte = Instant::now();
        loop {
            // Cancellation first, whatever the server sends: one chunk is handled per turn of
            // this loop, in time linear in its size, so a cancel waits at most for one chunk.
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                next = body.next() => next,
                _ = tokio::time::sleep_until((last_byte + idle).into()) => {
                    return Err(failure(
                        "TIMEOUT",
                        format!(
                            "the stream from {url} went silent for {:.1}s (idle timeout)",
                            idle.as_secs_f64()
                        ),
                    ))
                }
            };
            let bytes = match next {
                None => {
                    return Err(if parser.in_event() {
                        failure(
                            "STREAM_CLOSED",
                            "the stream ended in the middle of an event: the answer is incomplete",
                        )
                    } else {
                        failure(
                            "STREAM_CLOSED",
                            "the stream ended before [DONE]: the answer may be incomplete",
                        )
                    });
                }
                Some(Err(e)) => {
                    return Err(failure(
                        "TRANSPORT",
                        format!("the connection broke mid-answer: {}", chain(&e)),
                    ))
                }
                Some(Ok(bytes)) => bytes,
            };
            if bytes.is_empty() {
                continue;
            }
            last_byte = Instant::now();
            total += bytes.len() as u64;
            if total > limit {
                return Err(failure(
                    "TOO_LARGE",
                    format!("the answer from {url} exceeded {limit} bytes; the rest was not read"),
                ));
            }
            parser.push(&bytes, &mut payloads).map_err(|e| match e {
                SseError::LineTooLong(n) => failure(
                    "TOO_LARGE",
                    format!(
                        "{url} sent an event line longer than {n} bytes without ending it; \
                         the rest was not read"
                    ),
                ),
                SseError::EventTooLarge(n) => failure(
                    "TOO_LARGE",
                    format!("{url} sent an event of more than {n} bytes; the rest was not read"),
                ),
                SseError::NotUtf8 => failure(
                    "MALFORMED_RESPONSE",
                    "the server sent an unreadable event stream: an event is not UTF-8",
                ),
            })?;
            for payload in payloads.drain(..) {
                for model_event in decoder.feed(&payload)? {
                    let _ = events.send(model_event);
                }
                if decoder.done {
                    break;
                }
            }
            if decoder.done {
                break;
            }
        }
        if decoder.output.text.is_empty() && decoder.output.reasoning.is_empty() {
            return Err(failure(
                "EMPTY_RESPONSE",
                "the model returned a completed response with no content",
            ));
        }
        Ok(decoder.output)
    }
}

impl ModelProvider for OpenAiProvider {
    fn identity(&self) -> (String, String) {
        (self.settings.provider.clone(), self.settings.model.clone())
    }

    fn request_config(&self) -> Option<Value> {
        Some(header_config(&self.settings))
    }

    fn respond<'a>(
        &'a self,
        request: ModelRequest,
        deltas: UnboundedSender<String>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<String, ModelError>> {
        Box::pin(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let run = self.run(request, tx, cancel);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    Some(event) = rx.recv() => {
                        if let ModelEvent::Text(text) = event {
                            let _ = deltas.send(text);
                        }
                    }
                    output = &mut run => {
                        while let Ok(event) = rx.try_recv() {
                            if let ModelEvent::Text(text) = event {
                                let _ = deltas.send(text);
                            }
                        }
                        return output.map(|o| o.text);
                    }
                }
            }
        })
    }

    fn stream<'a>(
        &'a self,
        request: ModelRequest,
        events: UnboundedSender<ModelEvent>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ModelOutput, ModelError>> {
        Box::pin(self.run(request, events, cancel))
    }
}

/// The settings the unit tests of this provider's files share.
#[cfg(test)]
pub(crate) fn test_settings() -> ProviderSettings {
    ProviderSettings {
        provider: "deepseek".into(),
        base_url: "http://127.0.0.1:9".into(),
        model: "deepseek-v4-flash".into(),
        api_key_env: Some("DEEPSEEK_API_KEY".into()),
        api_key: Some(super::config::ApiKey::new("sk-test-secret")),
        reasoning_effort: Some("high".into()),
        max_tokens: Some(512),
        connect_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        max_retries: 2,
        retry_base: Duration::from_millis(10),
        max_stream_bytes: crate::agent::config::MAX_STREAM_BYTES,
    }
}
