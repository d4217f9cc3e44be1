//! The agent's test binary: the runtime and its write failures, the OpenAI-compatible provider
//! against a scripted loopback server, and `dsh-refs exec` through the real binary.

#[path = "../support/mod.rs"]
mod support;

mod exec_attach;
mod exec_hostile;
mod exec_openai;
mod exec_refs;
mod exec_titles;
mod hostile_server;
mod provider_openai;
mod runtime;
mod write_failures;
