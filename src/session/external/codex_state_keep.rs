//! What Codex's newest state database said of its threads, kept between processes by the
//! stamps of the database and its write-ahead log.
//!
//! Purpose: Codex keeps the names (`/rename`) and generated titles of its threads in
//! `state_<n>.sqlite`. With a write-ahead log beside it, reading it without writing under the
//! Codex home means copying both into a private directory first (`codex_state::read_db`), and
//! every new process paid that copy and a read of every thread for a listing's titles. So what
//! the database said is kept beside the agents' listing cache
//! (`<dsh home>/index/agents/codex-<key>.state-titles.bin`) with the database's path and the
//! stamps (size, mtime, inode) of the database and of its log: a new process whose newest
//! database and stamps are the same uses it without opening SQLite.
//!
//! The kept file (version 1): after the magic line, the database's path, its stamp, whether a
//! log was there and its stamp, then the threads as (id, name, title), integers little-endian,
//! strings as a length and UTF-8 bytes, options tagged ([`super::persist`]'s encoder), then a
//! checksum line.
//!
//! Invariant: what is used is what a read of the same database gave: only for the same path and
//! the same two stamps (a log that appeared or went is a change); only a read of a database and
//! log both unchanged for [`SETTLE`] is kept (a write within the mtime's resolution cannot hide
//! behind an equal stamp). A kept file of another version or database, torn, damaged, over
//! [`MAX_BYTES`] or over [`MAX_THREADS`] threads is refused whole with a warning and the
//! database read again; every length is checked against the bytes left before anything is
//! allocated. Written to a temporary name and renamed, owner-only, never under the Codex home.
//!
//! Proof: the unit tests below (a round trip for the same database and stamps only, every kind
//! of damage refused, an unsettled read not kept) and `tests/session/codex_session_index.rs`
//! (`a_new_process_uses_the_kept_state_titles_until_the_database_changes`: the real Codex
//! fixture's database with its log, no copy made by a new process, a rename in the database
//! seen at once, the Codex home unchanged).

use super::codex_state::ThreadTitle;
use super::dirs::SETTLE;
use super::lines::FileStamp;
use super::persist::{ensure_plain_dir, seal, unseal, Decoded, Reader, Writer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The first line of the kept file; its last number is the format's version.
const MAGIC: &str = "dsh-refs codex state titles 1\n";
/// A kept file larger than this is not read.
const MAX_BYTES: usize = 64 << 20;
/// A kept file naming more threads than this is refused, and none this large is written.
const MAX_THREADS: usize = 200_000;

/// The stamps of a database and of its log (`None`: no log).
pub(super) type Stamps = (FileStamp, Option<FileStamp>);

/// Where the titles of the Codex home listed at `listing` are kept.
pub(super) fn path_beside(listing: &Path) -> PathBuf {
    listing.with_extension("state-titles.bin")
}

/// The threads kept at `keep` for the database `db` stamped `stamps`, when they can be
/// trusted; a kept file that cannot is refused with a warning.
pub(super) fn load(keep: &Path, db: &Path, stamps: Stamps) -> Option<HashMap<String, ThreadTitle>> {
    if std::fs::symlink_metadata(keep).is_err() {
        return None;
    }
    match decode(keep, db) {
        Ok((kept, threads)) if kept == stamps => Some(threads),
        // Another state of the database: read again, not damage.
        Ok(_) => None,
        Err(why) => {
            tracing::warn!(file = %keep.display(), reason = %why, "kept Codex state titles refused; reading the database again");
            None
        }
    }
}

/// Keeps `threads`, what the database `db` stamped `stamps` said, at `keep` (best effort: a
/// failure costs the next process a read). Not when either file changed within [`SETTLE`].
pub(super) fn save(keep: &Path, db: &Path, stamps: Stamps, threads: &HashMap<String, ThreadTitle>) {
    let settled = |stamp: FileStamp| {
        stamp.parts().1.is_some_and(|m| {
            SystemTime::now()
                .duration_since(m)
                .is_ok_and(|age| age >= SETTLE)
        })
    };
    if !settled(stamps.0) || !stamps.1.is_none_or(settled) || threads.len() > MAX_THREADS {
        return;
    }
    let written = keep
        .parent()
        .ok_or_else(|| std::io::Error::other("a kept file without a directory"))
        .and_then(ensure_plain_dir)
        .and_then(|()| crate::session::files::write_replacing(keep, &encode(db, stamps, threads)));
    if let Err(err) = written {
        tracing::debug!(file = %keep.display(), error = %err, "could not keep the Codex state titles");
    }
}

fn encode(db: &Path, stamps: Stamps, threads: &HashMap<String, ThreadTitle>) -> Vec<u8> {
    let mut writer = Writer {
        out: Vec::with_capacity(MAGIC.len() + 256 + threads.len() * 128),
    };
    writer.out.extend_from_slice(MAGIC.as_bytes());
    writer.str(&db.to_string_lossy());
    writer.stamp(stamps.0);
    writer.u64(u64::from(stamps.1.is_some()));
    if let Some(log) = stamps.1 {
        writer.stamp(log);
    }
    writer.u64(threads.len() as u64);
    let mut sorted: Vec<_> = threads.iter().collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (id, thread) in sorted {
        writer.str(id);
        writer.opt_str(thread.name.as_deref());
        writer.opt_str(thread.title.as_deref());
    }
    let mut out = writer.out;
    seal(&mut out, MAGIC);
    out
}

fn decode(keep: &Path, db: &Path) -> Result<(Stamps, HashMap<String, ThreadTitle>), String> {
    let bytes = crate::session::files::read_small(keep, MAX_BYTES)
        .ok_or("not a readable regular file within the size limit")?;
    let body = unseal(&bytes, MAGIC)?;
    let mut reader = Reader { bytes: body };
    let kept = threads(&mut reader, db)?;
    if !reader.bytes.is_empty() {
        return Err("bytes after the last thread".into());
    }
    Ok(kept)
}

fn threads(reader: &mut Reader<'_>, db: &Path) -> Decoded<(Stamps, HashMap<String, ThreadTitle>)> {
    if reader.str()? != db.to_string_lossy() {
        return Err("written for another state database".into());
    }
    let stamp = reader.stamp()?;
    let log = match reader.u64()? {
        0 => None,
        1 => Some(reader.stamp()?),
        tag => return Err(format!("a log tagged {tag}")),
    };
    // The smallest entry: an empty id's length and two absent options.
    let n = reader.count(6)?;
    if n > MAX_THREADS {
        return Err(format!("{n} threads, over the limit of {MAX_THREADS}"));
    }
    let mut threads = HashMap::with_capacity(n);
    for _ in 0..n {
        let id = reader.str()?;
        let thread = ThreadTitle {
            name: reader.opt_str()?.map(str::to_string),
            title: reader.opt_str()?.map(str::to_string),
        };
        if id.is_empty() || threads.insert(id.to_string(), thread).is_some() {
            return Err("an empty or repeated thread id".into());
        }
    }
    Ok(((stamp, log), threads))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn stamp_at(path: &Path, age: Duration) -> FileStamp {
        let file = std::fs::File::options().append(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
        FileStamp::of(&std::fs::metadata(path).unwrap())
    }

    fn threads() -> HashMap<String, ThreadTitle> {
        let mut threads = HashMap::new();
        for (id, name, title) in [
            ("a", Some("named"), Some("generated")),
            ("b", None, Some("t")),
            ("c", None, None),
        ] {
            threads.insert(
                id.to_string(),
                ThreadTitle {
                    name: name.map(str::to_string),
                    title: title.map(str::to_string),
                },
            );
        }
        threads
    }

    /// The same database and stamps give back what was kept; another stamp, log or database
    /// gives nothing; a read of a database changed within the settle time is not kept.
    #[test]
    fn kept_titles_come_back_for_the_same_database_and_stamps_only() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = (
            dir.path().join("state_5.sqlite"),
            dir.path().join("state_5.sqlite-wal"),
        );
        std::fs::write(&db, "db").unwrap();
        std::fs::write(&log, "log").unwrap();
        let keep = path_beside(&dir.path().join("dsh/index/agents/codex-0.bin"));
        // The listing cache's directory, as the listing made it.
        std::fs::create_dir_all(keep.parent().unwrap()).unwrap();
        let old = Duration::from_secs(60);
        let stamps = (stamp_at(&db, old), Some(stamp_at(&log, old)));
        save(&keep, &db, stamps, &threads());
        assert_eq!(load(&keep, &db, stamps), Some(threads()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&keep).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        assert_eq!(load(&keep, &db, (stamps.0, None)), None, "the log went");
        assert_eq!(
            load(&keep, &dir.path().join("state_6.sqlite"), stamps),
            None
        );
        let moved = (stamp_at(&db, Duration::from_secs(30)), stamps.1);
        assert_eq!(load(&keep, &db, moved), None, "the database changed");
        // A database written a moment ago: its read is not kept.
        std::fs::remove_file(&keep).unwrap();
        let fresh = (stamp_at(&db, Duration::ZERO), stamps.1);
        save(&keep, &db, fresh, &threads());
        assert!(!keep.exists());
    }

    /// Every kind of damage is refused: a torn file, a flipped byte, another version, trailing
    /// bytes, a count past the end, a repeated id.
    #[test]
    fn damaged_kept_titles_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state_5.sqlite");
        std::fs::write(&db, "db").unwrap();
        let stamps = (stamp_at(&db, Duration::from_secs(60)), None);
        let good = encode(&db, stamps, &threads());
        let keep = dir.path().join("kept.bin");
        let reseal = |body: &[u8]| {
            let mut out = body.to_vec();
            seal(&mut out, MAGIC);
            out
        };
        let unsealed = &good[..good.len() - 17];
        let mut repeated = unsealed.to_vec();
        repeated.extend_from_slice(&[0; 4]);
        let mut flipped = good.clone();
        flipped[MAGIC.len() + 3] ^= 1;
        for (what, bytes) in [
            ("torn", good[..good.len() / 2].to_vec()),
            ("flipped", flipped),
            ("another version", good.clone().split_off(1)),
            ("trailing", reseal(&repeated)),
        ] {
            std::fs::write(&keep, &bytes).unwrap();
            assert!(decode(&keep, &db).is_err(), "{what}");
        }
        let mut writer = Writer {
            out: MAGIC.as_bytes().to_vec(),
        };
        writer.str(&db.to_string_lossy());
        writer.stamp(stamps.0);
        writer.u64(0);
        writer.u64(u64::MAX);
        std::fs::write(&keep, reseal(&writer.out)).unwrap();
        assert!(decode(&keep, &db).is_err(), "a count past the end");
        let mut writer = Writer {
            out: MAGIC.as_bytes().to_vec(),
        };
        writer.str(&db.to_string_lossy());
        writer.stamp(stamps.0);
        writer.u64(0);
        writer.u64(2);
        for _ in 0..2 {
            writer.str("a");
            writer.opt_str(None);
            writer.opt_str(None);
        }
        std::fs::write(&keep, reseal(&writer.out)).unwrap();
        assert!(decode(&keep, &db).is_err(), "a repeated id");
        std::fs::write(&keep, &good).unwrap();
        assert!(decode(&keep, &db).is_ok());
    }
}
