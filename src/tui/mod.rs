//! The standard terminal bundle: composer, `@` popup, transcript, status and key help, and the
//! app loop that wires them to the agent runtime.
//!
//! The widgets are pure: state structs plus views that draw into a ratatui buffer through
//! [`Renderable`], with no terminal or async I/O, so a host can mount single pieces in its own
//! TUI and every visible state can be snapshot-tested. I/O sits in a few rooms at the edge:
//! `terminal` (modes, restore, panic hook), `file_index` (the walk and the matcher thread),
//! `prompt_history` (`<home>/history.jsonl`) and `app` (the loop and its tasks, in rooms of one
//! idea under `app/`). The submit transaction and the `@path` rules are the terminal-free host
//! room's ([`crate::host`]: `host::mount` and `host::attach`), and the bundle, like its callers,
//! names them there. `keys` is the one key table every handler and both help views read;
//! `app/focus.rs` is the one focus stack keys go down, and `lookup` merges the popup's session
//! rows from the contract and discovery.

pub mod app;
pub mod composer;
pub(crate) mod file_index;
pub(crate) mod file_match;
pub mod focus;
pub mod help;
pub mod inline;
pub mod keys;
pub(crate) mod lookup;
pub mod picker;
pub mod popup;
pub(crate) mod prompt_history;
pub(crate) mod queued;
pub(crate) mod render;
pub(crate) mod scroll;
pub mod slash;
pub mod slash_command;
pub mod snapshot;
pub(crate) mod status;
pub(crate) mod style;
pub(crate) mod terminal;
pub(crate) mod text;
pub(crate) mod token;
pub mod transcript;

pub use file_index::{spawn_file_index, walk as walk_files, FileFinder};
pub use file_match::{FileIndex, FileMatcher, FileRow};
pub use lookup::{merge, Merged, PopupRow, SessionDetails, POPUP_LIMIT};
pub use queued::QueuedPanel;
pub use render::Renderable;
pub use status::StatusLine;
pub use terminal::set_mouse_capture;
