//! The TUI with a real (loopback) model: reasoning streams into a dim, collapsible block, the
//! answer below it, usage into the status line; Esc interrupts a streaming answer, keeps the
//! partial text marked as interrupted, and closes the connection (SPEC §7).

use crate::app::options;
use crate::support::model::{answer, chunked, delta, Part, Reply, Server};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::{ApiKey, ModelChoice, ProviderSettings};
use dsh_session_references::tui::app::{build, App, AppEvent, Wiring};
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

fn choice(base_url: String) -> ModelChoice {
    choice_with_retries(base_url, 0)
}

fn choice_with_retries(base_url: String, max_retries: u32) -> ModelChoice {
    ModelChoice::Remote(Box::new(ProviderSettings {
        provider: "deepseek".into(),
        base_url,
        model: "deepseek-v4-flash".into(),
        api_key_env: Some("DSH_TEST_KEY".into()),
        api_key: Some(ApiKey::new("sk-tui-test")),
        reasoning_effort: None,
        max_tokens: None,
        connect_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(5),
        max_retries,
        retry_base: Duration::from_millis(10),
        max_stream_bytes: dsh_session_references::agent::config::MAX_STREAM_BYTES,
    }))
}

fn key(code: KeyCode, modifiers: KeyModifiers) -> AppEvent {
    AppEvent::Input(TermEvent::Key(KeyEvent::new(code, modifiers)))
}

fn screen(app: &App) -> String {
    crate::app::screen_at(app, 140)
}

/// What the terminal loop does: agent events into the app's channel.
fn forward_agent_events(app: &App, tx: tokio::sync::mpsc::UnboundedSender<AppEvent>) {
    let mut events = app.agent.subscribe();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if tx.send(AppEvent::Agent(event)).is_err() {
                break;
            }
        }
    });
}

async fn pump(app: &mut App, rx: &mut UnboundedReceiver<AppEvent>, done: impl Fn(&App) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done(app) {
        let event = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("the app got what it waited for in time")
            .expect("channel open");
        app.handle(event);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_answer_and_usage_reach_the_screen() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(vec![Reply::sse(chunked(&answer(
        &["The user ", "greets me."],
        &["Hello ", "there!"],
    )))])
    .await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = build(
        &options(home.path()),
        Wiring::for_choice(&options(home.path()), &choice(server.base_url())).unwrap(),
        tx.clone(),
    )
    .unwrap();
    forward_agent_events(&app, tx);
    app.composer.set_text("hi");
    app.handle(key(KeyCode::Enter, KeyModifiers::NONE));
    pump(&mut app, &mut rx, |app| {
        let s = screen(app);
        s.contains("Hello there!") && s.contains("idle")
    })
    .await;
    let s = screen(&app);
    assert!(s.contains("▸ thinking · 4 words"), "{s}");
    assert!(
        !s.contains("greets me."),
        "collapsed reasoning shows one line: {s}"
    );
    assert!(s.contains("deepseek/deepseek-v4-flash"), "{s}");
    // 20 fresh + 100 cached input tokens; the session total adds 9 output tokens.
    assert!(s.contains("ctx 120 · Σ 129"), "{s}");
    app.handle(key(KeyCode::Char('o'), KeyModifiers::CONTROL));
    let s = screen(&app);
    assert!(
        s.contains("▾ thinking") && s.contains("The user greets me."),
        "{s}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_interrupts_keeps_the_partial_answer_and_closes_the_connection() {
    let home = tempfile::tempdir().unwrap();
    let mut parts = chunked(&delta(json!({"content": "A partial"})));
    parts.push(Part::Hang);
    let server = Server::start(vec![Reply::sse(parts)]).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = build(
        &options(home.path()),
        Wiring::for_choice(&options(home.path()), &choice(server.base_url())).unwrap(),
        tx.clone(),
    )
    .unwrap();
    forward_agent_events(&app, tx);
    app.composer.set_text("tell me everything");
    app.handle(key(KeyCode::Enter, KeyModifiers::NONE));
    pump(&mut app, &mut rx, |app| screen(app).contains("A partial")).await;
    let started = Instant::now();
    app.handle(key(KeyCode::Esc, KeyModifiers::NONE));
    pump(&mut app, &mut rx, |app| screen(app).contains("idle")).await;
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
    let s = screen(&app);
    assert!(s.contains("A partial"), "{s}");
    assert!(s.contains("reply interrupted: partial answer kept"), "{s}");
    assert!(server.wait_disconnect(Duration::from_secs(2)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_shows_in_the_status_line_until_the_answer_streams() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(vec![
        Reply::status(429, r#"{"error":{"message":"slow down"}}"#).header("retry-after", "1"),
        Reply::sse(chunked(&answer(&[], &["finally"]))),
    ])
    .await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let choice = choice_with_retries(server.base_url(), 2);
    let (mut app, _) = build(
        &options(home.path()),
        Wiring::for_choice(&options(home.path()), &choice).unwrap(),
        tx.clone(),
    )
    .unwrap();
    forward_agent_events(&app, tx);
    app.composer.set_text("hi");
    app.handle(key(KeyCode::Enter, KeyModifiers::NONE));
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("retry 1/2 in 1.0s (HTTP 429)")
    })
    .await;
    pump(&mut app, &mut rx, |app| screen(app).contains("finally")).await;
    assert!(!screen(&app).contains("retry 1/2"), "{}", screen(&app));
}
