//! Cross-session references for a terminal coding agent.
//!
//! Layers, bottom up: [`session`] reads and writes dsh session logs and answers
//! [`session::SessionQuery`]; [`mod@reference`] turns `@`-mentions into bounded, untrusted snapshots;
//! `agent` is the admission runtime that logs what the model sees; [`tui`] is the standard
//! terminal bundle that hosts can mount.

pub mod agent;
pub mod cli;
pub mod demo;
pub mod discovery;
pub mod escape;
pub mod reference;
pub mod session;
#[cfg(test)]
mod test_rng;
pub mod tui;
