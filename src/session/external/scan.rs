//! [`ExternalSessions`]: one agent's home as a read-only
//! [`SessionQuery`](crate::session::SessionQuery), with the file I/O.
//!
//! Listing revalidates by stamps as the dsh store does: each directory on the way to the session
//! files is re-read only when its modification stamp changed (a new file shows up as a changed
//! directory), and a file's head (id, created time, cwd) is read once, since records are only
//! appended. A file whose head is not complete yet (or that is not this agent's format) is
//! checked again by its own stamp on every listing. Titles are kept per file with the offset
//! their scan ended at, so a grown file is read only past that offset. Every read runs on the
//! blocking pool and opens files read-only.
//!
//! Between processes the heads and title scans are kept under the dsh home
//! (`persist.rs`, when the source was made [`ExternalSessions::with_listing_cache`]): the
//! first listing of a new process takes a remembered head for a file the walk still finds when
//! `stat` says it is the same file, not shorter, and readable; a remembered title scan goes on
//! from its offset. What a process read is written back at its listings and when it ends.

use super::agent::{SideNames, TitleScan};
use super::{header, not_found, ExternalAgent, Head, Stamped};
use crate::session::error::{Result, SessionError};
use crate::session::query::{sort_sessions, SessionSummary};
use crate::sync::LockExt;
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

pub use super::lines::{read_lines, FileStamp, LineSink};

/// One agent's sessions. Cheap to clone; clones share the caches.
#[derive(Clone)]
pub struct ExternalSessions {
    inner: Arc<Inner>,
}

struct Inner {
    agent: ExternalAgent,
    home: PathBuf,
    listing: Mutex<Listing>,
    titles: Mutex<Stamped<TitleEntry>>,
    /// Names the agent keeps beside its session files, if it keeps any.
    side: Option<Box<dyn SideNames>>,
    /// A database agent's last listing: the stamps of its files then, the list and the rows.
    database: Mutex<Option<DatabaseListing>>,
    /// The persistent listing under the dsh home (`None`: this source keeps nothing on disk).
    cache: Option<PathBuf>,
    /// A title was scanned since the persistent listing was last written.
    titles_dirty: AtomicBool,
    /// The persistent listing as read, once per process, outside the listing's lock: a first
    /// answer ([`ExternalSessions::remembered_ids_blocking`]) waits for this read only, never
    /// for a listing that is checking every file.
    saved: std::sync::OnceLock<Saved>,
}

struct DatabaseListing {
    stamps: Vec<Option<FileStamp>>,
    list: Arc<Vec<SessionSummary>>,
    rows: HashMap<String, super::agent::DatabaseRow>,
}

#[derive(Default)]
struct Listing {
    /// Directory → its stamp and its entries (subdirectories or session files).
    dirs: FxHashMap<PathBuf, (Option<SystemTime>, Vec<PathBuf>)>,
    /// Session file → its stamp and head (`None`: incomplete or not this agent's format).
    /// (Keyed by the path's bytes, all under the same root: a `Path` hashes component by
    /// component, which cost a warm listing of thousands of files a tenth of its time.)
    heads: FxHashMap<OsString, (FileStamp, Option<Head>)>,
    by_id: FxHashMap<String, PathBuf>,
    list: Option<Arc<Vec<SessionSummary>>>,
    /// Session file → why it is not listed (the read's error, naming the file).
    errors: FxHashMap<PathBuf, String>,
    /// Listed session files whose head was incomplete at the last listing, with their stamp:
    /// the only files a listing must look at again while no directory changed.
    incomplete: Vec<(PathBuf, FileStamp)>,
    /// Heads the persistent listing holds, each used once the walk finds its file still there
    /// and continued (emptied after the first listing).
    restored: FxHashMap<OsString, (FileStamp, Head)>,
    /// The stamps the last pass over the files took, and when: a title read right after a
    /// listing takes its file's stamp from here instead of a `stat` of its own.
    fresh: FxHashMap<OsString, FileStamp>,
    fresh_at: Option<std::time::Instant>,
    /// The persistent listing was read (or there is none to read).
    loaded: bool,
    /// A head was read since the persistent listing was last written.
    heads_dirty: bool,
}

struct TitleEntry {
    offset: u64,
    line: u64,
    state: Held,
}

/// A title scan, or its state as the persistent listing kept it until it is first needed.
enum Held {
    Scan(Box<dyn TitleScan>),
    Kept(super::persist::TitleState),
    /// A kept state decoded to choose a title, and not read further since: the kept encoding
    /// is still the scan's state, and is what the listing writes back (a listing that shows
    /// every title would otherwise encode every state again).
    Decoded(Box<dyn TitleScan>, super::persist::TitleState),
}

impl TitleEntry {
    /// The scan, a kept state decoded first; `None` when that state is not one of `agent`'s
    /// (its file is then scanned again from the start). Shared: a scan read further is taken
    /// out of its entry by value, so a decoded state never changes under its kept encoding.
    fn scan(&mut self, agent: ExternalAgent) -> Option<&dyn TitleScan> {
        let decoded = match &self.state {
            Held::Kept(kept) => kept
                .decoded()
                .and_then(|state| agent.format().title_scan(Some(&state))),
            _ => None,
        };
        if let Some(scan) = decoded {
            // The kept encoding moves beside its scan (nothing between the two moves can fail,
            // so the empty stand-in is never seen).
            let stand_in = Held::Kept(super::persist::TitleState::Encoded(Box::default()));
            if let Held::Kept(kept) = std::mem::replace(&mut self.state, stand_in) {
                self.state = Held::Decoded(scan, kept);
            }
        }
        match &self.state {
            Held::Scan(scan) | Held::Decoded(scan, _) => Some(&**scan),
            Held::Kept(_) => None,
        }
    }

    /// The state to keep: a kept one as it was (borrowed), a scan's as it saves it.
    fn saved_state(&self) -> std::borrow::Cow<'_, super::persist::TitleState> {
        match &self.state {
            Held::Scan(scan) => {
                std::borrow::Cow::Owned(super::persist::TitleState::Value(scan.save()))
            }
            Held::Kept(kept) | Held::Decoded(_, kept) => std::borrow::Cow::Borrowed(kept),
        }
    }
}

/// How long a stamp the listing took stands in for a title read's own `stat`.
const FRESH: Duration = Duration::from_secs(2);

use super::dirs::{readable, refresh_dir};

mod saved;
use saved::Saved;

impl ExternalSessions {
    /// A read-only source over `agent`'s home (`~/.claude`, `~/.codex`, or the directory a flag
    /// or the environment named). Reads nothing until asked; never writes under the home.
    pub fn new(agent: ExternalAgent, home: impl Into<PathBuf>) -> ExternalSessions {
        ExternalSessions::build(agent, home.into(), None)
    }

    /// [`ExternalSessions::new`], keeping its listing (heads and title scans) between processes
    /// under the dsh home `dsh_home` (`<dsh_home>/index/agents/`, never under the agent's home):
    /// a new process checks each file by `stat` and reads only what grew.
    pub fn with_listing_cache(
        agent: ExternalAgent,
        home: impl Into<PathBuf>,
        dsh_home: &Path,
    ) -> ExternalSessions {
        let home = home.into();
        // A database agent keeps its own change stamps; only file agents are cached here.
        let cache = agent
            .format()
            .database()
            .is_none()
            .then(|| super::persist::path(dsh_home, agent.name(), &home));
        ExternalSessions::build(agent, home, cache)
    }

    fn build(agent: ExternalAgent, home: PathBuf, cache: Option<PathBuf>) -> ExternalSessions {
        ExternalSessions {
            inner: Arc::new(Inner {
                agent,
                side: agent.format().side_names(&home, cache.as_deref()),
                home,
                listing: Mutex::new(Listing::default()),
                titles: Mutex::new(FxHashMap::default()),
                database: Mutex::new(None),
                cache,
                titles_dirty: AtomicBool::new(false),
                saved: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The same source (same agent and home) with its listing kept under `dsh_home`; a source
    /// that already read something keeps its caches and is returned as it is.
    pub fn cached_in(self, dsh_home: &Path) -> ExternalSessions {
        let fresh = {
            let listing = self.inner.listing.locked();
            listing.list.is_none() && !listing.loaded && self.inner.saved.get().is_none()
        };
        if self.inner.cache.is_some() || !fresh {
            return self;
        }
        ExternalSessions::with_listing_cache(self.agent(), self.home().to_path_buf(), dsh_home)
    }

    /// Where this source keeps its listing between processes, if it does.
    pub fn listing_cache_path(&self) -> Option<&Path> {
        self.inner.cache.as_deref()
    }

    /// Which agent's sessions this source serves.
    pub fn agent(&self) -> ExternalAgent {
        self.inner.agent
    }

    /// The agent's home directory this source reads.
    pub fn home(&self) -> &Path {
        &self.inner.home
    }

    /// The directory under the home that holds the agent's sessions.
    pub fn sessions_subdir(agent: ExternalAgent) -> &'static str {
        agent.format().sessions_subdir()
    }

    /// The file holding session `id` (namespaced), listing first if it is not known yet.
    pub fn path_of(&self, id: &str) -> Result<PathBuf> {
        self.locate(id).map(|(path, _)| path)
    }

    /// [`ExternalSessions::path_of`], with the head the persistent listing holds when it gave
    /// the file (read from it, unchanged or only grown since, as the listing itself trusts).
    pub(super) fn locate(&self, id: &str) -> Result<(PathBuf, Option<Head>)> {
        let own = id
            .strip_prefix(self.agent().name())
            .and_then(|rest| rest.strip_prefix(':'))
            .ok_or_else(|| not_found(id))?;
        if let Some(path) = self.lookup(own) {
            return Ok((path, None));
        }
        if let Some((path, head)) = self.remembered(own) {
            return Ok((path, Some(head)));
        }
        self.list_sessions_blocking()?;
        Ok((self.lookup(own).ok_or_else(|| not_found(id))?, None))
    }

    /// The file of session `own` and its head as the persistent listing remembers them, before
    /// this process listed: only when no other file claims the id and `stat` says the file is
    /// the same (inode, not shorter) and readable. A new process that reads one session
    /// (`prepare`) checks one file, not the whole home.
    fn remembered(&self, own: &str) -> Option<(PathBuf, Head)> {
        let listing = self.inner.listing.locked();
        if listing.list.is_some() {
            return None;
        }
        let (path, old, head) = if listing.loaded {
            let mut claims = listing.restored.iter().filter(|(_, (_, h))| h.id == own);
            let (path, (old, head)) = claims.next()?;
            if claims.next().is_some() {
                return None;
            }
            (PathBuf::from(path), *old, head.clone())
        } else {
            // Not restored yet (a new process that reads one session): the one entry is
            // looked up in the cache's bytes, and the listing is left to restore when listed.
            let cache = self.inner.cache.as_ref()?;
            let root = self.inner.home.join(Self::sessions_subdir(self.agent()));
            super::persist::find(cache, self.agent().name(), &self.inner.home, &root, own)?
        };
        let meta = fs::metadata(&path).ok()?;
        let same = meta.is_file() && FileStamp::of(&meta).continues(old) && readable(&path);
        same.then_some((path, head))
    }

    fn lookup(&self, own: &str) -> Option<PathBuf> {
        let listing = self.inner.listing.locked();
        listing.by_id.get(own).cloned()
    }

    /// Every listable session, newest first (the same `Arc` while nothing changed).
    pub fn list_sessions_blocking(&self) -> Result<Arc<Vec<SessionSummary>>> {
        if let Some(database) = self.agent().format().database() {
            return self.list_database(database);
        }
        let agent = self.agent();
        let root = self.inner.home.join(Self::sessions_subdir(agent));
        let saved = self.saved();
        let mut listing = self.inner.listing.locked();
        if !listing.loaded {
            listing.loaded = true;
            listing.heads_dirty |= saved.refused;
            listing.restored = saved.heads.locked().take().unwrap_or_default();
        }
        let now = SystemTime::now();
        // Directory levels below the root (Claude Code `projects/<dir>/`, Codex
        // `sessions/Y/M/D/`).
        let depth = agent.format().depth();
        let mut changed = false;
        let mut level = vec![root];
        for _ in 0..depth {
            let mut next = Vec::new();
            for dir in &level {
                changed |= refresh_dir(&mut listing.dirs, dir, now, true)?;
                if let Some((_, subdirs)) = listing.dirs.get(dir) {
                    next.extend(subdirs.iter().cloned());
                }
            }
            level = next;
        }
        for dir in &level {
            changed |= refresh_dir(&mut listing.dirs, dir, now, false)?;
        }
        // Warm path: no directory changed and no incomplete head grew, so nothing did (heads
        // that were complete never change). This costs a `stat` per directory, not per file.
        if !changed {
            if let Some(list) = &listing.list {
                let grown = listing.incomplete.iter().any(|(file, stamp)| {
                    fs::metadata(file).map_or(true, |meta| FileStamp::of(&meta) != *stamp)
                });
                if !grown {
                    let list = list.clone();
                    persist(&self.inner, &mut listing);
                    return Ok(list);
                }
            }
        }
        let mut files = Vec::new();
        for dir in &level {
            if let Some((_, entries)) = listing.dirs.get(dir) {
                files.extend(
                    entries
                        .iter()
                        .filter(|p| agent.format().is_session_file(p))
                        .cloned(),
                );
            }
        }
        // Heads: new files are read; incomplete ones again when their stamp changed.
        changed |= read_heads(agent, &mut listing, &files);
        listing.incomplete = files
            .iter()
            .filter_map(|file| match listing.heads.get(file.as_os_str()) {
                Some((stamp, None)) => Some((file.clone(), *stamp)),
                _ => None,
            })
            .collect();
        if !changed {
            if let Some(list) = listing.list.clone() {
                persist(&self.inner, &mut listing);
                return Ok(list);
            }
        }
        let mut by_id: FxHashMap<String, PathBuf> = FxHashMap::default();
        let mut list = Vec::new();
        for file in &files {
            let Some((_, Some(head))) = listing.heads.get(file.as_os_str()) else {
                continue;
            };
            if let Some(other) = by_id.get(&head.id) {
                tracing::warn!(source = agent.name(), id = head.id, file = %file.display(), first = %other.display(), "two session files claim one id; listing the first");
                continue;
            }
            by_id.insert(head.id.clone(), file.clone());
            list.push(SessionSummary {
                header: Arc::new(header(agent, head)),
                live: false,
                persisted: true,
            });
        }
        let present: std::collections::HashSet<&OsStr, rustc_hash::FxBuildHasher> =
            files.iter().map(|f| f.as_os_str()).collect();
        listing
            .heads
            .retain(|path, _| present.contains(path.as_os_str()));
        listing
            .errors
            .retain(|path, _| present.contains(path.as_os_str()));
        sort_sessions(&mut list);
        let list = Arc::new(list);
        listing.by_id = by_id;
        listing.list = Some(list.clone());
        // What the persistent listing held for files the walk did not find is gone.
        listing.restored = FxHashMap::default();
        persist(&self.inner, &mut listing);
        Ok(list)
    }

    /// Writes the persistent listing now if anything was read since it was last written (a
    /// process calls this before it exits; the listing itself writes it as it goes).
    pub fn flush(&self) {
        if self.inner.cache.is_none() {
            return;
        }
        let mut listing = self.inner.listing.locked();
        if listing.list.is_some() {
            persist(&self.inner, &mut listing);
        }
    }

    /// Why the last listing left files out (one error naming the file each, sorted): a file
    /// that cannot be read costs its one session, never the listing.
    pub fn unreadable_files(&self) -> Vec<String> {
        let listing = self.inner.listing.locked();
        let mut errors: Vec<String> = listing.errors.values().cloned().collect();
        errors.sort();
        errors
    }

    /// A database agent's listing, read again only when its files' stamps changed.
    fn list_database(
        &self,
        database: &dyn super::agent::DatabaseFormat,
    ) -> Result<Arc<Vec<SessionSummary>>> {
        let home = &self.inner.home;
        let stamps: Vec<Option<FileStamp>> = database
            .files(home)
            .iter()
            .map(|p| fs::symlink_metadata(p).ok().map(|m| FileStamp::of(&m)))
            .collect();
        let mut cache = self.inner.database.locked();
        if let Some(known) = cache.as_ref() {
            if known.stamps == stamps {
                return Ok(known.list.clone());
            }
        }
        let rows = database.list(home)?;
        let mut list: Vec<SessionSummary> = rows
            .iter()
            .map(|row| SessionSummary {
                header: Arc::new(header(self.agent(), &row.head)),
                live: false,
                persisted: true,
            })
            .collect();
        sort_sessions(&mut list);
        let list = Arc::new(list);
        *cache = Some(DatabaseListing {
            stamps,
            list: list.clone(),
            rows: rows.into_iter().map(|r| (r.head.id.clone(), r)).collect(),
        });
        Ok(list)
    }

    /// A database agent's row for `id` (namespaced), listing first.
    pub(super) fn database_row(&self, id: &str) -> Result<super::agent::DatabaseRow> {
        let own = id
            .strip_prefix(self.agent().name())
            .and_then(|rest| rest.strip_prefix(':'))
            .ok_or_else(|| not_found(id))?;
        self.list_sessions_blocking()?;
        let cache = self.inner.database.locked();
        cache
            .as_ref()
            .and_then(|c| c.rows.get(own).cloned())
            .ok_or_else(|| not_found(id))
    }

    /// The session's title (SPEC §9): read past where the last scan of its file ended.
    pub fn read_title_blocking(&self, id: &str) -> Result<Option<String>> {
        if self.agent().format().database().is_some() {
            return Ok(self.database_row(id)?.title);
        }
        let path = self.path_of(id)?;
        let stamp = match self.fresh_stamp(&path) {
            Some(stamp) => stamp,
            None => FileStamp::of(&fs::metadata(&path).map_err(|e| SessionError::io(&path, e))?),
        };
        let own = &id[self.agent().name().len() + 1..];
        let agent = self.agent();
        let mut titles = self.inner.titles.locked();
        // An unchanged title is chosen in place (readers racing for it never rescan its file);
        // one whose file changed is taken out while the file is read, so others are read meanwhile.
        if let Some((_, entry)) = titles
            .get_mut(path.as_os_str())
            .filter(|(old, _)| *old == stamp)
        {
            if let Some(scan) = entry.scan(agent) {
                return Ok(scan.choose(self.inner.side.as_deref(), own));
            }
        }
        let entry = titles.remove(path.as_os_str());
        drop(titles);
        let resumed = match entry {
            Some((old, mut entry)) if old.continues_to(stamp, entry.offset) => {
                let (offset, line) = (entry.offset, entry.line);
                match entry.scan(agent).is_some() {
                    true => Some((offset, line, entry.state)),
                    false => None,
                }
            }
            _ => None,
        };
        let (from, from_line, mut scan) = match resumed {
            Some((offset, line, Held::Scan(scan) | Held::Decoded(scan, _))) => (offset, line, scan),
            _ => match agent.format().title_scan(None) {
                Some(scan) => (0, 0, scan),
                None => return Ok(None),
            },
        };
        let (offset, line) = read_lines(&path, from, from_line, &mut *scan)?;
        self.inner.titles_dirty.store(true, Ordering::Release);
        let title = scan.choose(self.inner.side.as_deref(), own);
        let entry = TitleEntry {
            offset,
            line,
            state: Held::Scan(scan),
        };
        self.inner
            .titles
            .locked()
            .insert(path.into_os_string(), (stamp, entry));
        Ok(title)
    }

    /// The stamp the listing took of `path` within [`FRESH`] (still right: the scan reads to
    /// the end whatever it said, and a file changed since differs from it at the next read).
    fn fresh_stamp(&self, path: &Path) -> Option<FileStamp> {
        let listing = self.inner.listing.locked();
        let recent = listing.fresh_at.is_some_and(|at| at.elapsed() < FRESH);
        recent.then(|| listing.fresh.get(path.as_os_str()).copied())?
    }

    /// The titles of `ids` (namespaced), in order, read on every core: a first listing of a
    /// large home reads every file's tail, and one thread would leave the others idle.
    pub fn read_titles_blocking(&self, ids: &[&str]) -> Vec<Result<Option<String>>> {
        // Titles this process already scanned cost a `stat` each: threads would only contend.
        let unscanned = {
            let listing = self.inner.listing.locked();
            let titles = self.inner.titles.locked();
            ids.iter()
                .filter(|id| {
                    let own = id.split_once(':').map_or(**id, |(_, own)| own);
                    listing
                        .by_id
                        .get(own)
                        .is_none_or(|path| !titles.contains_key(path.as_os_str()))
                })
                .count()
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(unscanned / 8)
            .max(1);
        if threads == 1 {
            return ids.iter().map(|id| self.read_title_blocking(id)).collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<Mutex<Option<Result<Option<String>>>>> =
            ids.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(id) = ids.get(i) else {
                        break;
                    };
                    *results[i].locked() = Some(self.read_title_blocking(id));
                });
            }
        });
        results
            .into_iter()
            .map(|r| {
                r.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .unwrap_or(Ok(None))
            })
            .collect()
    }
}

/// Writes the persistent listing when something was read since it was last written (best
/// effort: a dsh home that cannot be written costs the next process its reads, nothing
/// else).
fn persist(inner: &Inner, listing: &mut Listing) {
    let Some(cache) = &inner.cache else {
        return;
    };
    let titles_dirty = inner.titles_dirty.swap(false, Ordering::AcqRel);
    if !listing.heads_dirty && !titles_dirty {
        return;
    }
    listing.heads_dirty = false;
    let root = inner.home.join(inner.agent.format().sessions_subdir());
    // Encoded under the locks from what the listing holds, borrowed; written after them.
    let bytes = {
        let titles = inner.titles.locked();
        let mut files: Vec<super::persist::ToWrite<'_>> = listing
            .heads
            .iter()
            .filter_map(|(path, (stamp, head))| {
                let head = head.as_ref()?;
                let title = titles
                    .get(path)
                    .map(|(stamp, entry)| super::persist::TitleToWrite {
                        stamp: *stamp,
                        offset: entry.offset,
                        line: entry.line,
                        state: entry.saved_state(),
                    });
                Some(super::persist::ToWrite {
                    path: Path::new(path),
                    stamp: *stamp,
                    head,
                    title,
                })
            })
            .collect();
        // One order for the same listing, by the paths' bytes (comparing them as paths,
        // component by component, was a tenth of a listing of 8,000 files after appends).
        files.sort_unstable_by(|a, b| {
            a.path
                .as_os_str()
                .as_encoded_bytes()
                .cmp(b.path.as_os_str().as_encoded_bytes())
        });
        super::persist::encode(inner.agent.name(), &inner.home, &root, &files)
    };
    if let Err(e) = super::persist::write(cache, inner.agent.name(), &inner.home, &bytes) {
        tracing::warn!(source = inner.agent.name(), cache = %cache.display(), error = %e, "could not write the agent listing cache");
    }
}

impl Drop for Inner {
    /// The last clone of a source writes what it read since the persistent listing was last
    /// written (a process that ends through `exit` calls [`ExternalSessions::flush`] instead).
    fn drop(&mut self) {
        if self.cache.is_none() {
            return;
        }
        let mut listing = std::mem::take(self.listing.get_mut().unwrap_or_else(|p| p.into_inner()));
        if listing.list.is_some() {
            persist(self, &mut listing);
        }
    }
}

/// Reads the heads `listing` lacks for `files`: new files (from the persistent listing when it
/// holds the same file), and incomplete heads again when their stamp changed. Answers whether
/// the listing changed.
fn read_heads(agent: ExternalAgent, listing: &mut Listing, files: &[PathBuf]) -> bool {
    let mut changed = false;
    listing.fresh.clear();
    listing.fresh_at = Some(std::time::Instant::now());
    let mut stat = super::dirs::StatAt::default();
    for file in files {
        let known = listing
            .heads
            .get(file.as_os_str())
            .map(|(stamp, head)| (*stamp, head.is_some()));
        if let Some((_, true)) = known {
            continue;
        }
        let Some((stamp, world_readable)) = stat.stamp(file) else {
            continue;
        };
        listing.fresh.insert(file.clone().into_os_string(), stamp);
        if known.map(|(s, _)| s) == Some(stamp) {
            continue;
        }
        // The persistent listing's head, for the same file (grown or not).
        if let Some((old, head)) = listing.restored.remove(file.as_os_str()) {
            // Same status as when read, and readable by all: no access check needed.
            let trusted = stamp.same_status(old) && world_readable;
            if known.is_none() && stamp.continues(old) && (trusted || readable(file)) {
                listing
                    .heads
                    .insert(file.clone().into_os_string(), (stamp, Some(head)));
                changed = true;
                continue;
            }
        }
        listing.heads_dirty = true;
        let head = match read_head(agent, file) {
            Ok(head) => {
                listing.errors.remove(file);
                head
            }
            Err(err) => {
                tracing::warn!(source = agent.name(), file = %file.display(), error = %err, "skipping a session file");
                listing.errors.insert(file.clone(), err.to_string());
                None
            }
        };
        changed |= head.is_some() || known.is_none();
        listing
            .heads
            .insert(file.clone().into_os_string(), (stamp, head));
    }
    changed
}

/// The head of one session file; `None` while it is incomplete. A file of another format is an
/// error naming what was wrong.
fn read_head(agent: ExternalAgent, path: &Path) -> Result<Option<Head>> {
    agent.format().read_head(path)
}
