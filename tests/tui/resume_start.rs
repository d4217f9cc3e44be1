//! `dsh-refs --resume` with no id: the app opens with the picker up (the one loop draws it, as
//! for `/resume`), the index brought up to date before its first answer; Esc ends the app,
//! Enter resumes the highlighted session.

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::ModelChoice;
use dsh_session_references::discovery::Discovery;
use dsh_session_references::session::now_ms;
use dsh_session_references::tui::app::{build, App, AppEvent, NextSession, Wiring};
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// A plain-text dsh log for session `id` in `cwd`, last active `at`, titled `title`.
fn write_session(home: &Path, id: &str, cwd: &str, at: i64, title: &str) {
    let dir = home.join(format!("sessions/--w--/{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let header = serde_json::json!({
        "type": "session", "version": 0, "id": id, "createdAt": at, "cwd": cwd,
        "delegationDepth": 0
    });
    let lines = [
        header.to_string(),
        format!(
            r#"{{"type":"user/message","seq":0,"time":{},"data":{{"content":[{{"type":"text","text":"hello"}}],"source":{{"kind":"user"}},"role":"user","id":"u-{id}"}},"surfaceOp":"append"}}"#,
            at + 1
        ),
        format!(
            r#"{{"type":"session/title","seq":1,"time":{},"data":{{"title":"{title}","messageSeqs":[0],"source":{{"kind":"fallback"}}}}}}"#,
            at + 2
        ),
    ];
    std::fs::write(dir.join("session.jsonl"), lines.join("\n") + "\n").unwrap();
}

fn key(code: KeyCode) -> AppEvent {
    AppEvent::Input(TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn screen(app: &App) -> String {
    let area = ratatui::layout::Rect::new(0, 0, 80, 12);
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

/// The app as `run_terminal_picking` opens it: a new session, the picker up over it. No index
/// exists yet: the picker's first search makes it.
async fn started(home: &Path) -> (App, UnboundedReceiver<AppEvent>) {
    let hour = 3_600_000;
    write_session(
        home,
        "abc123-first",
        "/w",
        now_ms() - 3 * hour,
        "Leap day parsing",
    );
    write_session(
        home,
        "xyz-other",
        "/w",
        now_ms() - 5 * hour,
        "Dark mode toggle",
    );
    let options = crate::app::options(home);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let wiring = Wiring::for_choice(&options, &ModelChoice::Offline).unwrap();
    let (mut app, _) = build(&options, wiring, tx).unwrap();
    app.set_discovery(Discovery::for_home(home, &Default::default()));
    app.open_start_picker("");
    (app, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_without_an_id_opens_the_app_with_the_picker_up() {
    let home = tempfile::tempdir().unwrap();
    let (mut app, mut rx) = started(home.path()).await;
    assert!(app.picker_open());
    pump(&mut app, &mut rx, |app| {
        let s = screen(app);
        s.contains("Leap day parsing") && s.contains("Dark mode toggle")
    })
    .await;
    // The new session's id is random: named by a placeholder of its length.
    let id = app.agent.info().session_id.clone();
    let shown = screen(&app).replace(&id, &format!("{:<1$}", "session-<new>", id.len()));
    insta::assert_snapshot!("resume_picker_at_start", shown);
    // Enter resumes the highlighted (most recent) session on the same terminal.
    app.handle(key(KeyCode::Enter));
    assert!(app.should_quit);
    assert_eq!(app.next, Some(NextSession::Resume("abc123-first".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_picker_at_start_ends_the_app_and_resumes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let (mut app, mut rx) = started(home.path()).await;
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("Leap day parsing")
    })
    .await;
    // A key the table does not bind does nothing (F5 is bound nowhere).
    app.handle(key(KeyCode::F(5)));
    assert!(app.picker_open() && !app.should_quit);
    app.handle(key(KeyCode::Esc));
    assert!(!app.picker_open());
    assert!(app.should_quit);
    assert_eq!(app.next, None);
}
