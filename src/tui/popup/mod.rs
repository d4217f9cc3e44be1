//! The `@` completion popup (SPEC §5.1): its state and its view.
//!
//! Session lookups are slow (they walk the store) and asynchronous, so the state never waits:
//! every query change issues a fresh [`QueryId`], the caller runs the lookup wherever it likes,
//! and only the answer to the latest id is applied, so a slow answer to an old query can never
//! overwrite a newer one. Until the answer arrives, the previous answer stays on screen, filtered
//! locally with the service's own rule, so rows don't flicker while typing. File rows are
//! matched synchronously from a prebuilt [`crate::tui::file_match::FileIndex`].
//!
//! Rooms, as ratatui splits its list: `state` (the state and the lookups it asks for),
//! `rendering` (the view that draws it) and `preview` (the pane over the popup showing the
//! highlighted session's last messages).

pub(crate) mod preview;
pub(crate) mod rendering;
pub(crate) mod state;
#[cfg(test)]
mod tests;

pub use super::token::PopupItem;
pub use preview::PreviewPane;
pub use rendering::PopupView;
pub use state::{LookupRequest, PopupState, QueryId, DEFAULT_PAGE_ROWS};
