//! The real terminal: raw mode, the alternate screen (not in inline mode, which draws on the
//! normal screen: `super::inline`), bracketed paste, mouse-wheel reports (not inline either:
//! there the wheel scrolls the terminal's own scrollback) and keyboard enhancement (where the
//! terminal supports it) on the way in, all of it undone on the way out, on a panic too.
//!
//! Keyboard enhancement (the kitty protocol's "disambiguate" level) is what lets Shift+Enter
//! arrive as itself; terminals without it keep Alt+Enter and Ctrl-J for a newline. Mouse
//! reports are asked for button presses only (`?1000h` with SGR coordinates), which carries the
//! wheel; most terminals still select text with Shift held, and `--no-mouse`
//! ([`set_mouse_capture`]) leaves the mouse to the terminal altogether. [`osc52`] spells the
//! clipboard sequence `/copy` writes.
//!
//! Invariant: whatever [`TerminalGuard::enter`] turned on, [`restore`] turns off, and it runs
//! exactly when the guard drops or a panic unwinds past the installed hook, so a crash never
//! leaves the user's shell in raw mode. Everything here is I/O at the edge; the widgets never
//! see a terminal. Proof: the tmux end-to-end runs (`tests/e2e/tmux.rs`) quit with Ctrl-C and
//! find the TUI's screen gone.

use crossterm::event::{self, KeyboardEnhancementFlags};
use crossterm::{cursor, execute, terminal, Command};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once keyboard enhancement flags were pushed, so restore pops them (and only then).
static ENHANCED: AtomicBool = AtomicBool::new(false);

/// Set while the alternate screen is entered, so restore leaves it (and only then).
static ALTERNATE: AtomicBool = AtomicBool::new(false);

/// Whether [`TerminalGuard::enter`] asks for mouse reports (the wheel scrolls the transcript).
/// Off (`--no-mouse`), the terminal keeps its own selection and copy; PgUp/PgDn still scroll.
static MOUSE: AtomicBool = AtomicBool::new(true);

/// Set before the terminal is entered: whether to capture the mouse.
pub fn set_mouse_capture(on: bool) {
    MOUSE.store(on, Ordering::SeqCst);
}

/// `text` as an OSC 52 sequence that sets the system clipboard (`c`), base64 encoded, so no byte
/// of it reaches the terminal raw.
pub fn osc52(text: &str) -> String {
    use base64::Engine;
    format!(
        "\x1b]52;c;{}\x07",
        base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
    )
}

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
    /// keyboard enhancement; `inline`: neither the alternate screen nor wheel reports. Call
    /// before anything reads the terminal's input: the support query reads the terminal's
    /// answer.
    pub fn enter(inline: bool) -> std::io::Result<TerminalGuard> {
        terminal::enable_raw_mode()?;
        let guard = TerminalGuard { _private: () };
        let mut out = std::io::stdout();
        if !inline {
            execute!(out, terminal::EnterAlternateScreen)?;
            ALTERNATE.store(true, Ordering::SeqCst);
        }
        execute!(
            out,
            event::EnableBracketedPaste,
            WheelReports(!inline && MOUSE.load(Ordering::SeqCst))
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
        cursor::Show
    );
    if ALTERNATE.swap(false, Ordering::SeqCst) {
        let _ = execute!(out, terminal::LeaveAlternateScreen);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc52_carries_the_text_encoded() {
        assert_eq!(osc52("hi\u{1b}[2J"), "\x1b]52;c;aGkbWzJK\x07");
        assert_eq!(osc52(""), "\x1b]52;c;\x07");
    }
}
