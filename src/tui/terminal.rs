//! The real terminal: raw mode, the alternate screen, bracketed paste, mouse-wheel reports and
//! keyboard enhancement (where the terminal supports it) on the way in, all of it undone on the
//! way out, on a panic too.
//!
//! Keyboard enhancement (the kitty protocol's "disambiguate" level) is what lets Shift+Enter
//! arrive as itself; terminals without it keep Alt+Enter and Ctrl-J for a newline. Mouse
//! reports are asked for button presses only (`?1000h` with SGR coordinates), which carries the
//! wheel; most terminals still select text with Shift held.
//!
//! Invariant: whatever [`TerminalGuard::enter`] turned on, [`restore`] turns off, and it runs
//! exactly when the guard drops or a panic unwinds past the installed hook, so a crash never
//! leaves the user's shell in raw mode. Everything here is I/O at the edge; the widgets never
//! see a terminal. Proof: the tmux end-to-end runs (`tests/e2e_tmux.rs`) quit with Ctrl-C and
//! find the TUI's screen gone.

use crossterm::event::{self, KeyboardEnhancementFlags};
use crossterm::{cursor, execute, terminal, Command};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once keyboard enhancement flags were pushed, so restore pops them (and only then).
static ENHANCED: AtomicBool = AtomicBool::new(false);

/// Button and wheel reports in SGR encoding, without motion tracking.
struct WheelReports(bool);

impl Command for WheelReports {
    fn write_ansi(&self, f: &mut impl std::fmt::Write) -> std::fmt::Result {
        if self.0 {
            f.write_str("\x1b[?1000h\x1b[?1006h")
        } else {
            f.write_str("\x1b[?1006l\x1b[?1000l")
        }
    }
}

/// Holds the terminal in the TUI's modes; dropping it restores them.
pub struct TerminalGuard {
    _private: (),
}

impl TerminalGuard {
    /// Raw mode, the alternate screen, bracketed paste, wheel reports and (when supported)
    /// keyboard enhancement. Call before anything reads the terminal's input: the support
    /// query reads the terminal's answer.
    pub fn enter() -> std::io::Result<TerminalGuard> {
        terminal::enable_raw_mode()?;
        let guard = TerminalGuard { _private: () };
        let mut out = std::io::stdout();
        execute!(
            out,
            terminal::EnterAlternateScreen,
            event::EnableBracketedPaste,
            WheelReports(true)
        )?;
        if matches!(terminal::supports_keyboard_enhancement(), Ok(true)) {
            let flags = KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES;
            if execute!(out, event::PushKeyboardEnhancementFlags(flags)).is_ok() {
                ENHANCED.store(true, Ordering::SeqCst);
            }
        }
        Ok(guard)
    }
}

/// Undoes every mode [`TerminalGuard::enter`] set; safe to call more than once.
pub fn restore() {
    let mut out = std::io::stdout();
    if ENHANCED.swap(false, Ordering::SeqCst) {
        let _ = execute!(out, event::PopKeyboardEnhancementFlags);
    }
    let _ = execute!(
        out,
        WheelReports(false),
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
