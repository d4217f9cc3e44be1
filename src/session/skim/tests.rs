//! The skimmer's unit tests: every line it accepts is decoded by serde too, with the same
//! envelope.
//!
//! Purpose: the rooms of `skim` (the grammar in `cursor.rs`, the packed rows of `packed.rs`, the
//! block loop of `string_body.rs`) are checked here through the public entry points, on
//! canonical lines, on lines that must fall back, and on generated packed rows and string bodies
//! shifted across every alignment of the 16- and 64-byte blocks.
//! Invariant (what is tested): soundness, whatever [`skim`] accepts serde accepts with the same
//! seqs, kind, time, surface op and provenance ([`agrees`]); and enough of the generated lines
//! are accepted for the fast paths to be exercised at all.
//! Proof: these tests (`cargo test --lib skim`), with `tests/session/reliability_skim.rs` (the
//! differential runs against serde) and the fuzz target `fuzz/fuzz_targets/skim_vs_serde.rs`.

use super::*;
use crate::session::Record;
use crate::test_rng::TestRng;

fn agrees(line: &str) -> Option<Envelope<'_>> {
    let skimmed = skim(line.as_bytes());
    if let Some(envelope) = &skimmed {
        let record: Record = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("skim accepted what serde rejects: {line}: {e}"));
        assert_eq!(record.first_seq(), envelope.first_seq, "{line}");
        assert_eq!(record.seq_count(), envelope.seq_count, "{line}");
        assert_eq!(record.kind(), envelope.kind, "{line}");
        if let Record::Event(event) = &record {
            assert_eq!(event.time, envelope.time);
            assert_eq!(event.surface_op, envelope.surface_op);
            assert_eq!(event.source_event_seqs, envelope.source_event_seqs);
        }
    }
    skimmed
}

#[test]
fn canonical_lines_are_skimmed() {
    let e = agrees(r#"{"type":"tool/result","seq":15,"time":0,"data":{"turn":1,"content":[{"type":"text","text":"a\nb \"q\" \u00e9 é"}],"isError":false},"sourceEventSeqs":[13],"surfaceOp":"append"}"#).unwrap();
    assert_eq!((e.kind, e.first_seq, e.seq_count), ("tool/result", 15, 1));
    assert_eq!(e.surface_op, Some(SurfaceOp::Append));
    let e = agrees(r#"{"type":"user/message","seq":3,"time":-5,"data":{},"surfaceOp":{"op":"replace","start":0,"end":2}}"#).unwrap();
    assert_eq!(e.surface_op, Some(SurfaceOp::Replace { start: 0, end: 2 }));
    let e = agrees(r#"{"type":"text-chunks","seq0":5,"time0":17,"data":{"turn":1,"step":1,"index":0,"dt":[1,-2],"texts":["a","b","c"]}}"#).unwrap();
    assert_eq!((e.first_seq, e.seq_count, e.packed), (5, 3, true));
    let e = agrees(r#"{"type":"tool-call-chunks","seq0":0,"time0":1,"data":{"id":"c","name":null,"args":["{","}"],"texts":null}}  "#).unwrap();
    assert_eq!(e.seq_count, 2);
    assert!(
        agrees(r#"{"type":"turn/end","seq":9,"time":1,"data":[1,2.5e-3,true,null,{"a":[]}]}"#)
            .is_some()
    );
    // Key order is free (the reader only skims lines that start with `type`).
    assert!(agrees(r#"{"seq":1, "type":"turn/end","time":1,"data":{}}"#).is_some());
}

#[test]
fn anything_unusual_falls_back() {
    for line in [
        r#"{"type":"turn/end","seq":1,"time":1,"data":{},"extra":1}"#.to_string(),
        r#"{"type":"turn/end","seq":1.0,"time":1,"data":{}}"#.into(),
        r#"{"type":"turn/end","seq":-1,"time":1,"data":{}}"#.into(),
        r#"{"type":"turn/end","seq":01,"time":1,"data":{}}"#.into(),
        r#"{"type":"turn/end","seq":1,"time":1,"data":{},}"#.into(),
        r#"{"type":"turn/end","seq":1,"time":1,"data":{"a":1,}}"#.into(),
        r#"{"type":"turn/end","seq":1,"time":1,"data":"\ud800"}"#.into(),
        r#"{"type":"turn/end","seq":1,"time":1,"data":"\x"}"#.into(),
        "{\"type\":\"turn/end\",\"seq\":1,\"time\":1,\"data\":\"\t\"}".into(),
        r#"{"type":"tool/result","seq":1,"time":1,"data":{}}"#.into(),
        r#"{"type":"turn/end","seq":1,"seq":2,"time":1,"data":{}}"#.into(),
        r#"{"type":"turn/end","seq":1,"time":1,"data":{}} x"#.into(),
        r#"{"type":"turn/end","seq":1,"time":1,"data":{}"#.into(),
        r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"texts":[1]}}"#.into(),
        r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"args":["a"]}}"#.into(),
        r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"texts":["a"],"texts":["b"]}}"#.into(),
        format!(
            r#"{{"type":"text-chunks","seq0":1,"time0":1,"data":{{"turn":{}1{},"texts":[]}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        ),
        r#"{"type":"turn/end","seq":18446744073709551616,"time":1,"data":{}}"#.into(),
        // Found by the long differential run: serde reads `-0` as a float.
        r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"dt":[-0],"texts":["a","b"]}}"#.into(),
        r#"{"type":"turn/end","seq":1,"time":-0,"data":{}}"#.into(),
        // Found by the `skim_vs_serde` fuzz target: a number out of f64 range in a packed
        // row's unknown field (decoded by serde, unlike an event's raw `data`).
        r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"dp":[2E22220],"texts":["a"]}}"#.into(),
        r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":0.5,"texts":["a"]}}"#.into(),
    ] {
        assert!(agrees(&line).is_none(), "{line}");
    }
    // Deep nesting inside `data` is fine for serde's raw values, and for skim.
    let deep = format!(
        r#"{{"type":"turn/end","seq":1,"time":1,"data":{}{}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    assert!(agrees(&deep).is_some());
    assert!(skim(b"{\"type\":\"turn/end\",\"seq\":1,\"time\":1,\"data\":\"\xff\"}").is_none());
}

/// The sixteen-byte integer runs and the in-scan string separators, at every alignment:
/// packed rows built from pieces that are valid, invalid or merely unusual, each compared
/// with serde through `agrees`.
#[test]
fn packed_arrays_agree_with_serde_at_every_alignment() {
    let ints = [
        "0",
        "7",
        "10",
        "05",
        "-3",
        "-0",
        "123456789012345",
        "1234567890123456789",
        "99999999999999999999",
        "1.5",
        "2e3",
        " 4",
        "4 ",
        "",
        "00",
    ];
    let texts = [
        r#""a""#,
        r#""""#,
        r#""\"""#,
        r#""x\\""#,
        r#""\u00e9""#,
        r#""\ud800""#,
        r#""é""#,
        r#""tab\t""#,
        "\"raw\u{1}\"",
        r#""q\",\"""#,
        r#" "s" "#,
        "1",
        r#""a","#,
        r#"x""#,
    ];
    let mut rng = TestRng::new(3);
    let mut accepted = 0;
    for round in 0..40_000 {
        let pick = |rng: &mut TestRng, pool: &[&str], valid: usize| {
            (0..rng.below(40))
                .map(|_| match rng.below(10) {
                    0 => pool[rng.below(pool.len())],
                    _ => pool[rng.below(valid)],
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        let dt = pick(&mut rng, &ints, 3);
        let pieces = pick(&mut rng, &texts, 3);
        // Shift the arrays against the sixteen- and sixty-four-byte blocks.
        let pad = "x".repeat(round % 67);
        let line = format!(
            r#"{{"type":"text-chunks","seq0":1,"time0":2,"data":{{"turn":"{pad}","dt":[{dt}],"texts":[{pieces}]}}}}"#
        );
        accepted += usize::from(agrees(&line).is_some());
    }
    assert!(accepted > 5_000, "only {accepted} rows were skimmed");
    // Specific shapes at a block edge.
    for dt in ["1,,2", "1,01", "01,1", "1,2,3,4,5,6,7,8,9,10,11,012"] {
        let line = format!(
            r#"{{"type":"text-chunks","seq0":1,"time0":2,"data":{{"dt":[{dt}],"texts":["a"]}}}}"#
        );
        assert!(agrees(&line).is_none(), "{line}");
    }
}

/// The block step's shortcut at every alignment: strings of escapes, runs of backslashes,
/// quotes, controls and non-ASCII bytes around a 64-byte edge, each skimmed and compared with
/// serde.
#[test]
fn string_bodies_agree_with_serde_at_every_alignment() {
    let pieces = [
        "a", "\\n", "\\\"", "\\\\", "\\t", "\\u00e9", "\\ud800", "é", "\\x", "\\", "\"", "\u{1}",
        "n", " ", "\\r", "\\/", "\\b", "\\f", "t", "r", "\\\\\\\\",
    ];
    // The escapes the block step decides from its masks alone, and runs of backslashes.
    let common = ["\\n", "\\\"", "\\t", "\\r", "\\\\", "\\", "\""];
    let mut rng = TestRng::new(5);
    let mut accepted = 0;
    for round in 0..40_000 {
        let text: String = (0..rng.below(60))
            .map(|_| match rng.below(8) {
                0 => pieces[rng.below(pieces.len())],
                1 | 2 => pieces[1 + rng.below(2)],
                3 if round % 2 == 1 => common[rng.below(common.len())],
                _ => "abc",
            })
            .collect();
        let pad = "x".repeat(round % 131);
        let line = format!(
            r#"{{"type":"tool/result","seq":1,"time":2,"data":{{"k":"{pad}","t":"{text}"}},"surfaceOp":"append"}}"#
        );
        accepted += usize::from(agrees(&line).is_some());
    }
    assert!(accepted > 5_000, "only {accepted} lines were skimmed");
}

/// `peek_kind` reads the type of the canonical start only: an escape in it, or a space before
/// the key, is left to the full skim (or serde).
#[test]
fn peek_kind_reads_only_the_canonical_start() {
    assert_eq!(
        peek_kind(br#"{"type":"tool/result","seq":1"#),
        Some("tool/result")
    );
    assert_eq!(peek_kind(br#"{"type":"a\"b"}"#), None);
    assert_eq!(peek_kind(br#"{ "type":"a"}"#), None);
}
