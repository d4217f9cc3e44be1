//! The store's listing index, kept on disk between processes (`<home>/index/listing`).
//!
//! Purpose: the first listing of a process walks every project directory and reads every
//! session's header (2 s for 100,000 sessions). The index it builds is written here, so the next
//! process starts from it and lists at the cost of checking it.
//!
//! Invariant: a listing served from the cache is the listing a walk would give. Nothing in the
//! file is trusted without the check the in-memory index itself relies on:
//! - the file names the `sessions` directory it describes (path, device and inode) and ends with
//!   a checksum; a file of another home, another format, torn or corrupt is ignored whole;
//! - each directory's stamp (mtime and size, as `Stamp`) is compared with the directory's stamp
//!   now, and a stamp that was too recent when written (the racy window) never matches. A project
//!   directory whose stamp changed is listed again, and its sessions' headers are read again
//!   (not taken from the file); a session directory whose stamp changed (its log replaced,
//!   removed or renamed) has its header read again.
//!
//! Proof: a header never changes while its log stays in place (logs only grow by appends), and
//! every way to add, remove or replace a log changes the stamp of the directory holding it. The
//! tests in `tests/session/listing_cache.rs` add, remove and replace sessions behind a cache and
//! check the listing against a walk; any decoding failure answers `None` (the walk).
//!
//! Writing is best effort: the file is written to a fresh temporary name beside it and renamed
//! over, so readers see the old file or the new one; a home whose `index` is not a plain
//! directory (a symlink, a file) or cannot be written is left alone.

use super::index::{Index, Project};
use super::session_dirs::LogEntry;
use super::session_dirs::SessionDirs;
use super::stamp::Stamp;
use crate::session::checksum::checksum;
use crate::session::format::SessionHeader;
use crate::session::reader::Encoding;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// `<home>/index`, shared with the discovery index.
const DIR: &str = "index";
/// The cache's file name in it.
const FILE: &str = "listing";
/// First bytes of the file; the trailing digit is the format's version.
const MAGIC: &[u8] = b"dsh-refs listing cache 1\n";
/// A cache larger than this is not read (100,000 sessions take about 15 MB).
const MAX_BYTES: usize = 512 << 20;

/// Where the cache of the home `home` lives.
pub(super) fn path(home: &Path) -> PathBuf {
    home.join(DIR).join(FILE)
}

/// The identity of `<home>/sessions`: device and inode, or `None` where there are none.
fn dir_identity(meta: &std::fs::Metadata) -> (u64, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        (0, 0)
    }
}

/// The index stored for `home`, if a valid one for this very `sessions` directory is there. Its
/// stamps are still to be checked (by the refresh that follows, as for any index).
pub(super) fn load(home: &Path, sessions_dir: &Path) -> Option<Index> {
    let meta = std::fs::metadata(sessions_dir).ok()?;
    let bytes = crate::session::files::read_small(&path(home), MAX_BYTES)?;
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
    if checksum(body).to_le_bytes() != sum {
        return None;
    }
    let mut r = Decoder {
        b: body.strip_prefix(MAGIC)?,
    };
    if r.bytes()? != path_bytes(sessions_dir)? || (r.u64()?, r.u64()?) != dir_identity(&meta) {
        return None;
    }
    let root = r.stamp()?;
    let mut projects = HashMap::new();
    for _ in 0..r.u32()? {
        let dir: Arc<Path> = Arc::from(sessions_dir.join(r.name()?));
        let stamp = r.stamp()?;
        let count = r.u32()? as usize;
        let mut sessions = Vec::with_capacity(count.min(1 << 20));
        for _ in 0..count {
            let name: Arc<OsStr> = Arc::from(r.name()?);
            let log = match r.u8()? {
                0 => None,
                1 => Some(Encoding::Plain),
                2 => Some(Encoding::Zstd),
                _ => return None,
            };
            let Some(log) = log else {
                sessions.push((name, None));
                continue;
            };
            let dir_stamp = r.stamp()?;
            let header = r.header()?;
            sessions.push((
                name,
                Some(LogEntry {
                    log,
                    header: Arc::new(header),
                    dir_stamp,
                    verified: false,
                }),
            ));
        }
        projects.insert(
            dir,
            Project {
                stamp,
                sessions: SessionDirs::from_entries(sessions),
                ..Project::default()
            },
        );
    }
    if !r.b.is_empty() {
        return None;
    }
    Some(Index {
        root,
        projects,
        ..Index::default()
    })
}

/// Writes `index` (the index of `<home>/sessions` as of this listing) as `home`'s cache. Best
/// effort: any failure leaves the old file (or none) in place.
pub(super) fn store(home: &Path, sessions_dir: &Path, index: &Index) {
    if let Err(e) = try_store(home, sessions_dir, index) {
        tracing::debug!(error = %e, "the listing cache was not written");
    }
}

fn try_store(home: &Path, sessions_dir: &Path, index: &Index) -> std::io::Result<()> {
    let other = std::io::Error::other;
    let meta = std::fs::metadata(sessions_dir)?;
    let mut out = Encoder {
        b: Vec::with_capacity(64 + index.projects.len() * 64 + index.by_id.len() * 160),
    };
    out.b.extend_from_slice(MAGIC);
    out.bytes(path_bytes(sessions_dir).ok_or_else(|| other("a path that is not UTF-8"))?);
    let (dev, ino) = dir_identity(&meta);
    out.u64(dev);
    out.u64(ino);
    out.stamp(index.root.as_ref());
    let mut projects: Vec<(&Arc<Path>, &Project)> = index.projects.iter().collect();
    projects.sort_by(|a, b| a.0.cmp(b.0));
    out.u32(projects.len() as u32);
    for (dir, project) in projects {
        out.name(dir).ok_or_else(|| other("a project name"))?;
        // A project with sessions still unverified is stored without its stamp: it is listed
        // again next time.
        let verified = project.sessions.logs().all(|e| e.verified);
        let stamp = project.stamp.filter(|_| verified);
        out.stamp(stamp.as_ref());
        out.u32(project.sessions.len() as u32);
        for (name, entry) in project.sessions.iter() {
            out.bytes(path_bytes(Path::new(&**name)).ok_or_else(|| other("a session name"))?);
            let Some(entry) = entry else {
                out.u8(0);
                continue;
            };
            out.u8(match entry.log {
                Encoding::Plain => 1,
                Encoding::Zstd => 2,
            });
            out.stamp(entry.dir_stamp.as_ref());
            out.header(&entry.header);
        }
    }
    let sum = checksum(&out.b);
    out.b.extend_from_slice(&sum.to_le_bytes());

    let dir = home.join(DIR);
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(other("`index` is not a directory")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&dir)?,
        Err(e) => return Err(e),
    }
    crate::session::files::write_replacing(&path(home), &out.b)
}

#[cfg(unix)]
fn path_bytes(path: &Path) -> Option<&[u8]> {
    use std::os::unix::ffi::OsStrExt;
    Some(path.as_os_str().as_bytes())
}

#[cfg(not(unix))]
fn path_bytes(path: &Path) -> Option<&[u8]> {
    path.to_str().map(str::as_bytes)
}

struct Encoder {
    b: Vec<u8>,
}

impl Encoder {
    fn u8(&mut self, v: u8) {
        self.b.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.b.extend_from_slice(v);
    }
    /// The last component of `path`.
    fn name(&mut self, path: &Path) -> Option<()> {
        self.bytes(path_bytes(Path::new(path.file_name()?))?);
        Some(())
    }
    /// A stamp; an absent one, or one from before 1970, is stored as absent (never matches).
    fn stamp(&mut self, stamp: Option<&Stamp>) {
        let since = stamp.and_then(|s| {
            let since = s.modified.duration_since(SystemTime::UNIX_EPOCH).ok()?;
            (!s.racy).then_some((since, s.len))
        });
        match since {
            None => self.u8(0),
            Some((since, len)) => {
                self.u8(1);
                self.u64(since.as_secs());
                self.u32(since.subsec_nanos());
                self.u64(len);
            }
        }
    }
    fn header(&mut self, h: &SessionHeader) {
        self.u64(h.version);
        self.bytes(h.id.as_bytes());
        self.u64(h.created_at as u64);
        match &h.cwd {
            None => self.u8(0),
            Some(cwd) => {
                self.u8(1);
                self.bytes(cwd.as_bytes());
            }
        }
        self.u64(h.delegation_depth as u64);
        if h.extra.is_empty() {
            self.bytes(b"");
        } else {
            let extra = serde_json::to_vec(&h.extra).unwrap_or_default();
            self.bytes(&extra);
        }
    }
}

struct Decoder<'a> {
    b: &'a [u8],
}

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.b.split_at_checked(n)?;
        self.b = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
    fn string(&mut self) -> Option<String> {
        std::str::from_utf8(self.bytes()?).ok().map(str::to_string)
    }
    /// A single path component (no separator, not `.` or `..`).
    fn name(&mut self) -> Option<&'a OsStr> {
        let raw = self.bytes()?;
        if raw.is_empty() || raw == b"." || raw == b".." || raw.contains(&b'/') {
            return None;
        }
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            Some(OsStr::from_bytes(raw))
        }
        #[cfg(not(unix))]
        {
            let name = std::str::from_utf8(raw).ok()?;
            (!name.contains('\\')).then(|| OsStr::new(name))
        }
    }
    /// `Some(None)` for an absent stamp.
    fn stamp(&mut self) -> Option<Option<Stamp>> {
        match self.u8()? {
            0 => Some(None),
            1 => {
                let secs = self.u64()?;
                let nanos = self.u32()?;
                let len = self.u64()?;
                let modified = SystemTime::UNIX_EPOCH
                    .checked_add(Duration::new(secs, nanos.min(999_999_999)))?;
                Some(Some(Stamp {
                    modified,
                    len,
                    racy: false,
                }))
            }
            _ => None,
        }
    }
    fn header(&mut self) -> Option<SessionHeader> {
        let version = self.u64()?;
        let id = self.string()?;
        let created_at = self.u64()? as i64;
        let cwd = match self.u8()? {
            0 => None,
            1 => Some(self.string()?),
            _ => return None,
        };
        let delegation_depth = self.u64()? as i64;
        let extra = match self.bytes()? {
            b"" => Map::new(),
            raw => match serde_json::from_slice::<Value>(raw).ok()? {
                Value::Object(map) => map,
                _ => return None,
            },
        };
        Some(SessionHeader {
            version,
            id,
            created_at,
            cwd,
            delegation_depth,
            extra: extra.into(),
        })
    }
}
