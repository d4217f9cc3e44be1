//! `dsh-refs` (SPEC §6): parses the command line, runs a subcommand of the library's `cli`
//! module, or resolves the home, the model and the session to start and opens the TUI. Exits 0
//! on success, 1 with a clear error on stderr (or a JSON error on stdout for the reference
//! commands), 2 on a usage error.

use clap::Parser;
use dsh_session_references::cli::lifecycle::{
    command_prefix, find_sessions, recent_sessions, resolve_start_hinted, resume_hint, Start,
};
use dsh_session_references::cli::{Cli, Command, Compression, ModelArgs, TuiArgs};
use dsh_session_references::escape::{diagnostic, escape_line};
use dsh_session_references::host::Workspace;
use dsh_session_references::session::Encoding;
use dsh_session_references::tui::app::{run_terminal_on, AppOptions, Wiring};
use dsh_session_references::tui::keys::Keymap;
use std::path::Path;
use std::time::Duration;

fn main() {
    let cli = Cli::parse();
    // Before any thread starts. A listing projects no conversation, so its threads keep glibc's
    // arena per thread instead of contending for one lock (a warm listing of a heavy home of
    // two agents: about half the wall time). `prepare` reads a heavy session on every core,
    // each core's thread allocating as it folds its part: an arena per core (on one, the
    // parts of a 60 MB session took 16.5 ms against 11.5 ms, for 2 MiB more peak). The
    // long-running faces keep one arena and give memory back.
    match &cli.command {
        Some(Command::Sessions { .. }) => {}
        Some(Command::Prepare { .. }) => {
            malloc_arenas(std::thread::available_parallelism().map_or(1, |n| n.get()));
            keep_the_heap();
        }
        _ => malloc_arenas(1),
    }
    // `uri` and `mention` read no home; everything else works on the one workspace.
    if let Some(command @ (Command::Uri(_) | Command::Mention(_))) = &cli.command {
        let code = dsh_session_references::cli::reference::run(command, None);
        std::process::exit(code);
    }
    // `completions` and `man` print what the clap definitions say, with no home.
    if let Some(command @ (Command::Completions { .. } | Command::Man)) = &cli.command {
        std::process::exit(dsh_session_references::cli::docs::run(command));
    }
    // `mcp setup HOST` edits a host's configuration file, with no home either.
    #[cfg(feature = "mcp")]
    if let Some(Command::Mcp(dsh_session_references::cli::McpArgs {
        action: Some(dsh_session_references::cli::McpAction::Setup(args)),
        ..
    })) = &cli.command
    {
        std::process::exit(dsh_session_references::cli::setup::run(args));
    }
    let workspace = match cli.resolve() {
        Ok(workspace) => workspace,
        Err(message) => {
            eprintln!("dsh-refs: {message}");
            std::process::exit(1);
        }
    };
    let home = workspace.home();
    let code = match &cli.command {
        Some(command @ (Command::Candidates { .. } | Command::Prepare { .. })) => {
            dsh_session_references::cli::reference::run(command, Some(&workspace))
        }
        Some(Command::Sessions { json }) => {
            dsh_session_references::cli::sessions::sessions(&workspace, *json)
        }
        Some(Command::Search(args)) => dsh_session_references::cli::search::run(&workspace, args),
        Some(Command::Exec(args)) => {
            init_tracing(home);
            dsh_session_references::cli::exec::run(
                &workspace,
                args,
                &cli.model.flags(workspace.demo()),
                encoding(&cli.tui),
            )
        }
        #[cfg(feature = "mcp")]
        Some(Command::Mcp(args)) => {
            init_tracing(home);
            let cwd = args.cwd.clone().or_else(|| {
                std::env::current_dir()
                    .ok()
                    .map(|d| d.to_string_lossy().into_owned())
            });
            let options = dsh_session_references::mcp::Options {
                workspace: workspace.clone(),
                cwd,
                max_resources: usize::try_from(args.max_resources).unwrap_or(usize::MAX),
                expose: args.expose,
                max_reference_bytes: args.max_reference_bytes,
                index: true,
            };
            match &args.http {
                Some(listen) => dsh_session_references::mcp::http::run_http(
                    options,
                    &dsh_session_references::mcp::http::HttpOptions {
                        listen: listen.clone(),
                        token_file: args.token_file.clone(),
                    },
                ),
                None => dsh_session_references::mcp::run_stdio(options),
            }
        }
        Some(command @ (Command::Uri(_) | Command::Mention(_))) => {
            dsh_session_references::cli::reference::run(command, Some(&workspace))
        }
        Some(command @ (Command::Completions { .. } | Command::Man)) => {
            dsh_session_references::cli::docs::run(command)
        }
        None => run_tui(&workspace, cli.home.as_deref(), &cli.tui, &cli.model),
    };
    // `exit` runs no destructors: what the next process can reuse is written now.
    workspace.flush();
    std::process::exit(code);
}

fn encoding(args: &TuiArgs) -> Option<Encoding> {
    args.compression.map(|c| match c {
        Compression::None => Encoding::Plain,
        Compression::Zstd => Encoding::Zstd,
    })
}

fn run_tui(
    workspace: &Workspace,
    home_flag: Option<&Path>,
    args: &TuiArgs,
    model: &ModelArgs,
) -> i32 {
    let home = workspace.home().to_path_buf();
    init_tracing(&home);
    // A configured provider whose key is missing is a start-up error, before the terminal.
    let choice = match dsh_session_references::agent::config::load(&home, &model.flags(args.demo)) {
        Ok(choice) => choice,
        Err(e) => {
            eprintln!("dsh-refs: {}", diagnostic(&e.to_string()));
            return 1;
        }
    };
    let cwd = std::env::current_dir()
        .ok()
        .map(|d| d.to_string_lossy().into_owned());
    let mut pick = None;
    let resume = match resolve_start_hinted(
        workspace,
        args.resume.as_deref(),
        args.continue_last,
        cwd.as_deref(),
        &command_prefix(home_flag, args.demo),
    ) {
        Ok(Start::New) => None,
        Ok(Start::Resume(id)) => Some(id),
        // On a terminal the app opens with the picker up; without one, what it would offer.
        Ok(Start::Pick(query)) if on_terminal() => {
            pick = Some(query);
            None
        }
        Ok(Start::Pick(query)) if query.is_empty() => {
            return print_recent(workspace, cwd.as_deref(), args.demo, home_flag)
        }
        Ok(Start::Pick(query)) => {
            return print_found(workspace, cwd.as_deref(), &query, args.demo, home_flag)
        }
        Err(message) => {
            eprintln!("dsh-refs: {message}");
            return 1;
        }
    };
    let options = AppOptions {
        home: home.clone(),
        resume,
        offline_delay: Duration::from_millis(args.offline_delay_ms),
        encoding: encoding(args),
        cwd,
        sources: workspace.sources().clone(),
    };
    // The binary wires the store and the model into the TUI.
    let mut wiring = match Wiring::for_workspace(workspace.clone(), &options, &choice) {
        Ok(wiring) => wiring,
        Err(e) => {
            eprintln!("dsh-refs: {}", diagnostic(&e.to_string()));
            return 1;
        }
    };
    // The user's `[keys]` overrides; a wrong one is a start-up error naming it.
    let keys = dsh_session_references::agent::config::load_keys(&home)
        .map_err(|e| e.to_string())
        .and_then(|overrides| Keymap::with_overrides(&overrides).map_err(|e| e.to_string()));
    match keys {
        Ok(keymap) => wiring.keymap = std::sync::Arc::new(keymap),
        Err(e) => {
            eprintln!(
                "dsh-refs: {}: {}",
                home.join("config.toml").display(),
                diagnostic(&e)
            );
            return 1;
        }
    }
    let inline = match inline_mode(args, &home) {
        Ok(inline) => inline,
        Err(e) => {
            eprintln!("dsh-refs: {}", diagnostic(&e));
            return 1;
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!(
                "dsh-refs: could not start the async runtime: {}",
                diagnostic(&e.to_string())
            );
            return 1;
        }
    };
    dsh_session_references::tui::set_mouse_capture(!args.no_mouse);
    let result = runtime.block_on(run_terminal_on(options, wiring, pick, inline));
    // Do not wait for lingering blocking reads (a stuck filesystem must not hang the exit).
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(session_id) => {
            if args.demo {
                println!("demo home: {}", diagnostic(&home.display().to_string()));
            }
            // Only a session that was written can be resumed.
            if workspace.store().log_path(&session_id).is_ok() {
                println!(
                    "resume this session with: {}",
                    resume_hint(&session_id, home_flag, args.demo)
                );
            }
            0
        }
        Err(e) => {
            // A resumed log's corruption report quotes its path and record: show it inert.
            eprintln!("dsh-refs: {}", diagnostic(&e.to_string()));
            1
        }
    }
}

/// Inline or the alternate screen: `--inline` / `--no-inline`, else `inline` in the `[tui]`
/// table of `<home>/config.toml`, else the alternate screen.
fn inline_mode(args: &TuiArgs, home: &Path) -> Result<bool, String> {
    if args.inline || args.no_inline {
        return Ok(args.inline);
    }
    dsh_session_references::agent::config::load_tui(home)
        .map(|table| table.inline.unwrap_or(false))
        .map_err(|e| e.to_string())
}

/// Whether both stdin and stdout are a terminal (the picker needs one to be drawn on).
fn on_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// `--resume WORD` (a word that starts no id) without a terminal: the sessions it finds and how
/// to open one.
fn print_found(
    workspace: &Workspace,
    cwd: Option<&str>,
    query: &str,
    demo: bool,
    home_flag: Option<&Path>,
) -> i32 {
    let found = match find_sessions(workspace, query, cwd, 20) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("dsh-refs: {e}");
            return 1;
        }
    };
    if found.is_empty() {
        eprintln!(
            "dsh-refs: no session id is or starts with {}, and no session matches it (list them \
             with {} sessions)",
            escape_line(&format!("{query:?}")),
            command_prefix(home_flag, demo)
        );
        return 1;
    }
    println!(
        "sessions matching {} (best first):",
        escape_line(&format!("{query:?}"))
    );
    for (id, title) in &found {
        println!("  {}  {}", escape_line(id), escape_line(title));
    }
    println!(
        "resume one with: {}",
        resume_hint("<id or a unique prefix>", home_flag, demo)
    );
    0
}

/// `--resume` with no id without a terminal: the recent sessions (this directory's first) and how to open one.
fn print_recent(
    workspace: &Workspace,
    cwd: Option<&str>,
    demo: bool,
    home_flag: Option<&Path>,
) -> i32 {
    let home = workspace.home();
    let recent = recent_sessions(workspace, cwd, 20);
    if recent.is_empty() {
        eprintln!(
            "dsh-refs: no sessions under {} to resume",
            diagnostic(&home.display().to_string())
        );
        return 1;
    }
    println!("recent sessions (this directory's first):");
    for (id, title) in &recent {
        println!("  {}  {}", escape_line(id), escape_line(title));
    }
    println!(
        "resume one with: {}",
        resume_hint("<id or a unique prefix>", home_flag, demo)
    );
    0
}

/// Diagnostics go to `<home>/logs/dsh-refs.log` (filtered by RUST_LOG), never to the screen.
/// Without a usable log file (a FIFO or device in its place, no permission) the TUI runs
/// without diagnostics, and says so once on stderr before the screen is taken.
fn init_tracing(home: &Path) {
    let file = match dsh_session_references::cli::open_diagnostics_log(home) {
        Ok(file) => file,
        Err(message) => {
            eprintln!("dsh-refs: {message}");
            return;
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}

/// One heap for every thread (glibc). `prepare` reads a source's conversation on one blocking
/// thread and projects it on another; with an arena per thread, the text the projection
/// allocates cannot reuse the raw payloads it frees, so a big source peaked at twice its
/// conversation instead of once (816 MB against 419 MB for a 400 MiB log). Small allocations
/// stay per-thread (tcache), but a listing's threads still contend for the one arena's lock
/// (75–83 ms of CPU against 42–47 with an arena each, BENCHMARKS.md), so `sessions`, which
/// projects no conversation, keeps glibc's default.
/// Big blocks from the heap, and the heap kept whole until the process ends (glibc). By default
/// every block past 128 KiB is a mapping of its own, zeroed page by page by the kernel when it
/// is first written and unmapped when freed, and the top of the heap is given back as soon as
/// 128 KiB of it is free; `prepare` of a heavy session reads, decodes, encodes and writes
/// several blocks of megabytes one after the other (a kept scan, its document, the
/// conversation), so each paid those faults again (a grown 60 MB Claude Code session: 2,851
/// page faults and 20.1 ms, against 1,887 and 17.0 ms with the heap kept; BENCHMARKS.md).
/// Only the one-shot `prepare` does this: it ends within milliseconds, so nothing is held long;
/// the long-running faces keep glibc's default and give memory back.
#[allow(unsafe_code)] // `mallopt`, below.
fn keep_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only tunes the allocator; it is called before any thread starts.
    unsafe {
        // The largest threshold glibc takes (its default maximum on 64-bit targets).
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TOP_PAD, 8 << 20);
    }
}

/// At most `arenas` glibc malloc arenas for the process's threads.
#[allow(unsafe_code)] // `mallopt`, below.
fn malloc_arenas(arenas: usize) {
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = arenas;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only tunes the allocator; it is called before any thread starts.
    unsafe {
        libc::mallopt(
            libc::M_ARENA_MAX,
            i32::try_from(arenas).unwrap_or(i32::MAX).max(1),
        );
    }
}
