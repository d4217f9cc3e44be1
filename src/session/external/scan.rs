//! [`ExternalSessions`]: one agent's home as a read-only [`SessionQuery`], with the file I/O.
//!
//! Listing revalidates by stamps as the dsh store does: each directory on the way to the session
//! files is re-read only when its modification stamp changed (a new file shows up as a changed
//! directory), and a file's head (id, created time, cwd) is read once, since records are only
//! appended. A file whose head is not complete yet (or that is not this agent's format) is
//! checked again by its own stamp on every listing. Titles are kept per file with the offset
//! their scan ended at, so a grown file is read only past that offset. Every read runs on the
//! blocking pool and opens files read-only.

use super::agent::{SideNames, TitleScan};
use super::{header, not_found, Conversation, ExternalAgent, Head, Stamped};
use crate::session::error::{Result, SessionError};
use crate::session::files;
use crate::session::query::{
    sort_sessions, BoxFuture, SessionQuery, SessionSummary, SurfaceSnapshot,
};
use crate::sync::LockExt;
use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A file's identity and size: a change means it must be read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl FileStamp {
    pub(super) fn of(meta: &fs::Metadata) -> FileStamp {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        }
    }
}

/// A sink for the complete lines of a file; returns `false` to stop reading.
pub trait LineSink {
    fn line(&mut self, index: u64, bytes: &[u8]) -> bool;
}

/// The longest line of another agent's file that is read: a longer one is a defect (as in the
/// dsh store, SPEC §3.2), skipped with a warning and never held in memory whole. Claude Code
/// puts pasted images inline as base64, so a real record can be megabytes; 64 MiB is far above
/// any seen and far below what a listing may hold.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Feeds the complete lines of `path` from byte `offset` (line number `first`) to `sink`. A last
/// line without its newline is a write in flight: it is not fed and not consumed. A line over
/// [`MAX_LINE_BYTES`] is skipped (counted, not fed) with a warning naming the file and line;
/// memory stays within the limit whatever the line's length. Only a regular file is read, opened
/// without blocking ([`files::open_read`]): a FIFO or a device in a session's place is an error,
/// never a wait. Returns the offset and line number just past the last line consumed.
pub fn read_lines(
    path: &Path,
    offset: u64,
    first: u64,
    sink: &mut dyn LineSink,
) -> Result<(u64, u64)> {
    read_lines_limited(path, offset, first, MAX_LINE_BYTES, sink)
}

/// [`read_lines`] with the line limit given.
pub fn read_lines_limited(
    path: &Path,
    offset: u64,
    first: u64,
    max_line: usize,
    sink: &mut dyn LineSink,
) -> Result<(u64, u64)> {
    let mut file = files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| SessionError::io(path, e))?;
    }
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    let (mut offset, mut index) = (offset, first);
    let cap = max_line as u64;
    loop {
        line.clear();
        if line.capacity() > 1 << 20 {
            line = Vec::new();
        }
        // At most the limit (newline included) is read into `line`; `read_until` finds the newline
        // with the standard library's fast search.
        let n = (&mut reader)
            .take(cap)
            .read_until(b'\n', &mut line)
            .map_err(|e| SessionError::io(path, e))?;
        let mut len = n as u64;
        if line.last() != Some(&b'\n') {
            if len < cap {
                // The end of the file before a newline: a write in flight, not consumed.
                return Ok((offset, index));
            }
            // Over the limit: skip to the newline through a small buffer.
            line = Vec::new();
            let mut scratch = Vec::with_capacity(64 * 1024);
            loop {
                scratch.clear();
                let k = (&mut reader)
                    .take(1 << 20)
                    .read_until(b'\n', &mut scratch)
                    .map_err(|e| SessionError::io(path, e))?;
                if k == 0 {
                    return Ok((offset, index));
                }
                len += k as u64;
                if scratch.last() == Some(&b'\n') {
                    break;
                }
            }
            offset += len;
            tracing::warn!(file = %path.display(), line = index + 1, bytes = len, limit = max_line, "skipping a line longer than the limit");
            index += 1;
            continue;
        }
        offset += len;
        let keep_going = sink.line(index, &line[..line.len() - 1]);
        index += 1;
        if !keep_going {
            return Ok((offset, index));
        }
    }
}

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
}

struct DatabaseListing {
    stamps: Vec<Option<FileStamp>>,
    list: Arc<Vec<SessionSummary>>,
    rows: HashMap<String, super::agent::DatabaseRow>,
}

#[derive(Default)]
struct Listing {
    /// Directory → its stamp and its entries (subdirectories or session files).
    dirs: HashMap<PathBuf, (Option<SystemTime>, Vec<PathBuf>)>,
    /// Session file → its stamp and head (`None`: incomplete or not this agent's format).
    heads: HashMap<PathBuf, (FileStamp, Option<Head>)>,
    by_id: HashMap<String, PathBuf>,
    list: Option<Arc<Vec<SessionSummary>>>,
    /// Session file → why it is not listed (the read's error, naming the file).
    errors: HashMap<PathBuf, String>,
    /// Listed session files whose head was incomplete at the last listing, with their stamp:
    /// the only files a listing must look at again while no directory changed.
    incomplete: Vec<(PathBuf, FileStamp)>,
}

struct TitleEntry {
    offset: u64,
    line: u64,
    state: Box<dyn TitleScan>,
}

/// Directory stamps this close to now may still change within their granularity.
pub(super) const SETTLE: Duration = Duration::from_secs(2);

impl ExternalSessions {
    /// A read-only source over `agent`'s home (`~/.claude`, `~/.codex`, or the directory a flag
    /// or the environment named). Reads nothing until asked; never writes under the home.
    pub fn new(agent: ExternalAgent, home: impl Into<PathBuf>) -> ExternalSessions {
        let home = home.into();
        ExternalSessions {
            inner: Arc::new(Inner {
                agent,
                side: agent.format().side_names(&home),
                home,
                listing: Mutex::new(Listing::default()),
                titles: Mutex::new(HashMap::new()),
                database: Mutex::new(None),
            }),
        }
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
        let own = id
            .strip_prefix(self.agent().name())
            .and_then(|rest| rest.strip_prefix(':'))
            .ok_or_else(|| not_found(id))?;
        if let Some(path) = self.lookup(own) {
            return Ok(path);
        }
        self.list_sessions_blocking()?;
        self.lookup(own).ok_or_else(|| not_found(id))
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
        let mut listing = self.inner.listing.locked();
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
                    return Ok(list.clone());
                }
            }
        }
        let mut files = Vec::new();
        for dir in &level {
            if let Some((_, entries)) = listing.dirs.get(dir) {
                files.extend(
                    entries
                        .iter()
                        .filter(|p| is_session_file(agent, p))
                        .cloned(),
                );
            }
        }
        // Heads: new files are read; incomplete ones again when their stamp changed.
        for file in &files {
            let known = listing
                .heads
                .get(file)
                .map(|(stamp, head)| (*stamp, head.is_some()));
            if let Some((_, true)) = known {
                continue;
            }
            let Ok(meta) = fs::metadata(file) else {
                continue;
            };
            let stamp = FileStamp::of(&meta);
            if known.map(|(s, _)| s) == Some(stamp) {
                continue;
            }
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
            listing.heads.insert(file.clone(), (stamp, head));
        }
        listing.incomplete = files
            .iter()
            .filter_map(|file| match listing.heads.get(file) {
                Some((stamp, None)) => Some((file.clone(), *stamp)),
                _ => None,
            })
            .collect();
        if !changed {
            if let Some(list) = &listing.list {
                return Ok(list.clone());
            }
        }
        let mut by_id: HashMap<String, PathBuf> = HashMap::new();
        let mut list = Vec::new();
        for file in &files {
            let Some((_, Some(head))) = listing.heads.get(file) else {
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
        let present: std::collections::HashSet<&PathBuf> = files.iter().collect();
        listing.heads.retain(|path, _| present.contains(path));
        listing.errors.retain(|path, _| present.contains(path));
        sort_sessions(&mut list);
        let list = Arc::new(list);
        listing.by_id = by_id;
        listing.list = Some(list.clone());
        Ok(list)
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
    fn database_row(&self, id: &str) -> Result<super::agent::DatabaseRow> {
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
        let meta = fs::metadata(&path).map_err(|e| SessionError::io(&path, e))?;
        let stamp = FileStamp::of(&meta);
        let mut titles = self.inner.titles.locked();
        let entry = titles.remove(&path);
        let (mut entry, fresh) = match entry {
            Some((old, entry)) if old == stamp => (entry, false),
            Some((old, entry)) if old.inode == stamp.inode && stamp.len >= entry.offset => {
                (entry, true)
            }
            _ => (
                TitleEntry {
                    offset: 0,
                    line: 0,
                    state: self.agent().format().title_scan(),
                },
                true,
            ),
        };
        if fresh {
            let (offset, line) = read_lines(&path, entry.offset, entry.line, &mut *entry.state)?;
            entry.offset = offset;
            entry.line = line;
        }
        let own = &id[self.agent().name().len() + 1..];
        let title = entry.state.choose(self.inner.side.as_deref(), own);
        titles.insert(path, (stamp, entry));
        Ok(title)
    }

    /// The projected conversation of session `id`.
    pub fn read_conversation_blocking(&self, id: &str) -> Result<(SurfaceSnapshot, Conversation)> {
        if let Some(database) = self.agent().format().database() {
            let row = self.database_row(id)?;
            let conversation = database
                .conversation(&self.inner.home, &row.head.id)?
                .ok_or_else(|| not_found(id))?;
            let snapshot = super::surface(header(self.agent(), &row.head), &conversation);
            return Ok((snapshot, conversation));
        }
        let path = self.path_of(id)?;
        let head = read_head(self.agent(), &path)?.ok_or_else(|| not_found(id))?;
        let conversation = self.agent().format().read_conversation(&path)?;
        let snapshot = super::surface(header(self.agent(), &head), &conversation);
        Ok((snapshot, conversation))
    }

    fn spawn<T: Send + 'static>(
        &self,
        work: impl FnOnce(ExternalSessions) -> Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T>> {
        let this = self.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || work(this)).await {
                Ok(result) => result,
                Err(source) => Err(SessionError::TaskFailed {
                    what: "external session read",
                    source,
                }),
            }
        })
    }
}

impl SessionQuery for ExternalSessions {
    fn list_sessions(&self) -> BoxFuture<'_, Result<Arc<Vec<SessionSummary>>>> {
        self.spawn(|this| this.list_sessions_blocking())
    }

    fn read_surface<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        let id = id.to_string();
        self.spawn(move |this| Ok(this.read_conversation_blocking(&id)?.0))
    }

    fn read_title<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
        let id = id.to_string();
        self.spawn(move |this| this.read_title_blocking(&id))
    }
}

/// Re-reads `dir` when its stamp changed; answers whether it did. `subdirs` keeps directories,
/// else files. A missing directory has no entries.
fn refresh_dir(
    dirs: &mut HashMap<PathBuf, (Option<SystemTime>, Vec<PathBuf>)>,
    dir: &Path,
    now: SystemTime,
    subdirs: bool,
) -> Result<bool> {
    let modified = match fs::metadata(dir) {
        Ok(meta) => meta.modified().ok(),
        Err(_) => return Ok(dirs.remove(dir).is_some()),
    };
    if let Some((Some(old), _)) = dirs.get(dir) {
        if Some(*old) == modified {
            return Ok(false);
        }
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            tracing::warn!(dir = %dir.display(), error = %err, "could not list a directory");
            return Ok(dirs.remove(dir).is_some());
        }
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        // At the files' level anything but a directory is kept (a FIFO, a socket, a link): a
        // session file that is not a readable regular file is then named in the listing's
        // errors when its head is read, instead of vanishing without a word.
        if kind.is_dir() == subdirs {
            found.push(entry.path());
        }
    }
    found.sort();
    // A stamp that recent may still hide a change within its granularity: keep no stamp, so the
    // next listing reads the directory again.
    let settled = modified.filter(|m| now.duration_since(*m).is_ok_and(|age| age >= SETTLE));
    let changed = dirs.get(dir).is_none_or(|(_, old)| *old != found);
    dirs.insert(dir.to_path_buf(), (settled, found));
    Ok(changed)
}

fn is_session_file(agent: ExternalAgent, path: &Path) -> bool {
    agent.format().is_session_file(path)
}

/// The head of one session file; `None` while it is incomplete. A file of another format is an
/// error naming what was wrong.
fn read_head(agent: ExternalAgent, path: &Path) -> Result<Option<Head>> {
    agent.format().read_head(path)
}
