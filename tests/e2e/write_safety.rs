//! End to end through the real binary in tmux: resuming and quitting leaves a log byte for byte
//! as it was (a repeated seq, a torn tail just written), and a second TUI on a session keeps its
//! typed text until it may write, then takes the session over.

use crate::support::tmux::Tmux;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn command(home: &Path, id: &str) -> String {
    format!(
        "{} --home {} --resume {id} --offline-delay-ms 0",
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.display()
    )
}

fn line(value: serde_json::Value) -> String {
    value.to_string() + "\n"
}

fn header(id: &str) -> String {
    line(
        serde_json::json!({"type":"session","version":0,"id":id,"createdAt":1780000000000u64,"cwd":"/w","delegationDepth":0}),
    )
}

fn user(seq: u64, text: &str) -> String {
    line(
        serde_json::json!({"type":"user/message","seq":seq,"time":1780000000001u64,"data":{"content":[{"type":"text","text":text}],"source":{"kind":"user"},"role":"user","id":format!("u{seq}")},"surfaceOp":"append"}),
    )
}

fn turn_start(seq: u64, turn: u64) -> String {
    line(
        serde_json::json!({"type":"turn/start","seq":seq,"time":1780000000000u64,"data":{"turn":turn,"trigger":{"kind":"message","source":{"kind":"user"}}}}),
    )
}

fn turn_end(seq: u64, turn: u64) -> String {
    line(
        serde_json::json!({"type":"turn/end","seq":seq,"time":1780000000009u64,"data":{"turn":turn,"reason":{"kind":"completed"}}}),
    )
}

fn place(home: &Path, id: &str, bytes: &[u8]) -> PathBuf {
    let dir = home.join("sessions/--w--").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("session.jsonl");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn resume_then_quit_keeps_every_byte() {
    let home = tempfile::tempdir().unwrap();
    // A record repeated in the first turn, then most of the log (the turn never ended).
    let mut dup = header("dup") + &turn_start(0, 1) + &user(1, "the question");
    dup += &user(1, "the question");
    for seq in 2..40 {
        dup += &user(
            seq,
            &format!("more words {seq} {}", "lorem ipsum ".repeat(40)),
        );
    }
    let dup = place(home.path(), "dup", dup.as_bytes());
    // A torn tail written just now: maybe an append in flight.
    let torn = header("torn") + &turn_start(0, 1) + &user(1, "hello") + &turn_end(2, 1);
    let torn = place(
        home.path(),
        "torn",
        (torn + "{\"type\":\"turn/start\",\"seq\":3,\"ti").as_bytes(),
    );
    for (id, path, shown) in [("dup", &dup, "Read-only"), ("torn", &torn, "hello")] {
        let before = std::fs::read(path).unwrap();
        let tmux = Tmux::start(id, &command(home.path(), id), 120, 30);
        tmux.wait_for_screen("the resumed session", |s| s.contains(shown));
        tmux.quit();
        assert_eq!(std::fs::read(path).unwrap(), before, "{id}: resume + quit");
    }
}

#[test]
fn a_second_tui_keeps_its_text_then_takes_over() {
    let home = tempfile::tempdir().unwrap();
    let log = header("shared") + &turn_start(0, 1) + &user(1, "first question") + &turn_end(2, 1);
    let path = place(home.path(), "shared", log.as_bytes());
    let first = Tmux::start("first", &command(home.path(), "shared"), 120, 30);
    first.wait_for_screen("the first TUI", |s| s.contains("first question"));
    let second = Tmux::start("second", &command(home.path(), "shared"), 120, 30);
    second.wait_for_screen("the read-only notice", |s| s.contains("Read-only"));
    second.type_text("typed in the second");
    second.keys(&["Enter"]);
    second.wait_for_screen("the refusal", |s| {
        s.contains("Not sent") && s.contains("typed in the second")
    });
    first.type_text("typed in the first");
    first.keys(&["Enter"]);
    let start = Instant::now();
    while !std::fs::read_to_string(&path)
        .unwrap()
        .contains("typed in the first")
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the first TUI's message"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    first.quit();
    // The first let go: the same Enter now sends, after what the first logged.
    second.keys(&["Enter"]);
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&path).unwrap();
        if text.contains("typed in the second") && text.matches("turn/end").count() == 3 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the second TUI's message:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    second.wait_for_screen("both messages", |s| {
        s.contains("typed in the first") && s.contains("typed in the second")
    });
    second.quit();
}
