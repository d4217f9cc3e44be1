//! The real terminal: raw mode, the alternate screen and bracketed paste on the way in, all of
//! it undone on the way out, on a panic too.
//!
//! Invariant: whatever [`TerminalGuard::enter`] turned on, [`restore`] turns off, and it runs
//! exactly when the guard drops or a panic unwinds past the installed hook, so a crash never
//! leaves the user's shell in raw mode. Everything here is I/O at the edge; the widgets never
//! see a terminal. Proof: the tmux end-to-end runs (`tests/e2e_tmux.rs`) quit with Ctrl-C and
//! find the TUI's screen gone.

use crossterm::event;
use crossterm::{cursor, execute, terminal};

/// Holds the terminal in the TUI's modes; dropping it restores them.
pub struct TerminalGuard {
    _private: (),
}

impl TerminalGuard {
    /// Raw mode, the alternate screen and bracketed paste.
    pub fn enter() -> std::io::Result<TerminalGuard> {
        terminal::enable_raw_mode()?;
        let guard = TerminalGuard { _private: () };
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            event::EnableBracketedPaste
        )?;
        Ok(guard)
    }
}

/// Undoes every mode [`TerminalGuard::enter`] set; safe to call more than once.
pub fn restore() {
    let _ = execute!(
        std::io::stdout(),
        event::DisableBracketedPaste,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
    let _ = terminal::disable_raw_mode();
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Chains a panic hook that restores the terminal before the panic message is printed.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}
