//! Issue 35 item 3: a heavy agent session's projected conversation is kept between processes
//! under the dsh home, and what a new process reads from it is what a fresh read of the file
//! gives; any change to the file (an append, a truncation, a replacement) is read again.
//!
//! Each "process" is a fresh `ExternalSessions` over the same homes (nothing shared in
//! memory). That the kept projection is used is proved by the bytes the reading thread read
//! (the kernel's count), a small part of the session file's.

use crate::support::tree_with_stamps;
use dsh_session_references::session::external::{Conversation, ExternalAgent, ExternalSessions};
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
            Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
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
    // count, from the kernel): neither the session file nor the listing.
    let file_len = text.len() as u64;
    let before = thread_read_bytes();
    assert_eq!(homes.read("h"), first);
    let read = thread_read_bytes() - before;
    assert!(
        read < file_len / 8,
        "read {read} bytes of a {file_len}-byte session"
    );
    // Without what was kept, the same read takes the whole file.
    let before = thread_read_bytes();
    assert_eq!(homes.fresh("h"), first);
    assert!(thread_read_bytes() - before >= file_len);

    // A status change (here a `chmod`) makes the file read again.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(homes.file("h"), fs::Permissions::from_mode(0o600)).unwrap();
    let before = thread_read_bytes();
    assert_eq!(homes.read("h"), first);
    assert!(
        thread_read_bytes() - before >= file_len,
        "a chmod must make the file read again"
    );
}

/// The bytes this thread has read through system calls so far (`rchar` of
/// `/proc/thread-self/io`).
fn thread_read_bytes() -> u64 {
    let io = fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
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
    let forged = String::from_utf8(good.clone())
        .unwrap()
        .replace("answer to first", "answer to FORGE");
    for damage in [
        forged.into_bytes(),
        good[..good.len() / 2].to_vec(),
        b"\0\xff".to_vec(),
    ] {
        fs::write(&kept, damage).unwrap();
        assert_eq!(texts(&homes.read("h")), ["first", "answer to first"]);
        assert_eq!(
            fs::read(&kept).unwrap(),
            good,
            "a fresh read keeps a good copy again"
        );
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
    let body = fs::read_to_string(&kept[0]).unwrap();
    assert!(body.contains("bravo") && !body.contains("alpha"), "{body}");
}
