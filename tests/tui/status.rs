//! Status line and key help.

use dsh_session_references::tui::help::KeyHelp;
use dsh_session_references::tui::snapshot::render_snapshot;
use dsh_session_references::tui::transcript::{Transcript, TranscriptItem};
use dsh_session_references::tui::Renderable;
use dsh_session_references::tui::StatusLine;
use insta::assert_snapshot;
use proptest::prelude::*;

fn status() -> StatusLine {
    StatusLine {
        session_id: "session-1b2c".into(),
        title: Some("Fix webapp login loop".into()),
        cwd: Some("/home/dev/webapp".into()),
        model: "offline".into(),
        running: true,
        queued_steering: 2,
        preparing: false,
        ..Default::default()
    }
}

fn line(r: &dyn Renderable, width: u16) -> String {
    render_snapshot(width, 1, |area, buf| r.render(area, buf))
}

#[test]
fn status_lines() {
    let idle_untitled = StatusLine {
        title: None,
        cwd: None,
        running: false,
        queued_steering: 0,
        ..status()
    };
    let hostile = StatusLine {
        title: Some("t\u{1b}[2J\u{7}\nx".into()),
        ..status()
    };
    let out = [
        line(&status(), 100),
        line(&status(), 40),
        line(&idle_untitled, 60),
        line(&hostile, 100),
        line(
            &StatusLine {
                next_context: Some("+2 refs 112 KiB".into()),
                running: false,
                queued_steering: 0,
                ..status()
            },
            100,
        ),
    ]
    .join("\n");
    assert_snapshot!(out);
}

#[test]
fn key_help_follows_the_context() {
    let contexts = [
        KeyHelp::default(),
        KeyHelp {
            running: true,
            has_details: true,
            ..KeyHelp::default()
        },
        KeyHelp {
            popup_open: true,
            running: true,
            ..KeyHelp::default()
        },
        KeyHelp {
            preparing: true,
            ..KeyHelp::default()
        },
        KeyHelp {
            quit_pending: true,
            ..KeyHelp::default()
        },
    ];
    let out: Vec<String> = contexts.iter().map(|h| line(h, 90)).collect();
    assert_snapshot!(out.join("\n"));
}

proptest! {
    #[test]
    fn tiny_sizes_never_panic(w in 0u16..30, h in 0u16..4, text in "\\PC{0,60}") {
        let s = StatusLine { title: Some(text.clone()), cwd: Some(text.clone()), ..status() };
        render_snapshot(w, h, |area, buf| s.render(area, buf));
        render_snapshot(w, h, |area, buf| KeyHelp::default().render(area, buf));
        let mut t = Transcript::new();
        t.push(TranscriptItem::User { text: text.clone(), pastes: Default::default() });
        t.append_assistant_delta(&text);
        t.push(TranscriptItem::Compaction { summary: text.clone(), expanded: true });
        t.scroll_up(3);
        render_snapshot(w, h, |area, buf| t.render(area, buf));
    }
}
