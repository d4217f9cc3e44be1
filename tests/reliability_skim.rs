//! The skimming reader against the serde reader, on real and generated logs mutated at random.
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

mod support;

use support::Rng;

use dsh_session_references::session::reader::{
    resume_scan, scan_log, scan_reader, LogScan, RecordSink,
};
use dsh_session_references::session::skim::{skim, Envelope};
use dsh_session_references::session::{Encoding, Record};
use std::path::Path;
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

/// One random edit.
fn mutate(bytes: &mut Vec<u8>, rng: &mut Rng) {
    if bytes.is_empty() {
        bytes.extend_from_slice(TOKENS[rng.below(TOKENS.len())]);
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(7) {
        0 => bytes[at] ^= 1 << rng.below(8),
        1 => bytes.truncate(at),
        2 => {
            let token = TOKENS[rng.below(TOKENS.len())];
            bytes.splice(at..at, token.iter().copied());
        }
        3 => {
            let end = (at + 1 + rng.below(16)).min(bytes.len());
            bytes.drain(at..end);
        }
        4 => {
            // Duplicate a line (a seq gap, or a repeated batch).
            let start = bytes[..at]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1);
            let end = bytes[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |p| at + p + 1);
            let line = bytes[start..end].to_vec();
            bytes.splice(end..end, line);
        }
        5 => {
            let digit = b'0' + rng.below(10) as u8;
            if bytes[at].is_ascii_digit() {
                bytes[at] = digit;
            }
        }
        _ => bytes[at] = TOKENS[rng.below(TOKENS.len())][0],
    }
}

/// Plain logs to start from: every fixture, plus a generated one with packed rows, compactions
/// and tool output.
fn corpus() -> Vec<Vec<u8>> {
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
}

#[path = "../benches/support/gen.rs"]
mod gen;

fn run(cases: usize, budget: Duration, seed: u64) -> (usize, usize) {
    let corpus = corpus();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut done = 0;
    let mut skimmed = 0;
    while done < cases && started.elapsed() < budget {
        let mut bytes = corpus[rng.below(corpus.len())].clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut bytes, &mut rng);
        }
        skimmed += check(&bytes, Encoding::Plain);
        if done.is_multiple_of(4) && !bytes.is_empty() {
            check_resume(
                &bytes,
                Encoding::Plain,
                rng.below(bytes.len() + 1),
                dir.path(),
            );
        }
        // The same content as zstd frames (header alone, then 1–3 lines per frame).
        if bytes.first() == Some(&b'{') && bytes.contains(&b'\n') {
            let zstd = support::to_zstd_frames(&bytes, 1 + rng.below(3));
            skimmed += check(&zstd, Encoding::Zstd);
            if done % 4 == 1 {
                check_resume(&zstd, Encoding::Zstd, rng.below(zstd.len() + 1), dir.path());
            }
            // And damage to the frames themselves.
            let mut damaged = zstd.clone();
            mutate(&mut damaged, &mut rng);
            check(&damaged, Encoding::Zstd);
        }
        done += 1;
    }
    (done, skimmed)
}

#[test]
fn unmutated_logs_skim_and_agree() {
    for bytes in corpus() {
        check(&bytes, Encoding::Plain);
        check(&support::to_zstd_frames(&bytes, 2), Encoding::Zstd);
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

#[test]
fn skim_and_serde_agree_on_mutated_logs() {
    let (cases, skimmed) = run(3_000, Duration::from_secs(60), 1);
    println!("{cases} mutated logs, {skimmed} records skimmed, readers agreed on all");
    assert!(skimmed > 0);
}

#[test]
#[ignore = "long randomized run: DSH_FUZZ_SECS=600 cargo test --release --test reliability_skim -- --ignored"]
fn fuzz_skim_differential() {
    let secs = std::env::var("DSH_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed = std::env::var("DSH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let (cases, skimmed) = run(usize::MAX, Duration::from_secs(secs), seed);
    println!("{cases} mutated logs in {secs}s, {skimmed} records skimmed, readers agreed on all");
}
