//! Files reach the model only when the person chose them (issue 20 §1): a fake key planted
//! outside the project never reaches a loopback model server through a dsh session title, a
//! Claude Code `ai-title`, a bracketed paste or a referenced session's conversation; a picked
//! file and a typed-then-chipped file do, each drawn as a chip with its size first; a file
//! outside the cwd goes only after the person answers `y`.

use crate::app::{options, screen_at};
use crate::support::model::{answer, chunked, Reply, Server};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::{ApiKey, ModelChoice, ProviderSettings};
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions, SourceSet};
use dsh_session_references::tui::app::{build, App, AppEvent, AppOptions, ConfirmOutside, Wiring};
use dsh_session_references::tui::composer::{Composer, FileElement};
use dsh_session_references::tui::keys::Keymap;
use dsh_session_references::tui::snapshot::render_snapshot;
use dsh_session_references::tui::Renderable;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

const KEY_MARKER: &str = "PLANTED-KEY-7c1e0f-do-not-send";
const NOTES_MARKER: &str = "project notes 41d9";
/// Longer than the time a key must come after the outside-file prompt to answer it.
const GUARD: Duration = Duration::from_millis(300);

/// A scratch tree: `proj/` (the session's cwd, with `notes.md`), `secret/id_rsa` beside it
/// holding [`KEY_MARKER`], and the dsh home.
use crate::support::planted::{planted, Planted as Tree};

fn tree() -> Tree {
    planted(NOTES_MARKER, &format!("-----BEGIN KEY-----\n{KEY_MARKER}"))
}

fn choice(base_url: String) -> ModelChoice {
    ModelChoice::Remote(Box::new(ProviderSettings {
        provider: "deepseek".into(),
        base_url,
        model: "deepseek-v4-flash".into(),
        api_key_env: Some("DSH_TEST_KEY".into()),
        api_key: Some(ApiKey::new("sk-attach-test")),
        reasoning_effort: None,
        max_tokens: None,
        connect_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(5),
        max_retries: 0,
        retry_base: Duration::from_millis(10),
        max_stream_bytes: dsh_session_references::agent::config::MAX_STREAM_BYTES,
    }))
}

fn app_options(tree: &Tree, sources: SourceSet) -> AppOptions {
    AppOptions {
        cwd: Some(tree.cwd.to_string_lossy().into_owned()),
        sources,
        ..options(&tree.home)
    }
}

/// The app over a loopback model server that answers `turns` times with `answered N`.
async fn start(
    tree: &Tree,
    sources: SourceSet,
    turns: usize,
) -> (App, UnboundedReceiver<AppEvent>, Server) {
    let replies = (1..=turns)
        .map(|n| Reply::sse(chunked(&answer(&[], &[&format!("answered {n}")]))))
        .collect();
    let server = Server::start(replies).await;
    let opts = app_options(tree, sources);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut app, _) = build(
        &opts,
        Wiring::for_choice(&opts, &choice(server.base_url())).unwrap(),
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
    app.start_file_finder(tree.cwd.clone());
    (app, rx, server)
}

fn key(code: KeyCode) -> AppEvent {
    AppEvent::Input(TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        app.handle(key(KeyCode::Char(c)));
    }
}

fn screen(app: &App) -> String {
    screen_at(app, 140)
}

async fn pump(app: &mut App, rx: &mut UnboundedReceiver<AppEvent>, done: impl Fn(&App) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done(app) {
        let event = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out; the screen:\n{}", screen(app)))
            .expect("channel open");
        app.handle(event);
    }
}

/// Lets events in for `ms` (answers that would come, such as an inspection, do).
async fn settle(app: &mut App, rx: &mut UnboundedReceiver<AppEvent>, ms: u64) {
    let until = tokio::time::Instant::now() + Duration::from_millis(ms);
    while let Ok(Some(event)) = tokio::time::timeout_at(until, rx.recv()).await {
        app.handle(event);
    }
}

/// Presses Enter and waits for turn `n`'s answer; returns every request body the server got.
async fn send(
    app: &mut App,
    rx: &mut UnboundedReceiver<AppEvent>,
    server: &Server,
    n: usize,
) -> String {
    app.handle(key(KeyCode::Enter));
    let answered = format!("answered {n}");
    pump(app, rx, |app| screen(app).contains(&answered)).await;
    assert_eq!(server.requests().len(), n);
    server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A dsh session of `cwd` whose first prompt is `prompt` and whose title is `title` (none: the
/// title the store derives).
fn write_dsh_session(home: &Path, id: &str, title: Option<&str>, prompt: &str) {
    let dir = home.join("sessions/--other--").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let text = serde_json::Value::String(prompt.into()).to_string();
    let mut lines = vec![
        format!(r#"{{"type":"session","version":0,"id":"{id}","createdAt":1780000000000,"cwd":"/other","delegationDepth":0}}"#),
        r#"{"type":"turn/start","seq":0,"time":1780000000001,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#.to_string(),
        format!(r#"{{"type":"user/message","seq":1,"time":1780000000002,"data":{{"content":[{{"type":"text","text":{text}}}],"source":{{"kind":"user"}},"role":"user","id":"u1"}},"surfaceOp":"append"}}"#),
        r#"{"type":"assistant/message","seq":2,"time":1780000000004,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Rotated it."}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"}},"surfaceOp":"append"}"#.to_string(),
        r#"{"type":"turn/end","seq":3,"time":1780000000005,"data":{"turn":1,"reason":{"kind":"completed"}}}"#.to_string(),
    ];
    if let Some(title) = title {
        let title = serde_json::Value::String(title.into()).to_string();
        lines.push(format!(r#"{{"type":"session/title","seq":4,"time":1780000000006,"data":{{"title":{title},"messageSeqs":[1],"source":{{"kind":"fallback"}}}}}}"#));
    }
    std::fs::write(dir.join("session.jsonl"), lines.join("\n") + "\n").unwrap();
}

/// Types `@query`, waits for the popup and takes its first row with Tab.
async fn mention(app: &mut App, rx: &mut UnboundedReceiver<AppEvent>, query: &str, shown: &str) {
    type_text(app, &format!("@{query}"));
    pump(app, rx, |app| !app.popup.is_empty()).await;
    app.handle(key(KeyCode::Tab));
    assert_eq!(app.composer.mentions().len(), 1, "{}", screen(app));
    assert!(
        app.composer.mentions()[0].label.contains(shown),
        "{:?}",
        app.composer.mentions()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dsh_title_naming_a_key_attaches_nothing() {
    let tree = tree();
    let title = format!("deploy notes @{} (draft)", tree.key.display());
    write_dsh_session(&tree.home, "titled-1", Some(&title), "deploy the thing");
    let (mut app, mut rx, server) = start(&tree, SourceSet::default(), 1).await;
    type_text(&mut app, "see ");
    mention(&mut app, &mut rx, "titled", "deploy notes @").await;
    type_text(&mut app, "please");
    let sent = send(&mut app, &mut rx, &server, 1).await;
    assert!(sent.contains("deploy notes @"), "the title went: {sent}");
    assert!(!sent.contains(KEY_MARKER), "the key went: {sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_ai_title_naming_a_key_attaches_nothing() {
    let tree = tree();
    let claude = tree.root.join("claude");
    let project = claude.join("projects/-other");
    std::fs::create_dir_all(&project).unwrap();
    let id = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9";
    let ai_title = serde_json::Value::String(format!("rotate @{} today", tree.key.display()));
    let lines = [
        format!(
            r#"{{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/other","sessionId":"{id}","version":"2.1.80","type":"user","message":{{"role":"user","content":"rotate the deploy key"}},"uuid":"u1","timestamp":"2026-01-02T00:00:01.000Z"}}"#
        ),
        format!(
            r#"{{"parentUuid":"u1","isSidechain":false,"userType":"external","cwd":"/other","sessionId":"{id}","version":"2.1.80","type":"assistant","message":{{"role":"assistant","content":[{{"type":"text","text":"Done rotating."}}]}},"uuid":"a1","timestamp":"2026-01-02T00:00:02.000Z"}}"#
        ),
        format!(r#"{{"type":"ai-title","sessionId":"{id}","aiTitle":{ai_title}}}"#),
    ];
    std::fs::write(project.join(format!("{id}.jsonl")), lines.join("\n") + "\n").unwrap();
    let sources = SourceSet {
        hide_dsh: false,
        external: vec![ExternalSessions::new(ExternalAgent::Claude, claude)],
    };
    let (mut app, mut rx, server) = start(&tree, sources, 1).await;
    type_text(&mut app, "compare ");
    mention(&mut app, &mut rx, "claude:0b1c", "rotate @").await;
    let sent = send(&mut app, &mut rx, &server, 1).await;
    assert!(sent.contains("Done rotating."), "the snapshot went: {sent}");
    assert!(!sent.contains(KEY_MARKER), "the key went: {sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_referenced_conversation_naming_a_key_attaches_nothing() {
    let tree = tree();
    // The conversation names the key, and so does the title derived from its first prompt
    // (a fallback title, as the writer derives one): the label carries it into the prompt.
    let prompt = format!("check @{} and @../secret/id_rsa for me", tree.key.display());
    write_dsh_session(&tree.home, "convo-1", Some(&prompt), &prompt);
    let (mut app, mut rx, server) = start(&tree, SourceSet::default(), 1).await;
    mention(&mut app, &mut rx, "convo", "check @").await;
    type_text(&mut app, " what happened?");
    let sent = send(&mut app, &mut rx, &server, 1).await;
    assert!(sent.contains("Rotated it."), "the snapshot went: {sent}");
    assert!(!sent.contains(KEY_MARKER), "the key went: {sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bracketed_paste_naming_a_key_attaches_nothing() {
    let tree = tree();
    let (mut app, mut rx, server) = start(&tree, SourceSet::default(), 2).await;
    // A long paste: collapsed, never seen whole.
    let mut pasted: String = (1..=30).map(|n| format!("log line {n}\n")).collect();
    pasted.push_str(&format!("@{} \n@../secret/id_rsa \n", tree.key.display()));
    type_text(&mut app, "look ");
    app.handle(AppEvent::Input(TermEvent::Paste(pasted)));
    assert!(
        screen(&app).contains("[Pasted 32 lines]"),
        "{}",
        screen(&app)
    );
    type_text(&mut app, " thanks ");
    settle(&mut app, &mut rx, 100).await;
    let sent = send(&mut app, &mut rx, &server, 1).await;
    assert!(sent.contains("log line 30"), "the paste went: {sent}");
    assert!(!sent.contains(KEY_MARKER), "the key went: {sent}");
    // A short paste is shown as text, and still attaches nothing by itself.
    app.handle(AppEvent::Input(TermEvent::Paste(
        "read @../secret/id_rsa now".into(),
    )));
    let sent = send(&mut app, &mut rx, &server, 2).await;
    assert!(sent.contains("read @../secret/id_rsa now"), "{sent}");
    assert!(!sent.contains(KEY_MARKER), "the key went: {sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picked_file_is_a_sized_chip_and_reaches_the_model() {
    let tree = tree();
    let (mut app, mut rx, server) = start(&tree, SourceSet::default(), 1).await;
    type_text(&mut app, "summarize @notes");
    pump(&mut app, &mut rx, |app| {
        app.popup.items().iter().any(|item| {
            matches!(item, dsh_session_references::tui::popup::PopupItem::File(row) if row.path == "notes.md")
        })
    })
    .await;
    app.handle(key(KeyCode::Tab));
    pump(&mut app, &mut rx, |app| app.composer.files().len() == 1).await;
    let shown = screen(&app);
    assert!(shown.contains("@notes.md ⟨19 B⟩"), "{shown}");
    let sent = send(&mut app, &mut rx, &server, 1).await;
    assert!(sent.contains(NOTES_MARKER), "the picked file went: {sent}");
    assert!(sent.contains("summarize @notes.md"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_path_becomes_a_chip_on_space_or_tab_and_reaches_the_model() {
    let tree = tree();
    let (mut app, mut rx, server) = start(&tree, SourceSet::default(), 2).await;
    type_text(&mut app, "read @notes.md ");
    pump(&mut app, &mut rx, |app| app.composer.files().len() == 1).await;
    assert!(
        screen(&app).contains("@notes.md ⟨19 B⟩"),
        "{}",
        screen(&app)
    );
    let sent = send(&mut app, &mut rx, &server, 1).await;
    assert!(sent.contains(NOTES_MARKER), "the typed file went: {sent}");
    // Tab at the end of the token does it too (after Esc closed the popup); a typed word that
    // names no file stays text.
    type_text(&mut app, "and @nobody ");
    settle(&mut app, &mut rx, 100).await;
    assert!(app.composer.files().is_empty());
    std::fs::write(tree.cwd.join("other.md"), "other marker 5b2a").unwrap();
    type_text(&mut app, "@other.md");
    app.handle(key(KeyCode::Esc));
    app.handle(key(KeyCode::Tab));
    pump(&mut app, &mut rx, |app| app.composer.files().len() == 1).await;
    assert!(
        screen(&app).contains("@other.md ⟨17 B⟩"),
        "{}",
        screen(&app)
    );
    let sent = send(&mut app, &mut rx, &server, 2).await;
    assert!(sent.contains("other marker 5b2a"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_outside_the_cwd_goes_only_after_a_yes() {
    let tree = tree();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&tree.key, tree.cwd.join("innocent.txt")).unwrap();
    let (mut app, mut rx, server) = start(&tree, SourceSet::default(), 2).await;
    // `..`, an absolute path and a symlink that resolves outside each ask; the default is no.
    let mut typed = vec![
        "@../secret/id_rsa ".to_string(),
        format!("@{} ", tree.key.display()),
    ];
    if cfg!(unix) {
        typed.push("@innocent.txt ".into());
    }
    for text in &typed {
        type_text(&mut app, text);
        pump(&mut app, &mut rx, |app| {
            screen(app).contains("Send a file from outside this session's directory?")
        })
        .await;
        tokio::time::sleep(GUARD).await;
        app.handle(key(KeyCode::Enter));
        assert!(
            !screen(&app).contains("outside this session's directory?"),
            "{}",
            screen(&app)
        );
        assert!(app.composer.files().is_empty(), "{text}: no chip on a no");
    }
    let sent = send(&mut app, &mut rx, &server, 1).await;
    assert!(
        !sent.contains(KEY_MARKER),
        "the key went without a yes: {sent}"
    );
    // Asked again and answered `y`: it goes, as a chip that says where it is.
    type_text(&mut app, "@../secret/id_rsa ");
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("outside this session's directory?")
    })
    .await;
    // A `y` in the same burst as the space that raised the prompt is typing, not a yes.
    app.handle(key(KeyCode::Char('y')));
    assert!(app.composer.files().is_empty());
    assert!(
        app.composer.display_text().ends_with("id_rsa y"),
        "{}",
        app.composer.display_text()
    );
    app.handle(key(KeyCode::Backspace));
    tokio::time::sleep(GUARD).await;
    app.handle(key(KeyCode::Char('y')));
    assert_eq!(app.composer.files().len(), 1);
    assert!(
        screen(&app).contains("@../secret/id_rsa ⟨outside · "),
        "{}",
        screen(&app)
    );
    let sent = send(&mut app, &mut rx, &server, 2).await;
    assert!(
        sent.contains(KEY_MARKER),
        "confirmed, the file went: {sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outside_file_prompt_reads_its_keys_from_the_key_table() {
    let tree = tree();
    let (mut app, mut rx, _server) = start(&tree, SourceSet::default(), 1).await;
    let keymap =
        Keymap::with_overrides(&[("confirm-attach".to_string(), vec!["a".to_string()])]).unwrap();
    app.set_keymap(std::sync::Arc::new(keymap));
    type_text(&mut app, "@../secret/id_rsa ");
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("outside this session's directory?")
    })
    .await;
    assert!(screen(&app).contains("a send it"), "{}", screen(&app));
    tokio::time::sleep(GUARD).await;
    // `y` is no longer the yes: it declines, then types.
    app.handle(key(KeyCode::Char('y')));
    assert!(app.composer.files().is_empty());
    assert!(app.composer.display_text().ends_with("id_rsa y"));
    app.handle(key(KeyCode::Backspace));
    app.handle(key(KeyCode::Backspace));
    type_text(&mut app, " ");
    pump(&mut app, &mut rx, |app| {
        screen(app).contains("outside this session's directory?")
    })
    .await;
    tokio::time::sleep(GUARD).await;
    app.handle(key(KeyCode::Char('a')));
    assert_eq!(app.composer.files().len(), 1, "{}", screen(&app));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chip_whose_file_moved_outside_stops_the_send() {
    let tree = tree();
    let (mut app, mut rx, server) = start(&tree, SourceSet::default(), 1).await;
    std::fs::write(tree.cwd.join("late.txt"), "fine").unwrap();
    type_text(&mut app, "@late.txt ");
    pump(&mut app, &mut rx, |app| app.composer.files().len() == 1).await;
    // Swapped for a symlink to the key after the chip was made.
    std::fs::remove_file(tree.cwd.join("late.txt")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&tree.key, tree.cwd.join("late.txt")).unwrap();
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| screen(app).contains("Not sent:")).await;
    assert_eq!(app.composer.files().len(), 1, "the draft is back");
    settle(&mut app, &mut rx, 100).await;
    assert!(server.requests().is_empty());
}

#[test]
fn a_file_chip_shows_its_size() {
    let mut composer = Composer::new();
    for c in "explain @src/main.rs and @../others/notes.md please".chars() {
        composer.handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
    let first = composer.plain_token_ending_at(20).unwrap();
    assert!(composer.make_chip(
        &first,
        FileElement {
            path: "src/main.rs".into(),
            bytes: 2300,
            outside: false,
        }
    ));
    let second = composer.plain_tokens().pop().unwrap();
    assert!(composer.make_chip(
        &second,
        FileElement {
            path: "../others/notes.md".into(),
            bytes: 512,
            outside: true,
        }
    ));
    let height = composer.desired_height(60);
    insta::assert_snapshot!(render_snapshot(60, height, |area, buf| composer.render(area, buf)));
}

#[test]
fn the_outside_file_prompt() {
    let prompt = ConfirmOutside {
        path: "../.ssh/id_rsa",
        resolved: "/home/dev/.ssh/id_rsa",
        bytes: 1675,
        cwd: "/home/dev/webapp",
        keymap: &Keymap::standard(),
    };
    insta::assert_snapshot!(render_snapshot(80, 9, |area, buf| prompt.render(area, buf)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enter_while_a_chip_is_sized_sends_nothing_yet() {
    let tree = tree();
    let (mut app, mut rx, server) = start(&tree, SourceSet::default(), 1).await;
    type_text(&mut app, "read @notes.md ");
    // The inspection's answer is still in the channel: Enter must not send the bare text.
    app.handle(key(KeyCode::Enter));
    assert!(
        screen(&app).contains("still being sized"),
        "{}",
        screen(&app)
    );
    assert!(app.composer.display_text().starts_with("read @notes.md"));
    pump(&mut app, &mut rx, |app| app.composer.files().len() == 1).await;
    assert!(server.requests().is_empty());
    let sent = send(&mut app, &mut rx, &server, 1).await;
    assert!(sent.contains(NOTES_MARKER), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_session_id_prefix_goes_as_a_mention() {
    let tree = tree();
    write_dsh_session(
        &tree.home,
        "typed-id-session-1",
        Some("Key rotation"),
        "rotate",
    );
    write_dsh_session(&tree.home, "dup-prefix-1", None, "one");
    write_dsh_session(&tree.home, "dup-prefix-2", None, "two");
    let (mut app, mut rx, server) = start(&tree, SourceSet::default(), 2).await;
    // Typed whole, never picked from the popup (Esc closed it).
    type_text(&mut app, "what did @typed-id-sess");
    app.handle(key(KeyCode::Esc));
    type_text(&mut app, " decide, @me?");
    settle(&mut app, &mut rx, 100).await;
    assert!(app.composer.mentions().is_empty());
    let sent = send(&mut app, &mut rx, &server, 1).await;
    assert!(sent.contains("## Referenced sessions"), "{sent}");
    assert!(sent.contains("Rotated it."), "the snapshot went: {sent}");
    assert!(
        sent.contains("what did @typed-id-sess decide, @me?"),
        "the prompt reads as typed: {sent}"
    );
    // A prefix of several sessions stops the send and lists them; the draft comes back.
    type_text(&mut app, "and @dup-prefix");
    app.handle(key(KeyCode::Esc));
    type_text(&mut app, " too");
    settle(&mut app, &mut rx, 100).await;
    app.handle(key(KeyCode::Enter));
    pump(&mut app, &mut rx, |app| screen(app).contains("Not sent:")).await;
    let shown = screen(&app);
    assert!(
        shown.contains("dup-prefix-1") && shown.contains("dup-prefix-2"),
        "{shown}"
    );
    assert_eq!(app.composer.display_text(), "and @dup-prefix too");
    settle(&mut app, &mut rx, 100).await;
    assert_eq!(server.requests().len(), 1);
    // Tab after a typed prefix (no popup row to take) makes the mention there and then.
    app.composer.clear();
    type_text(&mut app, "@typed-id-sess");
    app.handle(key(KeyCode::Esc));
    app.handle(key(KeyCode::Tab));
    pump(&mut app, &mut rx, |app| app.composer.mentions().len() == 1).await;
    assert_eq!(app.composer.mentions()[0].session_id, "typed-id-session-1");
    assert!(app.composer.files().is_empty());
}
