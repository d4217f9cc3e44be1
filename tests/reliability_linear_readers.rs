//! Issue 32 (trust, round three), item 4: the Claude Code reader is linear in its input and
//! bounded per record, whatever the records share.
//!
//! - A reply split over many records with one `message.id` was merged by searching the whole
//!   reply for each new piece (a crafted 1 MB session never finished).
//! - Injected tags were stripped from a prompt by searching from its start and shifting the rest
//!   once per element.
//! - Every record kept a node of about 400 bytes (two owned uuid strings and a map entry), so a
//!   session of millions of tiny records passed 256 MiB.
//!
//! The time checks compare a run on n records with a run on 4n records (the best of three each):
//! a linear reader takes about 4 times as long, a quadratic one 16 times; the bound, 9, leaves
//! room for a loaded machine without letting a quadratic reader through. The memory check counts
//! the heap with a global allocator, so this file is a test binary of its own and its tests take
//! turns through `SERIAL`.
#![allow(unsafe_code)] // The counting global allocator.

use dsh_session_references::session::external::claude::strip_injected;
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{LIVE, PEAK};

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

static SERIAL: Mutex<()> = Mutex::new(());

const SESSION: &str = "0b5e55a1-0000-4000-8000-000000000001";

fn uuid(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// Writes a Claude Code home holding one session of `lines`; returns the home.
fn home_with(dir: &Path, lines: &str) -> std::path::PathBuf {
    let home = dir.join("claude");
    let project = home.join("projects/-work");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join(format!("{SESSION}.jsonl")), lines).unwrap();
    home
}

fn read(home: &Path) -> usize {
    let source = ExternalSessions::new(ExternalAgent::Claude, home);
    let (_, conversation) = source
        .read_conversation_blocking(&format!("claude:{SESSION}"))
        .unwrap();
    conversation.items.iter().map(|i| i.text.len()).sum()
}

fn best_of_three(f: &mut dyn FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .min()
        .unwrap()
}

/// Asserts that `run(4n)` takes less than 9 times `run(n)`.
fn linear(what: &str, n: usize, run: &mut dyn FnMut(usize)) {
    let small = best_of_three(&mut || run(n));
    let large = best_of_three(&mut || run(4 * n));
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
    assert!(
        ratio < 9.0,
        "{what}: {n} took {small:?}, {} took {large:?} (x{ratio:.1}): not linear",
        4 * n
    );
}

/// One user prompt, then one assistant reply written as `n` records of one message id, each
/// with a different piece of text (as Claude Code writes one record per content block).
fn split_reply(n: usize) -> String {
    let mut out = String::new();
    writeln!(out, r#"{{"type":"user","uuid":"{}","parentUuid":null,"sessionId":"{SESSION}","cwd":"/work","timestamp":"2026-12-01T10:00:00.000Z","message":{{"role":"user","content":"explain"}}}}"#, uuid(0)).unwrap();
    for i in 1..=n {
        writeln!(out, r#"{{"type":"assistant","uuid":"{}","parentUuid":"{}","sessionId":"{SESSION}","cwd":"/work","timestamp":"2026-12-01T10:00:01.000Z","message":{{"id":"msg_one","role":"assistant","model":"m","content":[{{"type":"text","text":"piece {i} of the one long reply, with enough words to make the reply grow steadily"}}]}}}}"#, uuid(i), uuid(i - 1)).unwrap();
    }
    out
}

#[test]
fn a_reply_split_over_many_records_of_one_id_merges_in_linear_time() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Every piece is kept once, in order.
    let home = home_with(dir.path(), &split_reply(50));
    let source = ExternalSessions::new(ExternalAgent::Claude, &home);
    let (_, conversation) = source
        .read_conversation_blocking(&format!("claude:{SESSION}"))
        .unwrap();
    assert_eq!(conversation.items.len(), 2);
    let reply = &conversation.items[1].text;
    assert_eq!(reply.lines().count(), 50);
    assert!(reply.starts_with("piece 1 of") && reply.ends_with("grow steadily"));
    let mut run = |n: usize| {
        let home = home_with(dir.path(), &split_reply(n));
        assert!(read(&home) > n * 50);
    };
    linear("one reply over many records", 4_000, &mut run);
}

#[test]
fn injected_tags_are_stripped_in_linear_time() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let prompt = |n: usize| {
        let mut text = String::from("fix the bug ");
        for i in 0..n {
            write!(
                text,
                "<system-reminder>note {i}</system-reminder> word {i} < not a tag <"
            )
            .unwrap();
        }
        text
    };
    let stripped = strip_injected(&prompt(3));
    assert_eq!(
        stripped,
        "fix the bug  word 0 < not a tag < word 1 < not a tag < word 2 < not a tag <"
    );
    let mut run = |n: usize| {
        let text = prompt(n);
        assert!(!strip_injected(&text).contains("system-reminder"));
    };
    linear("a prompt full of injected tags", 20_000, &mut run);
    // An element never closed takes the rest of the prompt with it, once.
    let unclosed = format!("keep <ide_selection>{}", "<ide_selection>".repeat(100_000));
    assert_eq!(strip_injected(&unclosed), "keep");
}

#[test]
fn millions_of_tiny_records_stay_within_a_small_multiple_of_the_file() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const RECORDS: usize = 400_000;
    let mut lines = String::with_capacity(RECORDS * 110);
    writeln!(lines, r#"{{"type":"user","uuid":"{}","parentUuid":null,"sessionId":"{SESSION}","cwd":"/work","timestamp":"2026-12-01T10:00:00.000Z","message":{{"role":"user","content":"start"}}}}"#, uuid(0)).unwrap();
    for i in 1..RECORDS {
        writeln!(
            lines,
            r#"{{"type":"progress","uuid":"{}","parentUuid":"{}"}}"#,
            uuid(i),
            uuid(i - 1)
        )
        .unwrap();
    }
    writeln!(lines, r#"{{"type":"assistant","uuid":"{}","parentUuid":"{}","sessionId":"{SESSION}","timestamp":"2026-12-01T10:00:02.000Z","message":{{"id":"m","role":"assistant","model":"m","content":[{{"type":"text","text":"end"}}]}}}}"#, uuid(RECORDS), uuid(RECORDS - 1)).unwrap();
    let file_bytes = lines.len();
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &lines);
    drop(lines);
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let source = ExternalSessions::new(ExternalAgent::Claude, &home);
    let (_, conversation) = source
        .read_conversation_blocking(&format!("claude:{SESSION}"))
        .unwrap();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let texts: Vec<&str> = conversation.items.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(
        texts,
        ["start", "end"],
        "the chain runs through every record"
    );
    // About 60 bytes a record at the peak (node, id table, the children array of the leaf's
    // descent); the reader held about 400 before.
    let per_record = peak / RECORDS;
    assert!(
        per_record < 120,
        "{peak} bytes at the peak for {RECORDS} records ({per_record} a record) of a {file_bytes}-byte file"
    );
}

/// Writes `lines` as the one session file at `relative` under a fresh home; returns the home.
fn home_of(dir: &Path, relative: &str, lines: &str) -> std::path::PathBuf {
    let home = dir.join(format!("home-{}", lines.len()));
    let file = home.join(relative);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, lines).unwrap();
    home
}

/// The other readers, each over `n` records of the shape that would make a careless reader
/// quadratic: a long `parentUuid` chain (Qwen Code), one message upserted again and again and
/// rewinds (Gemini CLI), a long rollout (Codex), turns with compactions (GitHub Copilot CLI).
#[test]
fn every_other_reader_is_linear_in_its_records() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let read = |agent: ExternalAgent, home: &Path| {
        let source = ExternalSessions::new(agent, home);
        let listed = source.list_sessions_blocking().unwrap();
        let id = listed[0].id().to_string();
        let (_, conversation) = source.read_conversation_blocking(&id).unwrap();
        conversation.items.len()
    };
    let mut qwen = |n: usize| {
        let mut lines = String::new();
        for i in 0..n {
            let parent = if i == 0 {
                "null".to_string()
            } else {
                format!("\"{}\"", uuid(i - 1))
            };
            let (kind, role) = if i % 2 == 0 {
                ("user", "user")
            } else {
                ("assistant", "model")
            };
            writeln!(lines, r#"{{"uuid":"{}","parentUuid":{parent},"sessionId":"q1","timestamp":"2026-12-04T00:51:50.673Z","type":"{kind}","cwd":"/w","message":{{"role":"{role}","parts":[{{"text":"record {i}"}}]}}}}"#, uuid(i)).unwrap();
        }
        let home = home_of(dir.path(), "projects/-w/chats/q1.jsonl", &lines);
        assert_eq!(read(ExternalAgent::Qwen, &home), n);
    };
    linear("Qwen Code: a long chain", 4_000, &mut qwen);
    let mut gemini = |n: usize| {
        let mut lines = String::from(
            r#"{"sessionId":"g1","projectHash":"h","startTime":"2026-12-04T00:55:02.600Z","kind":"main"}"#,
        );
        lines.push('\n');
        for i in 0..n {
            writeln!(lines, r#"{{"id":"u{i}","timestamp":"2026-12-04T00:55:03.000Z","type":"user","content":[{{"text":"prompt {i}"}}]}}"#).unwrap();
            // The same reply upserted twice, and every tenth prompt rewound.
            for _ in 0..2 {
                writeln!(lines, r#"{{"id":"g{i}","timestamp":"2026-12-04T00:55:04.000Z","type":"gemini","content":"reply {i}"}}"#).unwrap();
            }
            if i % 10 == 9 {
                writeln!(lines, r#"{{"$rewindTo":"u{i}"}}"#).unwrap();
            }
        }
        let home = home_of(dir.path(), "tmp/p/chats/session-1.jsonl", &lines);
        assert!(read(ExternalAgent::Gemini, &home) > n);
    };
    linear("Gemini CLI: upserts and rewinds", 3_000, &mut gemini);
    let mut codex = |n: usize| {
        let mut lines = String::from(
            r#"{"timestamp":"2026-01-02T16:39:45.349Z","type":"session_meta","payload":{"id":"019b7f94-51b4-7593-922e-ba12b5b73b52","timestamp":"2026-01-02T16:39:45.332Z","cwd":"/w","originator":"codex_exec","cli_version":"0.77.0"}}"#,
        );
        lines.push('\n');
        for i in 0..n {
            let (role, kind) = if i % 2 == 0 {
                ("user", "input_text")
            } else {
                ("assistant", "output_text")
            };
            writeln!(lines, r#"{{"timestamp":"2026-01-02T16:39:46.000Z","type":"response_item","payload":{{"type":"message","role":"{role}","content":[{{"type":"{kind}","text":"record {i}"}}]}}}}"#).unwrap();
        }
        let home = home_of(
            dir.path(),
            "sessions/2026/01/02/rollout-2026-01-02T16-39-45-019b7f94-51b4-7593-922e-ba12b5b73b52.jsonl",
            &lines,
        );
        // Codex takes prompts from its `event_msg` records; the replies are these.
        assert!(read(ExternalAgent::Codex, &home) >= n / 2);
    };
    linear("Codex: a long rollout", 4_000, &mut codex);
    let mut copilot = |n: usize| {
        let id = "6c477e3e-8f0c-454b-9b5e-8762c22091cf";
        let mut lines = String::new();
        writeln!(lines, r#"{{"type":"session.start","data":{{"sessionId":"{id}","startTime":"2026-12-04T08:03:15.839Z","context":{{"cwd":"/w"}}}},"id":"s","timestamp":"2026-12-04T08:03:15.839Z","parentId":null}}"#).unwrap();
        for i in 0..n {
            writeln!(lines, r#"{{"type":"user.message","data":{{"content":"prompt {i}","transformedContent":"<current_datetime>x</current_datetime> prompt {i}"}},"id":"u{i}","timestamp":"2026-12-04T08:03:16.000Z","parentId":null}}"#).unwrap();
            writeln!(lines, r#"{{"type":"assistant.message","data":{{"messageId":"a{i}","content":"reply {i}","toolRequests":[]}},"id":"a{i}","timestamp":"2026-12-04T08:03:17.000Z","parentId":"u{i}"}}"#).unwrap();
            // Every tenth turn is compacted away: what the scan kept so far is dropped once.
            if i % 10 == 9 {
                writeln!(lines, r#"{{"type":"session.compaction_complete","data":{{"success":true,"summaryContent":"summary {i}"}},"id":"c{i}","timestamp":"2026-12-04T08:03:18.000Z","parentId":"a{i}"}}"#).unwrap();
            }
        }
        let home = home_of(
            dir.path(),
            &format!("session-state/{id}/events.jsonl"),
            &lines,
        );
        // The last compaction's summary; the turns after it.
        assert_eq!(read(ExternalAgent::Copilot, &home), 1 + 2 * (n % 10));
    };
    linear(
        "GitHub Copilot CLI: turns and compactions",
        4_000,
        &mut copilot,
    );
}

/// opencode's database reader: listing `n` sessions whose titles are opencode's default (each
/// falls back to its first prompt, one indexed query a session) and reading a session of `n`
/// turns (each a prompt, a reply with reasoning and a tool call), over the real schema (the
/// fixture's database emptied, so its indexes are opencode's own).
#[test]
fn the_opencode_reader_is_linear_in_sessions_and_turns() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures/opencode");
    let mut homes = std::collections::HashMap::new();
    let build = |n: usize| -> std::path::PathBuf {
        let home = dir.path().join(format!("opencode-{n}"));
        std::fs::create_dir_all(&home).unwrap();
        for name in ["opencode.db", "opencode.db-wal"] {
            std::fs::copy(fixture.join(name), home.join(name)).unwrap();
        }
        let mut conn = rusqlite::Connection::open(home.join("opencode.db")).unwrap();
        let tx = conn.transaction().unwrap();
        tx.execute_batch("DELETE FROM part; DELETE FROM message; DELETE FROM session;")
            .unwrap();
        let part = |m: &str, p: String, t: i64, data: &str| {
            tx.execute(
                "INSERT INTO part VALUES (?1, ?2, 'ses_0', ?3, ?3, ?4)",
                rusqlite::params![p, m, t, data],
            )
            .unwrap();
        };
        for s in 0..n {
            tx.execute(
                "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated)
                 VALUES (?1, 'global', 'slug', '/w', 'New session - 2026-12-04T00:55:02.600Z', '1.18.33', ?2, ?2)",
                rusqlite::params![format!("ses_{s}"), s as i64],
            )
            .unwrap();
        }
        for i in 0..n {
            let t = 1000 + 2 * i as i64;
            let (user, reply) = (format!("msg_{i:08}a"), format!("msg_{i:08}b"));
            for (m, data, t) in [
                (&user, r#"{"role":"user"}"#, t),
                (&reply, r#"{"role":"assistant"}"#, t + 1),
            ] {
                tx.execute(
                    "INSERT INTO message VALUES (?1, 'ses_0', ?2, ?2, ?3)",
                    rusqlite::params![m, t, data],
                )
                .unwrap();
            }
            part(
                &user,
                format!("prt_{i:08}a"),
                t,
                &format!(r#"{{"type":"text","text":"prompt {i}"}}"#),
            );
            part(
                &reply,
                format!("prt_{i:08}b"),
                t + 1,
                r#"{"type":"reasoning","text":"THINK"}"#,
            );
            part(
                &reply,
                format!("prt_{i:08}c"),
                t + 1,
                r#"{"type":"tool","tool":"bash","state":{"output":"out"}}"#,
            );
            part(
                &reply,
                format!("prt_{i:08}d"),
                t + 1,
                &format!(r#"{{"type":"text","text":"reply {i}"}}"#),
            );
        }
        tx.commit().unwrap();
        home
    };
    for n in [1_000, 4_000] {
        homes.insert(n, build(n));
    }
    let mut read = |n: usize| {
        let source = ExternalSessions::new(ExternalAgent::Opencode, &homes[&n]);
        let listed = source.list_sessions_blocking().unwrap();
        assert_eq!(listed.len(), n);
        let (_, conversation) = source.read_conversation_blocking("opencode:ses_0").unwrap();
        assert_eq!(conversation.items.len(), 2 * n);
    };
    linear("opencode: sessions and turns", 1_000, &mut read);
}
