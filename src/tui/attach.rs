//! File attachments, as the bundle names them: the `@path` rules live in the terminal-free host
//! room ([`crate::host::attach`]), where the submit transaction reads the chosen files; this
//! path is kept for the TUI's file chips and for hosts that use them.

pub use crate::host::attach::*;
