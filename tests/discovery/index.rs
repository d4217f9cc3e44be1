//! The discovery index on disk (SPEC §8): built from a home, brought up to date incrementally,
//! rebuilt when damaged or foreign, shared by two connections and by a second process, and
//! covering other agents' sessions.

use crate::support::user;
use dsh_session_references::discovery::{db_path, SCHEMA_VERSION};
use dsh_session_references::discovery::{
    Discovery, Field, FileStamper, Indexer, SearchQuery, SearchResult,
};
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions, SourceSet};
use dsh_session_references::session::surface::compaction_replace;
use dsh_session_references::session::{
    BoxFuture, ContentBlock, DiskStore, Encoding, EventData, Message, MessageSource, NewEvent,
    SessionError, SessionHeader, SessionQuery, SessionSummary, SessionWriter, SurfaceSnapshot,
};
use serde_json::Map;
use std::path::{Path, PathBuf};
use std::sync::Arc;

type SessionResult<T> = Result<T, dsh_session_references::session::SessionError>;

fn assistant(blocks: Vec<ContentBlock>) -> NewEvent {
    EventData::AssistantMessage {
        turn: 1.into(),
        step: 1.into(),
        message: Message::new(
            "assistant",
            blocks,
            MessageSource::model("p", "m"),
            format!("a-{}", uuid_ish()),
        ),
        extra: Map::new(),
    }
    .into()
}

fn uuid_ish() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

fn tool_result(output: &str) -> NewEvent {
    EventData::ToolResult {
        turn: 1.into(),
        step: 1.into(),
        message: Message::new(
            "user",
            vec![ContentBlock::ToolResult {
                tool_call_id: "call-1".into(),
                content: vec![ContentBlock::text(output)],
                is_error: None,
                extra: Map::new(),
            }],
            MessageSource::Tool {
                call_id: "call-1".into(),
                extra: Map::new(),
            },
            format!("t-{}", uuid_ish()),
        ),
        extra: Map::new(),
    }
    .into()
}

fn title(text: &str) -> NewEvent {
    EventData::SessionTitle {
        title: text.into(),
        message_seqs: vec![],
        source: serde_json::json!({"kind": "generated"}),
        extra: Map::new(),
    }
    .into()
}

fn session(home: &Path, id: &str, cwd: &str, created: i64, batch: Vec<NewEvent>) -> PathBuf {
    let header = SessionHeader::new(id, created, Some(cwd.to_string()));
    let mut writer = SessionWriter::create(home, header, Encoding::Zstd).unwrap();
    writer.append(batch).unwrap();
    writer.path().to_path_buf()
}

fn search(d: &Discovery, text: &str) -> SearchResult {
    d.search_blocking(
        &SearchQuery {
            text: text.into(),
            limit: 50,
            now_ms: 1_800_000_000_000,
            snippets: true,
            ..SearchQuery::default()
        },
        None,
    )
    .unwrap()
}

fn ids(result: &SearchResult) -> Vec<String> {
    result.hits.iter().map(|h| h.id.clone()).collect()
}

/// Three sessions: a titled one whose tool output and reasoning hold words no search may find.
fn small_home(home: &Path) -> PathBuf {
    let fix = session(
        home,
        "s-fix",
        "/w/parser",
        1_700_000_000_000,
        vec![
            user("the tokenizer drops the last byte"),
            assistant(vec![
                ContentBlock::Reasoning {
                    text: "secretreasoningword".into(),
                    extra: Map::new(),
                },
                ContentBlock::text("I will look at the lexer buffer"),
            ]),
            tool_result("zebraoutput in the tool output"),
            title("Fix the flaky tokenizer test"),
        ],
    );
    session(
        home,
        "s-dark",
        "/w/web",
        1_700_000_100_000,
        vec![
            user("add a dark mode toggle to settings"),
            title("Dark mode"),
        ],
    );
    session(home, "s-empty", "/w/infra", 1_700_000_200_000, vec![]);
    fix
}

#[test]
fn a_home_is_indexed_with_its_projected_conversation_only() {
    let dir = tempfile::tempdir().unwrap();
    small_home(dir.path());
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    let stats = d.refresh_blocking().unwrap();
    assert_eq!((stats.listed, stats.indexed, stats.failed), (3, 3, 0));
    assert!(db_path(dir.path()).is_file());

    assert_eq!(ids(&search(&d, "lexer buffer")), ["s-fix"]);
    assert_eq!(ids(&search(&d, "tokenizer"))[0], "s-fix");
    assert!(search(&d, "zebraoutput").hits.is_empty(), "tool output");
    assert!(
        search(&d, "secretreasoningword").hits.is_empty(),
        "reasoning"
    );

    let hit = &search(&d, "lexer").hits[0];
    assert_eq!(hit.title.as_deref(), Some("Fix the flaky tokenizer test"));
    assert_eq!(
        hit.first_prompt.as_deref(),
        Some("the tokenizer drops the last byte")
    );
    assert_eq!(hit.cwd.as_deref(), Some("/w/parser"));
    assert_eq!(hit.messages, 2);
    assert_eq!(
        hit.conversation_bytes,
        ("the tokenizer drops the last byte".len() + "I will look at the lexer buffer".len())
            as u64
    );
    assert!(hit.last_activity >= hit.created_at);
    assert!(
        hit.snippet.as_deref().unwrap().contains("lexer"),
        "{:?}",
        hit.snippet
    );
    // An empty query lists every session.
    assert_eq!(search(&d, "").total, 3);

    // Nothing changed: nothing is read again.
    let again = d.refresh_blocking().unwrap();
    assert_eq!((again.listed, again.indexed), (3, 0));
}

#[test]
fn a_grown_log_is_indexed_from_where_it_stopped_and_a_compaction_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_home(dir.path());
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    d.refresh_blocking().unwrap();

    let (mut writer, _) = SessionWriter::open(&path).unwrap();
    writer.append(vec![user("now about the quokka")]).unwrap();
    let stats = d.refresh_blocking().unwrap();
    assert_eq!((stats.indexed, stats.appended), (1, 1), "{stats:?}");
    assert_eq!(ids(&search(&d, "quokka")), ["s-fix"]);
    assert_eq!(ids(&search(&d, "lexer")), ["s-fix"], "earlier text kept");
    assert_eq!(search(&d, "quokka").hits[0].messages, 3);

    // A title change alone is picked up too.
    writer.append(vec![title("Quokka tokenizer")]).unwrap();
    d.refresh_blocking().unwrap();
    assert_eq!(
        search(&d, "quokka").hits[0].title.as_deref(),
        Some("Quokka tokenizer")
    );

    // Compact everything: shadowed text leaves the index, the checkpoint enters it.
    let surface: Vec<u64> =
        dsh_session_references::session::store::read_conversation_surface_file(&path)
            .unwrap()
            .events
            .iter()
            .map(|e| e.seq)
            .collect();
    let replacement = compaction_replace(
        "s-fix",
        writer.next_seq(),
        &surface,
        surface[0],
        *surface.last().unwrap(),
        &[],
    )
    .unwrap();
    let checkpoint = Message::new(
        "user",
        vec![ContentBlock::text("summary: the wombat plan")],
        MessageSource::plugin("compact"),
        "cp".into(),
    );
    writer
        .append(vec![
            NewEvent::new(EventData::UserMessage(checkpoint)).with_replacement(replacement)
        ])
        .unwrap();
    let stats = d.refresh_blocking().unwrap();
    assert_eq!((stats.indexed, stats.appended), (1, 0), "{stats:?}");
    assert_eq!(ids(&search(&d, "wombat")), ["s-fix"]);
    assert!(search(&d, "lexer").hits.is_empty(), "shadowed text is gone");

    // A deleted session leaves the index.
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    let stats = d.refresh_blocking().unwrap();
    assert_eq!(stats.removed, 1);
    assert!(search(&d, "wombat").hits.is_empty());
}

#[test]
fn a_damaged_or_foreign_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    small_home(dir.path());
    let db = db_path(dir.path());
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();

    // Not a database at all.
    std::fs::write(&db, b"this is not sqlite, just garbage bytes ".repeat(200)).unwrap();
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    assert_eq!(d.refresh_blocking().unwrap().indexed, 3);
    assert_eq!(ids(&search(&d, "lexer")), ["s-fix"]);

    // Another schema version.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 7))
            .unwrap();
    }
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    assert_eq!(d.refresh_blocking().unwrap().indexed, 3);
    assert_eq!(ids(&search(&d, "dark")), ["s-dark"]);

    // Someone else's database in its place.
    std::fs::remove_file(&db).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("CREATE TABLE other(x); INSERT INTO other VALUES (1);")
            .unwrap();
    }
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    assert_eq!(d.refresh_blocking().unwrap().indexed, 3);

    // Damaged under a running indexer: the page holding the rows is overwritten.
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    d.refresh_blocking().unwrap();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let mut bytes = std::fs::read(&db).unwrap();
    let page = 4096;
    for b in bytes.iter_mut().skip(page) {
        *b = 0xA5;
    }
    std::fs::write(&db, &bytes).unwrap();
    let _ = std::fs::remove_file(format!("{}-wal", db.display()));
    let stats = d.refresh_blocking().unwrap();
    assert_eq!(stats.indexed, 3, "rebuilt: {stats:?}");
    assert_eq!(ids(&search(&d, "lexer")), ["s-fix"]);
}

#[test]
fn two_connections_index_and_search_one_home_at_once() {
    let dir = tempfile::tempdir().unwrap();
    small_home(dir.path());
    for i in 0..40 {
        session(
            dir.path(),
            &format!("bulk-{i}"),
            "/w/bulk",
            1_700_000_300_000 + i,
            vec![user(&format!("bulk session number {i} about capybaras"))],
        );
    }
    let home = dir.path().to_path_buf();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let home = home.clone();
            std::thread::spawn(move || {
                let d = Discovery::for_home(&home, &SourceSet::default());
                for _ in 0..3 {
                    d.refresh_blocking().unwrap();
                    let found = search(&d, "capybaras");
                    assert!(found.total <= 40);
                }
                search(&d, "capybaras").total
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 40);
    }
}

#[test]
fn a_second_process_searches_while_this_one_indexes() {
    let dir = tempfile::tempdir().unwrap();
    small_home(dir.path());
    for i in 0..60 {
        session(
            dir.path(),
            &format!("bulk-{i}"),
            "/w/bulk",
            1_700_000_300_000 + i,
            vec![user(&format!("bulk session {i} on ocelots"))],
        );
    }
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .args(["--home"])
        .arg(dir.path())
        .args(["search", "ocelots", "--json", "--limit", "100"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    d.refresh_blocking().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["total"], 60, "{answer}");
    assert_eq!(search(&d, "ocelots").total, 60);
}

#[test]
fn other_agents_sessions_are_indexed() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures");
    let dir = tempfile::tempdir().unwrap();
    let sources = SourceSet {
        hide_dsh: false,
        external: vec![
            ExternalSessions::new(ExternalAgent::Claude, fixtures.join("claude-code")),
            ExternalSessions::new(ExternalAgent::Codex, fixtures.join("codex")),
        ],
    };
    let d = Discovery::for_home(dir.path(), &sources);
    let stats = d.refresh_blocking().unwrap();
    assert!(stats.indexed > 0, "{stats:?}");
    let all = search(&d, "");
    let claude = all
        .hits
        .iter()
        .filter(|h| h.source.as_deref() == Some("claude"))
        .count();
    let codex = all
        .hits
        .iter()
        .filter(|h| h.source.as_deref() == Some("codex"))
        .count();
    assert!(claude > 0 && codex > 0, "claude {claude}, codex {codex}");
    // A word from a session's first prompt finds it.
    let with_prompt = all
        .hits
        .iter()
        .find(|h| {
            h.source.as_deref() == Some("claude")
                && h.first_prompt
                    .as_deref()
                    .is_some_and(|p| p.split_whitespace().any(|w| w.len() > 6))
        })
        .expect("a claude session with a first prompt");
    let word: String = with_prompt
        .first_prompt
        .as_deref()
        .unwrap()
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| w.len() > 6)
        .unwrap()
        .to_string();
    let found = ids(&search(&d, &word));
    assert!(found.contains(&with_prompt.id), "{word}: {found:?}");
}

/// The live badge reads the kernel's lock table: a session held open by a writer is live, and
/// probing never takes the writer's lock (a writer opening meanwhile is not refused).
#[cfg(target_os = "linux")]
/// Claude Code 2.1.x `/compact` that kept a preserved segment (`-p /compact --resume` after an
/// interactive session, written by the real CLI): the words the compaction removed are not
/// found, the words it kept are.
#[test]
fn a_word_removed_by_a_claude_preserved_segment_compaction_is_not_found() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures");
    for real in ["real-agents", "real-agents-claude-2.1.197"] {
        let home = fixtures.join(real).join("claude");
        let dir = tempfile::tempdir().unwrap();
        let sources = SourceSet {
            hide_dsh: true,
            external: vec![ExternalSessions::new(ExternalAgent::Claude, &home)],
        };
        // The session: the file that holds both the removed words and the turn after.
        let project = home.join("projects/-tmp-ra-fixture-project-one");
        let file = std::fs::read_dir(&project)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                text.contains("words-removed-by-preserved-compaction")
                    && text.contains("claude delta after print compact")
            })
            .expect("the preserved-segment fixture");
        let id = format!("claude:{}", file.file_stem().unwrap().to_string_lossy());
        let d = Discovery::for_home(dir.path(), &sources);
        d.refresh_blocking().unwrap();
        assert!(
            ids(&search(&d, "print")).contains(&id),
            "{real}: a word after the compaction"
        );
        assert!(
            ids(&search(&d, "kept")).contains(&id),
            "{real}: a word of the preserved segment"
        );
        // The words the compaction removed are not conversation any more; they stay findable
        // through the title, which is the session's first prompt (SPEC §9).
        let removed = search(&d, "removed");
        let hit = removed.hits.iter().find(|h| h.id == id);
        assert!(
            hit.is_none_or(|h| !h.matched.contains(&Field::Conversation)),
            "{real}: a word the compaction removed matched the conversation"
        );
    }
}

#[test]
fn a_session_held_by_a_writer_is_live() {
    use dsh_session_references::session::SessionQuery;
    let dir = tempfile::tempdir().unwrap();
    let path = small_home(dir.path());
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    let listing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(d.query().list_sessions())
        .unwrap();
    let rows: Vec<_> = listing.iter().collect();
    assert!(d.live_elsewhere(&rows).iter().all(|live| !live));
    let (writer, _) = SessionWriter::open(&path).unwrap();
    let live: Vec<&str> = rows
        .iter()
        .zip(d.live_elsewhere(&rows))
        .filter(|(_, live)| *live)
        .map(|(s, _)| s.id())
        .collect();
    assert_eq!(live, ["s-fix"]);
    drop(writer);
    for _ in 0..50 {
        let _ = d.live_elsewhere(&rows);
    }
    // Probing took nothing: the session opens for writing at once.
    let (writer, _) = SessionWriter::open(&path).unwrap();
    drop(writer);
    assert!(d.live_elsewhere(&rows).iter().all(|live| !live));
}

/// The disk store with a hook run before each indexer read: it may wait, or fail the read.
struct Hooked {
    store: DiskStore,
    before_read: BeforeRead,
}

/// Runs before the indexer reads session `id`; an error returned fails that read.
type BeforeRead = Box<dyn Fn(&str) -> Option<SessionError> + Send + Sync>;

impl SessionQuery for Hooked {
    fn list_sessions(&self) -> BoxFuture<'_, SessionResult<Arc<Vec<SessionSummary>>>> {
        self.store.list_sessions()
    }
    fn read_surface<'a>(&'a self, id: &'a str) -> BoxFuture<'a, SessionResult<SurfaceSnapshot>> {
        self.store.read_surface(id)
    }
    fn read_title<'a>(&'a self, id: &'a str) -> BoxFuture<'a, SessionResult<Option<String>>> {
        self.store.read_title(id)
    }
    fn read_for_index_blocking(
        &self,
        id: &str,
    ) -> Option<SessionResult<(SurfaceSnapshot, Option<String>)>> {
        match (self.before_read)(id) {
            Some(error) => Some(Err(error)),
            None => self.store.read_for_index_blocking(id),
        }
    }
}

/// An indexer of the home at `dir` reading through `query`.
fn indexer_of(dir: &Path, query: Arc<Hooked>) -> Indexer {
    let stamper = Arc::new(FileStamper {
        store: DiskStore::new(dir),
        external: Vec::new(),
    });
    Indexer::new(db_path(dir), query, stamper, Arc::new(|_: &str| true)).unwrap()
}

/// Logs are read outside the write transaction: while the indexer is stuck reading a session in
/// the middle of a pass (after it has read others), another connection takes the write lock at
/// once. Holding the lock across reads would make a second process's indexer wait for them.
#[test]
fn logs_are_read_outside_the_write_transaction() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        session(
            dir.path(),
            &format!("read-{i}"),
            "/w/read",
            1_700_000_400_000 + i,
            vec![user(&format!("session {i} about wombats"))],
        );
    }
    let (reading, read_started) = std::sync::mpsc::channel();
    let (let_go, go) = std::sync::mpsc::channel();
    let go = std::sync::Mutex::new(go);
    let query = Arc::new(Hooked {
        store: DiskStore::new(dir.path()),
        // The third read of the pass (oldest first) waits until the test lets it go.
        before_read: Box::new(move |id| {
            if id == "read-2" {
                reading.send(()).unwrap();
                go.lock().unwrap().recv().unwrap();
            }
            None
        }),
    });
    let path = db_path(dir.path());
    let mut indexer = indexer_of(dir.path(), query);
    let pass = std::thread::spawn(move || indexer.refresh().unwrap());
    read_started
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the pass reaches the held read");
    let other = rusqlite::Connection::open(&path).unwrap();
    other.busy_timeout(std::time::Duration::ZERO).unwrap();
    other
        .execute_batch("BEGIN IMMEDIATE; COMMIT")
        .expect("the write lock is free while the indexer reads a log");
    let_go.send(()).unwrap();
    let stats = pass.join().unwrap();
    assert_eq!((stats.listed, stats.indexed, stats.failed), (5, 5, 0));
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    assert_eq!(search(&d, "wombats").total, 5);
}

/// A session the store cannot read is recorded (header fields and the error, no text) without
/// failing the pass or its batch, and read again once its log changes.
#[test]
fn an_unreadable_session_is_recorded_and_read_again_once_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    small_home(dir.path());
    let path = session(
        dir.path(),
        "broken-1",
        "/w/broken",
        1_700_000_500_000,
        vec![user("numbats live here")],
    );
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let fails = failing.clone();
    let query = Arc::new(Hooked {
        store: DiskStore::new(dir.path()),
        before_read: Box::new(move |id| {
            (id == "broken-1" && fails.load(std::sync::atomic::Ordering::SeqCst))
                .then(|| SessionError::Other("unreadable on purpose".into()))
        }),
    });
    let db = db_path(dir.path());
    let mut indexer = indexer_of(dir.path(), query);
    let stats = indexer.refresh().unwrap();
    assert_eq!((stats.listed, stats.failed), (4, 1), "{stats:?}");
    assert_eq!(stats.indexed, 3, "the rest of the batch is written");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let row = |conn: &rusqlite::Connection| -> (Option<String>, i64) {
        conn.query_row(
            "SELECT error, messages FROM sessions WHERE id = 'broken-1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    assert_eq!(row(&conn), (Some("unreadable on purpose".into()), 0));
    // Unchanged: not read again. Changed (and readable): read and indexed.
    failing.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(indexer.refresh().unwrap().indexed, 0);
    let (mut writer, _) = SessionWriter::open(&path).unwrap();
    writer.append(vec![user("numbats again")]).unwrap();
    let stats = indexer.refresh().unwrap();
    assert_eq!((stats.indexed, stats.failed), (1, 0), "{stats:?}");
    assert_eq!(row(&conn), (None, 2));
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    assert_eq!(ids(&search(&d, "numbats")), ["broken-1"]);
}

/// A first build of a large home (here any home: the threshold is lowered) is written to a fresh
/// file beside the database and moved into place when complete: while it runs there is no
/// database at the index's path, a leftover fresh file and a stray `-wal` at the path are
/// removed unread, and the published database is in WAL mode and answers like any other.
#[test]
fn a_first_build_is_written_aside_and_moved_into_place() {
    let dir = tempfile::tempdir().unwrap();
    small_home(dir.path());
    let db = db_path(dir.path());
    let fresh = db.with_file_name("discovery.sqlite3.fresh");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    // What a crash in an earlier fresh build, and a database deleted without its WAL, leave.
    std::fs::write(&fresh, b"half a database ".repeat(300)).unwrap();
    std::fs::write(
        format!("{}-wal", db.display()),
        b"a stray write-ahead log ".repeat(300),
    )
    .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let (db_at, fresh_at) = (db.clone(), fresh.clone());
    let query = Arc::new(Hooked {
        store: DiskStore::new(dir.path()),
        before_read: Box::new(move |_| {
            record
                .lock()
                .unwrap()
                .push((db_at.exists(), fresh_at.exists()));
            None
        }),
    });
    let mut indexer = indexer_of(dir.path(), query).with_fresh_build_from(1);
    let stats = indexer.refresh().unwrap();
    assert_eq!((stats.listed, stats.indexed, stats.failed), (3, 3, 0));
    assert_eq!(*seen.lock().unwrap(), vec![(false, true); 3]);
    assert!(db.is_file());
    assert!(!fresh.exists(), "the fresh file is moved, not copied");
    let mode: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    assert_eq!(ids(&search(&d, "lexer buffer")), ["s-fix"]);
    assert_eq!(search(&d, "").total, 3);
    // What it wrote is known: nothing is read again, and growth goes to the published file.
    assert_eq!(indexer.refresh().unwrap().indexed, 0);
    session(
        dir.path(),
        "s-new",
        "/w/new",
        1_700_000_300_000,
        vec![user("a word about quolls")],
    );
    assert_eq!(indexer.refresh().unwrap().indexed, 1);
    assert_eq!(ids(&search(&d, "quolls")), ["s-new"]);
}

/// A database that appears at the index's path during a fresh build (made by a process that
/// does not take the rebuild lock) is never replaced: the fresh file is dropped and the pass
/// goes on with what is there (here a foreign database, which is rebuilt as usual).
#[test]
fn a_database_made_during_a_fresh_build_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    small_home(dir.path());
    let db = db_path(dir.path());
    let made = db.clone();
    let query = Arc::new(Hooked {
        store: DiskStore::new(dir.path()),
        before_read: Box::new(move |_| {
            if !made.exists() {
                let conn = rusqlite::Connection::open(&made).unwrap();
                conn.execute_batch("CREATE TABLE other(x); INSERT INTO other VALUES (1);")
                    .unwrap();
            }
            None
        }),
    });
    let mut indexer = indexer_of(dir.path(), query).with_fresh_build_from(1);
    let stats = indexer.refresh().unwrap();
    assert_eq!((stats.indexed, stats.failed), (3, 0), "{stats:?}");
    assert!(!db.with_file_name("discovery.sqlite3.fresh").exists());
    let d = Discovery::for_home(dir.path(), &SourceSet::default());
    assert_eq!(ids(&search(&d, "dark")), ["s-dark"]);
}
