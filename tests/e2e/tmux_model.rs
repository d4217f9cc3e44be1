//! End to end with a real model protocol: the `dsh-refs` binary in tmux, talking to a loopback
//! OpenAI-compatible server (the `ollama` preset: no key), typed at like a person.

use crate::support::model::{answer, chunked, delta, Part, Reply, Server};
use crate::support::tmux::Tmux;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn log_records(home: &Path) -> Vec<Value> {
    fn find(dir: &Path) -> Option<PathBuf> {
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if let Some(found) = find(&path) {
                    return Some(found);
                }
            } else if path.ends_with("session.jsonl") {
                return Some(path);
            }
        }
        None
    }
    let Some(path) = find(&home.join("sessions")) else {
        return Vec::new();
    };
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn chat_with_a_loopback_model_then_interrupt_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut hanging = chunked(&delta(json!({"content": "Partial reply"})));
    hanging.push(Part::Hang);
    let server = rt.block_on(Server::start(vec![
        Reply::sse(chunked(&answer(
            &["Greeting ", "detected."],
            &["Hello ", "from the loopback model."],
        ))),
        Reply::sse(hanging),
        Reply::sse(chunked(&answer(
            &["Switching."],
            &["Now on the other model."],
        ))),
    ]));
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let command = format!(
        "cd {} && {} --home {} --compression none --provider ollama --base-url {} --model e2e-model",
        work.path().display(),
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.path().display(),
        server.base_url()
    );
    let tmux = Tmux::start("model", &command, 120, 30);
    tmux.wait_for_screen("the composer and the model", |s| {
        s.contains("type @ to reference") && s.contains("ollama/e2e-model")
    });
    tmux.type_text("hello model");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for_screen("the answer", |s| {
        s.contains("Hello from the loopback model.") && s.contains("idle")
    });
    assert!(screen.contains("thinking · 2 words"), "{screen}");
    assert!(screen.contains("ctx 120"), "{screen}");

    tmux.type_text("tell me more");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the partial answer", |s| s.contains("Partial reply"));
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for_screen("the interruption", |s| s.contains("reply interrupted"));
    assert!(screen.contains("Partial reply"), "{screen}");
    assert!(rt.block_on(server.wait_disconnect(Duration::from_secs(5))));

    let records = log_records(home.path());
    let headers: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "request/header")
        .collect();
    assert_eq!(headers.len(), 1);
    assert_eq!(
        headers[0]["data"]["header"]["config"],
        json!({"provider": "ollama", "model": "e2e-model"})
    );
    let answers: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "assistant/message")
        .collect();
    assert_eq!(answers.len(), 2);
    assert_eq!(
        answers[0]["data"]["message"]["content"][0]["type"],
        "reasoning"
    );
    assert_eq!(answers[1]["data"]["interrupted"], true);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].authorization, None, "ollama needs no key");

    // `/model NAME` reopens this session with the provider's other model; the next request
    // logs a change header and goes to that model.
    tmux.type_text("/model e2e-other");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for_screen("the switch", |s| s.contains("Model: ollama/e2e-other"));
    // Switched in place: the earlier notice is still there, and our own write is not taken for
    // another program's.
    assert!(screen.contains("reply interrupted"), "{screen}");
    assert!(!screen.contains("another program"), "{screen}");
    tmux.type_text("and now?");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the answer of the other model", |s| {
        s.contains("Now on the other model.") && s.contains("idle")
    });
    let records = log_records(home.path());
    let headers: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "request/header")
        .collect();
    assert_eq!(headers.len(), 2, "one log, continued: {headers:?}");
    assert_eq!(headers[1]["data"]["reason"], "change");
    assert_eq!(
        headers[1]["data"]["header"]["config"],
        json!({"provider": "ollama", "model": "e2e-other"})
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].body["model"], "e2e-other");
}
