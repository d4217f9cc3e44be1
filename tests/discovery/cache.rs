//! The discovery index is a cache (issue 20 §5): whatever sits at its paths, and whatever
//! another process does with it, a search still answers and nothing is written outside the
//! home. A symlink at the database is set aside (its target's bytes unchanged), a directory at
//! the database or a file at `<home>/index` is set aside and a new index built, and a database
//! another connection holds under `BEGIN EXCLUSIVE` is judged busy: the pass gives up after the
//! busy timeout and the file is never removed or rebuilt under its holder.

use dsh_session_references::discovery::{db_path, BUSY_TIMEOUT, READER_BUSY_TIMEOUT};
use dsh_session_references::discovery::{Discovery, IndexError, SearchQuery, SearchResult};
use dsh_session_references::session::external::SourceSet;
use dsh_session_references::session::{
    ContentBlock, Encoding, EventData, Message, MessageSource, NewEvent, SessionHeader,
    SessionWriter,
};
use serde_json::Map;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn user(text: &str) -> NewEvent {
    EventData::UserMessage(Message::new(
        "user",
        vec![ContentBlock::text(text)],
        MessageSource::user(),
        format!("u-{text}"),
    ))
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

fn session(home: &Path, id: &str, title_text: &str, said: &str) {
    let header = SessionHeader::new(id, 1_700_000_000_000, Some("/w".to_string()));
    let mut writer = SessionWriter::create(home, header, Encoding::Plain).unwrap();
    writer.append(vec![user(said), title(title_text)]).unwrap();
}

fn two_sessions(home: &Path) {
    session(
        home,
        "s-fix",
        "Fix the flaky tokenizer",
        "the lexer drops a byte",
    );
    session(
        home,
        "s-dark",
        "Dark mode colours",
        "make the palette darker",
    );
}

fn query(text: &str) -> SearchQuery {
    SearchQuery {
        text: text.into(),
        limit: 50,
        now_ms: 1_800_000_000_000,
        snippets: true,
        ..SearchQuery::default()
    }
}

fn search(d: &Discovery, text: &str) -> SearchResult {
    d.search_blocking(&query(text), None).unwrap()
}

fn ids(result: &SearchResult) -> Vec<String> {
    result.hits.iter().map(|h| h.id.clone()).collect()
}

/// The names in `dir` that start with `prefix`.
fn names(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    found.sort();
    found
}

/// An index of ours built somewhere else, its bytes once settled (checkpointed, no WAL).
fn index_elsewhere(dir: &Path) -> PathBuf {
    let other = dir.join("other-home");
    session(&other, "s-other", "Someone else's index", "not this home");
    let d = Discovery::for_home(&other, &SourceSet::default());
    d.refresh_blocking().unwrap();
    drop(d);
    let db = db_path(&other);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE")
        .unwrap();
    drop(conn);
    db
}

#[test]
fn a_symlink_at_the_index_is_set_aside_and_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    two_sessions(&home);
    let outside_db = index_elsewhere(dir.path());
    let empty = dir.path().join("outside-empty");
    std::fs::write(&empty, b"").unwrap();
    let wal_target = dir.path().join("outside-wal");
    std::fs::write(&wal_target, b"keep me").unwrap();
    let db = db_path(&home);
    let index_dir = db.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&index_dir).unwrap();
    // SQLite makes a new database in an empty file, and writes into one of ours.
    for (target, link_at) in [
        (empty.clone(), db.clone()),
        (outside_db.clone(), db.clone()),
        (
            wal_target.clone(),
            PathBuf::from(format!("{}-wal", db.display())),
        ),
    ] {
        let before = std::fs::read(&target).unwrap();
        for stale in names(&index_dir, "discovery") {
            std::fs::remove_file(stale).unwrap();
        }
        std::os::unix::fs::symlink(&target, &link_at).unwrap();
        let d = Discovery::for_home(&home, &SourceSet::default());
        assert_eq!(
            d.refresh_blocking().unwrap().indexed,
            2,
            "{}",
            target.display()
        );
        assert_eq!(ids(&search(&d, "lexer")), ["s-fix"]);
        assert_eq!(ids(&search(&d, "dark mode")), ["s-dark"]);
        drop(d);
        let after = std::fs::read(&target).unwrap();
        assert!(
            after == before,
            "{} was written through the link ({} bytes before, {} now)",
            target.display(),
            before.len(),
            after.len()
        );
        assert!(std::fs::symlink_metadata(&db).unwrap().is_file());
        let aside = names(
            &index_dir,
            &format!(
                "{}.foreign-",
                link_at.file_name().unwrap().to_string_lossy()
            ),
        );
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert_eq!(
            std::fs::read_link(&aside[0]).unwrap(),
            target,
            "the link itself kept"
        );
    }
}

/// A home reached through a symlink of the person's (a home on another disk, or `/tmp` on
/// macOS) is indexed as usual: only a link at the index's own paths is refused.
#[test]
fn a_home_under_a_symlinked_directory_is_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let home = link.join("home");
    two_sessions(&home);
    let d = Discovery::for_home(&home, &SourceSet::default());
    assert_eq!(d.refresh_blocking().unwrap().indexed, 2);
    // A conversation word: only the index finds it.
    assert_eq!(ids(&search(&d, "palette")), ["s-dark"]);
    assert_eq!(
        d.refresh_blocking().unwrap().indexed,
        0,
        "kept, not rebuilt"
    );
    assert!(names(&real.join("home/index"), "discovery.sqlite3.foreign-").is_empty());
    assert!(real.join("home/index/discovery.sqlite3").is_file());
}

#[test]
fn a_directory_at_the_index_or_a_file_at_its_directory_is_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    two_sessions(&home);
    let db = db_path(&home);
    let index_dir = db.parent().unwrap().to_path_buf();

    // A directory where the database goes, holding someone's file.
    std::fs::create_dir_all(&db).unwrap();
    std::fs::write(db.join("note"), b"mine").unwrap();
    let d = Discovery::for_home(&home, &SourceSet::default());
    assert_eq!(d.refresh_blocking().unwrap().indexed, 2);
    assert_eq!(ids(&search(&d, "lexer")), ["s-fix"]);
    drop(d);
    let aside = names(&index_dir, "discovery.sqlite3.foreign-");
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(aside[0].join("note")).unwrap(), b"mine");

    // A file where the index directory goes.
    std::fs::remove_dir_all(&index_dir).unwrap();
    std::fs::write(&index_dir, b"not a directory").unwrap();
    let d = Discovery::for_home(&home, &SourceSet::default());
    assert_eq!(d.refresh_blocking().unwrap().indexed, 2);
    assert_eq!(ids(&search(&d, "palette")), ["s-dark"]);
    let aside = names(&home, "index.foreign-");
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(&aside[0]).unwrap(), b"not a directory");
}

#[test]
fn a_linked_index_directory_a_fifo_database_and_a_linked_lock_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    two_sessions(&home);
    let db = db_path(&home);
    let index_dir = db.parent().unwrap().to_path_buf();

    // `<home>/index` a link to a directory outside the home: nothing is made there.
    let outside = dir.path().join("outside-dir");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, &index_dir).unwrap();
    let d = Discovery::for_home(&home, &SourceSet::default());
    assert_eq!(d.refresh_blocking().unwrap().indexed, 2);
    assert_eq!(ids(&search(&d, "lexer")), ["s-fix"]);
    drop(d);
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert!(std::fs::symlink_metadata(&index_dir).unwrap().is_dir());
    assert_eq!(names(&home, "index.foreign-").len(), 1);

    // A FIFO where the database goes: set aside, never opened. (SQLite alone copes too: it
    // opens a FIFO read-write, which does not wait, and finds no database in it.)
    std::fs::remove_dir_all(&index_dir).unwrap();
    std::fs::create_dir(&index_dir).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(&db)
        .status()
        .unwrap();
    assert!(status.success());
    let home_copy = home.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let d = Discovery::for_home(&home_copy, &SourceSet::default());
        let indexed = d
            .refresh_blocking()
            .map(|s| s.indexed)
            .map_err(|e| e.to_string());
        let _ = tx.send((indexed, ids(&search(&d, "palette"))));
    });
    let (indexed, found) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a FIFO at the index blocked the pass");
    assert_eq!(indexed, Ok(2));
    assert_eq!(found, ["s-dark"]);
    assert!(std::fs::symlink_metadata(&db).unwrap().is_file());

    // A damaged database forces a rebuild under the lock, whose file is a link to one outside
    // the home: the link is set aside, the outside file never made.
    std::fs::write(&db, b"not sqlite at all ".repeat(100)).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let lock_target = dir.path().join("outside-lock");
    let _ = std::fs::remove_file(index_dir.join("rebuild.lock"));
    std::os::unix::fs::symlink(&lock_target, index_dir.join("rebuild.lock")).unwrap();
    let d = Discovery::for_home(&home, &SourceSet::default());
    assert_eq!(d.refresh_blocking().unwrap().indexed, 2);
    assert!(!lock_target.exists(), "the lock was taken through the link");
    assert_eq!(names(&index_dir, "rebuild.lock.foreign-").len(), 1);
}

#[test]
fn a_busy_index_is_waited_for_then_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    two_sessions(&home);
    let db = db_path(&home);
    let d = Discovery::for_home(&home, &SourceSet::default());
    d.refresh_blocking().unwrap();
    drop(d);
    // Another connection takes the database and holds it, with a write of its own pending; in
    // exclusive locking mode not even a reader gets in.
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder
        .execute_batch(
            "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; UPDATE sessions SET title = title",
        )
        .unwrap();
    let inode = std::fs::metadata(&db).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.ino()
    });
    // Something to write: a new session.
    session(
        &home,
        "s-new",
        "Brand new notes",
        "written while the index is held",
    );
    let d = Discovery::for_home(&home, &SourceSet::default());
    // The popup's search waits briefly, then answers from the listing.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let found = rt.block_on(d.search(query("brand new"))).unwrap();
    let popup_took = started.elapsed();
    assert_eq!(ids(&found), ["s-new"]);
    assert!(popup_took < READER_BUSY_TIMEOUT * 3, "{popup_took:?}");
    eprintln!("popup search with a held index answered in {popup_took:?}");
    let started = Instant::now();
    let err = d.refresh_blocking().unwrap_err();
    let waited = started.elapsed();
    assert!(
        dsh_session_references::discovery::is_busy_error(&err),
        "judged busy, not unusable: {err}"
    );
    assert!(matches!(err, IndexError::Sql { .. }));
    assert!(
        waited >= BUSY_TIMEOUT - Duration::from_millis(100),
        "{waited:?}"
    );
    assert!(waited < BUSY_TIMEOUT * 3, "{waited:?}");
    // Never deleted or replaced under its holder, which still has its transaction.
    assert_eq!(
        std::fs::metadata(&db)
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                m.ino()
            })
            .unwrap(),
        inode.unwrap()
    );
    assert!(names(db.parent().unwrap(), "discovery.sqlite3.foreign-").is_empty());
    holder.execute_batch("COMMIT").unwrap();
    let count: i64 = holder
        .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 2, "the holder's database kept its rows");
    drop(holder);
    // Free again: the next pass indexes the new session into the same file.
    assert_eq!(d.refresh_blocking().unwrap().indexed, 1);
    assert_eq!(ids(&search(&d, "brand new")), ["s-new"]);
}

/// The popup's and the picker's search (`Discovery::search`) before any database exists (the
/// first pass has not finished, or it could not make one: a full disk, a path it cannot be made
/// at): the listing's titles, ids and cwds answer, and the failure is said once.
#[test]
fn search_answers_from_the_listing_when_the_index_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    two_sessions(&home);
    let d = Discovery::for_home(&home, &SourceSet::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert!(!db_path(&home).exists());
    let found = rt.block_on(d.search(query("tokenizer"))).unwrap();
    assert_eq!(ids(&found), ["s-fix"], "matched by title from the listing");
    let cwd = rt.block_on(d.search(query("/w"))).unwrap();
    assert_eq!(cwd.total, 2, "and by cwd");
    // Conversation words need the index.
    assert!(rt
        .block_on(d.search(query("palette")))
        .unwrap()
        .hits
        .is_empty());
    let err = d.search_blocking(&query("dark"), None).unwrap_err();
    assert!(d.unavailable_once(&err).is_none(), "said once only");
    // Once the index exists it answers again, conversation included.
    d.refresh_blocking().unwrap();
    assert_eq!(
        ids(&rt.block_on(d.search(query("palette"))).unwrap()),
        ["s-dark"]
    );
}
