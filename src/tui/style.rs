//! The bundle's few styles, in one place so every widget agrees on what "dim" or "matched"
//! looks like and a host can see the whole palette at a glance.

use ratatui::style::{Color, Modifier, Style};

/// Secondary information: ids, cwds, ages, cards.
pub fn dim() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

/// Characters that matched the query.
pub fn matched() -> Style {
    Style::new()
        .fg(Color::Yellow)
        .add_modifier(Modifier::BOLD)
        .remove_modifier(Modifier::DIM)
}

/// The selected popup row.
pub fn selected() -> Style {
    Style::new().bg(Color::DarkGray)
}

/// Escaped control characters, so they read as something other than ordinary text.
pub fn escaped() -> Style {
    Style::new().fg(Color::Magenta)
}

/// A mention element in the composer.
pub fn mention() -> Style {
    Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD)
}

/// The `session` tag of popup rows, another agent's name and the picker's selection mark.
pub fn session_tag() -> Style {
    Style::new().fg(Color::Cyan)
}

/// The `file` tag of popup rows.
pub fn file_tag() -> Style {
    Style::new().fg(Color::Green)
}

/// Errors: failed lookups, error notices, refused submissions.
pub fn error() -> Style {
    Style::new().fg(Color::Red)
}

/// The borders of the composer, the popup, the menu and the overlay.
pub fn border() -> Style {
    Style::new().fg(Color::DarkGray)
}

/// The `›` before the user's text in the composer, the popup preview and the transcript.
pub fn user_prefix() -> Style {
    Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD)
}

/// The `steer` tag before a steering message in the transcript.
pub fn steer_tag() -> Style {
    Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD)
}

/// Keys and headings in the help line and the overlay.
pub fn key() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}
