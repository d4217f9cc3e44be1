//! Cross-session references for a terminal coding agent: type `@` in the composer, pick another
//! session, and the model gets a bounded, read-only, untrusted snapshot of it (see `SPEC.md` in
//! the design notes; the wire strings and the on-disk format follow it exactly).
//!
//! # The rooms
//!
//! Layers, bottom up; `tests/architecture.rs` fails when one imports a layer above it.
//!
//! - [`session`]: the dsh session log (format, reader, writer), the on-disk store, sessions live
//!   in this process, other agents' sessions as read-only sources, and the
//!   [`session::SessionQuery`] read interface everything above consumes. Knows nothing above it.
//! - [`mod@reference`]: `dsh-session:` URIs, `@`-mentions, candidate ranking and the
//!   [`reference::SessionReferences`] service that turns a mention into a snapshot. Uses only
//!   `session`.
//! - [`agent`]: the session-bound admission runtime (`followup`, `steer`, `inject`, the
//!   acceptance window, the `prompt-submit` hook), the log's one writer thread, and the model
//!   providers (the OpenAI-compatible one, `agent::openai`, with feature `openai`). Uses only
//!   `session`.
//! - `discovery` (feature `discovery`): the finder beside the contract (a full-text index of
//!   the sessions served, ranked search, what `--resume PREFIX` and `--continue` mean). Uses
//!   `session` and the reference projection only.
//! - [`host`]: the terminal-free room every face sends through: the mount
//!   ([`host::SessionReferenceMount`], over a host's [`host::AgentSurface`]) with the candidate
//!   lookups, the one-mention preview and the submit transaction, and the `@path` attachment
//!   rules (`host::attach`), whose chosen files the transaction reads. Uses `session`,
//!   `reference`, `agent` and (for typed `@PREFIX` resolution) `discovery`; names no terminal
//!   crate and builds with no features.
//! - `tui` (feature `tui`, which builds on `discovery`): the standard terminal bundle (composer,
//!   `@` popup, transcript, status, key help, the app loop) over the host room. Uses the layers
//!   above, never the command line.
//! - `mcp` (feature `mcp`): the session-reference service as a stdio MCP server; a face beside
//!   the TUI.
//! - `cli` (feature `cli`): the `dsh-refs` command line and its command implementations; the
//!   binary (`src/main.rs`) wires everything.
//! - [`escape`] and `sync` sit below every layer: untrusted text made safe for a terminal, and
//!   the one way a lock is taken (a poisoned lock is taken as its holder left it).
//!
//! # What is public
//!
//! A room's API is what its module re-exports; the rooms inside it are private (the skimmer, the
//! clock, the index's tables, the TUI's lookups and matchers…). The entry points:
//!
//! - `session`: [`session::DiskStore`] and [`session::SessionQuery`] (read), [`session::SessionWriter`]
//!   (append), [`session::Event`] with [`session::format::EventKind`] and
//!   [`session::format::RawData`], the fold ([`session::surface`]) and the streaming reader
//!   ([`session::reader`], with [`session::skim`] the fast path its tests check against
//!   serde), other agents' logs (`session::external`), and [`session::SessionError`].
//! - `reference`: [`reference::SessionReferences`] (candidates, prepare, preview) and its
//!   typed results ([`reference::Prepared`], [`reference::ReferenceMeta`]), URIs and mentions.
//! - `agent`: [`agent::Agent`], [`agent::ModelProvider`] with [`agent::model_for`], the
//!   prompt-submit hooks ([`agent::PromptSubmitHooks`]).
//! - `host`: [`host::SessionReferenceMount`] over a host's [`host::AgentSurface`], and the
//!   `@path` rules (`host::attach`, [`host::InspectError`]).
//! - `discovery`, `tui`, `mcp`, `cli` (their features): the searcher and indexer, the widgets
//!   with their one key answer (`tui::focus::Handled`) and key table (`tui::keys`), the MCP
//!   server, and the command line.
//!
//! # Features
//!
//! All on by default: `openai` (reqwest with rustls), `discovery` (rusqlite with bundled SQLite,
//! notify), `tui` (ratatui, crossterm, nucleo, ignore; with `discovery`), `mcp` (rmcp; with
//! `discovery`) and `cli` (clap, tracing-subscriber; with `tui`, `discovery` and `openai`).
//! Without `openai` a remote provider is an error naming the feature; without `discovery`
//! Codex's state database is not read (titles come from its index and rollouts).
//!
//! # Three ways in
//!
//! **1. The store and the service only.** With `default-features = false` nothing of the TUI,
//! the command line, the HTTP stack or SQLite is built (no ratatui, crossterm, nucleo, clap,
//! reqwest, rusqlite, notify, nor the embedded demo home). Point the service at any
//! [`session::SessionQuery`] (the dsh store here), list the `@` rows, and prepare a message that
//! mentions sessions:
//!
//! ```no_run
//! use dsh_session_references::reference::{
//!     format_session_reference_mention, parse_session_reference_text, AgentIdentity,
//!     ReferenceInput, SessionReferenceConfig, SessionReferences,
//! };
//! use dsh_session_references::session::{ContentBlock, DiskStore, SessionQuery};
//! use std::sync::Arc;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store: Arc<dyn SessionQuery> = Arc::new(DiskStore::new("/home/me/.dsh"));
//! let service = SessionReferences::new(store, SessionReferenceConfig::default())?;
//! let me = AgentIdentity::new("my-session", Some("/home/me/project".to_string()));
//! let cancel = CancellationToken::new();
//!
//! // The popup's rows for what follows the `@`.
//! let rows = service.list_candidates(&me, "parser", None, &cancel).await?;
//! let Some(first) = rows.first() else { return Ok(()) };
//!
//! // A message mentioning it, parsed and prepared: the snapshot comes back as a context
//! // message to log (and send) right before the user's own.
//! let mention = format_session_reference_mention(&first.session_id, Some(&first.label));
//! let parsed = parse_session_reference_text(&format!("what did {mention} decide?"))?;
//! let references = parsed.references.into_iter().map(ReferenceInput::from).collect();
//! let prepared = service
//!     .prepare(&me, vec![ContentBlock::text(parsed.text)], references, &cancel)
//!     .await?;
//! assert!(prepared.additional_context.is_some());
//! # Ok(())
//! # }
//! ```
//!
//! **2. Mounted into your own front end.** Implement [`host::AgentSurface`] for your agent (its
//! identity, and how it takes a message with or without contexts) and give
//! [`host::SessionReferenceMount`] the service: that needs no terminal crate (a headless host,
//! `exec` and the MCP server use it so). In a TUI, use the bundle's widgets where you want them: `tui::popup::PopupState` for the `@` rows, `tui::composer::Composer` for mention
//! editing, `tui::transcript::TranscriptItem` for the reference card. `examples/host.rs` is a
//! whole application doing this (its own layout, agent and session source), driven headless by
//! `tests/tui/host_example.rs`.
//!
//! ```no_run
//! # mod host {
//! use dsh_session_references::agent::Admission;
//! use dsh_session_references::host::{AgentSurface, SessionReferenceMount};
//! use dsh_session_references::reference::{AgentIdentity, SessionReferences};
//! use dsh_session_references::session::Message;
//! use std::sync::Arc;
//! use tokio_util::sync::CancellationToken;
//!
//! struct MyAgent;
//!
//! impl AgentSurface for MyAgent {
//!     fn identity(&self) -> AgentIdentity {
//!         AgentIdentity::new("my-session", None)
//!     }
//!     fn dispatch(&self, message: Message) -> Admission {
//!         self.dispatch_with_contexts(message, Vec::new())
//!     }
//!     fn dispatch_with_contexts(&self, message: Message, contexts: Vec<Message>) -> Admission {
//!         // Hand `contexts` (the snapshots), then `message`, to your model.
//!         let _ = (message, contexts);
//!         Admission::Queued
//!     }
//! }
//!
//! async fn on_enter(service: SessionReferences, text: &str) {
//!     let mount = SessionReferenceMount::new(Some(service), Arc::new(MyAgent));
//!     // Parse, prepare every mentioned session, dispatch; on failure keep the user's text.
//!     match mount.submit(text, &CancellationToken::new()).await {
//!         Ok(sent) => println!("sent with {} referenced sessions", sent.referenced),
//!         Err(error) => eprintln!("{error}"),
//!     }
//! }
//! # }
//! ```
//!
//! **3. The standard TUI.** Run the `dsh-refs` binary (`dsh-refs --demo` opens a copy of the
//! bundled demo home), or start the bundle's app loop from `tui::app` with this crate's
//! [`agent::Agent`], which logs what the model sees exactly as dsh does.

pub mod agent;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "tui")]
pub mod demo;
#[cfg(feature = "discovery")]
pub mod discovery;
pub mod escape;
pub mod host;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod reference;
pub mod session;
pub(crate) mod sync;
#[cfg(test)]
mod test_rng;
#[cfg(feature = "tui")]
pub mod tui;
