//! The slash commands themselves: their names, aliases and hints, and what a typed `/line`
//! means.
//!
//! Purpose: the vocabulary both the `/` menu (`slash.rs`) and the focus's commands
//! (`focus.rs`) speak, in a file of its own so that neither imports the other. Invariant: pure
//! data and parsing, no terminal; every alias names a command of [`COMMANDS`]. Proof: the menu's
//! unit tests in `slash.rs` and the TUI's snapshot tests.

/// A command of the menu.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `/help`: open the key-help overlay.
    Help,
    /// `/new`: start a new session.
    New,
    /// `/resume ID`: continue another session (by id or unique prefix).
    Resume,
    /// `/model [NAME]`: show the model, or switch this session to model `NAME`.
    Model,
    /// `/sessions`: list recent sessions.
    Sessions,
    /// `/copy`: the last answer to the clipboard, through OSC 52.
    Copy,
    /// `/quit`: leave.
    Quit,
}

/// Every command: (command, name without `/`, argument hint, what it does).
pub const COMMANDS: &[(Command, &str, &str, &str)] = &[
    (Command::Help, "help", "", "keys and commands"),
    (Command::New, "new", "", "start a new session"),
    (
        Command::Resume,
        "resume",
        "[ID|WORDS]",
        "continue another session (words: find it)",
    ),
    (
        Command::Model,
        "model",
        "[NAME]",
        "show the model, or switch this session to NAME",
    ),
    (Command::Sessions, "sessions", "", "list recent sessions"),
    (
        Command::Copy,
        "copy",
        "",
        "copy the last answer to the clipboard (OSC 52)",
    ),
    (Command::Quit, "quit", "", "leave"),
];

/// Other names of commands, as Codex and Claude Code users type them: `/exit` quits, `/clear`
/// starts a new session.
pub const ALIASES: &[(&str, Command)] = &[("exit", Command::Quit), ("clear", Command::New)];

impl Command {
    /// The other names of the command (see [`ALIASES`]).
    pub fn aliases(self) -> impl Iterator<Item = &'static str> {
        ALIASES
            .iter()
            .filter(move |(_, c)| *c == self)
            .map(|(name, _)| *name)
    }

    /// The command's name without the `/`, e.g. `resume`.
    pub fn name(self) -> &'static str {
        COMMANDS
            .iter()
            .find(|(c, ..)| *c == self)
            .map_or("", |(_, name, ..)| name)
    }

    fn by_name(name: &str) -> Option<Command> {
        COMMANDS
            .iter()
            .find(|(_, n, ..)| *n == name)
            .map(|(c, ..)| *c)
            .or_else(|| ALIASES.iter().find(|(n, _)| *n == name).map(|(_, c)| *c))
    }
}

/// What a submitted line that starts with `/` means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashLine {
    /// A known command and its argument (trimmed; empty when none).
    Run(Command, String),
    /// `/word` that names no command: sent only after confirmation.
    Unknown(String),
}

/// `None` for a line that does not start with `/` (or starts with `//`, an escape for text
/// that begins with a slash, or `/` followed by whitespace).
pub fn parse_line(text: &str) -> Option<SlashLine> {
    let rest = text.trim_start().strip_prefix('/')?;
    let name_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..name_end];
    if name.is_empty() || name.starts_with('/') {
        return None;
    }
    let arg = rest[name_end..].trim().to_string();
    Some(match Command::by_name(name) {
        Some(command) => SlashLine::Run(command, arg),
        None => SlashLine::Unknown(name.to_string()),
    })
}
