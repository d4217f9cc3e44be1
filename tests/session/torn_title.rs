//! Nothing is derived from a torn tail (SPEC §1.2): not the title, not the surface, not
//! `captured_through_seq`, whether the store reads the log whole or resumes its title cache on a
//! log that grows, in plain and zstd logs.

use crate::support::user;
use dsh_session_references::session::{
    DiskStore, Encoding, EventData, NewEvent, SessionHeader, SessionWriter,
};
use serde_json::Map;
use std::io::Write;
use std::path::Path;

fn title(text: &str) -> NewEvent {
    EventData::SessionTitle {
        title: text.into(),
        message_seqs: vec![],
        source: serde_json::json!({"kind": "fallback"}),
        extra: Map::new(),
    }
    .into()
}

fn turn_end() -> NewEvent {
    EventData::TurnEnd {
        turn: 1,
        reason: "stop".into(),
        extra: Map::new(),
    }
    .into()
}

fn title_line(seq: u64, text: &str) -> String {
    format!(
        "{{\"type\":\"session/title\",\"seq\":{seq},\"time\":1,\"data\":{{\"title\":\"{text}\",\
         \"messageSeqs\":[],\"source\":{{\"kind\":\"fallback\"}}}}}}\n"
    )
}

fn user_line(seq: u64, text: &str) -> String {
    format!(
        "{{\"type\":\"user/message\",\"seq\":{seq},\"time\":1,\"data\":{{\"content\":[{{\"type\":\
         \"text\",\"text\":\"{text}\"}}],\"source\":{{\"kind\":\"user\"}},\"role\":\"user\",\
         \"id\":\"u{seq}\"}},\"surfaceOp\":\"append\"}}\n"
    )
}

/// A log of seqs 0..=3: "hello", turn/end, the title "good", turn/end.
fn good_log(home: &Path, encoding: Encoding) -> std::path::PathBuf {
    let header = SessionHeader::new("s", 1, Some("/w".into()));
    let mut writer = SessionWriter::create(home, header, encoding).unwrap();
    writer.append(vec![user("hello"), turn_end()]).unwrap();
    writer.append(vec![title("good"), turn_end()]).unwrap();
    writer.path().to_path_buf()
}

/// Appends raw batches as a crashed writer or a foreign one would leave them: each a line of a
/// plain log, or a zstd frame.
fn append_raw(path: &Path, encoding: Encoding, batches: &[&str]) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    for batch in batches {
        match encoding {
            Encoding::Plain => file.write_all(batch.as_bytes()).unwrap(),
            Encoding::Zstd => file
                .write_all(&zstd::encode_all(batch.as_bytes(), 3).unwrap())
                .unwrap(),
        }
    }
}

/// Torn tails that end in a complete, valid-looking title line with no `turn/end` after it.
fn torn_tails() -> Vec<(&'static str, Vec<String>)> {
    vec![
        (
            "an unparsable line, then a title",
            vec![
                "{\"type\":\"user/mes\n".to_string(),
                title_line(5, "torn title"),
            ],
        ),
        (
            "a title after a seq gap",
            vec![user_line(4, "after"), title_line(9, "torn title")],
        ),
    ]
}

#[test]
fn a_title_in_a_torn_tail_is_never_the_label() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        for (what, tail) in torn_tails() {
            let what = format!("{encoding:?}, {what}");
            let home = tempfile::tempdir().unwrap();
            let path = good_log(home.path(), encoding);
            let tail: Vec<&str> = tail.iter().map(String::as_str).collect();
            append_raw(&path, encoding, &tail);
            let store = DiskStore::new(home.path());
            assert_eq!(
                store.read_title_blocking("s").unwrap().as_deref(),
                Some("good"),
                "{what}"
            );
            let surface = store.read_surface_blocking("s").unwrap();
            let through = surface.captured_through_seq;
            // The seq-gap tail's first line (seq 4) is valid; the title after the gap is not.
            let expected = if what.contains("gap") { 4 } else { 3 };
            assert_eq!(through, Some(expected), "{what}");
            assert!(surface.events.iter().all(|e| e.seq <= expected), "{what}");
        }
    }
}

#[test]
fn the_title_cache_follows_a_log_from_torn_to_fixed() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = good_log(home.path(), encoding);
        let store = DiskStore::new(home.path());
        assert_eq!(
            store.read_title_blocking("s").unwrap().as_deref(),
            Some("good")
        );

        // The log grows a torn tail holding a title: the cached title is resumed, not replaced.
        let good_len = std::fs::metadata(&path).unwrap().len();
        let torn = [
            "{\"type\":\"session/ti\n".to_string(),
            title_line(4, "torn"),
        ];
        append_raw(&path, encoding, &[&torn[0], &torn[1]]);
        assert_eq!(
            store.read_title_blocking("s").unwrap().as_deref(),
            Some("good"),
            "{encoding:?}: torn"
        );

        // The tail is cut (by its owning writer: a tail holding whole records is damage our own
        // writer keeps, so the cut is made here) and a real title appended.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(good_len)
            .unwrap();
        let (mut writer, _) = SessionWriter::open(&path).unwrap();
        writer.append(vec![title("fixed"), turn_end()]).unwrap();
        drop(writer);
        assert_eq!(
            store.read_title_blocking("s").unwrap().as_deref(),
            Some("fixed"),
            "{encoding:?}: fixed"
        );
        // The same answer as a store that never saw the torn tail.
        let fresh = DiskStore::new(home.path());
        assert_eq!(
            fresh.read_title_blocking("s").unwrap().as_deref(),
            Some("fixed")
        );
    }
}

#[test]
fn a_torn_title_is_not_used_once_the_store_knew_the_log() {
    // The store first sees the log after the torn tail was written, then again unchanged.
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = good_log(home.path(), encoding);
        append_raw(&path, encoding, &["not json\n", &title_line(5, "torn")]);
        let store = DiskStore::new(home.path());
        for round in 0..2 {
            assert_eq!(
                store.read_title_blocking("s").unwrap().as_deref(),
                Some("good"),
                "{encoding:?} round {round}"
            );
        }
    }
}
