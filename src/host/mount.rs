//! The session-reference mount: what a host plugs in to get `@` sessions, with or without a
//! terminal (the TUI, `exec` and the MCP server use the same one).
//!
//! Purpose: candidate lookups for the popup, the badge/preview of one mention, and the submit
//! transaction of SPEC §5.3 (read the chosen files, parse, prepare, dispatch by admission
//! state). A host provides an [`AgentSurface`] (this crate's [`Agent`] is one) and, optionally, a
//! [`SessionReferences`] service over its [`crate::session::SessionQuery`]; without the service,
//! messages that mention sessions are refused instead of being sent without their snapshot.
//!
//! Invariant: nothing is dispatched unless every step succeeded: a chosen file that cannot be
//! read as chosen, a parse error, a missing service, a failed or cancelled preparation each
//! return a [`SubmitError`] and leave the agent untouched. File reading is blocking and runs on
//! a blocking thread inside the transaction, racing the cancel token. Proof: the unit test below,
//! `tests/tui/mount.rs`, `tests/reliability_cancel.rs`, `tests/tui/attach.rs` and
//! `tests/agent/exec_attach.rs`.

use super::attach::{read_chosen, ChosenFile};
use crate::agent::{Admission, Agent};
use crate::reference::{
    parse_session_reference_text, AgentIdentity, Candidate, ErrorCode, ReferenceInput,
    SessionReferenceError, SessionReferences,
};
use crate::session::{ContentBlock, Message, MessageSource};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The agent operations the mount needs.
pub trait AgentSurface: Send + Sync {
    /// The agent's session id and cwd, as the reference service sees them.
    fn identity(&self) -> AgentIdentity;
    /// `steer` inside the acceptance window, else `followup`.
    fn dispatch(&self, message: Message) -> Admission;
    /// Inside the window `inject(contexts)` + `steer(message)` at one boundary; outside it a
    /// one-shot `prompt-submit` wrapper bound to `message`, then `followup`.
    fn dispatch_with_contexts(&self, message: Message, contexts: Vec<Message>) -> Admission;
}

impl AgentSurface for Agent {
    fn identity(&self) -> AgentIdentity {
        AgentIdentity::new(self.info().session_id.clone(), self.info().cwd.clone())
    }
    fn dispatch(&self, message: Message) -> Admission {
        Agent::dispatch(self, message)
    }
    fn dispatch_with_contexts(&self, message: Message, contexts: Vec<Message>) -> Admission {
        Agent::dispatch_with_contexts(self, message, contexts)
    }
}

/// Why a submission did not go out. The composer keeps (or gets back) its text in every case.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The text does not parse as references (SPEC §2); shown as `Invalid session reference: …`.
    #[error("Invalid session reference: {}", .0.message())]
    InvalidReference(SessionReferenceError),
    /// The text mentions sessions but no reference service is mounted.
    #[error("Session reference capability unavailable")]
    Unavailable,
    /// `prepare` failed or was cancelled; shown as `Session reference failed: …`.
    #[error("Session reference failed: {}", .0.message())]
    Failed(SessionReferenceError),
    /// A chosen file could not be read as chosen (gone, no longer a regular file, now outside
    /// the cwd without having been allowed, too many); shown as `Not sent: …`. The string names
    /// the file (escaped).
    #[error("Not sent: {0}")]
    Attachment(String),
}

impl SubmitError {
    /// Whether the user cancelled the preparation (Esc), which needs no error shown.
    pub fn was_cancelled(&self) -> bool {
        matches!(self, SubmitError::Failed(e) if e.kind() == ErrorCode::Cancelled)
    }
}

/// A typed `@PREFIX` this long or longer that names several sessions stops the send with the
/// candidates; a shorter one (`@me`, `@s`) is just text.
pub const MIN_AMBIGUOUS_PREFIX: usize = 6;

/// What a successful submission did.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// How the message was taken in (queued, staged or appended).
    pub admission: Admission,
    /// The id of the sent message.
    pub message_id: String,
    /// Distinct sessions whose snapshot went with the message.
    pub referenced: usize,
}

/// The size of one source's snapshot, prepared alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// UTF-8 bytes of the context message it alone would add.
    pub bytes: u64,
    /// Messages the source had (`originalMessages`).
    pub original: u64,
    /// Messages kept after retention (`retainedMessages`).
    pub retained: u64,
    /// Retention dropped some of the source (`truncated`).
    pub truncated: bool,
    /// The last few messages of what would be sent, `(role, text)`, oldest first.
    pub last: Vec<(String, String)>,
}

/// Messages a [`Preview`] keeps for the popup's preview pane.
pub const PREVIEW_MESSAGES: usize = 6;

impl Preview {
    /// The badge: `12 msgs · 48 KiB`, or `truncated · kept 1/104 msgs · 64 KiB`.
    pub fn badge(&self) -> String {
        let size = super::format_size(self.bytes);
        if self.truncated {
            format!(
                "truncated · kept {}/{} msgs · {size}",
                self.retained, self.original
            )
        } else {
            format!(
                "{} msg{} · {size}",
                self.retained,
                if self.retained == 1 { "" } else { "s" }
            )
        }
    }
}

/// A parsed submission: either ready to dispatch, or needing preparation.
pub enum Submission {
    /// No references: dispatch as it is.
    Plain(Message),
    /// References to prepare before dispatch.
    WithReferences {
        /// The message to send, its text as parsed.
        message: Message,
        /// The references parsed from its text (SPEC §2), in order.
        references: Vec<ReferenceInput>,
    },
}

/// The reference mount: candidate lookups for the popup and the submit transaction, over one agent
/// and, optionally, the reference service.
#[derive(Clone)]
pub struct SessionReferenceMount {
    service: Option<SessionReferences>,
    agent: Arc<dyn AgentSurface>,
}

impl SessionReferenceMount {
    /// A mount over `agent`; with `service` `None`, a message that mentions sessions is refused.
    pub fn new(service: Option<SessionReferences>, agent: Arc<dyn AgentSurface>) -> Self {
        SessionReferenceMount { service, agent }
    }

    /// Whether a reference service is mounted.
    pub fn has_service(&self) -> bool {
        self.service.is_some()
    }

    /// The agent messages go to.
    pub fn agent(&self) -> &Arc<dyn AgentSurface> {
        &self.agent
    }

    /// Popup rows for `query` (SPEC §3.3); empty without a service.
    pub async fn candidates(
        &self,
        query: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<Candidate>, SessionReferenceError> {
        match &self.service {
            Some(service) => {
                service
                    .list_candidates(&self.agent.identity(), query, None, cancel)
                    .await
            }
            None => Ok(Vec::new()),
        }
    }

    /// What a mention of `session_id` would send, prepared alone (SPEC §5.6): for the badge a
    /// mention wears in the composer. The send still prepares afresh.
    pub async fn preview(
        &self,
        session_id: &str,
        label: &str,
        cancel: &CancellationToken,
    ) -> Result<Preview, SubmitError> {
        let service = self.service.as_ref().ok_or(SubmitError::Unavailable)?;
        let preview = service
            .preview(
                &self.agent.identity(),
                ReferenceInput::new(session_id, Some(label.to_string())),
                cancel,
            )
            .await
            .map_err(SubmitError::Failed)?;
        let mut last = preview.conversation;
        last.drain(..last.len().saturating_sub(PREVIEW_MESSAGES));
        let stats = preview.meta.stats;
        Ok(Preview {
            bytes: preview.context_bytes as u64,
            original: stats.original_messages as u64,
            retained: stats.retained_messages as u64,
            truncated: stats.truncated,
            last: last
                .into_iter()
                .map(|entry| (entry.role.as_str().to_string(), entry.text))
                .collect(),
        })
    }

    /// The sessions typed `@ID` / `@PREFIX` tokens name (issue 24 item 2), resolved as
    /// `--resume` resolves a prefix: per prefix, the one session id it is or starts with, or
    /// `None` when it names none (the token stays text) or is shorter than
    /// [`MIN_AMBIGUOUS_PREFIX`] and names several. A longer prefix that names several is an
    /// error listing them. No service: every token stays text. (With feature `discovery`, whose
    /// prefix rules these are.)
    #[cfg(feature = "discovery")]
    pub async fn resolve_typed(&self, prefixes: &[String]) -> Result<Vec<Option<String>>, String> {
        let Some(service) = &self.service else {
            return Ok(vec![None; prefixes.len()]);
        };
        if prefixes.is_empty() {
            return Ok(Vec::new());
        }
        let listing = service
            .query()
            .list_sessions()
            .await
            .map_err(|e| e.to_string())?;
        prefixes
            .iter()
            .map(
                |prefix| match crate::discovery::lifecycle::resolve_prefix(&listing, prefix) {
                    Ok(id) => Ok(Some(id)),
                    Err(e @ crate::discovery::lifecycle::ResolveError::Ambiguous { .. })
                        if prefix.chars().count() >= MIN_AMBIGUOUS_PREFIX =>
                    {
                        Err(e.to_string())
                    }
                    Err(_) => Ok(None),
                },
            )
            .collect()
    }

    /// Step 1–3 of the transaction: parse, and refuse early what cannot be sent. Pure.
    pub fn parse(&self, text: &str) -> Result<Submission, SubmitError> {
        let parsed = parse_session_reference_text(text).map_err(SubmitError::InvalidReference)?;
        let message = Message::new(
            "user",
            vec![ContentBlock::text(parsed.text)],
            MessageSource::user(),
            crate::agent::runtime::new_message_id(),
        );
        if parsed.references.is_empty() {
            return Ok(Submission::Plain(message));
        }
        if self.service.is_none() {
            return Err(SubmitError::Unavailable);
        }
        Ok(Submission::WithReferences {
            message,
            references: parsed.references.into_iter().map(Into::into).collect(),
        })
    }

    /// The whole transaction. Nothing is dispatched unless preparation succeeded; `cancel`
    /// (Esc) settles it with a cancelled failure.
    pub async fn submit(
        &self,
        text: &str,
        cancel: &CancellationToken,
    ) -> Result<Submitted, SubmitError> {
        self.submit_with(text, Vec::new(), cancel).await
    }

    /// [`submit`](Self::submit) with the files the person chose (SPEC §5.5): each is resolved
    /// again from `cwd` and read inside the transaction (on a blocking thread, before the text
    /// is parsed and prepared), and goes as one context message after the session-reference
    /// context and before the message. Nothing but `files` is read.
    pub async fn submit_files(
        &self,
        text: &str,
        cwd: Option<PathBuf>,
        files: Vec<ChosenFile>,
        cancel: &CancellationToken,
    ) -> Result<Submitted, SubmitError> {
        let attachments = if files.is_empty() {
            Vec::new()
        } else {
            let read = tokio::task::spawn_blocking(move || read_chosen(cwd.as_deref(), &files));
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    return Err(SubmitError::Failed(SessionReferenceError::cancelled(
                        "reading the attached files",
                    )))
                }
                read = read => read
                    .unwrap_or_else(|e| Err(e.to_string()))
                    .map_err(SubmitError::Attachment)?,
            }
        };
        self.submit_with(text, attachments, cancel).await
    }

    /// [`submit`](Self::submit) with context messages of the host's own (such as attached
    /// files already read), dispatched after the session-reference context and before the
    /// message, at the same boundary.
    pub async fn submit_with(
        &self,
        text: &str,
        attachments: Vec<Message>,
        cancel: &CancellationToken,
    ) -> Result<Submitted, SubmitError> {
        match self.parse(text)? {
            Submission::Plain(message) => {
                let message_id = message.id.clone();
                let admission = if attachments.is_empty() {
                    self.agent.dispatch(message)
                } else {
                    self.agent.dispatch_with_contexts(message, attachments)
                };
                Ok(Submitted {
                    admission,
                    message_id,
                    referenced: 0,
                })
            }
            Submission::WithReferences {
                mut message,
                references,
            } => {
                let service = self.service.as_ref().ok_or(SubmitError::Unavailable)?;
                let prepared = service
                    .prepare(
                        &self.agent.identity(),
                        std::mem::take(&mut message.content),
                        references,
                        cancel,
                    )
                    .await
                    .map_err(SubmitError::Failed)?;
                message.content = prepared.content;
                let message_id = message.id.clone();
                let referenced = prepared.references.len();
                let (admission, referenced) = match prepared.additional_context {
                    Some(context) => {
                        let mut contexts = vec![context];
                        contexts.extend(attachments);
                        (
                            self.agent.dispatch_with_contexts(message, contexts),
                            referenced,
                        )
                    }
                    None if attachments.is_empty() => (self.agent.dispatch(message), 0),
                    None => (self.agent.dispatch_with_contexts(message, attachments), 0),
                };
                Ok(Submitted {
                    admission,
                    message_id,
                    referenced,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// An agent that records what it was handed: `(message text, context texts)`.
    #[derive(Default)]
    struct Recorder {
        sent: Mutex<Vec<(String, Vec<String>)>>,
    }

    impl AgentSurface for Recorder {
        fn identity(&self) -> AgentIdentity {
            AgentIdentity::new("me", None)
        }
        fn dispatch(&self, message: Message) -> Admission {
            self.dispatch_with_contexts(message, Vec::new())
        }
        fn dispatch_with_contexts(&self, message: Message, contexts: Vec<Message>) -> Admission {
            let contexts = contexts.iter().map(Message::text).collect();
            if let Ok(mut sent) = self.sent.lock() {
                sent.push((message.text(), contexts));
            }
            Admission::Queued
        }
    }

    fn file(path: &str) -> ChosenFile {
        ChosenFile {
            path: path.into(),
            allow_outside: false,
        }
    }

    #[tokio::test]
    async fn the_transaction_reads_the_chosen_files_and_nothing_goes_when_one_fails() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.md"), "hello").unwrap();
        let agent = Arc::new(Recorder::default());
        let mount = SessionReferenceMount::new(None, agent.clone());
        let cwd = Some(dir.path().to_path_buf());
        let cancel = CancellationToken::new();

        let sent = mount
            .submit_files("look", cwd.clone(), vec![file("notes.md")], &cancel)
            .await
            .unwrap();
        assert_eq!(sent.referenced, 0);
        {
            let log = agent.sent.lock().unwrap();
            assert_eq!(log.len(), 1);
            assert_eq!(log[0].0, "look");
            assert_eq!(log[0].1.len(), 1);
            assert!(log[0].1[0].starts_with("## Attached file: notes.md\n\nhello"));
        }

        let gone = mount
            .submit_files("again", cwd.clone(), vec![file("gone.md")], &cancel)
            .await;
        assert!(
            matches!(&gone, Err(SubmitError::Attachment(why)) if why.contains("@gone.md")),
            "{gone:?}"
        );
        assert!(gone
            .unwrap_err()
            .to_string()
            .starts_with("Not sent: @gone.md"));

        cancel.cancel();
        let cancelled = mount
            .submit_files("later", cwd, vec![file("notes.md")], &cancel)
            .await;
        assert!(cancelled.is_err_and(|e| e.was_cancelled()));
        assert_eq!(agent.sent.lock().unwrap().len(), 1, "nothing else went");
    }
}
