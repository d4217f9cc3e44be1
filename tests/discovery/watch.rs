//! The background indexer with its file watcher: with polling passes an hour apart, an append
//! to a log and a brand-new session still become searchable (only events can have done it);
//! without the watcher, and when the inotify watch limit stops it from starting, polling alone
//! finds them.

use crate::support;
use crate::support::user;
use dsh_session_references::discovery::{Cadence, Discovery, IndexerThread, SearchQuery};
use dsh_session_references::session::external::SourceSet;
use dsh_session_references::session::{Encoding, SessionHeader, SessionWriter};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Generous: the machine running the tests may be loaded; the point is that without the
/// watcher nothing would be found for an hour.
const PATIENCE: Duration = Duration::from_secs(20);
const HOUR: Duration = Duration::from_secs(3600);

fn session(home: &Path, id: &str, cwd: &str, text: &str, encoding: Encoding) -> PathBuf {
    let header = SessionHeader::new(id, 1_700_000_000_000, Some(cwd.to_string()));
    let mut writer = SessionWriter::create(home, header, encoding).unwrap();
    writer.append(vec![user(text)]).unwrap();
    writer.path().to_path_buf()
}

/// The ids of the sessions a search for `word` finds (at most 100), by rank.
pub(crate) fn found(d: &Discovery, word: &str) -> Vec<String> {
    d.search_blocking(
        &SearchQuery {
            text: word.into(),
            limit: 100,
            now_ms: 1_800_000_000_000,
            ..SearchQuery::default()
        },
        None,
    )
    .map(|r| r.hits.into_iter().map(|h| h.meta.id).collect())
    .unwrap_or_default()
}

/// Waits (at most [`PATIENCE`]) until `done` holds.
pub(crate) fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: not within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polling passes an hour apart: only the watcher can index anything after the first passes.
fn watched(d: &Discovery) -> IndexerThread {
    let thread = d.spawn_indexer_with(Cadence {
        min: HOUR,
        max: HOUR,
        watched_min: HOUR,
        watch: true,
    });
    eventually("the watcher runs and its catch-up pass is done", || {
        thread.watched()
    });
    thread
}

#[test]
fn an_appended_batch_is_searchable_without_a_polling_pass() {
    let home = tempfile::tempdir().unwrap();
    let zstd = session(home.path(), "s-zstd", "/w/a", "first words", Encoding::Zstd);
    let plain = session(
        home.path(),
        "s-plain",
        "/w/b",
        "other words",
        Encoding::Plain,
    );
    let d = Discovery::for_home(home.path(), &SourceSet::default());
    let thread = watched(&d);
    assert_eq!(found(&d, "first"), ["s-zstd"]);
    let passes = d.passes();

    for (n, (path, id)) in [(&zstd, "s-zstd"), (&plain, "s-plain"), (&zstd, "s-zstd")]
        .into_iter()
        .enumerate()
    {
        let word = format!("quokkawatch{n}");
        let (mut writer, _) = SessionWriter::open(path).unwrap();
        writer
            .append(vec![user(&format!("now about the {word}"))])
            .unwrap();
        eventually(&format!("append {n} searchable"), || {
            found(&d, &word) == [id]
        });
    }
    assert_eq!(
        d.passes(),
        passes,
        "found by targeted refreshes, not passes"
    );
    assert!(thread.watching());
    // The earlier text is still there (the grown log was indexed from where it stopped).
    assert_eq!(found(&d, "first"), ["s-zstd"]);
}

#[test]
fn a_new_session_is_found_by_its_events() {
    let home = tempfile::tempdir().unwrap();
    let d = Discovery::for_home(home.path(), &SourceSet::default());
    // An empty home: the sessions directory does not exist before the watcher makes it.
    let thread = watched(&d);
    let passes = d.passes();

    session(
        home.path(),
        "s-new",
        "/w/new",
        "a wombatwatch plan",
        Encoding::Zstd,
    );
    eventually("a new session in a new project", || {
        found(&d, "wombatwatch") == ["s-new"]
    });
    // A second session in the same project directory.
    session(
        home.path(),
        "s-next",
        "/w/new",
        "a numbatwatch",
        Encoding::Plain,
    );
    eventually("a new session in a known project", || {
        found(&d, "numbatwatch") == ["s-next"]
    });
    assert!(d.passes() > passes, "new sessions are found by full passes");
    drop(thread);
}

#[test]
fn without_the_watcher_polling_finds_appends() {
    let home = tempfile::tempdir().unwrap();
    let path = session(home.path(), "s-poll", "/w/p", "first words", Encoding::Zstd);
    let d = Discovery::for_home(home.path(), &SourceSet::default());
    let thread = polled(&d, false);
    assert!(!thread.watching() && !thread.watched());
    append_and_find(&d, &path, "polledword", "s-poll");
}

/// An indexer polling every 20 ms while no watcher runs (an hour apart if one does).
fn polled(d: &Discovery, watch: bool) -> IndexerThread {
    d.spawn_indexer_with(Cadence {
        min: Duration::from_millis(20),
        max: Duration::from_millis(20),
        watched_min: HOUR,
        watch,
    })
}

/// After the first pass, appends a message holding `word` to the log at `path` and waits for
/// a search to find it in session `id`.
fn append_and_find(d: &Discovery, path: &Path, word: &str, id: &str) {
    eventually("the first pass", || d.passes() > 0);
    let (mut writer, _) = SessionWriter::open(path).unwrap();
    writer.append(vec![user(&format!("the {word}"))]).unwrap();
    eventually("the append, by a polling pass", || found(d, word) == [id]);
}

/// Set in the child of [`past_the_watch_limit_polling_finds_appends`]: it runs in a user
/// namespace whose inotify watch limit is [`WATCH_LIMIT`].
const LIMITED: &str = "DSH_TEST_WATCH_LIMITED";
/// Fewer watches than the child's home has directories (the sessions directory, two projects
/// and two sessions).
const WATCH_LIMIT: u32 = 2;

/// A real watch limit, not a simulated failure: the test re-runs itself in a new user namespace
/// (`unshare`, util-linux) whose `max_inotify_watches` is 2, where adding the watches fails with
/// the limit error. The indexer must then poll at its unwatched cadence, so an append is found.
#[test]
fn past_the_watch_limit_polling_finds_appends() {
    let child = support::test_path(module_path!(), "watch_limited_child");
    let script = format!("echo {WATCH_LIMIT} > /proc/sys/user/max_inotify_watches && exec \"$@\"");
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c", &script, "sh"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", &child, "--ignored", "--nocapture"])
        .env(LIMITED, "1")
        .output()
        .expect("this test needs `unshare` (util-linux) and user namespaces");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the limited child failed:\n{text}");
    assert!(text.contains("1 passed"), "the child did not run:\n{text}");
}

#[test]
#[ignore = "run by past_the_watch_limit_polling_finds_appends inside a user namespace"]
fn watch_limited_child() {
    assert!(
        std::env::var_os(LIMITED).is_some(),
        "run by past_the_watch_limit_polling_finds_appends"
    );
    let limit = std::fs::read_to_string("/proc/sys/user/max_inotify_watches").unwrap();
    assert_eq!(
        limit.trim(),
        WATCH_LIMIT.to_string(),
        "the limit is in force"
    );
    let home = tempfile::tempdir().unwrap();
    let path = session(
        home.path(),
        "s-lim",
        "/w/one",
        "first words",
        Encoding::Plain,
    );
    session(
        home.path(),
        "s-other",
        "/w/two",
        "other words",
        Encoding::Plain,
    );
    let d = Discovery::for_home(home.path(), &SourceSet::default());
    // Watched passes an hour apart: only the fallback to the unwatched cadence finds the append.
    let thread = polled(&d, true);
    eventually("the watcher gives up", || !thread.watch_starting());
    assert!(!thread.watching() && !thread.watched());
    append_and_find(&d, &path, "limitedword", "s-lim");
}
