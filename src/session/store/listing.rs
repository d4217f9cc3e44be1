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
//! the cores of a bigger machine on a first listing), [`refresh_project`] (one project:
//! [`relist_project`], then [`refresh_session`] per session directory), then [`rebuild`] (the
//! sorted rows and the id table).
//!
//! Memory: 100,000 sessions are held in about 40 MB less than before (a warm MCP server's
//! listing fell from 95 to about 30 MB): no absolute path is kept per session (a project
//! directory is one shared path, a session directory one shared name, a log its encoding), the
//! directories of a project are a sorted vector ([`SessionDirs`]), and ids are found through a
//! table of positions ([`IdTable`]) instead of a map from id text to path.

use super::index::{Index, Project};
use super::listing_cache;
use super::locate::{log_path, IdTable, Location};
use super::project_dir::{open_log, ProjectDir};
use super::session_dirs::LogEntry;
use super::stamp::{FileStamp, Stamp};
use super::{DiskStore, StoreStats};
use crate::session::error::{Result, SessionError};
use crate::session::format::FORMAT_VERSION;
use crate::session::paths::SESSIONS_DIR;
use crate::session::query::{session_order, SessionSummary};
use crate::session::reader::{self, Encoding};
use crate::sync::LockExt;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// A store that keeps a listing cache rewrites it at most this often (a new session changes the
/// index; the next process checks a stale cache and lists only what changed).
pub(super) const CACHE_REWRITE_EVERY: Duration = Duration::from_secs(60);

impl DiskStore {
    /// The encoding new sessions should use: the home's existing one, else zstd (as dsh).
    pub fn preferred_encoding(&self) -> Encoding {
        let _ = self.list_sessions_blocking();
        let index = self.inner.index.locked();
        let mut plain = false;
        for location in &index.located {
            match location.log {
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
        if let Some(path) = index
            .by_id
            .find(&index.sorted, id)
            .and_then(|at| index.log_at(at))
        {
            return Some(Ok(path));
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

    /// Why the last listing left sessions out that it could not read (permission denied, a
    /// FIFO or a directory in a log's place, a broken header), one error naming the file each,
    /// sorted: one unreadable file costs its one session, and a command line says which.
    pub fn unreadable_logs(&self) -> Vec<String> {
        let index = self.inner.index.locked();
        let mut errors: Vec<String> = index
            .projects
            .values()
            .flat_map(|p| p.errors.values().map(|e| e.to_string()))
            .collect();
        errors.sort();
        errors
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
        for name in list_dirs(sessions_dir)? {
            let dir = sessions_dir.join(&*name);
            if !index.projects.contains_key(dir.as_path()) {
                index
                    .projects
                    .insert(Arc::from(dir.as_path()), Project::default());
            }
            seen.insert(dir);
        }
        let before = index.projects.len();
        index.projects.retain(|dir, _| seen.contains(&**dir));
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
    projects: &mut HashMap<Arc<Path>, Project>,
    now: SystemTime,
    stats: &mut StoreStats,
) -> Result<bool> {
    // A first walk reads a header per session; on two cores one walker does that faster than
    // two (0.85 s against 1.0 s of wall time and 0.84 against 1.3 s of CPU for 100,000
    // sessions, BENCHMARKS.md: two walkers mostly wait on each other, on malloc's arena lock
    // and the scheduler). Checking the listing cache's entries is `stat`s alone, which two
    // walkers share well.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let first_walk = projects.values().any(|p| p.stamp.is_none());
    let workers = if cores < 4 && first_walk {
        1
    } else {
        cores.min(8)
    };
    // Threads only pay for a listing that reads directories never read before; an indexed home
    // costs a `stat` per project.
    let unread = projects
        .values()
        .filter(|p| p.stamp.is_none() || p.sessions.logs().any(|e| !e.verified))
        .count();
    let mut projects: Vec<(&Arc<Path>, &mut Project)> = projects.iter_mut().collect();
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
    projects: &mut [(&Arc<Path>, &mut Project)],
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
    // Session directories are stamped relative to their project's open directory.
    let opened = fs::File::open(dir).ok();
    let at = ProjectDir {
        path: dir,
        opened: opened.as_ref(),
    };
    for (name, entry) in project.sessions.iter_mut() {
        changed |= refresh_session(
            &at,
            name,
            entry,
            (&mut project.failed, &mut project.errors),
            now,
            stats,
        );
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
    for (_, entry) in project.sessions.iter_mut() {
        if entry.as_ref().is_some_and(|e| !e.verified) {
            *entry = None;
        }
    }
    if !project.failed.is_empty() {
        let seen: HashSet<&Arc<OsStr>> = listed.iter().collect();
        project.failed.retain(|d, _| seen.contains(d));
    }
    if !project.errors.is_empty() {
        let seen: HashSet<&Arc<OsStr>> = listed.iter().collect();
        project.errors.retain(|d, _| seen.contains(d));
    }
    let changed = project.sessions.relist(listed);
    Some(changed)
}

/// One session directory of a listed project: a known log keeps its header forever (one the
/// listing cache gave, while its directory has the stamp it had then); a directory without one
/// is looked at again, and its log's header read unless that header failed before and the log
/// has not changed since. Whether the entry changed.
fn refresh_session(
    project_dir: &ProjectDir,
    name: &Arc<OsStr>,
    entry: &mut Option<LogEntry>,
    (failed, errors): Failures<'_>,
    now: SystemTime,
    stats: &mut StoreStats,
) -> bool {
    let mut changed = false;
    if let Some(known) = entry.as_mut() {
        if !known.verified {
            let fresh = project_dir.stamp(name, now);
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
    // Taken before the header is read: a change after it shows as a stamp that no longer
    // matches.
    let dir_stamp = project_dir.stamp(name, now);
    let session_dir = project_dir.path.join(&**name);
    let Some((log, path, opened)) = open_log(project_dir, name, &session_dir) else {
        return changed | entry.take().is_some();
    };
    // A log whose header failed is read again only once it changed (or was replaced). Its
    // stamp is taken only when needed (a failure known or coming): one `fstat` a session less.
    let stamp_of = |file: Option<&fs::File>| match file {
        Some(file) => file.metadata().ok().map(|meta| FileStamp::of_meta(&meta)),
        None => FileStamp::of(&path).ok(),
    };
    let mut stamp = None;
    if let Some((failed_log, failed_stamp)) = failed.get(name) {
        stamp = stamp_of(opened.as_ref().ok());
        if *failed_log == log && stamp == Some(*failed_stamp) {
            return changed;
        }
    }
    stats.header_reads += 1;
    let header = match opened {
        Ok(file) => {
            let header = reader::read_header_from(&path, &file, log);
            if header.is_err() && stamp.is_none() {
                stamp = stamp_of(Some(&file));
            }
            header
        }
        Err(e) => {
            if stamp.is_none() {
                stamp = stamp_of(None);
            }
            Err(SessionError::io(&path, e))
        }
    };
    match header {
        Ok(header) => {
            failed.remove(name);
            errors.remove(name);
            if header.version != FORMAT_VERSION {
                tracing::warn!(
                    path = %path.display(),
                    version = header.version,
                    "not listing a session log of an unsupported format version"
                );
            }
            *entry = Some(LogEntry {
                log,
                header: Arc::new(header),
                dir_stamp,
                verified: true,
            });
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "skipping a session whose header cannot be read");
            errors.insert(name.clone(), e.to_string().into());
            changed |= entry.take().is_some();
            // Remembered only once its stamp is old enough to be trusted (coarse clocks).
            match stamp.filter(|s| !s.is_racy(now)) {
                Some(stamp) => {
                    failed.insert(name.clone(), (log, stamp));
                }
                None => {
                    failed.remove(name);
                }
            }
            changed
        }
    }
}

/// A project's bad logs by session directory: their stamps (not read again while unchanged)
/// and why they are not listed.
type Failures<'a> = (
    &'a mut HashMap<Arc<OsStr>, (Encoding, FileStamp)>,
    &'a mut HashMap<Arc<OsStr>, Arc<str>>,
);

pub(super) fn rebuild(index: &mut Index) {
    struct Found<'a> {
        project: u32,
        dir: u32,
        path: (&'a Path, &'a OsStr),
        entry: &'a LogEntry,
    }
    impl Found<'_> {
        fn path(&self) -> PathBuf {
            log_path(self.path.0, self.path.1, self.entry.log)
        }
    }
    let project_dirs: Vec<Arc<Path>> = index.projects.keys().cloned().collect();
    let mut found = Vec::new();
    for (project, dir) in project_dirs.iter().enumerate() {
        for (at, (name, entry)) in index.projects[dir].sessions.iter().enumerate() {
            if let Some(entry) = entry {
                found.push(Found {
                    project: project as u32,
                    dir: at as u32,
                    path: (dir, name),
                    entry,
                });
            }
        }
    }
    // In the order of the logs' paths (project directory, session directory): the first of
    // colliding ids wins.
    found.sort_by(|a, b| {
        path_order(a.path.0, b.path.0)
            .then_with(|| name_bytes(a.path.1).cmp(name_bytes(b.path.1)))
            .then_with(|| a.entry.log.file_name().cmp(b.entry.log.file_name()))
    });
    let (mut readable, unreadable): (Vec<Found>, Vec<Found>) = found
        .into_iter()
        .partition(|f| f.entry.header.version == FORMAT_VERSION);
    // A stable sort: among equal ids the first by path stays first.
    readable.sort_by(|a, b| a.entry.header.id.cmp(&b.entry.header.id));
    readable.dedup_by(|later, first| {
        let same = later.entry.header.id == first.entry.header.id;
        if same {
            tracing::warn!(
                id = %later.entry.header.id,
                path = %later.path().display(),
                "ignoring a second log with the same session id"
            );
        }
        same
    });
    let mut listed: Vec<(SessionSummary, Location)> = readable
        .iter()
        .map(|f| {
            let summary = SessionSummary {
                header: f.entry.header.clone(),
                live: false,
                persisted: true,
            };
            let location = Location {
                project: f.project,
                dir: f.dir,
                log: f.entry.log,
            };
            (summary, location)
        })
        .collect();
    listed.sort_by(|a, b| session_order(&a.0, &b.0));
    let (sessions, located): (Vec<SessionSummary>, Vec<Location>) = listed.into_iter().unzip();
    let by_id = IdTable::of(&sessions);
    let mut unsupported = HashMap::new();
    for f in unreadable {
        if by_id.find(&sessions, &f.entry.header.id).is_none() {
            unsupported
                .entry(f.entry.header.id.clone())
                .or_insert_with(|| (f.path(), f.entry.header.version));
        }
    }
    index.unsupported = unsupported;
    index.by_id = by_id;
    index.located = located;
    index.project_dirs = project_dirs;
    index.sorted = Arc::new(sessions);
}

/// A session directory's name as bytes, for the path order.
fn name_bytes(name: &OsStr) -> &[u8] {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        name.as_bytes()
    }
    #[cfg(not(unix))]
    {
        name.as_encoded_bytes()
    }
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

/// The names of the directories in `dir` (none when it is gone).
fn list_dirs(dir: &Path) -> Result<Vec<Arc<OsStr>>> {
    let mut dirs = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(dirs),
        Err(e) => return Err(SessionError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| SessionError::io(dir, e))?;
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            dirs.push(Arc::from(entry.file_name()));
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
