//! Issue 38 item 5, the `/resume` picker's preview pane: the highlighted session's last
//! messages in the `@` popup's pane (`tui::popup::PreviewPane`), read off the loop, following
//! the selection, an answer for a session no longer highlighted dropped, hidden when narrow.

use crate::app::{options, screen_at};
use crate::support::write_source;
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::ModelChoice;
use dsh_session_references::discovery::Discovery;
use dsh_session_references::tui::app::{build, App, AppEvent, Wiring};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

fn key(code: KeyCode) -> AppEvent {
    AppEvent::Input(TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn typed(text: &str) -> Vec<AppEvent> {
    text.chars().map(|c| key(KeyCode::Char(c))).collect()
}

/// Feeds events to the app until `done` holds; each event's screen is checked by `each`.
async fn pump_checking(
    app: &mut App,
    rx: &mut UnboundedReceiver<AppEvent>,
    done: impl Fn(&App) -> bool,
    each: impl Fn(&App),
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done(app) {
        let Ok(event) = tokio::time::timeout_at(deadline, rx.recv()).await else {
            panic!("not in time:\n{}", screen_at(app, 120));
        };
        app.handle(event.expect("channel open"));
        each(app);
    }
}

/// A second session, long enough that reading its preview takes a while: `turns` exchanges
/// of about 2 KiB each, the last answer naming `last`.
fn write_long_session(home: &std::path::Path, turns: usize, last: &str) {
    let dir = home.join("sessions/--proj-api--/long-session-2");
    std::fs::create_dir_all(&dir).unwrap();
    let mut lines = vec![
        r#"{"type":"session","version":0,"id":"long-session-2","createdAt":1780000000000,"cwd":"/proj/api","delegationDepth":0}"#.to_string(),
        r#"{"type":"session/title","seq":0,"time":1780000000001,"data":{"title":"Tokenizer refill","messageSeqs":[],"source":{"kind":"fallback"}}}"#.to_string(),
    ];
    let filler = "refill ".repeat(300);
    let mut seq: i64 = 1;
    for turn in 1..=turns {
        let answer = if turn == turns {
            last.to_string()
        } else {
            format!("answer {turn} {filler}")
        };
        let t = 1780000000002 + seq;
        lines.push(format!(
            r#"{{"type":"turn/start","seq":{seq},"time":{t},"data":{{"turn":{turn},"trigger":{{"kind":"message","source":{{"kind":"user"}}}}}}}}"#
        ));
        lines.push(format!(
            r#"{{"type":"user/message","seq":{},"time":{t},"data":{{"content":[{{"type":"text","text":"question {turn} {filler}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{turn}"}},"surfaceOp":"append"}}"#,
            seq + 1
        ));
        lines.push(format!(
            r#"{{"type":"assistant/message","seq":{},"time":{t},"data":{{"turn":{turn},"step":1,"message":{{"role":"assistant","content":[{{"type":"text","text":"{answer}"}}],"source":{{"kind":"model","provider":"p","model":"m"}},"id":"a{turn}"}}}},"surfaceOp":"append"}}"#,
            seq + 2
        ));
        lines.push(format!(
            r#"{{"type":"turn/end","seq":{},"time":{t},"data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}"#,
            seq + 3
        ));
        seq += 4;
    }
    std::fs::write(dir.join("session.jsonl"), lines.join("\n") + "\n").unwrap();
}

/// The app with the picker open over an indexed home of two sessions, both listed.
async fn picker_app(home: &std::path::Path) -> (App, UnboundedReceiver<AppEvent>) {
    let discovery = Discovery::for_home(home, &Default::default());
    let indexed = discovery.clone();
    tokio::task::spawn_blocking(move || indexed.refresh_blocking().unwrap())
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let options = options(home);
    let (mut app, _) = build(
        &options,
        Wiring::for_choice(&options, &ModelChoice::Offline).unwrap(),
        tx,
    )
    .unwrap();
    app.set_discovery(discovery);
    for event in typed("/resume") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    assert!(app.picker_open());
    pump_checking(
        &mut app,
        &mut rx,
        |app| {
            let s = screen_at(app, 120);
            s.contains("Leap day parsing") && s.contains("Tokenizer refill")
        },
        |_| {},
    )
    .await;
    (app, rx)
}

/// The title of the highlighted row (`› ` then the age).
fn highlighted(app: &App) -> &'static str {
    let screen = screen_at(app, 120);
    let row = screen
        .lines()
        .find(|l| l.starts_with('›'))
        .expect("a highlighted row")
        .to_string();
    if row.contains("Leap day parsing") {
        "Leap day parsing"
    } else {
        assert!(row.contains("Tokenizer refill"), "{row}");
        "Tokenizer refill"
    }
}

/// The preview box of the picker's right-hand pane, as text (the details above it hold an age
/// that depends on today's date).
fn pane(app: &App, width: u16) -> String {
    let screen = screen_at(app, width);
    // The list, the gap and the pane's left border.
    let list_w = usize::from(width) * 3 / 5 + 2;
    screen
        .lines()
        .map(|l| l.chars().skip(list_w).collect::<String>())
        .skip_while(|l| !l.starts_with("╭ preview"))
        .take_while(|l| !l.trim_end().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_picker_previews_the_highlighted_session_and_follows_the_selection() {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    write_long_session(home.path(), 40, "Refill it first.");
    let (mut app, mut rx) = picker_app(home.path()).await;
    // One row per message, cut to the pane (the popup's pane, reused).
    let leap = "assistant: The validator used a non-leap";
    let refill = "assistant: Refill it first.";
    // Highlight the short session, then wait for its last messages.
    if highlighted(&app) != "Leap day parsing" {
        app.handle(key(KeyCode::Down));
    }
    pump_checking(
        &mut app,
        &mut rx,
        |app| screen_at(app, 120).contains(leap),
        |_| {},
    )
    .await;
    insta::assert_snapshot!("picker_preview_pane", pane(&app, 120));
    // Moving reads the other one: `reading…` at once, then its messages, never the old ones.
    app.handle(key(KeyCode::Down));
    let moved = screen_at(&app, 120);
    assert!(moved.contains("preview · Tokenizer refill"), "{moved}");
    assert!(
        moved.contains("reading…") && !moved.contains(leap),
        "{moved}"
    );
    pump_checking(
        &mut app,
        &mut rx,
        |app| screen_at(app, 120).contains(refill),
        |app| assert!(!screen_at(app, 120).contains(leap)),
    )
    .await;
    // A narrow terminal hides the pane (and the list keeps the row's directory instead).
    let narrow = screen_at(&app, 80);
    assert!(!narrow.contains("preview · "), "{narrow}");
    assert!(!narrow.contains(refill), "{narrow}");
}

/// A slow preview (a long session) never holds the keys up: every key is handled, and drawn,
/// while the preview is still being read, and an answer that comes for a session no longer
/// highlighted is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_preview_does_not_block_typing_and_a_stale_one_is_dropped() {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    write_long_session(home.path(), 3000, "The slow one, finally.");
    let (mut app, mut rx) = picker_app(home.path()).await;
    if highlighted(&app) != "Tokenizer refill" {
        app.handle(key(KeyCode::Down));
    }
    assert_eq!(highlighted(&app), "Tokenizer refill");
    // The long session's preview is being read; the keys go on meanwhile.
    let started = Instant::now();
    app.handle(key(KeyCode::Down));
    app.handle(key(KeyCode::Up));
    for event in typed("refi") {
        app.handle(event);
        let s = screen_at(&app, 120);
        assert!(s.contains("reading…"), "{s}");
    }
    let typing = started.elapsed();
    assert!(screen_at(&app, 120).contains("Resume a session › refi"));
    // Its answer arrives in its own time (the search for `refi` too).
    let waited = Instant::now();
    pump_checking(
        &mut app,
        &mut rx,
        |app| screen_at(app, 120).contains("assistant: The slow one, finally."),
        |_| {},
    )
    .await;
    eprintln!(
        "typing took {typing:?}; the long session's preview came {:?} later",
        waited.elapsed()
    );
    assert!(!screen_at(&app, 120).contains("The validator used"));
}
