//! Measurements of the real-model path (SPEC §7), against an in-process loopback server that
//! speaks the OpenAI-compatible streaming protocol:
//!
//! ```sh
//! # time our side adds between the server's first body byte and the first character on screen
//! cargo run --release --example measure_model -- first-char --turns 200
//! # frame times while a 20,000-token answer streams at 300 tokens/s (66 s)
//! cargo run --release --example measure_model -- stream --tokens 20000 --rate 300
//! # the same with a paragraph break every 80 tokens, as real answers have
//! cargo run --release --example measure_model -- stream --tokens 20000 --rate 300 --paragraph 80
//! ```
//!
//! `first-char` drives the real app (`build`, the same event path as the terminal loop)
//! and stops the clock at the first frame whose buffer shows the answer's first character.
//! `stream` runs the terminal loop's policy (draw, wait for an event, drain the burst, draw) on
//! a `TestBackend` and times each frame: handling its events plus drawing it.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use clap::{Parser, Subcommand};
use dsh_session_references::agent::config::{ModelChoice, ProviderSettings};
use dsh_session_references::session::Encoding;
use dsh_session_references::tui::app::{build, App, AppEvent, AppOptions, Wiring};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// First body byte at the server → first character in a drawn frame.
    FirstChar {
        #[arg(long, default_value_t = 200)]
        turns: usize,
    },
    /// Frame times while a long answer streams.
    Stream {
        #[arg(long, default_value_t = 20_000)]
        tokens: usize,
        /// Tokens per second (0: as fast as possible).
        #[arg(long, default_value_t = 300.0)]
        rate: f64,
        /// A newline every N tokens, as real answers have paragraphs (0: one endless line).
        #[arg(long, default_value_t = 0)]
        paragraph: usize,
    },
}

#[derive(Clone)]
struct Script {
    tokens: usize,
    rate: f64,
    paragraph: usize,
    /// When the server handed over the first body chunk.
    first_byte: Arc<Mutex<Option<Instant>>>,
}

fn event(delta: serde_json::Value) -> String {
    let chunk =
        json!({"id": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

async fn handle(State(script): State<Script>) -> Response {
    let interval = (script.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / script.rate));
    let stream = futures_util::stream::unfold(0usize, move |i| {
        let script = script.clone();
        async move {
            if i > script.tokens {
                return None;
            }
            let chunk = if i == script.tokens {
                let usage = json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": script.tokens}});
                format!("data: {usage}\n\ndata: [DONE]\n\n")
            } else {
                if i > 0 {
                    if let Some(interval) = interval {
                        tokio::time::sleep(interval).await;
                    }
                }
                // "Ж" marks the first character; the rest are word-sized tokens.
                let text = if i == 0 {
                    "Ж".to_string()
                } else if script.paragraph > 0 && i % script.paragraph == 0 {
                    "\n\n".to_string()
                } else {
                    format!(" w{}", i % 1000)
                };
                event(json!({"content": text}))
            };
            if i == 0 {
                *script.first_byte.lock().unwrap() = Some(Instant::now());
            }
            Some((Ok::<Bytes, std::io::Error>(Bytes::from(chunk)), i + 1))
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn serve(script: Script) -> String {
    let app = Router::new()
        .route("/v1/chat/completions", post(handle))
        .with_state(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/v1")
}

fn settings(base_url: String) -> ModelChoice {
    ModelChoice::Remote(Box::new(ProviderSettings {
        provider: "loopback".into(),
        base_url,
        model: "measure".into(),
        api_key_env: None,
        api_key: None,
        reasoning_effort: None,
        max_tokens: None,
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(30),
        max_retries: 0,
        retry_base: Duration::from_millis(10),
        max_stream_bytes: dsh_session_references::agent::config::MAX_STREAM_BYTES,
    }))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name}: n={} p50={:.2?} p90={:.2?} p99={:.2?} max={:.2?}",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.9),
        percentile(&samples, 0.99),
        samples.last().unwrap()
    );
}

fn new_app(
    home: &std::path::Path,
    choice: &ModelChoice,
) -> (App, mpsc::UnboundedReceiver<AppEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let options = AppOptions {
        home: home.to_path_buf(),
        resume: None,
        offline_delay: Duration::ZERO,
        encoding: Some(Encoding::Plain),
        cwd: Some("/measure".into()),
        sources: Default::default(),
    };
    let (app, _) = build(
        &options,
        Wiring::for_choice(&options, choice).unwrap(),
        tx.clone(),
    )
    .unwrap();
    let mut events = app.agent.subscribe();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if tx.send(AppEvent::Agent(event)).is_err() {
                break;
            }
        }
    });
    (app, rx)
}

fn shows(terminal: &Terminal<TestBackend>, needle: &str) -> bool {
    let buffer = terminal.backend().buffer();
    buffer.content().iter().any(|cell| cell.symbol() == needle)
}

fn draw(terminal: &mut Terminal<TestBackend>, app: &App) {
    terminal
        .draw(|frame| app.render(frame.area(), frame.buffer_mut()))
        .unwrap();
}

async fn first_char(turns: usize) {
    let script = Script {
        tokens: 3,
        rate: 0.0,
        paragraph: 0,
        first_byte: Arc::new(Mutex::new(None)),
    };
    let base = serve(script.clone()).await;
    let choice = settings(base);
    let home = tempfile::tempdir().unwrap();
    let mut samples = Vec::new();
    for _ in 0..turns {
        let (mut app, mut rx) = new_app(home.path(), &choice);
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        *script.first_byte.lock().unwrap() = None;
        app.composer.set_text("go");
        app.handle(AppEvent::Input(crossterm::event::Event::Key(
            crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Enter),
        )));
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("an event in time")
                .expect("channel open");
            app.handle(event);
            while let Ok(event) = rx.try_recv() {
                app.handle(event);
            }
            draw(&mut terminal, &app);
            if shows(&terminal, "Ж") {
                let shown = Instant::now();
                let sent = script
                    .first_byte
                    .lock()
                    .unwrap()
                    .expect("first byte recorded");
                samples.push(shown - sent);
                break;
            }
        }
        app.agent.shutdown();
    }
    report("first byte → first char drawn", samples);
}

async fn stream(tokens: usize, rate: f64, paragraph: usize) {
    let script = Script {
        tokens,
        rate,
        paragraph,
        first_byte: Arc::new(Mutex::new(None)),
    };
    let base = serve(script).await;
    let choice = settings(base);
    let home = tempfile::tempdir().unwrap();
    let (mut app, mut rx) = new_app(home.path(), &choice);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    app.composer.set_text("write a long answer");
    app.handle(AppEvent::Input(crossterm::event::Event::Key(
        crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Enter),
    )));
    let started = Instant::now();
    let mut frames = Vec::new();
    let mut deltas = 0usize;
    let mut saw_running = false;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("an event in time")
            .expect("channel open");
        let frame_start = Instant::now();
        let mut burst = vec![event];
        while let Ok(event) = rx.try_recv() {
            burst.push(event);
        }
        let mut done = false;
        for event in burst {
            if let AppEvent::Agent(dsh_session_references::agent::AgentEvent::Delta(_)) = &event {
                deltas += 1;
            }
            if let AppEvent::Agent(dsh_session_references::agent::AgentEvent::Status(s)) = &event {
                saw_running |= s.running;
                done = saw_running && !s.running;
            }
            app.handle(event);
        }
        draw(&mut terminal, &app);
        frames.push(frame_start.elapsed());
        if done {
            break;
        }
    }
    println!(
        "streamed {deltas} deltas in {:.1?} ({:.0} tokens/s), {} frames",
        started.elapsed(),
        deltas as f64 / started.elapsed().as_secs_f64(),
        frames.len()
    );
    report("frame (handle burst + draw)", frames);
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    match args.command {
        Command::FirstChar { turns } => rt.block_on(first_char(turns)),
        Command::Stream {
            tokens,
            rate,
            paragraph,
        } => rt.block_on(stream(tokens, rate, paragraph)),
    }
}
