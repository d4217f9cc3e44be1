//! `dsh-refs completions SHELL` and `dsh-refs man`: shell completion scripts and the man page,
//! generated at run time from the clap definitions of [`Cli`].
//!
//! Invariant: both describe exactly the command line this binary parses (they are built from
//! the same `Cli::command()`), so they cannot drift from it; they read no home and write only
//! to stdout. Generated at run time rather than by `build.rs` so the build script stays the demo
//! home's alone and packagers (Homebrew, dist) can call the installed binary.
//!
//! Proof: the unit tests below (every subcommand appears in the bash script and the man page).

use super::{Cli, Command};
use clap::CommandFactory;
use std::io::Write;

/// Writes the completion script or the man page for `command` to stdout; the exit code.
pub fn run(command: &Command) -> i32 {
    let mut out = std::io::stdout().lock();
    let result = match command {
        Command::Completions { shell } => write_completions(*shell, &mut out),
        Command::Man => write_man(&mut out),
        _ => return 2,
    };
    match result.and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("dsh-refs: cannot write to stdout: {err}");
            1
        }
    }
}

/// The completion script for `shell`.
pub fn write_completions(shell: clap_complete::Shell, out: &mut dyn Write) -> std::io::Result<()> {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "dsh-refs", out);
    Ok(())
}

/// The dsh-refs(1) man page in roff.
pub fn write_man(out: &mut dyn Write) -> std::io::Result<()> {
    clap_mangen::Man::new(Cli::command().name("dsh-refs")).render(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_and_man_name_every_subcommand() {
        let mut bash = Vec::new();
        write_completions(clap_complete::Shell::Bash, &mut bash).unwrap();
        let bash = String::from_utf8(bash).unwrap();
        let mut man = Vec::new();
        write_man(&mut man).unwrap();
        let man = String::from_utf8(man).unwrap();
        assert!(
            man.starts_with(".ie") || man.contains(".TH dsh-refs"),
            "{man}"
        );
        for sub in Cli::command().get_subcommands() {
            let name = sub.get_name();
            assert!(bash.contains(name), "bash completions lack {name}");
            assert!(man.contains(name), "man page lacks {name}");
        }
    }
}
