//! `dsh-refs mcp`: the session-reference service as a stdio MCP server (SPEC §10), on the
//! official Rust SDK (`rmcp`).
//!
//! Purpose: people who would reference a past session mostly work inside Claude Code, Codex,
//! Gemini CLI, opencode, VS Code or Zed; MCP is how those hosts mount a foreign capability.
//! The server is host-facing: the person picks a session (a listed resource under `@`, or the
//! `reference` prompt); it offers no tools and no model-callable search.
//!
//! Layering: this room uses the reference service ([`crate::reference`]), the merged session
//! sources ([`crate::session`]) and discovery ([`crate::discovery`]), never the TUI; only the
//! command line and the binary use it (`tests/architecture.rs`).
//!
//! Invariant: stdout carries JSON-RPC only (diagnostics go to the tracing subscriber the binary
//! points at `<home>/logs/`); end of stdin ends the server with exit code 0; a malformed message
//! that names an id gets its answer by that id ([`wire`]: wrong param types, lone surrogates,
//! nesting and size past the bounds), text that is not JSON and names no id is skipped, and
//! serving goes on; no session home is written (reads only; discovery's cache lives under `<home>/index/`).
//! Proof: `tests/mcp/` drives the real binary through `rmcp`'s client.

pub(crate) mod listing;
pub(crate) mod server;
pub mod wire;

pub use server::Server;

use crate::host::Workspace;
use rmcp::ServiceExt;
use std::time::Duration;

/// Sessions listed as resources unless `--max-resources` says otherwise.
pub const DEFAULT_MAX_RESOURCES: u64 = 200;
/// How often the change notifier looks (and so at most how often it notifies).
pub const NOTIFY_EVERY: Duration = Duration::from_secs(1);

/// Why the server could not start or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The reference service refused its configuration (for example `--max-reference-bytes`).
    #[error("the reference service cannot start: {0}")]
    Config(#[source] crate::reference::SessionReferenceError),
    /// The client's `initialize` exchange failed (it went away, or sent no handshake).
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    /// The connection failed while serving.
    #[error("the MCP service failed: {0}")]
    Service(String),
}

/// `--expose` named something other than `resources` and `prompts`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--expose {text:?}: unknown {part:?} (expected resources, prompts or both)")]
pub struct ExposeError {
    /// The whole value given.
    pub text: String,
    /// The part not known.
    pub part: String,
}

/// What the server offers (`--expose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expose {
    /// Sessions listed as resources (and readable by URI).
    pub resources: bool,
    /// The `reference` prompt and its completion.
    pub prompts: bool,
}

impl Default for Expose {
    fn default() -> Self {
        Expose {
            resources: true,
            prompts: true,
        }
    }
}

impl Expose {
    /// Parses `resources,prompts` (either or both).
    pub fn parse(text: &str) -> Result<Expose, ExposeError> {
        let mut expose = Expose {
            resources: false,
            prompts: false,
        };
        for name in text.split(',').map(str::trim) {
            match name {
                "resources" => expose.resources = true,
                "prompts" => expose.prompts = true,
                other => {
                    return Err(ExposeError {
                        text: text.to_string(),
                        part: other.to_string(),
                    })
                }
            }
        }
        Ok(expose)
    }
}

/// How the server is started.
#[derive(Debug, Clone)]
pub struct Options {
    /// The dsh home, the other agents' sessions served beside (or instead of) its own, and
    /// the store that reads it (the composition root every face receives).
    pub workspace: Workspace,
    /// The project directory whose sessions rank first.
    pub cwd: Option<String>,
    /// At most this many resources.
    pub max_resources: usize,
    /// What is offered.
    pub expose: Expose,
    /// `max_reference_bytes` of a read (default 65536).
    pub max_reference_bytes: Option<i64>,
    /// Run discovery's background indexer (labels from first prompts, word lookup, change
    /// notifications through its watcher); `false` only for tests of the bare listing.
    pub index: bool,
}

/// Serves MCP on `reader`/`writer` until the client goes away (end of input).
pub async fn serve<R, W>(options: Options, reader: R, writer: W) -> Result<(), ServeError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let server = Server::new(&options)?;
    // The indexer starts after the first answer (a new home's first listing starts it once
    // the walk is done), or a second in anyway: the first listing never shares the cores with
    // the indexer's pass over the whole home.
    let anyway = {
        let server = server.clone();
        tokio::spawn(async move {
            tokio::time::sleep(server::BACKGROUND_ANYWAY).await;
            server.start_background();
        })
    };
    let running = server
        .clone()
        .serve(wire::Wire::new(reader, writer))
        .await
        .map_err(|e| ServeError::Handshake(e.to_string()))?;
    let notifier = server.expose().resources.then(|| {
        let (server, peer) = (server.clone(), running.peer().clone());
        tokio::spawn(async move { notify_changes(server, peer).await })
    });
    let ended = running.waiting().await;
    anyway.abort();
    if let Some(notifier) = notifier {
        notifier.abort();
    }
    match ended {
        Ok(reason) => {
            tracing::info!(?reason, "MCP client gone");
            Ok(())
        }
        Err(e) => Err(ServeError::Service(e.to_string())),
    }
}

/// Sends `notifications/resources/list_changed` when what a list would show (ids and labels,
/// in rank order) differs from what the host was last told, looking once every
/// [`NOTIFY_EVERY`] (so at most about one a second), and only once the host has listed.
async fn notify_changes(server: Server, peer: rmcp::Peer<rmcp::RoleServer>) {
    let mut tick = tokio::time::interval(NOTIFY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !server.has_listed() {
            continue;
        }
        let Ok(entries) = server.entries().await else {
            continue;
        };
        if server.tell(Server::fingerprint(&entries), false) {
            tracing::debug!("the session list changed");
            if peer.notify_resource_list_changed().await.is_err() {
                return;
            }
        }
    }
}

/// `dsh-refs mcp` on stdin/stdout; returns the exit code.
pub fn run_stdio(options: Options) -> i32 {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("dsh-refs: could not start the async runtime: {e}");
            return 1;
        }
    };
    let result = runtime.block_on(async {
        let (stdin, stdout) = rmcp::transport::stdio();
        serve(options, stdin, stdout).await
    });
    // Never wait for a blocking read still running (a stuck filesystem must not hang the exit).
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(()) => 0,
        Err(error) => {
            let message = error.to_string();
            tracing::error!(%message, "dsh-refs mcp");
            eprintln!("dsh-refs: {}", crate::escape::diagnostic(&message));
            1
        }
    }
}
