//! The machine-readable reference subcommands of `dsh-refs` (SPEC §6).

use crate::cli::Command;
use std::path::Path;

/// Runs `uri`, `mention`, `candidates` or `prepare`; prints the result and returns the exit code.
pub fn run(command: &Command, home: &Path) -> i32 {
    let _ = (command, home);
    eprintln!("not implemented yet");
    2
}
