//! The session layer against real dsh logs: reading, folding, writing, torn tails, caching.

use crate::support::*;
use dsh_session_references::session::reader::{read_log, scan_reader, Encoding};
use dsh_session_references::session::store::read_surface_file;
use dsh_session_references::session::surface::fold;
use dsh_session_references::session::{
    DiskStore, Event, EventData, MessageSource, Record, SessionError, SessionHeader, SessionQuery,
    SessionWriter,
};
use serde_json::Value;
use std::fs;
use std::path::Path;

/// What a fixture should fold to, computed straight from the JSON (independently of the reader).
struct Expected {
    header: Value,
    event_count: u64,
    next_seq: u64,
    title: Option<String>,
    /// Seqs of the surface, assuming only appends (no fixture compacts).
    surface_seqs: Vec<u64>,
}

fn expected_of(plain: &[u8]) -> Expected {
    let mut lines = plain.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    let header: Value = serde_json::from_slice(lines.next().unwrap()).unwrap();
    let mut event_count = 0;
    let mut next_seq = 0;
    let mut title = None;
    let mut surface_seqs = Vec::new();
    for line in lines {
        let v: Value = serde_json::from_slice(line).unwrap();
        if let Some(seq0) = v.get("seq0").and_then(Value::as_u64) {
            let data = &v["data"];
            let n = data
                .get("texts")
                .or_else(|| data.get("args"))
                .and_then(Value::as_array)
                .unwrap()
                .len() as u64;
            event_count += n;
            next_seq = seq0 + n;
            continue;
        }
        let seq = v["seq"].as_u64().unwrap();
        event_count += 1;
        next_seq = seq + 1;
        if v["type"] == "session/title" {
            title = v["data"]["title"].as_str().map(str::to_string);
        }
        if let Some(op) = v.get("surfaceOp") {
            assert_eq!(op, "append", "fixtures only append");
            surface_seqs.push(seq);
        }
    }
    Expected {
        header,
        event_count,
        next_seq,
        title,
        surface_seqs,
    }
}

fn check_header(header: &SessionHeader, expected: &Value) {
    assert_eq!(header.id, expected["id"].as_str().unwrap());
    assert_eq!(header.created_at, expected["createdAt"].as_i64().unwrap());
    assert_eq!(
        header.cwd.as_deref(),
        expected.get("cwd").and_then(Value::as_str)
    );
    assert_eq!(
        header.version,
        expected.get("version").and_then(Value::as_u64).unwrap_or(0)
    );
    assert_eq!(
        header.delegation_depth,
        expected
            .get("delegationDepth")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    );
}

#[test]
fn every_fixture_loads_plain_and_zstd() {
    let logs = fixture_logs();
    assert_eq!(logs.len(), 105, "the shared fixture set has 105 logs");
    let home = tempfile::tempdir().unwrap();
    for (n, log) in logs.iter().enumerate() {
        let plain = fs::read(log).unwrap();
        let expected = expected_of(&plain);
        for (encoding, bytes) in [
            (Encoding::Plain, plain.clone()),
            (Encoding::Zstd, to_zstd_frames(&plain, 1)),
            (Encoding::Zstd, to_zstd_frames(&plain, 7)),
        ] {
            let path = place_log(
                home.path(),
                "--p--",
                &format!("s{n}-{encoding:?}"),
                encoding.file_name(),
                &bytes,
            );
            let name = log.file_name().unwrap().to_string_lossy();
            let (scan, records) = read_log(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(scan.torn_tail.is_none(), "{name}: unexpected torn tail");
            assert_eq!(scan.valid_len, bytes.len() as u64, "{name}");
            check_header(&scan.header, &expected.header);
            assert_eq!(scan.next_seq, expected.next_seq, "{name}: next seq");
            let unpacked: u64 = records.iter().map(Record::seq_count).sum();
            assert_eq!(unpacked, expected.event_count, "{name}");

            let snapshot = read_surface_file(&path).unwrap();
            let seqs: Vec<u64> = snapshot.events.iter().map(|e| e.seq).collect();
            assert_eq!(seqs, expected.surface_seqs, "{name}: surface");
            assert_eq!(
                snapshot.captured_through_seq,
                expected.next_seq.checked_sub(1)
            );
            for event in &snapshot.events {
                let message = event
                    .message(&snapshot.session.id)
                    .unwrap_or_else(|e| panic!("{name}: seq {}: {e}", event.seq));
                assert!(message.is_some(), "{name}: seq {} has a message", event.seq);
            }
        }
        let store = DiskStore::new(home.path());
        let _ = store.list_sessions_blocking().unwrap();
        let _ = expected.title;
        fs::remove_dir_all(home.path().join("sessions")).unwrap();
    }
}

#[test]
fn titles_match_the_last_title_event() {
    let home = tempfile::tempdir().unwrap();
    let mut expected_titles = Vec::new();
    for (n, log) in fixture_logs().iter().enumerate() {
        let plain = with_header_id(&fs::read(log).unwrap(), &format!("fixture-{n}"));
        let expected = expected_of(&plain);
        let bytes = if n % 2 == 0 {
            plain.clone()
        } else {
            to_zstd_frames(&plain, 3)
        };
        let file = if n % 2 == 0 {
            "session.jsonl"
        } else {
            "session.jsonl.zstd"
        };
        place_log(
            home.path(),
            &format!("--p{}--", n % 5),
            &format!("fixture-{n}"),
            file,
            &bytes,
        );
        expected_titles.push((format!("fixture-{n}"), expected.title));
    }
    let store = DiskStore::new(home.path());
    let listed = store.list_sessions_blocking().unwrap();
    assert_eq!(listed.len(), 105);
    let with_titles = expected_titles.iter().filter(|(_, t)| t.is_some()).count();
    assert!(with_titles > 50, "most fixtures carry a title");
    for (id, title) in &expected_titles {
        assert_eq!(&store.read_title_blocking(id).unwrap(), title, "{id}");
    }
}

#[test]
fn steering_scenario_concrete_values() {
    let path = fixture("apps_web__steering.jsonl");
    let snapshot = read_surface_file(&path).unwrap();
    assert_eq!(snapshot.session.id, "{{sessionId}}");
    assert_eq!(snapshot.session.cwd.as_deref(), Some("{{cwd}}/workspace"));
    assert_eq!(snapshot.session.created_at, 1785004180013);
    assert_eq!(
        snapshot.session.delegation_depth, 0,
        "missing delegationDepth reads as 0"
    );
    assert_eq!(snapshot.captured_through_seq, Some(142));
    let order: Vec<(&str, u64)> = snapshot
        .events
        .iter()
        .map(|e| (e.kind.as_str(), e.seq))
        .collect();
    assert_eq!(
        order,
        vec![
            ("user/message", 1),
            ("assistant/message", 88),
            ("tool/result", 90),
            ("steering/message", 91),
            ("assistant/message", 140),
        ]
    );
    let steering = snapshot.events[3].decode(&snapshot.session.id).unwrap();
    match steering {
        EventData::SteeringMessage { turn, message, .. } => {
            assert_eq!(turn, 1);
            assert_eq!(
                message.text(),
                "Interjection: include the word BANANA in your final reply."
            );
            assert!(message.source.is_direct_user());
            assert_eq!(
                message.id, "legacy-message:{{sessionId}}:91",
                "flat shape gets a legacy id"
            );
        }
        other => panic!("expected steering, got {other:?}"),
    }
    let answer = snapshot.events[4]
        .message(&snapshot.session.id)
        .unwrap()
        .unwrap();
    assert_eq!(answer.text(), "Great, let's move forward. BANANA!");
    assert_eq!(
        answer.source,
        MessageSource::model("deepseek-official", "deepseek-v4-flash")
    );
    let (scan, _) = read_log(&path).unwrap();
    assert_eq!(scan.next_seq, 143);
    let store_home = tempfile::tempdir().unwrap();
    place_log(
        store_home.path(),
        "--w--",
        "s",
        "session.jsonl",
        &fs::read(&path).unwrap(),
    );
    let store = DiskStore::new(store_home.path());
    assert_eq!(
        store
            .read_title_blocking("{{sessionId}}")
            .unwrap()
            .as_deref(),
        Some("Use the ask_user_question tool to")
    );
}

#[test]
fn packed_chunks_unpack_with_seq_and_time() {
    let (_, records) = read_log(&fixture("examples_acp-agent__packed-chunks.jsonl")).unwrap();
    let packed = records
        .iter()
        .find_map(|r| match r {
            Record::Packed(p) => Some(p),
            _ => None,
        })
        .unwrap();
    assert_eq!(packed.seq0, 8);
    assert_eq!(packed.len(), 17);
    let events = packed.unpack();
    assert_eq!(events.len(), 17);
    assert_eq!(events[0].seq, 8);
    assert_eq!(events[16].seq, 24);
    assert_eq!(events[0].time, 1783352166075);
    // dt = [0,0,1,0,0,28,...]: member 5 is at time0 + 1.
    assert_eq!(events[5].time, 1783352166076);
    assert_eq!(events[6].time, 1783352166104);
    match events[0].decode("x").unwrap() {
        EventData::AssistantChunk { chunk, .. } => {
            assert_eq!(chunk["type"], "reasoning-delta");
            assert_eq!(chunk["text"], "The");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn other_fixture_concrete_values() {
    // The flat-shape multi-turn log: two direct prompts, two answers.
    let snapshot = read_surface_file(&fixture("apps_cli__multi-turn-conversation.jsonl")).unwrap();
    let users: Vec<String> = snapshot
        .events
        .iter()
        .filter(|e| e.kind == "user/message")
        .map(|e| e.message(&snapshot.session.id).unwrap().unwrap().text())
        .collect();
    assert!(!users.is_empty());
    // Unknown source kinds survive decoding untouched.
    let mut seen_other = false;
    for log in fixture_logs() {
        let snapshot = read_surface_file(&log).unwrap();
        for event in &snapshot.events {
            let message = event.message(&snapshot.session.id).unwrap().unwrap();
            if let MessageSource::Other(map) = &message.source {
                seen_other = true;
                let again = serde_json::to_value(&message.source).unwrap();
                assert_eq!(again, Value::Object(map.clone()));
            }
        }
    }
    assert!(
        seen_other,
        "fixtures hold workspace-instructions / subagent-report sources"
    );
}

/// Writes `records` through our writer in batches of `batch` and returns the log path.
fn write_through(
    home: &Path,
    header: SessionHeader,
    records: &[Record],
    encoding: Encoding,
    batch: usize,
) -> std::path::PathBuf {
    let mut writer = SessionWriter::create(home, header, encoding).unwrap();
    for chunk in records.chunks(batch) {
        writer.append_records(chunk).unwrap();
    }
    writer.path().to_path_buf()
}

#[test]
fn round_trip_through_the_writer() {
    for log in fixture_logs() {
        let (scan, records) = read_log(&log).unwrap();
        for (encoding, batch) in [
            (Encoding::Plain, 1),
            (Encoding::Zstd, 1),
            (Encoding::Zstd, 5),
        ] {
            let home = tempfile::tempdir().unwrap();
            let path = write_through(home.path(), scan.header.clone(), &records, encoding, batch);
            assert_eq!(Encoding::of_path(&path), encoding);
            let (again_scan, again) = read_log(&path).unwrap();
            assert_eq!(again_scan.header, scan.header);
            assert_eq!(again, records, "{}", log.display());
            assert_eq!(again_scan.next_seq, scan.next_seq);
            // Written JSON equals the original lines in meaning.
            if encoding == Encoding::Plain {
                let ours = fs::read(&path).unwrap();
                let theirs = fs::read(&log).unwrap();
                let ours: Vec<Value> = ours
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                    .map(|l| serde_json::from_slice(l).unwrap())
                    .collect();
                let theirs: Vec<Value> = theirs
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                    .map(|l| serde_json::from_slice(l).unwrap())
                    .collect();
                assert_eq!(ours.len(), theirs.len());
                for (a, b) in ours.iter().zip(&theirs).skip(1) {
                    assert_eq!(a, b, "{}", log.display());
                }
            }
        }
    }
}

#[test]
fn writer_lays_out_directories_like_dsh() {
    let home = tempfile::tempdir().unwrap();
    let header = SessionHeader::new("a.b~c", 1, Some("/work/my proj".into()));
    let writer = SessionWriter::create(home.path(), header.clone(), Encoding::Zstd).unwrap();
    assert_eq!(
        writer.path(),
        home.path()
            .join("sessions/--work-my~0020proj--/a~002Eb~007Ec/session.jsonl.zstd")
    );
    let no_cwd = SessionWriter::create(
        home.path(),
        SessionHeader::new("x", 2, None),
        Encoding::Plain,
    )
    .unwrap();
    assert_eq!(
        no_cwd.path(),
        home.path().join("sessions/_no-cwd/x/session.jsonl")
    );
    assert!(matches!(
        SessionWriter::create(home.path(), header, Encoding::Plain),
        Err(SessionError::AlreadyExists { .. })
    ));
    assert!(matches!(
        SessionWriter::create(
            home.path(),
            SessionHeader::new("", 1, None),
            Encoding::Plain
        ),
        Err(SessionError::InvalidId { .. })
    ));
    // The header line is exactly dsh's shape.
    let line = fs::read_to_string(no_cwd.path()).unwrap();
    assert_eq!(
        line,
        "{\"type\":\"session\",\"version\":0,\"id\":\"x\",\"createdAt\":2,\"delegationDepth\":0}\n"
    );
}

/// Identified messages rewritten in the flat (older) shape fold to the same conversation.
#[test]
fn flat_and_identified_shapes_fold_alike() {
    let path = fixture("examples_acp-agent__packed-chunks.jsonl");
    let plain = fs::read(&path).unwrap();
    let mut lines = lines_of(&plain);
    for line in lines.iter_mut().skip(1) {
        let mut v: Value = serde_json::from_slice(line).unwrap();
        let kind = v["type"].as_str().unwrap_or("").to_string();
        let data = v["data"].as_object_mut().unwrap();
        match kind.as_str() {
            "user/message" => {
                data.remove("id");
                data.remove("role");
            }
            "assistant/message" => {
                let message = data.remove("message").unwrap();
                data.insert("content".into(), message["content"].clone());
                let source = &message["source"];
                data.insert(
                    "provenance".into(),
                    serde_json::json!({"provider": source["provider"], "model": source["model"]}),
                );
            }
            "tool/result" => {
                let message = data.remove("message").unwrap();
                let block = &message["content"][0];
                data.insert("callId".into(), block["toolCallId"].clone());
                data.insert("content".into(), block["content"].clone());
                data.insert("isError".into(), block["isError"].clone());
            }
            _ => continue,
        }
        let mut out = serde_json::to_vec(&v).unwrap();
        out.push(b'\n');
        *line = out;
    }
    let home = tempfile::tempdir().unwrap();
    let flat_path = place_log(
        home.path(),
        "--p--",
        "flat",
        "session.jsonl",
        &lines.concat(),
    );
    let original = read_surface_file(&path).unwrap();
    let flat = read_surface_file(&flat_path).unwrap();
    assert_eq!(original.events.len(), flat.events.len());
    let mut flat_ids = 0;
    for (a, b) in original.events.iter().zip(&flat.events) {
        let a = a.message(&original.session.id).unwrap().unwrap();
        let b = b.message(&flat.session.id).unwrap().unwrap();
        assert_eq!(a.content, b.content);
        assert_eq!(a.source.kind(), b.source.kind());
        assert_eq!(a.text(), b.text());
        if b.id.starts_with("legacy-message:") {
            flat_ids += 1;
        }
    }
    assert_eq!(flat_ids, original.events.len(), "every message went flat");
}

/// Builds a log with a final batch of several events; returns (bytes, offset where the last batch starts).
fn log_with_last_batch(encoding: Encoding) -> (Vec<u8>, usize, u64) {
    let home = tempfile::tempdir().unwrap();
    let (_, records) = read_log(&fixture("apps_cli__multi-turn-conversation.jsonl")).unwrap();
    let header = SessionHeader::new("torn", 1, Some("/w".into()));
    let split = records.len() - 4;
    let path = write_through(home.path(), header, &records[..split], encoding, 3);
    let before = fs::metadata(&path).unwrap().len() as usize;
    let (mut writer, _) = SessionWriter::open(&path).unwrap();
    writer.append_records(&records[split..]).unwrap();
    let kept: u64 = records[..split].iter().map(Record::seq_count).sum();
    (fs::read(&path).unwrap(), before, kept)
}

#[test]
fn torn_tail_at_every_offset_keeps_the_valid_prefix() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let (bytes, last_batch, kept_seqs) = log_with_last_batch(encoding);
        let full = scan_reader(
            Path::new("mem"),
            &bytes[..],
            encoding,
            bytes.len() as u64,
            &mut |_| Ok(()),
        )
        .unwrap();
        for cut in last_batch..bytes.len() {
            let scan = scan_reader(
                Path::new("mem"),
                &bytes[..cut],
                encoding,
                cut as u64,
                &mut |_| Ok(()),
            )
            .unwrap_or_else(|e| panic!("{encoding:?} cut at {cut}: {e}"));
            // A plain log may keep whole lines of the last batch; never a partial line, and a zstd
            // log never keeps any of a partial frame.
            match encoding {
                Encoding::Zstd => {
                    assert_eq!(scan.next_seq, kept_seqs, "cut at {cut}");
                    assert_eq!(scan.valid_len, last_batch as u64);
                }
                Encoding::Plain => {
                    assert!(scan.next_seq >= kept_seqs && scan.next_seq <= full.next_seq);
                    // Whole lines only: the prefix ends at a newline, or is a complete final
                    // line whose newline was cut.
                    let end = scan.valid_len as usize;
                    assert!(
                        bytes[end - 1] == b'\n' || bytes[end] == b'\n',
                        "cut at {cut}"
                    );
                    assert!(scan.next_seq < full.next_seq || cut >= bytes.len() - 1);
                }
            }
            if cut > last_batch {
                assert!(scan.torn_tail.is_some() || encoding == Encoding::Plain);
            }
        }
    }
}

/// A reader that fails once `budget` bytes have been read.
struct FailingAfter<'a> {
    bytes: &'a [u8],
    budget: usize,
}

impl std::io::Read for FailingAfter<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.budget == 0 {
            return Err(std::io::Error::other("the disk went away"));
        }
        let n = buf.len().min(self.budget).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        self.budget -= n;
        Ok(n)
    }
}

/// zstd contexts are reused by the reads of a thread: a read that stops inside a frame (an I/O
/// error, a torn frame) must leave nothing behind for the next one.
#[test]
fn a_read_stopped_inside_a_zstd_frame_does_not_affect_the_next_read() {
    let (bytes, _, _) = log_with_last_batch(Encoding::Zstd);
    let scan = |reader: &mut dyn std::io::Read| {
        let mut seqs = Vec::new();
        let result = scan_reader(
            Path::new("mem"),
            reader,
            Encoding::Zstd,
            bytes.len() as u64,
            &mut |record: Record| {
                seqs.push(record.first_seq());
                Ok(())
            },
        );
        result.map(|scan| (scan.next_seq, scan.valid_len, seqs))
    };
    let expected = scan(&mut &bytes[..]).unwrap();
    for budget in (1..bytes.len()).step_by(7) {
        let failed = scan(&mut FailingAfter {
            bytes: &bytes,
            budget,
        });
        assert!(failed.is_err(), "an I/O error after {budget} bytes");
        let torn = &bytes[..budget];
        let _ = scan(&mut &torn[..]);
        assert_eq!(scan(&mut &bytes[..]).unwrap(), expected, "after {budget}");
    }
}

#[test]
fn torn_tail_is_cut_before_the_next_append() {
    let home = tempfile::tempdir().unwrap();
    let (_, records) = read_log(&fixture("apps_cli__multi-turn-conversation.jsonl")).unwrap();
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let header = SessionHeader::new(format!("cut-{encoding:?}"), 1, None);
        let path = write_through(home.path(), header, &records[..10], encoding, 2);
        let good = fs::read(&path).unwrap();
        // A crash mid-append leaves garbage.
        let mut torn = good.clone();
        torn.extend_from_slice(if encoding == Encoding::Plain {
            b"{\"type\":\"assis"
        } else {
            &[0x28, 0xB5, 0x2F, 0xFD, 0x20]
        });
        fs::write(&path, &torn).unwrap();
        // Left alone long enough: not an append in flight.
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
            .unwrap();
        let (scan, _) = read_log(&path).unwrap();
        assert!(scan.torn_tail.is_some());
        let (mut writer, _) = SessionWriter::open(&path).unwrap();
        assert_eq!(fs::read(&path).unwrap(), torn, "opening changes no byte");
        writer.append_records(&records[10..]).unwrap();
        let (_, again) = read_log(&path).unwrap();
        assert_eq!(again, records);
        assert!(fs::read(&path).unwrap().starts_with(&good));
    }
}

#[test]
fn corruption_before_the_last_turn_end_names_file_and_line() {
    let home = tempfile::tempdir().unwrap();
    let plain = fs::read(fixture("apps_cli__multi-turn-conversation.jsonl")).unwrap();
    let mut lines = lines_of(&plain);
    lines[5] = b"{not json\n".to_vec();
    let path = place_log(
        home.path(),
        "--p--",
        "bad",
        "session.jsonl",
        &lines.concat(),
    );
    match read_log(&path) {
        Err(SessionError::Corrupt { path: p, line, .. }) => {
            assert_eq!(p, path);
            assert_eq!(line, 6);
        }
        other => panic!("expected corruption, got {:?}", other.map(|(s, _)| s)),
    }
    let message = read_surface_file(&path).unwrap_err().to_string();
    assert!(
        message.contains("session.jsonl") && message.contains("line 6"),
        "{message}"
    );

    // A seq gap in the middle is corruption too.
    let mut lines = lines_of(&plain);
    lines.remove(4);
    let path = place_log(
        home.path(),
        "--p--",
        "gap",
        "session.jsonl",
        &lines.concat(),
    );
    assert!(matches!(
        read_log(&path),
        Err(SessionError::Corrupt { line: 5, .. })
    ));

    // zstd: a damaged frame in the middle.
    let mut zstd = Vec::new();
    let lines = lines_of(&plain);
    zstd.extend(zstd::bulk::compress(&lines[0], 3).unwrap());
    for (i, line) in lines[1..].iter().enumerate() {
        let mut frame = zstd::bulk::compress(line, 3).unwrap();
        if i == 3 {
            let n = frame.len();
            frame[n / 2] ^= 0xFF;
            frame[n - 1] ^= 0xFF;
        }
        zstd.extend(frame);
    }
    let path = place_log(home.path(), "--p--", "badz", "session.jsonl.zstd", &zstd);
    assert!(
        matches!(read_log(&path), Err(SessionError::Corrupt { line: 5, .. })),
        "{:?}",
        read_log(&path).map(|s| s.0)
    );
}

#[test]
fn header_versions_and_errors() {
    let home = tempfile::tempdir().unwrap();
    let path = place_log(
        home.path(),
        "--p--",
        "v1",
        "session.jsonl",
        b"{\"type\":\"session\",\"version\":1,\"id\":\"v\",\"createdAt\":1}\n",
    );
    assert!(matches!(
        read_log(&path),
        Err(SessionError::UnsupportedVersion { version: 1, .. })
    ));
    let path = place_log(
        home.path(),
        "--p--",
        "v0",
        "session.jsonl",
        b"{\"type\":\"session\",\"id\":\"v\",\"createdAt\":1,\"extra\":{\"k\":1}}\n",
    );
    let (scan, records) = read_log(&path).unwrap();
    assert_eq!((scan.header.version, scan.header.delegation_depth), (0, 0));
    assert_eq!(scan.header.extra["extra"]["k"], 1);
    assert!(records.is_empty());
    assert_eq!(read_surface_file(&path).unwrap().captured_through_seq, None);
    let path = place_log(home.path(), "--p--", "empty", "session.jsonl", b"");
    assert!(matches!(
        read_log(&path),
        Err(SessionError::InvalidHeader { .. })
    ));
}

#[test]
fn invalid_replace_is_a_clear_error() {
    let event = |seq: u64, op: &str| -> Event {
        serde_json::from_str::<Record>(&format!(
            "{{\"type\":\"user/message\",\"seq\":{seq},\"time\":1,\"data\":{{\"content\":[],\"source\":{{\"kind\":\"user\"}},\"role\":\"user\",\"id\":\"u{seq}\"}},\"surfaceOp\":{op}}}"
        ))
        .map(|r| match r {
            Record::Event(e) => e,
            _ => unreachable!(),
        })
        .unwrap()
    };
    let ok = fold(
        "s",
        vec![
            event(0, "\"append\""),
            event(1, "\"append\""),
            event(2, r#"{"op":"replace","start":0,"end":1}"#),
        ],
    )
    .unwrap();
    assert_eq!(ok.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2]);
    let err = fold(
        "s",
        vec![
            event(0, "\"append\""),
            event(1, r#"{"op":"replace","start":0,"end":1}"#),
        ],
    )
    .unwrap_err();
    assert!(err.to_string().contains("seq 1"), "{err}");
    assert!(fold(
        "s",
        vec![
            event(0, "\"append\""),
            event(1, r#"{"op":"replace","start":1,"end":0}"#)
        ]
    )
    .is_err());
}

#[tokio::test]
async fn store_serves_session_query() {
    let home = tempfile::tempdir().unwrap();
    for (i, created) in [(0, 10), (1, 30), (2, 20), (3, 30)] {
        let cwd = (i != 2).then(|| format!("/w/{i}"));
        let mut w = SessionWriter::create(
            home.path(),
            SessionHeader::new(format!("s{i}"), created, cwd),
            Encoding::Zstd,
        )
        .unwrap();
        w.append(vec![title_event(format!("title {i}"))]).unwrap();
    }
    let store = DiskStore::new(home.path());
    let listed = store.list_sessions().await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.id()).collect();
    assert_eq!(
        ids,
        vec!["s1", "s3", "s2", "s0"],
        "newest first, ties by id"
    );
    assert!(listed.iter().all(|s| s.persisted && !s.live));
    assert_eq!(
        store.read_title("s2").await.unwrap().as_deref(),
        Some("title 2")
    );
    assert_eq!(
        store.read_surface("s2").await.unwrap().captured_through_seq,
        Some(0)
    );
    match store.read_surface("nope").await {
        Err(SessionError::NotFound { id }) => assert_eq!(id, "nope"),
        other => panic!("{other:?}"),
    }
    assert!(store
        .read_title("nope")
        .await
        .unwrap_err()
        .to_string()
        .contains("\"nope\""));
}

#[test]
fn a_damaged_pending_marker_never_cuts_acknowledged_data() {
    let home = tempfile::tempdir().unwrap();
    let (_, records) = read_log(&fixture("apps_cli__multi-turn-conversation.jsonl")).unwrap();
    let header = SessionHeader::new("marked", 1, None);
    let path = write_through(home.path(), header, &records, Encoding::Plain, 4);
    let good = fs::read(&path).unwrap();
    let marker = path.with_file_name(".session.jsonl.pending");
    let mid_line = (good.len() / 2) as u64;
    for damaged in [
        "".to_string(),
        "\0\0\0\0".to_string(),
        "12".to_string(),                // cut short: no newline
        "0\n".to_string(),               // would cut the header
        format!("{mid_line}\n"),         // not a line boundary
        format!("{}\n", good.len() + 9), // past the end
    ] {
        fs::write(&marker, &damaged).unwrap();
        let (scan, again) = read_log(&path).unwrap();
        assert_eq!(again, records, "reader, marker {damaged:?}");
        assert_eq!(scan.valid_len, good.len() as u64);
        let _ = SessionWriter::open(&path).unwrap();
        assert_eq!(fs::read(&path).unwrap(), good, "writer, marker {damaged:?}");
    }
    // A whole marker at a line boundary is honoured: the batch after it was never acknowledged.
    let boundary =
        good.len() as u64 - good.iter().rev().skip(1).position(|b| *b == b'\n').unwrap() as u64 - 1;
    // Opening changes nothing; the next append cuts it first.
    fs::write(&marker, format!("{boundary}\n")).unwrap();
    let (mut writer, _) = SessionWriter::open(&path).unwrap();
    assert_eq!(fs::read(&path).unwrap(), good);
    writer.append(vec![title_event("marked")]).unwrap();
    let after = fs::read(&path).unwrap();
    assert!(after.starts_with(&good[..boundary as usize]));
    assert!(!after.starts_with(&good));
    assert!(!marker.exists());
    let (scan, _) = read_log(&path).unwrap();
    assert!(scan.torn_tail.is_none());
}

#[test]
fn a_log_deleted_under_its_directory_becomes_not_found() {
    let home = tempfile::tempdir().unwrap();
    for id in ["keep", "gone"] {
        let mut w = SessionWriter::create(
            home.path(),
            SessionHeader::new(id, 1, Some("/w".into())),
            Encoding::Plain,
        )
        .unwrap();
        w.append(vec![title_event(id)]).unwrap();
    }
    let store = DiskStore::new(home.path());
    assert_eq!(store.list_sessions_blocking().unwrap().len(), 2);
    fs::remove_file(home.path().join("sessions/--w--/gone/session.jsonl")).unwrap();
    for err in [
        store.read_surface_blocking("gone").unwrap_err(),
        store.read_title_blocking("gone").unwrap_err(),
        store
            .read_conversation_surface_blocking("gone")
            .unwrap_err(),
    ] {
        assert!(
            matches!(&err, SessionError::NotFound { id } if id == "gone"),
            "{err}"
        );
    }
    let ids: Vec<String> = store
        .list_sessions_blocking()
        .unwrap()
        .iter()
        .map(|s| s.id().to_string())
        .collect();
    assert_eq!(ids, vec!["keep"]);
    assert_eq!(
        store.read_title_blocking("keep").unwrap().as_deref(),
        Some("keep")
    );
}

/// A `session/title` event to append.
fn title_event(title: impl Into<String>) -> dsh_session_references::session::NewEvent {
    EventData::SessionTitle {
        title: title.into(),
        message_seqs: vec![],
        source: Value::Null,
        extra: Default::default(),
    }
    .into()
}
