//! The producer of the popup's file rows: a walk of the session's cwd that honours
//! `.gitignore` (the `ignore` crate: `.gitignore`, `.ignore`, git's exclude files; hidden files
//! are listed as git lists them; `.git` itself is not), streamed into a `nucleo::Nucleo`
//! matcher whose worker threads score every keystroke, so neither the walk nor matching ever
//! runs on the UI loop and there is no cap on the number of files. Files created after launch
//! are found too: a watcher of the cwd (as the discovery indexer watches the home) triggers the
//! walk again, at most twice a second, and only paths not offered yet are added.
//!
//! Invariants: only names that are valid UTF-8 are offered: a lossy spelling of any other name
//! is a path that does not exist, and inserting it would reference nothing (or another file);
//! such a directory is not entered either. Every file the walk yields is matchable (no silent
//! cap). Proof: the unit tests below (`names_that_are_not_utf8_are_left_out`,
//! `gitignore_is_honoured_and_hidden_files_are_listed`, `the_finder_matches_off_the_loop`,
//! `files_created_after_launch_are_found`).

use super::file_match::{FileIndex, FileRow};
use nucleo::pattern::{CaseMatching, Normalization};
use nucleo::{Config, Matcher, Nucleo, Utf32String};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Walks `cwd` on a thread of its own and hands the finished index to `deliver` (for hosts
/// that match with [`super::FileMatcher`]).
pub fn spawn_file_index<F>(cwd: PathBuf, deliver: F)
where
    F: FnOnce(Arc<FileIndex>) + Send + 'static,
{
    std::thread::spawn(move || deliver(Arc::new(FileIndex::new(walk(&cwd)))));
}

/// The relative paths of the files under `cwd`, in walk order.
pub fn walk(cwd: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    walk_into(cwd, |path| paths.push(path));
    paths
}

/// Calls `found` with each file's path relative to `cwd`, as the walk finds it.
pub fn walk_into(cwd: &Path, mut found: impl FnMut(String)) {
    let walker = ignore::WalkBuilder::new(cwd)
        .hidden(false)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| match entry.file_name().to_str() {
            // `cwd` itself may have any name: only what is below it must be UTF-8.
            _ if entry.depth() == 0 => true,
            Some(name) => name != ".git",
            None => false,
        })
        .build();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if let Some(rel) = entry.path().strip_prefix(cwd).ok().and_then(|r| r.to_str()) {
            found(rel.to_string());
        }
    }
}

/// The least time between two walks for files created after launch.
const REWALK_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// A recursive watcher of `cwd` that sends on `changed` when an entry is created or renamed
/// (a new file may have appeared); `None` when the platform refuses one (the first walk then
/// stays all there is). The watcher stops when dropped.
fn new_files_watcher(
    cwd: &Path,
    changed: std::sync::mpsc::Sender<()>,
) -> Option<notify::RecommendedWatcher> {
    use notify::{EventKind, RecursiveMode, Watcher};
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            if matches!(
                event.kind,
                EventKind::Create(_) | EventKind::Modify(notify::event::ModifyKind::Name(_))
            ) {
                let _ = changed.send(());
            }
        }
    })
    .map_err(|e| tracing::warn!(error = %e, "file finder: no watcher; new files not seen"))
    .ok()?;
    if let Err(e) = watcher.watch(cwd, RecursiveMode::Recursive) {
        tracing::warn!(error = %e, "file finder: cwd not watched; new files not seen");
        return None;
    }
    Some(watcher)
}

/// Matcher threads: all cores but one, so the UI loop always has one to itself.
fn workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get().saturating_sub(1))
        .max(1)
}

/// What the matcher thread last finished: the rows of one query.
#[derive(Debug, Clone, Default)]
pub struct FileRows {
    /// The query these rows answer.
    pub query: String,
    /// The matching files, best first.
    pub rows: Vec<FileRow>,
    /// Files found so far, and how many of them the query matches.
    pub indexed: u32,
    /// How many of the indexed files the query matches (may be more than `rows`).
    pub matched: u32,
    /// Bumped on every publication.
    pub version: u64,
}

enum Request {
    /// Match this query; publish its best `limit` rows.
    Query(String, usize),
    /// The workers or the walk have something new.
    Wake,
}

/// Files of a cwd, matched by `nucleo` off the UI loop. A matcher thread owns the
/// `nucleo::Nucleo` (whose `tick` may wait for a cancelled worker), so the UI only ever sends a
/// query and reads the last published `FileRows`, never waiting.
pub struct FileFinder {
    requests: std::sync::mpsc::Sender<Request>,
    published: Arc<std::sync::Mutex<FileRows>>,
    walking: Arc<AtomicBool>,
    query: Option<String>,
    seen: u64,
    /// Set when the finder is dropped: the watch for new files ends.
    stopped: Arc<AtomicBool>,
}

impl Drop for FileFinder {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
    }
}

impl FileFinder {
    /// Starts the walk of `cwd` and the matcher thread. `notify` is called (from those
    /// threads) whenever new rows are published.
    pub fn start(cwd: PathBuf, notify: Arc<dyn Fn() + Send + Sync>) -> FileFinder {
        let (requests, inbox) = std::sync::mpsc::channel::<Request>();
        let wake = requests.clone();
        let wake: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            let _ = wake.send(Request::Wake);
        });
        let nucleo: Nucleo<String> = Nucleo::new(
            Config::DEFAULT.match_paths(),
            wake.clone(),
            Some(workers()),
            1,
        );
        let injector = nucleo.injector();
        let walking = Arc::new(AtomicBool::new(true));
        let done = walking.clone();
        let stopped = Arc::new(AtomicBool::new(false));
        let stop = stopped.clone();
        std::thread::spawn(move || {
            let watched = cwd.clone();
            let mut seen = std::collections::HashSet::new();
            // Pushes each path not seen before; answers how many were new.
            let walk_new = |seen: &mut std::collections::HashSet<String>| {
                let mut added = 0usize;
                walk_into(&cwd, |path| {
                    if seen.insert(path.clone()) {
                        added += 1;
                        injector.push(path, |path, columns| {
                            columns[0] = Utf32String::from(path.as_str());
                        });
                    }
                });
                added
            };
            // Files created after launch: the walk again (the same rules) whenever something
            // under the cwd was created or renamed, at most once per `REWALK_EVERY`; only paths
            // not seen before are added. Watched from before the first walk, so nothing created
            // meanwhile is missed. Without a watcher the first walk is all there is.
            let (changed, changes) = std::sync::mpsc::channel::<()>();
            let watcher = new_files_watcher(&watched, changed);
            walk_new(&mut seen);
            done.store(false, Ordering::SeqCst);
            wake();
            if watcher.is_none() {
                return;
            }
            loop {
                match changes.recv_timeout(std::time::Duration::from_millis(500)) {
                    Ok(()) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                        if !stop.load(Ordering::SeqCst) =>
                    {
                        continue
                    }
                    // The finder was dropped (its session ended), or the watcher stopped.
                    Err(_) => break,
                }
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(REWALK_EVERY);
                while changes.try_recv().is_ok() {}
                if walk_new(&mut seen) > 0 {
                    wake();
                }
            }
        });
        let published = Arc::new(std::sync::Mutex::new(FileRows::default()));
        let out = published.clone();
        std::thread::spawn(move || matcher_thread(nucleo, inbox, out, notify));
        FileFinder {
            requests,
            published,
            walking,
            query: None,
            seen: 0,
            stopped,
        }
    }

    /// Asks for `query`'s best `limit` rows; the answer is published when ready.
    pub fn set_query(&mut self, query: &str, limit: usize) {
        if self.query.as_deref() == Some(query) {
            return;
        }
        self.query = Some(query.to_string());
        let _ = self.requests.send(Request::Query(query.to_string(), limit));
    }

    /// True when rows were published since the last call.
    pub fn tick(&mut self) -> bool {
        let version = self.published.lock().map_or(self.seen, |p| p.version);
        std::mem::replace(&mut self.seen, version) != version
    }

    /// The last published rows (possibly for an earlier query: compare `query`).
    pub fn rows(&self) -> FileRows {
        self.published.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// The walk is still finding files.
    pub fn walking(&self) -> bool {
        self.walking.load(Ordering::SeqCst)
    }
}

/// Owns the matcher: applies the newest query, lets the workers run, publishes the rows.
fn matcher_thread(
    mut nucleo: Nucleo<String>,
    inbox: std::sync::mpsc::Receiver<Request>,
    out: Arc<std::sync::Mutex<FileRows>>,
    notify: Arc<dyn Fn() + Send + Sync>,
) {
    let mut matcher = Matcher::new(Config::DEFAULT.match_paths());
    let mut query = String::new();
    let mut limit = 0usize;
    let mut asked = false;
    let mut version = 0u64;
    while let Ok(first) = inbox.recv() {
        // Take everything waiting: only the newest query matters.
        for request in std::iter::once(first).chain(inbox.try_iter()) {
            if let Request::Query(q, n) = request {
                let append = q.starts_with(query.as_str());
                nucleo
                    .pattern
                    .reparse(0, &q, CaseMatching::Smart, Normalization::Smart, append);
                query = q;
                limit = n;
                asked = true;
            }
        }
        let status = nucleo.tick(10);
        if !asked || status.running {
            // The workers will wake this thread again when they finish.
            continue;
        }
        let snapshot = nucleo.snapshot();
        let n = snapshot
            .matched_item_count()
            .min(u32::try_from(limit).unwrap_or(u32::MAX));
        let pattern = snapshot.pattern().column_pattern(0);
        let mut indices = Vec::new();
        let rows: Vec<FileRow> = snapshot
            .matched_items(..n)
            .map(|item| {
                indices.clear();
                let score = pattern
                    .indices(
                        item.matcher_columns[0].slice(..),
                        &mut matcher,
                        &mut indices,
                    )
                    .unwrap_or(0);
                indices.sort_unstable();
                indices.dedup();
                FileRow {
                    path: item.data.clone(),
                    indices: indices.clone(),
                    score,
                }
            })
            .collect();
        version += 1;
        let rows = FileRows {
            query: query.clone(),
            rows,
            indexed: snapshot.item_count(),
            matched: snapshot.matched_item_count(),
            version,
        };
        if let Ok(mut slot) = out.lock() {
            *slot = rows;
        }
        notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::file_match::FileMatcher;

    fn indexed(cwd: &Path) -> Arc<FileIndex> {
        let (tx, rx) = std::sync::mpsc::channel();
        spawn_file_index(cwd.to_path_buf(), move |index| {
            let _ = tx.send(index);
        });
        rx.recv().expect("the file index")
    }

    #[cfg(unix)]
    #[test]
    fn names_that_are_not_utf8_are_left_out() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cafe.txt"), "ok").unwrap();
        std::fs::write(
            dir.path().join(OsStr::from_bytes(b"caf\xe9.txt")),
            "latin-1",
        )
        .unwrap();
        let odd_dir = dir.path().join(OsStr::from_bytes(b"caf\xffdir"));
        std::fs::create_dir(&odd_dir).unwrap();
        std::fs::write(odd_dir.join("cafe-inner.txt"), "below").unwrap();
        std::fs::create_dir(dir.path().join("ok")).unwrap();
        std::fs::write(dir.path().join("ok/cafe-nested.txt"), "ok").unwrap();
        let index = indexed(dir.path());
        let mut paths: Vec<String> = FileMatcher::default()
            .best(&index, "caf", 50)
            .into_iter()
            .map(|row| row.path)
            .collect();
        paths.sort();
        assert_eq!(paths, ["cafe.txt", "ok/cafe-nested.txt"]);
        for path in &paths {
            assert!(dir.path().join(path).is_file(), "{path} exists");
        }
    }

    #[test]
    fn gitignore_is_honoured_and_hidden_files_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join("target/debug/app"), "bin").unwrap();
        std::fs::write(root.join("run.log"), "log").unwrap();
        std::fs::create_dir_all(root.join(".github/workflows")).unwrap();
        std::fs::write(root.join(".github/workflows/ci.yml"), "on: push").unwrap();
        std::fs::create_dir_all(root.join(".git/objects")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}").unwrap();
        let mut paths = walk(root);
        paths.sort();
        assert_eq!(
            paths,
            [".github/workflows/ci.yml", ".gitignore", "src/main.rs"]
        );
    }

    #[test]
    fn the_finder_matches_off_the_loop() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..3000 {
            let sub = dir.path().join(format!("d{}", n % 10));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join(format!("file{n}.txt")), "").unwrap();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let notify: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            let _ = tx.send(());
        });
        let mut finder = FileFinder::start(dir.path().to_path_buf(), notify);
        finder.set_query("", 5);
        let wait = |finder: &mut FileFinder, done: &dyn Fn(&FileRows) -> bool| loop {
            let rows = finder.rows();
            if !finder.walking() && done(&rows) {
                return rows;
            }
            rx.recv_timeout(std::time::Duration::from_secs(10))
                .expect("the finder publishes");
        };
        let all = wait(&mut finder, &|r| r.indexed == 3000 && r.query.is_empty());
        assert_eq!(all.rows.len(), 5, "an empty query offers a few files");
        assert_eq!(all.matched, 3000, "no cap");
        finder.set_query("file2999", 50);
        let rows = wait(&mut finder, &|r| r.query == "file2999");
        assert_eq!(rows.rows[0].path, "d9/file2999.txt");
        assert!(!rows.rows[0].indices.is_empty());
        assert!(finder.tick(), "new rows were published");
    }

    #[test]
    fn files_created_after_launch_are_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("README.md"), "").unwrap();
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let notify: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            let _ = tx.send(());
        });
        let mut finder = FileFinder::start(dir.path().to_path_buf(), notify);
        finder.set_query("", 50);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let wait = |finder: &FileFinder, done: &dyn Fn(&FileRows) -> bool| loop {
            let rows = finder.rows();
            if !finder.walking() && done(&rows) {
                return rows;
            }
            assert!(std::time::Instant::now() < deadline, "{:?}", finder.rows());
            let _ = rx.recv_timeout(std::time::Duration::from_millis(200));
        };
        wait(&finder, &|r| r.indexed == 2);
        // A new file and a new directory with a file, and one the .gitignore leaves out.
        std::fs::write(dir.path().join("NOTES.md"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("docs")).unwrap();
        std::fs::write(dir.path().join("docs/plan.md"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("target")).unwrap();
        std::fs::write(dir.path().join("target/out.md"), "").unwrap();
        finder.set_query("md", 50);
        let rows = wait(&finder, &|r| {
            r.query == "md" && r.rows.iter().any(|row| row.path == "docs/plan.md")
        });
        let paths: Vec<&str> = rows.rows.iter().map(|r| r.path.as_str()).collect();
        assert!(paths.contains(&"NOTES.md"), "{paths:?}");
        assert!(!paths.contains(&"target/out.md"), "{paths:?}");
        assert_eq!(rows.indexed, 4, "each file once: {paths:?}");
    }
}
