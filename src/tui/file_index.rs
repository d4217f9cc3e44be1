//! The producer of the popup's file rows: a walk of the session's cwd that honours
//! `.gitignore` (the `ignore` crate: `.gitignore`, `.ignore`, git's exclude files; hidden files
//! are listed as git lists them; `.git` itself is not), streamed into a `nucleo::Nucleo`
//! matcher whose worker threads score every keystroke, so neither the walk nor matching ever
//! runs on the UI loop and there is no cap on the number of files.
//!
//! Invariants: only names that are valid UTF-8 are offered: a lossy spelling of any other name
//! is a path that does not exist, and inserting it would reference nothing (or another file);
//! such a directory is not entered either. Every file the walk yields is matchable (no silent
//! cap). Proof: the unit tests below (`names_that_are_not_utf8_are_left_out`,
//! `gitignore_is_honoured_and_hidden_files_are_listed`, `the_finder_matches_off_the_loop`).

use super::file_match::{FileIndex, FileRow};
use nucleo::pattern::{CaseMatching, Normalization};
use nucleo::{Config, Matcher, Nucleo, Utf32String};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Walks `cwd` on a thread of its own and hands the finished index to `deliver` (for hosts
/// that match with [`super::file_match::FileMatcher`]).
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

/// Files of a cwd matched by `nucleo` worker threads as the query changes.
pub struct FileFinder {
    nucleo: Nucleo<String>,
    query: String,
    matcher: Matcher,
    walking: Arc<AtomicBool>,
}

impl FileFinder {
    /// Starts the walk of `cwd` into a new matcher. `notify` is called (from other threads)
    /// whenever [`tick`](Self::tick) has something new: files found, a match finished.
    pub fn start(cwd: PathBuf, notify: Arc<dyn Fn() + Send + Sync>) -> FileFinder {
        let nucleo = Nucleo::new(Config::DEFAULT.match_paths(), notify.clone(), None, 1);
        let injector = nucleo.injector();
        let walking = Arc::new(AtomicBool::new(true));
        let done = walking.clone();
        std::thread::spawn(move || {
            walk_into(&cwd, |path| {
                injector.push(path, |path, columns| {
                    columns[0] = Utf32String::from(path.as_str());
                });
            });
            done.store(false, Ordering::SeqCst);
            notify();
        });
        FileFinder {
            nucleo,
            query: String::new(),
            matcher: Matcher::new(Config::DEFAULT.match_paths()),
            walking,
        }
    }

    /// Matches `query` from now on (the workers start at the next [`tick`](Self::tick)).
    pub fn set_query(&mut self, query: &str) {
        if self.query == query {
            return;
        }
        let append = query.starts_with(self.query.as_str());
        self.nucleo
            .pattern
            .reparse(0, query, CaseMatching::Smart, Normalization::Smart, append);
        self.query = query.to_string();
    }

    /// Takes what the workers finished, never waiting for them; true when the rows changed.
    pub fn tick(&mut self) -> bool {
        self.nucleo.tick(0).changed
    }

    /// The current query's best `limit` rows, with match indices for highlighting (an empty
    /// query: the first files walked, with none).
    pub fn rows(&mut self, limit: usize) -> Vec<FileRow> {
        let snapshot = self.nucleo.snapshot();
        let n = snapshot
            .matched_item_count()
            .min(u32::try_from(limit).unwrap_or(u32::MAX));
        let pattern = snapshot.pattern().column_pattern(0);
        let mut indices = Vec::new();
        snapshot
            .matched_items(..n)
            .map(|item| {
                indices.clear();
                let score = pattern
                    .indices(
                        item.matcher_columns[0].slice(..),
                        &mut self.matcher,
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
            .collect()
    }

    /// Files found so far.
    pub fn indexed(&self) -> u32 {
        self.nucleo.snapshot().item_count()
    }

    /// Files the current query matches (as of the last tick).
    pub fn matched(&self) -> u32 {
        self.nucleo.snapshot().matched_item_count()
    }

    /// The walk is still finding files.
    pub fn walking(&self) -> bool {
        self.walking.load(Ordering::SeqCst)
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
        let settle = |finder: &mut FileFinder| loop {
            finder.tick();
            if !finder.walking() && finder.indexed() == 3000 && !finder.nucleo.tick(0).running {
                break;
            }
            let _ = rx.recv_timeout(std::time::Duration::from_millis(50));
        };
        settle(&mut finder);
        assert_eq!(finder.indexed(), 3000, "no cap");
        assert_eq!(finder.rows(5).len(), 5, "an empty query offers a few files");
        finder.set_query("file2999");
        settle(&mut finder);
        let rows = finder.rows(50);
        assert_eq!(rows[0].path, "d9/file2999.txt");
        assert!(!rows[0].indices.is_empty());
        assert!(finder.matched() >= 1);
    }
}
