//! The answer of the OpenAI-compatible provider, pure: SSE `data:` payloads to
//! [`ModelEvent`]s ([`StreamDecoder`]), and the wire usage to dsh's counts ([`map_usage`]).
//!
//! Invariant: `[DONE]` ends the answer; a malformed event or an error event fails it with a
//! specific [`ModelError::Provider`]; usage is mapped to dsh's disjoint counts (`inputTokens`
//! excludes cache reads). Proof: the unit tests below.

use super::errors::failure;
use crate::agent::provider::{ModelError, ModelEvent, ModelOutput, Usage};
use serde_json::Value;

/// Maps the wire usage object to dsh's disjoint counts.
pub fn map_usage(usage: &Value) -> Option<Usage> {
    let prompt = usage.get("prompt_tokens")?.as_u64()?;
    let completion = usage
        .get("completion_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let cache_read = usage
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .or_else(|| usage.get("prompt_cache_hit_tokens").and_then(Value::as_u64));
    let reasoning = usage
        .pointer("/completion_tokens_details/reasoning_tokens")
        .and_then(Value::as_u64);
    Some(Usage {
        input_tokens: prompt.saturating_sub(cache_read.unwrap_or(0)),
        output_tokens: completion,
        cache_read_tokens: cache_read,
        reasoning_tokens: reasoning,
    })
}

/// Turns SSE `data:` payloads into events. Pure: no I/O.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    /// The answer so far: text, reasoning and usage.
    pub output: ModelOutput,
    /// `data: [DONE]` arrived; a stream that ends without it was cut off.
    pub done: bool,
    /// The last `choices[0].finish_reason` seen (e.g. `stop`, `length`).
    pub finish_reason: Option<String>,
}

impl StreamDecoder {
    /// Feeds one payload; returns the events it produced.
    pub fn feed(&mut self, payload: &str) -> Result<Vec<ModelEvent>, ModelError> {
        let payload = payload.trim();
        if payload == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        if payload.is_empty() {
            return Ok(Vec::new());
        }
        let chunk: Value = serde_json::from_str(payload).map_err(|e| {
            let start: String = payload.chars().take(120).collect();
            failure(
                "MALFORMED_RESPONSE",
                format!("the server sent a malformed event ({e}): {start}"),
            )
        })?;
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            return Err(failure(
                "SERVER",
                format!("the server reported an error mid-answer: {message}"),
            ));
        }
        let mut events = Vec::new();
        if let Some(choices) = chunk.get("choices").and_then(Value::as_array) {
            for choice in choices {
                let delta = &choice["delta"];
                // DeepSeek, vLLM and llama.cpp say `reasoning_content`; Ollama and OpenRouter
                // say `reasoning`.
                let reasoning = delta
                    .get("reasoning_content")
                    .or_else(|| delta.get("reasoning"))
                    .and_then(Value::as_str);
                if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                    self.output.reasoning.push_str(text);
                    events.push(ModelEvent::Reasoning(text.to_string()));
                }
                if let Some(text) = delta
                    .get("content")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    self.output.text.push_str(text);
                    events.push(ModelEvent::Text(text.to_string()));
                }
                if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                    self.finish_reason = Some(reason.to_string());
                }
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            if let Some(usage) = map_usage(usage) {
                self.output.usage = Some(usage);
                events.push(ModelEvent::Usage(usage));
            }
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_reasoning_text_usage_and_done() {
        let mut d = StreamDecoder::default();
        let events = d
            .feed(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":"Think"}}]}"#)
            .unwrap();
        assert_eq!(events, vec![ModelEvent::Reasoning("Think".into())]);
        let events = d
            .feed(r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)
            .unwrap();
        assert_eq!(events, vec![ModelEvent::Text("Hel".into())]);
        d.feed(r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#)
            .unwrap();
        let events = d
            .feed(r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":60},"completion_tokens_details":{"reasoning_tokens":3}}}"#)
            .unwrap();
        let usage = Usage {
            input_tokens: 40,
            output_tokens: 7,
            cache_read_tokens: Some(60),
            reasoning_tokens: Some(3),
        };
        assert_eq!(events, vec![ModelEvent::Usage(usage)]);
        assert_eq!(
            usage.to_json().to_string(),
            r#"{"inputTokens":40,"outputTokens":7,"cacheReadTokens":60,"reasoningTokens":3}"#
        );
        assert!(!d.done);
        d.feed("[DONE]").unwrap();
        assert!(d.done);
        assert_eq!(d.output.text, "Hello");
        assert_eq!(d.output.reasoning, "Think");
        assert_eq!(d.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn malformed_and_error_events_fail_clearly() {
        let mut d = StreamDecoder::default();
        let err = d
            .feed(r#"{"choices":[{"delta":{"content":"x"}"#)
            .unwrap_err();
        assert_eq!(err.failure().0, "MALFORMED_RESPONSE");
        assert!(err.to_string().contains("malformed event"), "{err}");
        let err = d.feed(r#"{"error":{"message":"overloaded"}}"#).unwrap_err();
        assert!(err.to_string().contains("overloaded"), "{err}");
    }
}
