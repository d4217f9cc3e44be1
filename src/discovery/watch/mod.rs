//! Change notification for the background indexer: a file watcher on the dsh store's
//! `<home>/sessions` tree (inotify on Linux, driven directly by `watch/linux.rs`; the `notify`
//! crate elsewhere).
//!
//! Purpose: a polling pass lists every session and stamps every log, so at 100,000 sessions it
//! takes seconds and an append waited for the next one (up to ~14 s measured). With the watcher,
//! a write to a log names its session ([`touched`]) and the indexer re-indexes just those
//! sessions ([`super::Indexer::refresh_sessions`]) about [`COALESCE`] after the first event of a
//! burst. A new project or session directory, a log removed or renamed away, an undecodable
//! event queue overflow (a rescan) or an id the last listing did not hold asks for a full pass.
//! Polling stays, slower, for what events miss (network file systems, a lost event). Other
//! agents' homes are not watched: their sessions are found by the polling passes only.
//!
//! Invariants: the watcher's callback never touches SQLite or the store: it maps each path to a
//! session and records it in [`Pending`] under a short lock; [`Pending`] holds at most
//! [`MAX_PENDING`] ids (past that it asks for one full pass instead), so a flood of events
//! costs bounded memory. A watcher that cannot start (no inotify, `max_user_watches` reached,
//! any error) or reports an error later is logged once and dropped, and polling goes on at its
//! old cadence. The watcher stops when the indexer thread ends (its handle dropped).
//!
//! Proof: the mapping and the bound are unit-tested below; `tests/discovery/watch.rs` appends
//! to a log and creates a session under a running indexer whose polling interval is an hour,
//! and finds both in search; in a user namespace whose inotify watch limit is 2, the watcher
//! fails to start and polling finds an append.
//!
//! Cost (`cargo run --release --example measure -- watch --sessions 100000`): one watch per
//! directory; 100,501 directories take 0.29 s to add, 6.9 MB of this process's memory (68 bytes
//! a directory; the `notify` crate's path maps took 45 MB, ~450 bytes a directory, and 1.5–1.7 s)
//! and about 11 MB of kernel memory.

use crate::session::paths::{decode_segment, PLAIN_LOG, ZSTD_LOG};
use notify::event::{CreateKind, ModifyKind, RemoveKind, RenameMode};
#[cfg(target_os = "linux")]
mod linux;

use notify::EventKind;
#[cfg(not(target_os = "linux"))]
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::collections::HashSet;
use std::path::{Component, Path};
use std::time::{Duration, Instant};

/// Events are gathered this long after the first of a burst before the indexer acts on them.
pub const COALESCE: Duration = Duration::from_millis(50);
/// At most this many session ids wait for a targeted refresh; past it, a full pass is asked
/// for (it covers them all) and the ids are dropped.
pub const MAX_PENDING: usize = 4096;

/// What a file-system event under `<home>/sessions` means for the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// The log of this session (its directory name decoded) was written, created or replaced.
    Session(String),
    /// Sessions may have appeared or gone (a directory created, removed or renamed, a log
    /// removed, events lost): only a full pass (a listing) can tell.
    Listing,
}

/// Maps an event of `kind` on `path` to what it means for the index of the store whose
/// sessions directory is `sessions_dir` (the path the watcher was given). `None` for what never
/// changes an indexed session: opens, reads and metadata changes, files that are not logs
/// (`sessions/<project>/<id>/session.jsonl` or `session.jsonl.zstd`), anything deeper or outside,
/// and a log under a directory name no id is filed under (left to the polling passes).
pub fn touched(sessions_dir: &Path, kind: &EventKind, path: &Path) -> Option<Touched> {
    let relative = path.strip_prefix(sessions_dir).ok()?;
    let mut parts = Vec::with_capacity(3);
    for component in relative.components() {
        match component {
            Component::Normal(part) if parts.len() < 3 => parts.push(part),
            _ => return None,
        }
    }
    let gone = matches!(
        kind,
        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From))
    );
    match parts.as_slice() {
        // The sessions directory itself, a project directory or a session directory.
        [] | [_] | [_, _] => {
            let layout = match kind {
                EventKind::Create(CreateKind::File) | EventKind::Remove(RemoveKind::File) => false,
                EventKind::Create(_) | EventKind::Remove(_) | EventKind::Any => true,
                EventKind::Modify(ModifyKind::Name(_)) => true,
                _ => false,
            };
            (layout && (!parts.is_empty() || gone)).then_some(Touched::Listing)
        }
        [_, segment, file] if *file == PLAIN_LOG || *file == ZSTD_LOG => {
            if gone {
                return Some(Touched::Listing);
            }
            let written = matches!(
                kind,
                EventKind::Any
                    | EventKind::Create(_)
                    | EventKind::Modify(
                        ModifyKind::Any
                            | ModifyKind::Other
                            | ModifyKind::Data(_)
                            | ModifyKind::Name(
                                RenameMode::To | RenameMode::Any | RenameMode::Other
                            )
                    )
            );
            if !written {
                return None;
            }
            decode_segment(segment.to_str()?).map(Touched::Session)
        }
        _ => None,
    }
}

/// Events waiting for the indexer: bounded, coalesced.
#[derive(Debug, Default)]
pub struct Pending {
    ids: HashSet<String>,
    listing: bool,
    since: Option<Instant>,
}

impl Pending {
    /// Records `touched` (seen at `now`).
    pub fn add(&mut self, touched: Touched, now: Instant) {
        self.since.get_or_insert(now);
        match touched {
            Touched::Listing => self.listing = true,
            Touched::Session(_) if self.listing && self.ids.len() >= MAX_PENDING => {}
            Touched::Session(id) => {
                if self.ids.len() >= MAX_PENDING && !self.ids.contains(&id) {
                    // A full pass stamps every session: the ids are not needed any more.
                    self.ids.clear();
                    self.listing = true;
                } else {
                    self.ids.insert(id);
                }
            }
        }
    }

    /// Asks for a full pass that must find `ids` (sessions the last listing did not hold).
    pub fn require_listing(&mut self, ids: impl IntoIterator<Item = String>, now: Instant) {
        self.add(Touched::Listing, now);
        for id in ids {
            self.add(Touched::Session(id), now);
        }
    }

    /// When the gathered events are due: [`COALESCE`] after the first, and, when they ask for
    /// a full pass, not before `listing_not_before`. `None` when nothing waits.
    pub fn due(&self, listing_not_before: Instant) -> Option<Instant> {
        let due = self.since? + COALESCE;
        Some(if self.listing {
            due.max(listing_not_before)
        } else {
            due
        })
    }

    /// Takes what waits: the ids, and whether a full pass was asked for.
    pub fn take(&mut self) -> (HashSet<String>, bool) {
        self.since = None;
        (
            std::mem::take(&mut self.ids),
            std::mem::replace(&mut self.listing, false),
        )
    }

    /// How many ids wait (never more than [`MAX_PENDING`]).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether nothing waits.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.since.is_none()
    }
}

/// A running watcher of a sessions directory; dropping it stops it.
#[cfg(target_os = "linux")]
pub type Watching = linux::Watcher;
/// A running watcher of a sessions directory; dropping it stops it.
#[cfg(not(target_os = "linux"))]
pub type Watching = RecommendedWatcher;

/// Starts watching `sessions_dir` (created if missing: a home's first session must be seen
/// too) and the directories below it; `report` gets every event's meaning and any error the
/// watcher reports later. On this thread for as long as adding the watches takes (one per
/// directory). On Linux inotify is driven directly (`watch/linux.rs`: a map of watches a fifth the
/// size of the `notify` crate's), elsewhere through `notify`.
pub fn start(
    sessions_dir: &Path,
    report: impl Fn(Result<Vec<Touched>, String>) + Send + 'static,
) -> Result<Watching, String> {
    std::fs::create_dir_all(sessions_dir)
        .map_err(|e| format!("cannot create {}: {e}", sessions_dir.display()))?;
    #[cfg(target_os = "linux")]
    {
        linux::start(sessions_dir, report)
    }
    #[cfg(not(target_os = "linux"))]
    {
        start_notify(sessions_dir, report)
    }
}

#[cfg(not(target_os = "linux"))]
fn start_notify(
    sessions_dir: &Path,
    report: impl Fn(Result<Vec<Touched>, String>) + Send + 'static,
) -> Result<RecommendedWatcher, String> {
    let root = sessions_dir.to_path_buf();
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) => {
                let mut seen: Vec<Touched> = event
                    .paths
                    .iter()
                    .filter_map(|path| touched(&root, &event.kind, path))
                    .collect();
                if event.need_rescan() {
                    seen.push(Touched::Listing);
                }
                if !seen.is_empty() {
                    report(Ok(seen));
                }
            }
            Err(e) => report(Err(describe(&e))),
        })
        .map_err(|e| describe(&e))?;
    watcher
        .watch(sessions_dir, RecursiveMode::Recursive)
        .map_err(|e| describe(&e))?;
    Ok(watcher)
}

#[cfg(not(target_os = "linux"))]
fn describe(error: &notify::Error) -> String {
    match error.kind {
        notify::ErrorKind::MaxFilesWatch => {
            format!("the inotify watch limit (fs.inotify.max_user_watches) is reached ({error})")
        }
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, AccessMode, DataChange, MetadataKind};

    fn at(path: &str, kind: EventKind) -> Option<Touched> {
        touched(Path::new("/h/sessions"), &kind, Path::new(path))
    }

    const WRITE: EventKind = EventKind::Modify(ModifyKind::Data(DataChange::Any));

    #[test]
    fn a_written_log_names_its_session() {
        let id = |id: &str| Some(Touched::Session(id.to_string()));
        assert_eq!(at("/h/sessions/--w-p--/s1/session.jsonl", WRITE), id("s1"));
        assert_eq!(
            at("/h/sessions/_no-cwd/s1/session.jsonl.zstd", WRITE),
            id("s1")
        );
        // The directory name is decoded (`encode_segment` escapes `.`, `:` and more).
        assert_eq!(
            at("/h/sessions/--w--/claude~003Aa~002Eb/session.jsonl", WRITE),
            id("claude:a.b")
        );
        let created = EventKind::Create(CreateKind::File);
        assert_eq!(at("/h/sessions/p/s2/session.jsonl", created), id("s2"));
        let replaced = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert_eq!(at("/h/sessions/p/s2/session.jsonl", replaced), id("s2"));
    }

    #[test]
    fn other_files_reads_and_junk_are_ignored() {
        for path in [
            "/h/sessions/p/s1/session.jsonl.tmp",
            "/h/sessions/p/s1/notes.txt",
            "/h/sessions/p/s1/session.json",
            "/h/sessions/p/s1/sub/session.jsonl",
            "/h/sessions/p/s1/sub/deeper/x",
            "/h/sessions/session.jsonl",
            "/h/sessions/p/session.jsonl",
            "/h/index/discovery.sqlite3",
            "/h/sessions/../sessions/p/s1/session.jsonl",
            "/elsewhere/p/s1/session.jsonl",
            // A directory name no id is filed under: left to polling.
            "/h/sessions/p/a.b/session.jsonl",
            "/h/sessions/p/~0041/session.jsonl",
        ] {
            assert_eq!(at(path, WRITE), None, "{path}");
        }
        let log = "/h/sessions/p/s1/session.jsonl";
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)),
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
        ] {
            assert_eq!(at(log, kind), None, "{kind:?}");
        }
        // A plain file beside the project or session directories is no session.
        let file = EventKind::Create(CreateKind::File);
        assert_eq!(at("/h/sessions/README", file), None);
        assert_eq!(at("/h/sessions/p/stray.txt", file), None);
        assert_eq!(at("/h/sessions/p/s1", WRITE), None);
    }

    #[test]
    fn new_or_removed_directories_and_removed_logs_ask_for_a_listing() {
        let folder = EventKind::Create(CreateKind::Folder);
        assert_eq!(at("/h/sessions/--new--", folder), Some(Touched::Listing));
        assert_eq!(at("/h/sessions/p/s9", folder), Some(Touched::Listing));
        let removed = EventKind::Remove(RemoveKind::Folder);
        assert_eq!(at("/h/sessions/p/s9", removed), Some(Touched::Listing));
        assert_eq!(at("/h/sessions", removed), Some(Touched::Listing));
        let moved = EventKind::Modify(ModifyKind::Name(RenameMode::From));
        assert_eq!(at("/h/sessions/p/s9", moved), Some(Touched::Listing));
        assert_eq!(
            at("/h/sessions/p/s1/session.jsonl", moved),
            Some(Touched::Listing)
        );
        let gone = EventKind::Remove(RemoveKind::File);
        assert_eq!(
            at("/h/sessions/p/s1/session.jsonl.zstd", gone),
            Some(Touched::Listing)
        );
        // The watched directory itself being written to (an entry made in it) is no news.
        assert_eq!(at("/h/sessions", folder), None);
    }

    #[test]
    fn pending_ids_are_bounded_and_coalesced() {
        let t0 = Instant::now();
        let mut pending = Pending::default();
        assert!(pending.is_empty());
        assert_eq!(pending.due(t0), None);
        for n in 0..MAX_PENDING {
            pending.add(
                Touched::Session(format!("s{n}")),
                t0 + Duration::from_millis(1),
            );
        }
        pending.add(Touched::Session("s0".into()), t0 + Duration::from_millis(9));
        assert_eq!(pending.len(), MAX_PENDING);
        // Due a coalescing delay after the first event, not the last.
        assert_eq!(
            pending.due(t0),
            Some(t0 + Duration::from_millis(1) + COALESCE)
        );
        // One more distinct id: a full pass instead, and no id kept.
        pending.add(Touched::Session("one-more".into()), t0);
        assert_eq!(pending.len(), 0);
        for n in 0..2 * MAX_PENDING {
            pending.add(Touched::Session(format!("t{n}")), t0);
        }
        assert!(pending.len() <= MAX_PENDING);
        // A full pass waits for the rate limit.
        let later = t0 + Duration::from_secs(3);
        assert_eq!(pending.due(later), Some(later));
        let (ids, listing) = pending.take();
        assert!(listing && ids.len() <= MAX_PENDING);
        assert!(pending.is_empty());
        pending.require_listing(["new".to_string()], t0);
        assert_eq!(pending.take(), (["new".to_string()].into(), true));
    }
}
