//! The session directories of one project directory, as the listing index keeps them.
//!
//! Purpose: a project of a big home holds thousands of session directories, and the index keeps
//! them for the life of the process. A hash map sized by powers of two held each of them in up
//! to twice the room it needs (8 MB of a warm MCP server's 100,000 sessions); a vector sorted by
//! name holds them in exactly their room, and the lookups it serves (a relisting, a vanished
//! log) are rare and binary searches.
//!
//! Invariant: the names are unique and sorted by their bytes. Proof: the tests below, and every
//! listing test in `tests/session/` through the index.

use super::stamp::Stamp;
use crate::session::format::SessionHeader;
use crate::session::reader::Encoding;
use std::ffi::OsStr;
use std::sync::Arc;

/// Session directory name → its log, or `None` while the directory holds no readable log yet.
#[derive(Default)]
pub(super) struct SessionDirs {
    dirs: Vec<(Arc<OsStr>, Option<LogEntry>)>,
}

impl SessionDirs {
    /// The directories of `entries` (in any order; a repeated name keeps its first entry).
    pub(super) fn from_entries(mut entries: Vec<(Arc<OsStr>, Option<LogEntry>)>) -> SessionDirs {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, first| later.0 == first.0);
        entries.shrink_to_fit();
        SessionDirs { dirs: entries }
    }

    pub(super) fn len(&self) -> usize {
        self.dirs.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.dirs = Vec::new();
    }

    /// The directory at position `at` (in name order).
    pub(super) fn at(&self, at: usize) -> Option<&(Arc<OsStr>, Option<LogEntry>)> {
        self.dirs.get(at)
    }

    /// The entry of the directory `name`.
    pub(super) fn get_mut(&mut self, name: &OsStr) -> Option<&mut Option<LogEntry>> {
        let at = self.dirs.binary_search_by(|(n, _)| (**n).cmp(name)).ok()?;
        Some(&mut self.dirs[at].1)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&Arc<OsStr>, &Option<LogEntry>)> {
        self.dirs.iter().map(|(name, entry)| (name, entry))
    }

    pub(super) fn iter_mut(
        &mut self,
    ) -> impl Iterator<Item = (&Arc<OsStr>, &mut Option<LogEntry>)> {
        self.dirs.iter_mut().map(|(name, entry)| (&*name, entry))
    }

    /// The known logs.
    pub(super) fn logs(&self) -> impl Iterator<Item = &LogEntry> {
        self.dirs.iter().filter_map(|(_, entry)| entry.as_ref())
    }

    /// Makes the directories exactly `listed` (a fresh listing of the project): new ones without
    /// a log yet, known ones keeping theirs, vanished ones dropped. Whether the set changed.
    pub(super) fn relist(&mut self, listed: Vec<Arc<OsStr>>) -> bool {
        let mut listed = listed;
        listed.sort();
        listed.dedup();
        let mut old = std::mem::take(&mut self.dirs).into_iter().peekable();
        let mut dirs = Vec::with_capacity(listed.len());
        let mut changed = false;
        for name in listed {
            // Older names before this one have vanished.
            while old.next_if(|(n, _)| *n < name).is_some() {
                changed = true;
            }
            match old.next_if(|(n, _)| *n == name) {
                Some(kept) => dirs.push(kept),
                None => {
                    changed = true;
                    dirs.push((name, None));
                }
            }
        }
        changed |= old.next().is_some();
        dirs.shrink_to_fit();
        self.dirs = dirs;
        changed
    }
}

#[derive(Clone)]
pub(super) struct LogEntry {
    /// Which of the two log names the session directory holds.
    pub(super) log: Encoding,
    pub(super) header: Arc<SessionHeader>,
    /// The session directory's stamp taken before its header was read: the listing cache
    /// trusts the header in a later process only while the directory still has this stamp.
    pub(super) dir_stamp: Option<Stamp>,
    /// Read or checked by this process (`false` for an entry the listing cache gave, until its
    /// directory's stamp was compared).
    pub(super) verified: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dirs: &SessionDirs) -> Vec<String> {
        dirs.iter()
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .collect()
    }

    fn listed(names: &[&str]) -> Vec<Arc<OsStr>> {
        names.iter().map(|n| Arc::from(OsStr::new(n))).collect()
    }

    #[test]
    fn relisting_keeps_known_entries_and_says_whether_anything_changed() {
        let mut dirs = SessionDirs::default();
        assert!(dirs.relist(listed(&["b", "a", "c", "a"])));
        assert_eq!(names(&dirs), ["a", "b", "c"]);
        assert!(!dirs.relist(listed(&["c", "b", "a"])));
        assert!(dirs.get_mut(OsStr::new("b")).is_some());
        assert!(dirs.get_mut(OsStr::new("x")).is_none());
        // One gone, one new.
        assert!(dirs.relist(listed(&["a", "c", "d"])));
        assert_eq!(names(&dirs), ["a", "c", "d"]);
        // Only the last one gone.
        assert!(dirs.relist(listed(&["a", "c"])));
        assert!(dirs.relist(listed(&[])));
        assert!(dirs.is_empty());
        let built = SessionDirs::from_entries(vec![
            (Arc::from(OsStr::new("z")), None),
            (Arc::from(OsStr::new("m")), None),
            (Arc::from(OsStr::new("z")), None),
        ]);
        assert_eq!(names(&built), ["m", "z"]);
        assert_eq!(built.len(), 2);
    }
}
