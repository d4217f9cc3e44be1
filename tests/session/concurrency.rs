//! Concurrency and caching of the store: a writer process appending while a reader lists and
//! folds, and a home of 10,000 sessions whose unchanged logs are never re-read.

use crate::support;

use dsh_session_references::session::store::read_surface_file;
use dsh_session_references::session::{
    ContentBlock, DiskStore, Encoding, EventData, Message, MessageSource, SessionHeader,
    SessionWriter,
};
use serde_json::Value;
use std::fs::{self, File};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

const BATCHES: usize = 400;

fn batch(i: usize) -> Vec<dsh_session_references::session::NewEvent> {
    let user = Message::new(
        "user",
        vec![ContentBlock::text(format!(
            "question {i} {}",
            "x".repeat(i % 50)
        ))],
        MessageSource::user(),
        format!("u{i}"),
    );
    let answer = Message::new(
        "assistant",
        vec![ContentBlock::text(format!("answer {i}"))],
        MessageSource::model("offline", "echo"),
        format!("a{i}"),
    );
    vec![
        EventData::UserMessage(user).into(),
        EventData::AssistantMessage {
            turn: i.into(),
            step: 1.into(),
            message: answer,
            extra: Default::default(),
        }
        .into(),
        EventData::SessionTitle {
            title: format!("title {i}"),
            message_seqs: vec![],
            source: Value::Null,
            extra: Default::default(),
        }
        .into(),
    ]
}

/// Runs only inside the child process spawned by `reader_never_sees_a_partial_batch`.
#[test]
#[ignore = "child process of reader_never_sees_a_partial_batch"]
fn writer_child() {
    let Ok(path) = std::env::var("DSH_TEST_WRITER_LOG") else {
        return;
    };
    let (mut writer, _) = SessionWriter::open(Path::new(&path)).unwrap();
    for i in 0..BATCHES {
        writer.append(batch(i)).unwrap();
        // Paced, so the reader overlaps the writing even on a loaded machine.
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[test]
fn reader_never_sees_a_partial_batch() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let header = SessionHeader::new("shared", 1, Some("/w".into()));
        let path = SessionWriter::create(home.path(), header, encoding)
            .unwrap()
            .path()
            .to_path_buf();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &support::test_path(module_path!(), "writer_child"),
            ])
            .args(["--ignored", "--nocapture"])
            .env("DSH_TEST_WRITER_LOG", &path)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let store = DiskStore::new(home.path());
        let mut reads = 0;
        let mut distinct = std::collections::BTreeSet::new();
        loop {
            let done = child.try_wait().unwrap().is_some();
            let listed = store.list_sessions_blocking().unwrap();
            assert_eq!(listed.len(), 1);
            let snapshot = store.read_surface_blocking("shared").unwrap();
            let events = snapshot.captured_through_seq.map_or(0, |s| s + 1);
            assert_eq!(
                events % 3,
                0,
                "{encoding:?}: a batch is seen whole or not at all"
            );
            assert_eq!(snapshot.events.len() as u64, events / 3 * 2);
            let title = store.read_title_blocking("shared").unwrap();
            if let Some(title) = &title {
                let n: u64 = title.trim_start_matches("title ").parse().unwrap();
                assert!(n < events / 3 + BATCHES as u64);
            }
            distinct.insert(events);
            reads += 1;
            if done {
                break;
            }
        }
        assert!(child.wait().unwrap().success());
        let last = read_surface_file(&path).unwrap();
        assert_eq!(last.captured_through_seq, Some(BATCHES as u64 * 3 - 1));
        assert_eq!(
            DiskStore::new(home.path())
                .read_title_blocking("shared")
                .unwrap()
                .as_deref(),
            Some(format!("title {}", BATCHES - 1).as_str())
        );
        // The reader really ran while the writer was mid-way.
        assert!(
            reads > 2 && distinct.len() > 2,
            "{encoding:?}: {reads} reads, {distinct:?}"
        );
    }
}

fn age(path: &Path) {
    let old = SystemTime::now() - Duration::from_secs(3600);
    File::open(path).unwrap().set_modified(old).unwrap();
}

#[test]
fn ten_thousand_sessions_are_listed_from_cache() {
    let home = tempfile::tempdir().unwrap();
    let sessions = home.path().join("sessions");
    for i in 0..10_000u32 {
        let project = format!("--proj{}--", i % 40);
        let dir = sessions.join(&project).join(format!("s{i:05}"));
        fs::create_dir_all(&dir).unwrap();
        let header = format!(
            "{{\"type\":\"session\",\"version\":0,\"id\":\"s{i:05}\",\"createdAt\":{i},\"cwd\":\"/proj{}\",\"delegationDepth\":0}}\n",
            i % 40
        );
        let title = format!(
            "{{\"type\":\"session/title\",\"seq\":0,\"time\":1,\"data\":{{\"title\":\"t{i}\",\"messageSeqs\":[],\"source\":{{\"kind\":\"fallback\"}}}}}}\n"
        );
        fs::write(dir.join("session.jsonl"), format!("{header}{title}")).unwrap();
    }
    // Directories written just now are "racy" (a change in the same clock tick could hide);
    // age them so the cache may trust their stamps, as it would minutes later.
    for project in fs::read_dir(&sessions).unwrap() {
        age(&project.unwrap().path());
    }
    age(&sessions);

    let store = DiskStore::new(home.path());
    let first = store.list_sessions_blocking().unwrap();
    assert_eq!(first.len(), 10_000);
    assert_eq!(first[0].id(), "s09999");
    let cold = store.stats();
    assert_eq!(cold.header_reads, 10_000);
    assert_eq!(cold.dir_reads, 41);

    let second = store.list_sessions_blocking().unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &second), "same cached list");
    let warm = store.stats();
    assert_eq!(warm.header_reads, cold.header_reads, "no log re-opened");
    assert_eq!(warm.dir_reads, cold.dir_reads, "no directory re-listed");

    for i in (0..10_000).step_by(97) {
        let id = format!("s{i:05}");
        assert_eq!(
            store.read_title_blocking(&id).unwrap(),
            Some(format!("t{i}"))
        );
    }
    let titled = store.stats();
    for i in (0..10_000).step_by(97) {
        store.read_title_blocking(&format!("s{i:05}")).unwrap();
    }
    assert_eq!(
        store.stats().title_scans,
        titled.title_scans,
        "unchanged logs not rescanned"
    );

    // Appending a title scans only the appended bytes.
    let log = sessions.join("--proj0--/s00000/session.jsonl");
    let before = fs::metadata(&log).unwrap().len();
    let appended = "{\"type\":\"session/title\",\"seq\":1,\"time\":2,\"data\":{\"title\":\"renamed\",\"messageSeqs\":[],\"source\":{\"kind\":\"fallback\"}}}\n";
    let mut bytes = fs::read(&log).unwrap();
    bytes.extend_from_slice(appended.as_bytes());
    fs::write(&log, bytes).unwrap();
    let scanned_before = store.stats().title_bytes_scanned;
    assert_eq!(
        store.read_title_blocking("s00000").unwrap().as_deref(),
        Some("renamed")
    );
    let stats = store.stats();
    assert_eq!(stats.title_scans, titled.title_scans + 1);
    assert_eq!(
        stats.title_bytes_scanned - scanned_before,
        appended.len() as u64
    );
    assert!(before > 0);

    // A new session appears on the next call; its project directory changed.
    let dir = sessions.join("--proj3--/new");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("session.jsonl"),
        "{\"type\":\"session\",\"id\":\"new\",\"createdAt\":99999}\n",
    )
    .unwrap();
    let third = store.list_sessions_blocking().unwrap();
    assert_eq!(third.len(), 10_001);
    assert_eq!(third[0].id(), "new");
    assert_eq!(store.stats().header_reads, cold.header_reads + 1);
}
