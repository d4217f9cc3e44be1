//! The walking reader of Claude Code records against the serde reader: on every fixture line,
//! on those lines mutated byte by byte, on generated hostile records, and on whole
//! conversations projected both ways.
//!
//! `prepare` of a Claude Code session walks each record key by key and passes over tool
//! results, images and thinking without decoding them (`session::external::claude::record`);
//! anything the walk does not vouch for goes to serde. The walk must never change what a file
//! means: for any line, the record and the message the walk reads are exactly the ones serde
//! reads (or both reject the line), and a conversation projects to the same items, last line
//! and last activity. The same holds where the walk is given the rest of a mapped file and
//! finds where the line ends itself (`parse_line_in`): it must end the line at its first
//! newline and read it as serde reads that line. The runs are seeded (the same lines each time; a failure prints the line).
//! The same check is the cargo-fuzz target `fuzz/fuzz_targets/agent_skim.rs`.

use dsh_session_references::session::external::claude::record::differential::{
    both, conversation, conversation_in_rest, line_in, message_in_place, walked,
};
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures"),
        &mut out,
    );
    out.sort();
    out
}

fn is_claude(path: &Path) -> bool {
    let text = path.to_string_lossy();
    text.contains("claude") && !text.contains("subagents")
}

fn agree(line: &[u8]) -> bool {
    let (walked_record, serde_record) = both(line);
    assert_eq!(
        walked_record,
        serde_record,
        "the walk and serde disagree on {:?}",
        String::from_utf8_lossy(line)
    );
    for next in [&b""[..], br#"{"uuid":"next"}"#, b"\"\x01]"] {
        agree_in_rest(line, next);
    }
    serde_record.is_some()
}

/// The walk that finds where its line ends (as the reader of a mapped file offers it the rest
/// of the file, `parse_line_in`): given `line`, a newline and `next`, it reads the bytes up to
/// the first newline exactly as serde reads that line, and says where it ends; or it leaves
/// the line to the reader. (`line` may hold a newline of its own: a mutated line.)
fn agree_in_rest(line: &[u8], next: &[u8]) -> bool {
    ends_where_serde_reads(line, next, line_in, |line| both(line).1)
}

/// `line`, a newline and `next` as the rest of a file: `line_in` (an agent's walk that finds
/// where its line ends) either leaves the line (`false`) or ends it at the first newline and
/// reads what `serde` reads of the bytes before it.
fn ends_where_serde_reads(
    line: &[u8],
    next: &[u8],
    line_in: impl Fn(&[u8]) -> Option<(String, usize)>,
    serde: impl Fn(&[u8]) -> Option<String>,
) -> bool {
    let rest = [line, b"\n", next].concat();
    let end = rest.iter().position(|&b| b == b'\n').unwrap();
    let Some((walked, len)) = line_in(&rest) else {
        return false;
    };
    let shown = String::from_utf8_lossy(&rest);
    assert_eq!(len, end, "the walk ended its line elsewhere in {shown:?}");
    assert_eq!(
        Some(walked),
        serde(&rest[..end]),
        "the walk to the line's end and serde disagree on {shown:?}"
    );
    true
}

/// A small deterministic generator (xorshift), so the runs are the same each time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

#[test]
fn every_fixture_line_reads_the_same_walked_or_decoded() {
    let (mut lines, mut claude_lines, mut claude_walked, mut claude_in_rest) = (0, 0, 0, 0);
    for path in fixtures() {
        let bytes = std::fs::read(&path).unwrap();
        for line in bytes.split(|&b| b == b'\n') {
            agree(line);
            lines += 1;
            if is_claude(&path) && !line.is_empty() {
                claude_lines += 1;
                claude_walked += usize::from(walked(line));
                claude_in_rest += usize::from(agree_in_rest(line, b"{}"));
            }
        }
    }
    assert!(lines > 500, "the fixtures were found ({lines} lines)");
    // The fast path is the one taken on real records, not the fallback; and a line of a mapped
    // file is read to its end in that one walk.
    assert!(
        claude_walked * 10 >= claude_lines * 9,
        "{claude_walked} of {claude_lines} Claude Code lines walked"
    );
    assert!(
        claude_in_rest * 10 >= claude_lines * 9,
        "{claude_in_rest} of {claude_lines} Claude Code lines walked to their ends"
    );
}

/// The record's pass reads a main-chain message where it lies; a message body that walk does
/// not vouch for is read raw again and decoded as before, whatever follows it in the line.
#[test]
fn a_message_is_read_in_the_records_pass_or_read_again_raw() {
    let plain = br#"{"type":"assistant","message":{"id":"m","model":"claude","content":[{"type":"text","text":"a reply\nwith a line"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]},"uuid":"u1","timestamp":"2026-01-01T00:00:01Z"}"#;
    assert_eq!(message_in_place(plain), Some(true));
    assert!(agree(plain));
    // A float in a content block (serde decodes the block into a buffered value), a message
    // that is a string, an array, or holds `content` twice: the body walk does not vouch, the
    // record walk still reads the line, and the message comes out as serde decodes it.
    for line in [
        &br#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hi","n":1.5}]},"uuid":"u1","toolUseResult":{"stdout":"x"}}"#[..],
        br#"{"type":"user","message":"just text","uuid":"u1"}"#,
        br#"{"type":"assistant","message":[{"type":"text","text":"a"}],"uuid":"u1"}"#,
        br#"{"type":"user","message":{"content":"one","content":"two"},"uuid":"u1"}"#,
    ] {
        assert_eq!(
            message_in_place(line),
            Some(false),
            "{}",
            String::from_utf8_lossy(line)
        );
        agree(line);
    }
    // Nothing read in place for a record the reader does not take a message from is the
    // reader's choice (`parse_with_message`'s predicate); a `message` that is not JSON ends
    // the walk, and serde rejects the line too.
    let broken = br#"{"type":"user","message":{"content":[1,}]},"uuid":"u1"}"#;
    assert_eq!(message_in_place(broken), None);
    assert!(!agree(broken));
}

#[test]
fn every_claude_fixture_projects_the_same_conversation_walked_or_decoded() {
    let mut files = 0;
    for path in fixtures().into_iter().filter(|p| is_claude(p)) {
        let bytes = std::fs::read(&path).unwrap();
        let decoded = conversation(&bytes, true);
        assert_eq!(conversation(&bytes, false), decoded, "{}", path.display());
        assert_eq!(
            conversation_in_rest(&bytes),
            decoded,
            "{}, read as a mapped file",
            path.display()
        );
        files += 1;
    }
    assert!(files >= 5, "the Claude Code fixtures were found ({files})");
}

#[test]
fn fixture_lines_mutated_byte_by_byte_read_the_same() {
    let mut rng = Rng(0x5eed_cafe_f00d_1234);
    const BYTES: &[u8] = b"{}[],:\"\\ \t0-1.eEtnu\x01\xff\xc3\xa9\n";
    let mut tried = 0;
    for path in fixtures().into_iter().filter(|p| is_claude(p)) {
        let bytes = std::fs::read(&path).unwrap();
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            for _ in 0..6 {
                let mut mutated = line.to_vec();
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(mutated.len() + 1);
                    match rng.below(3) {
                        0 if at < mutated.len() => {
                            mutated.remove(at);
                        }
                        1 if at < mutated.len() => mutated[at] = BYTES[rng.below(BYTES.len())],
                        _ => mutated.insert(at, BYTES[rng.below(BYTES.len())]),
                    }
                }
                agree(&mutated);
                tried += 1;
            }
        }
    }
    assert!(tried > 1000, "{tried} mutated lines");
}

/// A JSON value of the kinds Claude Code records hold, and the hostile ones around them.
fn value(rng: &mut Rng, depth: usize) -> String {
    let scalars = [
        r#""plain text""#,
        r#""line\nbreak \"quoted\" \\ \/ \t""#,
        r#""caf\u00e9 é 日本""#,
        r#""\ud83d\ude00 pair""#,
        r#""\ud800 lone""#,
        r#""bad \x escape""#,
        "\"raw\tcontrol\"",
        "1",
        "-0",
        "0.5",
        "-12.5e-3",
        "1e999",
        "123456789012345678901234567890",
        "true",
        "false",
        "null",
        "01",
        "1.",
        "[]",
        "{}",
    ];
    if depth == 0 || rng.below(3) == 0 {
        return rng.pick(&scalars).to_string();
    }
    match rng.below(3) {
        0 => {
            let n = rng.below(4);
            let items: Vec<String> = (0..n).map(|_| value(rng, depth - 1)).collect();
            format!("[{}]", items.join(","))
        }
        1 => {
            let keys = ["a", "type", "text", "content", "data", "k\\u0065y", "input"];
            let n = rng.below(4);
            let members: Vec<String> = (0..n)
                .map(|_| format!("\"{}\":{}", rng.pick(&keys), value(rng, depth - 1)))
                .collect();
            format!("{{{}}}", members.join(","))
        }
        _ => {
            // Deep nesting: past serde's recursion limit now and then.
            let n = [3, 99, 101, 127, 129, 200][rng.below(6)];
            format!("{}{}", "[".repeat(n), "]".repeat(n))
        }
    }
}

fn block(rng: &mut Rng) -> String {
    match rng.below(9) {
        0 => format!(r#"{{"type":"text","text":{}}}"#, value(rng, 0)),
        1 => r#"{"type":"text","text":"a reply"}"#.to_string(),
        2 => format!(
            r#"{{"tool_use_id":"t1","type":"tool_result","content":{},"is_error":false}}"#,
            value(rng, 3)
        ),
        3 => r#"{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}"#.to_string(),
        4 => format!(
            r#"{{"type":"thinking","thinking":"hmm","signature":"c2ln"{}}}"#,
            if rng.below(2) == 0 { r#","type":"text""# } else { "" }
        ),
        5 => format!(r#"{{"type":"tool_use","id":"t","name":"Bash","input":{}}}"#, value(rng, 3)),
        6 => value(rng, 2),
        7 => r#"{"type":"text","text":null,"text":"twice"}"#.to_string(),
        _ => format!(r#"{{"type":{},"text":"x"}}"#, value(rng, 1)),
    }
}

fn message(rng: &mut Rng) -> String {
    let content = match rng.below(5) {
        0 => value(rng, 1),
        1 => r#""a typed prompt <system-reminder>x</system-reminder>""#.to_string(),
        _ => {
            let n = rng.below(4);
            let blocks: Vec<String> = (0..n).map(|_| block(rng)).collect();
            format!("[{}]", blocks.join(","))
        }
    };
    let mut members = vec![
        format!(r#""role":"user","content":{content}"#),
        format!(
            r#""id":{}"#,
            rng.pick(&[r#""msg_1""#, "null", "5", r#""msg_\u0031""#])
        ),
        format!(
            r#""model":{}"#,
            rng.pick(&[r#""<synthetic>""#, r#""claude-opus""#, "null", "[]"])
        ),
        format!(r#""usage":{}"#, value(rng, 2)),
    ];
    if rng.below(6) == 0 {
        members.push(r#""content":"again""#.to_string());
    }
    shuffle(rng, &mut members);
    members.truncate(1 + rng.below(members.len()));
    match rng.below(12) {
        0 => value(rng, 1),
        _ => format!("{{{}}}", members.join(",")),
    }
}

fn shuffle(rng: &mut Rng, items: &mut [String]) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.below(i + 1));
    }
}

fn record(rng: &mut Rng, uuids: &[&str]) -> String {
    let kinds = [
        r#""user""#,
        r#""assistant""#,
        r#""system""#,
        r#""custom-title""#,
        r#""ai-title""#,
        r#""progress""#,
        "null",
        "7",
    ];
    let flags = ["true", "false", "null", "1", r#""true""#];
    let uuid = |rng: &mut Rng| format!("\"{}\"", rng.pick(uuids));
    let mut members = vec![
        format!(r#""type":{}"#, rng.pick(&kinds)),
        format!(r#""uuid":{}"#, uuid(rng)),
        format!(
            r#""parentUuid":{}"#,
            if rng.below(4) == 0 {
                "null".to_string()
            } else {
                uuid(rng)
            }
        ),
        r#""sessionId":"0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9""#.to_string(),
        format!(
            r#""cwd":{}"#,
            rng.pick(&[r#""/w""#, r#""C:\\w\\é""#, r#""/\u00e9""#])
        ),
        format!(
            r#""timestamp":{}"#,
            rng.pick(&[
                r#""2026-01-01T00:00:01.000Z""#,
                r#""2026-01-01T00:00:02Z""#,
                r#""yesterday""#,
                "null",
            ])
        ),
        format!(r#""isSidechain":{}"#, rng.pick(&flags)),
        format!(r#""isMeta":{}"#, rng.pick(&flags)),
        format!(r#""isCompactSummary":{}"#, rng.pick(&flags)),
        format!(r#""message":{}"#, message(rng)),
        format!(r#""toolUseResult":{}"#, value(rng, 4)),
        format!(
            r#""subtype":{}"#,
            rng.pick(&[r#""compact_boundary""#, r#""other""#])
        ),
        format!(
            r#""compactMetadata":{}"#,
            rng.pick(&[
                r#"{"trigger":"manual","preTokens":1}"#,
                r#"{"preservedSegment":{"headUuid":"u1","anchorUuid":"u2","tailUuid":"u3"}}"#,
                "null",
                "[",
            ])
        ),
        format!(
            r#""customTitle":{}"#,
            rng.pick(&[r#""Mine""#, r#""  ""#, "null", "1"])
        ),
        format!(r#""aiTitle":{}"#, rng.pick(&[r#""Fix it""#, "null"])),
        format!(
            r#""{}":{}"#,
            rng.pick(&["typ\\u0065", "extra", "uuid"]),
            value(rng, 2)
        ),
    ];
    shuffle(rng, &mut members);
    members.truncate(3 + rng.below(members.len() - 2));
    let sep = rng.pick(&[",", ",", ",", " , ", ",\t", ";"]);
    let mut line = format!("{{{}}}", members.join(sep));
    match rng.below(20) {
        0 => {
            let mut at = rng.below(line.len());
            while !line.is_char_boundary(at) {
                at -= 1;
            }
            line.truncate(at);
        }
        1 => line.push_str(" \r"),
        2 => line.push_str(" x"),
        3 => line.insert(0, ' '),
        _ => {}
    }
    line
}

#[test]
fn generated_hostile_records_read_the_same_walked_or_decoded() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let uuids = ["u1", "u2", "u3", "5f1c2d3e-4f50-4617-8283-94a5b6c7d8e9"];
    let (mut records, mut walked_ok) = (0, 0);
    for _ in 0..20_000 {
        let line = record(&mut rng, &uuids);
        if agree(line.as_bytes()) {
            records += 1;
            walked_ok += usize::from(walked(line.as_bytes()));
        }
    }
    // Enough of them are records, and enough of those are walked, for both paths to be tested.
    assert!(records > 2_000, "{records} records");
    assert!(walked_ok > 500, "{walked_ok} walked");
}

#[test]
fn generated_conversations_project_the_same_walked_or_decoded() {
    let mut rng = Rng(0xfeed_beef_0bad_f00d);
    let uuids = ["u1", "u2", "u3", "u4", "u5", "u6"];
    for _ in 0..2_000 {
        let n = 1 + rng.below(12);
        let file: String = (0..n).map(|_| record(&mut rng, &uuids) + "\n").collect();
        let decoded = conversation(file.as_bytes(), true);
        assert_eq!(conversation(file.as_bytes(), false), decoded, "{file}");
        assert_eq!(
            conversation_in_rest(file.as_bytes()),
            decoded,
            "{file}, read as a mapped file"
        );
    }
}

mod codex {
    //! The same for Codex rollouts: the envelope walked or decoded, the look at a payload's
    //! type that lets a reader drop it unread, and whole conversations.
    use super::{fixtures, Rng};
    use dsh_session_references::session::external::codex_record::differential::{
        both, conversation, conversation_in_rest, line_in, payload_kind, walked,
    };

    fn is_codex(path: &std::path::Path) -> bool {
        path.to_string_lossy().contains("codex")
    }

    const KIND_LISTS: &[&[&str]] = &[
        &["user_message", "thread_rolled_back"],
        &["message"],
        &["thread_name_updated", "user_message"],
        &[],
    ];

    fn agree(line: &[u8]) {
        let (walked_line, serde_line) = both(line);
        assert_eq!(
            walked_line,
            serde_line,
            "the walk and serde disagree on {:?}",
            String::from_utf8_lossy(line)
        );
        for next in [&b""[..], br#"{"type":"next"}"#, b"\"\x01]"] {
            agree_in_rest(line, next);
        }
        // The payload, as serde cuts it out of the line.
        #[derive(serde::Deserialize)]
        struct Raw<'a> {
            #[serde(borrow)]
            payload: &'a serde_json::value::RawValue,
        }
        if let Ok(raw) = serde_json::from_slice::<Raw>(line) {
            for kinds in KIND_LISTS {
                let (dropped, serde_kind) = payload_kind(raw.payload.get().as_bytes(), kinds);
                if dropped {
                    assert!(
                        serde_kind
                            .as_ref()
                            .map_or(true, |k| !k.as_deref().is_some_and(|k| kinds.contains(&k))),
                        "a payload of a wanted type ({serde_kind:?}) was dropped: {:?}",
                        raw.payload.get()
                    );
                }
            }
        }
    }

    /// The envelope walk that finds where its line ends (`envelope_in`, what the reader of a
    /// mapped file offers the rest of the file to): given `line`, a newline and `next`, it
    /// reads the bytes up to the first newline exactly as serde reads that line, and says where
    /// it ends; or it leaves the line to the reader. (`line` may hold a newline of its own: a
    /// mutated line.)
    fn agree_in_rest(line: &[u8], next: &[u8]) -> bool {
        super::ends_where_serde_reads(line, next, line_in, |line| both(line).1)
    }

    #[test]
    fn every_codex_fixture_line_and_its_mutations_read_the_same() {
        let mut rng = Rng(0xc0de_c0de_1234_5678);
        const BYTES: &[u8] = b"{}[],:\"\\ 0-1.etn\x01\xff";
        let (mut lines, mut walked_lines, mut in_rest) = (0, 0, 0);
        for path in fixtures().into_iter().filter(|p| is_codex(p)) {
            let bytes = std::fs::read(&path).unwrap();
            for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                agree(line);
                lines += 1;
                walked_lines += usize::from(walked(line));
                in_rest += usize::from(agree_in_rest(line, b"{}"));
                for _ in 0..4 {
                    let mut mutated = line.to_vec();
                    let at = rng.below(mutated.len());
                    match rng.below(3) {
                        0 => {
                            mutated.remove(at);
                        }
                        1 => mutated[at] = BYTES[rng.below(BYTES.len())],
                        _ => mutated.insert(at, BYTES[rng.below(BYTES.len())]),
                    }
                    agree(&mutated);
                }
            }
        }
        assert!(lines > 100, "the Codex fixtures were found ({lines} lines)");
        assert!(
            walked_lines * 10 >= lines * 9,
            "{walked_lines} of {lines} walked"
        );
        assert!(
            in_rest * 10 >= lines * 9,
            "{in_rest} of {lines} ended by the walk"
        );
    }

    #[test]
    fn every_codex_fixture_and_its_mutations_project_the_same_conversation() {
        let mut rng = Rng(0xabcd_ef01_2345_6789);
        let mut files = 0;
        for path in fixtures().into_iter().filter(|p| is_codex(p)) {
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(
                conversation(&bytes, false),
                conversation(&bytes, true),
                "{}",
                path.display()
            );
            assert_eq!(
                conversation_in_rest(&bytes),
                conversation(&bytes, true),
                "{}",
                path.display()
            );
            files += 1;
            for _ in 0..20 {
                let mut mutated = bytes.clone();
                for _ in 0..3 {
                    let at = rng.below(mutated.len());
                    mutated[at] = b"{}[],:\"\\ x"[rng.below(10)];
                }
                assert_eq!(
                    conversation(&mutated, false),
                    conversation(&mutated, true),
                    "{}",
                    String::from_utf8_lossy(&mutated)
                );
                assert_eq!(
                    conversation_in_rest(&mutated),
                    conversation(&mutated, true),
                    "{}",
                    String::from_utf8_lossy(&mutated)
                );
            }
        }
        assert!(files >= 3, "the Codex fixtures were found ({files})");
    }
}
