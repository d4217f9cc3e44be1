//! The app's file-chip state (what `file_chips.rs` works on), apart from that work, so the
//! app's state names this file and never the loop's code.
//!
//! Invariant: plain state; every change to it is made by `file_chips.rs`. Proof:
//! `tests/tui/attach.rs`.

use crate::host::attach::Inspected;
use crate::tui::composer::PlainToken;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The app's file-chip state: inspections under way and outside files awaiting an answer.
#[derive(Debug, Default)]
pub(super) struct FileChips {
    pub(super) serial: u64,
    /// Inspections under way: (serial, the token, how it was asked for).
    pub(super) pending: Vec<(u64, PlainToken, Asked)>,
    /// Files outside the cwd waiting for a yes or no, the first one shown.
    pub(super) confirm: VecDeque<(PlainToken, Inspected)>,
    /// When the first of `confirm` went up: keys sooner than [`CONFIRM_GUARD`] after are typing
    /// that was already under way, not an answer.
    pub(super) shown_at: Option<Instant>,
}

/// What asked for a chip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// A file row picked in the popup: a failure is said.
    Picked,
    /// A space typed after the token: a token naming no file is just text.
    Space,
    /// Tab after the token: one naming no file may name a session by id or prefix.
    Tab,
}

/// Keys that arrive this soon after the prompt appeared do not answer it (they go on to the
/// composer): a `y` typed in the same burst as the space that raised it (`@../x yes`) must not
/// send the file.
pub(super) const CONFIRM_GUARD: Duration = Duration::from_millis(250);

impl FileChips {
    /// A chip is being sized or confirmed: a send now would not show it first.
    pub(super) fn busy(&self) -> bool {
        !self.pending.is_empty() || !self.confirm.is_empty()
    }

    /// The outside file the prompt asks about, if one does.
    pub(super) fn asking(&self) -> Option<&Inspected> {
        self.confirm.front().map(|(_, inspected)| inspected)
    }
}
