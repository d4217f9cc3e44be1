//! The TUI's resume and submit paths against a log that cannot (or must not) be written: resuming
//! and quitting changes no byte, a session held by another writer is read-only with the typed
//! text kept, a write that fails gives the text back, and a held session is taken over (with what
//! the other writer logged) once it is free.

use crate::support::user;
use crate::support::*;
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::ModelChoice;
use dsh_session_references::agent::{
    AgentInfo, HookResult, Next, PromptDecision, PromptSubmitListener,
};
use dsh_session_references::session::reader::{read_log, Encoding};
use dsh_session_references::session::writer::WriteFault;
use dsh_session_references::session::BoxFuture;
use dsh_session_references::session::{EventData, Message, NewEvent, SessionHeader, SessionWriter};
use dsh_session_references::tui::app::{build, App, AppEvent, AppOptions, Wiring};
use dsh_session_references::tui::transcript::TranscriptItem;
use serde_json::{json, Map};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

fn resume(home: &Path, id: &str) -> AppOptions {
    AppOptions {
        home: home.to_path_buf(),
        resume: Some(id.into()),
        offline_delay: Duration::ZERO,
        encoding: None,
        cwd: Some("/w".into()),
        sources: Default::default(),
    }
}

/// Builds the app and forwards its agent's events to it, as the real loop does.
fn open(options: &AppOptions) -> (App, UnboundedReceiver<AppEvent>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (app, _) = build(
        options,
        Wiring::for_choice(options, &ModelChoice::Offline).unwrap(),
        tx.clone(),
    )
    .unwrap();
    forward(&app, tx);
    (app, rx)
}

fn forward(app: &App, tx: UnboundedSender<AppEvent>) {
    let mut events = app.agent.subscribe();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if tx.send(AppEvent::Agent(event)).is_err() {
                break;
            }
        }
    });
}

fn key(code: KeyCode) -> AppEvent {
    AppEvent::Input(TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn notices(app: &App) -> String {
    app.transcript
        .items()
        .iter()
        .filter_map(|item| match item {
            TranscriptItem::Notice { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn pump(app: &mut App, rx: &mut UnboundedReceiver<AppEvent>, done: impl Fn(&App) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done(app) {
        let event = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out; notices: {}", notices(app)))
            .expect("channel open");
        app.handle(event);
    }
}

fn quit(app: App) {
    app.agent.shutdown();
    drop(app);
}

fn turn(n: u64, text: &str) -> Vec<NewEvent> {
    vec![
        NewEvent::new(EventData::TurnStart {
            turn: n,
            trigger: json!({"kind": "message"}),
            extra: Map::new(),
        }),
        user(text),
        NewEvent::new(EventData::TurnEnd {
            turn: n,
            reason: json!({"kind": "completed"}),
            extra: Map::new(),
        }),
    ]
}

fn session(home: &Path, id: &str, encoding: Encoding) -> PathBuf {
    let mut writer =
        SessionWriter::create(home, SessionHeader::new(id, 1, Some("/w".into())), encoding)
            .unwrap();
    writer.append(turn(1, "first")).unwrap();
    writer.path().to_path_buf()
}

async fn wait_for_log(path: &Path, what: &str, done: impl Fn(&str) -> bool) {
    for _ in 0..500 {
        let (_, records) = read_log(path).unwrap();
        let text = serde_json::to_string(&records).unwrap();
        if done(&text) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_and_quitting_changes_no_byte() {
    let home = tempfile::tempdir().unwrap();
    // A torn tail just written (maybe an append in flight), a torn tail long settled, and
    // whole records after a repeated seq: none of them is touched by resume + quit.
    let fresh = session(home.path(), "fresh", Encoding::Zstd);
    fs::OpenOptions::new()
        .append(true)
        .open(&fresh)
        .unwrap()
        .write_all(&[0x28, 0xB5, 0x2F, 0xFD, 0x20])
        .unwrap();
    let settled = session(home.path(), "settled", Encoding::Zstd);
    fs::OpenOptions::new()
        .append(true)
        .open(&settled)
        .unwrap()
        .write_all(&[0x28, 0xB5, 0x2F, 0xFD, 0x20])
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let plain = session(scratch.path(), "dup", Encoding::Plain);
    let mut lines = lines_of(&fs::read(&plain).unwrap());
    lines.pop(); // the turn never ended
    let repeated = lines[2].clone();
    lines.insert(3, repeated);
    let dup = place_log(
        home.path(),
        "--w--",
        "dup",
        "session.jsonl.zstd",
        &to_zstd_frames(&lines.concat(), 1),
    );
    for (id, path) in [("fresh", &fresh), ("settled", &settled), ("dup", &dup)] {
        fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(
                std::time::SystemTime::now()
                    - Duration::from_secs(if id == "fresh" { 0 } else { 60 }),
            )
            .unwrap();
        let before = fs::read(path).unwrap();
        let (app, _rx) = open(&resume(home.path(), id));
        quit(app);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(fs::read(path).unwrap(), before, "{id}: resume + quit");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_log_resumes_read_only_and_keeps_the_typed_text() {
    let home = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let plain = session(scratch.path(), "dup", Encoding::Plain);
    let mut lines = lines_of(&fs::read(&plain).unwrap());
    lines.pop();
    let repeated = lines[2].clone();
    lines.insert(3, repeated);
    let path = place_log(
        home.path(),
        "--w--",
        "dup",
        "session.jsonl",
        &lines.concat(),
    );
    let before = fs::read(&path).unwrap();
    let (mut app, _rx) = open(&resume(home.path(), "dup"));
    assert!(notices(&app).contains("Read-only"), "{}", notices(&app));
    app.composer.set_text("please keep me");
    app.handle(key(KeyCode::Enter));
    assert_eq!(app.composer.submission_text(), "please keep me");
    assert!(notices(&app).contains("Not sent"), "{}", notices(&app));
    assert_eq!(app.agent.status().queued_prompts, 0);
    quit(app);
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tuis_on_one_session_never_lose_a_message() {
    let home = tempfile::tempdir().unwrap();
    let path = session(home.path(), "shared", Encoding::Zstd);
    let (mut first, mut first_rx) = open(&resume(home.path(), "shared"));
    let (mut second, mut second_rx) = open(&resume(home.path(), "shared"));
    assert!(
        notices(&second).contains("another dsh-refs is writing this session"),
        "{}",
        notices(&second)
    );
    // The second refuses to send and keeps the text.
    second.composer.set_text("from the second");
    second.handle(key(KeyCode::Enter));
    assert_eq!(second.composer.submission_text(), "from the second");
    assert!(
        notices(&second).contains("Not sent"),
        "{}",
        notices(&second)
    );
    // The first writes as usual.
    first.composer.set_text("from the first");
    first.handle(key(KeyCode::Enter));
    pump(&mut first, &mut first_rx, |app| app.composer.is_empty()).await;
    wait_for_log(&path, "first", |log| {
        log.contains("from the first") && log.matches("turn/end").count() == 2
    })
    .await;
    // Shutting down lets go of the session even while its app is still around.
    first.agent.shutdown();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Once the first let go, the second takes the session over, with what the first logged.
    second.handle(key(KeyCode::Enter));
    pump(&mut second, &mut second_rx, |app| app.composer.is_empty()).await;
    wait_for_log(&path, "second", |log| {
        log.contains("from the second") && log.matches("turn/end").count() == 3
    })
    .await;
    let (scan, records) = read_log(&path).unwrap();
    assert!(scan.torn_tail.is_none());
    let seqs: Vec<u64> = records.iter().map(|r| r.first_seq()).collect();
    assert!(seqs.windows(2).all(|w| w[1] > w[0]), "{seqs:?}");
    let turns: Vec<String> = records
        .iter()
        .filter_map(|r| match r {
            dsh_session_references::session::Record::Event(e) if e.kind == "turn/start" => {
                Some(e.data.get().to_string())
            }
            _ => None,
        })
        .collect();
    for (n, turn) in turns.iter().enumerate() {
        assert!(turn.contains(&format!("\"turn\":{}", n + 1)), "{turns:?}");
    }
    let surface = second.agent.live().snapshot();
    let texts: Vec<String> = surface
        .events
        .iter()
        .filter_map(|e| e.message("shared").ok().flatten())
        .map(|m| m.text())
        .collect();
    assert!(texts.iter().any(|t| t == "from the first"), "{texts:?}");
    assert!(texts.iter().any(|t| t == "from the second"), "{texts:?}");
    quit(second);
    drop(first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_write_gives_the_text_back() {
    let home = tempfile::tempdir().unwrap();
    let path = session(home.path(), "full", Encoding::Plain);
    let before = fs::read(&path).unwrap();
    let (mut app, mut rx) = open(&resume(home.path(), "full"));
    app.agent.set_write_fault(Some(WriteFault {
        after: 3,
        kind: std::io::ErrorKind::StorageFull,
    }));
    app.composer.set_text("do not lose me");
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| {
        notices(app).contains("Message not sent")
    })
    .await;
    assert_eq!(app.composer.submission_text(), "do not lose me");
    assert!(
        notices(&app).contains("could not write"),
        "{}",
        notices(&app)
    );
    assert_eq!(fs::read(&path).unwrap(), before, "nothing half written");
    // The disk has room again: the same text goes out.
    app.agent.set_write_fault(None);
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| app.composer.is_empty()).await;
    wait_for_log(&path, "retry", |log| log.contains("do not lose me")).await;
    let (_, records) = read_log(&path).unwrap();
    let turns = records.iter().filter(|r| r.kind() == "turn/start").count();
    assert_eq!(turns, 2, "the failed turn left no turn/start");
    assert!(serde_json::to_string(&records)
        .unwrap()
        .contains("\"turn\":2"));
    quit(app);
}

struct Blocker;

impl PromptSubmitListener for Blocker {
    fn on_prompt_submit<'a>(
        &'a self,
        _agent: &'a AgentInfo,
        _message: &'a Message,
        _cancel: &'a CancellationToken,
        _next: Next<'a>,
    ) -> BoxFuture<'a, HookResult> {
        Box::pin(async {
            Ok(PromptDecision::Block {
                reason: "policy".into(),
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_prompt_gives_the_text_back() {
    let home = tempfile::tempdir().unwrap();
    session(home.path(), "s", Encoding::Zstd);
    let (mut app, mut rx) = open(&resume(home.path(), "s"));
    app.agent.hooks().append(std::sync::Arc::new(Blocker));
    app.composer.set_text("blocked words");
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| {
        notices(app).contains("Message not sent (blocked)")
    })
    .await;
    assert_eq!(app.composer.submission_text(), "blocked words");
    quit(app);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_log_that_just_changed_says_another_program_may_be_writing() {
    let home = tempfile::tempdir().unwrap();
    let path = session(home.path(), "busy", Encoding::Zstd);
    let (app, _rx) = open(&resume(home.path(), "busy"));
    assert!(
        notices(&app).contains("another program may be writing"),
        "{}",
        notices(&app)
    );
    quit(app);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    let (app, _rx) = open(&resume(home.path(), "busy"));
    assert!(
        !notices(&app).contains("another program"),
        "{}",
        notices(&app)
    );
    quit(app);
}
