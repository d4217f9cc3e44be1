//! Issue 35 item 4: a new process's first `@` answer comes from what the last process kept
//! (the agents' kept listings and the index), without checking any file, and only ever names
//! sessions of the homes being served; the checked answer that follows drops what went.
//!
//! Each "process" is a fresh discovery over fresh sources (nothing shared in memory). A file
//! deleted between the processes proves the first answer looked at no file: it is still there,
//! and only the checked search drops it.

use dsh_session_references::discovery::{Discovery, SearchQuery};
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions, SourceSet};
use std::fs;
use std::path::{Path, PathBuf};

const DEMO: &str = "tests/data/fixtures/claude-code/projects/-path-to-Demo";
const KEPT: &str = "fe5e1c67-53e7-4862-81ae-d0e013e3270b";
const GONE: &str = "1af7fc5e-8455-4414-9ccd-011d40f70b2a";

fn copy_claude(claude: &Path, id: &str) -> PathBuf {
    let dir = claude.join("projects").join("-path-to-Demo");
    fs::create_dir_all(&dir).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(DEMO)
        .join(format!("{id}.jsonl"));
    let to = dir.join(format!("{id}.jsonl"));
    fs::copy(from, &to).unwrap();
    to
}

/// A new process's discovery over `claude` (and the dsh home's own sessions, none here), its
/// listing kept under the dsh home.
fn process(dsh: &Path, claude: &Path) -> Discovery {
    let sources = SourceSet {
        hide_dsh: false,
        external: vec![ExternalSessions::with_listing_cache(
            ExternalAgent::Claude,
            claude,
            dsh,
        )],
    };
    Discovery::for_home(dsh, &sources)
}

fn everything() -> SearchQuery {
    SearchQuery {
        limit: 50,
        now_ms: 1_800_000_000_000,
        ..SearchQuery::default()
    }
}

fn ids(found: &dsh_session_references::discovery::SearchResult) -> Vec<String> {
    let mut ids: Vec<String> = found.hits.iter().map(|h| h.meta.id.clone()).collect();
    ids.sort();
    ids
}

/// The previous process: lists (which keeps the listing) and indexes.
async fn previous(dsh: &Path, claude: &Path) {
    let d = process(dsh, claude);
    d.query().list_sessions().await.unwrap();
    let index = d.clone();
    tokio::task::spawn_blocking(move || index.refresh_blocking().unwrap())
        .await
        .unwrap();
    // What a process read is kept as it ends.
    drop(d);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_answer_names_what_the_last_process_listed_and_the_checked_one_drops_what_went() {
    let dir = tempfile::tempdir().unwrap();
    let (dsh, claude) = (dir.path().join("dsh"), dir.path().join("claude"));
    copy_claude(&claude, KEPT);
    let gone = copy_claude(&claude, GONE);
    previous(&dsh, &claude).await;

    fs::remove_file(gone).unwrap();
    let d = process(&dsh, &claude);
    let first = d
        .search_remembered(everything())
        .await
        .expect("a first answer from what was kept");
    assert_eq!(
        ids(&first),
        [format!("claude:{GONE}"), format!("claude:{KEPT}")],
        "the first answer checked a file"
    );
    // Titled from the index, never a bare id.
    assert!(first.hits.iter().all(|h| h.title.is_some()), "{first:?}");

    let checked = d.search(everything()).await.unwrap();
    assert_eq!(ids(&checked), [format!("claude:{KEPT}")]);
    // Once this process has listed, its own listing is what it remembers.
    let after = d.search_remembered(everything()).await.unwrap();
    assert_eq!(ids(&after), [format!("claude:{KEPT}")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_homes_kept_listing_never_answers_first() {
    let dir = tempfile::tempdir().unwrap();
    let dsh = dir.path().join("dsh");
    let (home_a, home_b) = (dir.path().join("claude-a"), dir.path().join("claude-b"));
    copy_claude(&home_a, KEPT);
    copy_claude(&home_b, GONE);
    previous(&dsh, &home_a).await;

    // The same dsh home now serves another Claude Code home, never listed before: nothing was
    // kept for it, so there is no first answer (and never home A's sessions).
    let d = process(&dsh, &home_b);
    assert!(d.search_remembered(everything()).await.is_none());
    let checked = d.search(everything()).await;
    let named: Vec<String> = checked.iter().flat_map(ids).collect();
    assert!(!named.contains(&format!("claude:{KEPT}")), "{named:?}");

    // Listed once, home B's own listing answers the next process first, and only with B's.
    previous(&dsh, &home_b).await;
    let d = process(&dsh, &home_b);
    let first = d.search_remembered(everything()).await.unwrap();
    assert_eq!(ids(&first), [format!("claude:{GONE}")]);
}
