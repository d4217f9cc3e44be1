//! The `prompt-submit` hook: a waterfall of listeners around the admission of a queued prompt.
//!
//! Each listener gets the prompt and a `next` continuation. It may change what `next` returns,
//! block the prompt, or pass it on. The first listener is the outermost. A listener may be bound
//! to one message id: the runtime releases it once that message is admitted, blocked, discarded
//! or cancelled, so a one-shot wrapper can never leak onto a later prompt.

use crate::session::{BoxFuture, Message};
use crate::sync::LockExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// What admission decided for a prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptDecision {
    /// Admit the prompt; `content` replaces its content when set; `additional_contexts` are
    /// logged as context `user/message`s right before it, in order.
    Allow {
        /// Replacement content for the prompt; `None` keeps what was typed.
        content: Option<Vec<crate::session::ContentBlock>>,
        /// Context `user/message`s logged right before the prompt, in this order.
        additional_contexts: Vec<Message>,
    },
    /// Log nothing for this prompt.
    Block {
        /// Why, for the user.
        reason: String,
    },
}

impl PromptDecision {
    /// An Allow that changes nothing: the prompt as typed, no contexts (the innermost decision).
    pub fn allow() -> Self {
        PromptDecision::Allow {
            content: None,
            additional_contexts: Vec::new(),
        }
    }
}

/// Facts about the agent a listener may want.
#[derive(Debug, Clone)]
pub struct AgentInfo {
    /// The id of the agent's own session.
    pub session_id: String,
    /// The session's working directory (header `cwd`), if it has one.
    pub cwd: Option<String>,
}

/// Why admission did not decide: the prompt was cancelled, or a listener failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The prompt was cancelled (Esc) while admission ran.
    #[error("prompt cancelled")]
    Cancelled,
    /// A listener could not decide; `reason` says why, for the user.
    #[error("{reason}")]
    Failed {
        /// The listener's explanation, for the user.
        reason: String,
    },
}

/// What a `prompt-submit` listener returns.
pub type HookResult = Result<PromptDecision, HookError>;

/// One `prompt-submit` listener.
pub trait PromptSubmitListener: Send + Sync {
    /// Decides for `message`: call `next.run(..)` for the inner listeners' decision, then change,
    /// block or pass it on. Return [`HookError::Cancelled`] when `cancel` fires.
    fn on_prompt_submit<'a>(
        &'a self,
        agent: &'a AgentInfo,
        message: &'a Message,
        cancel: &'a CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, HookResult>;

    /// The message this listener exists for, if it is a one-shot wrapper.
    fn bound_message_id(&self) -> Option<&str> {
        None
    }
}

type Registered = (ListenerId, Arc<dyn PromptSubmitListener>);

/// The rest of the waterfall.
pub struct Next<'a> {
    rest: &'a [Registered],
}

impl<'a> Next<'a> {
    /// Runs the inner listeners; the innermost decision is a plain Allow.
    pub fn run(
        self,
        agent: &'a AgentInfo,
        message: &'a Message,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            match self.rest.split_first() {
                None => Ok(PromptDecision::allow()),
                Some(((_, listener), rest)) => {
                    if cancel.is_cancelled() {
                        return Err(HookError::Cancelled);
                    }
                    listener
                        .on_prompt_submit(agent, message, cancel, Next { rest })
                        .await
                }
            }
        })
    }
}

/// A registered listener's handle, from [`PromptSubmitHooks::prepend`] or
/// [`PromptSubmitHooks::append`], for [`PromptSubmitHooks::remove`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

/// The registered listeners, outermost first.
#[derive(Default, Clone)]
pub struct PromptSubmitHooks {
    listeners: Arc<Mutex<Vec<Registered>>>,
    next_id: Arc<AtomicU64>,
}

impl PromptSubmitHooks {
    fn id(&self) -> ListenerId {
        ListenerId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Adds an outermost listener.
    pub fn prepend(&self, listener: Arc<dyn PromptSubmitListener>) -> ListenerId {
        let id = self.id();
        self.listeners.locked().insert(0, (id, listener));
        id
    }

    /// Adds an innermost listener.
    pub fn append(&self, listener: Arc<dyn PromptSubmitListener>) -> ListenerId {
        let id = self.id();
        self.listeners.locked().push((id, listener));
        id
    }

    /// Removes the listener `id`; `false` when it was not registered (already removed or released).
    pub fn remove(&self, id: ListenerId) -> bool {
        let mut listeners = self.listeners.locked();
        let before = listeners.len();
        listeners.retain(|(lid, _)| *lid != id);
        listeners.len() != before
    }

    /// Removes every listener bound to `message_id`.
    pub fn release_bound(&self, message_id: &str) -> usize {
        let mut listeners = self.listeners.locked();
        let before = listeners.len();
        listeners.retain(|(_, l)| l.bound_message_id() != Some(message_id));
        before - listeners.len()
    }

    /// How many listeners are registered.
    pub fn len(&self) -> usize {
        self.listeners.locked().len()
    }

    /// No listener is registered: admission allows every prompt unchanged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs the waterfall for one prompt.
    pub async fn run(
        &self,
        agent: &AgentInfo,
        message: &Message,
        cancel: &CancellationToken,
    ) -> HookResult {
        let listeners = self.listeners.locked().clone();
        Next { rest: &listeners }.run(agent, message, cancel).await
    }
}

/// A one-shot, outermost wrapper bound to one message: adds `contexts` to an Allow decision for
/// that message only, and never touches any other prompt.
pub struct ContextWrapper {
    message_id: String,
    contexts: Vec<Message>,
}

impl ContextWrapper {
    /// A wrapper for the message whose id is `message_id`, adding `contexts` in this order.
    pub fn new(message_id: impl Into<String>, contexts: Vec<Message>) -> Self {
        ContextWrapper {
            message_id: message_id.into(),
            contexts,
        }
    }
}

impl PromptSubmitListener for ContextWrapper {
    fn on_prompt_submit<'a>(
        &'a self,
        agent: &'a AgentInfo,
        message: &'a Message,
        cancel: &'a CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let decision = next.run(agent, message, cancel).await?;
            if message.id != self.message_id {
                return Ok(decision);
            }
            Ok(match decision {
                PromptDecision::Allow {
                    content,
                    mut additional_contexts,
                } => {
                    additional_contexts.extend(self.contexts.iter().cloned());
                    PromptDecision::Allow {
                        content,
                        additional_contexts,
                    }
                }
                block => block,
            })
        })
    }

    fn bound_message_id(&self) -> Option<&str> {
        Some(&self.message_id)
    }
}
