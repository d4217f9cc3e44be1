//! Percentile measurements behind BENCHMARKS.md (criterion reports means; the goals are p99).
//!
//! ```sh
//! cargo run --release --example measure -- candidates --sessions 100000
//! cargo run --release --example measure -- prepare --mb 100 --encoding zstd
//! cargo run --release --example measure -- tui --sessions 100000 --files 100000
//! cargo run --release --example measure -- gen-big --mb 100 --encoding plain   # prints paths
//! cargo run --release --example measure -- hostile --case bad-line --mb 2048 --home /tmp/h
//! cargo run --release --example measure -- hold-lock --path LOG --seconds 30
//! cargo run --release --example measure -- external --sessions 10000   # 10k Claude + 10k Codex
//! cargo run --release --example measure -- external-prepare --mb 100
//! cargo run --release --example measure -- search --sessions 100000 --kb 10
//! ```
//!
//! `hostile` builds a home (session `agent`, and the hostile session `src` in cwd `/w`) for one
//! of the RELIABILITY.md cases and prints the command to measure on it; delete the home after.
//!
//! Data is generated once into `target/bench-data/` (see `benches/support/gen.rs`) and reused;
//! delete that directory to regenerate or to reclaim the space.

#[path = "../benches/support/gen.rs"]
mod gen;

#[path = "../benches/support/external_gen.rs"]
mod external_gen;

#[path = "measure_discovery/mod.rs"]
mod measure_discovery;

use clap::{Parser, Subcommand, ValueEnum};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::reference::{
    format_session_reference_mention, parse_session_reference_text, AgentIdentity,
    SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions, SourceSet};
use dsh_session_references::session::{
    ContentBlock, DiskStore, Encoding, HostSessions, LiveSession, LiveSessions, SessionHeader,
    SessionQuery,
};
use dsh_session_references::tui::composer::Composer;
use dsh_session_references::tui::popup::PopupState;
use dsh_session_references::tui::FileFinder;
use dsh_session_references::tui::Renderable;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use ratatui::Terminal;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Enc {
    Plain,
    Zstd,
}

impl From<Enc> for Encoding {
    fn from(e: Enc) -> Encoding {
        match e {
            Enc::Plain => Encoding::Plain,
            Enc::Zstd => Encoding::Zstd,
        }
    }
}

/// The shape of the big logs (`benches/support/gen.rs`).
#[derive(Clone, Copy, ValueEnum)]
enum Shape {
    /// 12–36 KB tool outputs and packed chunk rows.
    ToolOutput,
    /// 40 short tool calls and ~4 KB results a turn, 64-record frames (issue 25).
    ToolHeavy,
}

impl From<Shape> for gen::BigShape {
    fn from(s: Shape) -> gen::BigShape {
        match s {
            Shape::ToolOutput => gen::BigShape::ToolOutput,
            Shape::ToolHeavy => gen::BigShape::ToolHeavy,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Case {
    /// `src`'s pending marker is a FIFO.
    FifoMarker,
    /// `src`'s pending marker is a symlink to /dev/zero.
    ZeroMarker,
    /// `<home>/logs/dsh-refs.log` is a FIFO.
    FifoLog,
    /// `src` is a plain log of `--mb` MiB with a bad line near its start and no turn/end after.
    BadLine,
    /// `src` is a header followed by one `--mb` MiB line without a newline.
    LongLine,
    /// `src` is a plain log of `--mb` MiB of assistant messages.
    Assistant,
    /// Three 33 KB zstd bombs and four sparse 256 MiB no-newline logs beside `src`.
    Bombs,
}

#[derive(Subcommand)]
enum Command {
    /// Generate (or reuse) a home of N small sessions and print its path.
    GenHome {
        #[arg(long)]
        sessions: usize,
    },
    /// Generate (or reuse) a home with three big logs and print their paths and sizes.
    GenBig {
        #[arg(long)]
        mb: u64,
        #[arg(long, value_enum)]
        encoding: Enc,
        #[arg(long, value_enum, default_value = "tool-output")]
        shape: Shape,
    },
    /// list_candidates: first call, then per-keystroke calls while "typing" queries.
    Candidates {
        #[arg(long)]
        sessions: usize,
        /// Rounds of the typed query sequence.
        #[arg(long, default_value_t = 20)]
        rounds: usize,
        /// Serve through HostSessions with a live agent session, as the TUI does.
        #[arg(long)]
        live: bool,
    },
    /// prepare with the three big sources.
    Prepare {
        #[arg(long)]
        mb: u64,
        #[arg(long, value_enum)]
        encoding: Enc,
        #[arg(long, value_enum, default_value = "tool-output")]
        shape: Shape,
        /// Cold runs (a fresh store each).
        #[arg(long, default_value_t = 5)]
        iters: usize,
        /// Warm runs (one store, sources unchanged); defaults to `--iters`.
        #[arg(long)]
        warm_iters: Option<usize>,
    },
    /// The encoding check a new session makes (`writer::home_encoding`) over a home: each
    /// round's time, the first one cold-ish (whatever the page cache holds).
    HomeEncoding {
        #[arg(long)]
        home: std::path::PathBuf,
        /// The encoding asked for (`--compression`); none: the home's own.
        #[arg(long, value_enum)]
        requested: Option<Enc>,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Build a home holding one hostile case (see the module docs); prints what to run.
    Hostile {
        #[arg(long, value_enum)]
        case: Case,
        /// Where to build the home (must not exist yet).
        #[arg(long)]
        home: std::path::PathBuf,
        /// Size of the big log, for the cases that have one.
        #[arg(long, default_value_t = 400)]
        mb: u64,
    },
    /// Hold an exclusive flock on a file for a while (another process, as a test needs).
    HoldLock {
        #[arg(long)]
        path: std::path::PathBuf,
        #[arg(long, default_value_t = 30)]
        seconds: u64,
    },
    /// list_candidates over N generated Claude Code and N Codex sessions (SPEC §9), merged with
    /// an empty dsh store and a live agent session as the TUI serves them.
    External {
        #[arg(long)]
        sessions: usize,
        #[arg(long, default_value_t = 20)]
        rounds: usize,
    },
    /// prepare with one Claude Code session and one Codex rollout of `mb` MB each.
    ExternalPrepare {
        #[arg(long)]
        mb: u64,
        #[arg(long, default_value_t = 3)]
        iters: usize,
    },
    /// Discovery (SPEC §8): index build, warm search percentiles and append-to-visible over N
    /// generated sessions of about KB KiB of log each.
    Search {
        #[arg(long)]
        sessions: usize,
        #[arg(long, default_value_t = 10)]
        kb: usize,
        #[arg(long, default_value_t = 50)]
        rounds: usize,
        /// Appends timed until visible in search (the background indexer running).
        #[arg(long, default_value_t = 10)]
        appends: usize,
        /// Reuse the index of an earlier run (skips the build measurement).
        #[arg(long)]
        keep_index: bool,
        /// Only the warm searches (implies --keep-index): for profiling them.
        #[arg(long)]
        searches_only: bool,
        /// Only the cold index build (and the idle pass after it): for profiling it.
        #[arg(long)]
        build_only: bool,
    },
    /// Discovery index build over the big-log home (three logs of MB MB each, mostly tool
    /// output as real dsh logs are): MB/s of log per CPU-second.
    IndexBig {
        #[arg(long, default_value_t = 100)]
        mb: u64,
    },
    /// The file watcher's cost over the generated discovery home of N sessions: the time to add
    /// its watches, the process's resident memory and the kernel's inotify marks it adds.
    Watch {
        #[arg(long)]
        sessions: usize,
        #[arg(long, default_value_t = 10)]
        kb: usize,
    },
    /// Start → first popup rows over the generated discovery home of N sessions (run `search`
    /// with `--keep-index` first for an indexed home): the TUI's start-up (store with its listing
    /// cache, reference service, discovery and its indexer) and its first `@` lookup.
    FirstPopup {
        #[arg(long)]
        sessions: usize,
        #[arg(long, default_value_t = 10)]
        kb: usize,
    },
    /// Discovery index build over COPIES copies of the 105 real dsh logs in tests/data (each
    /// copy under new session ids): MB/s of real log per CPU-second.
    IndexReal {
        #[arg(long, default_value_t = 20)]
        copies: usize,
    },
    /// Popup over N sessions: frame render and keystroke-to-frame times.
    Tui {
        #[arg(long)]
        sessions: usize,
        #[arg(long, default_value_t = 20)]
        rounds: usize,
        /// Files in the cwd the popup's file rows come from (walked and matched by the same
        /// `FileFinder` as the TUI; 0: no file rows).
        #[arg(long, default_value_t = 0)]
        files: usize,
    },
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    match args.command {
        Command::GenHome { sessions } => {
            let started = Instant::now();
            let home = gen::cached_home(sessions).unwrap();
            println!("{} ({:.1?})", home.display(), started.elapsed());
        }
        Command::GenBig {
            mb,
            encoding,
            shape,
        } => {
            let started = Instant::now();
            let (home, logs) =
                gen::cached_big_home_shaped(mb, encoding.into(), shape.into()).unwrap();
            println!("home {} ({:.1?})", home.display(), started.elapsed());
            for log in logs {
                println!(
                    "{}\tlogical {} B\tfile {} B\tturns {}\tcompactions {}\tconversation {} B",
                    log.path.display(),
                    log.logical_bytes,
                    log.file_bytes,
                    log.turns,
                    log.compactions,
                    log.conversation_bytes
                );
            }
        }
        Command::Candidates {
            sessions,
            rounds,
            live,
        } => rt.block_on(candidates(sessions, rounds, live)),
        Command::Hostile { case, home, mb } => hostile(case, &home, mb).unwrap(),
        Command::HoldLock { path, seconds } => {
            let file = std::fs::File::open(&path).unwrap();
            file.lock().unwrap();
            println!("holding {} for {seconds} s", path.display());
            std::thread::sleep(Duration::from_secs(seconds));
        }
        Command::Prepare {
            mb,
            encoding,
            shape,
            iters,
            warm_iters,
        } => rt.block_on(prepare(
            mb,
            encoding,
            shape,
            iters,
            warm_iters.unwrap_or(iters),
        )),
        Command::Tui {
            sessions,
            rounds,
            files,
        } => rt.block_on(tui(sessions, rounds, files)),
        Command::Search {
            sessions,
            kb,
            rounds,
            appends,
            keep_index,
            searches_only,
            build_only,
        } => measure_discovery::run(
            sessions,
            kb,
            rounds,
            appends,
            keep_index,
            searches_only,
            build_only,
        ),
        Command::Watch { sessions, kb } => measure_discovery::watch_cost(sessions, kb),
        Command::FirstPopup { sessions, kb } => measure_discovery::first_popup(sessions, kb),
        Command::IndexReal { copies } => {
            let (home, log_bytes) = measure_discovery::real_home(copies).unwrap();
            println!(
                "home {}: {copies} copies of the real dsh logs, {:.1} MB of log",
                home.display(),
                log_bytes as f64 / 1e6
            );
            let _ = std::fs::remove_dir_all(home.join("index"));
            let discovery = dsh_session_references::discovery::Discovery::for_home(
                &home,
                &dsh_session_references::session::external::SourceSet::default(),
            );
            measure_discovery::build(&discovery, &home.join("index"), log_bytes);
        }
        Command::IndexBig { mb } => {
            let (home, logs) = gen::cached_big_home(mb, Encoding::Plain).unwrap();
            let conversation: u64 = logs.iter().map(|l| l.conversation_bytes).sum();
            println!(
                "home {}: {} logs, {:.1} MB of conversation in them",
                home.display(),
                logs.len(),
                conversation as f64 / 1e6
            );
            let _ = std::fs::remove_dir_all(home.join("index"));
            let discovery = dsh_session_references::discovery::Discovery::for_home(
                &home,
                &dsh_session_references::session::external::SourceSet::default(),
            );
            let log_bytes: u64 = logs.iter().map(|l| l.file_bytes).sum();
            measure_discovery::build(&discovery, &home.join("index"), log_bytes);
        }
        Command::HomeEncoding {
            home,
            requested,
            rounds,
        } => {
            for round in 0..rounds {
                let started = Instant::now();
                let answer = dsh_session_references::session::writer::home_encoding(
                    &home,
                    requested.map(Into::into),
                );
                println!(
                    "round {round}: {:.1?} -> {}",
                    started.elapsed(),
                    match answer {
                        Ok(encoding) => format!("{encoding:?}"),
                        Err(e) => format!("error: {e}"),
                    }
                );
            }
        }
        Command::External { sessions, rounds } => rt.block_on(external(sessions, rounds)),
        Command::ExternalPrepare { mb, iters } => rt.block_on(external_prepare(mb, iters)),
    }
}

fn external_query(
    claude: &std::path::Path,
    codex: &std::path::Path,
) -> (Arc<dyn SessionQuery>, AgentIdentity) {
    let dsh = gen::data_dir("external-empty-dsh-home");
    std::fs::create_dir_all(&dsh).unwrap();
    let (host, agent) = query_over(&dsh, true);
    let sources = SourceSet {
        hide_dsh: false,
        external: vec![
            ExternalSessions::new(ExternalAgent::Claude, claude),
            ExternalSessions::new(ExternalAgent::Codex, codex),
        ],
    };
    (sources.serve(host), agent)
}

async fn external(sessions: usize, rounds: usize) {
    let started = Instant::now();
    let (claude, codex) = external_gen::cached_external_homes(sessions).unwrap();
    println!(
        "homes ready in {:.1?}: {} and {}",
        started.elapsed(),
        claude.display(),
        codex.display()
    );
    let (query, agent) = external_query(&claude, &codex);
    let a = query.list_sessions().await.unwrap();
    let mut list_samples = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        let b = query.list_sessions().await.unwrap();
        list_samples.push(started.elapsed());
        assert!(Arc::ptr_eq(&a, &b), "an unchanged listing is the same Arc");
    }
    percentiles("warm merged list_sessions", &mut list_samples);
    let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let first = service
        .list_candidates(&agent, "", None, &cancel)
        .await
        .unwrap();
    println!(
        "first call (cold caches, warm OS cache): {:.1?} ({} rows)",
        started.elapsed(),
        first.len()
    );
    let mut queries = Vec::new();
    for word in ["project-4", "claude:c1a", "codex:0000c0de", "zzq"] {
        for end in 0..=word.len() {
            queries.push(word[..end].to_string());
        }
    }
    let mut samples = keystroke_times(&service, &agent, &queries, rounds).await;
    percentiles(
        &format!("warm per-keystroke list_candidates over {sessions} Claude + {sessions} Codex sessions (+ live)"),
        &mut samples,
    );
}

async fn external_prepare(mb: u64, iters: usize) {
    let (claude, codex) = external_gen::cached_big_external(mb).unwrap();
    let (query, agent) = external_query(&claude, &codex);
    let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
    let cancel = CancellationToken::new();
    let ids = [external_gen::claude_id(0), external_gen::codex_id(0)];
    let mut samples = Vec::new();
    for _ in 0..iters {
        let started = Instant::now();
        let prepared = service
            .prepare(
                &agent,
                vec![ContentBlock::text("compare")],
                ids.iter()
                    .map(|id| {
                        dsh_session_references::reference::ReferenceInput::new(id.clone(), None)
                    })
                    .collect(),
                &cancel,
            )
            .await
            .unwrap();
        samples.push(started.elapsed());
        std::hint::black_box(prepared);
    }
    percentiles(
        &format!("prepare of a {mb} MB Claude session + a {mb} MB Codex rollout"),
        &mut samples,
    );
}

/// What a user types after `@`: a cwd fragment, an id prefix, and a query matching nothing.
fn typed_queries() -> Vec<String> {
    let mut queries = Vec::new();
    for word in ["harness", &gen::session_id(4242)[..6], "zzq"] {
        for end in 0..=word.len() {
            queries.push(word[..end].to_string());
        }
    }
    queries
}

fn percentiles(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name}: n={} mean={:.3?} p50={:.3?} p90={:.3?} p99={:.3?} max={:.3?}",
        samples.len(),
        mean,
        at(0.5),
        at(0.9),
        at(0.99),
        samples[samples.len() - 1]
    );
}

fn query_over(home: &std::path::Path, live: bool) -> (Arc<dyn SessionQuery>, AgentIdentity) {
    let agent = AgentIdentity::new("agent-self", Some(gen::project_cwd(3)));
    let disk = DiskStore::new(home);
    if live {
        let sessions = LiveSessions::default();
        sessions.insert(Arc::new(LiveSession::new(SessionHeader::new(
            agent.id.clone(),
            2_000_000_000_000,
            agent.cwd.clone(),
        ))));
        (Arc::new(HostSessions::new(disk, sessions)), agent)
    } else {
        (Arc::new(disk), agent)
    }
}

async fn candidates(sessions: usize, rounds: usize, live: bool) {
    let home = gen::cached_home(sessions).unwrap();
    let (query, agent) = query_over(&home, live);
    let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let first = service
        .list_candidates(&agent, "", None, &cancel)
        .await
        .unwrap();
    println!(
        "first call (cold store cache, warm OS cache): {:.1?} ({} rows)",
        started.elapsed(),
        first.len()
    );
    let queries = typed_queries();
    let mut samples = keystroke_times(&service, &agent, &queries, rounds).await;
    percentiles(
        &format!("warm per-keystroke list_candidates over {sessions} sessions (live={live})"),
        &mut samples,
    );
}

async fn prepare(mb: u64, encoding: Enc, shape: Shape, iters: usize, warm_iters: usize) {
    let (home, logs) = gen::cached_big_home_shaped(mb, encoding.into(), shape.into()).unwrap();
    let total: u64 = logs.iter().map(|l| l.file_bytes).sum();
    let logical: u64 = logs.iter().map(|l| l.logical_bytes).sum();
    let service = || {
        SessionReferences::new(
            Arc::new(DiskStore::new(&home)),
            SessionReferenceConfig::default(),
        )
        .unwrap()
    };
    let agent = AgentIdentity::new("agent", Some("/home/dev/work/big".into()));
    let text: String = gen::BIG_SOURCES
        .iter()
        .map(|id| format_session_reference_mention(id, None))
        .collect::<Vec<_>>()
        .join(" ");
    let parsed = parse_session_reference_text(&format!("compare {text}")).unwrap();
    let cancel = CancellationToken::new();
    let run = |service: SessionReferences| {
        let parsed = parsed.clone();
        let agent = agent.clone();
        let cancel = cancel.clone();
        async move {
            let started = Instant::now();
            let prepared = service
                .prepare(
                    &agent,
                    vec![ContentBlock::text(parsed.text.clone())],
                    parsed.references.iter().cloned().map(Into::into).collect(),
                    &cancel,
                )
                .await
                .unwrap();
            std::hint::black_box(prepared);
            started.elapsed()
        }
    };
    println!(
        "3 sources, {} MB logical, {} MB on disk",
        logical / 1_000_000,
        total / 1_000_000
    );
    // Cold: a fresh store each time (what `dsh-refs prepare` does, and a host's first reference
    // to a source).
    let mut cold = Vec::new();
    for _ in 0..iters {
        cold.push(run(service()).await);
    }
    if iters > 0 {
        percentiles(&format!("prepare cold ({mb} MB × 3)"), &mut cold);
    }
    // Warm: the same store again; the sources did not change.
    let warm_service = service();
    run(warm_service.clone()).await;
    let mut warm = Vec::new();
    for _ in 0..warm_iters {
        warm.push(run(warm_service.clone()).await);
    }
    if warm_iters > 0 {
        percentiles(&format!("prepare warm ({mb} MB × 3, cached)"), &mut warm);
    }
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

/// A cwd of `files` empty files in 100 directories, generated once.
fn cached_files(files: usize) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-data")
        .join(format!("files-{files}"));
    let marker = root.join(".complete");
    if !marker.exists() {
        let _ = std::fs::remove_dir_all(&root);
        for n in 0..files {
            let dir = root.join(format!("src/module{:02}", n % 100));
            if n < 100 {
                std::fs::create_dir_all(&dir).unwrap();
            }
            std::fs::write(dir.join(format!("harness_{n}.rs")), b"").unwrap();
        }
        std::fs::write(&marker, b"").unwrap();
    }
    root
}

/// A finder over `files` files, walked and settled (every file indexed and matched).
fn loaded_finder(files: usize) -> Option<FileFinder> {
    if files == 0 {
        return None;
    }
    let cwd = cached_files(files);
    let started = Instant::now();
    let mut finder = FileFinder::start(cwd, std::sync::Arc::new(|| {}));
    finder.set_query("", 5);
    while finder.walking() || (finder.rows().indexed as usize) < files {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    println!(
        "file index: {} files walked and loaded in {:.0} ms",
        finder.rows().indexed,
        started.elapsed().as_secs_f64() * 1e3
    );
    Some(finder)
}

async fn tui(sessions: usize, rounds: usize, files: usize) {
    let mut finder = loaded_finder(files);
    let home = gen::cached_home(sessions).unwrap();
    let (query, agent) = query_over(&home, true);
    let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
    let cancel = CancellationToken::new();
    // Warm the store as the app does when it starts.
    service
        .list_candidates(&agent, "", None, &cancel)
        .await
        .unwrap();
    let now = gen::session_id(0).len() as i64 + 1_700_006_000_000;
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let mut frames = Vec::new();
    let mut keystrokes = Vec::new();
    let mut lookups = Vec::new();
    let mut file_rows = Vec::new();
    let text = "look at @harness-0 please";
    for _ in 0..rounds {
        let mut composer = Composer::new();
        let mut popup = PopupState::new();
        for c in text.chars() {
            // Keystroke to frame: the key, the popup following the token, one frame. The lookup
            // runs elsewhere; typing never waits for it.
            let started = Instant::now();
            composer.handle_key(key(c));
            let request = popup.sync(composer.active_token().as_ref());
            let files_started = Instant::now();
            if let Some(finder) = finder.as_mut().filter(|_| popup.is_open()) {
                // As the app does: the new query goes to the workers; the rows they have
                // finished (never waited for) go to the popup.
                let query = popup.query().to_string();
                let limit = if query.is_empty() { 5 } else { 50 };
                finder.set_query(&query, limit);
                finder.tick();
                let published = finder.rows();
                popup.set_file_rows(&published.query, published.rows);
            }
            file_rows.push(files_started.elapsed());
            draw(&mut terminal, &composer, &popup, now);
            keystrokes.push(started.elapsed());
            if let Some(request) = request {
                // The lookup, then the frame that shows its answer.
                let started = Instant::now();
                let answer = service
                    .list_candidates(&agent, &request.query, None, &cancel)
                    .await
                    .map_err(|e| e.to_string());
                popup.apply_results(request.id, answer);
                draw(&mut terminal, &composer, &popup, now);
                lookups.push(started.elapsed());
            }
            // A frame on its own (e.g. a resize or a tick).
            let started = Instant::now();
            draw(&mut terminal, &composer, &popup, now);
            frames.push(started.elapsed());
            popup.move_down();
        }
    }
    percentiles("frame render (120x40, popup open)", &mut frames);
    percentiles("keystroke to frame (lookup not awaited)", &mut keystrokes);
    if files > 0 {
        percentiles(
            "  of which file rows (query to workers, tick, rows)",
            &mut file_rows,
        );
    }
    percentiles(
        &format!("lookup answer to frame (list_candidates over {sessions} + apply + frame)"),
        &mut lookups,
    );
}

fn draw(terminal: &mut Terminal<TestBackend>, composer: &Composer, popup: &PopupState, now: i64) {
    terminal
        .draw(|frame| {
            let area = frame.area();
            let buf = frame.buffer_mut();
            let composer_h = composer.desired_height(area.width).min(area.height);
            let composer_area = Rect::new(0, area.height - composer_h, area.width, composer_h);
            composer.render(composer_area, buf);
            if popup.is_open() {
                let view = popup.view(now);
                let h = view
                    .desired_height(area.width)
                    .min(area.height - composer_h);
                view.render(
                    Rect::new(0, area.height - composer_h - h, area.width, h),
                    buf,
                );
            }
        })
        .unwrap();
}

/// Builds the home of one hostile case (see [`Case`]) and prints the commands to measure.
fn hostile(case: Case, home: &std::path::Path, mb: u64) -> std::io::Result<()> {
    use dsh_session_references::session::{Event, EventData, Message, NewEvent, SessionWriter};
    use std::io::Write;
    assert!(!home.exists(), "{} exists already", home.display());
    let user = |text: &str| -> NewEvent {
        EventData::UserMessage(Message::new(
            "user",
            vec![ContentBlock::text(text)],
            dsh_session_references::session::MessageSource::user(),
            format!("u-{}", text.len()),
        ))
        .into()
    };
    let create = |id: &str, encoding: Encoding| {
        let header = SessionHeader::new(id, 1_700_000_000_000, Some("/w".into()));
        SessionWriter::create(home, header, encoding).unwrap()
    };
    create("agent", Encoding::Plain)
        .append(vec![user("the agent")])
        .unwrap();
    let src_dir = dsh_session_references::session::paths::session_dir(home, "src", Some("/w"))
        .expect("an id");
    let src = src_dir.join("session.jsonl");
    let header_line = |id: &str| {
        let header = SessionHeader::new(id, 1_700_000_000_000, Some("/w".into()));
        format!("{}\n", serde_json::to_string(&header).unwrap())
    };
    let big = mb << 20;
    match case {
        Case::FifoMarker | Case::ZeroMarker => {
            create("src", Encoding::Plain)
                .append(vec![user("hello")])
                .unwrap();
            let marker = src_dir.join(".session.jsonl.pending");
            if matches!(case, Case::FifoMarker) {
                let ok = std::process::Command::new("mkfifo").arg(&marker).status()?;
                assert!(ok.success());
            } else {
                std::os::unix::fs::symlink("/dev/zero", &marker)?;
            }
        }
        Case::FifoLog => {
            create("src", Encoding::Plain)
                .append(vec![user("hello")])
                .unwrap();
            std::fs::create_dir_all(home.join("logs"))?;
            let ok = std::process::Command::new("mkfifo")
                .arg(home.join("logs/dsh-refs.log"))
                .status()?;
            assert!(ok.success());
        }
        Case::BadLine | Case::Assistant => {
            std::fs::create_dir_all(&src_dir)?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&src)?);
            out.write_all(header_line("src").as_bytes())?;
            let mut rng = gen::TestRng::new(7);
            let mut seq = 0;
            let mut written = 0u64;
            let bad_at = if matches!(case, Case::BadLine) {
                3
            } else {
                u64::MAX
            };
            while written < big {
                if seq == bad_at {
                    out.write_all(b"{\"type\":\"user/message\",\"seq\":3,\"ti\n")?;
                }
                let text = gen::prose(&mut rng, 16 << 10);
                let data = EventData::AssistantMessage {
                    turn: seq.into(),
                    step: 0.into(),
                    message: Message::new(
                        "assistant",
                        vec![ContentBlock::text(text)],
                        dsh_session_references::session::MessageSource::user(),
                        format!("a-{seq}"),
                    ),
                    extra: Default::default(),
                };
                let line = serde_json::to_string(&Event::new(seq, 1, &data)).unwrap();
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
                written += line.len() as u64 + 1;
                seq += 1;
            }
            out.flush()?;
        }
        Case::LongLine => {
            std::fs::create_dir_all(&src_dir)?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&src)?);
            out.write_all(header_line("src").as_bytes())?;
            let block = vec![b'x'; 1 << 20];
            for _ in 0..mb {
                out.write_all(&block)?;
            }
            out.flush()?;
        }
        Case::Bombs => {
            create("src", Encoding::Plain)
                .append(vec![user("hello")])
                .unwrap();
            let bomb = zstd::bulk::compress(&vec![b' '; 256 << 20], 19)?;
            for i in 0..3 {
                let dir = home.join(format!("sessions/--w--/bomb{i}"));
                std::fs::create_dir_all(&dir)?;
                std::fs::write(dir.join("session.jsonl.zstd"), &bomb)?;
            }
            for i in 0..4 {
                let dir = home.join(format!("sessions/--w--/sparse{i}"));
                std::fs::create_dir_all(&dir)?;
                let file = std::fs::File::create(dir.join("session.jsonl"))?;
                file.set_len(256 << 20)?;
            }
            println!("zstd bomb: {} bytes", bomb.len());
        }
    }
    gen::age_home(home);
    let bin = "target/release/dsh-refs";
    let h = home.display();
    println!("home {h}");
    println!("/usr/bin/time -v {bin} --home {h} sessions");
    println!("/usr/bin/time -v {bin} --home {h} candidates --as agent --cwd /w");
    println!(
        "/usr/bin/time -v {bin} --home {h} prepare --as agent --cwd /w \"$({bin} mention format src) what happened?\""
    );
    Ok(())
}

/// The time of each `list_candidates` call as a user types `queries`, `rounds` times over.
async fn keystroke_times(
    service: &SessionReferences,
    agent: &AgentIdentity,
    queries: &[String],
    rounds: usize,
) -> Vec<Duration> {
    let cancel = CancellationToken::new();
    let mut samples = Vec::new();
    for _ in 0..rounds {
        for q in queries {
            let started = Instant::now();
            let rows = service
                .list_candidates(agent, q, None, &cancel)
                .await
                .unwrap();
            samples.push(started.elapsed());
            std::hint::black_box(rows);
        }
    }
    samples
}
