//! Other agents' homes never block or balloon (RELIABILITY.md, "Trust, round two", 4a): a line
//! far over the limit in a Claude Code session, a Codex rollout or `session_index.jsonl` is
//! skipped in bounded memory (listing, titles and conversations alike), and a FIFO in the place of
//! `session_index.jsonl`, a session file or the state database is refused at once, never waited
//! on.
//!
//! The big lines are sparse files (a hole of zeros, no newline, between a record's start and its
//! end), so the test costs disk metadata, not disk. The lines are 512 MiB (the reader was measured on
//! 2 GiB lines too: RELIABILITY.md); a debug build scans about 70 MB/s, so bigger would only
//! be slower. A counting global allocator records
//! the peak of live heap bytes while a read runs; it counts the whole process, so this file is a
//! test binary of its own and its memory tests take turns through `SERIAL`.
#![allow(unsafe_code)] // The counting global allocator.

use dsh_session_references::session::external::{ExternalAgent, ExternalSessions};
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{LIVE, PEAK};

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

static SERIAL: Mutex<()> = Mutex::new(());

const MIB: usize = 1 << 20;
const BIG: u64 = 512 << 20;
/// Far above the 64 MiB line limit's worst case, far below the 512 MiB line.
const BOUND: usize = 200 * MIB;

fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// Writes `start`, a hole up to `BIG` bytes, then `end` (the big line's end and what follows).
fn sparse(path: &Path, start: &str, end: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut file = fs::File::create(path).unwrap();
    file.write_all(start.as_bytes()).unwrap();
    file.seek(SeekFrom::Start(BIG)).unwrap();
    file.write_all(end.as_bytes()).unwrap();
}

fn real_codex_rollout() -> (PathBuf, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fixtures/real-agents/codex/sessions/2026/12/01");
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        if text.contains("codex epsilon first") {
            let id = path.file_stem().unwrap().to_string_lossy();
            return (path.clone(), id[id.len() - 36..].to_string());
        }
    }
    panic!("the codex exec fixture is missing");
}

const CLAUDE_ID: &str = "0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9";

fn claude_record(kind: &str, uuid: &str, parent: &str, content: &str) -> String {
    format!(
        "{{\"type\":\"{kind}\",\"uuid\":\"{uuid}\",\"parentUuid\":{parent},\"sessionId\":\"{CLAUDE_ID}\",\"cwd\":\"/w\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"message\":{{\"id\":\"m-{uuid}\",\"role\":\"{kind}\",\"content\":{content}}}}}\n"
    )
}

#[test]
fn a_512_mib_line_in_a_claude_session_is_skipped_in_bounded_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join(format!("projects/-w/{CLAUDE_ID}.jsonl"));
    // The session opens with a 512 MiB record (a pasted blob), then a prompt and its reply.
    let end = format!(
        "\"}}}}\n{}{}",
        claude_record("user", "u1", "null", "\"the prompt after the blob\""),
        claude_record(
            "assistant",
            "a1",
            "\"u1\"",
            "[{\"type\":\"text\",\"text\":\"the reply\"}]"
        ),
    );
    sparse(
        &file,
        "{\"type\":\"user\",\"message\":{\"content\":\"",
        &end,
    );
    let source = ExternalSessions::new(ExternalAgent::Claude, home.path());
    let id = format!("claude:{CLAUDE_ID}");
    let started = Instant::now();
    let ((list, title, conversation), peak) = peak_during(|| {
        let list = source.list_sessions_blocking().unwrap();
        let title = source.read_title_blocking(&id).unwrap();
        let (_, conversation) = source.read_conversation_blocking(&id).unwrap();
        (list, title, conversation)
    });
    eprintln!(
        "claude: {BIG}-byte line, list + title + conversation: peak {peak} bytes, {:?}",
        started.elapsed()
    );
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].cwd(), Some("/w"));
    assert_eq!(title.as_deref(), Some("the prompt after the blob"));
    let texts: Vec<&str> = conversation.items.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(texts, ["the prompt after the blob", "the reply"]);
    assert!(peak < BOUND, "peak {peak} bytes");
}

#[test]
fn a_512_mib_line_in_a_codex_rollout_or_its_session_index_is_skipped_in_bounded_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let home = tempfile::tempdir().unwrap();
    let (fixture, own) = real_codex_rollout();
    let text = fs::read_to_string(&fixture).unwrap();
    let (meta, rest) = text.split_once('\n').unwrap();
    // The real rollout with a 512 MiB record right after its session_meta.
    let rollout = home
        .path()
        .join("sessions/2026/12/01")
        .join(fixture.file_name().unwrap());
    sparse(
        &rollout,
        &format!("{meta}\n{{\"timestamp\":\"2026-12-01T00:00:00Z\",\"type\":\"response_item\",\"payload\":{{\"type\":\"message\",\"role\":\"user\",\"content\":[{{\"type\":\"input_text\",\"text\":\""),
        &format!("\"}}]}}}}\n{rest}"),
    );
    // And an index whose first line is 512 MiB long, then the thread's name.
    sparse(
        &home.path().join("session_index.jsonl"),
        "{\"id\":\"",
        &format!("\"}}\n{{\"id\":\"{own}\",\"thread_name\":\"named in the index\"}}\n"),
    );
    let source = ExternalSessions::new(ExternalAgent::Codex, home.path());
    let id = format!("codex:{own}");
    let started = Instant::now();
    let ((list, title, conversation), peak) = peak_during(|| {
        let list = source.list_sessions_blocking().unwrap();
        let title = source.read_title_blocking(&id).unwrap();
        let (_, conversation) = source.read_conversation_blocking(&id).unwrap();
        (list, title, conversation)
    });
    eprintln!(
        "codex: {BIG}-byte rollout line and index line, list + title + conversation: peak {peak} bytes, {:?}",
        started.elapsed()
    );
    assert_eq!(list.len(), 1);
    assert_eq!(title.as_deref(), Some("named in the index"));
    let texts: Vec<&str> = conversation.items.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(texts[0], "codex epsilon first TOOL THINK");
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert!(peak < BOUND, "peak {peak} bytes");
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs `f` on a thread of its own; fails when it has not answered within 10 s (a blocked
/// `open` of a FIFO never would).
fn within_10s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what}: blocked for 10 s"))
}

#[test]
fn a_fifo_session_index_or_state_database_never_blocks_a_title() {
    let home = tempfile::tempdir().unwrap();
    let (fixture, own) = real_codex_rollout();
    let dir = home.path().join("sessions/2026/12/01");
    fs::create_dir_all(&dir).unwrap();
    fs::copy(&fixture, dir.join(fixture.file_name().unwrap())).unwrap();
    mkfifo(&home.path().join("session_index.jsonl"));
    mkfifo(&home.path().join("state_5.sqlite"));
    let source = ExternalSessions::new(ExternalAgent::Codex, home.path());
    let id = format!("codex:{own}");
    let title = within_10s("a title beside FIFOs", move || {
        source.list_sessions_blocking().unwrap();
        source.read_title_blocking(&id)
    });
    // Neither FIFO says anything: the title is the first prompt.
    assert_eq!(
        title.unwrap().as_deref(),
        Some("codex epsilon first TOOL THINK")
    );
}

#[test]
fn a_session_file_replaced_by_a_fifo_is_an_error_not_a_wait() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join(format!("projects/-w/{CLAUDE_ID}.jsonl"));
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    fs::write(&file, claude_record("user", "u1", "null", "\"a prompt\"")).unwrap();
    let source = ExternalSessions::new(ExternalAgent::Claude, home.path());
    assert_eq!(source.list_sessions_blocking().unwrap().len(), 1);
    fs::remove_file(&file).unwrap();
    mkfifo(&file);
    let id = format!("claude:{CLAUDE_ID}");
    let (conversation, title) = within_10s("reading a FIFO session", move || {
        (
            source.read_conversation_blocking(&id).map(|_| ()),
            source.read_title_blocking(&id).map(|_| ()),
        )
    });
    let err = conversation.unwrap_err().to_string();
    assert!(err.contains("FIFO"), "{err}");
    assert!(title.unwrap_err().to_string().contains("FIFO"));
}
