//! `examples/host.rs`, driven headless: a host's own TUI mounting the `@` popup, the composer's
//! mention handling and the submit transaction, on a copy of the demo home, drawn into a
//! `TestBackend`.

#[allow(dead_code)]
#[path = "../../examples/host.rs"]
mod host;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::reference::format_session_reference_mention;
use dsh_session_references::session::MessageSource;
use dsh_session_references::tui::snapshot::buffer_snapshot;
use host::HostApp;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// 2026-12-01 00:00 UTC: a few days after the demo home's sessions.
const NOW_MS: i64 = 1_796_083_200_000;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn type_text(app: &mut HostApp, text: &str) {
    for c in text.chars() {
        app.handle_key(key(KeyCode::Char(c)));
    }
}

fn frame(app: &HostApp) -> String {
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    terminal
        .draw(|frame| {
            let area = frame.area();
            app.render(area, frame.buffer_mut());
        })
        .unwrap();
    buffer_snapshot(terminal.backend().buffer())
}

/// The grid of a snapshot, without its style runs.
fn grid(snapshot: &str) -> String {
    snapshot
        .lines()
        .take_while(|line| line.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_mounts_the_popup_the_mention_and_the_submit_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    dsh_session_references::demo::install_into(&home).unwrap();
    let mut app = HostApp::new(&home, "host-session", Some("/home/dev/projects/parser")).unwrap();
    app.set_now_ms(NOW_MS);

    // `@` opens the popup over the host's own layout, with the demo home's sessions.
    type_text(&mut app, "@infra");
    app.settle().await;
    let popup = frame(&app);
    assert!(grid(&popup).contains("Staging Terraform module"), "{popup}");
    insta::assert_snapshot!("host_popup", popup);

    // Tab inserts the session as one mention; Enter sends it with a question.
    app.handle_key(key(KeyCode::Tab));
    app.settle().await;
    type_text(&mut app, "what did the migration change?");
    app.handle_key(key(KeyCode::Enter));
    app.settle().await;

    // The host's agent got the message and, before it, the snapshot of the session.
    let dispatched = app.agent().dispatched();
    assert_eq!(dispatched.len(), 1);
    let sent = &dispatched[0];
    assert!(
        sent.message
            .text()
            .contains("what did the migration change?"),
        "{:?}",
        sent.message
    );
    assert_eq!(sent.contexts.len(), 1);
    assert!(matches!(
        sent.contexts[0].source,
        MessageSource::SessionReference { .. }
    ));
    assert!(sent.contexts[0].text().contains("Terraform"));

    // The host shows the message and its reference card; the composer is empty again.
    let after = frame(&app);
    let shown = grid(&after);
    assert!(shown.contains("what did the migration change?"), "{after}");
    assert!(
        shown.contains("Staging Terraform module migration"),
        "{after}"
    );
    assert!(shown.contains("sent with 1 referenced session"), "{after}");
    insta::assert_snapshot!("host_sent", after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reference_gives_the_text_back() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    dsh_session_references::demo::install_into(&home).unwrap();
    let mut app = HostApp::new(&home, "host-session", None).unwrap();
    app.set_now_ms(NOW_MS);
    // A mention of a session the home does not hold: preparation fails, nothing is sent.
    let mention = format_session_reference_mention("no-such-session", Some("gone"));
    type_text(&mut app, &format!("see {mention} please"));
    app.settle().await;
    app.handle_key(key(KeyCode::Enter));
    app.settle().await;
    assert!(app.agent().dispatched().is_empty());
    let shown = grid(&frame(&app));
    assert!(shown.contains("Session reference failed"), "{shown}");
    assert!(
        shown.contains("see @gone please") || shown.contains("see @[gone]"),
        "{shown}"
    );
}
