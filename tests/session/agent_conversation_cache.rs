//! Issue 35 item 3: a heavy agent session's projected conversation is kept between processes
//! under the dsh home, and what a new process reads from it is what a fresh read of the file
//! gives; any change to the file (an append, a truncation, a replacement) is read again.
//!
//! Each "process" is a fresh `ExternalSessions` over the same homes (nothing shared in
//! memory). That the kept projection is used is proved by the bytes the reading thread read
//! (the kernel's count), a small part of the session file's.

use crate::support::{process_read_bytes, thread_read_bytes, tree_with_stamps};
use dsh_session_references::session::external::{
    bytes_mapped_on_this_thread, Conversation, ExternalAgent, ExternalSessions,
};
use std::fs;
use std::io::Write;
use std::path::PathBuf;

/// A Claude Code session of `prompts` exchanges, each with a tool result of `padding` bytes
/// (stored twice, as Claude Code does), so that the file is heavy.
fn heavy_session(id: &str, prompts: &[&str], padding: usize) -> String {
    let blob = "diff --git a/x b/x\\n+\\tline \\\"quoted\\\"\\n".repeat(padding / 40 + 1);
    let mut out = String::new();
    let mut parent = "null".to_string();
    for (n, prompt) in prompts.iter().enumerate() {
        let (u, a, t, r) = (
            format!("u{n}"),
            format!("a{n}"),
            format!("t{n}"),
            format!("r{n}"),
        );
        out += &format!(
            r#"{{"type":"user","uuid":"{u}","parentUuid":{parent},"sessionId":"{id}","cwd":"/w","timestamp":"2026-01-01T00:00:0{n}Z","message":{{"role":"user","content":"{prompt}"}}}}"#
        );
        out += "\n";
        out += &format!(
            r#"{{"type":"assistant","uuid":"{t}","parentUuid":"{u}","sessionId":"{id}","cwd":"/w","timestamp":"2026-01-01T00:00:0{n}Z","message":{{"id":"m{n}","role":"assistant","content":[{{"type":"tool_use","id":"tool{n}","name":"Bash","input":{{"command":"git diff"}}}}]}}}}"#
        );
        out += "\n";
        out += &format!(
            r#"{{"type":"user","uuid":"{r}","parentUuid":"{t}","sessionId":"{id}","cwd":"/w","timestamp":"2026-01-01T00:00:0{n}Z","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"tool{n}","content":"{blob}"}}]}},"toolUseResult":{{"stdout":"{blob}","stderr":""}}}}"#
        );
        out += "\n";
        out += &format!(
            r#"{{"type":"assistant","uuid":"{a}","parentUuid":"{r}","sessionId":"{id}","cwd":"/w","timestamp":"2026-01-01T00:00:0{n}Z","message":{{"id":"n{n}","role":"assistant","content":[{{"type":"text","text":"answer to {prompt}"}}]}}}}"#
        );
        out += "\n";
        parent = format!("\"{a}\"");
    }
    out
}

struct Homes {
    _dir: tempfile::TempDir,
    claude: PathBuf,
    dsh: PathBuf,
}

impl Homes {
    fn new() -> Homes {
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join("claude");
        let dsh = dir.path().join("dsh");
        fs::create_dir_all(claude.join("projects").join("-w")).unwrap();
        fs::create_dir_all(&dsh).unwrap();
        Homes {
            _dir: dir,
            claude,
            dsh,
        }
    }

    fn file(&self, id: &str) -> PathBuf {
        self.claude
            .join("projects")
            .join("-w")
            .join(format!("{id}.jsonl"))
    }

    fn kept_dir(&self) -> PathBuf {
        self.dsh.join("index").join("agents").join("conversations")
    }

    fn kept_files(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = match fs::read_dir(self.kept_dir()) {
            // The documents (a `.scan` beside each holds the agent's scan).
            Ok(entries) => entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect(),
            Err(_) => Vec::new(),
        };
        out.sort();
        out
    }

    /// A new process's read of session `id`'s conversation.
    fn read(&self, id: &str) -> Conversation {
        let source =
            ExternalSessions::with_listing_cache(ExternalAgent::Claude, &self.claude, &self.dsh);
        source.list_sessions_blocking().unwrap();
        let (_, conversation) = source
            .read_conversation_blocking(&format!("claude:{id}"))
            .unwrap();
        source.flush();
        conversation
    }

    /// A read that keeps nothing and trusts nothing kept: the reference.
    fn fresh(&self, id: &str) -> Conversation {
        let source = ExternalSessions::new(ExternalAgent::Claude, &self.claude);
        source.list_sessions_blocking().unwrap();
        source
            .read_conversation_blocking(&format!("claude:{id}"))
            .unwrap()
            .1
    }
}

fn texts(conversation: &Conversation) -> Vec<&str> {
    conversation.items.iter().map(|i| i.text.as_str()).collect()
}

const HEAVY: usize = 3 << 20;

#[test]
fn a_new_process_reads_a_heavy_session_from_what_the_last_one_kept() {
    let homes = Homes::new();
    let text = heavy_session("h", &["first", "second"], HEAVY);
    assert!(text.len() > 8 << 20, "{}", text.len());
    fs::write(homes.file("h"), &text).unwrap();
    let agent_home_before = tree_with_stamps(&homes.claude);

    let first = homes.read("h");
    assert_eq!(first, homes.fresh("h"));
    assert_eq!(
        texts(&first),
        ["first", "answer to first", "second", "answer to second"]
    );
    let kept = homes.kept_files();
    assert_eq!(kept.len(), 1, "{kept:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&kept[0]).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "kept session text is its owner's only");
    }
    // What is kept is the projection, far smaller than the file.
    assert!(fs::metadata(&kept[0]).unwrap().len() < 4096);

    homes.read("h");
    assert!(
        tree_with_stamps(&homes.claude) == agent_home_before,
        "something was written under the agent's home"
    );

    // The read from what was kept reads a small part of the file's bytes (this thread's read
    // count, from the kernel, and what it mapped): neither the session file nor the listing.
    let file_len = text.len() as u64;
    let taken = || thread_read_bytes() + bytes_mapped_on_this_thread();
    let before = taken();
    assert_eq!(homes.read("h"), first);
    let read = taken() - before;
    assert!(
        read < file_len / 8,
        "read {read} bytes of a {file_len}-byte session"
    );
    // Without what was kept, the same read takes the whole file (in parts, on several threads:
    // read by them, or mapped by this one).
    let (before, mapped_before) = (process_read_bytes(), bytes_mapped_on_this_thread());
    assert_eq!(homes.fresh("h"), first);
    let mapped = bytes_mapped_on_this_thread() - mapped_before;
    assert!(process_read_bytes() - before + mapped >= file_len);

    // A status change (here a `chmod`) makes the file opened again (a file no longer readable
    // then fails the read, naming it), read from where the last read ended, and kept anew.
    use std::os::unix::fs::PermissionsExt;
    let kept_before = fs::read(&homes.kept_files()[0]).unwrap();
    fs::set_permissions(homes.file("h"), fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(homes.read("h"), first);
    let kept_after = fs::read(&homes.kept_files()[0]).unwrap();
    assert_ne!(
        kept_before, kept_after,
        "a chmod must make the file opened again"
    );
}

#[test]
fn an_append_a_truncation_and_a_replacement_are_read_again() {
    let homes = Homes::new();
    let text = heavy_session("h", &["first", "second"], HEAVY);
    fs::write(homes.file("h"), &text).unwrap();
    homes.read("h");

    // A message appended (a new chain link after the last answer).
    let mut file = fs::File::options()
        .append(true)
        .open(homes.file("h"))
        .unwrap();
    file.write_all(
        br#"{"type":"user","uuid":"u9","parentUuid":"a1","sessionId":"h","cwd":"/w","timestamp":"2026-01-01T00:00:09Z","message":{"role":"user","content":"third"}}
"#,
    )
    .unwrap();
    drop(file);
    let appended = homes.read("h");
    assert_eq!(appended, homes.fresh("h"));
    assert_eq!(texts(&appended).last(), Some(&"third"));
    // And the next process has the append from what this one kept.
    assert_eq!(homes.read("h"), appended);

    // Truncated in place to one exchange (same inode, shorter, still heavy).
    let one = heavy_session("h", &["only"], HEAVY * 2);
    fs::write(homes.file("h"), &one).unwrap();
    assert_eq!(texts(&homes.read("h")), ["only", "answer to only"]);

    // Replaced by a rename (another inode).
    let staged = homes.file("h").with_extension("tmp");
    fs::write(&staged, heavy_session("h", &["renamed"], HEAVY)).unwrap();
    fs::rename(&staged, homes.file("h")).unwrap();
    assert_eq!(texts(&homes.read("h")), ["renamed", "answer to renamed"]);
    assert_eq!(homes.kept_files().len(), 1);
}

#[test]
fn a_light_session_is_always_read_from_its_file_and_never_kept() {
    let homes = Homes::new();
    fs::write(homes.file("l"), heavy_session("l", &["small"], 100)).unwrap();
    assert_eq!(texts(&homes.read("l")), ["small", "answer to small"]);
    assert!(homes.kept_files().is_empty());
}

#[test]
fn a_damaged_kept_conversation_is_read_again_and_replaced() {
    let homes = Homes::new();
    let text = heavy_session("h", &["first"], HEAVY * 3);
    fs::write(homes.file("h"), &text).unwrap();
    homes.read("h");
    let kept = homes.kept_files().pop().unwrap();
    let good = fs::read(&kept).unwrap();
    // A forged answer with the checksum left as it was; then a file cut short; then garbage.
    let forged = replace_bytes(&good, b"answer to first", b"answer to FORGE");
    assert_ne!(forged, good);
    for damage in [forged, good[..good.len() / 2].to_vec(), b"\0\xff".to_vec()] {
        fs::write(&kept, damage).unwrap();
        assert_eq!(texts(&homes.read("h")), ["first", "answer to first"]);
        // A good copy again (the scan's maps may be written in another order).
        let again = fs::read(&kept).unwrap();
        assert_eq!(
            again.len(),
            good.len(),
            "a fresh read keeps a good copy again"
        );
        assert!(again.starts_with(b"dsh-refs agent conversation "));
    }
}

#[test]
fn a_deleted_sessions_kept_text_goes_with_the_next_write() {
    let homes = Homes::new();
    fs::write(homes.file("a"), heavy_session("a", &["alpha"], HEAVY)).unwrap();
    homes.read("a");
    assert_eq!(homes.kept_files().len(), 1);
    fs::remove_file(homes.file("a")).unwrap();
    fs::write(homes.file("b"), heavy_session("b", &["bravo"], HEAVY)).unwrap();
    homes.read("b");
    let kept = homes.kept_files();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let body = fs::read(&kept[0]).unwrap();
    let has = |text: &[u8]| body.windows(text.len()).any(|w| w == text);
    assert!(
        has(b"bravo") && !has(b"alpha"),
        "{}",
        String::from_utf8_lossy(&body)
    );
}

/// `bytes` with every `from` replaced by `to` (of the same length).
fn replace_bytes(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut at = 0;
    while let Some(k) = out[at..].windows(from.len()).position(|w| w == from) {
        out[at + k..at + k + from.len()].copy_from_slice(to);
        at += k + from.len();
    }
    out
}

/// Appends `text` to `path`.
fn append(path: &std::path::Path, text: &str) {
    let mut file = fs::File::options().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

#[test]
fn a_grown_heavy_session_is_read_from_where_the_last_read_ended() {
    let homes = Homes::new();
    let text = heavy_session("h", &["first", "second"], HEAVY);
    fs::write(homes.file("h"), &text).unwrap();
    homes.read("h");
    let file_len = text.len() as u64;

    // A reply, then a rewind: a new prompt whose parent is the first answer (a new branch),
    // then a write in flight (no newline yet).
    let tail = concat!(
        r#"{"type":"assistant","uuid":"a9","parentUuid":"a1","sessionId":"h","cwd":"/w","timestamp":"2026-01-01T00:00:09Z","message":{"id":"m9","role":"assistant","content":[{"type":"text","text":"more"}]}}"#,
        "\n",
        r#"{"type":"user","uuid":"u8","parentUuid":"a0","sessionId":"h","cwd":"/w","timestamp":"2026-01-01T00:00:10Z","message":{"role":"user","content":"rewound"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a8","parentUuid":"u8","sessionId":"h","#,
    );
    append(&homes.file("h"), tail);
    let before = thread_read_bytes();
    let grown = homes.read("h");
    let read = thread_read_bytes() - before;
    assert_eq!(grown, homes.fresh("h"));
    assert_eq!(
        texts(&grown),
        ["first", "answer to first", "rewound"],
        "the new branch"
    );
    assert!(
        read < file_len / 8,
        "read {read} bytes of a {file_len}-byte session that grew"
    );

    // The line in flight completes: it is read then, and the next process has it kept.
    append(
        &homes.file("h"),
        concat!(
            r#""cwd":"/w","timestamp":"2026-01-01T00:00:11Z","message":{"id":"m8","role":"assistant","content":[{"type":"text","text":"after the rewind"}]}}"#,
            "\n"
        ),
    );
    let done = homes.read("h");
    assert_eq!(done, homes.fresh("h"));
    assert_eq!(texts(&done).last(), Some(&"after the rewind"));
    assert_eq!(homes.read("h"), done);
}

/// Every file kept for the sessions (documents and scans), with its bytes.
fn kept_bytes(homes: &Homes) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(homes.kept_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.clone(), fs::read(&p).unwrap()))
        .collect();
    out.sort();
    out
}

#[test]
fn a_short_tail_leaves_what_was_kept_and_a_long_one_keeps_again() {
    let homes = Homes::new();
    let text = heavy_session("h", &["first", "second"], HEAVY);
    fs::write(homes.file("h"), &text).unwrap();
    homes.read("h");
    let before = kept_bytes(&homes);
    assert!(before.len() >= 2, "a document and its scan: {before:?}");

    // A prompt appended: read (from the kept scan) and right, and nothing kept is rewritten.
    append(
        &homes.file("h"),
        concat!(
            r#"{"type":"user","uuid":"u7","parentUuid":"a1","sessionId":"h","cwd":"/w","timestamp":"2026-01-01T00:00:07Z","message":{"role":"user","content":"third"}}"#,
            "\n"
        ),
    );
    let short = homes.read("h");
    assert_eq!(short, homes.fresh("h"));
    assert_eq!(texts(&short).last(), Some(&"third"));
    assert!(
        kept_bytes(&homes) == before,
        "a short tail rewrote what was kept"
    );
    // The next process reads that tail again, to the same conversation.
    assert_eq!(homes.read("h"), short);

    // A tool result of 5 MB and an answer: a tail that long is kept again, and the process
    // after reads only what follows it.
    let blob = "y\\n".repeat(5 << 19);
    append(
        &homes.file("h"),
        &format!(
            concat!(
                r#"{{"type":"user","uuid":"r7","parentUuid":"u7","sessionId":"h","cwd":"/w","timestamp":"2026-01-01T00:00:08Z","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t7","content":"{}"}}]}}}}"#,
                "\n",
                r#"{{"type":"assistant","uuid":"a7","parentUuid":"r7","sessionId":"h","cwd":"/w","timestamp":"2026-01-01T00:00:09Z","message":{{"id":"m7","role":"assistant","content":[{{"type":"text","text":"after the tool"}}]}}}}"#,
                "\n"
            ),
            blob
        ),
    );
    let long = homes.read("h");
    assert_eq!(long, homes.fresh("h"));
    assert_eq!(texts(&long).last(), Some(&"after the tool"));
    assert!(
        kept_bytes(&homes) != before,
        "a long tail was not kept again"
    );
    let file_len = fs::metadata(homes.file("h")).unwrap().len();
    let read_before = thread_read_bytes();
    assert_eq!(homes.read("h"), long);
    let read = thread_read_bytes() - read_before;
    assert!(read < file_len / 8, "read {read} of {file_len}");
}

#[test]
fn a_grown_heavy_codex_rollout_is_read_from_where_the_last_read_ended() {
    let dir = tempfile::tempdir().unwrap();
    let codex = dir.path().join("codex");
    let dsh = dir.path().join("dsh");
    let day = codex.join("sessions/2026/05/11");
    fs::create_dir_all(&day).unwrap();
    fs::create_dir_all(&dsh).unwrap();
    let id = "019e1625-789d-76c0-80ab-3724b5ddb799";
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/data/fixtures/codex/sessions/2026/05/11/rollout-2026-05-11T11-26-55-{id}.jsonl"
    ));
    let path = day.join(fixture.file_name().unwrap());
    // The real rollout, then tool output heavy enough to be kept.
    let mut text = fs::read_to_string(&fixture).unwrap();
    let blob = "x\\ty \\\"z\\\"\\n".repeat(HEAVY / 10);
    for n in 0..3 {
        text += &format!(
            r#"{{"timestamp":"2026-05-11T09:00:0{n}.000Z","type":"response_item","payload":{{"type":"function_call_output","call_id":"c{n}","output":"{blob}"}}}}"#
        );
        text += "\n";
    }
    fs::write(&path, &text).unwrap();
    let full = format!("codex:{id}");
    let read = || {
        let source = ExternalSessions::with_listing_cache(ExternalAgent::Codex, &codex, &dsh);
        source.list_sessions_blocking().unwrap();
        let conversation = source.read_conversation_blocking(&full).unwrap().1;
        source.flush();
        conversation
    };
    let fresh = || {
        let source = ExternalSessions::new(ExternalAgent::Codex, &codex);
        source.list_sessions_blocking().unwrap();
        source.read_conversation_blocking(&full).unwrap().1
    };
    let first = read();
    assert!(!first.items.is_empty());
    // A prompt, an answer, then the prompt rolled back.
    append(
        &path,
        concat!(
            r#"{"timestamp":"2026-05-11T10:00:00.000Z","type":"event_msg","payload":{"type":"user_message","message":"one more thing"}}"#,
            "\n",
            r#"{"timestamp":"2026-05-11T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"sure"}]}}"#,
            "\n",
        ),
    );
    let before = thread_read_bytes();
    let grown = read();
    let bytes = thread_read_bytes() - before;
    assert_eq!(grown, fresh());
    assert_eq!(
        texts(&grown)[texts(&grown).len() - 2..],
        ["one more thing", "sure"]
    );
    assert!(
        bytes < text.len() as u64 / 8,
        "read {bytes} of {}",
        text.len()
    );
    append(
        &path,
        concat!(
            r#"{"timestamp":"2026-05-11T10:00:02.000Z","type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}"#,
            "\n"
        ),
    );
    let rolled = read();
    assert_eq!(rolled, fresh());
    assert_eq!(rolled.items, first.items);
}

/// Each fixture file a Claude Code or Codex scan takes (a Codex rollout is a `.jsonl` file
/// too: each agent reads what it takes for one), with the agent, the conversation one read of
/// the whole file gives, and the file's bytes; answers how many each agent took.
fn each_fixture_session(
    mut each: impl FnMut(&std::path::Path, ExternalAgent, Conversation, &[u8]),
) -> [usize; 2] {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures");
    let mut stack = vec![fixtures];
    let mut checked = [0, 0];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            for (at, agent) in [ExternalAgent::Claude, ExternalAgent::Codex]
                .into_iter()
                .enumerate()
            {
                let format = agent.format();
                if !format.is_session_file(&path) {
                    continue;
                }
                let Ok(whole) = format.read_conversation(&path) else {
                    continue;
                };
                each(&path, agent, whole, &fs::read(&path).unwrap());
                checked[at] += 1;
            }
        }
    }
    checked
}

/// Every Claude Code and Codex fixture, its conversation scan saved, restored and fed the rest
/// at several cuts: the same conversation as one read of the whole file.
#[test]
fn a_scan_saved_and_resumed_anywhere_gives_the_whole_reads_conversation() {
    let checked = each_fixture_session(|path, agent, whole, bytes| {
        let format = agent.format();
        let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        let n = lines.len();
        for cut in [0, 1, n / 3, n / 2, n.saturating_sub(2), n] {
            let mut scan = format.conversation_scan(None).unwrap();
            for (i, line) in lines.iter().enumerate().take(cut) {
                if i + 1 < n {
                    scan.line(i as u64, line);
                }
            }
            let saved = scan.save();
            let mut resumed = format.conversation_scan(Some(&saved)).unwrap();
            for (i, line) in lines.iter().enumerate().skip(cut) {
                if i + 1 < n {
                    resumed.line(i as u64, line);
                }
            }
            assert_eq!(resumed.conversation(), whole, "{path:?} cut at line {cut}");
        }
    });
    assert!(checked[0] + checked[1] >= 15, "{checked:?} fixtures");
}

/// Every Claude Code and Codex fixture read in parts (2 to 4, cut at several lines, an empty
/// part too), each part fed to a scan `part()` made and taken in by the first in order: the
/// same conversation as one read of the whole file, and a state that, saved, resumed and fed
/// the last line again, still gives it (the kept scan of a heavy session read in parts goes on
/// as one read's would).
#[test]
fn a_scan_read_in_parts_and_taken_in_gives_the_whole_reads_conversation() {
    let checked = each_fixture_session(|path, agent, whole, bytes| {
        let format = agent.format();
        let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        // The text after the last newline is a line in flight: never fed.
        lines.pop();
        let n = lines.len();
        let cuts: [&[usize]; 6] = [
            &[n / 2],
            &[1, n / 2],
            &[n / 3, 2 * n / 3],
            &[0, n / 4, n / 2, 3 * n / 4],
            &[n / 2, n / 2],
            &[n.saturating_sub(1)],
        ];
        for cut in cuts {
            let mut first = format.conversation_scan(None).unwrap();
            let mut bounds = vec![0];
            bounds.extend(cut.iter().map(|&c| c.min(n)));
            bounds.push(n);
            bounds.sort_unstable();
            for (i, line) in lines.iter().enumerate().take(bounds[1]) {
                first.line(i as u64, line);
            }
            for pair in bounds[1..].windows(2) {
                let mut part = first.part().expect("the scan reads in parts");
                for (i, line) in lines[pair[0]..pair[1]].iter().enumerate() {
                    part.line(i as u64, line);
                }
                assert!(first.absorb(part, pair[0] as u64));
            }
            let saved = first.save();
            assert_eq!(first.conversation(), whole, "{path:?} in parts at {cut:?}");
            if let Some(last) = lines.last() {
                // Resumed from the parts' state and fed the last line once more (a record
                // repeated, as an append can): as the whole read's scan fed it again.
                let mut resumed = format.conversation_scan(Some(&saved)).unwrap();
                resumed.line(n as u64, last);
                let mut again = format.conversation_scan(None).unwrap();
                for (i, line) in lines.iter().enumerate() {
                    again.line(i as u64, line);
                }
                again.line(n as u64, last);
                assert_eq!(
                    resumed.conversation(),
                    again.conversation(),
                    "{path:?} resumed"
                );
            }
        }
    });
    assert!(checked[0] >= 8 && checked[1] >= 4, "{checked:?} fixtures");
}

/// The discovery indexer reads every session through `SessionQuery::read_surface` and puts its
/// text in its index: it keeps a heavy session too, ranked by the session's own activity (its
/// file's mtime), so the first reference after an indexer's pass reads what the pass kept, and
/// that use ranks it now (a later pass keeps the sessions worked in last, never pushing out one
/// referenced since: the unit tests of `conversation_cache`).
#[test]
fn the_indexers_reads_keep_a_heavy_session_ranked_by_its_activity() {
    use dsh_session_references::session::SessionQuery;
    use std::time::{Duration, SystemTime};
    let homes = Homes::new();
    let text = heavy_session("h", &["first"], HEAVY);
    fs::write(homes.file("h"), &text).unwrap();
    let worked_in = SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
    let file = fs::File::options()
        .append(true)
        .open(homes.file("h"))
        .unwrap();
    file.set_modified(worked_in).unwrap();
    drop(file);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let surface = |homes: &Homes| {
        let source =
            ExternalSessions::with_listing_cache(ExternalAgent::Claude, &homes.claude, &homes.dsh);
        source.list_sessions_blocking().unwrap();
        let read = runtime.block_on(source.read_surface("claude:h")).unwrap();
        source.flush();
        read
    };
    let rank = |homes: &Homes| {
        let kept = homes.kept_files();
        assert_eq!(kept.len(), 1, "{kept:?}");
        fs::metadata(&kept[0]).unwrap().modified().unwrap()
    };
    let by_indexer = surface(&homes);
    assert_eq!(rank(&homes), worked_in, "ranked by the session's mtime");

    // The first reference after the pass: from what the pass kept, a small part of the file's
    // bytes, and the same conversation as a fresh read; ranked now.
    let referenced = SystemTime::now() - Duration::from_secs(1);
    let before = thread_read_bytes();
    let conversation = homes.read("h");
    let read = thread_read_bytes() - before;
    assert!(read < text.len() as u64 / 8, "read {read} bytes");
    assert_eq!(conversation, homes.fresh("h"));
    assert!(rank(&homes) >= referenced, "a reference's use ranks it now");
    assert_eq!(surface(&homes), by_indexer);
}
