//! Crash safety: a writer process is killed with SIGKILL at random points, again and again, and
//! after every kill the log must open, show no half batch, and hold every batch whose `append`
//! had returned (acknowledged) before the kill.
//!
//! The child (this test binary re-executed with `--ignored crash_writer_child`) opens the log
//! (cutting any torn tail the previous kill left), appends batches of random size and shape —
//! message events, packed chunk rows, large tool output — and after each `append` returns writes
//! the batch's id to a side file. Appending to that file is visible to the parent as soon as the
//! `write` returns, so "acknowledged" means exactly "`append` returned before the kill".
//!
//! Each batch's events carry `batch:<id>:<k>/<n>` in their text, so the parent can check that
//! every batch it can see is complete, and that every acknowledged batch is there.
//!
//! `DSH_CRASH_KILLS` sets the number of kills (default 200, about 10 s); RELIABILITY.md records a
//! longer run.

use crate::support;

use crate::support::TestRng;

use dsh_session_references::session::format::{PackedChunks, PackedKind};
use dsh_session_references::session::reader::read_log;
use dsh_session_references::session::store::read_conversation_surface_file;
use dsh_session_references::session::{
    ContentBlock, Encoding, EventData, Message, MessageSource, Record, SessionHeader, SessionWriter,
};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn marker(batch: u64, k: usize, n: usize) -> String {
    format!("batch:{batch}:{k}/{n}")
}

/// One batch of `n` records: user/assistant/tool events and packed rows.
fn batch_records(writer: &SessionWriter, rng: &mut TestRng, batch: u64) -> Vec<Record> {
    let n = 1 + rng.below(5);
    let mut seq = writer.next_seq();
    let mut records = Vec::with_capacity(n);
    for k in 0..n {
        let tag = marker(batch, k, n);
        let record = match rng.below(4) {
            0 => {
                let message = Message::new(
                    "user",
                    vec![ContentBlock::text(tag)],
                    MessageSource::user(),
                    format!("u{batch}-{k}"),
                );
                Record::Event(dsh_session_references::session::Event::new(
                    seq,
                    1,
                    &EventData::UserMessage(message),
                ))
            }
            1 => {
                // Large, incompressible tool output widens the window in which a kill lands
                // mid-write (for zstd too).
                let size = rng.below(200_000);
                let noise: String = (0..size / 16)
                    .map(|_| format!("{:016x}", rng.next_u64()))
                    .collect();
                let message = Message::new(
                    "user",
                    vec![ContentBlock::ToolResult {
                        tool_call_id: "c".into(),
                        content: vec![ContentBlock::text(format!("{tag} {noise}"))],
                        is_error: None,
                        extra: Default::default(),
                    }],
                    MessageSource::Tool {
                        call_id: "c".into(),
                        extra: Default::default(),
                    },
                    format!("r{batch}-{k}"),
                );
                Record::Event(dsh_session_references::session::Event::new(
                    seq,
                    1,
                    &EventData::ToolResult {
                        turn: 1.into(),
                        step: 1.into(),
                        message,
                        extra: Default::default(),
                    },
                ))
            }
            2 => {
                let pieces = 1 + rng.below(50);
                let mut texts: Vec<String> = (0..pieces).map(|i| format!("w{i} ")).collect();
                texts[0] = tag;
                Record::Packed(Box::new(PackedChunks {
                    kind: PackedKind::Text,
                    seq0: seq,
                    time0: 1,
                    turn: 1.into(),
                    step: 1.into(),
                    index: 0.into(),
                    dt: vec![1; pieces - 1],
                    pieces: texts,
                    id: None,
                    name: None,
                    extra: Default::default(),
                    row_extra: Default::default(),
                }))
            }
            _ => {
                let message = Message::new(
                    "assistant",
                    vec![ContentBlock::text(tag)],
                    MessageSource::model("p", "m"),
                    format!("a{batch}-{k}"),
                );
                Record::Event(dsh_session_references::session::Event::new(
                    seq,
                    1,
                    &EventData::AssistantMessage {
                        turn: 1.into(),
                        step: 1.into(),
                        message,
                        extra: Default::default(),
                    },
                ))
            }
        };
        seq += record.seq_count();
        records.push(record);
    }
    records
}

/// The batch markers a record carries.
fn markers_of(record: &Record) -> Vec<(u64, usize, usize)> {
    let text = serde_json::to_string(record).unwrap();
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("batch:") {
        let tail = &rest[at + 6..];
        let end = tail
            .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '/'))
            .unwrap_or(tail.len());
        let mut parts = tail[..end].split([':', '/']);
        let batch = parts.next().unwrap().parse().unwrap();
        let k = parts.next().unwrap().parse().unwrap();
        let n = parts.next().unwrap().parse().unwrap();
        found.push((batch, k, n));
        rest = &tail[end..];
    }
    found
}

/// Runs only as the child of `sigkill_at_random_points_loses_nothing_acknowledged`.
#[test]
#[ignore = "child process of sigkill_at_random_points_loses_nothing_acknowledged"]
fn crash_writer_child() {
    let (Ok(log), Ok(ack), Ok(seed)) = (
        std::env::var("DSH_CRASH_LOG"),
        std::env::var("DSH_CRASH_ACK"),
        std::env::var("DSH_CRASH_SEED"),
    ) else {
        return;
    };
    let seed: u64 = seed.parse().unwrap();
    let mut rng = TestRng::new(seed);
    let (mut writer, _) = SessionWriter::open(Path::new(&log)).unwrap();
    let mut acks = std::fs::OpenOptions::new().append(true).open(&ack).unwrap();
    // Batch ids are unique across children: seed-based high bits, a counter below.
    for i in 0.. {
        let batch = (seed << 20) | i;
        let records = batch_records(&writer, &mut rng, batch);
        writer.append_records(&records).unwrap();
        // Acknowledged: append returned.
        acks.write_all(format!("{batch}\n").as_bytes()).unwrap();
    }
}

struct Figures {
    kills: usize,
    acknowledged: usize,
    /// Kills after which the file held bytes past the valid prefix (a batch cut mid-write).
    cut_mid_batch: usize,
    /// Of those, plain logs whose pending marker hid the partial batch.
    pending_markers: usize,
}

fn crash_loop(encoding: Encoding, kills: usize, seed: u64) -> Figures {
    let home = tempfile::tempdir().unwrap();
    let mut rng = TestRng::new(seed);
    let mut figures = Figures {
        kills: 0,
        acknowledged: 0,
        cut_mid_batch: 0,
        pending_markers: 0,
    };
    let mut path = None;
    let mut acked: BTreeSet<u64> = BTreeSet::new();
    let mut before: Vec<Record> = Vec::new();
    for round in 0..kills {
        // A fresh log every 25 kills keeps each log small enough to re-read every round.
        if round % 25 == 0 {
            let header = SessionHeader::new(format!("crash-{round}"), 1, None);
            path = Some(
                SessionWriter::create(home.path(), header, encoding)
                    .unwrap()
                    .path()
                    .to_path_buf(),
            );
            acked.clear();
            before.clear();
        }
        let log = path.clone().unwrap();
        let ack = home.path().join("acks");
        std::fs::write(&ack, b"").unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &support::test_path(module_path!(), "crash_writer_child"),
            ])
            .args(["--ignored", "--nocapture"])
            .env("DSH_CRASH_LOG", &log)
            .env("DSH_CRASH_ACK", &ack)
            .env(
                "DSH_CRASH_SEED",
                (seed * 100_000 + round as u64 + 1).to_string(),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill at a random moment: sometimes before the first append, mostly mid-stream.
        std::thread::sleep(Duration::from_micros(rng.below(40_000) as u64));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "the child never ends by itself");
        figures.kills += 1;
        // The killed writer is gone for good: let its torn tail look settled, as it would by the
        // time anyone resumed the session (a tail younger than the settling time is never cut).
        std::fs::File::options()
            .write(true)
            .open(&log)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - Duration::from_secs(60))
            .unwrap();

        let acks: Vec<u64> = std::fs::read_to_string(&ack)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        acked.extend(&acks);
        figures.acknowledged += acks.len();

        // 1. The log opens (a torn tail is not an error).
        let (scan, records) =
            read_log(&log).unwrap_or_else(|e| panic!("{encoding:?} round {round}: {e}"));
        let file_len = std::fs::metadata(&log).unwrap().len();
        if file_len > scan.valid_len {
            figures.cut_mid_batch += 1;
        }
        let marker = log.with_file_name(format!(
            ".{}.pending",
            log.file_name().unwrap().to_string_lossy()
        ));
        if marker.exists() {
            figures.pending_markers += 1;
        }
        // The conversation-only reader (skimming) agrees on what is valid.
        let lean = read_conversation_surface_file(&log).unwrap();
        assert_eq!(lean.captured_through_seq, scan.last_seq(), "round {round}");
        // 2. Earlier rounds' records are untouched (only a torn tail is ever cut).
        assert!(
            records.starts_with(&before),
            "{encoding:?} round {round}: earlier batches changed"
        );
        // 3. No half batch: every batch seen is complete.
        let mut seen: BTreeMap<u64, (usize, BTreeSet<usize>)> = BTreeMap::new();
        for record in &records {
            for (batch, k, n) in markers_of(record) {
                let entry = seen.entry(batch).or_insert((n, BTreeSet::new()));
                assert_eq!(entry.0, n);
                entry.1.insert(k);
            }
        }
        for (batch, (n, ks)) in &seen {
            assert_eq!(
                ks.len(),
                *n,
                "{encoding:?} round {round}: batch {batch} is half visible ({ks:?} of {n})"
            );
        }
        // 4. Nothing acknowledged is lost.
        for batch in &acked {
            assert!(
                seen.contains_key(batch),
                "{encoding:?} round {round}: acknowledged batch {batch} lost"
            );
        }
        before = records;
    }
    figures
}

#[test]
fn sigkill_at_random_points_loses_nothing_acknowledged() {
    let kills: usize = std::env::var("DSH_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let started = Instant::now();
    for (i, encoding) in [Encoding::Plain, Encoding::Zstd].into_iter().enumerate() {
        let figures = crash_loop(encoding, kills / 2, 7 + i as u64);
        println!(
            "{encoding:?}: {} kills, {} batches acknowledged (all present), {} kills left a \
             batch cut mid-write ({} hidden by a pending marker); no half batch seen",
            figures.kills, figures.acknowledged, figures.cut_mid_batch, figures.pending_markers
        );
        assert!(figures.acknowledged > 0, "the children got to append");
    }
    println!("crash loop: {kills} kills in {:.1?}", started.elapsed());
}
