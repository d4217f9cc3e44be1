//! The app loop's submit path, driven like a person would: type, press Enter, let the events in.

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::reference::format_session_reference_mention;
use dsh_session_references::session::Encoding;
use dsh_session_references::tui::app::{build, App, AppEvent, AppOptions};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

fn options(home: &std::path::Path) -> AppOptions {
    AppOptions {
        home: home.to_path_buf(),
        resume: None,
        offline_delay: Duration::ZERO,
        encoding: Some(Encoding::Plain),
        cwd: Some("/work".into()),
        sources: Default::default(),
    }
}

fn key(code: KeyCode) -> AppEvent {
    AppEvent::Input(TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn screen(app: &App) -> String {
    let area = ratatui::layout::Rect::new(0, 0, 100, 24);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    app.render(area, &mut buf);
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Feeds events to the app until `done` holds.
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
async fn failed_preparation_keeps_the_input_and_enqueues_nothing() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = build(&options(home.path()), tx).unwrap();
    let text = format!(
        "see {}",
        format_session_reference_mention("gone", Some("old work"))
    );
    app.composer.set_text(&text);
    app.handle(key(KeyCode::Enter));
    assert!(screen(&app).contains("preparing"), "{}", screen(&app));
    // Keys do not edit or resend while preparing.
    app.handle(key(KeyCode::Char('x')));
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Session reference failed")
    })
    .await;
    assert_eq!(app.composer.submission_text(), text, "the input is kept");
    assert_eq!(app.agent.status().queued_prompts, 0);
    assert!(!screen(&app).contains("preparing"));
    let screen = screen(&app);
    assert!(
        screen.contains("Session reference failed:") && screen.contains("gone"),
        "{screen}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!home.path().join("sessions").exists(), "nothing was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_clears_the_input_and_logs_the_trimmed_prompt() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = build(&options(home.path()), tx).unwrap();
    app.composer.set_text("hello there   ");
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| app.composer.is_empty()).await;
    let log = home
        .path()
        .join("sessions/--work--")
        .join(&app.agent.info().session_id)
        .join("session.jsonl");
    let mut text = String::new();
    for _ in 0..500 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("turn/end") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        text.contains("\"text\":\"hello there\""),
        "trailing spaces trimmed: {text}"
    );
}
