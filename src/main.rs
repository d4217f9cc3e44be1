use clap::Parser;
use dsh_session_references::cli::{Cli, Command, Compression, ModelArgs, TuiArgs};
use dsh_session_references::session::paths::resolve_home;
use dsh_session_references::session::Encoding;
use dsh_session_references::tui::app::{run_terminal_with, AppOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Some(
            command @ (Command::Uri(_)
            | Command::Mention(_)
            | Command::Candidates { .. }
            | Command::Prepare { .. }),
        ) => dsh_session_references::reference::commands::run(
            command,
            &resolve_home(cli.home.as_deref()),
        ),
        Some(Command::Sessions { json }) => dsh_session_references::session::commands::sessions(
            &resolve_home(cli.home.as_deref()),
            *json,
        ),
        Some(Command::Exec(args)) => {
            let home = resolve_home(cli.home.as_deref());
            init_tracing(&home);
            dsh_session_references::cli::exec::run(
                &home,
                args,
                &cli.model.flags(false),
                encoding(&cli.tui),
            )
        }
        None => run_tui(cli.home.as_deref(), &cli.tui, &cli.model),
    };
    std::process::exit(code);
}

fn encoding(args: &TuiArgs) -> Option<Encoding> {
    args.compression.map(|c| match c {
        Compression::None => Encoding::Plain,
        Compression::Zstd => Encoding::Zstd,
    })
}

fn run_tui(home: Option<&Path>, args: &TuiArgs, model: &ModelArgs) -> i32 {
    let home = if args.demo {
        match dsh_session_references::demo::install_demo_home() {
            Ok(home) => home,
            Err(e) => {
                eprintln!("dsh-refs: could not install the demo home: {e}");
                return 1;
            }
        }
    } else {
        resolve_home(home)
    };
    init_tracing(&home);
    // A configured provider whose key is missing is a start-up error, before the terminal.
    let choice = match dsh_session_references::agent::config::load(&home, &model.flags(args.demo)) {
        Ok(choice) => choice,
        Err(e) => {
            eprintln!("dsh-refs: {e}");
            return 1;
        }
    };
    let cwd = std::env::current_dir()
        .ok()
        .map(|d| d.to_string_lossy().into_owned());
    let options = AppOptions {
        home: home.clone(),
        resume: args.resume.clone(),
        offline_delay: Duration::from_millis(args.offline_delay_ms),
        encoding: encoding(args),
        cwd,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("dsh-refs: could not start the async runtime: {e}");
            return 1;
        }
    };
    let result = runtime.block_on(run_terminal_with(options, choice));
    // Do not wait for lingering blocking reads (a stuck filesystem must not hang the exit).
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => {
            if args.demo {
                println!("demo home kept at {}", home.display());
            }
            0
        }
        Err(e) => {
            eprintln!("dsh-refs: {e}");
            1
        }
    }
}

/// Diagnostics go to `<home>/logs/dsh-refs.log` (filtered by RUST_LOG), never to the screen.
fn init_tracing(home: &Path) {
    let dir: PathBuf = home.join("logs");
    let file = std::fs::create_dir_all(&dir).and_then(|_| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("dsh-refs.log"))
    });
    let Ok(file) = file else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}
