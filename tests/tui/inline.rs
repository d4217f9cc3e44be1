//! Inline mode with the real app over ratatui's `TestBackend` (its scrollback is the terminal's):
//! a conversation is written above the viewport with the full screen's rows, a session's last
//! items go up when it closes, and the exit leaves the whole conversation with nothing of the
//! viewport behind.

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::ModelChoice;
use dsh_session_references::tui::app::{build, App, AppEvent, AppOptions, Wiring};
use dsh_session_references::tui::inline::InlineScreen;
use dsh_session_references::tui::transcript::TranscriptItem;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use std::time::Duration;

fn rows(buf: &Buffer) -> Vec<String> {
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

fn answered(app: &App, text: &str) -> bool {
    app.transcript.items().iter().any(|item| {
        matches!(item, TranscriptItem::Assistant { text: t, streaming: false, .. } if t.contains(text))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_goes_into_the_scrollback_and_the_exit_leaves_only_it() {
    let home = tempfile::tempdir().unwrap();
    let options = AppOptions {
        offline_delay: Duration::from_millis(20),
        ..super::app::options(home.path())
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let wiring = Wiring::for_choice(&options, &ModelChoice::Offline).unwrap();
    let (mut app, _) = build(&options, wiring, tx.clone()).unwrap();
    app.set_inline(true);
    // The agent's events reach the app as the terminal loop forwards them.
    let mut events = app.agent.subscribe();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if tx.send(AppEvent::Agent(event)).is_err() {
                break;
            }
        }
    });
    let mut streamed_in_viewport = false;
    let mut screen = InlineScreen::new(TestBackend::new(70, 12), |b| b.clone()).unwrap();
    screen.frame(&mut app).unwrap();
    for text in ["first question", "second question"] {
        for c in text.chars() {
            app.handle(AppEvent::Input(TermEvent::Key(KeyEvent::new(
                KeyCode::Char(c),
                KeyModifiers::NONE,
            ))));
        }
        app.handle(AppEvent::Input(TermEvent::Key(KeyEvent::new(
            KeyCode::Enter,
            KeyModifiers::NONE,
        ))));
        screen.frame(&mut app).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        // Until the answer is in and the turn is over (the status says idle): a question typed
        // while the turn still runs would be a steer, not the next message.
        let idle = |screen: &InlineScreen<TestBackend>| {
            rows(screen.terminal().backend().buffer())
                .iter()
                .any(|row| row.contains("○ idle"))
        };
        while !answered(&app, text) || !idle(&screen) {
            let event = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .expect("the answer came in time")
                .expect("channel open");
            app.handle(event);
            screen.frame(&mut app).unwrap();
            // While the answer streams it is drawn in the viewport, not written above yet.
            let backend = screen.terminal().backend();
            let on_screen = rows(backend.buffer()).join("\n");
            let above = rows(backend.scrollback()).join("\n");
            if on_screen.contains("Offline model")
                && matches!(
                    app.transcript.items().last(),
                    Some(TranscriptItem::Assistant {
                        streaming: true,
                        ..
                    })
                )
            {
                assert!(!above.contains(&format!("Your last message: \"{text}")));
                streamed_in_viewport = true;
            }
        }
        screen.frame(&mut app).unwrap();
    }
    assert!(
        streamed_in_viewport,
        "the streaming answer was drawn in the viewport"
    );
    // While the app runs, the viewport holds the composer and the status, not the history.
    let visible = rows(screen.terminal().backend().buffer());
    assert!(
        visible.iter().any(|r| r.contains("Message (type @")),
        "{visible:#?}"
    );
    screen.close_session(&mut app).unwrap();
    screen.finish().unwrap();
    let backend = screen.terminal().backend();
    let mut all = rows(backend.scrollback());
    all.extend(rows(backend.buffer()));
    let text = all
        .join("\n")
        .replace(&home.path().display().to_string(), "<home>");
    let text = text.trim_end();
    for gone in ["Message (type @", "○ idle", "ctrl+c quit"] {
        assert!(!text.contains(gone), "{gone:?} left behind:\n{text}");
    }
    insta::assert_snapshot!("inline_scrollback_after_exit", text);
}
