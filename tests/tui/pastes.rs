//! Issue 38 item 4, pastes collapsed in the transcript: a block the composer showed as a
//! `[Pasted N lines]` chip is the same chip in the sent prompt's transcript cell, the details
//! key opens and closes it, and the model still receives every line (a loopback model records
//! the request).

use crate::app::{options, screen_at};
use crate::support::model::{answer, chunked, Reply, Server};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::{ApiKey, ModelChoice, ProviderSettings};
use dsh_session_references::tui::app::{build, App, AppEvent, Wiring};
use dsh_session_references::tui::snapshot::render_snapshot;
use dsh_session_references::tui::transcript::{Pastes, Transcript, TranscriptItem};
use dsh_session_references::tui::Renderable;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

const PASTED: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n";

fn key(code: KeyCode, modifiers: KeyModifiers) -> AppEvent {
    AppEvent::Input(TermEvent::Key(KeyEvent::new(code, modifiers)))
}

fn model(base_url: String) -> ModelChoice {
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
        max_retries: 0,
        retry_base: Duration::from_millis(10),
        max_stream_bytes: dsh_session_references::agent::config::MAX_STREAM_BYTES,
    }))
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

/// The transcript's rows (above the composer) that hold the prompt.
fn prompt_rows(app: &App) -> String {
    screen_at(app, 60)
        .lines()
        .skip_while(|l| !l.starts_with("› "))
        .take_while(|l| !l.starts_with("• "))
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pasted_block_is_a_chip_in_the_transcript_opened_by_details_and_sent_whole() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(vec![Reply::sse(chunked(&answer(&[], &["Looks fine."])))]).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let options = options(home.path());
    let (mut app, _) = build(
        &options,
        Wiring::for_choice(&options, &model(server.base_url())).unwrap(),
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
    for c in "check this: ".chars() {
        app.handle(key(KeyCode::Char(c), KeyModifiers::NONE));
    }
    app.handle(AppEvent::Input(TermEvent::Paste(PASTED.into())));
    for c in "please".chars() {
        app.handle(key(KeyCode::Char(c), KeyModifiers::NONE));
    }
    assert!(
        screen_at(&app, 60).contains("check this: [Pasted 4 lines]please"),
        "the composer's chip: {}",
        screen_at(&app, 60)
    );
    app.handle(key(KeyCode::Enter, KeyModifiers::NONE));
    pump(&mut app, &mut rx, |app| {
        screen_at(app, 60).contains("Looks fine.")
    })
    .await;
    let collapsed = prompt_rows(&app);
    assert!(!collapsed.contains("println!"), "{collapsed}");
    insta::assert_snapshot!("paste_chip_collapsed", collapsed);
    // The key help offers the details key now that there is something to open.
    assert!(screen_at(&app, 100).contains("details"));
    // The details key (ctrl+o) opens the newest expandable item: the prompt.
    app.handle(key(KeyCode::Char('o'), KeyModifiers::CONTROL));
    let expanded = prompt_rows(&app);
    assert!(expanded.contains("println!(\"{x}\");"), "{expanded}");
    insta::assert_snapshot!("paste_chip_expanded", expanded);
    app.handle(key(KeyCode::Char('o'), KeyModifiers::CONTROL));
    assert_eq!(prompt_rows(&app), collapsed, "closed again");
    // The model got every pasted line, in place.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let whole = format!("check this: {PASTED}please");
    let texts: Vec<String> = requests[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            serde_json::Value::String(text) => text.clone(),
            parts => parts
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["text"].as_str())
                .collect(),
        })
        .collect();
    assert!(texts.contains(&whole), "{texts:?}");
}

#[test]
fn pastes_are_found_in_order_and_a_missing_one_reads_as_text() {
    let text = "a\nb\nc\nd and then a\nb\nc\nd";
    let p = Pastes::locate(text, &["a\nb\nc\nd".into(), "a\nb\nc\nd\n".into()]);
    assert_eq!(
        p.ranges,
        [0..7, 17..24],
        "the second one without its trimmed newline"
    );
    let p = Pastes::locate("typed only", &["not there\n".into()]);
    assert!(p.is_empty());
    // Found after the one before, never overlapping it.
    let p = Pastes::locate("xx", &["xx".into(), "xx".into()]);
    assert_eq!(p.ranges, vec![std::ops::Range { start: 0, end: 2 }]);
}

#[test]
fn a_prompt_with_pastes_draws_chips_and_escapes_what_was_pasted() {
    let text = "see \u{1b}[2J\nline two\nline three\nline four and more";
    let mut item = TranscriptItem::User {
        text: text.into(),
        pastes: Pastes::default(),
    };
    assert!(!item.is_expandable(), "no chip, nothing to open");
    assert!(item.set_pastes(&[text[4..].to_string()]));
    assert!(item.is_expandable());
    let mut t = Transcript::new();
    t.push(item);
    let draw = |t: &Transcript| render_snapshot(40, 4, |area, buf| t.render(area, buf));
    let collapsed = draw(&t);
    assert!(collapsed.contains("› see [Pasted 4 lines]"), "{collapsed}");
    assert!(t.toggle_last_card());
    let expanded = draw(&t);
    assert!(
        expanded.contains("\\x1B[2J"),
        "escaped when opened: {expanded}"
    );
    assert!(!expanded.contains('\u{1b}'));
}

/// A long prompt without chips (read back from a log, where pastes are not marked) still shows
/// its first lines and what else was sent.
#[test]
fn a_long_prompt_without_chips_shows_its_head() {
    let text: String = (1..=40).map(|i| format!("log line {i}\n")).collect();
    let mut t = Transcript::new();
    t.push(TranscriptItem::User {
        text,
        pastes: Pastes::default(),
    });
    let shown = render_snapshot(60, 6, |area, buf| t.render(area, buf));
    assert!(shown.contains("› log line 1"), "{shown}");
    assert!(shown.contains("log line 4"), "{shown}");
    assert!(!shown.contains("log line 5"), "{shown}");
    assert!(shown.contains("[… 36 more lines"), "{shown}");
}

/// A paste sent while a turn runs (queued, then taken as steering or as the next prompt) keeps
/// its chip in the transcript too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paste_sent_while_a_turn_runs_keeps_its_chip() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let slow = dsh_session_references::tui::app::AppOptions {
        offline_delay: Duration::from_millis(60),
        ..options(home.path())
    };
    let (mut app, _) = build(
        &slow,
        Wiring::for_choice(&slow, &ModelChoice::Offline).unwrap(),
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
    for c in "tell me a long story".chars() {
        app.handle(key(KeyCode::Char(c), KeyModifiers::NONE));
    }
    app.handle(key(KeyCode::Enter, KeyModifiers::NONE));
    pump(&mut app, &mut rx, |app| {
        screen_at(app, 100).contains("running")
    })
    .await;
    app.handle(AppEvent::Input(TermEvent::Paste(PASTED.into())));
    app.handle(key(KeyCode::Enter, KeyModifiers::NONE));
    pump(&mut app, &mut rx, |app| {
        let s = screen_at(app, 100);
        s.contains("idle") && !s.contains("↳ queued")
    })
    .await;
    // Taken as steering (`› steer …`) or as the next prompt, as the timing has it; the pasted
    // lines are not drawn one by one (the offline model's answer quotes the message it got on
    // one line).
    let shown = screen_at(&app, 100);
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("› ") && l.trim_end().ends_with("[Pasted 4 lines]")),
        "{shown}"
    );
    assert!(!shown.lines().any(|l| l.trim() == "let x = 1;"), "{shown}");
}
