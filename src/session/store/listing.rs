//! The listing index: session headers by directory, revalidated by directory stamps, and the
//! sorted listing and id lookup built from them.
//!
//! Purpose: the `@` popup lists sessions on every keystroke, so a listing of an unchanged home
//! costs a `stat` of `sessions/` and of each project directory and reads no log; a new session
//! shows up as a changed directory, and a header never changes once written.
//!
//! Invariant: the listing answered is the one a fresh walk would give, up to directories that
//! changed within [`super::stamp::RACY_WINDOW`] of their last look (those are listed again next
//! time, since their stamp is never trusted). A project directory is re-listed only when its
//! [`Stamp`] moved; a known log keeps its header; a directory without a readable log is tried
//! again on every listing, except a log whose header failed, which is tried again once its
//! [`FileStamp`] changes. An entry the listing cache gave is trusted only while its session
//! directory still has the stamp it had when the header was read. Ids colliding across logs go
//! to the first by path order ([`path_order`]). Proof: `tests/session/store.rs` (counters of
//! directory and header reads, new, removed and replaced sessions, unreadable projects),
//! `tests/session/listing_cache.rs`, and `listing::tests` for [`path_order`].
//!
//! The listing's phases: [`refresh`] (the root directory), [`refresh_projects`] (shared among
//! the cores on a first listing), [`refresh_project`] (one project: [`relist_project`], then
//! [`refresh_session`] per session directory), then [`rebuild`] (the sorted rows and the id map).

use super::listing_cache;
use super::stamp::{FileStamp, Stamp};
use super::{DiskStore, StoreStats};
use crate::session::error::{Result, SessionError};
use crate::session::format::{SessionHeader, FORMAT_VERSION};
use crate::session::paths::{self, SESSIONS_DIR};
use crate::session::query::{sort_sessions, SessionSummary};
use crate::session::reader::{self, Encoding};
use crate::sync::LockExt;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

#[derive(Default)]
pub(super) struct Index {
    /// Whether this store tried the listing cache already, and when it last wrote it.
    pub(super) cache: CacheState,
    pub(super) root: Option<Stamp>,
    pub(super) projects: HashMap<PathBuf, Project>,
    /// Session id → log path (first by path order when ids collide).
    pub(super) by_id: HashMap<String, PathBuf>,
    /// Logs of a format version this build cannot read, by session id (ids of readable logs
    /// win): left out of the listing, answered by id with [`SessionError::UnsupportedVersion`].
    pub(super) unsupported: HashMap<String, (PathBuf, u64)>,
    pub(super) sorted: Arc<Vec<SessionSummary>>,
    pub(super) stats: StoreStats,
}

/// The listing cache, as one store uses it.
#[derive(Default, Clone, Copy)]
pub(super) struct CacheState {
    pub(super) loaded: bool,
    pub(super) written: Option<Instant>,
}

/// A store that keeps a listing cache rewrites it at most this often (a new session changes the
/// index; the next process checks a stale cache and lists only what changed).
pub(super) const CACHE_REWRITE_EVERY: Duration = Duration::from_secs(60);

#[derive(Default)]
pub(super) struct Project {
    pub(super) stamp: Option<Stamp>,
    /// Session directory → its log, or `None` while the directory holds no readable log yet.
    pub(super) sessions: HashMap<PathBuf, Option<LogEntry>>,
    /// The last listing of this directory failed (warned about once, until it succeeds).
    pub(super) unreadable: bool,
    /// Session directory → the log whose header could not be read, and its stamp then: an
    /// unchanged bad log is not read again on every listing.
    pub(super) failed: HashMap<PathBuf, (PathBuf, FileStamp)>,
}

#[derive(Clone)]
pub(super) struct LogEntry {
    pub(super) path: PathBuf,
    pub(super) header: Arc<SessionHeader>,
    /// The session directory's stamp taken before its header was read: the listing cache
    /// trusts the header in a later process only while the directory still has this stamp.
    pub(super) dir_stamp: Option<Stamp>,
    /// Read or checked by this process (`false` for an entry the listing cache gave, until its
    /// directory's stamp was compared).
    pub(super) verified: bool,
}

impl DiskStore {
    /// The encoding new sessions should use: the home's existing one, else zstd (as dsh).
    pub fn preferred_encoding(&self) -> Encoding {
        let _ = self.list_sessions_blocking();
        let index = self.inner.index.locked();
        let mut plain = false;
        for path in index.by_id.values() {
            match Encoding::of_path(path) {
                Encoding::Zstd => return Encoding::Zstd,
                Encoding::Plain => plain = true,
            }
        }
        if plain {
            Encoding::Plain
        } else {
            Encoding::Zstd
        }
    }

    /// The log file of session `id`, refreshing the index once if the id is unknown. A log of an
    /// unsupported format version is [`SessionError::UnsupportedVersion`], not a log path.
    pub fn log_path(&self, id: &str) -> Result<PathBuf> {
        if let Some(found) = self.lookup(id) {
            return found;
        }
        self.list_sessions_blocking()?;
        self.lookup(id)
            .unwrap_or_else(|| Err(SessionError::NotFound { id: id.to_string() }))
    }

    fn lookup(&self, id: &str) -> Option<Result<PathBuf>> {
        let index = self.inner.index.locked();
        if let Some(path) = index.by_id.get(id) {
            return Some(Ok(path.clone()));
        }
        index.unsupported.get(id).map(|(path, version)| {
            Err(SessionError::UnsupportedVersion {
                path: path.clone(),
                version: *version,
            })
        })
    }

    /// Synchronous `list_sessions`.
    pub fn list_sessions_blocking(&self) -> Result<Arc<Vec<SessionSummary>>> {
        let mut index = self.inner.index.locked();
        let sessions_dir = self.inner.home.join(SESSIONS_DIR);
        if !self.inner.listing_cache {
            refresh(&sessions_dir, &mut index)?;
            return Ok(index.sorted.clone());
        }
        let first = !index.cache.loaded;
        if first {
            index.cache.loaded = true;
            if index.root.is_none() && index.projects.is_empty() {
                if let Some(loaded) = listing_cache::load(&self.inner.home, &sessions_dir) {
                    *index = Index {
                        cache: index.cache,
                        stats: index.stats,
                        ..loaded
                    };
                }
            }
        }
        let before = index.stats;
        refresh(&sessions_dir, &mut index)?;
        let read = index.stats.dir_reads + index.stats.header_reads
            > before.dir_reads + before.header_reads;
        let due = index
            .cache
            .written
            .is_none_or(|at| at.elapsed() >= CACHE_REWRITE_EVERY);
        if read && (first || due) && index.root.is_some() {
            listing_cache::store(&self.inner.home, &sessions_dir, &index);
            index.cache.written = Some(Instant::now());
        }
        Ok(index.sorted.clone())
    }

    /// Logs the last listing left out because their format version is not 0, as the errors
    /// reading them gives, sorted by path (for a command line to say what it skipped).
    pub fn unsupported_logs(&self) -> Vec<SessionError> {
        let index = self.inner.index.locked();
        let mut logs: Vec<(PathBuf, u64)> = index.unsupported.values().cloned().collect();
        logs.sort();
        logs.into_iter()
            .map(|(path, version)| SessionError::UnsupportedVersion { path, version })
            .collect()
    }
}

/// The log file inside a session directory, preferring the zstd one.
fn find_log(dir: &Path) -> Option<PathBuf> {
    [paths::ZSTD_LOG, paths::PLAIN_LOG]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
}

pub(super) fn refresh(sessions_dir: &Path, index: &mut Index) -> Result<()> {
    let now = SystemTime::now();
    let root_meta = match fs::metadata(sessions_dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !index.projects.is_empty() || index.root.is_some() {
                *index = Index {
                    stats: index.stats,
                    ..Index::default()
                };
            }
            return Ok(());
        }
        Err(e) => return Err(SessionError::io(sessions_dir, e)),
    };
    let root_stamp = Stamp::of(&root_meta, now);
    let mut changed = false;
    if !index.root.is_some_and(|s| s.still(&root_stamp)) {
        index.stats.dir_reads += 1;
        let mut seen = HashSet::new();
        for dir in list_dirs(sessions_dir)? {
            seen.insert(dir.clone());
            index.projects.entry(dir).or_default();
        }
        let before = index.projects.len();
        index.projects.retain(|dir, _| seen.contains(dir));
        changed |= before != index.projects.len();
        index.root = Some(root_stamp);
    }
    changed |= refresh_projects(&mut index.projects, now, &mut index.stats)?;
    if changed || index.sorted.is_empty() && !index.projects.is_empty() {
        rebuild(index);
    }
    Ok(())
}

/// Refreshes every project directory. The first listing of a big home reads a header per session
/// (tens of thousands of small files, most of it in the kernel's path lookups), so then the
/// projects are shared among the available cores.
fn refresh_projects(
    projects: &mut HashMap<PathBuf, Project>,
    now: SystemTime,
    stats: &mut StoreStats,
) -> Result<bool> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    // Threads only pay for a listing that reads directories never read before; an indexed home
    // costs a `stat` per project.
    let unread = projects
        .values()
        .filter(|p| p.stamp.is_none() || p.sessions.values().flatten().any(|e| !e.verified))
        .count();
    let mut projects: Vec<(&PathBuf, &mut Project)> = projects.iter_mut().collect();
    if workers < 2 || unread < 2 * workers {
        return refresh_share(&mut projects, now, stats);
    }
    let share = projects.len().div_ceil(workers);
    let outcomes: Vec<Result<(bool, StoreStats)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = projects
            .chunks_mut(share)
            .map(|chunk| {
                scope.spawn(move || {
                    let mut stats = StoreStats::default();
                    refresh_share(chunk, now, &mut stats).map(|changed| (changed, stats))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut changed = false;
    for outcome in outcomes {
        let (share_changed, share_stats) = outcome?;
        changed |= share_changed;
        stats.dir_reads += share_stats.dir_reads;
        stats.header_reads += share_stats.header_reads;
    }
    Ok(changed)
}

/// Refreshes one share of the project directories.
fn refresh_share(
    projects: &mut [(&PathBuf, &mut Project)],
    now: SystemTime,
    stats: &mut StoreStats,
) -> Result<bool> {
    let mut changed = false;
    for (dir, project) in projects.iter_mut() {
        changed |= refresh_project(dir, project, now, stats)?;
    }
    Ok(changed)
}

/// Re-lists a project directory if it changed, and retries sessions without a log yet.
fn refresh_project(
    dir: &Path,
    project: &mut Project,
    now: SystemTime,
    stats: &mut StoreStats,
) -> Result<bool> {
    let Ok(meta) = fs::metadata(dir) else {
        return Ok(project.forget_sessions());
    };
    let stamp = Stamp::of(&meta, now);
    let mut changed = false;
    if !project.stamp.is_some_and(|s| s.still(&stamp)) {
        stats.dir_reads += 1;
        match relist_project(dir, project) {
            Some(relisted) => changed |= relisted,
            None => return Ok(project.forget_sessions()),
        }
        project.stamp = Some(stamp);
    }
    for (session_dir, entry) in project.sessions.iter_mut() {
        changed |= refresh_session(session_dir, entry, &mut project.failed, now, stats);
    }
    Ok(changed)
}

impl Project {
    /// Drops every session of a project that cannot be looked at now (it is listed again next
    /// time: no stamp is kept); whether it had any.
    fn forget_sessions(&mut self) -> bool {
        let had = !self.sessions.is_empty();
        self.sessions.clear();
        self.stamp = None;
        had
    }
}

/// Lists a changed project directory into `project.sessions` (new directories without a log
/// yet, vanished ones dropped); whether the set changed. `None` when the directory cannot be
/// listed (warned about once, until it can).
fn relist_project(dir: &Path, project: &mut Project) -> Option<bool> {
    let listed = match list_dirs(dir) {
        Ok(listed) => listed,
        Err(e) => {
            // One project nobody may read must not take the home down: skip it like an
            // unreadable session, and try again on the next listing.
            if !project.unreadable {
                tracing::warn!(error = %e, "skipping a project directory that cannot be read");
            }
            project.unreadable = true;
            return None;
        }
    };
    project.unreadable = false;
    // Headers the listing cache gave for a directory that changed are read again.
    for entry in project.sessions.values_mut() {
        if entry.as_ref().is_some_and(|e| !e.verified) {
            *entry = None;
        }
    }
    let mut changed = false;
    let mut seen = HashSet::new();
    for session_dir in listed {
        seen.insert(session_dir.clone());
        if let std::collections::hash_map::Entry::Vacant(slot) = project.sessions.entry(session_dir)
        {
            slot.insert(None);
            changed = true;
        }
    }
    let before = project.sessions.len();
    project.sessions.retain(|d, _| seen.contains(d));
    project.failed.retain(|d, _| seen.contains(d));
    changed |= before != project.sessions.len();
    Some(changed)
}

/// One session directory of a listed project: a known log keeps its header forever (one the
/// listing cache gave, while its directory has the stamp it had then); a directory without one
/// is looked at again, and its log's header read unless that header failed before and the log
/// has not changed since. Whether the entry changed.
fn refresh_session(
    session_dir: &PathBuf,
    entry: &mut Option<LogEntry>,
    failed: &mut HashMap<PathBuf, (PathBuf, FileStamp)>,
    now: SystemTime,
    stats: &mut StoreStats,
) -> bool {
    let mut changed = false;
    if let Some(known) = entry.as_mut() {
        if !known.verified {
            let fresh = fs::metadata(session_dir).ok().map(|m| Stamp::of(&m, now));
            known.verified = matches!(
                (known.dir_stamp, fresh),
                (Some(then), Some(fresh)) if then.still(&fresh)
            );
        }
        if known.verified {
            return false;
        }
        *entry = None;
        changed = true;
    }
    let Some(path) = find_log(session_dir) else {
        return changed | entry.take().is_some();
    };
    // A log whose header failed is read again only once it changed (or was replaced).
    let stamp = FileStamp::of(&path).ok();
    if let (Some(stamp), Some((failed_path, failed_stamp))) = (stamp, failed.get(session_dir)) {
        if *failed_path == path && *failed_stamp == stamp {
            return changed;
        }
    }
    stats.header_reads += 1;
    // Taken before the read: a change after it shows as a stamp that no longer matches.
    let dir_stamp = fs::metadata(session_dir).ok().map(|m| Stamp::of(&m, now));
    match reader::read_header_any_version(&path) {
        Ok(header) => {
            failed.remove(session_dir);
            if header.version != FORMAT_VERSION {
                tracing::warn!(
                    path = %path.display(),
                    version = header.version,
                    "not listing a session log of an unsupported format version"
                );
            }
            *entry = Some(LogEntry {
                path,
                header: Arc::new(header),
                dir_stamp,
                verified: true,
            });
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "skipping a session whose header cannot be read");
            changed |= entry.take().is_some();
            // Remembered only once its stamp is old enough to be trusted (coarse clocks).
            match stamp.filter(|s| !s.is_racy(now)) {
                Some(stamp) => {
                    failed.insert(session_dir.clone(), (path, stamp));
                }
                None => {
                    failed.remove(session_dir);
                }
            }
            changed
        }
    }
}

pub(super) fn rebuild(index: &mut Index) {
    let mut entries: Vec<&LogEntry> = index
        .projects
        .values()
        .flat_map(|p| p.sessions.values().flatten())
        .collect();
    entries.sort_by(|a, b| path_order(&a.path, &b.path));
    let mut by_id = HashMap::with_capacity(entries.len());
    let mut sessions = Vec::with_capacity(entries.len());
    let (entries, unreadable): (Vec<&LogEntry>, Vec<&LogEntry>) = entries
        .into_iter()
        .partition(|entry| entry.header.version == FORMAT_VERSION);
    for entry in entries {
        if by_id.contains_key(&entry.header.id) {
            tracing::warn!(
                id = %entry.header.id,
                path = %entry.path.display(),
                "ignoring a second log with the same session id"
            );
            continue;
        }
        by_id.insert(entry.header.id.clone(), entry.path.clone());
        sessions.push(SessionSummary {
            header: entry.header.clone(),
            live: false,
            persisted: true,
        });
    }
    sort_sessions(&mut sessions);
    index.unsupported = unreadable
        .into_iter()
        .filter(|entry| !by_id.contains_key(&entry.header.id))
        .map(|entry| {
            let found = (entry.path.clone(), entry.header.version);
            (entry.header.id.clone(), found)
        })
        .collect();
    index.by_id = by_id;
    index.sorted = Arc::new(sessions);
}

/// `a.cmp(b)` for the store's paths (joined from listed names: no `.`, `..` or repeated
/// separators), without splitting them into components: a byte comparison in which the separator
/// sorts below every other byte is the component-wise order then, since no name holds a
/// separator. (`Path::cmp` was a quarter of a listing served from the listing cache.)
fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
        let key = |byte: u8| if byte == b'/' { 0 } else { u16::from(byte) + 1 };
        match mismatch(a, b) {
            Some(at) => key(a[at]).cmp(&key(b[at])),
            None => a.len().cmp(&b.len()),
        }
    }
    #[cfg(not(unix))]
    {
        a.cmp(b)
    }
}

/// The first index where `a` and `b` differ (within the shorter), eight bytes at a time: the
/// store's paths share the long prefix of the home.
#[cfg(unix)]
fn mismatch(a: &[u8], b: &[u8]) -> Option<usize> {
    let n = a.len().min(b.len());
    let (wa, _) = a[..n].as_chunks::<8>();
    let (wb, _) = b[..n].as_chunks::<8>();
    for (k, (x, y)) in wa.iter().zip(wb).enumerate() {
        let diff = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
        if diff != 0 {
            return Some(8 * k + diff.trailing_zeros() as usize / 8);
        }
    }
    let done = 8 * wa.len();
    (done..n).find(|&i| a[i] != b[i])
}

fn list_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(dirs),
        Err(e) => return Err(SessionError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| SessionError::io(dir, e))?;
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            dirs.push(entry.path());
        }
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::TestRng;

    /// The byte order with the separator lowest is `Path`'s component order on joined names.
    #[test]
    fn path_order_is_the_component_order() {
        let names = [
            "a", "ab", "a-b", "a.b", "a b", "b", "A", "é", "a~", "_no-cwd", "0",
        ];
        let mut rng = TestRng::new(9);
        for _ in 0..20_000 {
            let path = |rng: &mut TestRng| {
                let mut path = PathBuf::from("/home/h/sessions");
                for _ in 0..1 + rng.below(3) {
                    path.push(names[rng.below(names.len())]);
                }
                path
            };
            let (a, b) = (path(&mut rng), path(&mut rng));
            assert_eq!(path_order(&a, &b), a.cmp(&b), "{a:?} {b:?}");
        }
    }
}
