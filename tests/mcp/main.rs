//! `dsh-refs mcp` (SPEC §10), driven as a host drives it: the real binary as a child process
//! through `rmcp`'s own client (and raw JSON-RPC lines where the wire itself is the point), and
//! the server in process over `tokio::io::duplex` for concurrent reads.

#[path = "../support/mod.rs"]
mod support;

mod more_agents;
mod server;
mod wire;
