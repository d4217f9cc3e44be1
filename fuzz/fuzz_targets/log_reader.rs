//! The log reader on arbitrary bytes, plain and zstd: never panics, and the skimming scan (what
//! `prepare` uses) ends exactly like the decoding scan — same records, same valid length and torn
//! tail, or the same error.
#![no_main]

use dsh_session_references::session::reader::{scan_reader, RecordSink};
use dsh_session_references::session::reader::Envelope;
use dsh_session_references::session::{Encoding, Record};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

struct Seen {
    skim: bool,
    records: Vec<(String, u64, u64)>,
}

impl RecordSink for Seen {
    fn accept(&mut self, record: Record) -> dsh_session_references::session::error::Result<()> {
        let seen = (
            record.kind().to_string(),
            record.first_seq(),
            record.seq_count(),
        );
        self.records.push(seen);
        Ok(())
    }
    fn wants(&self, _kind: &str) -> bool {
        !self.skim
    }
    fn accept_envelope(
        &mut self,
        e: Envelope<'_>,
    ) -> dsh_session_references::session::error::Result<()> {
        self.records
            .push((e.kind.to_string(), e.first_seq, e.seq_count));
        Ok(())
    }
}

fn scan(bytes: &[u8], encoding: Encoding, skim: bool) -> (Result<String, String>, Seen) {
    let mut seen = Seen {
        skim,
        records: Vec::new(),
    };
    let result = scan_reader(
        Path::new("fuzz"),
        bytes,
        encoding,
        bytes.len() as u64,
        &mut seen,
    )
    .map(|scan| format!("{scan:?}"))
    .map_err(|e| e.to_string());
    (result, seen)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    let (bytes, encoding) = match mode % 3 {
        0 => (bytes.to_vec(), Encoding::Plain),
        1 => (bytes.to_vec(), Encoding::Zstd),
        // Well-formed frames around arbitrary lines: reach the record parser through zstd.
        _ => {
            let mut out = Vec::new();
            for chunk in bytes.split_inclusive(|&b| b == b'\n') {
                out.extend(zstd::bulk::compress(chunk, 1).unwrap());
            }
            (out, Encoding::Zstd)
        }
    };
    let (full, full_seen) = scan(&bytes, encoding, false);
    let (lean, lean_seen) = scan(&bytes, encoding, true);
    assert_eq!(full, lean);
    if full.is_ok() {
        assert_eq!(full_seen.records, lean_seen.records);
    }
});
