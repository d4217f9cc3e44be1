//! The session layer's test binary: the store, the writer and the readers, the
//! skimming reader and the conversation cache, crash safety under SIGKILL, hostile and external
//! sessions, and the text-only message reading.
//!
//! One binary per layer (README, "Tests"): the files only share set-up, and on two cores the link
//! of each test binary, not the tests, dominates `cargo test`. Tests that re-execute this binary as
//! a child (`concurrency`, `reliability_crash`) name themselves with `support::test_path`.

#[path = "../support/mod.rs"]
mod support;

mod agent_conversation_cache;
mod agent_listing_cache;
mod codex_session_index;
mod compaction;
mod concurrency;
mod copilot_sessions;
mod external_sessions;
mod gemini_sessions;
mod hostile_sessions;
mod listing_cache;
mod message_text;
mod opencode_sessions;
mod qwen_sessions;
mod real_agents;
mod reliability_agent_skim;
mod reliability_conversation_cache;
mod reliability_crash;
mod reliability_skim;
mod store;
mod torn_title;
mod versions;
mod writer;
