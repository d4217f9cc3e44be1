//! Shared helpers for integration tests: the test data under `tests/data` and temporary homes.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

/// `tests/data/`: the conformance vectors and real logs the tests read (see its README).
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

pub fn fixture_dir() -> PathBuf {
    data_dir().join("fixtures/dsh-logs")
}

pub fn conformance_dir() -> PathBuf {
    data_dir().join("conformance")
}

/// Every fixture log, sorted by name.
pub fn fixture_logs() -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = fs::read_dir(fixture_dir())
        .expect("tests/data/fixtures/dsh-logs must exist")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    logs.sort();
    logs
}

pub fn fixture(name: &str) -> PathBuf {
    fixture_dir().join(name)
}

/// The lines of a plain log, newline included.
pub fn lines_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// Re-encodes a plain log as zstd: the header alone, then one frame per `batch` lines.
pub fn to_zstd_frames(plain: &[u8], batch: usize) -> Vec<u8> {
    let lines = lines_of(plain);
    let mut out = zstd::bulk::compress(&lines[0], 3).unwrap();
    for chunk in lines[1..].chunks(batch.max(1)) {
        out.extend(zstd::bulk::compress(&chunk.concat(), 3).unwrap());
    }
    out
}

/// Places a log at `<home>/sessions/<project>/<segment>/<file>`.
pub fn place_log(home: &Path, project: &str, segment: &str, file: &str, bytes: &[u8]) -> PathBuf {
    let dir = home.join("sessions").join(project).join(segment);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(file);
    fs::write(&path, bytes).unwrap();
    path
}

/// Rewrites the header id of a plain log (fixtures share placeholder ids).
pub fn with_header_id(plain: &[u8], id: &str) -> Vec<u8> {
    let mut lines = lines_of(plain);
    let mut header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&lines[0]).unwrap();
    header.insert("id".into(), id.into());
    let mut first = serde_json::to_vec(&header).unwrap();
    first.push(b'\n');
    lines[0] = first;
    lines.concat()
}

/// A small deterministic PRNG (SplitMix64): randomized tests replay from their seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
