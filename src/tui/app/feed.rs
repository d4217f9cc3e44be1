//! What the agent reports, shown: logged events become transcript items (a resumed log's
//! history too), deltas stream into the open answer, status changes move the status line.

use super::App;
use crate::agent::AgentEvent;
use crate::session::{Event, Record};
use crate::tui::transcript::NoticeLevel;
use std::time::Instant;

impl App {
    /// Shows what a resumed log already holds, shadowed messages included.
    pub fn show_history(&mut self, records: &[Record]) {
        let id = self.agent.info().session_id.clone();
        for record in records {
            if let Record::Event(event) = record {
                self.show_event(&id, event);
                // A turn that failed says so again, as it did while it ran.
                if let Some(failure) = turn_failure(event) {
                    self.transcript.push_notice(NoticeLevel::Error, failure);
                }
            }
        }
    }

    pub(super) fn show_event(&mut self, session_id: &str, event: &Event) {
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

    pub(super) fn on_agent(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Logged(events) => {
                let id = self.agent.info().session_id.clone();
                for event in &events {
                    // The pastes the composer showed as chips stay chips in the transcript.
                    let mut pasted = Vec::new();
                    if let Ok(Some(message)) = event.message(&id) {
                        if let Some(at) = self.unlogged.iter().position(|(s, _)| *s == message.id) {
                            pasted = pasted_texts(&self.unlogged.remove(at).1);
                        }
                        self.unlogged.retain(|(sent, _)| *sent != message.id);
                    }
                    let before = self.transcript.items().len();
                    self.show_event(&id, event);
                    // Only on the item this very message became.
                    if !pasted.is_empty() && self.transcript.items().len() > before {
                        self.transcript.set_last_pastes(&pasted);
                    }
                }
            }
            AgentEvent::Unsent {
                message_ids,
                reason,
            } => self.give_back(
                &message_ids,
                "Message not sent (the session log could not be written)",
                &reason,
            ),
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
                self.turn_started = match (status.running, self.turn_started) {
                    (true, None) => Some(Instant::now()),
                    (true, started) => started,
                    (false, _) => None,
                };
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
            AgentEvent::PromptBlocked { message_id, reason } => {
                self.transcript
                    .push_notice(NoticeLevel::Error, format!("Prompt blocked: {reason}"));
                // Not sent either: its text comes back too.
                self.give_back(&[message_id], "Message not sent (blocked)", &reason);
            }
            AgentEvent::Error(error) => self
                .transcript
                .push_notice(NoticeLevel::Error, error.to_string()),
        }
    }
}

/// The texts of the pastes `sent` showed collapsed.
fn pasted_texts(sent: &crate::tui::composer::ComposerSnapshot) -> Vec<String> {
    sent.parts()
        .into_iter()
        .filter_map(|part| match part {
            crate::tui::composer::Part::Paste(text) => Some(text),
            _ => None,
        })
        .collect()
}

/// The failure message of a `turn/end` whose reason is `{kind:"error", failure:{message}}`.
fn turn_failure(event: &Event) -> Option<String> {
    if event.kind != crate::session::format::TURN_END {
        return None;
    }
    let data: serde_json::Value = serde_json::from_str(event.data.get()).ok()?;
    let reason = data.get("reason")?;
    if reason.get("kind")?.as_str()? != "error" {
        return None;
    }
    let message = reason
        .get("failure")
        .and_then(|f| f.get("message"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("the model request failed");
    Some(message.to_string())
}
