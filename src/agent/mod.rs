//! The agent runtime: a session-bound agent that owns its log and admits messages the way dsh
//! does, and the model providers behind it.

pub mod hooks;
pub mod provider;
pub mod runtime;

pub use hooks::{
    AgentInfo, ContextWrapper, PromptDecision, PromptSubmitHooks, PromptSubmitListener,
};
pub use provider::{ModelProvider, OfflineModel};
pub use runtime::{Admission, Agent, AgentConfig, AgentEvent, AgentStatus};
