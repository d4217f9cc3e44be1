//! The skimming reader against the serde reader, on real and generated logs mutated by
//! proptest's strategies (a disagreement shrinks to the fewest, simplest edits).
//!
//! `prepare` reads sources with a sink that does not want tool output or chunk rows decoded, so
//! the reader *skims* those lines (`session::skim`). Skimming must never change what a log means:
//! for any bytes, a scan that skims must end exactly like a scan that decodes everything — same
//! records (seqs, counts, types), same valid length and torn tail, or the same error. And a line
//! the skimmer accepts must be one serde accepts, with the same envelope.
//!
//! CI runs a few thousand mutated logs (`skim_and_serde_agree_on_mutated_logs`); the ignored
//! `fuzz_skim_differential` runs for `DSH_FUZZ_SECS` seconds (RELIABILITY.md has the figures).
//! The same check is the cargo-fuzz target `fuzz/fuzz_targets/log_reader.rs`.

use crate::support;
use crate::support::gen;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestRng as ProptestRng, TestRunner};

use dsh_session_references::session::reader::Envelope;
use dsh_session_references::session::reader::{
    resume_scan, scan_log, scan_reader, LogScan, RecordSink,
};
use dsh_session_references::session::skim;
use dsh_session_references::session::{Encoding, Record};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What a sink saw: (type, first seq, seq count, decoded?) per record.
#[derive(Default)]
struct Seen {
    skim: bool,
    records: Vec<(String, u64, u64)>,
    skimmed: usize,
}

impl RecordSink for Seen {
    fn accept(&mut self, record: Record) -> dsh_session_references::session::error::Result<()> {
        self.records.push((
            record.kind().to_string(),
            record.first_seq(),
            record.seq_count(),
        ));
        Ok(())
    }
    fn wants(&self, _kind: &str) -> bool {
        !self.skim
    }
    fn accept_envelope(
        &mut self,
        envelope: Envelope<'_>,
    ) -> dsh_session_references::session::error::Result<()> {
        self.skimmed += 1;
        self.records.push((
            envelope.kind.to_string(),
            envelope.first_seq,
            envelope.seq_count,
        ));
        Ok(())
    }
}

fn scan(bytes: &[u8], encoding: Encoding, skim: bool) -> (Result<LogScan, String>, Seen) {
    let mut seen = Seen {
        skim,
        ..Seen::default()
    };
    let result = scan_reader(
        Path::new("mem"),
        bytes,
        encoding,
        bytes.len() as u64,
        &mut seen,
    )
    .map_err(|e| e.to_string());
    (result, seen)
}

/// Both readers agree on `bytes`; returns how many records were skimmed.
fn check(bytes: &[u8], encoding: Encoding) -> usize {
    let (full, full_seen) = scan(bytes, encoding, false);
    let (lean, lean_seen) = scan(bytes, encoding, true);
    assert_eq!(full, lean, "{encoding:?}: scans differ");
    if full.is_ok() {
        assert_eq!(full_seen.records, lean_seen.records, "{encoding:?}");
    }
    if encoding == Encoding::Plain {
        for line in bytes.split(|&b| b == b'\n') {
            if let Some(envelope) = skim(line) {
                let record: Record = serde_json::from_slice(line).unwrap_or_else(|e| {
                    panic!(
                        "skim accepted a line serde rejects ({e}): {}",
                        String::from_utf8_lossy(line)
                    )
                });
                assert_eq!(
                    (record.kind(), record.first_seq(), record.seq_count()),
                    (envelope.kind, envelope.first_seq, envelope.seq_count)
                );
                if let Record::Event(event) = &record {
                    assert_eq!(event.surface_op, envelope.surface_op);
                    assert_eq!(event.time, envelope.time);
                    assert_eq!(event.source_event_seqs, envelope.source_event_seqs);
                }
            }
        }
    }
    lean_seen.skimmed
}

/// A scan of the log cut at `cut`, resumed over the whole log, ends like a scan of the whole
/// log (the store's conversation cache relies on this).
fn check_resume(bytes: &[u8], encoding: Encoding, cut: usize, dir: &Path) {
    let name = match encoding {
        Encoding::Plain => "session.jsonl",
        Encoding::Zstd => "session.jsonl.zstd",
    };
    let path = dir.join(name);
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let mut prefix_seen = Seen {
        skim: true,
        ..Seen::default()
    };
    let Ok(prefix) = scan_log(&path, &mut prefix_seen) else {
        return;
    };
    if prefix.missing_final_newline {
        // Not resumable by design (see `resume_scan`).
        assert!(resume_scan(&path, &prefix, &mut Seen::default()).is_err());
        return;
    }
    std::fs::write(&path, bytes).unwrap();
    let mut resumed_seen = Seen {
        skim: true,
        ..Seen::default()
    };
    let resumed = resume_scan(&path, &prefix, &mut resumed_seen).map_err(|e| e.to_string());
    let (full, full_seen) = scan(bytes, encoding, true);
    let full = full.map_err(|e| e.replace("mem", &path.display().to_string()));
    assert_eq!(
        resumed.map(|s| (s.valid_len, s.next_seq, s.valid_lines, s.torn_tail)),
        full.map(|s| (s.valid_len, s.next_seq, s.valid_lines, s.torn_tail)),
        "{encoding:?} cut at {cut}"
    );
    let mut all = prefix_seen.records;
    all.extend(resumed_seen.records);
    if all.len() == full_seen.records.len() {
        assert_eq!(all, full_seen.records);
    }
}

const TOKENS: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b" ",
    b"\t",
    b"\r",
    b"\0",
    b"\x1b",
    b"\xff",
    b"\xc3",
    b"\xe2\x80\xae",
    b"\\u0000",
    b"\\ud800",
    b"\\u",
    b"0",
    b"-",
    b"1e5",
    b".5",
    b"null",
    b"true",
    b"\"seq\":",
    b"\"type\":\"turn/end\"",
    b"\"surfaceOp\":\"append\"",
    b"99999999999999999999",
    b"\"texts\":[\"a\"]",
];

/// One edit of a log, drawn by proptest (so a failing case shrinks to the fewest, simplest
/// edits): where it lands is an [`Index`] into the bytes, the rest are its parameters.
#[derive(Debug, Clone)]
enum Edit {
    FlipBit(Index, u8),
    Truncate(Index),
    InsertToken(Index, usize),
    /// Remove 1–16 bytes.
    Remove(Index, usize),
    /// Duplicate the line around the index (a seq gap, or a repeated batch).
    DuplicateLine(Index),
    /// Replace a digit by another.
    Digit(Index, u8),
    /// Overwrite a byte with a token's first byte.
    TokenByte(Index, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let token = 0..TOKENS.len();
    prop_oneof![
        (any::<Index>(), 0u8..8).prop_map(|(at, bit)| Edit::FlipBit(at, bit)),
        any::<Index>().prop_map(Edit::Truncate),
        (any::<Index>(), token.clone()).prop_map(|(at, t)| Edit::InsertToken(at, t)),
        (any::<Index>(), 1usize..=16).prop_map(|(at, n)| Edit::Remove(at, n)),
        any::<Index>().prop_map(Edit::DuplicateLine),
        (any::<Index>(), 0u8..10).prop_map(|(at, d)| Edit::Digit(at, d)),
        (any::<Index>(), token).prop_map(|(at, t)| Edit::TokenByte(at, t)),
    ]
}

/// Applies one edit (an empty log gets a token, whatever the edit).
fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    if bytes.is_empty() {
        let token = match edit {
            Edit::InsertToken(_, t) | Edit::TokenByte(_, t) => *t,
            _ => 0,
        };
        bytes.extend_from_slice(TOKENS[token]);
        return;
    }
    let len = bytes.len();
    match edit {
        Edit::FlipBit(at, bit) => bytes[at.index(len)] ^= 1 << bit,
        Edit::Truncate(at) => bytes.truncate(at.index(len)),
        Edit::InsertToken(at, t) => {
            let at = at.index(len);
            bytes.splice(at..at, TOKENS[*t].iter().copied());
        }
        Edit::Remove(at, n) => {
            let at = at.index(len);
            bytes.drain(at..(at + n).min(len));
        }
        Edit::DuplicateLine(at) => {
            let at = at.index(len);
            let start = bytes[..at]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1);
            let end = bytes[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(len, |p| at + p + 1);
            let line = bytes[start..end].to_vec();
            bytes.splice(end..end, line);
        }
        Edit::Digit(at, d) => {
            let at = at.index(len);
            if bytes[at].is_ascii_digit() {
                bytes[at] = b'0' + d;
            }
        }
        Edit::TokenByte(at, t) => bytes[at.index(len)] = TOKENS[*t][0],
    }
}

/// Plain logs to start from: every fixture, plus a generated one with packed rows, compactions
/// and tool output. Built once per test binary.
fn corpus() -> &'static [Vec<u8>] {
    static CORPUS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut logs: Vec<Vec<u8>> = support::fixture_logs()
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        let home = tempfile::tempdir().unwrap();
        let mut spec = gen::BigLogSpec::new(60_000, Encoding::Plain);
        spec.tool_output = 2_000;
        spec.chunk_pieces = 20;
        spec.compact_at = vec![0.3, 0.6];
        let log = gen::generate_big_log(home.path(), "generated", Some("/w"), &spec).unwrap();
        logs.push(std::fs::read(log.path).unwrap());
        logs
    })
}

/// One case: a corpus log, 1–4 edits, and how its zstd form is framed, cut and damaged.
#[derive(Debug, Clone)]
struct Case {
    log: Index,
    edits: Vec<Edit>,
    /// Resume the plain log from a cut at `cut` (about one case in four).
    resume_plain: bool,
    /// Lines per zstd frame (after the header's own frame).
    frame_lines: usize,
    /// Resume the zstd log from a cut at `cut` (about one case in four).
    resume_zstd: bool,
    cut: Index,
    /// An edit of the zstd frames themselves.
    frame_damage: Edit,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<Index>(),
        proptest::collection::vec(edit(), 1..=4),
        proptest::bool::weighted(0.25),
        1usize..=3,
        proptest::bool::weighted(0.25),
        any::<Index>(),
        edit(),
    )
        .prop_map(
            |(log, edits, resume_plain, frame_lines, resume_zstd, cut, frame_damage)| Case {
                log,
                edits,
                resume_plain,
                frame_lines,
                resume_zstd,
                cut,
                frame_damage,
            },
        )
}

/// Checks one case; returns how many records were skimmed.
fn check_case(case: &Case, dir: &Path) -> usize {
    let corpus = corpus();
    let mut bytes = corpus[case.log.index(corpus.len())].clone();
    for edit in &case.edits {
        apply(&mut bytes, edit);
    }
    let mut skimmed = check(&bytes, Encoding::Plain);
    if case.resume_plain && !bytes.is_empty() {
        check_resume(
            &bytes,
            Encoding::Plain,
            case.cut.index(bytes.len() + 1),
            dir,
        );
    }
    // The same content as zstd frames (header alone, then 1–3 lines per frame).
    if bytes.first() == Some(&b'{') && bytes.contains(&b'\n') {
        let zstd = support::to_zstd_frames(&bytes, case.frame_lines);
        skimmed += check(&zstd, Encoding::Zstd);
        if case.resume_zstd {
            check_resume(&zstd, Encoding::Zstd, case.cut.index(zstd.len() + 1), dir);
        }
        // And damage to the frames themselves.
        let mut damaged = zstd;
        apply(&mut damaged, &case.frame_damage);
        check(&damaged, Encoding::Zstd);
    }
    skimmed
}

/// Runs `cases` generated cases under `runner`; returns how many records were skimmed. A
/// disagreement panics inside `check`, which proptest shrinks to a minimal case and reports.
fn run(runner: &mut TestRunner) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let skimmed = AtomicUsize::new(0);
    let result = runner.run(&case(), |case| {
        skimmed.fetch_add(check_case(&case, dir.path()), Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    skimmed.into_inner()
}

#[test]
fn unmutated_logs_skim_and_agree() {
    for bytes in corpus() {
        check(bytes, Encoding::Plain);
        check(&support::to_zstd_frames(bytes, 2), Encoding::Zstd);
    }
}

/// Found by `fuzz_skim_differential` (seed 2): a packed row whose `dt` holds `-0`, which serde
/// reads as a float and rejects for an `i64`; the skimmer once took it for 0.
#[test]
fn regression_negative_zero_in_a_packed_row() {
    let log = concat!(
        r#"{"type":"session","version":0,"id":"z","createdAt":1,"delegationDepth":0}"#,
        "\n",
        r#"{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"dt":[-0],"texts":["a","b"]}}"#,
        "\n",
        r#"{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":"stop"}}"#,
        "\n",
    );
    check(log.as_bytes(), Encoding::Plain);
    check(&support::to_zstd_frames(log.as_bytes(), 1), Encoding::Zstd);
}

/// Found by the cargo-fuzz target `skim_vs_serde` (artifact crash-738c8c7c…): a packed row whose
/// unknown field holds a number out of `f64` range. serde decodes that field and rejects the
/// number; the skimmer once accepted the line.
#[test]
fn regression_out_of_range_number_in_a_packed_row() {
    let line = concat!(
        r#"{"type":"reasoning-chunks","seq0":6,"time0":1785052798221,"data":{"turn":1,"step":1,"#,
        r#""index":0,"dp":[170,30,0,0,0,30,1,2222222222222222E22220,0,28,0.0,0,29,30,0,30,0,30,0,"#,
        r#"0,0,30,0,0,0,0,9,30,-0,1],"texts":["Thewants"," mrite"," a"," single"," r","."]}}"#
    );
    assert!(skim(line.as_bytes()).is_none());
    let log = format!(
        "{}\n{line}\n",
        r#"{"type":"session","version":0,"id":"z","createdAt":1,"delegationDepth":0}"#
    );
    check(log.as_bytes(), Encoding::Plain);
}

/// Found by `fuzz_skim_differential` (seed 2) through the resume check: a plain log cut right
/// before the header's newline. The scan did not say its last line was unterminated, so a
/// resumed scan counted the newline as a line of its own (and a writer would have appended
/// right after the header).
#[test]
fn regression_header_without_its_newline() {
    let header = r#"{"type":"session","version":0,"id":"z","createdAt":1,"delegationDepth":0}"#;
    let log = format!(
        "{header}\n{}\n",
        r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":"stop"}}"#
    );
    let dir = tempfile::tempdir().unwrap();
    check_resume(log.as_bytes(), Encoding::Plain, header.len(), dir.path());
    let (scan, _) = scan(header.as_bytes(), Encoding::Plain, true);
    assert!(scan.unwrap().missing_final_newline);
}

/// CI's share: 3,000 generated cases (a failure prints the minimal case, and proptest's failure
/// persistence replays it first on the next run).
#[test]
fn skim_and_serde_agree_on_mutated_logs() {
    let config = Config {
        cases: 3_000,
        source_file: Some(file!()),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let skimmed = run(&mut runner);
    println!("3000 mutated logs, {skimmed} records skimmed, readers agreed on all");
    assert!(skimmed > 0);
}

#[test]
#[ignore = "long randomized run: DSH_FUZZ_SECS=600 cargo test --release --test session -- reliability_skim::fuzz --ignored"]
fn fuzz_skim_differential() {
    let secs = std::env::var("DSH_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed: u64 = std::env::var("DSH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let started = Instant::now();
    let (mut cases, mut skimmed) = (0u64, 0);
    // Rounds of 1,000 cases, each from its own seed (`DSH_FUZZ_SEED` and the round), until the
    // time is up.
    for round in 0u64.. {
        if started.elapsed() >= Duration::from_secs(secs) {
            break;
        }
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        key[8..16].copy_from_slice(&round.to_le_bytes());
        let rng = ProptestRng::from_seed(RngAlgorithm::ChaCha, &key);
        let mut runner = TestRunner::new_with_rng(Config::with_cases(1_000), rng);
        skimmed += run(&mut runner);
        cases += 1_000;
    }
    println!("{cases} mutated logs in {secs}s, {skimmed} records skimmed, readers agreed on all");
}
