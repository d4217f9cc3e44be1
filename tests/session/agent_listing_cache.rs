//! Issue 35: every agent's listing is kept between processes under the dsh home, and the
//! listing a new process gives from it is the listing a full read gives.
//!
//! Each "process" here is a fresh `ExternalSessions` over the same agent home and dsh home (no
//! state shared in memory); the tests that re-read nothing prove it by rewriting a file in place
//! with its stamp kept, which only a source that trusts the cache's stamps misses.

use crate::support::tree_with_stamps;
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

fn record(id: &str, uuid: &str, prompt: &str) -> String {
    format!(
        r#"{{"type":"user","uuid":"{uuid}","parentUuid":null,"sessionId":"{id}","cwd":"/w","timestamp":"2026-01-01T00:00:00Z","message":{{"role":"user","content":"{prompt}"}}}}"#
    ) + "\n"
}

struct Homes {
    _dir: tempfile::TempDir,
    claude: PathBuf,
    dsh: PathBuf,
}

impl Homes {
    fn new(sessions: &[(&str, &str)]) -> Homes {
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join("claude");
        let dsh = dir.path().join("dsh");
        fs::create_dir_all(claude.join("projects").join("-w")).unwrap();
        fs::create_dir_all(&dsh).unwrap();
        let homes = Homes {
            _dir: dir,
            claude,
            dsh,
        };
        for (id, prompt) in sessions {
            fs::write(homes.file(id), record(id, "u1", prompt)).unwrap();
        }
        // Directory stamps younger than the settle window are read again anyway; age them so
        // the cache's checks, not the window, decide.
        homes.age();
        homes
    }

    fn file(&self, id: &str) -> PathBuf {
        self.claude
            .join("projects")
            .join("-w")
            .join(format!("{id}.jsonl"))
    }

    fn age(&self) {
        let old = SystemTime::now() - Duration::from_secs(60);
        let dir = self.claude.join("projects").join("-w");
        for entry in fs::read_dir(&dir).unwrap() {
            let file = fs::File::options()
                .append(true)
                .open(entry.unwrap().path())
                .unwrap();
            file.set_modified(old).unwrap();
        }
        for d in [dir.clone(), self.claude.join("projects")] {
            fs::File::open(&d).unwrap().set_modified(old).unwrap();
        }
    }

    /// A new process's source over these homes.
    fn process(&self) -> ExternalSessions {
        ExternalSessions::with_listing_cache(ExternalAgent::Claude, &self.claude, &self.dsh)
    }

    /// The listing with titles, as `(id, title)` pairs, then the process ends (flushes).
    fn listing(&self) -> Vec<(String, Option<String>)> {
        let source = self.process();
        let out = source
            .list_sessions_blocking()
            .unwrap()
            .iter()
            .map(|s| {
                let id = s.id().to_string();
                let title = source.read_title_blocking(&id).unwrap();
                (id, title)
            })
            .collect::<Vec<_>>();
        source.flush();
        let mut out = out;
        out.sort();
        out
    }
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
    let mut out: Vec<_> = items
        .iter()
        .map(|(id, t)| (format!("claude:{id}"), Some(t.to_string())))
        .collect();
    out.sort();
    out
}

/// Rewrites `path` in place (same inode, same length) and gives it back its modification time:
/// only a reader that trusts the stamp it remembered misses the change.
fn rewrite_keeping_stamp(path: &Path, bytes: &[u8]) {
    let modified = fs::metadata(path).unwrap().modified().unwrap();
    assert_eq!(fs::metadata(path).unwrap().len(), bytes.len() as u64);
    let mut file = fs::File::options().write(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
    file.set_modified(modified).unwrap();
}

#[test]
fn a_new_process_lists_from_the_cache_without_reading_the_files() {
    let homes = Homes::new(&[("a", "alpha prompt"), ("b", "bravo prompt")]);
    let before = homes.listing();
    assert_eq!(
        before,
        pairs(&[("a", "alpha prompt"), ("b", "bravo prompt")])
    );
    let cache = homes.process().listing_cache_path().unwrap().to_path_buf();
    assert!(cache.starts_with(homes.dsh.join("index")), "{cache:?}");
    assert!(cache.is_file());
    // Same length, same inode, same mtime: a process that read the file would see "zulu".
    rewrite_keeping_stamp(
        &homes.file("a"),
        record("a", "u1", "zulu prompt!").as_bytes(),
    );
    assert_eq!(homes.listing(), before, "the cache was not used");
    // A source without the cache reads the file and sees the rewrite (the test can fail).
    let uncached = ExternalSessions::new(ExternalAgent::Claude, &homes.claude);
    uncached.list_sessions_blocking().unwrap();
    assert_eq!(
        uncached.read_title_blocking("claude:a").unwrap().as_deref(),
        Some("zulu prompt!")
    );
}

#[test]
fn a_dsh_home_not_made_yet_is_made_owner_only_to_keep_the_listing() {
    // Someone who has only used Claude Code: no dsh home at all. The first process makes it
    // (owner-only) to keep its listing, and the next one lists from it.
    let homes = Homes::new(&[("a", "alpha prompt")]);
    fs::remove_dir(&homes.dsh).unwrap();
    let before = homes.listing();
    assert_eq!(before, pairs(&[("a", "alpha prompt")]));
    let cache = homes.process().listing_cache_path().unwrap().to_path_buf();
    assert!(
        cache.is_file(),
        "nothing kept in a dsh home that did not exist"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&homes.dsh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }
    rewrite_keeping_stamp(
        &homes.file("a"),
        record("a", "u1", "zulu prompt!").as_bytes(),
    );
    assert_eq!(homes.listing(), before, "the kept listing was not used");
}

#[test]
fn a_title_appended_shows_in_the_next_process() {
    let homes = Homes::new(&[("a", "alpha prompt"), ("b", "bravo prompt")]);
    homes.listing();
    let mut file = fs::File::options()
        .append(true)
        .open(homes.file("b"))
        .unwrap();
    file.write_all(
        b"{\"type\":\"custom-title\",\"customTitle\":\"Named by me\",\"sessionId\":\"b\"}\n",
    )
    .unwrap();
    drop(file);
    assert_eq!(
        homes.listing(),
        pairs(&[("a", "alpha prompt"), ("b", "Named by me")])
    );
    // And the process after that one has it from the cache.
    assert_eq!(
        homes.listing(),
        pairs(&[("a", "alpha prompt"), ("b", "Named by me")])
    );
}

#[test]
fn a_truncated_a_replaced_and_a_deleted_file_are_read_again_or_gone() {
    let homes = Homes::new(&[
        ("a", "alpha prompt"),
        ("b", "bravo prompt"),
        ("c", "charlie"),
    ]);
    homes.listing();
    // Truncated in place (same inode, shorter) and written again with another first prompt.
    fs::write(homes.file("a"), record("a", "u1", "new")).unwrap();
    // Replaced by a rename (another inode), same length as before.
    let staged = homes.file("b").with_extension("tmp");
    fs::write(&staged, record("b", "u1", "other prompt")).unwrap();
    fs::rename(&staged, homes.file("b")).unwrap();
    fs::remove_file(homes.file("c")).unwrap();
    assert_eq!(
        homes.listing(),
        pairs(&[("a", "new"), ("b", "other prompt")])
    );
}

#[test]
fn a_damaged_or_foreign_cache_is_rebuilt_never_trusted() {
    let homes = Homes::new(&[("a", "alpha prompt")]);
    homes.listing();
    let cache = homes.process().listing_cache_path().unwrap().to_path_buf();
    let good = fs::read(&cache).unwrap();
    // A cache claiming a session that is not there, with a valid-looking body but a bad sum.
    let at = good
        .windows(b"alpha prompt".len())
        .position(|w| w == b"alpha prompt")
        .expect("the title state is in the cache");
    let mut forged = good.clone();
    forged[at..at + 12].copy_from_slice(b"forged title");
    fs::write(&cache, forged).unwrap();
    rewrite_keeping_stamp(
        &homes.file("a"),
        record("a", "u1", "bravo prompt").as_bytes(),
    );
    assert_eq!(homes.listing(), pairs(&[("a", "bravo prompt")]));
    // The process rewrote it valid: the next one trusts it again.
    assert_ne!(fs::read(&cache).unwrap(), good);
    assert_eq!(homes.listing(), pairs(&[("a", "bravo prompt")]));
    // Garbage and an empty file are rebuilt the same way.
    for bytes in [&b"garbage"[..], b""] {
        fs::write(&cache, bytes).unwrap();
        assert_eq!(homes.listing(), pairs(&[("a", "bravo prompt")]));
    }
}

#[test]
fn nothing_is_written_under_the_agent_home() {
    let homes = Homes::new(&[("a", "alpha prompt"), ("b", "bravo prompt")]);
    let before = tree_with_stamps(&homes.claude);
    homes.listing();
    homes.listing();
    let mut file = fs::File::options()
        .append(true)
        .open(homes.file("a"))
        .unwrap();
    file.write_all(record("a", "u2", "more").as_bytes())
        .unwrap();
    drop(file);
    let grown = tree_with_stamps(&homes.claude);
    homes.listing();
    assert_eq!(tree_with_stamps(&homes.claude), grown);
    assert_ne!(before, grown);
}

/// A new process that reads one session before listing takes the file and its head from the
/// cache (the head read when the file was listed, as the listing itself shows it), and reads
/// only the conversation from the file: the head written in place with the stamp kept is not
/// seen, the conversation is. A process that listed first reads the head from the file.
#[test]
fn a_new_process_reads_one_session_with_the_head_the_cache_holds() {
    let homes = Homes::new(&[("a", "alpha prompt")]);
    homes.listing();
    let rewritten = record("a", "u1", "zulu prompt!").replace(r#""cwd":"/w""#, r#""cwd":"/z""#);
    rewrite_keeping_stamp(&homes.file("a"), rewritten.as_bytes());
    let read = |list_first: bool| {
        let source = homes.process();
        if list_first {
            source.list_sessions_blocking().unwrap();
        }
        let (surface, conversation) = source.read_conversation_blocking("claude:a").unwrap();
        let text: Vec<String> = conversation.items.iter().map(|i| i.text.clone()).collect();
        (surface.session.cwd.clone(), text)
    };
    let zulu = vec!["zulu prompt!".to_string()];
    assert_eq!(read(false), (Some("/w".into()), zulu.clone()));
    // A source without the cache reads the new head (the test can fail).
    let uncached = ExternalSessions::new(ExternalAgent::Claude, &homes.claude);
    uncached.list_sessions_blocking().unwrap();
    let (surface, _) = uncached.read_conversation_blocking("claude:a").unwrap();
    assert_eq!(surface.session.cwd.as_deref(), Some("/z"));
    // So does a process that listed first.
    assert_eq!(read(true), (Some("/z".into()), zulu));
}
