use clap::Parser;
use dsh_session_references::cli::{Cli, Command};
use dsh_session_references::session::paths::resolve_home;

fn main() {
    let cli = Cli::parse();
    let home = resolve_home(cli.home.as_deref());
    let code = match &cli.command {
        Some(
            command @ (Command::Uri(_)
            | Command::Mention(_)
            | Command::Candidates { .. }
            | Command::Prepare { .. }),
        ) => dsh_session_references::reference::commands::run(command, &home),
        Some(Command::Sessions { json }) => {
            dsh_session_references::session::commands::sessions(&home, *json)
        }
        None => {
            eprintln!("not wired yet");
            2
        }
    };
    std::process::exit(code);
}
