//! The text-only reading of surface messages (`session::message_text`) against the full decode,
//! on every message of every fixture log: wherever the shortcut answers, it answers what the
//! full decode and the projection's rules give.

use crate::support;

use dsh_session_references::session::format::{ASSISTANT_MESSAGE, STEERING_MESSAGE, USER_MESSAGE};
use dsh_session_references::session::Record;
use dsh_session_references::session::{message_text, SourceClass};

#[test]
fn the_shortcut_agrees_with_the_full_decode_on_every_fixture_message() {
    let (mut messages, mut answered) = (0, 0);
    for path in support::fixture_logs() {
        let bytes = std::fs::read(&path).unwrap();
        let lines = support::lines_of(&bytes);
        let header: serde_json::Value = serde_json::from_slice(&lines[0]).unwrap();
        let session_id = header["id"].as_str().unwrap().to_string();
        for line in &lines[1..] {
            let Ok(Record::Event(event)) = serde_json::from_slice::<Record>(line) else {
                continue;
            };
            if ![USER_MESSAGE, STEERING_MESSAGE, ASSISTANT_MESSAGE].contains(&event.kind.as_str()) {
                continue;
            }
            messages += 1;
            let Some(fast) = message_text(&event.kind, &event.data) else {
                continue;
            };
            answered += 1;
            let message = event
                .message(&session_id)
                .unwrap_or_else(|e| panic!("{}: seq {}: {e}", path.display(), event.seq))
                .expect("a message event");
            assert!(
                message.envelope.is_none(),
                "{}: seq {}",
                path.display(),
                event.seq
            );
            assert_eq!(
                fast.text,
                message.text(),
                "{}: seq {}",
                path.display(),
                event.seq
            );
            assert_eq!(
                fast.source,
                SourceClass::of(&message.source),
                "{}: seq {}",
                path.display(),
                event.seq
            );
        }
    }
    // The fixtures are mostly identified-shape messages: the shortcut must be the common path.
    assert!(messages > 300, "only {messages} messages in the fixtures");
    eprintln!("the shortcut answered {answered} of {messages} fixture messages");
    assert!(
        answered * 10 >= messages * 8,
        "the shortcut answered {answered} of {messages}"
    );
}
