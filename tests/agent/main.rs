//! The agent's test binary: the runtime and its write failures, the OpenAI-compatible provider
//! against a scripted loopback server, and `dsh-refs exec` through the real binary.

#[path = "../support/mod.rs"]
mod support;

mod exec_hostile;
mod exec_openai;
mod exec_refs;
mod hostile_server;
mod provider_openai;
mod runtime;
mod write_failures;
