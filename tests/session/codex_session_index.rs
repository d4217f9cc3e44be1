//! Issue 35: Codex's `session_index.jsonl` is followed by offset between processes, its names
//! kept under the dsh home beside the agents' listing cache.
//!
//! Each "process" is a fresh `ExternalSessions` over the same Codex home and dsh home (nothing
//! shared in memory). What a process read is measured as the bytes its thread read through
//! system calls (`rchar` of `/proc/thread-self/io`), against an index of a few megabytes.

use crate::support::{thread_read_bytes, tree_with_stamps};
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions};
use std::fs;
use std::io::Write;
use std::path::PathBuf;

const THREAD: &str = "11111111-1111-4111-8111-111111111111";
const ID: &str = "codex:11111111-1111-4111-8111-111111111111";
/// Lines of other threads' renames with no name left (an empty `thread_name`): they make the
/// index megabytes long without adding to the names kept.
const FILLER_LINES: usize = 16_000;

fn entry(id: &str, name: &str) -> String {
    format!(r#"{{"id":"{id}","thread_name":"{name}","updated_at":"2026-01-02T03:05:00Z"}}"#) + "\n"
}

fn filler() -> String {
    let pad = "p".repeat(200);
    (0..FILLER_LINES)
        .map(|i| {
            format!(
                r#"{{"id":"00000000-0000-4000-8000-{i:012}","thread_name":"","updated_at":"2026-01-01T00:00:00Z","pad":"{pad}"}}"#
            ) + "\n"
        })
        .collect()
}

struct Homes {
    _dir: tempfile::TempDir,
    codex: PathBuf,
    dsh: PathBuf,
}

impl Homes {
    /// A Codex home with one rollout and an index of [`FILLER_LINES`] other lines, then
    /// `names` for the rollout's thread.
    fn new(names: &[&str]) -> Homes {
        let dir = tempfile::tempdir().unwrap();
        let codex = dir.path().join("codex");
        let dsh = dir.path().join("dsh");
        let day = codex.join("sessions/2026/01/02");
        fs::create_dir_all(&day).unwrap();
        fs::create_dir_all(&dsh).unwrap();
        let rollout = concat!(
            r#"{"timestamp":"2026-01-02T03:04:05.000Z","type":"session_meta","payload":{"id":"11111111-1111-4111-8111-111111111111","timestamp":"2026-01-02T03:04:05.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.146.0"}}"#,
            "\n",
            r#"{"timestamp":"2026-01-02T03:04:06.000Z","type":"event_msg","payload":{"type":"user_message","message":"the first prompt"}}"#,
            "\n",
        );
        fs::write(
            day.join(format!("rollout-2026-01-02T03-04-05-{THREAD}.jsonl")),
            rollout,
        )
        .unwrap();
        let mut index = filler();
        for name in names {
            index.push_str(&entry(THREAD, name));
        }
        fs::write(codex.join("session_index.jsonl"), index).unwrap();
        Homes {
            _dir: dir,
            codex,
            dsh,
        }
    }

    fn index(&self) -> PathBuf {
        self.codex.join("session_index.jsonl")
    }

    fn append(&self, text: &str) {
        fs::File::options()
            .append(true)
            .open(self.index())
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    /// A new process: it lists, then reads the thread's title. Answers the title and the bytes
    /// the title read took.
    fn title(&self) -> (Option<String>, u64) {
        let source =
            ExternalSessions::with_listing_cache(ExternalAgent::Codex, &self.codex, &self.dsh);
        let list = source.list_sessions_blocking().unwrap();
        assert_eq!(list.len(), 1);
        let before = thread_read_bytes();
        let title = source.read_title_blocking(ID).unwrap();
        let read = thread_read_bytes() - before;
        source.flush();
        (title, read)
    }

    /// The kept names under the dsh home (the only `.session-index.bin` there).
    fn kept(&self) -> PathBuf {
        let dir = self.dsh.join("index").join("agents");
        let kept: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".session-index.bin"))
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        kept.into_iter().next().unwrap()
    }

    fn index_len(&self) -> u64 {
        fs::metadata(self.index()).unwrap().len()
    }
}

/// Far less than the index: only a small part of it (or none) was read.
fn small_part_of(homes: &Homes, read: u64) -> bool {
    read < homes.index_len() / 8
}

#[test]
fn an_unchanged_index_is_not_read_by_a_new_process_and_a_grown_one_only_from_its_end() {
    let homes = Homes::new(&["first name"]);
    let before = tree_with_stamps(&homes.codex);
    let (title, read) = homes.title();
    assert_eq!(title.as_deref(), Some("first name"));
    assert!(
        read >= homes.index_len(),
        "the first process read {read} bytes"
    );

    let (title, read) = homes.title();
    assert_eq!(title.as_deref(), Some("first name"));
    assert!(
        small_part_of(&homes, read),
        "an unchanged index: {read} bytes read"
    );

    homes.append(&entry(THREAD, "renamed"));
    let (title, read) = homes.title();
    assert_eq!(title.as_deref(), Some("renamed"));
    assert!(
        small_part_of(&homes, read),
        "an index that grew: {read} bytes read"
    );
    // An empty name does not undo the last one (the index's own rule).
    homes.append(&entry(THREAD, ""));
    assert_eq!(homes.title().0.as_deref(), Some("renamed"));

    let mut after = tree_with_stamps(&homes.codex);
    let index = homes.index();
    // The index itself is the test's own appends; everything else is byte for byte as it was.
    assert!(after.remove(&index).is_some());
    let mut before = before;
    before.remove(&index);
    assert_eq!(before, after, "something under the Codex home changed");
}

#[test]
fn a_name_appended_shows_in_the_next_process_even_after_a_half_written_line() {
    let homes = Homes::new(&[]);
    assert_eq!(homes.title().0.as_deref(), Some("the first prompt"));
    let line = entry(THREAD, "named at last");
    let (head, tail) = line.split_at(30);
    homes.append(head);
    assert_eq!(homes.title().0.as_deref(), Some("the first prompt"));
    homes.append(tail);
    let (title, read) = homes.title();
    assert_eq!(title.as_deref(), Some("named at last"));
    assert!(small_part_of(&homes, read), "{read} bytes read");
}

#[test]
fn a_truncated_or_replaced_index_is_read_whole() {
    let homes = Homes::new(&["first name"]);
    assert_eq!(homes.title().0.as_deref(), Some("first name"));
    // Truncated (same inode, shorter): read whole, so the old name is gone.
    fs::write(homes.index(), entry(THREAD, "after truncation")).unwrap();
    assert_eq!(homes.title().0.as_deref(), Some("after truncation"));
    // Replaced by a longer file (another inode): read whole, not from the old offset.
    let replacement = homes.codex.join("replacement.tmp");
    let text = filler() + &entry(THREAD, "after replacement");
    fs::write(&replacement, text).unwrap();
    fs::rename(&replacement, homes.index()).unwrap();
    let (title, read) = homes.title();
    assert_eq!(title.as_deref(), Some("after replacement"));
    assert!(
        read >= homes.index_len(),
        "a replaced index: {read} bytes read"
    );
    // Removed: the name goes with it.
    fs::remove_file(homes.index()).unwrap();
    assert_eq!(homes.title().0.as_deref(), Some("the first prompt"));
}

#[test]
fn a_damaged_kept_file_is_refused_and_rebuilt() {
    let homes = Homes::new(&["first name"]);
    let before = tree_with_stamps(&homes.codex);
    homes.title();
    let kept = homes.kept();
    assert!(kept.starts_with(homes.dsh.join("index")));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&kept).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let good = fs::read(&kept).unwrap();
    // A damaged kept name ("first name" → "first nbme") must not be shown.
    let at = good
        .windows(10)
        .position(|w| w == b"first name")
        .expect("the name in the kept file");
    let mut damaged = good.clone();
    damaged[at + 7] = b'b';
    fs::write(&kept, &damaged).unwrap();
    let (title, read) = homes.title();
    assert_eq!(title.as_deref(), Some("first name"));
    assert!(
        read >= homes.index_len(),
        "refused, so read whole: {read} bytes"
    );
    assert_eq!(fs::read(&kept).unwrap(), good, "rebuilt as it was");
    // A kept file of another Codex home is refused too.
    let other = Homes::new(&["other name"]);
    other.title();
    fs::copy(other.kept(), &kept).unwrap();
    assert_eq!(homes.title().0.as_deref(), Some("first name"));
    assert_eq!(fs::read(&kept).unwrap(), good);
    assert_eq!(before, tree_with_stamps(&homes.codex));
}

/// What Codex's state database said of its threads is kept between processes by the stamps of
/// the database and its log (the real Codex fixture's database, with its log): a new process
/// with both unchanged opens no database (it reads a small part of the database's bytes), and
/// a rename written to the database is seen by the next process. Nothing under the Codex home
/// changes but the test's own rename.
#[test]
fn a_new_process_uses_the_kept_state_titles_until_the_database_changes() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fixtures/real-agents-claude-2.1.197/codex");
    let dir = tempfile::tempdir().unwrap();
    let (codex, dsh) = (dir.path().join("codex"), dir.path().join("dsh"));
    crate::support::copy_tree(&fixture, &codex);
    fs::create_dir_all(&dsh).unwrap();
    let (db, log) = (
        codex.join("state_5.sqlite"),
        codex.join("state_5.sqlite-wal"),
    );
    assert!(log.exists(), "the fixture's database has its log");
    // Settled: a database written a moment ago is read again by each process.
    let settle = |path: &std::path::Path| {
        let file = fs::File::options().append(true).open(path).unwrap();
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        file.set_modified(past).unwrap();
    };
    settle(&db);
    settle(&log);
    // A new process: every session's title, and the bytes the title reads took.
    let titles = || {
        let source = ExternalSessions::with_listing_cache(ExternalAgent::Codex, &codex, &dsh);
        let list = source.list_sessions_blocking().unwrap();
        let before = thread_read_bytes();
        let titles: Vec<(String, Option<String>)> = list
            .iter()
            .map(|s| {
                (
                    s.id().to_string(),
                    source.read_title_blocking(s.id()).unwrap(),
                )
            })
            .collect();
        let read = thread_read_bytes() - before;
        source.flush();
        (titles, read)
    };
    let (first, _) = titles();
    let exec = first
        .iter()
        .find(|(_, title)| title.as_deref() == Some("codex epsilon first TOOL THINK"))
        .map(|(id, _)| id.clone())
        .expect("the state database's title");
    let kept = dsh.join("index/agents");
    let kept_files = || {
        fs::read_dir(&kept)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .to_string_lossy()
                    .ends_with(".state-titles.bin")
            })
            .count()
    };
    assert_eq!(kept_files(), 1);

    let home_before = tree_with_stamps(&codex);
    let (second, read) = titles();
    assert_eq!(second, first);
    let db_bytes = fs::metadata(&db).unwrap().len() + fs::metadata(&log).unwrap().len();
    assert!(
        read < db_bytes / 4,
        "read {read} bytes of a {db_bytes}-byte database"
    );
    assert!(
        tree_with_stamps(&codex) == home_before,
        "the Codex home changed"
    );

    // A rename in the database (folded into the main file, the log gone): seen at once.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let own = exec.strip_prefix("codex:").unwrap();
    conn.execute(
        "UPDATE threads SET name = ?1 WHERE id = ?2",
        ("renamed in the db", own),
    )
    .unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(conn);
    let (third, _) = titles();
    let renamed = third.iter().find(|(id, _)| *id == exec).unwrap();
    assert_eq!(renamed.1.as_deref(), Some("renamed in the db"));
}
