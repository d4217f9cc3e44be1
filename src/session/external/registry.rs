//! The registry of other agents' formats: which agents this build reads, in the order sources
//! are listed and their flags documented.
//!
//! Purpose: one list names every agent module, so the interface (`agent.rs`) and each agent
//! module depend only on each other one way. Invariant: the names are unique, lowercase and not
//! `dsh` (they are the id namespaces, `--sources` names and badges). Proof: the unit test below.

use super::agent::AgentFormat;

/// Every other agent this build reads, in the order sources are listed and flags documented.
pub static AGENTS: &[&dyn AgentFormat] = &[
    &super::claude::ClaudeCode,
    &super::codex::Codex,
    &super::qwen::QwenCode,
    &super::gemini::GeminiCli,
    #[cfg(feature = "discovery")]
    &super::opencode::Opencode,
    &super::copilot::CopilotCli,
];

/// The registered agent named `name`.
pub fn find(name: &str) -> Option<&'static dyn AgentFormat> {
    AGENTS.iter().copied().find(|a| a.name() == name)
}

/// The registry's names, comma-separated (for messages).
pub fn names() -> String {
    AGENTS
        .iter()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lowercase_namespaces_and_not_dsh() {
        let mut seen = std::collections::HashSet::new();
        for agent in AGENTS {
            let name = agent.name();
            assert!(seen.insert(name), "{name} registered twice");
            assert_ne!(name, "dsh");
            assert!(
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase()),
                "{name}"
            );
            assert!(find(name).is_some());
        }
    }
}
