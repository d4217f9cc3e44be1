//! The app loop's submit path, driven like a person would: type, press Enter, let the events in.

use crate::support::write_source;
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::ModelChoice;
use dsh_session_references::reference::format_session_reference_mention;
use dsh_session_references::session::{Encoding, Record};
use dsh_session_references::tui::app::{build, App, AppEvent, AppOptions, Wiring};
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// The app over `options` with the offline model, wired as the binary wires it.
fn offline(options: &AppOptions, tx: UnboundedSender<AppEvent>) -> (App, Vec<Record>) {
    build(
        options,
        Wiring::for_choice(options, &ModelChoice::Offline).unwrap(),
        tx,
    )
    .unwrap()
}

/// The app's options over `home` as the app tests run it (also used by `model.rs`).
pub(crate) fn options(home: &std::path::Path) -> AppOptions {
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
    screen_at(app, 100)
}

/// The app drawn on a `width` × 24 screen, as text (also used by `model.rs`).
pub(crate) fn screen_at(app: &App, width: u16) -> String {
    let area = ratatui::layout::Rect::new(0, 0, width, 24);
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
    let (mut app, _) = offline(&options(home.path()), tx);
    let text = format!(
        "see {}",
        format_session_reference_mention("gone", Some("old work"))
    );
    app.composer.set_text(&text);
    app.handle(key(KeyCode::Enter));
    assert!(screen(&app).contains("preparing"), "{}", screen(&app));
    // Keys typed while preparing go to the next draft; Enter does not resend.
    app.handle(key(KeyCode::Char('x')));
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Session reference failed")
    })
    .await;
    assert_eq!(
        app.composer.submission_text(),
        format!("{text}\nx"),
        "the input is back, in front of what was typed since"
    );
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
    let (mut app, _) = offline(&options(home.path()), tx);
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

fn paste(text: &str) -> AppEvent {
    AppEvent::Input(TermEvent::Paste(text.into()))
}

fn typed(text: &str) -> Vec<AppEvent> {
    text.chars().map(|c| key(KeyCode::Char(c))).collect()
}

/// The app's own log, once its turn has ended (empty if nothing was ever logged).
async fn own_log(app: &App, home: &Path, until: &str) -> String {
    let log = home
        .join("sessions/--work--")
        .join(&app.agent.info().session_id)
        .join("session.jsonl");
    let mut text = String::new();
    for _ in 0..500 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains(until) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    text
}

fn user_texts(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|record| {
            record["type"] == "user/message" && record["data"]["source"]["kind"] == "user"
        })
        .map(|record| {
            record["data"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// Waits until no send is in flight.
async fn settle(app: &mut App, rx: &mut UnboundedReceiver<AppEvent>) {
    pump(app, rx, |app| !screen(app).contains("preparing")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_in_the_same_burst_as_enter_start_the_next_draft() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    // One read of the terminal: "hello⏎next⏎" typed faster than the send settles.
    let mut burst = typed("hello");
    burst.push(key(KeyCode::Enter));
    burst.extend(typed("next"));
    burst.push(key(KeyCode::Enter));
    burst.push(paste(" and more"));
    for event in burst {
        app.handle(event);
    }
    assert_eq!(app.composer.submission_text(), "next and more");
    settle(&mut app, &mut rx).await;
    assert_eq!(app.composer.submission_text(), "next and more", "kept");
    let log = own_log(&app, home.path(), "turn/end").await;
    assert_eq!(
        user_texts(&log),
        ["hello"],
        "sent once, no duplicate: {log}"
    );
    // The draft is a normal one: Enter sends it.
    app.handle(key(KeyCode::Enter));
    assert!(app.composer.is_empty());
    settle(&mut app, &mut rx).await;
    let log = own_log(&app, home.path(), "next and more").await;
    assert_eq!(user_texts(&log), ["hello", "next and more"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_while_a_reference_is_prepared_survives_success_and_failure() {
    let home = tempfile::tempdir().unwrap();
    // A session to reference.
    let dir =
        dsh_session_references::session::paths::session_dir(home.path(), "other", Some("/work"))
            .unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("session.jsonl"),
        "{\"type\":\"session\",\"version\":0,\"id\":\"other\",\"createdAt\":1,\"cwd\":\"/work\",\"delegationDepth\":0}\n",
    )
    .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);

    // Success: the message goes, what was typed meanwhile stays, the sent one is in history.
    let good = format!(
        "see {}",
        format_session_reference_mention("other", Some("other"))
    );
    app.composer.set_text(&good);
    app.handle(key(KeyCode::Enter));
    for event in typed("while") {
        app.handle(event);
    }
    app.handle(paste(" pasted\nlines"));
    settle(&mut app, &mut rx).await;
    assert_eq!(app.composer.submission_text(), "while pasted\nlines");
    let log = own_log(&app, home.path(), "turn/end").await;
    assert_eq!(user_texts(&log), ["see @other"], "{log}");

    // Failure: the message comes back in front of what was typed since, cursor where typing was.
    app.composer.clear();
    let bad = format!(
        "see {}",
        format_session_reference_mention("gone", Some("gone"))
    );
    app.composer.set_text(&bad);
    app.handle(key(KeyCode::Enter));
    for event in typed("typed") {
        app.handle(event);
    }
    app.handle(paste(" pasted"));
    app.handle(key(KeyCode::Left));
    app.handle(key(KeyCode::Char('!')));
    settle(&mut app, &mut rx).await;
    assert!(
        screen(&app).contains("Session reference failed"),
        "{}",
        screen(&app)
    );
    assert_eq!(
        app.composer.submission_text(),
        format!("{bad}\ntyped paste!d")
    );
    app.handle(key(KeyCode::Char('?')));
    assert_eq!(
        app.composer.submission_text(),
        format!("{bad}\ntyped paste!?d")
    );
    let log = own_log(&app, home.path(), "turn/end").await;
    assert_eq!(
        user_texts(&log),
        ["see @other"],
        "nothing more was sent: {log}"
    );
}

fn ctrl(c: char) -> AppEvent {
    AppEvent::Input(TermEvent::Key(KeyEvent::new(
        KeyCode::Char(c),
        KeyModifiers::CONTROL,
    )))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_clears_a_draft_first_and_quits_only_on_a_second_idle_press() {
    let home = tempfile::tempdir().unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    for event in typed("half a thought") {
        app.handle(event);
    }
    app.handle(ctrl('c'));
    assert!(app.composer.is_empty(), "the draft is cleared");
    assert!(!app.should_quit);
    app.handle(key(KeyCode::Up));
    assert_eq!(
        app.composer.display_text(),
        "half a thought",
        "and Up recalls it"
    );
    app.handle(ctrl('c'));
    assert!(app.composer.is_empty() && !app.should_quit);
    app.handle(ctrl('c'));
    assert!(!app.should_quit, "one press on an empty composer only arms");
    assert!(screen(&app).contains("again to quit"));
    app.handle(ctrl('c'));
    assert!(app.should_quit, "the second one quits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_esc_on_an_empty_composer_edits_the_last_message() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    for event in typed("first message") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    settle(&mut app, &mut rx).await;
    own_log(&app, home.path(), "turn/end").await;
    pump(&mut app, &mut rx, |app| !screen(app).contains("running")).await;
    app.handle(key(KeyCode::Esc));
    assert!(app.composer.is_empty(), "one Esc only arms");
    app.handle(key(KeyCode::Esc));
    assert_eq!(app.composer.display_text(), "first message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_popup_with_nothing_to_offer_lets_enter_send() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    for event in typed("ping @nomatch") {
        app.handle(event);
    }
    assert!(app.popup.is_open());
    pump(&mut app, &mut rx, |app| !app.popup.is_loading()).await;
    app.handle(key(KeyCode::Enter));
    settle(&mut app, &mut rx).await;
    let log = own_log(&app, home.path(), "turn/end").await;
    assert_eq!(user_texts(&log), ["ping @nomatch"]);
    // Up recalls it, and the popup that opens on its token does not keep Up for itself.
    app.handle(key(KeyCode::Up));
    assert_eq!(app.composer.display_text(), "ping @nomatch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_run_here_and_unknown_ones_ask_first() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    assert!(screen(&app).contains("dsh-refs"), "the welcome header");
    app.handle(key(KeyCode::Char('/')));
    assert!(app.slash.is_open(), "/ opens the menu");
    assert!(screen(&app).contains("/sessions"));
    for event in typed("he") {
        app.handle(event);
    }
    assert!(screen(&app).contains("keys and commands"));
    app.handle(key(KeyCode::Enter));
    assert!(app.overlay_open(), "/help opens the key help");
    assert!(app.composer.is_empty());
    app.handle(key(KeyCode::Esc));
    assert!(!app.overlay_open());
    // Typed in full and sent: still run here.
    for event in typed("/model") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Tab));
    assert_eq!(app.composer.display_text(), "/model ");
    app.handle(key(KeyCode::Enter));
    assert!(screen(&app).contains("Model: offline"));
    // An unknown command asks; the same Enter again sends it.
    for event in typed("/frobnicate now") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    assert!(screen(&app).contains("/frobnicate is not a command"));
    assert_eq!(app.composer.display_text(), "/frobnicate now");
    app.handle(key(KeyCode::Enter));
    settle(&mut app, &mut rx).await;
    let log = own_log(&app, home.path(), "turn/end").await;
    assert_eq!(
        user_texts(&log),
        ["/frobnicate now"],
        "only the confirmed line reached the model; /help and /model never did"
    );
    for event in typed("/quit") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    assert!(app.should_quit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_new_and_resume_name_the_next_session() {
    use dsh_session_references::tui::app::NextSession;
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    // A prefix that names nothing: said so, and the session stays.
    for event in typed("/resume") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Tab));
    for event in typed("nothing-like-it") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("/resume: no session id")
    })
    .await;
    assert!(!app.should_quit);
    // A unique prefix opens that session next.
    for event in typed("/resume src-sess") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| app.should_quit).await;
    assert_eq!(app.next, Some(NextSession::Resume("src-session-1".into())));
    // /new: a fresh session next.
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    for event in typed("/new") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    assert!(app.should_quit);
    assert_eq!(app.next, Some(NextSession::New));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mouse_wheel_scrolls_the_transcript() {
    use crossterm::event::{MouseEvent, MouseEventKind};
    let home = tempfile::tempdir().unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    for n in 0..60 {
        app.transcript.push_notice(
            dsh_session_references::tui::transcript::NoticeLevel::Info,
            format!("line {n}"),
        );
    }
    screen(&app);
    let wheel = |kind| {
        AppEvent::Input(TermEvent::Mouse(MouseEvent {
            kind,
            column: 5,
            row: 5,
            modifiers: KeyModifiers::NONE,
        }))
    };
    app.handle(wheel(MouseEventKind::ScrollUp));
    app.handle(wheel(MouseEventKind::ScrollUp));
    assert_eq!(app.transcript.scroll_offset(), 6);
    assert!(screen(&app).contains("line 50"));
    app.handle(wheel(MouseEventKind::ScrollDown));
    assert_eq!(app.transcript.scroll_offset(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_survives_a_restart_and_a_resume() {
    let home = tempfile::tempdir().unwrap();
    let session_id;
    {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (mut app, _) = offline(&options(home.path()), tx);
        session_id = app.agent.info().session_id.clone();
        for event in typed("remember me") {
            app.handle(event);
        }
        app.handle(key(KeyCode::Enter));
        settle(&mut app, &mut rx).await;
        own_log(&app, home.path(), "turn/end").await;
        app.agent.shutdown();
    }
    let history = home.path().join("history.jsonl");
    for _ in 0..200 {
        if std::fs::read_to_string(&history).is_ok_and(|t| t.contains("remember me")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A new session in the same home.
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut fresh, _) = offline(&options(home.path()), tx);
    fresh.handle(key(KeyCode::Up));
    assert_eq!(fresh.composer.display_text(), "remember me");
    fresh.agent.shutdown();
    // And the session itself, resumed.
    let resumed_options = AppOptions {
        resume: Some(session_id),
        ..options(home.path())
    };
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut resumed, _) = offline(&resumed_options, tx);
    resumed.handle(key(KeyCode::Up));
    assert_eq!(resumed.composer.display_text(), "remember me");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_at_offers_a_few_files_and_typing_narrows_them_off_the_loop() {
    use dsh_session_references::tui::popup::PopupItem;
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join(".gitignore"), "build/\n").unwrap();
    std::fs::create_dir_all(cwd.path().join("build")).unwrap();
    std::fs::write(cwd.path().join("build/main.o"), "").unwrap();
    std::fs::create_dir_all(cwd.path().join("src")).unwrap();
    for name in [
        "main.rs", "lib.rs", "app.rs", "ui.rs", "keys.rs", "more.rs", "last.rs",
    ] {
        std::fs::write(cwd.path().join("src").join(name), "").unwrap();
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    app.start_file_finder(cwd.path().to_path_buf());
    let files = |app: &App| -> Vec<String> {
        app.popup
            .items()
            .into_iter()
            .filter_map(|item| match item {
                PopupItem::File(row) => Some(row.path),
                PopupItem::Session(_) => None,
            })
            .collect()
    };
    app.handle(key(KeyCode::Char('@')));
    pump(&mut app, &mut rx, |app| files(app).len() == 5).await;
    for event in typed("main") {
        app.handle(event);
    }
    pump(&mut app, &mut rx, |app| {
        files(app).first().map(String::as_str) == Some("src/main.rs")
    })
    .await;
    assert!(
        !files(&app).iter().any(|p| p.starts_with("build/")),
        ".gitignore is honoured"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_wears_a_size_badge_until_it_is_removed() {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    for event in typed("see @src-ses") {
        app.handle(event);
    }
    pump(&mut app, &mut rx, |app| !app.popup.is_empty()).await;
    app.handle(key(KeyCode::Tab));
    assert_eq!(app.composer.mentions().len(), 1);
    pump(&mut app, &mut rx, |app| {
        app.composer
            .badge("src-session-1")
            .is_some_and(|b| b.contains("msgs"))
    })
    .await;
    let shown = screen(&app);
    assert!(shown.contains("@Leap day parsing ⟨2 msgs · "), "{shown}");
    assert!(shown.contains("next +1 ref"), "{shown}");
    // Removed: the badge and the status figure go with it.
    app.handle(key(KeyCode::Backspace));
    app.handle(key(KeyCode::Backspace));
    assert!(app.composer.mentions().is_empty());
    assert!(app.composer.badge("src-session-1").is_none());
    assert!(!screen(&app).contains("next +"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_reply_is_marked() {
    let home = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let slow = AppOptions {
        offline_delay: Duration::from_millis(40),
        ..options(home.path())
    };
    let (mut app, _) = offline(&slow, tx.clone());
    let mut events = app.agent.subscribe();
    let forward = tx;
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if forward.send(AppEvent::Agent(event)).is_err() {
                break;
            }
        }
    });
    for event in typed("tell me a long story") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Offline model")
    })
    .await;
    app.handle(key(KeyCode::Esc));
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("reply interrupted")
    })
    .await;
    let log = own_log(&app, home.path(), "turn/end").await;
    assert!(
        log.contains("\"interrupted\":true"),
        "the partial answer is logged, marked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_popup_previews_the_highlighted_session() {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    for event in typed("see @src-ses") {
        app.handle(event);
    }
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("assistant: The validator used a non-leap month table.")
    })
    .await;
    let shown = screen(&app);
    assert!(shown.contains("preview · Leap day parsing"), "{shown}");
    // The pane itself (the rest of the screen holds random ids and paths).
    let pane: Vec<&str> = shown
        .lines()
        .skip_while(|l| !l.contains("╭ preview"))
        .take_while(|l| !l.contains("@ sessions"))
        .collect();
    insta::assert_snapshot!("popup_preview_pane", pane.join("\n"));
    assert!(
        shown.contains("user: Why does the date parser reject 2024-02-29?"),
        "{shown}"
    );
    // Closed popup, no preview.
    app.handle(key(KeyCode::Esc));
    assert!(!screen(&app).contains("preview · "));
}

/// A multi-line message reads as one line in the preview: breaks become spaces, not escapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_reads_line_breaks_as_spaces() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("sessions/--proj-api--/multi-line-1");
    std::fs::create_dir_all(&dir).unwrap();
    let lines = [
        r#"{"type":"session","version":0,"id":"multi-line-1","createdAt":1780000000000,"cwd":"/proj/api","delegationDepth":0}"#,
        r#"{"type":"turn/start","seq":0,"time":1780000000001,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
        r#"{"type":"user/message","seq":1,"time":1780000000002,"data":{"content":[{"type":"text","text":"List the steps."}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#,
        r#"{"type":"assistant/message","seq":2,"time":1780000000004,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Fixed.\n\n- first step\n- second step"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"}},"surfaceOp":"append"}"#,
        r#"{"type":"turn/end","seq":3,"time":1780000000005,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    std::fs::write(dir.join("session.jsonl"), lines.join("\n") + "\n").unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    for event in typed("see @multi-li") {
        app.handle(event);
    }
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("assistant: Fixed. - first step - second step")
    })
    .await;
    assert!(!screen(&app).contains("\\x0A"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_resume_with_a_word_opens_the_picker_with_it_over_a_cleared_screen() {
    use dsh_session_references::discovery::Discovery;
    use dsh_session_references::tui::app::NextSession;
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let discovery = Discovery::for_home(home.path(), &Default::default());
    let indexed = discovery.clone();
    tokio::task::spawn_blocking(move || indexed.refresh_blocking().unwrap())
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    app.keep_history_in(home.path());
    app.set_discovery(discovery);
    // A word that starts no id: the picker opens with it typed.
    for event in typed("/resume leap") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| app.picker_open()).await;
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Leap day parsing")
    })
    .await;
    let text = screen(&app);
    assert!(text.contains("Resume a session › leap"), "{text}");
    // Nothing of the welcome text shows through the picker.
    assert!(!text.contains("cross-session references"), "{text}");
    assert!(!text.contains("tip"), "{text}");
    assert!(!app.should_quit);
    app.handle(key(KeyCode::Enter));
    assert!(app.should_quit);
    assert_eq!(app.next, Some(NextSession::Resume("src-session-1".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_resume_without_an_id_opens_the_finder_as_a_picker() {
    use dsh_session_references::discovery::Discovery;
    use dsh_session_references::tui::app::NextSession;
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let discovery = Discovery::for_home(home.path(), &Default::default());
    let indexed = discovery.clone();
    tokio::task::spawn_blocking(move || indexed.refresh_blocking().unwrap())
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    app.set_discovery(discovery);
    // Open it, look, and leave with Esc: the session stays, the draft line is empty.
    for event in typed("/resume") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    assert!(app.picker_open());
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Leap day parsing")
    })
    .await;
    assert!(screen(&app).contains("src-session-1"));
    app.handle(key(KeyCode::Esc));
    assert!(!app.picker_open());
    assert!(!app.should_quit);
    // Open it again, narrow by a word of the title, and Enter resumes the highlighted session.
    for event in typed("/resume") {
        app.handle(event);
    }
    app.handle(key(KeyCode::Enter));
    for event in typed("leap") {
        app.handle(event);
    }
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Leap day parsing")
    })
    .await;
    app.handle(key(KeyCode::Enter));
    assert!(app.should_quit);
    assert_eq!(app.next, Some(NextSession::Resume("src-session-1".into())));
}

/// The `@` popup while the discovery index cannot answer (here: none exists yet, and no indexer
/// runs): titles still match, from the listing, rows show no made-up sizes, and the
/// transcript says once that the index is not used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_popup_answers_by_title_without_an_index_and_says_so_once() {
    use dsh_session_references::discovery::Discovery;
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let discovery = Discovery::for_home(home.path(), &Default::default());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = offline(&options(home.path()), tx);
    app.set_discovery(discovery);
    // "leap" is in the title only: the contract list (ids and cwds) would not find it.
    for event in typed("see @leap") {
        app.handle(event);
    }
    pump(&mut app, &mut rx, |app| {
        let s = screen(app);
        s.contains("Leap day parsing") && s.contains("searching the titles")
    })
    .await;
    assert!(!screen(&app).contains("0 msgs"), "{}", screen(&app));
    // Two more lookups ("lea", "leap"): the note is not repeated.
    app.handle(key(KeyCode::Backspace));
    pump(&mut app, &mut rx, |app| screen(app).contains("@lea ")).await;
    for event in typed("p") {
        app.handle(event);
    }
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Leap day parsing")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(event) = rx.try_recv() {
        app.handle(event);
    }
    assert_eq!(
        screen(&app).matches("searching the titles").count(),
        1,
        "{}",
        screen(&app)
    );
}

/// Issue 32: a keymap that unbinds every way out (or gives Ctrl-C to another action) never traps
/// the person: Ctrl-C twice on an idle, empty composer quits, and Ctrl-D on an empty composer
/// quits at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_keymap_takes_away_ctrl_c_twice_or_ctrl_d() {
    use dsh_session_references::tui::keys::Keymap;
    let hostile = [
        vec![
            ("clear-or-quit".to_string(), vec![]),
            ("submit".to_string(), vec![]),
            ("interrupt".to_string(), vec![]),
            ("delete".to_string(), vec![]),
        ],
        vec![
            ("clear-or-quit".to_string(), vec!["ctrl+x".to_string()]),
            ("details".to_string(), vec!["ctrl+c".to_string()]),
        ],
    ];
    for overrides in &hostile {
        let keymap = std::sync::Arc::new(Keymap::with_overrides(overrides).unwrap());
        let home = tempfile::tempdir().unwrap();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let (mut app, _) = offline(&options(home.path()), tx.clone());
        app.set_keymap(keymap.clone());
        for event in typed("a draft") {
            app.handle(event);
        }
        app.handle(ctrl('c'));
        assert!(
            app.composer.is_empty(),
            "{overrides:?}: Ctrl-C still clears"
        );
        app.handle(ctrl('c'));
        assert!(!app.should_quit, "{overrides:?}: the first idle press arms");
        app.handle(ctrl('c'));
        assert!(app.should_quit, "{overrides:?}: the second quits");

        let home = tempfile::tempdir().unwrap();
        let (mut app, _) = offline(&options(home.path()), tx);
        app.set_keymap(keymap);
        for event in typed("x") {
            app.handle(event);
        }
        app.handle(ctrl('d'));
        assert!(!app.should_quit, "{overrides:?}: not with a draft");
        app.handle(key(KeyCode::Backspace));
        app.handle(ctrl('d'));
        assert!(
            app.should_quit,
            "{overrides:?}: Ctrl-D on an empty composer quits"
        );
    }
}
