//! Codex's `session_index.jsonl` followed by byte offset, within a process and between
//! processes.
//!
//! Purpose: the Codex TUI appends a line `{id, thread_name, updated_at}` to
//! `session_index.jsonl` at every rename and never rewrites it, so on a home of thousands of
//! threads it only grows. Reading it whole in every new process, and again at every rename, is
//! work the previous read already did. So the names folded from it are kept with the index's
//! stamp and the byte offset folded up to, in memory and on disk beside the agents' listing
//! cache (`<dsh home>/index/agents/codex-<key>.session-index.bin`): a new process with the
//! index unchanged reads only that file, and an index that grew is read from its old end.
//!
//! The kept file (version 1): after the magic line, the index's path, its stamp, the offset
//! and line number folded up to, then the names as (id, name) pairs, integers little-endian
//! and strings as a length and UTF-8 bytes ([`super::persist`]'s encoder), then a checksum
//! line.
//!
//! Invariant:
//! - The names are those a read of the whole index gives: the last non-empty `thread_name` per
//!   id ([`IndexScan`]). An index that grew (same inode, longer, reaching the offset) is read
//!   from the offset only; one that shrank, was replaced, or changed without growing is read
//!   whole. The offset is always just past a complete line: a last line still being written is
//!   read again next time, never folded half.
//! - Nothing in the kept file is trusted without a check: a file of another version or index,
//!   torn, damaged, over [`MAX_BYTES`] or over [`MAX_NAMES`] names is refused whole with a
//!   warning and rebuilt from the index; every length is checked against the bytes left before
//!   anything is allocated, so it costs at most linear time and memory in its size.
//! - Nothing is written under the Codex home: the kept file lives under the dsh home, written
//!   to a temporary name and renamed (owner-only), and only when a read changed what is known.
//!
//! Proof: the unit tests below (a grown index read from its offset, a shrunk or replaced one
//! read whole, a half-written line, every kind of damage refused) and
//! `tests/session/codex_session_index.rs` (a name appended shows in the next process, a
//! truncated or replaced index is read whole, an unchanged one is not read, a damaged kept
//! file is rebuilt, the Codex home is unchanged).

use super::lines::{read_lines, FileStamp, LineSink};
use super::persist::{ensure_plain_dir, seal, unseal, Decoded, Reader, Writer};
use super::title_line;
use crate::sync::LockExt;
use serde::Deserialize;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first line of the kept file; its last number is the format's version.
const MAGIC: &str = "dsh-refs codex session index 1\n";
/// A kept file larger than this is not read (100,000 renamed threads take about 20 MB).
const MAX_BYTES: usize = 64 << 20;
/// A kept file naming more threads than this is refused, and none this large is written (the
/// index is then read whole in each process, as before it was kept).
const MAX_NAMES: usize = 200_000;
/// The longest name a read of the index gives ([`title_line`] cuts one there).
const TITLE_CHARS: usize = 120;

/// The names `session_index.jsonl` gives, as far as it was folded.
#[derive(Debug, Clone, PartialEq)]
struct Followed {
    /// The index's stamp when it was last looked at.
    stamp: FileStamp,
    /// The byte offset just past the last complete line folded.
    offset: u64,
    /// The number of lines folded.
    line: u64,
    /// Thread id → its last non-empty `thread_name`.
    names: Arc<HashMap<String, String>>,
}

#[derive(Default)]
struct State {
    followed: Option<Followed>,
    /// When the index's stamp was last checked.
    checked: Option<Instant>,
    /// The kept file was looked at (once per process).
    loaded: bool,
}

/// One Codex home's `session_index.jsonl`, followed by offset.
pub(super) struct SessionIndex {
    /// The index under the Codex home (only ever read).
    path: PathBuf,
    /// Where the folded names are kept between processes (`None`: only in memory).
    keep: Option<PathBuf>,
    state: Mutex<State>,
}

impl SessionIndex {
    /// The index of the Codex home `home`, its names kept beside the listing cache `listing`
    /// (under the dsh home) when there is one. Nothing is read until asked.
    pub(super) fn new(home: &Path, listing: Option<&Path>) -> SessionIndex {
        SessionIndex {
            path: home.join("session_index.jsonl"),
            keep: listing.map(|l| l.with_extension("session-index.bin")),
            state: Mutex::new(State::default()),
        }
    }

    /// The last non-empty `thread_name` for thread `own`; the index is looked at again when
    /// it was last checked `recheck` ago or more.
    pub(super) fn name(&self, own: &str, recheck: Duration) -> Option<String> {
        let mut state = self.state.locked();
        if state.checked.is_some_and(|at| at.elapsed() < recheck) {
            return state.followed.as_ref()?.names.get(own).cloned();
        }
        state.checked = Some(Instant::now());
        let Ok(meta) = fs::metadata(&self.path) else {
            state.followed = None;
            return None;
        };
        let stamp = FileStamp::of(&meta);
        if !std::mem::replace(&mut state.loaded, true) && state.followed.is_none() {
            state.followed = self.load();
        }
        match state.followed.take() {
            Some(known) if known.stamp == stamp => state.followed = Some(known),
            known => {
                let (followed, complete) = self.follow(known, stamp);
                if complete {
                    self.save(&followed);
                }
                state.followed = Some(followed);
            }
        }
        state.followed.as_ref()?.names.get(own).cloned()
    }

    /// Folds what is new in the index (now stamped `stamp`) into `known`: from `known`'s
    /// offset when the index grew from it, else from the start. `false` with it when the read
    /// failed part way (what was folded is used, but not kept on disk).
    fn follow(&self, known: Option<Followed>, stamp: FileStamp) -> (Followed, bool) {
        let (names, offset, line) = match known {
            Some(known) if grew(known.stamp, stamp, known.offset) => {
                (known.names, known.offset, known.line)
            }
            _ => (Arc::default(), 0, 0),
        };
        let mut scan = IndexScan {
            names: Arc::try_unwrap(names).unwrap_or_else(|shared| (*shared).clone()),
        };
        let (offset, line, complete) = match read_lines(&self.path, offset, line, &mut scan) {
            Ok((offset, line)) => (offset, line, true),
            Err(err) => {
                tracing::warn!(file = %self.path.display(), error = %err, "could not read the Codex session index");
                (offset, line, false)
            }
        };
        let followed = Followed {
            stamp,
            offset,
            line,
            names: Arc::new(scan.names),
        };
        (followed, complete)
    }

    /// The kept names, if there is a kept file and it can be trusted (a warning says why not).
    fn load(&self) -> Option<Followed> {
        let keep = self.keep.as_deref()?;
        if fs::symlink_metadata(keep).is_err() {
            return None;
        }
        match decode(keep, &self.path) {
            Ok(followed) => Some(followed),
            Err(why) => {
                tracing::warn!(file = %keep.display(), reason = %why, "kept Codex session index names refused; reading the index again");
                None
            }
        }
    }

    /// Keeps `followed` on disk (best effort: a failure costs the next process a read).
    fn save(&self, followed: &Followed) {
        let Some(keep) = self.keep.as_deref() else {
            return;
        };
        if followed.names.len() > MAX_NAMES {
            return;
        }
        let written = keep
            .parent()
            .ok_or_else(|| std::io::Error::other("a kept file without a directory"))
            .and_then(ensure_plain_dir)
            .and_then(|()| {
                crate::session::files::write_replacing(keep, &encode(followed, &self.path))
            });
        if let Err(err) = written {
            tracing::debug!(file = %keep.display(), error = %err, "could not keep the Codex session index names");
        }
    }
}

/// Whether the index now stamped `now`, once stamped `old` and folded up to `offset`, only
/// grew since: the same file, longer, still holding the offset. (A file of the same length
/// whose stamp changed was rewritten: Codex only appends, so it is read whole.)
fn grew(old: FileStamp, now: FileStamp, offset: u64) -> bool {
    let (old_len, now_len) = (old.parts().0, now.parts().0);
    now.continues(old) && now_len > old_len && old.continues_to(now, offset)
}

/// The kept file's bytes for `followed`, the names of the index at `index`.
fn encode(followed: &Followed, index: &Path) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 128 + followed.names.len() * 96);
    out.extend_from_slice(MAGIC.as_bytes());
    let mut writer = Writer { out };
    writer.str(&index.to_string_lossy());
    writer.stamp(followed.stamp);
    writer.u64(followed.offset);
    writer.u64(followed.line);
    writer.u64(followed.names.len() as u64);
    let mut names: Vec<_> = followed.names.iter().collect();
    names.sort_unstable();
    for (id, name) in names {
        writer.str(id);
        writer.str(name);
    }
    let mut out = writer.out;
    seal(&mut out, MAGIC);
    out
}

/// The names kept at `keep` for the index at `index`, or why they cannot be trusted.
fn decode(keep: &Path, index: &Path) -> Result<Followed, String> {
    let bytes = crate::session::files::read_small(keep, MAX_BYTES)
        .ok_or("not a readable regular file within the size limit")?;
    let body = unseal(&bytes, MAGIC)?;
    let mut reader = Reader { bytes: body };
    let followed = document(&mut reader, index)?;
    if !reader.bytes.is_empty() {
        return Err("bytes after the last name".into());
    }
    Ok(followed)
}

fn document(reader: &mut Reader<'_>, index: &Path) -> Decoded<Followed> {
    if reader.str()? != index.to_string_lossy() {
        return Err("written for another Codex home".into());
    }
    let stamp = reader.stamp()?;
    let (offset, line) = (reader.u64()?, reader.u64()?);
    // The smallest entry: two empty strings' lengths.
    let n = reader.count(8)?;
    if n > MAX_NAMES {
        return Err(format!("{n} names, over the limit of {MAX_NAMES}"));
    }
    let mut names = HashMap::with_capacity(n);
    for _ in 0..n {
        let id = reader.str()?;
        let name = reader.str()?;
        // Only what a read of the index can give: a name of one title line at most.
        if id.is_empty() || name.is_empty() || name.chars().count() > TITLE_CHARS {
            return Err("a name the index cannot give".into());
        }
        if names.insert(id.to_string(), name.to_string()).is_some() {
            return Err("a thread named twice".into());
        }
    }
    Ok(Followed {
        stamp,
        offset,
        line,
        names: Arc::new(names),
    })
}

/// `session_index.jsonl`: the last non-empty `thread_name` per id.
#[derive(Default)]
pub(super) struct IndexScan {
    /// Thread id → its last non-empty `thread_name`.
    pub(super) names: HashMap<String, String>,
}

impl LineSink for IndexScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        #[derive(Deserialize)]
        struct Entry {
            id: String,
            thread_name: Option<String>,
        }
        if let Ok(entry) = serde_json::from_slice::<Entry>(bytes) {
            if let Some(name) = entry.thread_name.as_deref().and_then(title_line) {
                self.names.insert(entry.id, name);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn entry(id: &str, name: &str) -> String {
        format!(r#"{{"id":"{id}","thread_name":"{name}","updated_at":"2026-01-01T00:00:00Z"}}"#)
            + "\n"
    }

    struct Homes {
        _dir: tempfile::TempDir,
        codex: PathBuf,
        listing: PathBuf,
    }

    impl Homes {
        fn new(lines: &[(&str, &str)]) -> Homes {
            let dir = tempfile::tempdir().unwrap();
            let codex = dir.path().join("codex");
            fs::create_dir_all(&codex).unwrap();
            fs::create_dir_all(dir.path().join("dsh")).unwrap();
            let listing = dir.path().join("dsh/index/agents/codex-0123.bin");
            let homes = Homes {
                _dir: dir,
                codex,
                listing,
            };
            let text: String = lines.iter().map(|(id, name)| entry(id, name)).collect();
            fs::write(homes.index(), text).unwrap();
            homes
        }

        fn index(&self) -> PathBuf {
            self.codex.join("session_index.jsonl")
        }

        fn kept(&self) -> PathBuf {
            self.listing.with_extension("session-index.bin")
        }

        /// A new process's view of the index.
        fn process(&self) -> SessionIndex {
            SessionIndex::new(&self.codex, Some(&self.listing))
        }

        fn append(&self, text: &str) {
            let mut file = fs::File::options().append(true).open(self.index()).unwrap();
            file.write_all(text.as_bytes()).unwrap();
        }

        /// Rewrites the index's first bytes in place, its length and mtime kept: only a reader
        /// that reads them again sees the change.
        fn rewrite_head_keeping_stamp(&self, from: &str, to: &str) {
            assert_eq!(from.len(), to.len());
            let path = self.index();
            let modified = fs::metadata(&path).unwrap().modified().unwrap();
            let text = fs::read_to_string(&path).unwrap();
            assert!(text.starts_with(from));
            let mut file = fs::File::options().write(true).open(&path).unwrap();
            file.write_all(to.as_bytes()).unwrap();
            file.set_modified(modified).unwrap();
        }
    }

    fn name(index: &SessionIndex, id: &str) -> Option<String> {
        index.name(id, Duration::ZERO)
    }

    #[test]
    fn a_grown_index_is_read_from_where_the_last_read_ended() {
        let homes = Homes::new(&[("a", "alpha"), ("b", "bravo")]);
        let index = SessionIndex::new(&homes.codex, None);
        assert_eq!(name(&index, "a").as_deref(), Some("alpha"));
        homes.rewrite_head_keeping_stamp(&entry("a", "alpha"), &entry("a", "zulu!"));
        homes.append(&entry("b", "bravo two"));
        homes.append(&entry("c", "charlie"));
        // The rewritten first line lies before the offset: only what was appended is read.
        assert_eq!(name(&index, "a").as_deref(), Some("alpha"));
        assert_eq!(name(&index, "b").as_deref(), Some("bravo two"));
        assert_eq!(name(&index, "c").as_deref(), Some("charlie"));
        // A fresh read of the whole file sees the rewrite (the check above can fail).
        let whole = SessionIndex::new(&homes.codex, None);
        assert_eq!(name(&whole, "a").as_deref(), Some("zulu!"));
    }

    #[test]
    fn a_shrunk_or_replaced_index_is_read_whole() {
        let homes = Homes::new(&[("a", "alpha"), ("b", "bravo")]);
        let index = SessionIndex::new(&homes.codex, None);
        assert_eq!(name(&index, "b").as_deref(), Some("bravo"));
        fs::write(homes.index(), entry("a", "apple")).unwrap();
        assert_eq!(name(&index, "a").as_deref(), Some("apple"));
        assert_eq!(name(&index, "b"), None);
        // Replaced by a longer file (another inode): read whole, not from the old offset.
        let other = homes.codex.join("other.jsonl");
        let text = entry("a", "avocado") + &entry("b", "banana") + &entry("c", "cherry");
        fs::write(&other, text).unwrap();
        fs::rename(&other, homes.index()).unwrap();
        assert_eq!(name(&index, "a").as_deref(), Some("avocado"));
        assert_eq!(name(&index, "c").as_deref(), Some("cherry"));
        // Gone: no names.
        fs::remove_file(homes.index()).unwrap();
        assert_eq!(name(&index, "a"), None);
    }

    #[test]
    fn a_half_written_last_line_is_read_again_once_complete() {
        let homes = Homes::new(&[("a", "alpha")]);
        let whole = entry("b", "bravo");
        let (first, rest) = whole.split_at(20);
        homes.append(first);
        let index = homes.process();
        assert_eq!(name(&index, "b"), None);
        // The next process reads on from before the half line, and sees it whole.
        homes.append(rest);
        assert_eq!(name(&homes.process(), "b").as_deref(), Some("bravo"));
        assert_eq!(name(&index, "b").as_deref(), Some("bravo"));
    }

    #[test]
    fn a_new_process_uses_the_kept_names_and_reads_only_what_grew() {
        let homes = Homes::new(&[("a", "alpha"), ("b", "bravo")]);
        assert_eq!(name(&homes.process(), "a").as_deref(), Some("alpha"));
        assert!(homes.kept().is_file());
        homes.rewrite_head_keeping_stamp(&entry("a", "alpha"), &entry("a", "zulu!"));
        // Unchanged stamp: the kept names, the index not read.
        assert_eq!(name(&homes.process(), "a").as_deref(), Some("alpha"));
        homes.append(&entry("b", "bravo two"));
        let next = homes.process();
        assert_eq!(name(&next, "b").as_deref(), Some("bravo two"));
        assert_eq!(name(&next, "a").as_deref(), Some("alpha"));
        // Without the kept file a process reads the index whole (the checks above can fail).
        assert_eq!(
            name(&SessionIndex::new(&homes.codex, None), "a").as_deref(),
            Some("zulu!")
        );
    }

    /// A kept file with `body` after the magic line, sealed with a right checksum.
    fn sealed(body: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.as_bytes().to_vec();
        out.extend_from_slice(body);
        seal(&mut out, MAGIC);
        out
    }

    #[test]
    fn every_kind_of_damage_in_the_kept_file_is_refused() {
        let homes = Homes::new(&[("a", "alpha")]);
        let index = homes.index();
        assert_eq!(name(&homes.process(), "a").as_deref(), Some("alpha"));
        let good = fs::read(homes.kept()).unwrap();
        assert!(decode(&homes.kept(), &index).is_ok());
        let stamp = FileStamp::of(&fs::metadata(&index).unwrap());
        let crafted = |names: &[(&str, &str)], count: u64| {
            let mut writer = Writer { out: Vec::new() };
            writer.str(&index.to_string_lossy());
            writer.stamp(stamp);
            writer.u64(0);
            writer.u64(0);
            writer.u64(count);
            for (id, name) in names {
                writer.str(id);
                writer.str(name);
            }
            sealed(&writer.out)
        };
        let long = "x".repeat(121);
        let mut flipped = good.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 1;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("torn", good[..good.len() - 5].to_vec()),
            ("flipped", flipped),
            ("another version", {
                let mut other = good.clone();
                other[MAGIC.len() - 2] = b'9';
                other
            }),
            ("empty", Vec::new()),
            (
                "a count beyond the end",
                crafted(&[("a", "alpha")], 1 << 40),
            ),
            ("over the limit", crafted(&[], MAX_NAMES as u64 + 1)),
            ("a name too long", crafted(&[("a", &long)], 1)),
            ("an empty name", crafted(&[("a", "")], 1)),
            ("a thread twice", crafted(&[("a", "x"), ("a", "y")], 2)),
            (
                "bytes after",
                [crafted(&[("a", "alpha")], 1), b"\n".to_vec()].concat(),
            ),
        ];
        for (what, bytes) in cases {
            fs::write(homes.kept(), &bytes).unwrap();
            assert!(decode(&homes.kept(), &index).is_err(), "{what} was trusted");
            // Refused, then rebuilt from the index.
            assert_eq!(
                name(&homes.process(), "a").as_deref(),
                Some("alpha"),
                "{what}"
            );
            assert!(decode(&homes.kept(), &index).is_ok(), "{what} not rebuilt");
        }
        // A good file for another Codex home is refused too.
        fs::write(homes.kept(), &good).unwrap();
        let elsewhere = homes.codex.join("elsewhere");
        assert!(decode(&homes.kept(), &elsewhere.join("session_index.jsonl")).is_err());
        // A well-formed crafted file is used as it says (the cases above fail on content alone).
        fs::write(homes.kept(), crafted(&[("a", "crafted")], 1)).unwrap();
        assert_eq!(name(&homes.process(), "a").as_deref(), Some("crafted"));
    }
}
