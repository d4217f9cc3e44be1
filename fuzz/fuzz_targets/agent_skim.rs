//! The walking readers of other agents' records agree with serde: a Claude Code line reads as
//! the same record and message walked or decoded (also when the walk itself finds where the
//! line ends, in the rest of a file), a Codex line as the same envelope (the same when the
//! walk finds where the line ends), and a
//! payload the walk passes over as none of a reader's types is one serde rejects or reads as
//! another type.
#![no_main]

use dsh_session_references::session::external::{claude, codex_record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (walked, decoded) = claude::record::differential::both(data);
    assert_eq!(walked, decoded, "Claude Code record");
    // Read as the rest of a mapped file: up to its first newline, as serde reads that line.
    if let Some((walked, len)) = claude::record::differential::line_in(data) {
        let end = data.iter().position(|&b| b == b'\n');
        assert_eq!(Some(len), end, "Claude Code line's end");
        let (_, decoded) = claude::record::differential::both(&data[..len]);
        assert_eq!(Some(walked), decoded, "Claude Code record to its line's end");
    }
    let (walked, decoded) = codex_record::differential::both(data);
    assert_eq!(walked, decoded, "Codex envelope");
    if let Some((walked, len)) = codex_record::differential::line_in(data) {
        let end = data.iter().position(|&b| b == b'\n');
        assert_eq!(Some(len), end, "Codex line's end");
        let (_, decoded) = codex_record::differential::both(&data[..len]);
        assert_eq!(Some(walked), decoded, "Codex envelope to its line's end");
    }
    for kinds in [&["message"][..], &["user_message", "thread_rolled_back"][..]] {
        let (dropped, serde_kind) = codex_record::differential::payload_kind(data, kinds);
        if dropped {
            assert!(
                serde_kind.map_or(true, |k| !k.as_deref().is_some_and(|k| kinds.contains(&k))),
                "a payload of a wanted type was passed over"
            );
        }
    }
});
