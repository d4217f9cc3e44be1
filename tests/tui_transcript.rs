//! The transcript: reference cards, compaction, streaming and hostile log text.

use dsh_session_references::session::format::{
    ContentBlock, Message, MessageSource, ASSISTANT_MESSAGE, STEERING_MESSAGE, USER_MESSAGE,
};
use dsh_session_references::tui::snapshot::render_snapshot;
use dsh_session_references::tui::transcript::{NoticeLevel, Transcript, TranscriptItem};
use dsh_session_references::tui::Renderable;
use insta::assert_snapshot;
use serde_json::json;

fn message(role: &str, text: &str, source: MessageSource) -> Message {
    Message::new(role, vec![ContentBlock::text(text)], source, "m".into())
}

fn reference_source(references: serde_json::Value) -> MessageSource {
    MessageSource::SessionReference {
        version: json!(1),
        references,
        extra: Default::default(),
    }
}

const CONTEXT: &str = "## Referenced sessions\n\nWhat follows is an untrusted, read-only snapshot of other sessions.\n\n<referenced-sessions>\n[{\"sessionId\":\"session-7f3a\",\"label\":\"Fix login\"}]\n</referenced-sessions>";

fn conversation() -> Transcript {
    let mut t = Transcript::new();
    let card = message(
        "user",
        CONTEXT,
        reference_source(json!([
            {"sessionId": "session-7f3a", "label": "Fix login", "capturedThroughSeq": 12},
            {"sessionId": "session-91bc", "label": "session-91bc", "capturedThroughSeq": 3},
        ])),
    );
    assert!(t.push_message(&card, USER_MESSAGE));
    t.push_message(
        &message(
            "user",
            "What did we decide about @Fix login?",
            MessageSource::user(),
        ),
        USER_MESSAGE,
    );
    t.push_message(
        &message(
            "assistant",
            "You decided to keep the redirect and add a loop guard.",
            MessageSource::model("offline", "offline"),
        ),
        ASSISTANT_MESSAGE,
    );
    t
}

fn draw(t: &Transcript, width: u16, height: u16) -> String {
    render_snapshot(width, height, |area, buf| t.render(area, buf))
}

#[test]
fn reference_card_collapsed() {
    assert_snapshot!(draw(&conversation(), 60, 8));
}

#[test]
fn reference_card_expanded() {
    let mut t = conversation();
    assert!(t.toggle(0));
    let height = t.desired_height(60);
    assert_snapshot!(draw(&t, 60, height));
}

#[test]
fn malformed_reference_source_is_a_generic_context_card() {
    let mut t = Transcript::new();
    for references in [json!("nope"), json!([{"sessionId": 7}]), json!([])] {
        t.push_message(
            &message("user", "ctx", reference_source(references)),
            USER_MESSAGE,
        );
    }
    assert!(t
        .items()
        .iter()
        .all(|i| matches!(i, TranscriptItem::ContextCard { .. })));
    assert_snapshot!(draw(&t, 50, 5));
}

#[test]
fn compaction_marker_and_steering() {
    let mut t = Transcript::new();
    t.push_message(
        &message(
            "user",
            "Summary: we set up the repo.",
            MessageSource::plugin("compact"),
        ),
        USER_MESSAGE,
    );
    t.push_message(
        &message("user", "now add tests", MessageSource::user()),
        USER_MESSAGE,
    );
    t.append_assistant_delta("Adding tests for");
    t.push_message(
        &message("user", "use proptest too", MessageSource::user()),
        STEERING_MESSAGE,
    );
    t.push_notice(
        NoticeLevel::Error,
        "Session reference failed: session session-x not found",
    );
    assert_snapshot!(draw(&t, 50, 10));
}

#[test]
fn streaming_assistant_shows_a_marker_until_finished() {
    let mut t = Transcript::new();
    t.append_assistant_delta("Hello");
    t.append_assistant_delta(", world");
    let streaming = draw(&t, 30, 1);
    assert!(streaming.contains("Hello, world▍"));
    t.finish_assistant(None);
    assert!(!draw(&t, 30, 1).contains('▍'));
}

#[test]
fn hostile_log_text_is_escaped() {
    let mut t = Transcript::new();
    t.push_message(
        &message(
            "user",
            CONTEXT,
            reference_source(json!([
                {"sessionId": "id\u{1b}[2J", "label": "evil\u{1b}]0;pwned\u{7}\ntitle"},
            ])),
        ),
        USER_MESSAGE,
    );
    t.push_message(
        &message(
            "assistant",
            "line one\u{1b}[31m red\u{7}\nline two\r\n\u{9b}31m",
            MessageSource::model("x", "y"),
        ),
        ASSISTANT_MESSAGE,
    );
    let out = draw(&t, 70, 5);
    for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\r'] {
        assert!(!out.contains(bad), "{bad:?} reached the screen");
    }
    assert_snapshot!(out);
}

#[test]
fn scrolling_from_the_bottom() {
    let mut t = Transcript::new();
    for i in 0..10 {
        t.push_message(
            &message("user", &format!("message {i}"), MessageSource::user()),
            USER_MESSAGE,
        );
    }
    draw(&t, 30, 6); // records how far it can scroll
    t.scroll_up(4);
    assert_snapshot!(draw(&t, 30, 6));
    t.scroll_up(1000);
    assert_eq!(t.scroll_offset(), 19 - 6);
    t.scroll_to_bottom();
    assert!(draw(&t, 30, 6).contains("message 9"));
}

#[test]
fn history_from_log_events() {
    use dsh_session_references::session::format::{Event, EventData};
    let mut t = Transcript::new();
    let user = message("user", "hello", MessageSource::user());
    assert!(t.push_event(&Event::new(0, 0, &EventData::UserMessage(user)), "s"));
    let turn = EventData::TurnStart {
        turn: 0,
        trigger: json!("prompt"),
        extra: Default::default(),
    };
    assert!(!t.push_event(&Event::new(1, 0, &turn), "s"));
    assert_eq!(
        t.items(),
        [TranscriptItem::User {
            text: "hello".into()
        }]
    );
}
