//! Issue 24's daily-driver items in the app, driven like a person would (type, press keys, let
//! the events in) and drawn on a `TestBackend`: scrolling that follows a send, `/model` without a
//! rebuild, the running turn's timer and queued messages, and the polish items.

use crate::app::{options, screen_at};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::ModelChoice;
use dsh_session_references::session::Record;
use dsh_session_references::tui::app::{build, App, AppEvent, AppOptions, Wiring};
use dsh_session_references::tui::transcript::NoticeLevel;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// The app over `options` with the offline model, its agent's events forwarded as the binary's
/// loop forwards them.
fn offline(options: &AppOptions, tx: UnboundedSender<AppEvent>) -> (App, Vec<Record>) {
    let (app, records) = build(
        options,
        Wiring::for_choice(options, &ModelChoice::Offline).unwrap(),
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
    (app, records)
}

fn key(code: KeyCode) -> AppEvent {
    AppEvent::Input(TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn typed(text: &str) -> Vec<AppEvent> {
    text.chars().map(|c| key(KeyCode::Char(c))).collect()
}

fn screen(app: &App) -> String {
    screen_at(app, 100)
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
async fn pages_move_a_screen_home_and_end_jump_and_a_send_follows_to_the_bottom() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    for i in 0..80 {
        app.transcript
            .push_notice(NoticeLevel::Info, format!("earlier line {i}"));
    }
    screen(&app);
    app.handle(key(KeyCode::PageUp));
    let page = app.transcript.scroll_offset();
    assert!(page > 10, "a page is a screen, not 10 rows: {page}");
    screen(&app);
    app.handle(key(KeyCode::PageUp));
    assert_eq!(app.transcript.scroll_offset(), 2 * page);
    app.handle(key(KeyCode::PageDown));
    assert_eq!(app.transcript.scroll_offset(), page);
    // Home (the composer's cursor cannot move): the top; End: the bottom.
    app.handle(key(KeyCode::Home));
    assert!(screen(&app).contains("earlier line 0"), "{}", screen(&app));
    app.handle(key(KeyCode::End));
    assert_eq!(app.transcript.scroll_offset(), 0);
    // Scrolled up, a send brings the view back to the bottom, where the new turn shows.
    app.handle(key(KeyCode::PageUp));
    screen(&app);
    assert!(app.transcript.scroll_offset() > 0);
    for event in typed("hello from below") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    assert_eq!(app.transcript.scroll_offset(), 0);
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Offline model")
    })
    .await;
    let text = screen(&app);
    assert!(text.contains("hello from below"), "{text}");
    assert!(!text.contains("more "), "no `↓ N more` marker: {text}");
    // New output while at the bottom is followed too.
    for i in 0..30 {
        app.transcript
            .push_notice(NoticeLevel::Info, format!("later line {i}"));
    }
    assert!(screen(&app).contains("later line 29"));
    assert_eq!(app.transcript.scroll_offset(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_is_shown_again_on_resume() {
    use crate::support::model::{Reply, Server};
    use dsh_session_references::agent::config::{ApiKey, ProviderSettings};
    let server = Server::start(vec![Reply::status(
        400,
        r#"{"error":{"message":"model e2e-missing does not exist"}}"#,
    )])
    .await;
    let choice = ModelChoice::Remote(Box::new(ProviderSettings {
        provider: "deepseek".into(),
        base_url: server.base_url(),
        model: "deepseek-v4-flash".into(),
        api_key_env: Some("DSH_TEST_KEY".into()),
        api_key: Some(ApiKey::new("sk-tui-test")),
        reasoning_effort: None,
        max_tokens: None,
        connect_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(5),
        max_retries: 0,
        retry_base: Duration::from_millis(10),
        max_stream_bytes: dsh_session_references::agent::config::MAX_STREAM_BYTES,
    }));
    let home = tempfile::tempdir().unwrap();
    let opts = options(home.path());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = build(
        &opts,
        Wiring::for_choice(&opts, &choice).unwrap(),
        tx.clone(),
    )
    .unwrap();
    let mut events = app.agent.subscribe();
    let forward = tx.clone();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if forward.send(AppEvent::Agent(event)).is_err() {
                break;
            }
        }
    });
    for event in typed("hello") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("does not exist") && screen(app).contains("idle")
    })
    .await;
    let live: Vec<String> = screen(&app)
        .lines()
        .filter(|l| l.contains("does not exist"))
        .map(|l| l.trim_end().to_string())
        .collect();
    assert_eq!(live.len(), 1, "{}", screen(&app));
    let id = app.agent.info().session_id.clone();
    app.agent.shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(2), app.agent.closed()).await;
    drop(app);

    // Resumed: the same failure, where it happened, below the prompt.
    let resumed = AppOptions {
        resume: Some(id),
        ..options(home.path())
    };
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (app, _) = build(&resumed, Wiring::for_choice(&resumed, &choice).unwrap(), tx).unwrap();
    let text = screen(&app);
    let shown: Vec<String> = text
        .lines()
        .filter(|l| l.contains("does not exist"))
        .map(|l| l.trim_end().to_string())
        .collect();
    assert_eq!(shown, live, "{text}");
    let prompt = text.find("hello").unwrap();
    assert!(text.find("does not exist").unwrap() > prompt, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_turn_shows_its_time_how_to_interrupt_and_what_is_queued() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let slow = AppOptions {
        offline_delay: Duration::from_millis(60),
        ..options(home.path())
    };
    let (mut app, _) = offline(&slow, tx);
    for event in typed("tell me a long story") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| screen(app).contains("running")).await;
    let text = screen(&app);
    assert!(text.contains("● running 0s · esc to interrupt"), "{text}");
    // Two messages typed while it runs: listed above the composer, not only counted.
    for message in ["also mention the dragon", "and keep it short"] {
        for event in typed(message) {
            app.handle(event);
        }
        app.handle(key(KeyCode::Enter));
        pump(&mut app, &mut rx, |app| {
            screen(app).contains(&format!("↳ queued  {message}"))
        })
        .await;
    }
    let text = screen(&app);
    let queued = text.find("↳ queued  also mention the dragon").unwrap();
    let composer = text.find("╭").unwrap();
    assert!(queued < composer, "above the composer: {text}");
    // Taken by the turn (or the next), the rows go; idle, the timer and the hint go too.
    pump(&mut app, &mut rx, |app| {
        let s = screen(app);
        s.contains("idle") && !s.contains("↳ queued")
    })
    .await;
    assert!(!screen(&app).contains("to interrupt"));
}

#[test]
fn the_status_line_and_queued_rows_while_a_turn_runs() {
    use dsh_session_references::tui::snapshot::render_snapshot;
    use dsh_session_references::tui::QueuedPanel;
    use dsh_session_references::tui::Renderable;
    use dsh_session_references::tui::StatusLine;
    let status = StatusLine {
        session_id: "session-1b2c".into(),
        title: Some("Fix webapp login loop".into()),
        cwd: Some("/home/dev/webapp".into()),
        model: "offline".into(),
        running: true,
        queued_steering: 2,
        elapsed_secs: Some(75),
        interrupt_key: "esc".into(),
        ..Default::default()
    };
    let panel = QueuedPanel {
        messages: vec![
            "also mention the dragon".into(),
            "and keep\nit short".into(),
            "third \u{1b}[2J".into(),
            "fourth".into(),
        ],
    };
    insta::assert_snapshot!(render_snapshot(100, 4, |area, buf| {
        let rows = ratatui::layout::Rect {
            height: panel.height(),
            ..area
        };
        panel.render(rows, buf);
        let line = ratatui::layout::Rect {
            y: area.y + 3,
            height: 1,
            ..area
        };
        status.render(line, buf);
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_and_clear_are_aliases_of_quit_and_new() {
    use dsh_session_references::tui::app::NextSession;
    let home = tempfile::tempdir().unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx.clone());
    for event in typed("/clear") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    assert!(app.should_quit);
    assert_eq!(app.next, Some(NextSession::New));
    let (mut app, _) = offline(&options(home.path()), tx);
    for event in typed("/exit") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    assert!(app.should_quit);
    assert_eq!(app.next, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pasted_block_is_collapsed_in_the_transcript_but_sent_whole() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    let pasted: String = (1..=40).map(|i| format!("log line {i}\n")).collect();
    for event in typed("why does this fail? ") {
        app.handle(event);
    }
    app.handle(AppEvent::Input(TermEvent::Paste(pasted.clone())));
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Offline model")
    })
    .await;
    // The composer's chip, as it was (issue 38 item 4; a long prompt without a chip, read
    // back from a log, still shows its first lines: `tests/tui/pastes.rs`).
    let text = screen(&app);
    assert!(
        text.contains("› why does this fail? [Pasted 40 lines]"),
        "{text}"
    );
    assert!(!text.contains("log line 1"), "{text}");
    // The log holds the whole paste.
    let logs: Vec<_> = walk(home.path())
        .into_iter()
        .filter(|p| p.ends_with("session.jsonl"))
        .collect();
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(log.contains("log line 40"), "{log}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_overlay_says_what_is_below_and_pages_without_closing() {
    let home = tempfile::tempdir().unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    app.handle(key(KeyCode::Char('?')));
    assert!(app.overlay_open());
    let first = screen(&app);
    assert!(first.contains("more below"), "{first}");
    app.handle(key(KeyCode::PageDown));
    assert!(
        app.overlay_open(),
        "PgDn pages the overlay, it does not close it"
    );
    let second = screen(&app);
    assert_ne!(first, second);
    assert!(second.contains("above"), "{second}");
    app.handle(key(KeyCode::PageUp));
    assert_eq!(screen(&app), first);
    app.handle(key(KeyCode::Esc));
    assert!(!app.overlay_open());
}

#[test]
fn a_file_named_like_the_query_outranks_weak_session_hits() {
    use dsh_session_references::reference::Candidate;
    use dsh_session_references::tui::popup::PopupState;
    use dsh_session_references::tui::snapshot::render_snapshot;
    use dsh_session_references::tui::FileRow;
    use dsh_session_references::tui::Renderable;
    let session = |id: &str, label: &str| Candidate {
        session_id: id.into(),
        label: label.into(),
        cwd: Some("/home/dev/app".into()),
        created_at: 1_700_000_000_000,
    };
    let mut state = PopupState::new();
    let request = state.open("READ", false).unwrap();
    // Found by discovery through their conversations (weak), and one by its title (strong).
    state.apply_results(
        request.id,
        Ok(vec![
            session("session-1", "Fix webapp login loop"),
            session("session-2", "Read the retention spec"),
            session("session-3", "Dark mode toggle"),
        ]),
    );
    let rows = ["src/thread.rs", "README.md", "docs/reading-list.md"]
        .into_iter()
        .map(|path| FileRow {
            path: path.into(),
            indices: Vec::new(),
            score: 0,
        })
        .collect();
    state.set_file_rows("READ", rows);
    let text = render_snapshot(90, 9, |area, buf| {
        state.view(1_700_000_000_000).render(area, buf)
    });
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {text}"))
    };
    assert!(at("Read the retention spec") < at("README.md"), "{text}");
    assert!(at("README.md") < at("Fix webapp login loop"), "{text}");
    assert!(at("reading-list.md") < at("Dark mode toggle"), "{text}");
    assert!(at("Dark mode toggle") < at("src/thread.rs"), "{text}");
    insta::assert_snapshot!(text);
}
