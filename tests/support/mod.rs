//! The one support tree of the integration tests, shared by every test binary (each group's
//! `main.rs` declares it with `#[path = "../support/mod.rs"] mod support;`, a standalone file with
//! `mod support;`; each uses the parts it needs):
//!
//! - here: the test data under `tests/data` (fixture logs, other agents' homes, conformance
//!   vectors), log re-encoding, homes laid out on disk (`copy_tree`, `write_source`), the events
//!   and context readers several binaries share (`user`, `conversation_texts`), and the
//!   name a test re-executes itself under;
//! - [`memory_query`]: an in-memory `SessionQuery` double;
//! - [`model`]: a scripted OpenAI-compatible server on 127.0.0.1;
//! - [`tmux`]: the real binary in a tmux pane;
//! - [`gen`]: the benchmarks' generated homes and logs (`benches/support/gen.rs`), whose seeded
//!   generator is the crate's one [`TestRng`] (`src/test_rng.rs`).
//!
//! Randomized property tests use proptest's strategies instead; `TestRng` is for fixed streams
//! that must replay (a crash child regenerating its parent's batches, generated data).
#![allow(dead_code)]

pub mod memory_query;
pub mod model;
pub mod planted;
pub mod raw_http;
pub mod tmux;

#[path = "../../benches/support/gen.rs"]
pub mod gen;

// Not every group uses both.
#[allow(unused_imports)]
pub use gen::TestRng;
#[allow(unused_imports)]
pub use memory_query::MemoryQuery;

use dsh_session_references::reference::context_json;
use dsh_session_references::session::format::EventData;
use dsh_session_references::session::{
    ContentBlock, Event, Message, MessageSource, NewEvent, Record, SessionHeader, SurfaceSnapshot,
};
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

pub fn read_conformance(name: &str) -> String {
    let path = conformance_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Non-empty lines of a JSON Lines conformance file, parsed.
pub fn conformance_jsonl(name: &str) -> Vec<serde_json::Value> {
    read_conformance(name)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}")))
        .collect()
}

/// Parses a whole uncompressed log and folds it with the session layer's fold.
pub fn snapshot_from_log(text: &str) -> SurfaceSnapshot {
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let header: SessionHeader = serde_json::from_str(lines.next().expect("header")).unwrap();
    let mut events: Vec<Event> = Vec::new();
    let mut last_seq = None;
    for line in lines {
        let record: Record = serde_json::from_str(line).unwrap();
        match record {
            Record::Event(event) => {
                last_seq = Some(event.seq);
                events.push(event);
            }
            Record::Packed(packed) => {
                last_seq = packed.last_seq().or(last_seq);
            }
        }
    }
    let events = dsh_session_references::session::surface::fold(&header.id, events).unwrap();
    SurfaceSnapshot {
        session: header,
        captured_through_seq: last_seq,
        events,
    }
}

/// The conformance source session (`source`, cwd `/source`).
pub fn conformance_source() -> SurfaceSnapshot {
    snapshot_from_log(&read_conformance("source-conversation.session.jsonl"))
}

/// One vector of `prepare-expect.jsonl`.
#[derive(serde::Deserialize)]
pub struct PrepareVector {
    #[serde(rename = "maxReferenceBytes")]
    pub max_reference_bytes: i64,
    pub data: Option<Box<serde_json::value::RawValue>>,
    pub reference: Option<Box<serde_json::value::RawValue>>,
    pub error: Option<String>,
}

/// Every vector of `prepare-expect.jsonl`.
pub fn prepare_vectors() -> Vec<PrepareVector> {
    read_conformance("prepare-expect.jsonl")
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The name under which the test `test` of the module at `module_path` (its `module_path!()`)
/// runs in its binary, for re-executing the binary with `--exact`: the path without the crate
/// (`session::concurrency` + `writer_child` is `concurrency::writer_child`).
pub fn test_path(module_path: &str, test: &str) -> String {
    match module_path.split_once("::") {
        Some((_, inner)) => format!("{inner}::{test}"),
        None => test.to_string(),
    }
}

/// `tests/data/fixtures`: the other agents' homes (Claude Code, Codex) and the dsh logs.
pub fn agent_fixtures() -> PathBuf {
    data_dir().join("fixtures")
}

/// The other agent's fixture home `fixture` (under [`agent_fixtures`]) copied to a fresh
/// temporary directory as `name` (`.copilot`, `opencode`): the directory, kept alive by the
/// caller, and the home's path.
pub fn agent_home(fixture: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join(name);
    copy_tree(&agent_fixtures().join(fixture), &home);
    (dir, home)
}

/// Session `id`'s projection as `role: text` lines (`summary:` for a compaction's summary).
pub fn projected_lines(
    source: &dsh_session_references::session::external::ExternalSessions,
    id: &str,
) -> Vec<String> {
    use dsh_session_references::reference::{project, Role};
    let (snapshot, _) = source.read_conversation_blocking(id).unwrap();
    project(&snapshot)
        .into_iter()
        .map(|item| {
            let role = match (item.role, item.checkpoint) {
                (_, true) => "summary",
                (Role::User, _) => "user",
                (Role::Assistant, _) => "assistant",
            };
            format!("{role}: {}", item.text)
        })
        .collect()
}

/// Copies of the Claude Code and Codex fixture homes under `root` (`claude/`, `codex/`): homes a
/// test may let the binary read, compared with [`tree_with_stamps`] before and after.
#[allow(dead_code)] // Not every test binary reads other agents' homes.
pub fn copied_agent_homes(root: &Path) -> (PathBuf, PathBuf) {
    let (claude, codex) = (root.join("claude"), root.join("codex"));
    copy_tree(&agent_fixtures().join("claude-code"), &claude);
    copy_tree(&agent_fixtures().join("codex"), &codex);
    (claude, codex)
}

/// Copies the directory tree `from` to `to` (created), files byte for byte.
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            fs::copy(&path, &target).unwrap();
        }
    }
}

/// A typed user message as an event to append (id `u-<text>`).
pub fn user(text: &str) -> NewEvent {
    EventData::UserMessage(Message::new(
        "user",
        vec![ContentBlock::text(text)],
        MessageSource::user(),
        format!("u-{text}"),
    ))
    .into()
}

/// A one-turn dsh session `src-session-1` ("Leap day parsing", cwd `/proj/api`) in `home`, the
/// source the TUI and tmux tests reference.
pub fn write_source(home: &Path) {
    let dir = home.join("sessions/--proj-api--/src-session-1");
    fs::create_dir_all(&dir).unwrap();
    let lines = [
        r#"{"type":"session","version":0,"id":"src-session-1","createdAt":1780000000000,"cwd":"/proj/api","delegationDepth":0}"#,
        r#"{"type":"turn/start","seq":0,"time":1780000000001,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
        r#"{"type":"user/message","seq":1,"time":1780000000002,"data":{"content":[{"type":"text","text":"Why does the date parser reject 2024-02-29?"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#,
        r#"{"type":"session/title","seq":2,"time":1780000000003,"data":{"title":"Leap day parsing","messageSeqs":[1],"source":{"kind":"fallback"}}}"#,
        r#"{"type":"assistant/message","seq":3,"time":1780000000004,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"The validator used a non-leap month table."}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"}},"surfaceOp":"append"}"#,
        r#"{"type":"turn/end","seq":4,"time":1780000000005,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    fs::write(dir.join("session.jsonl"), lines.join("\n") + "\n").unwrap();
}

/// The texts of the first source's conversation in a session-reference context message.
pub fn conversation_texts(context: &Message) -> Vec<String> {
    let json = context_json(context.content[0].as_text().unwrap()).unwrap();
    let objects: Vec<serde_json::Value> = serde_json::from_str(json).unwrap();
    objects[0]["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["text"].as_str().unwrap().to_string())
        .collect()
}

/// A path's mode, mtime (seconds, nanoseconds) and bytes (none for a directory).
pub type TreeEntry = (u32, i64, i64, Option<Vec<u8>>);

/// The bytes the calling thread has read through system calls so far (`rchar` of
/// `/proc/thread-self/io`): a read that must not touch a file reads far fewer.
pub fn thread_read_bytes() -> u64 {
    read_bytes_of("/proc/thread-self/io")
}

/// The bytes every thread of this process, ended ones too, has read through system calls so
/// far (`rchar` of `/proc/self/io`): a read that must take a whole file reads at least it, on
/// whichever threads (a heavy session is read in parts); other tests only add to it.
#[allow(dead_code)] // Not every test binary reads in parts.
pub fn process_read_bytes() -> u64 {
    read_bytes_of("/proc/self/io")
}

fn read_bytes_of(io: &str) -> u64 {
    let io = std::fs::read_to_string(io).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Every path under `root` with its mode, mtime and bytes: compared before and after an
/// operation, it shows that nothing under another agent's home was written, touched or made.
#[allow(dead_code)] // Not every test binary reads other agents' homes.
pub fn tree_with_stamps(root: &Path) -> std::collections::BTreeMap<PathBuf, TreeEntry> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            // A FIFO or a socket planted in a hostile home is compared by mode and mtime
            // only (reading it would block).
            let bytes = if meta.is_dir() {
                stack.push(path.clone());
                None
            } else if meta.file_type().is_fifo() || meta.file_type().is_socket() {
                None
            } else {
                Some(fs::read(&path).unwrap())
            };
            out.insert(path, (meta.mode(), meta.mtime(), meta.mtime_nsec(), bytes));
        }
    }
    out
}
