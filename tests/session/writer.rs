//! The writer never changes a byte it was not asked to write (SPEC §1.2): opening (and
//! resuming) leaves a log byte-identical, a torn tail is cut only by an append that finds it
//! unchanged, one unfinished batch, and settled; damage is kept; another writer is refused or,
//! when it appended valid records, adopted; a failing write leaves nothing behind.

use crate::support::user;
use crate::support::*;
use dsh_session_references::session::reader::{read_log, Encoding};
use dsh_session_references::session::writer::{home_encoding, WriteFault};
use dsh_session_references::session::{
    ContentBlock, EventData, Message, MessageSource, NewEvent, Record, SessionError, SessionHeader,
    SessionWriter,
};
use serde_json::{json, Map};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

fn assistant(turn: u64, text: &str) -> NewEvent {
    NewEvent::new(EventData::AssistantMessage {
        turn: turn.into(),
        step: 1.into(),
        message: Message::new(
            "assistant",
            vec![ContentBlock::text(text)],
            MessageSource::model("offline", "echo"),
            format!("a-{text}"),
        ),
        extra: Map::new(),
    })
}

fn turn_start(turn: u64) -> NewEvent {
    NewEvent::new(EventData::TurnStart {
        turn,
        trigger: json!({"kind": "message"}),
        extra: Map::new(),
    })
}

fn turn_end(turn: u64) -> NewEvent {
    NewEvent::new(EventData::TurnEnd {
        turn,
        reason: json!({"kind": "completed"}),
        extra: Map::new(),
    })
}

/// A log with one whole turn, written by our writer.
fn log_with_a_turn(home: &Path, id: &str, encoding: Encoding) -> PathBuf {
    let mut writer =
        SessionWriter::create(home, SessionHeader::new(id, 1, Some("/w".into())), encoding)
            .unwrap();
    writer.append(vec![turn_start(1), user("hello")]).unwrap();
    writer
        .append(vec![assistant(1, "hi"), turn_end(1)])
        .unwrap();
    writer.path().to_path_buf()
}

fn append_raw(path: &Path, bytes: &[u8]) {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// Makes the log look untouched for a minute (a crashed writer long gone).
fn settle(path: &Path) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
}

/// Bytes a crash could leave: half a line, or the start of a zstd frame.
fn torn_bytes(encoding: Encoding) -> &'static [u8] {
    match encoding {
        Encoding::Plain => b"{\"type\":\"user/message\",\"seq\":4,\"ti",
        Encoding::Zstd => &[0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x41, 0x13],
    }
}

fn not_writable(result: Result<impl std::fmt::Debug, SessionError>) -> String {
    match result {
        Err(SessionError::NotWritable { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn opening_a_log_changes_no_byte() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = log_with_a_turn(home.path(), "s", encoding);
        // Valid, torn (settled and fresh), and a stale pending marker.
        let valid = fs::read(&path).unwrap();
        drop(SessionWriter::open(&path).unwrap());
        assert_eq!(fs::read(&path).unwrap(), valid, "{encoding:?} valid");

        append_raw(&path, torn_bytes(encoding));
        let torn = fs::read(&path).unwrap();
        drop(SessionWriter::open(&path).unwrap());
        assert_eq!(
            fs::read(&path).unwrap(),
            torn,
            "{encoding:?} fresh torn tail"
        );
        settle(&path);
        let (writer, scan) = SessionWriter::open(&path).unwrap();
        assert!(scan.torn_tail.is_some());
        let tail = writer.tail().expect("the tail is observed").clone();
        assert_eq!((tail.at, tail.len), (valid.len() as u64, torn.len() as u64));
        assert!(tail.cuttable, "{tail:?}");
        drop(writer);
        assert_eq!(
            fs::read(&path).unwrap(),
            torn,
            "{encoding:?} settled torn tail"
        );
    }
    let home = tempfile::tempdir().unwrap();
    let path = log_with_a_turn(home.path(), "m", Encoding::Plain);
    let good = fs::read(&path).unwrap();
    let last_line = good.len() - lines_of(&good).last().unwrap().len();
    let marker = path.with_file_name(".session.jsonl.pending");
    fs::write(&marker, format!("{last_line}\n")).unwrap();
    drop(SessionWriter::open(&path).unwrap());
    assert_eq!(
        fs::read(&path).unwrap(),
        good,
        "a pending batch is kept by opening"
    );
    assert!(marker.exists(), "and so is its marker");
}

/// A seq repeated early in a turn that never ended: the reader keeps the prefix before it, and
/// everything after it (most of the log) is damage, never a torn tail to cut.
fn log_with_a_duplicated_record(home: &Path, encoding: Encoding) -> PathBuf {
    let scratch = tempfile::tempdir().unwrap();
    let mut writer = SessionWriter::create(
        scratch.path(),
        SessionHeader::new("dup", 1, Some("/w".into())),
        Encoding::Plain,
    )
    .unwrap();
    writer.append(vec![turn_start(1), user("start")]).unwrap();
    for i in 0..40 {
        writer
            .append(vec![assistant(1, &format!("{i} {}", "words ".repeat(180)))])
            .unwrap();
    }
    let plain = fs::read(writer.path()).unwrap();
    let mut lines = lines_of(&plain);
    let duplicate = lines[2].clone();
    lines.insert(3, duplicate);
    let damaged = lines.concat();
    let bytes = match encoding {
        Encoding::Plain => damaged,
        Encoding::Zstd => to_zstd_frames(&damaged, 1),
    };
    place_log(home, "--w--", "dup", encoding.file_name(), &bytes)
}

#[test]
fn a_duplicated_record_is_damage_kept_byte_for_byte() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = log_with_a_duplicated_record(home.path(), encoding);
        settle(&path);
        let before = fs::read(&path).unwrap();
        assert!(before.len() > 4_000, "{}", before.len());
        let (scan, _) = read_log(&path).unwrap();
        assert!(
            scan.torn_tail.is_some(),
            "the reader stops at the repeated seq"
        );
        let (mut writer, _) = SessionWriter::open(&path).unwrap();
        assert_eq!(fs::read(&path).unwrap(), before, "{encoding:?}: open");
        let tail = writer.tail().unwrap().clone();
        assert!(!tail.cuttable, "{encoding:?}: {tail:?}");
        let refusal = writer.blocked().expect("a damaged log is known unwritable");
        assert!(refusal.contains("damaged"), "{refusal}");
        let reason = not_writable(writer.append(vec![user("after")]));
        assert!(reason.contains("kept untouched"), "{reason}");
        drop(writer);
        assert_eq!(
            fs::read(&path).unwrap(),
            before,
            "{encoding:?}: append refused"
        );
    }
}

#[test]
fn a_settled_torn_tail_is_cut_by_the_next_append_only() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = log_with_a_turn(home.path(), "s", encoding);
        let valid = fs::read(&path).unwrap();
        append_raw(&path, torn_bytes(encoding));
        settle(&path);
        let (mut writer, _) = SessionWriter::open(&path).unwrap();
        let events = writer.append(vec![user("after the cut")]).unwrap();
        assert_eq!(events[0].seq, 4);
        let after = fs::read(&path).unwrap();
        assert!(after.starts_with(&valid), "{encoding:?}");
        let (scan, records) = read_log(&path).unwrap();
        assert!(scan.torn_tail.is_none());
        assert_eq!(records.len(), 5);
    }
}

#[test]
fn a_recently_changed_torn_tail_is_not_cut() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = log_with_a_turn(home.path(), "s", encoding);
        append_raw(&path, torn_bytes(encoding));
        let torn = fs::read(&path).unwrap();
        let (mut writer, _) = SessionWriter::open(&path).unwrap();
        assert!(
            writer.blocked().is_none(),
            "only the append judges a settling tail"
        );
        let reason = not_writable(writer.append(vec![user("too early")]));
        assert!(reason.contains("may still be appending"), "{reason}");
        assert_eq!(fs::read(&path).unwrap(), torn, "{encoding:?}");
    }
}

#[test]
fn a_torn_tail_that_changed_since_it_was_seen_is_not_cut() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = log_with_a_turn(home.path(), "s", encoding);
        append_raw(&path, torn_bytes(encoding));
        settle(&path);
        let (mut writer, _) = SessionWriter::open(&path).unwrap();
        // Another process (dsh takes no lock) goes on writing its batch...
        append_raw(&path, b"more of the same batch");
        // ...and even if it then looks settled, it is not the tail first seen.
        settle(&path);
        let grown = fs::read(&path).unwrap();
        let reason = not_writable(writer.append(vec![user("x")]));
        assert!(reason.contains("not a complete batch"), "{reason}");
        assert_eq!(fs::read(&path).unwrap(), grown, "{encoding:?}");
        // Seen now and unchanged at the next append: that one may cut it.
        writer.append(vec![user("y")]).unwrap();
        let (scan, records) = read_log(&path).unwrap();
        assert!(scan.torn_tail.is_none());
        assert_eq!(records.len(), 5, "{encoding:?}");
    }
}

#[test]
fn a_second_writer_of_ours_is_refused_until_the_first_lets_go() {
    let home = tempfile::tempdir().unwrap();
    let path = log_with_a_turn(home.path(), "s", Encoding::Zstd);
    let before = fs::read(&path).unwrap();
    let (first, _) = SessionWriter::open(&path).unwrap();
    let reason = not_writable(SessionWriter::open(&path));
    assert!(reason.contains("another dsh-refs writer"), "{reason}");
    assert!(dsh_session_references::session::writer::held_by_another_writer(&path));
    assert_eq!(fs::read(&path).unwrap(), before);
    drop(first);
    assert!(!dsh_session_references::session::writer::held_by_another_writer(&path));
    let (mut second, _) = SessionWriter::open(&path).unwrap();
    second.append(vec![user("mine now")]).unwrap();
}

/// The log grew under the writer (another writer with no lock, as dsh): its valid records are
/// adopted and our batch continues after them; the reported error never comes back.
#[test]
fn a_writer_whose_log_moved_on_adopts_the_new_records() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = log_with_a_turn(home.path(), "s", encoding);
        let (mut ours, _) = SessionWriter::open(&path).unwrap();
        // The other writer: a copy of the log's state, writing through a scratch log whose new
        // bytes are then appended to the shared one, as dsh's appendFile would.
        let scratch = tempfile::tempdir().unwrap();
        let other = scratch.path().join(encoding.file_name());
        fs::copy(&path, &other).unwrap();
        let start = fs::metadata(&other).unwrap().len() as usize;
        {
            let (mut theirs, _) = SessionWriter::open(&other).unwrap();
            theirs.append(vec![turn_start(2), user("theirs")]).unwrap();
            theirs
                .append(vec![assistant(2, "theirs too"), turn_end(2)])
                .unwrap();
        }
        append_raw(&path, &fs::read(&other).unwrap()[start..]);
        let events = ours.append(vec![user("ours")]).unwrap();
        assert_eq!(events[0].seq, 8, "{encoding:?}: continues after theirs");
        let adopted = ours.take_adopted();
        let seqs: Vec<u64> = adopted.iter().map(Record::first_seq).collect();
        assert_eq!(seqs, vec![4, 5, 6, 7], "{encoding:?}");
        assert!(ours.take_adopted().is_empty(), "taken once");
        let (scan, records) = read_log(&path).unwrap();
        assert!(scan.torn_tail.is_none());
        assert_eq!(records.len(), 9);
        ours.append(vec![user("again")]).unwrap();
    }
}

#[test]
fn a_log_cut_under_its_writer_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let path = log_with_a_turn(home.path(), "s", Encoding::Plain);
    let (mut writer, _) = SessionWriter::open(&path).unwrap();
    let bytes = fs::read(&path).unwrap();
    let shorter = bytes.len() - lines_of(&bytes).last().unwrap().len();
    fs::write(&path, &bytes[..shorter]).unwrap();
    let reason = not_writable(writer.append(vec![user("x")]));
    assert!(reason.contains("no longer holds"), "{reason}");
    assert_eq!(fs::read(&path).unwrap(), &bytes[..shorter]);
}

#[test]
fn a_failing_write_leaves_the_log_as_it_was() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = log_with_a_turn(home.path(), "s", encoding);
        let before = fs::read(&path).unwrap();
        let (mut writer, _) = SessionWriter::open(&path).unwrap();
        writer.set_write_fault(Some(WriteFault {
            after: 7,
            kind: std::io::ErrorKind::StorageFull,
        }));
        let err = writer.append(vec![user("lost?")]).unwrap_err();
        assert!(
            matches!(&err, SessionError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
            "{err}"
        );
        assert_eq!(
            fs::read(&path).unwrap(),
            before,
            "{encoding:?}: rolled back"
        );
        assert!(!path.with_file_name(".session.jsonl.pending").exists());
        writer.set_write_fault(None);
        let events = writer.append(vec![user("kept")]).unwrap();
        assert_eq!(
            events[0].seq, 4,
            "{encoding:?}: the failed batch took no seq"
        );
        assert_eq!(read_log(&path).unwrap().1.len(), 5);
    }
}

#[test]
fn a_home_keeps_one_encoding() {
    let home = tempfile::tempdir().unwrap();
    assert_eq!(home_encoding(home.path(), None).unwrap(), Encoding::Zstd);
    assert_eq!(
        home_encoding(home.path(), Some(Encoding::Plain)).unwrap(),
        Encoding::Plain
    );
    log_with_a_turn(home.path(), "z", Encoding::Zstd);
    assert_eq!(home_encoding(home.path(), None).unwrap(), Encoding::Zstd);
    let err = home_encoding(home.path(), Some(Encoding::Plain)).unwrap_err();
    assert!(err.to_string().contains("already holds zstd logs"), "{err}");

    let plain = tempfile::tempdir().unwrap();
    log_with_a_turn(plain.path(), "p", Encoding::Plain);
    assert_eq!(home_encoding(plain.path(), None).unwrap(), Encoding::Plain);
    let err = home_encoding(plain.path(), Some(Encoding::Zstd)).unwrap_err();
    assert!(
        err.to_string().contains("already holds uncompressed logs"),
        "{err}"
    );
}

#[test]
fn a_log_replaced_or_deleted_under_its_writer_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let path = log_with_a_turn(home.path(), "s", Encoding::Plain);
    let (mut writer, _) = SessionWriter::open(&path).unwrap();
    let copy = path.with_extension("copy");
    fs::copy(&path, &copy).unwrap();
    fs::rename(&copy, &path).unwrap();
    let before = fs::read(&path).unwrap();
    let reason = not_writable(writer.append(vec![user("into the void")]));
    assert!(reason.contains("replaced"), "{reason}");
    assert_eq!(fs::read(&path).unwrap(), before);
    fs::remove_file(&path).unwrap();
    let reason = not_writable(writer.append(vec![user("into the void")]));
    assert!(reason.contains("deleted"), "{reason}");
}
