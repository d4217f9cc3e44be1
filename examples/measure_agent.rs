//! How long the agent's log writes hold the async runtime, and what a turn costs.
//!
//! ```sh
//! cargo run --release --example measure_agent -- --turns 200 --encoding zstd --dir /var/tmp
//! ```
//!
//! Runs `--turns` turns of the offline model (no streaming delay) on a single-threaded tokio
//! runtime: each turn appends its batches (turn start and prompt, title, step start, the packed
//! answer and step end, turn end) with `flock`, `write` and `fsync`. Beside it a ticker task asks
//! to wake every millisecond and records how late each wake came. While the log's file I/O runs
//! on the runtime's only thread, every append delays the ticker (and, in the TUI, every key and
//! frame) by as long as it takes; on the log's writer thread it does not. Reported: turns per
//! second, and the ticker's lateness (median, p99, max). The home is created under `--dir`
//! (default: the system temp dir; pick a directory on a real disk: `fsync` on tmpfs is free).

use dsh_session_references::agent::{Agent, AgentConfig, AgentEvent, OfflineModel};
use dsh_session_references::session::{Encoding, LiveSessions, SessionHeader};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Options {
    turns: usize,
    encoding: Encoding,
    dir: std::path::PathBuf,
}

fn options() -> Options {
    let mut options = Options {
        turns: 100,
        encoding: Encoding::Zstd,
        dir: std::env::temp_dir(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--turns" => options.turns = value.parse().expect("--turns N"),
            "--encoding" => {
                options.encoding = match value.as_str() {
                    "plain" => Encoding::Plain,
                    "zstd" => Encoding::Zstd,
                    other => panic!("--encoding plain|zstd, not {other}"),
                }
            }
            "--dir" => options.dir = value.into(),
            other => panic!("unknown flag {other}"),
        }
    }
    options
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

fn main() {
    let options = options();
    let home = tempfile::tempdir_in(&options.dir).expect("home under --dir");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let agent = Agent::start(AgentConfig {
            home: home.path().to_path_buf(),
            header: SessionHeader::new("measure", 1, Some("/work".into())),
            encoding: options.encoding,
            model: Arc::new(OfflineModel::new(Duration::ZERO)),
            live: LiveSessions::default(),
        });
        let lateness = Arc::new(Mutex::new(Vec::new()));
        let ticker = {
            let lateness = lateness.clone();
            tokio::spawn(async move {
                loop {
                    let due = tokio::time::Instant::now() + Duration::from_millis(1);
                    tokio::time::sleep_until(due).await;
                    let late = tokio::time::Instant::now().saturating_duration_since(due);
                    lateness.lock().unwrap().push(late);
                }
            })
        };
        let mut events = agent.subscribe();
        let start = Instant::now();
        for turn in 0..options.turns {
            agent.followup(agent.user_message(&format!("turn {turn}: explain the parser")));
            loop {
                match events.recv().await {
                    Some(AgentEvent::Logged(logged))
                        if logged.iter().any(|e| e.kind == "turn/end") =>
                    {
                        break
                    }
                    Some(_) => {}
                    None => panic!("agent gone"),
                }
            }
        }
        let elapsed = start.elapsed();
        ticker.abort();
        agent.shutdown();
        let mut late = lateness.lock().unwrap().clone();
        late.sort();
        println!(
            "{} turns ({:?}) in {:.2} s: {:.1} turns/s; ticker lateness over {} wakes: \
             median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            options.turns,
            options.encoding,
            elapsed.as_secs_f64(),
            options.turns as f64 / elapsed.as_secs_f64(),
            late.len(),
            percentile(&late, 0.5).as_secs_f64() * 1e3,
            percentile(&late, 0.99).as_secs_f64() * 1e3,
            late.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        );
    });
}
