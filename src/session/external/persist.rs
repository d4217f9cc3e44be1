//! One agent's listing kept on disk between processes
//! (`<dsh home>/index/agents/<agent>-<key>.json`).
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
//! Invariant: nothing in the file is trusted without a check.
//! - The file starts with a versioned magic line and ends with a checksum of everything before
//!   it; it names the agent and the home it describes, and a file of another version, agent or
//!   home, torn or corrupt is ignored whole (the caller logs a warning and rebuilds it).
//! - Every path in it is relative, made of plain components, and joined under the agent's
//!   sessions directory: a crafted file cannot point a read anywhere else. A restored entry is
//!   used only for a file the walk of the home finds, and only when `stat` says it is the same
//!   file (same inode) and not shorter: a file that shrank or was replaced is read again whole.
//! - A title state is restored only by the agent that wrote it (its own deserializer); one it
//!   cannot read is scanned again from the start.
//!
//! Writing is best effort and never under an agent's home: the document goes to a fresh
//! temporary name beside the cache and is renamed over it, so a reader sees the old file or the
//! new one; an `index` that is not a plain directory (a symlink, a file) is left alone.
//!
//! Proof: the unit tests below (round trip, every kind of damage refused, paths that escape
//! refused) and `tests/session/agent_listing_cache.rs` (a new process lists from the cache, a
//! title appended shows, a truncated or replaced file is read again, a deleted one disappears,
//! nothing is written under the agent's home).

use super::lines::FileStamp;
use super::Head;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::hash::Hasher;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The first line of the file; its last number is the format's version.
const MAGIC: &str = "dsh-refs agent listing 1\n";
/// A cache larger than this is not read (2,000 sessions take well under 2 MB).
const MAX_BYTES: usize = 256 << 20;

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
    pub state: Value,
}

#[derive(Serialize, Deserialize)]
struct Document {
    agent: String,
    home: String,
    files: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    path: String,
    stamp: Stamp,
    id: String,
    created: i64,
    cwd: Option<String>,
    title: Option<Title>,
}

#[derive(Serialize, Deserialize)]
struct Title {
    stamp: Stamp,
    offset: u64,
    line: u64,
    state: Value,
}

#[derive(Serialize, Deserialize, Clone, Copy)]
struct Stamp {
    len: u64,
    /// Nanoseconds since the epoch; `None` when the file system gives no time (or one before
    /// 1970), which then never matches a file's stamp again.
    mtime: Option<u64>,
    inode: u64,
    /// The status change time in nanoseconds (absent in caches written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ctime: Option<i64>,
}

impl From<FileStamp> for Stamp {
    fn from(stamp: FileStamp) -> Stamp {
        let (len, modified, inode) = stamp.parts();
        Stamp {
            len,
            mtime: modified
                .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
                .and_then(|d| u64::try_from(d.as_nanos()).ok()),
            inode,
            ctime: stamp.changed(),
        }
    }
}

impl From<Stamp> for FileStamp {
    fn from(stamp: Stamp) -> FileStamp {
        let modified = stamp
            .mtime
            .map(|ns| SystemTime::UNIX_EPOCH + Duration::from_nanos(ns));
        FileStamp::from_parts(stamp.len, modified, stamp.inode).with_changed(stamp.ctime)
    }
}

/// Where the cache of `agent`'s sessions under `agent_home` lives in the dsh home `dsh_home`.
pub(super) fn path(dsh_home: &Path, agent: &str, agent_home: &Path) -> PathBuf {
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write(agent_home.as_os_str().as_encoded_bytes());
    dsh_home
        .join("index")
        .join("agents")
        .join(format!("{agent}-{:016x}.json", hasher.finish()))
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
    if std::fs::symlink_metadata(cache).is_err() {
        return Err(Refused::Missing);
    }
    let invalid = |why: &str| Refused::Invalid(format!("{}: {why}", cache.display()));
    let bytes = crate::session::files::read_small(cache, MAX_BYTES)
        .ok_or_else(|| invalid("not a readable regular file within the size limit"))?;
    let body = bytes
        .strip_prefix(MAGIC.as_bytes())
        .ok_or_else(|| invalid("not this version's agent listing"))?;
    let split = body
        .len()
        .checked_sub(17)
        .ok_or_else(|| invalid("truncated"))?;
    let (json, sum) = body.split_at(split);
    if sum != format!("{:016x}\n", checksum(json)).as_bytes() {
        return Err(invalid("checksum mismatch (torn or damaged)"));
    }
    let document: Document =
        serde_json::from_slice(json).map_err(|e| invalid(&format!("not readable: {e}")))?;
    if document.agent != agent || document.home != home.to_string_lossy() {
        return Err(invalid("written for another agent or home"));
    }
    let mut files = Vec::with_capacity(document.files.len());
    for entry in document.files {
        let relative = Path::new(&entry.path);
        let plain = relative.components().count() > 0
            && relative
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        if !plain {
            return Err(invalid("a path that leaves the sessions directory"));
        }
        files.push(SavedFile {
            path: root.join(relative),
            stamp: entry.stamp.into(),
            head: Head {
                id: entry.id,
                created_at: entry.created,
                cwd: entry.cwd,
            },
            title: entry.title.map(|t| SavedTitle {
                stamp: t.stamp.into(),
                offset: t.offset,
                line: t.line,
                state: t.state,
            }),
        });
    }
    Ok(files)
}

/// Writes `files` as the cache at `cache` (a temporary file renamed over it). Files whose path
/// is not under `root` or not UTF-8 are left out (they are read again next time).
pub(super) fn save(
    cache: &Path,
    agent: &str,
    home: &Path,
    root: &Path,
    files: &[SavedFile],
) -> std::io::Result<()> {
    let entries: Vec<Entry> = files
        .iter()
        .filter_map(|f| {
            let relative = f.path.strip_prefix(root).ok()?.to_str()?.to_string();
            Some(Entry {
                path: relative,
                stamp: f.stamp.into(),
                id: f.head.id.clone(),
                created: f.head.created_at,
                cwd: f.head.cwd.clone(),
                title: f.title.as_ref().map(|t| Title {
                    stamp: t.stamp.into(),
                    offset: t.offset,
                    line: t.line,
                    state: t.state.clone(),
                }),
            })
        })
        .collect();
    let document = Document {
        agent: agent.to_string(),
        home: home.to_string_lossy().into_owned(),
        files: entries,
    };
    let json = serde_json::to_vec(&document).map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(MAGIC.len() + json.len() + 17);
    out.extend_from_slice(MAGIC.as_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(format!("{:016x}\n", checksum(&json)).as_bytes());

    let dir = cache
        .parent()
        .ok_or_else(|| std::io::Error::other("a cache path without a directory"))?;
    ensure_plain_dir(dir)?;
    crate::session::files::write_replacing(cache, &out)
}

/// Creates `dir` (and `index/` above it) when missing; refuses one that is not a plain
/// directory.
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
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(level)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// FxHash over the bytes, eight at a time: catches a torn or damaged file, not an adversary
/// (one who can write the dsh home can write far worse).
pub(super) fn checksum(bytes: &[u8]) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    let (words, rest) = bytes.as_chunks::<8>();
    for word in words {
        hasher.write_u64(u64::from_le_bytes(*word));
    }
    hasher.write(rest);
    hasher.write_usize(bytes.len());
    hasher.finish()
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
                state: serde_json::json!({"first_prompt": "hi"}),
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

    #[test]
    fn a_path_that_leaves_the_sessions_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (home, root) = (Path::new("/agent"), Path::new("/agent/projects"));
        let cache = path(dir.path(), "claude", home);
        for bad in ["../../etc/passwd", "/etc/passwd", ""] {
            let document = Document {
                agent: "claude".into(),
                home: "/agent".into(),
                files: vec![Entry {
                    path: bad.into(),
                    stamp: Stamp {
                        len: 1,
                        mtime: None,
                        inode: 1,
                        ctime: None,
                    },
                    id: "x".into(),
                    created: 0,
                    cwd: None,
                    title: None,
                }],
            };
            let json = serde_json::to_vec(&document).unwrap();
            let mut bytes = MAGIC.as_bytes().to_vec();
            bytes.extend_from_slice(&json);
            bytes.extend_from_slice(format!("{:016x}\n", checksum(&json)).as_bytes());
            std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
            std::fs::write(&cache, bytes).unwrap();
            assert!(
                matches!(load(&cache, "claude", home, root), Err(Refused::Invalid(_))),
                "{bad}"
            );
        }
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
