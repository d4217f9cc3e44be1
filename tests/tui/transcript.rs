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
            text: "hello".into(),
            pastes: Default::default()
        }]
    );
}

/// The rows a transcript should show, wrapped from scratch (no cache).
fn naive_rows(t: &Transcript, width: u16, height: u16, scroll: usize) -> Vec<String> {
    let mut rows: Vec<String> = Vec::new();
    for (i, item) in t.items().iter().enumerate() {
        if i > 0 {
            rows.push(String::new());
        }
        for line in item.lines(usize::from(width)) {
            rows.push(line.spans.iter().map(|s| s.content.as_ref()).collect());
        }
    }
    let height = usize::from(height);
    let scroll = scroll.min(rows.len().saturating_sub(height));
    let start = rows.len().saturating_sub(height + scroll);
    rows.into_iter().skip(start).take(height).collect()
}

fn drawn_rows(t: &Transcript, width: u16, height: u16) -> Vec<String> {
    let area = ratatui::layout::Rect::new(0, 0, width, height);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    t.render(area, &mut buf);
    (0..height)
        .map(|y| {
            let row: String = (0..width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect();
            row.trim_end().to_string()
        })
        .collect()
}

proptest::proptest! {
    /// The wrap cache never shows stale rows, whatever the mutations and widths.
    #[test]
    fn cached_rendering_matches_wrapping_from_scratch(
        ops in proptest::collection::vec((0u8..6, "[a-z ]{0,40}", 10u16..60), 1..40)
    ) {
        let mut t = conversation();
        for (op, text, width) in ops {
            match op {
                0 => t.append_assistant_delta(&text),
                1 => t.finish_assistant(Some(&text)),
                2 => { t.toggle_last_card(); }
                3 => t.push_notice(NoticeLevel::Info, text.clone()),
                4 => t.set_all_expanded(text.len() % 2 == 0),
                _ => {
                    t.push_message(&message("user", &text, MessageSource::user()), "user/message");
                }
            }
            let height = 12;
            let drawn = drawn_rows(&t, width, height);
            let mut expected = naive_rows(&t, width, height, 0);
            expected.resize(usize::from(height), String::new());
            let expected: Vec<String> = expected.into_iter().map(|r| r.trim_end().to_string()).collect();
            proptest::prop_assert_eq!(drawn, expected);
        }
    }
}

#[test]
fn scrolled_up_view_stays_put_while_output_arrives() {
    let mut t = conversation();
    for i in 0..30 {
        t.push_notice(NoticeLevel::Info, format!("line {i}"));
    }
    let before = drawn_rows(&t, 50, 8);
    t.scroll_up(10);
    let scrolled = drawn_rows(&t, 50, 8);
    assert_ne!(before, scrolled);
    t.append_assistant_delta("new output arrives below");
    t.append_assistant_delta(" and keeps streaming");
    t.push_notice(NoticeLevel::Info, "more");
    let after = drawn_rows(&t, 50, 8);
    // Same rows on screen except the scroll hint in the corner.
    assert_eq!(scrolled[..7], after[..7]);
    t.scroll_to_bottom();
    assert!(drawn_rows(&t, 50, 8).iter().any(|r| r.contains("more")));
}

#[test]
fn a_card_says_which_agent_a_session_came_from() {
    let mut t = Transcript::new();
    let card = message(
        "user",
        CONTEXT,
        reference_source(json!([
            {"sessionId": "claude:4c2d", "label": "hello files", "capturedThroughSeq": 24, "source": "claude"},
            {"sessionId": "codex:019e", "label": "show tools", "capturedThroughSeq": 9, "source": "codex"},
            {"sessionId": "session-1", "label": "ours", "capturedThroughSeq": 1, "source": "\u{1b}[31mspoof"},
        ])),
    );
    assert!(t.push_message(&card, USER_MESSAGE));
    let drawn = draw(&t, 160, 2);
    assert!(
        drawn.contains("hello files (claude:4c2d) · from Claude Code"),
        "{drawn}"
    );
    assert!(
        drawn.contains("show tools (codex:019e) · from Codex"),
        "{drawn}"
    );
    // An unknown source is not shown at all.
    assert!(!drawn.contains("spoof"), "{drawn}");
}

#[test]
fn welcome_header() {
    let mut t = Transcript::new();
    t.push_welcome(
        "0.1.0",
        "offline · for a real model: DEEPSEEK_API_KEY=… or --provider NAME",
        Some("/home/dev/web\u{1b}[2Japp"),
        "/home/dev/.dsh",
    );
    let out = [draw(&t, 90, 8), draw(&t, 36, 10)].join("\n");
    assert_snapshot!(out);
}

#[test]
fn reference_card_opened_reads_role_by_role() {
    let context = "## Referenced sessions\n\nUntrusted, read-only snapshot.\n\n<referenced-sessions>\n[{\"sessionId\":\"session-7f3a\",\"label\":\"Fix login\",\"cwd\":\"/w\",\"capturedThroughSeq\":212,\"conversation\":[{\"role\":\"user\",\"text\":\"Why does login loop?\\nIt redirects forever.\"},{\"role\":\"assistant\",\"text\":\"The guard was missing; add it \\u003cbefore\\u003e the redirect.\"}]}]\n</referenced-sessions>";
    let card = message(
        "user",
        context,
        reference_source(json!([{
            "sessionId": "session-7f3a", "label": "Fix login", "capturedThroughSeq": 212,
            "compacted": false, "originalMessages": 104, "retainedMessages": 2,
            "omittedMessages": 102, "omittedBytes": 3_250_000, "truncated": true, "inputIndex": 0
        }])),
    );
    let mut t = Transcript::new();
    t.push_message(&card, USER_MESSAGE);
    t.push_notice(NoticeLevel::Info, "after the card");
    let mut views = vec![draw(&t, 100, 3)];
    assert!(t.select_card(true), "the card can be selected");
    assert_eq!(t.selected_card(), Some(0));
    assert!(t.toggle_selected_card());
    let h = t.desired_height(100);
    views.push(draw(&t, 100, h));
    assert!(t.toggle_selected_card());
    let raw = draw(&t, 100, t.desired_height(100));
    assert!(
        raw.contains("<referenced-sessions>"),
        "the exact text one key away"
    );
    assert!(t.toggle_selected_card());
    views.push(draw(&t, 100, 3));
    assert_snapshot!(views.join("\n"));
}

#[test]
fn interrupted_reply() {
    // As the app shows an answer cut by Esc: the partial text, finished, then the mark the
    // logged `"interrupted": true` brings.
    let mut t = Transcript::new();
    t.push_message(
        &message("user", "tell me a long story", MessageSource::user()),
        USER_MESSAGE,
    );
    t.append_assistant_delta("Once upon a time, a parser met a leap");
    t.finish_assistant(Some("Once upon a time, a parser met a leap"));
    t.push_notice(NoticeLevel::Info, "reply interrupted: partial answer kept");
    assert_snapshot!(draw(&t, 60, 6));
}
