//! The text-only reading of a surface message agrees with the full decode wherever it answers.
#![no_main]

use dsh_session_references::session::format::{ASSISTANT_MESSAGE, STEERING_MESSAGE, USER_MESSAGE};
use dsh_session_references::session::{message_text, SourceClass};
use dsh_session_references::session::Record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, json)) = data.split_first() else {
        return;
    };
    let kind = [USER_MESSAGE, STEERING_MESSAGE, ASSISTANT_MESSAGE][usize::from(selector % 3)];
    let Ok(json) = std::str::from_utf8(json) else {
        return;
    };
    let line = format!(r#"{{"type":"{kind}","seq":1,"time":0,"data":{json},"surfaceOp":"append"}}"#);
    let Ok(Record::Event(event)) = serde_json::from_str::<Record>(&line) else {
        return;
    };
    let Some(fast) = message_text(&event.kind, &event.data) else {
        return;
    };
    let message = event
        .message("s")
        .expect("the shortcut answered for a message the full decode rejects")
        .expect("a message event");
    assert!(message.envelope.is_none());
    assert_eq!(fast.text, message.text());
    assert_eq!(fast.source, SourceClass::of(&message.source));
});
