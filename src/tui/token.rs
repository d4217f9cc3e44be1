//! The `@` token under the composer's cursor, and what the popup offers to replace it with.
//!
//! This is the whole vocabulary the composer and the popup share, so neither imports the other:
//! the composer finds an [`ActiveToken`] and inserts a [`PopupItem`]; the popup follows the
//! token and hands back an item. Plain data, no logic; the scanner that finds the token is
//! `Composer::active_token` (tested in `composer`'s unit tests).

use super::file_match::FileRow;
use crate::reference::Candidate;

/// The `@` token under the cursor (SPEC §5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveToken {
    /// Element index of the `@`; identifies the token while it is being typed.
    pub start: usize,
    /// Element index just past the token.
    pub end: usize,
    /// The text after `@` (inside the quotes for a quoted token).
    pub query: String,
    /// `@"…`: paths only.
    pub quoted: bool,
}

/// What the popup offers for insertion.
#[derive(Debug, Clone, PartialEq)]
pub enum PopupItem {
    /// A session row: insert a mention of it.
    Session(Candidate),
    /// A file row: insert `@path` (`@"path"` when it holds whitespace).
    File(FileRow),
}
