//! What a widget did with a key: the one answer every layer of the TUI gives.
//!
//! Purpose: the composer, the `@` popup, the `/` menu, the key overlay and the resume picker
//! each take a key (read through the key table, [`super::keys`]) and say what it did in the
//! same words: taken ([`Handled::Consumed`]), not theirs ([`Handled::Ignored`]: the layer below
//! gets it), or taken with something for the host to do ([`Handled::Emit`] with a
//! [`Command`]). A host that mounts single widgets reads one type, and the app's focus stack
//! (`app/focus.rs`) passes a key down its layers until one does not ignore it.
//!
//! Invariant: a widget changes its own state only; whatever reaches outside it (the composer's
//! text from the popup, a search, a resume, a submit) is a [`Command`] the host carries out.
//! Proof: each widget's unit tests assert the answer of every key they bind, and the app's
//! tests in `tests/tui/app.rs` and `tests/tui/keys.rs` drive the stack.

use crate::tui::popup::PopupItem;
use crate::tui::slash_command;

/// What a layer did with a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// Taken: no layer below sees it.
    Consumed,
    /// Not this layer's: offered to the one below.
    Ignored,
    /// Taken, and the host has this to do.
    Emit(Command),
}

/// What a layer asks of the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Insert the popup's accepted row into the composer.
    Insert(PopupItem),
    /// Put `/NAME ` in the composer (the menu's completion).
    Complete(slash_command::Command),
    /// Run a `/` command picked in the menu.
    Run(slash_command::Command),
    /// The picker's query changed: search for it.
    Search {
        /// The picker's generation of the query (answers of older ones are stale).
        generation: u64,
        /// The query typed.
        query: String,
    },
    /// Resume this session (picked in the picker).
    Resume(String),
    /// Close the picker without a pick.
    ClosePicker,
    /// Close the key overlay.
    CloseOverlay,
    /// Send the composer's message (the submit transaction).
    Submit,
    /// The composer's text changed (re-sync the popup and the menu).
    Edited,
    /// Only the composer's cursor moved (re-sync the popup).
    Moved,
}

impl Handled {
    /// [`Handled::Consumed`] when `taken`, else [`Handled::Ignored`].
    pub fn consumed_if(taken: bool) -> Handled {
        if taken {
            Handled::Consumed
        } else {
            Handled::Ignored
        }
    }

    /// `Emit(command)` when `taken`, else [`Handled::Ignored`].
    pub fn emit_if(taken: bool, command: Command) -> Handled {
        if taken {
            Handled::Emit(command)
        } else {
            Handled::Ignored
        }
    }
}
