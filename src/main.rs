use clap::Parser;
use dsh_session_references::cli::Cli;

fn main() {
    let cli = Cli::parse();
    eprintln!("not wired yet: {cli:?}");
    std::process::exit(2);
}
