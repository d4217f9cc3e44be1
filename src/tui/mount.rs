//! The session-reference mount, as the bundle names it: it lives in the terminal-free host room
//! (`crate::host::mount`) so that `exec` and the MCP server run the same submit transaction;
//! this path is kept for hosts that mount the TUI's pieces.

pub use crate::host::mount::*;
