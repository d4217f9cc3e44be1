//! The producer of the popup's file rows: a walk of the session's cwd, off the UI thread.
//!
//! Invariant: only names that are valid UTF-8 are offered: a lossy spelling of any other name is
//! a path that does not exist, and inserting it would reference nothing (or another file). Such
//! a directory is not entered either, since every path below it has the same problem. Proof:
//! `names_that_are_not_utf8_are_left_out` below.

use super::file_match::FileIndex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAX_INDEXED_FILES: usize = 20_000;

/// Walks `cwd` on a thread of its own and hands the finished index to `deliver`.
pub fn spawn_file_index<F>(cwd: PathBuf, deliver: F)
where
    F: FnOnce(Arc<FileIndex>) + Send + 'static,
{
    std::thread::spawn(move || deliver(Arc::new(FileIndex::new(walk(&cwd)))));
}

/// The relative paths of the files under `cwd`, sorted.
pub fn walk(cwd: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    let mut stack = vec![cwd.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            if name.starts_with('.') || matches!(name, "target" | "node_modules") {
                continue;
            }
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => {
                    // `cwd` itself may have any name: only the relative part is offered.
                    if let Some(rel) = path.strip_prefix(cwd).ok().and_then(|r| r.to_str()) {
                        paths.push(rel.to_string());
                    }
                }
                _ => {}
            }
            if paths.len() >= MAX_INDEXED_FILES {
                break;
            }
        }
        if paths.len() >= MAX_INDEXED_FILES {
            break;
        }
    }
    paths.sort();
    paths
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
}
