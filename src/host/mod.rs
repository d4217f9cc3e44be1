//! The host room: what any front end needs to offer `@` references, without a terminal.
//!
//! Purpose: the TUI, `exec` and the MCP server all send a message the same way, so the submit
//! transaction lives here, below every face: `mount` (the [`AgentSurface`] a host implements,
//! the [`SessionReferenceMount`] that looks up candidates, previews one mention and runs the
//! transaction), `attach` (the `@path` rules: finding tokens, sizing a path, reading exactly
//! the chosen files into bounded context messages) and `workspace`, the composition root
//! ([`Workspace`]: the home, the sources served, the store, discovery and the reference service,
//! resolved and opened once; every face receives one and builds none of them itself), and
//! `age`, the one age format of every face ([`format_age`]).
//!
//! Invariant: no ratatui, crossterm or other terminal crate is named here, and the room builds
//! with no features at all (`cargo check --no-default-features`); only the typed `@PREFIX`
//! resolution ([`SessionReferenceMount::resolve_typed`]) needs feature `discovery`, whose prefix
//! rules it applies. It uses `session`, `reference`, `agent` and `discovery`; nothing below it
//! uses it, and `tui`, `mcp` and `cli` may. Proof: `tests/architecture.rs` (the layer edges,
//! and `faces_receive_the_workspace`: no face opens the store, the sources or discovery) and the
//! bare build in CI (`.ci/run`).

mod age;
// Parts of this room serve only the faces (the TUI, the command line, the MCP server); a
// build without them leaves those parts unused.
#[cfg_attr(partial_faces, allow(dead_code))]
pub(crate) mod attach;
pub(crate) mod mount;
pub mod workspace;

pub use age::{format_age, format_age_secs};
pub use attach::{ChosenFile, InspectError, Inspected};
pub use mount::{
    AgentSurface, Preview, SessionReferenceMount, Submission, SubmitError, Submitted,
    MIN_AMBIGUOUS_PREFIX, PREVIEW_MESSAGES,
};
pub use workspace::{Settings, Workspace};

/// A size as every row, badge and card shows it: `512 B`, `48 KiB`, `3.1 MiB` (binary units,
/// KiB rounded up so a non-empty size is never `0 KiB`).
pub fn format_size(n: u64) -> String {
    match n {
        0..=1023 => format!("{n} B"),
        1024..=1_048_575 => format!("{} KiB", n.div_ceil(1024)),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}
