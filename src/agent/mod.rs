//! The agent runtime: a session-bound agent that owns its log and admits messages the way dsh
//! does, and the model providers behind it.

pub mod config;
pub(crate) mod hooks;
#[cfg(feature = "openai")]
pub mod openai;
pub(crate) mod provider;
pub(crate) mod runtime;
// Parts of this room serve only the faces (the TUI, the command line, the MCP server); a
// build without them leaves those parts unused.
#[cfg_attr(partial_faces, allow(dead_code))]
pub(crate) mod sse;

pub use hooks::{
    AgentInfo, ContextWrapper, HookError, HookResult, Next, PromptDecision, PromptSubmitHooks,
    PromptSubmitListener,
};
pub use provider::{
    ModelError, ModelEvent, ModelOutput, ModelProvider, ModelRequest, OfflineModel, Usage,
};
pub use runtime::{Admission, Agent, AgentConfig, AgentError, AgentEvent, AgentStatus};

/// Why the model of a resolved configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ModelSetupError {
    /// The provider's HTTP client could not be built (its TLS roots, its settings).
    #[cfg(feature = "openai")]
    #[error("{0}")]
    Client(#[from] openai::ClientError),
    /// A remote provider is configured, but this build has none (feature `openai` is off).
    #[error("{label}: this build has no OpenAI-compatible provider (feature `openai`)")]
    NoProvider {
        /// The configured provider's label (`name · model`).
        label: String,
    },
}

/// The model for a resolved configuration, and its status-line label. The offline label says
/// how to configure a real model.
pub fn model_for(
    choice: &config::ModelChoice,
    offline_delay: std::time::Duration,
) -> Result<(std::sync::Arc<dyn ModelProvider>, String), ModelSetupError> {
    match choice {
        config::ModelChoice::Offline => Ok((
            std::sync::Arc::new(OfflineModel::new(offline_delay)),
            "offline · for a real model: DEEPSEEK_API_KEY=… or --provider NAME".to_string(),
        )),
        #[cfg(feature = "openai")]
        config::ModelChoice::Remote(settings) => {
            let label = settings.label();
            let provider = openai::OpenAiProvider::new((**settings).clone())?;
            Ok((std::sync::Arc::new(provider), label))
        }
        #[cfg(not(feature = "openai"))]
        config::ModelChoice::Remote(settings) => Err(ModelSetupError::NoProvider {
            label: settings.label(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offline_label_says_how_to_configure_a_real_model() {
        let (model, label) =
            model_for(&config::ModelChoice::Offline, std::time::Duration::ZERO).unwrap();
        assert_eq!(model.identity().0, "offline");
        assert!(
            label.contains("DEEPSEEK_API_KEY") && label.contains("--provider"),
            "{label}"
        );
    }

    /// A build without the `openai` feature refuses a configured remote provider with an error
    /// naming the feature (it never falls back to the offline model in silence).
    #[cfg(not(feature = "openai"))]
    #[test]
    fn without_the_openai_feature_a_remote_provider_names_the_feature() {
        let table = config::parse_config(
            "c.toml",
            "[provider]\nkind = \"openai-compatible\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n",
        )
        .unwrap();
        let choice =
            config::resolve("c.toml", table, &config::ModelFlags::default(), &|_| None).unwrap();
        let Err(error) = model_for(&choice, std::time::Duration::ZERO) else {
            panic!("a remote provider without the openai feature must be refused");
        };
        assert!(error.to_string().contains("feature `openai`"), "{error}");
    }

    /// The typed errors keep the words the user saw when they were strings.
    #[test]
    fn typed_errors_read_as_before() {
        let write = AgentError::LogWrite {
            reason: "/h/s.jsonl: disk full".into(),
        };
        assert_eq!(
            write.to_string(),
            "could not write the session log: /h/s.jsonl: disk full"
        );
        let provider = ModelError::Provider {
            code: "AUTH".into(),
            message: "bad key".into(),
        };
        assert_eq!(AgentError::Model(provider).to_string(), "bad key");
        let stopped = ModelError::TaskStopped("panicked".into());
        assert_eq!(stopped.failure().0, "MODEL");
        assert_eq!(
            AgentError::Model(stopped.clone()).to_string(),
            stopped.failure().1
        );
        assert_eq!(HookError::Cancelled.to_string(), "prompt cancelled");
    }
}
