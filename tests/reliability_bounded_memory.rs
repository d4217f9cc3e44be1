//! Telling a torn tail from corruption must not hold the rest of the log in memory: a defect
//! near the start of a huge log used to read everything after it into one buffer.
//!
//! The logs here are generated lazily by a `Read` (nothing on disk), and a counting global
//! allocator records the peak of live heap bytes while one scan runs. The file is a test binary
//! of its own: a global allocator counts the whole process, so no other group's tests may share
//! it (and its own tests take turns through `SERIAL`).
#![allow(unsafe_code)] // The counting global allocator.

mod support;

use dsh_session_references::session::reader::{scan_reader, Encoding, MAX_BATCH_BYTES};
use dsh_session_references::session::SessionError;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{LIVE, PEAK};

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

/// Peaks are process-wide: one measurement at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Bytes above the live heap at the start that `f` needed at its peak.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

/// A prefix, then `filler` repeated until `total` bytes, then `suffix`.
struct Lazy {
    prefix: Vec<u8>,
    filler: Vec<u8>,
    suffix: Vec<u8>,
    total: u64,
    pos: u64,
}

impl Read for Lazy {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let suffix_at = self.total - self.suffix.len() as u64;
        let (source, at) = if self.pos < self.prefix.len() as u64 {
            (&self.prefix[..], self.pos as usize)
        } else if self.pos >= suffix_at {
            (&self.suffix[..], (self.pos - suffix_at) as usize)
        } else {
            let i = (self.pos - self.prefix.len() as u64) % self.filler.len() as u64;
            let until_suffix = (suffix_at - self.pos) as usize;
            let piece = &self.filler[i as usize..];
            (&piece[..piece.len().min(until_suffix)], 0)
        };
        let n = (source.len() - at).min(buf.len());
        buf[..n].copy_from_slice(&source[at..at + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

const HEADER: &str = "{\"type\":\"session\",\"version\":0,\"id\":\"big\",\"createdAt\":1}\n";

fn event(seq: u64, kind: &str, data: &str) -> String {
    format!("{{\"type\":\"{kind}\",\"seq\":{seq},\"time\":1,\"data\":{data}}}\n")
}

fn scan(log: Lazy) -> Result<u64, SessionError> {
    let total = log.total;
    scan_reader(
        Path::new("big.jsonl"),
        log,
        Encoding::Plain,
        total,
        &mut |_| Ok(()),
    )
    .map(|s| s.valid_len)
}

const MIB: usize = 1 << 20;

#[test]
fn a_bad_line_near_the_start_of_a_big_log_is_decided_in_bounded_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let total = 48 * MIB as u64;
    let mut prefix = HEADER.as_bytes().to_vec();
    prefix.extend(b"{\"type\":\"user/mes this line is torn\n");
    // Many lines of another type after it (the seq does not matter: only a turn/end counts).
    let filler = event(
        7,
        "tool/result",
        &format!("{{\"output\":\"{}\"}}", "o".repeat(900)),
    );
    let make = |suffix: &str| Lazy {
        prefix: prefix.clone(),
        filler: filler.clone().into_bytes(),
        suffix: suffix.as_bytes().to_vec(),
        total,
        pos: 0,
    };
    // No turn/end anywhere after the defect: a torn tail.
    let (scanned, peak) = peak_during(|| scan(make("\n")));
    assert_eq!(scanned.unwrap(), HEADER.len() as u64);
    assert!(
        peak < 8 * MIB,
        "torn tail: peak {peak} bytes for a {total}-byte log"
    );
    // A turn/end at the very end: corruption, found in bounded memory too.
    let end = format!(
        "\n{}",
        event(9, "turn/end", "{\"turn\":1,\"reason\":\"stop\"}")
    );
    let (scanned, peak) = peak_during(|| scan(make(&end)));
    let err = scanned.unwrap_err().to_string();
    assert!(err.contains("big.jsonl") && err.contains("line 2"), "{err}");
    assert!(
        peak < 8 * MIB,
        "corruption: peak {peak} bytes for a {total}-byte log"
    );
}

#[test]
fn an_endless_line_is_consumed_in_bounded_chunks() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // One line without a newline, longer than any batch may be.
    let total = (MAX_BATCH_BYTES + 64 * MIB) as u64;
    let log = Lazy {
        prefix: HEADER.as_bytes().to_vec(),
        filler: vec![b'x'; 64 << 10],
        suffix: b"x".to_vec(),
        total,
        pos: 0,
    };
    let (scanned, peak) = peak_during(|| scan(log));
    assert_eq!(scanned.unwrap(), HEADER.len() as u64);
    // Not a JSON object: a defect at once, and the rest of the line is skimmed, not kept.
    assert!(peak < 8 * MIB, "peak {peak} bytes for a {total}-byte line");
    // A line that is a JSON object may be buffered up to one batch; what follows is not kept.
    let log = Lazy {
        prefix: format!("{HEADER}{{\"type\":\"tool/result\",\"data\":\"").into_bytes(),
        filler: vec![b'x'; 64 << 10],
        suffix: b"x".to_vec(),
        total,
        pos: 0,
    };
    let (scanned, peak) = peak_during(|| scan(log));
    assert_eq!(scanned.unwrap(), HEADER.len() as u64);
    assert!(
        peak < MAX_BATCH_BYTES + 8 * MIB,
        "peak {peak} bytes for a {total}-byte line"
    );
}

#[test]
fn zstd_frames_after_a_bad_frame_are_decided_in_bounded_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut log = zstd::bulk::compress(HEADER.as_bytes(), 3).unwrap();
    log.extend(b"\x28\xb5\x2f\xfd not a frame at all");
    // Many frames of incompressible-ish tool output, then a turn/end frame.
    let mut rng = support::TestRng::new(1);
    let mut frames = Vec::new();
    while frames.len() < 24 * MIB {
        let text: String = (0..60_000)
            .map(|_| char::from(b'a' + (rng.next_u64() >> 59) as u8))
            .collect();
        let line = event(3, "tool/result", &format!("{{\"output\":\"{text}\"}}"));
        frames.extend(zstd::bulk::compress(line.as_bytes(), 1).unwrap());
    }
    log.extend(&frames);
    let tail = event(9, "turn/end", "{\"turn\":1,\"reason\":\"stop\"}");
    log.extend(zstd::bulk::compress(tail.as_bytes(), 3).unwrap());
    let len = log.len() as u64;
    let (scanned, peak) = peak_during(|| {
        scan_reader(
            Path::new("big.jsonl.zstd"),
            &log[..],
            Encoding::Zstd,
            len,
            &mut |_| Ok(()),
        )
    });
    let err = scanned.unwrap_err().to_string();
    assert!(err.contains("line 2"), "{err}");
    assert!(
        peak < 16 * MIB,
        "peak {peak} bytes for {len} compressed bytes"
    );
}
