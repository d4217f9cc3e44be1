//! One agent's listing kept on disk between processes
//! (`<dsh home>/index/agents/<agent>-<key>.bin`).
//!
//! Purpose: an agent's home can hold thousands of sessions and gigabytes. Listing them means a
//! head per file and a title per file, and a title can sit at the end (Claude Code appends
//! `ai-title` and `custom-title` records). A process that had to read all of that again would
//! make every `dsh-refs sessions`, every MCP server start and every TUI popup wait seconds on
//! work the previous process already did. So each source writes what it folded here: per
//! session file its identity (path, inode, size, mtime), its head (id, start, cwd) and its
//! title scan's state with the byte offset and line it reached. The next process checks each
//! file by `stat` and reads only what is new.
//!
//! The format is binary (version 2; version 1 was JSON, and parsing it was a quarter of a warm
//! listing): after the magic line, the agent and home, then per file its relative path, stamp,
//! head and title scan, integers little-endian and strings as a length and UTF-8 bytes; a title
//! state (a JSON value the agent wrote) as a tag byte and its payload.
//!
//! Invariant: nothing in the file is trusted without a check.
//! - The file starts with a versioned magic line and ends with a checksum of everything before
//!   it; it names the agent and the home it describes, and a file of another version, agent or
//!   home, torn or corrupt is ignored whole (the caller logs a warning and rebuilds it).
//! - Reading is bounded: the file is read only up to a size limit (mapped from [`MAP_FROM`]
//!   bytes on, guarded as a session file's mapping is: a file cut short while it is read is
//!   refused, never a crash), and every length and count in it is checked against the bytes
//!   left before anything is allocated, so a file of n bytes costs O(n) whatever it claims; a
//!   title state nests at most [`MAX_DEPTH`] deep.
//! - Every path in it is relative, made of plain components, and joined under the agent's
//!   sessions directory: a crafted file cannot point a read anywhere else. A restored entry is
//!   used only for a file the walk of the home finds, and only when `stat` says it is the same
//!   file (same inode) and not shorter: a file that shrank or was replaced is read again whole.
//!   A lookup of one session ([`find`]) checks every entry's layout and the checksum over all,
//!   but the text of the entry it returns only; a restore checks every entry's text.
//! - A title state is restored only by the agent that wrote it (its own deserializer); one it
//!   cannot read is scanned again from the start.
//!
//! Writing is best effort and never under an agent's home: the document goes to a fresh
//! temporary name beside the cache and is renamed over it, so a reader sees the old file or the
//! new one; an `index` that is not a plain directory (a symlink, a file) is left alone.
//!
//! Proof: the unit tests below (round trip, read and mapped; every kind of damage refused;
//! paths that escape refused, the byte check against `Path::components`, what a lookup
//! checks) and
//! `tests/session/agent_listing_cache.rs` (a new process lists from the cache, a title
//! appended shows, a truncated or replaced file is read again, a deleted one disappears,
//! nothing is written under the agent's home).

use super::lines::FileStamp;
use super::Head;
use serde_json::Value;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The first line of the file; its last number is the format's version (1 was JSON, which a
/// warm listing of 4,000 sessions spent a quarter of its time parsing).
const MAGIC: &str = "dsh-refs agent listing 2\n";
/// A cache larger than this is not read (2,000 sessions take well under 2 MB).
const MAX_BYTES: usize = 256 << 20;
/// How deep a title state's values may nest (a scan's state is a flat record).
const MAX_DEPTH: usize = 16;

/// One session file as the cache remembers it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SavedFile {
    /// The file, under the agent's sessions directory.
    pub path: PathBuf,
    /// Its stamp when its head was read.
    pub stamp: FileStamp,
    /// Its head (only complete heads are kept).
    pub head: Head,
    /// Its title scan, if one ran.
    pub title: Option<SavedTitle>,
}

#[cfg(test)]
impl SavedFile {
    /// This file as [`encode`] takes it.
    pub(super) fn to_write(&self) -> ToWrite<'_> {
        ToWrite {
            path: &self.path,
            stamp: self.stamp,
            head: &self.head,
            title: self.title.as_ref().map(|t| TitleToWrite {
                stamp: t.stamp,
                offset: t.offset,
                line: t.line,
                state: std::borrow::Cow::Borrowed(&t.state),
            }),
        }
    }
}

/// One session file to write, borrowed from the listing that holds it: a listing of thousands
/// is written without copying a head or a kept title state.
pub(super) struct ToWrite<'a> {
    pub path: &'a Path,
    pub stamp: FileStamp,
    pub head: &'a Head,
    pub title: Option<TitleToWrite<'a>>,
}

/// A title scan to write ([`SavedTitle`], borrowed where it can be).
pub(super) struct TitleToWrite<'a> {
    pub stamp: FileStamp,
    pub offset: u64,
    pub line: u64,
    pub state: std::borrow::Cow<'a, TitleState>,
}

/// A title scan as far as it got.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SavedTitle {
    /// The file's stamp when the scan ended.
    pub stamp: FileStamp,
    /// The byte offset just past the last line fed.
    pub offset: u64,
    /// The number of lines fed.
    pub line: u64,
    /// The scan's own state, as the agent wrote it.
    pub state: TitleState,
}

/// A title scan's state: as the agent gave it, or as a kept listing holds it (its encoding
/// checked, not decoded: a process decodes only the states of the titles it shows or reads
/// further, and writes the others back as they were).
#[derive(Debug, Clone)]
pub(super) enum TitleState {
    /// As the agent gave it.
    Value(Value),
    /// In the cache's encoding ([`Writer::value`]), checked by [`Reader::document`].
    Encoded(Box<[u8]>),
}

impl TitleState {
    /// The state as a value; `None` for an encoding that does not decode whole (never one
    /// [`Reader::document`] checked).
    pub(super) fn decoded(&self) -> Option<std::borrow::Cow<'_, Value>> {
        match self {
            TitleState::Value(value) => Some(std::borrow::Cow::Borrowed(value)),
            TitleState::Encoded(bytes) => {
                let mut reader = Reader { bytes };
                let value = reader.value(0).ok()?;
                reader
                    .bytes
                    .is_empty()
                    .then_some(std::borrow::Cow::Owned(value))
            }
        }
    }
}

impl PartialEq for TitleState {
    fn eq(&self, other: &TitleState) -> bool {
        self.decoded() == other.decoded()
    }
}

/// Where the cache of `agent`'s sessions under `agent_home` lives in the dsh home `dsh_home`.
pub(super) fn path(dsh_home: &Path, agent: &str, agent_home: &Path) -> PathBuf {
    dsh_home
        .join("index")
        .join("agents")
        .join(format!("{agent}-{:016x}.bin", home_key(agent_home)))
}

/// Where version 1 (JSON) kept the same listing: removed once version 2 is written.
fn legacy_path(dsh_home_agents: &Path, agent: &str, agent_home: &Path) -> PathBuf {
    dsh_home_agents.join(format!("{agent}-{:016x}.json", home_key(agent_home)))
}

fn home_key(agent_home: &Path) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write(agent_home.as_os_str().as_encoded_bytes());
    hasher.finish()
}

/// Why a cache on disk was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refused {
    /// There is none (the first process on this home): nothing to warn about.
    Missing,
    /// There is one, but it cannot be trusted; the reason names what was wrong.
    Invalid(String),
}

/// The files saved for `agent` over `root` (the agent's sessions directory under `home`) in
/// the cache at `cache`.
pub(super) fn load(
    cache: &Path,
    agent: &str,
    home: &Path,
    root: &Path,
) -> Result<Vec<SavedFile>, Refused> {
    let invalid = |why: &str| Refused::Invalid(format!("{}: {why}", cache.display()));
    let sealed = read_sealed(cache)?;
    let mut reader = Reader {
        bytes: body_of(sealed.bytes()),
    };
    let mut files = Vec::new();
    reader
        .document(agent, home, Entries::All, |entry| {
            files.push(entry.saved(root)?);
            Ok(())
        })
        .map_err(|why| invalid(&why))?;
    if !sealed.intact() {
        return Err(invalid("cut short while it was read"));
    }
    Ok(files)
}

/// The file the cache at `cache` names for the session whose own id is `own`, its stamp and
/// its head then: found without restoring the listing, for a new process that reads one
/// session. Every entry's layout is checked (lengths, tags, counts, as the checksum was over
/// all of it); only an entry that claims the id has its text checked and decoded, and nothing
/// is allocated for the others. `None` when the cache is missing or cannot be trusted (the
/// caller lists then, which warns and rebuilds it), or when no entry or more than one claims
/// the id.
pub(super) fn find(
    cache: &Path,
    agent: &str,
    home: &Path,
    root: &Path,
    own: &str,
) -> Option<(PathBuf, FileStamp, Head)> {
    let sealed = read_sealed(cache).ok()?;
    let mut reader = Reader {
        bytes: body_of(sealed.bytes()),
    };
    let mut claims = Vec::new();
    reader
        .document(agent, home, Entries::Claiming(own), |entry| {
            claims.push(entry);
            Ok(())
        })
        .ok()?;
    match &claims[..] {
        [entry] if sealed.intact() => {
            let head = Head {
                id: own.to_string(),
                created_at: entry.created_at,
                cwd: entry.cwd.map(str::to_string),
            };
            Some((root.join(entry.relative), entry.stamp, head))
        }
        _ => None,
    }
}

/// A file's bytes as [`read_whole`] gives them: read, or mapped.
pub(super) enum Whole {
    Read(Vec<u8>),
    Mapped(super::mapped::Mapped),
}

impl std::fmt::Debug for Whole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match self {
            Whole::Read(_) => "read",
            Whole::Mapped(_) => "mapped",
        };
        write!(f, "Whole({how}, {} bytes)", self.bytes().len())
    }
}

/// Two files' bytes are equal when their bytes are, however they were had.
impl PartialEq for Whole {
    fn eq(&self, other: &Whole) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Whole {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Whole::Read(bytes) => bytes,
            Whole::Mapped(mapped) => mapped.bytes(),
        }
    }

    /// Whether every byte looked at was the file's (a mapped file cut short meanwhile reads as
    /// zeros past its new end: what was decoded from it is thrown away). Ask when done.
    pub(super) fn intact(&self) -> bool {
        match self {
            Whole::Read(_) => true,
            Whole::Mapped(mapped) => mapped.intact(),
        }
    }
}

/// From this size on, a file [`read_whole`] reads is mapped rather than read. A listing of
/// 2,000 Codex rollouts is about 700 KB: read, its buffer's fresh pages were zeroed and filled
/// one fault at a time (170 faults, a third of looking up one session in it); mapped, the page
/// cache's pages come sixteen to a fault and nothing is copied. A small file costs less to read
/// than to map.
pub(super) const MAP_FROM: u64 = 64 << 10;

/// Whether `relative` is a path of plain components only (at least one, none `..`, none the
/// root, none a leading `.`), byte for byte as `Path::components` tells them apart (it passes
/// over empty components and a `.` after the first): the check every entry's path passes, in
/// the bytes, without the iterator (a listing holds thousands).
fn plain_relative(relative: &str) -> bool {
    if relative.starts_with('/') {
        return false;
    }
    let mut normal = false;
    for (k, part) in relative.split('/').enumerate() {
        match part {
            "." if k == 0 => return false,
            ".." => return false,
            "" | "." => {}
            _ => normal = true,
        }
    }
    normal
}

/// The regular file at `path` (not a symlink), whole, when it is at most `max` bytes: mapped
/// from [`MAP_FROM`] bytes on where it can be (through the session files' guarded mapping: a
/// file cut short meanwhile is reported by [`Whole::intact`], never a crash), read otherwise.
pub(super) fn read_whole(path: &Path, max: usize) -> Option<Whole> {
    use crate::session::files::{open_regular, Symlinks};
    let file = open_regular(
        path,
        std::fs::OpenOptions::new().read(true),
        Symlinks::Refuse,
    )
    .ok()?;
    let len = file.metadata().ok()?.len();
    let mapped = (MAP_FROM..=max as u64)
        .contains(&len)
        .then(|| super::mapped::Mapped::of(&file, len as usize))
        .flatten();
    match mapped {
        Some(mapped) => Some(Whole::Mapped(mapped)),
        None => crate::session::files::read_small_from(&file, max).map(Whole::Read),
    }
}

/// The cache at `cache`, whole ([`read_whole`]), with its magic line and checksum checked (its
/// body is [`body_of`] its bytes).
fn read_sealed(cache: &Path) -> Result<Whole, Refused> {
    if std::fs::symlink_metadata(cache).is_err() {
        return Err(Refused::Missing);
    }
    let invalid = |why: &str| Refused::Invalid(format!("{}: {why}", cache.display()));
    let sealed = read_whole(cache, MAX_BYTES)
        .ok_or_else(|| invalid("not a readable regular file within the size limit"))?;
    let body = sealed
        .bytes()
        .strip_prefix(MAGIC.as_bytes())
        .ok_or_else(|| invalid("not this version's agent listing"))?;
    let split = body
        .len()
        .checked_sub(17)
        .ok_or_else(|| invalid("truncated"))?;
    let (body, sum) = body.split_at(split);
    if sum != format!("{:016x}\n", checksum(body)).as_bytes() || !sealed.intact() {
        return Err(invalid("checksum mismatch (torn or damaged)"));
    }
    Ok(sealed)
}

/// The entries of a cache [`read_sealed`] checked: between its magic line and its checksum.
fn body_of(sealed: &[u8]) -> &[u8] {
    &sealed[MAGIC.len()..sealed.len() - 17]
}

/// Writes `files` as the cache at `cache` (a temporary file renamed over it). Files whose path
/// is not under `root` or not UTF-8 are left out (they are read again next time).
#[cfg(test)]
pub(super) fn save(
    cache: &Path,
    agent: &str,
    home: &Path,
    root: &Path,
    files: &[SavedFile],
) -> std::io::Result<()> {
    let files: Vec<ToWrite<'_>> = files.iter().map(SavedFile::to_write).collect();
    write(cache, agent, home, &encode(agent, home, root, &files))
}

/// The cache's bytes for `files`, in their order (magic line and checksum included). Files
/// whose path is not under `root` or not UTF-8 are left out (they are read again next time).
pub(super) fn encode(agent: &str, home: &Path, root: &Path, files: &[ToWrite<'_>]) -> Vec<u8> {
    let entries: Vec<(&str, &ToWrite<'_>)> = files
        .iter()
        .filter_map(|f| Some((f.path.strip_prefix(root).ok()?.to_str()?, f)))
        .collect();
    let mut out = Vec::with_capacity(MAGIC.len() + 64 + entries.len() * 320);
    out.extend_from_slice(MAGIC.as_bytes());
    let mut writer = Writer { out };
    writer.str(agent);
    writer.str(&home.to_string_lossy());
    writer.u64(entries.len() as u64);
    for (relative, file) in entries {
        writer.str(relative);
        writer.stamp(file.stamp);
        writer.str(&file.head.id);
        writer.u64(file.head.created_at as u64);
        writer.opt_str(file.head.cwd.as_deref());
        match &file.title {
            None => writer.out.push(0),
            Some(title) => {
                writer.out.push(1);
                writer.stamp(title.stamp);
                writer.u64(title.offset);
                writer.u64(title.line);
                match &*title.state {
                    TitleState::Value(value) => writer.value(value),
                    TitleState::Encoded(bytes) => writer.out.extend_from_slice(bytes),
                }
            }
        }
    }
    let mut out = writer.out;
    let sum = checksum(&out[MAGIC.len()..]);
    out.extend_from_slice(format!("{sum:016x}\n").as_bytes());
    out
}

/// Writes `bytes` ([`encode`]'s) as the cache at `cache` (a temporary file renamed over it).
pub(super) fn write(cache: &Path, agent: &str, home: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = cache
        .parent()
        .ok_or_else(|| std::io::Error::other("a cache path without a directory"))?;
    ensure_plain_dir(dir)?;
    crate::session::files::write_replacing(cache, bytes)?;
    // Version 1's file for the same home, if this dsh home still has one, is dead weight.
    let _ = std::fs::remove_file(legacy_path(dir, agent, home));
    Ok(())
}

/// The encoder: integers little-endian, a string as its length (u32) and UTF-8 bytes (also
/// the kept names of Codex's session index, [`super::codex_index`]).
pub(super) struct Writer {
    pub(super) out: Vec<u8>,
}

impl Writer {
    pub(super) fn u64(&mut self, n: u64) {
        self.out.extend_from_slice(&n.to_le_bytes());
    }

    pub(super) fn str(&mut self, s: &str) {
        // Strings here are paths, ids, cwds and titles: far below 4 GiB.
        let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
        self.out.extend_from_slice(&len.to_le_bytes());
        self.out.extend_from_slice(&s.as_bytes()[..len as usize]);
    }

    pub(super) fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.out.push(0),
            Some(s) => {
                self.out.push(1);
                self.str(s);
            }
        }
    }

    pub(super) fn stamp(&mut self, stamp: FileStamp) {
        let (len, modified, inode) = stamp.parts();
        let mtime = modified
            .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok());
        let ctime = stamp.changed();
        self.out
            .push(u8::from(mtime.is_some()) | u8::from(ctime.is_some()) << 1);
        self.u64(len);
        self.u64(mtime.unwrap_or(0));
        self.u64(inode);
        self.u64(ctime.unwrap_or(0) as u64);
    }

    /// A JSON value: a tag byte, then its payload.
    fn value(&mut self, value: &Value) {
        match value {
            Value::Null => self.out.push(0),
            Value::Bool(b) => self.out.push(1 + u8::from(*b)),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    self.out.push(3);
                    self.u64(u);
                } else if let Some(i) = n.as_i64() {
                    self.out.push(4);
                    self.u64(i as u64);
                } else {
                    self.out.push(5);
                    self.u64(n.as_f64().unwrap_or(0.0).to_bits());
                }
            }
            Value::String(s) => {
                self.out.push(6);
                self.str(s);
            }
            Value::Array(items) => {
                self.out.push(7);
                self.u64(items.len() as u64);
                for item in items {
                    self.value(item);
                }
            }
            Value::Object(map) => {
                self.out.push(8);
                self.u64(map.len() as u64);
                for (key, item) in map {
                    self.str(key);
                    self.value(item);
                }
            }
        }
    }
}

/// The decoder: every length is checked against the bytes left before anything is allocated,
/// so a file of n bytes costs O(n) time and memory whatever it claims.
pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
}

pub(super) type Decoded<T> = std::result::Result<T, String>;

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Decoded<&'a [u8]> {
        if n > self.bytes.len() {
            return Err("truncated entry".into());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Decoded<u8> {
        Ok(self.take(1)?[0])
    }

    pub(super) fn u64(&mut self) -> Decoded<u64> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(bytes.try_into().unwrap_or_default()))
    }

    /// A count of items of at least `min` bytes each, no more than the bytes left can hold.
    pub(super) fn count(&mut self, min: usize) -> Decoded<usize> {
        let n = self.u64()?;
        usize::try_from(n)
            .ok()
            .filter(|n| n.saturating_mul(min) <= self.bytes.len())
            .ok_or_else(|| format!("a count of {n} beyond the file's end"))
    }

    pub(super) fn str(&mut self) -> Decoded<&'a str> {
        utf8(self.text()?)
    }

    /// A string's bytes, not checked as UTF-8.
    fn text(&mut self) -> Decoded<&'a [u8]> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().unwrap_or_default());
        self.take(len as usize)
    }

    pub(super) fn opt_str(&mut self) -> Decoded<Option<&'a str>> {
        self.opt_text()?.map(utf8).transpose()
    }

    /// An optional string's bytes, not checked as UTF-8.
    fn opt_text(&mut self) -> Decoded<Option<&'a [u8]>> {
        match self.byte()? {
            0 => Ok(None),
            1 => self.text().map(Some),
            tag => Err(format!("an option tagged {tag}")),
        }
    }

    pub(super) fn stamp(&mut self) -> Decoded<FileStamp> {
        let flags = self.byte()?;
        if flags > 3 {
            return Err(format!("a stamp flagged {flags}"));
        }
        let (len, mtime, inode, ctime) = (self.u64()?, self.u64()?, self.u64()?, self.u64()?);
        let modified =
            (flags & 1 != 0).then(|| SystemTime::UNIX_EPOCH + Duration::from_nanos(mtime));
        let changed = (flags & 2 != 0).then_some(ctime as i64);
        Ok(FileStamp::from_parts(len, modified, inode).with_changed(changed))
    }

    fn value(&mut self, depth: usize) -> Decoded<Value> {
        if depth > MAX_DEPTH {
            return Err("a title state nested too deep".into());
        }
        Ok(match self.byte()? {
            0 => Value::Null,
            1 => Value::Bool(false),
            2 => Value::Bool(true),
            3 => Value::from(self.u64()?),
            4 => Value::from(self.u64()? as i64),
            5 => serde_json::Number::from_f64(f64::from_bits(self.u64()?))
                .map_or(Value::Null, Value::Number),
            6 => Value::String(self.str()?.to_string()),
            7 => {
                let n = self.count(1)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Value::Array(items)
            }
            8 => {
                let n = self.count(5)?;
                let mut map = serde_json::Map::with_capacity(n);
                for _ in 0..n {
                    let key = self.str()?.to_string();
                    map.insert(key, self.value(depth + 1)?);
                }
                Value::Object(map)
            }
            tag => return Err(format!("a value tagged {tag}")),
        })
    }

    /// The whole document: its agent and home must be the ones asked for; no byte may follow
    /// the last entry. `entries` says which entries are given to `each`, in order: every one,
    /// its title state kept encoded, or only those claiming one id, title state passed over
    /// (the others' layout checked, their text not: see [`find`]).
    fn document(
        &mut self,
        agent: &str,
        home: &Path,
        entries: Entries<'_>,
        mut each: impl FnMut(Entry<'a>) -> Decoded<()>,
    ) -> Decoded<()> {
        if self.str()? != agent || self.str()? != home.to_string_lossy() {
            return Err("written for another agent or home".into());
        }
        // The smallest entry: an empty path and id, two stamps' worth of fixed fields.
        let n = self.count(4 + 33 + 4 + 8 + 1 + 1)?;
        for _ in 0..n {
            let raw = self.text()?;
            // A restore checks each field as it comes; a lookup only the entry it returns.
            let relative = match entries {
                Entries::All => Some(path_text(raw)?),
                Entries::Claiming(_) => None,
            };
            let stamp = self.stamp()?;
            let id = self.text()?;
            if let Entries::Claiming(own) = entries {
                if id != own.as_bytes() {
                    self.u64()?;
                    self.opt_text()?;
                    self.title(false, false)?;
                    continue;
                }
            }
            let relative = match relative {
                Some(relative) => relative,
                None => path_text(raw)?,
            };
            let id = utf8(id)?;
            let created_at = self.u64()? as i64;
            let cwd = self.opt_str()?;
            let title = self.title(true, entries == Entries::All)?;
            each(Entry {
                relative,
                stamp,
                id,
                created_at,
                cwd,
                title,
            })?;
        }
        if !self.bytes.is_empty() {
            return Err("bytes after the last entry".into());
        }
        Ok(())
    }

    /// An entry's title: `None` or its stamps and state, the state checked as
    /// [`Reader::value`] reads it (its text too when `checked`) and kept encoded only when
    /// `kept` (else it stands as `null`: the caller does not want it).
    fn title(&mut self, checked: bool, kept: bool) -> Decoded<Option<SavedTitle>> {
        match self.byte()? {
            0 => Ok(None),
            1 => {
                let (stamp, offset, line) = (self.stamp()?, self.u64()?, self.u64()?);
                let start = self.bytes;
                self.skip_value(0, checked)?;
                let state = match kept {
                    true => TitleState::Encoded(start[..start.len() - self.bytes.len()].into()),
                    false => TitleState::Value(Value::Null),
                };
                Ok(Some(SavedTitle {
                    stamp,
                    offset,
                    line,
                    state,
                }))
            }
            tag => Err(format!("a title tagged {tag}")),
        }
    }

    /// Passes over a title state as [`Reader::value`] reads it, checking the same (its strings'
    /// UTF-8 only when `checked`), keeping nothing.
    fn skip_value(&mut self, depth: usize, checked: bool) -> Decoded<()> {
        if depth > MAX_DEPTH {
            return Err("a title state nested too deep".into());
        }
        let string = |reader: &mut Self| match checked {
            true => reader.str().map(drop),
            false => reader.text().map(drop),
        };
        match self.byte()? {
            0..=2 => {}
            3..=5 => {
                self.u64()?;
            }
            6 => string(self)?,
            7 => {
                for _ in 0..self.count(1)? {
                    self.skip_value(depth + 1, checked)?;
                }
            }
            8 => {
                for _ in 0..self.count(5)? {
                    string(self)?;
                    self.skip_value(depth + 1, checked)?;
                }
            }
            tag => return Err(format!("a value tagged {tag}")),
        }
        Ok(())
    }
}

/// Which entries [`Reader::document`] gives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Entries<'o> {
    /// Every entry, title states kept encoded (a restore).
    All,
    /// Only the entries claiming this own id, title states passed over (one lookup).
    Claiming(&'o str),
}

/// `bytes` as text, or the reason they are not.
fn utf8(bytes: &[u8]) -> Decoded<&str> {
    std::str::from_utf8(bytes).map_err(|_| "a string that is not UTF-8".into())
}

/// An entry's path as text: UTF-8, and plain components only ([`plain_relative`]).
fn path_text(bytes: &[u8]) -> Decoded<&str> {
    let relative = utf8(bytes)?;
    match plain_relative(relative) {
        true => Ok(relative),
        false => Err("a path that leaves the sessions directory".into()),
    }
}

/// One entry of a cache as read, its strings borrowed from the cache's bytes.
struct Entry<'a> {
    /// The file's path under the sessions directory (plain components only).
    relative: &'a str,
    stamp: FileStamp,
    id: &'a str,
    created_at: i64,
    cwd: Option<&'a str>,
    title: Option<SavedTitle>,
}

impl Entry<'_> {
    fn saved(self, root: &Path) -> Decoded<SavedFile> {
        Ok(SavedFile {
            path: root.join(self.relative),
            stamp: self.stamp,
            head: Head {
                id: self.id.to_string(),
                created_at: self.created_at,
                cwd: self.cwd.map(str::to_string),
            },
            title: self.title,
        })
    }
}

/// Creates `dir` (and `index/` above it) when missing; refuses one that is not a plain
/// directory. A dsh home that does not exist yet (someone who has only ever used another
/// agent) is created too, owner-only like everything under it: without it nothing would be
/// kept, and every process would read the agents' homes again.
pub(super) fn ensure_plain_dir(dir: &Path) -> std::io::Result<()> {
    for level in [dir.parent(), Some(dir)].into_iter().flatten() {
        match std::fs::symlink_metadata(level) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a directory",
                    level.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut builder = std::fs::DirBuilder::new();
                builder.recursive(true);
                #[cfg(unix)]
                std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
                builder.create(level)?
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The checksum every kept file ends with ([`crate::session::checksum`]).
pub(super) use crate::session::checksum::checksum;

/// Ends `file` (which starts with the line `magic`) with the checksum of what follows the
/// magic line: sixteen hex digits and a newline (every file kept beside the listing cache).
pub(super) fn seal(file: &mut Vec<u8>, magic: &str) {
    let sum = checksum(&file[magic.len()..]);
    file.extend_from_slice(format!("{sum:016x}\n").as_bytes());
}

/// What [`seal`] sealed after the line `magic`, or why `bytes` are not such a file.
pub(super) fn unseal<'b>(bytes: &'b [u8], magic: &str) -> Result<&'b [u8], &'static str> {
    let body = bytes
        .strip_prefix(magic.as_bytes())
        .ok_or("not this version's file")?;
    let split = body.len().checked_sub(17).ok_or("truncated")?;
    let (body, sum) = body.split_at(split);
    if sum != format!("{:016x}\n", checksum(body)).as_bytes() {
        return Err("checksum mismatch (torn or damaged)");
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(root: &Path) -> Vec<SavedFile> {
        vec![SavedFile {
            path: root.join("proj").join("a.jsonl"),
            stamp: FileStamp::from_parts(
                42,
                Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789)),
                7,
            ),
            head: Head {
                id: "a".into(),
                created_at: 1_700_000_000_000,
                cwd: Some("/w".into()),
            },
            title: Some(SavedTitle {
                stamp: FileStamp::from_parts(40, None, 7),
                offset: 40,
                line: 3,
                state: TitleState::Value(serde_json::json!({"first_prompt": "hi"})),
            }),
        }]
    }

    #[test]
    fn a_saved_listing_comes_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let (home, root) = (Path::new("/agent"), Path::new("/agent/projects"));
        let cache = path(dir.path(), "claude", home);
        assert!(cache.starts_with(dir.path().join("index").join("agents")));
        assert_eq!(
            load(&cache, "claude", home, root),
            Err(Refused::Missing),
            "no cache yet"
        );
        save(&cache, "claude", home, root, &sample(root)).unwrap();
        assert_eq!(load(&cache, "claude", home, root).unwrap(), sample(root));
        // Another agent's or another home's listing is refused.
        assert!(matches!(
            load(&cache, "codex", home, root),
            Err(Refused::Invalid(_))
        ));
        assert!(matches!(
            load(&cache, "claude", Path::new("/other"), root),
            Err(Refused::Invalid(_))
        ));
    }

    /// One session's file is found in the cache's bytes as a whole restore would find it
    /// (titles of every shape passed over), and not at all when the id is unknown, claimed
    /// twice, or the cache is missing, damaged or another agent's.
    #[test]
    fn one_sessions_file_is_found_without_restoring_the_listing() {
        let dir = tempfile::tempdir().unwrap();
        let (home, root) = (Path::new("/agent"), Path::new("/agent/projects"));
        let cache = path(dir.path(), "claude", home);
        assert_eq!(
            find(&cache, "claude", home, root, "a"),
            None,
            "no cache yet"
        );
        let mut files = sample(root);
        let states = [
            serde_json::json!(null),
            serde_json::json!([1, -2, 2.5, "x", [true, false], {"k": {"n": null}}]),
            serde_json::json!({"first_prompt": "hi", "names": ["a", "b"]}),
        ];
        for (k, state) in states.into_iter().enumerate() {
            let mut file = sample(root).remove(0);
            file.path = root.join("proj").join(format!("{k}.jsonl"));
            file.head.id = format!("id-{k}");
            if let Some(title) = &mut file.title {
                title.state = TitleState::Value(state);
            }
            files.push(file);
        }
        let mut twice = sample(root).remove(0);
        twice.path = root.join("other").join("a.jsonl");
        twice.head.id = "twice".into();
        files.push(twice.clone());
        twice.path = root.join("third").join("a.jsonl");
        files.push(twice);
        save(&cache, "claude", home, root, &files).unwrap();
        for file in load(&cache, "claude", home, root).unwrap() {
            let found = find(&cache, "claude", home, root, &file.head.id);
            if file.head.id == "twice" {
                assert_eq!(found, None, "an id two files claim");
            } else {
                assert_eq!(found, Some((file.path, file.stamp, file.head)));
            }
        }
        assert_eq!(find(&cache, "claude", home, root, "nobody"), None);
        assert_eq!(find(&cache, "codex", home, root, "a"), None);
        let mut bytes = std::fs::read(&cache).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 1;
        std::fs::write(&cache, &bytes).unwrap();
        assert_eq!(find(&cache, "claude", home, root, "a"), None, "damaged");
    }

    #[test]
    fn damage_of_every_kind_is_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let (home, root) = (Path::new("/agent"), Path::new("/agent/projects"));
        let cache = path(dir.path(), "claude", home);
        save(&cache, "claude", home, root, &sample(root)).unwrap();
        let good = std::fs::read(&cache).unwrap();
        let damaged: Vec<Vec<u8>> = vec![
            good[..good.len() / 2].to_vec(),
            good.iter()
                .enumerate()
                .map(|(i, b)| if i == MAGIC.len() + 5 { b ^ 1 } else { *b })
                .collect(),
            b"dsh-refs agent listing 0\n{}".to_vec(),
            Vec::new(),
        ];
        for bytes in damaged {
            std::fs::write(&cache, &bytes).unwrap();
            match load(&cache, "claude", home, root) {
                Err(Refused::Invalid(why)) => assert!(why.contains("agents"), "{why}"),
                other => panic!("trusted a damaged cache: {other:?}"),
            }
        }
    }

    /// A listing large enough to be mapped ([`MAP_FROM`]) comes back as the same entries, its
    /// sessions are found one by one, and a byte changed anywhere in it refuses it whole.
    #[test]
    fn a_mapped_listing_comes_back_exactly_and_a_damaged_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (home, root) = (Path::new("/agent"), Path::new("/agent/projects"));
        let cache = path(dir.path(), "claude", home);
        let files: Vec<SavedFile> = (0..1500)
            .map(|n| {
                let mut file = sample(root).remove(0);
                file.path = root.join(format!("p{}", n % 7)).join(format!("s{n}.jsonl"));
                file.head.id = format!("s{n}");
                file
            })
            .collect();
        save(&cache, "claude", home, root, &files).unwrap();
        let len = std::fs::metadata(&cache).unwrap().len();
        assert!(len >= MAP_FROM, "{len} bytes: not mapped");
        assert!(matches!(read_sealed(&cache), Ok(Whole::Mapped(_))));
        assert_eq!(load(&cache, "claude", home, root).unwrap(), files);
        for n in [0, 777, 1499] {
            let found = find(&cache, "claude", home, root, &format!("s{n}")).unwrap();
            let file = &files[n];
            assert_eq!(found, (file.path.clone(), file.stamp, file.head.clone()));
        }
        let bytes = std::fs::read(&cache).unwrap();
        for at in [MAGIC.len() + 3, bytes.len() / 2, bytes.len() - 20] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x20;
            std::fs::write(&cache, &damaged).unwrap();
            assert!(
                matches!(load(&cache, "claude", home, root), Err(Refused::Invalid(_))),
                "byte {at} changed, still trusted"
            );
            assert_eq!(find(&cache, "claude", home, root, "s777"), None);
        }
    }

    /// The byte check of an entry's path says what `Path::components` says: plain components
    /// only, at least one. Over every path of up to four parts from pieces that matter (empty,
    /// `.`, `..`, names with dots), with and without a leading `/`.
    #[test]
    fn a_plain_path_is_told_as_path_components_tell_it() {
        use std::path::Component;
        let pieces = ["", ".", "..", "a", "b.c", "...", ".d"];
        let by_components = |p: &str| {
            Path::new(p).components().next().is_some()
                && Path::new(p)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
        };
        let mut paths = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = paths
                .iter()
                .flat_map(|p| {
                    pieces.iter().map(move |piece| match p.is_empty() {
                        true => piece.to_string(),
                        false => format!("{p}/{piece}"),
                    })
                })
                .collect();
            paths.extend(longer);
        }
        paths.sort();
        paths.dedup();
        let mut plain = 0;
        for path in paths.iter().flat_map(|p| [p.clone(), format!("/{p}")]) {
            assert_eq!(plain_relative(&path), by_components(&path), "{path:?}");
            plain += usize::from(by_components(&path));
        }
        assert!(plain > 100, "only {plain} plain paths tried");
    }

    /// `writer`'s bytes sealed as `save` seals a cache: its checksum line after them.
    fn sealed(writer: Writer) -> Vec<u8> {
        let mut bytes = writer.out;
        let sum = checksum(&bytes[MAGIC.len()..]);
        bytes.extend_from_slice(format!("{sum:016x}\n").as_bytes());
        bytes
    }

    #[test]
    fn a_path_that_leaves_the_sessions_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (home, root) = (Path::new("/agent"), Path::new("/agent/projects"));
        let cache = path(dir.path(), "claude", home);
        for bad in ["../../etc/passwd", "/etc/passwd", ""] {
            let mut writer = Writer {
                out: MAGIC.as_bytes().to_vec(),
            };
            writer.str("claude");
            writer.str("/agent");
            writer.u64(1);
            writer.str(bad);
            writer.stamp(FileStamp::from_parts(1, None, 1));
            writer.str("x");
            writer.u64(0);
            writer.opt_str(None);
            writer.out.push(0);
            std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
            std::fs::write(&cache, sealed(writer)).unwrap();
            assert!(
                matches!(load(&cache, "claude", home, root), Err(Refused::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn counts_beyond_the_end_and_deep_nesting_are_refused_before_allocating() {
        let dir = tempfile::tempdir().unwrap();
        let (home, root) = (Path::new("/agent"), Path::new("/agent/projects"));
        let cache = path(dir.path(), "claude", home);
        std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
        let head = || {
            let mut writer = Writer {
                out: MAGIC.as_bytes().to_vec(),
            };
            writer.str("claude");
            writer.str("/agent");
            writer
        };
        // A count of entries no file could hold.
        let mut huge = head();
        huge.u64(u64::MAX / 2);
        // One entry whose title state nests deeper than any scan writes.
        let mut deep = head();
        deep.u64(1);
        deep.str("p/a.jsonl");
        deep.stamp(FileStamp::from_parts(1, None, 1));
        deep.str("a");
        deep.u64(0);
        deep.opt_str(None);
        deep.out.push(1);
        deep.stamp(FileStamp::from_parts(1, None, 1));
        deep.u64(1);
        deep.u64(1);
        let mut value = Value::Null;
        for _ in 0..=MAX_DEPTH + 1 {
            value = Value::Array(vec![value]);
        }
        deep.value(&value);
        for (bytes, why) in [(sealed(huge), "count"), (sealed(deep), "nested")] {
            std::fs::write(&cache, bytes).unwrap();
            match load(&cache, "claude", home, root) {
                Err(Refused::Invalid(reason)) => assert!(reason.contains(why), "{reason}"),
                other => panic!("trusted a hostile cache: {other:?}"),
            }
        }
    }

    /// A lookup checks every entry's layout but the text of the entry it returns only: another
    /// entry's path that is not UTF-8, or leaves the sessions directory, does not hide the one
    /// asked for (a restore refuses the cache for it), while a bad tag or a nesting too deep
    /// anywhere refuses the cache, and the claimed entry's own text is checked.
    #[test]
    fn a_lookup_checks_every_layout_and_the_claimed_text() {
        let dir = tempfile::tempdir().unwrap();
        let (home, root) = (Path::new("/agent"), Path::new("/agent/projects"));
        let cache = path(dir.path(), "claude", home);
        std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
        // Two entries, "a" as a restore wants it and "b" with the path and cwd tag given.
        let write = |b_path: &[u8], b_cwd_tag: u8, b_title: Option<&Value>| {
            let mut writer = Writer {
                out: MAGIC.as_bytes().to_vec(),
            };
            writer.str("claude");
            writer.str("/agent");
            writer.u64(2);
            writer.str("p/a.jsonl");
            writer.stamp(FileStamp::from_parts(7, None, 3));
            writer.str("a");
            writer.u64(42);
            writer.opt_str(Some("/work"));
            writer.out.push(0);
            writer
                .out
                .extend_from_slice(&(b_path.len() as u32).to_le_bytes());
            writer.out.extend_from_slice(b_path);
            writer.stamp(FileStamp::from_parts(1, None, 1));
            writer.str("b");
            writer.u64(0);
            writer.out.push(b_cwd_tag);
            match b_title {
                None => writer.out.push(0),
                Some(state) => {
                    writer.out.push(1);
                    writer.stamp(FileStamp::from_parts(1, None, 1));
                    writer.u64(1);
                    writer.u64(1);
                    writer.value(state);
                }
            }
            std::fs::write(&cache, sealed(writer)).unwrap();
        };
        let a = || {
            let head = Head {
                id: "a".into(),
                created_at: 42,
                cwd: Some("/work".into()),
            };
            Some((
                root.join("p/a.jsonl"),
                FileStamp::from_parts(7, None, 3),
                head,
            ))
        };
        let title = Value::Array(vec![Value::String("\u{e9}".into())]);
        write(b"p/b.jsonl", 0, Some(&title));
        assert_eq!(find(&cache, "claude", home, root, "a"), a());
        assert!(find(&cache, "claude", home, root, "b").is_some());
        assert!(load(&cache, "claude", home, root).is_ok());
        for bad_path in [&b"p/\xff.jsonl"[..], b"../b.jsonl"] {
            write(bad_path, 0, None);
            assert_eq!(find(&cache, "claude", home, root, "a"), a());
            assert_eq!(find(&cache, "claude", home, root, "b"), None);
            assert!(load(&cache, "claude", home, root).is_err());
        }
        write(b"p/b.jsonl", 2, None);
        assert_eq!(
            find(&cache, "claude", home, root, "a"),
            None,
            "an option tagged 2"
        );
        let mut deep = Value::Null;
        for _ in 0..=MAX_DEPTH + 1 {
            deep = Value::Array(vec![deep]);
        }
        write(b"p/b.jsonl", 0, Some(&deep));
        assert_eq!(find(&cache, "claude", home, root, "a"), None, "nested");
    }

    #[test]
    fn an_index_that_is_not_a_directory_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index"), b"x").unwrap();
        let (home, root) = (Path::new("/agent"), Path::new("/agent/projects"));
        let cache = path(dir.path(), "claude", home);
        assert!(save(&cache, "claude", home, root, &sample(root)).is_err());
        assert_eq!(std::fs::read(dir.path().join("index")).unwrap(), b"x");
    }
}
