//! The directories of an agent's home as a listing walks them, and whether a session file may be
//! read.
//!
//! Purpose: the file-system side of [`super::scan`]'s listing: a directory is read again only
//! when its stamp changed ([`refresh_dir`]), and a file a persistent listing remembers is
//! trusted only while this process may read it ([`readable`]); files are stamped by their name
//! in their opened directory ([`StatAt`]), not by their whole path. Invariant: a directory whose
//! stamp is within [`SETTLE`] of now keeps no stamp (it is read again next time); a missing or
//! unreadable directory has no entries; nothing here writes. Proof: `tests/session/
//! external_sessions.rs` and `tests/session/agent_listing_cache.rs` (new files, removed
//! files, files that became unreadable).

use super::lines::FileStamp;
use crate::session::error::Result;
use rustc_hash::FxHashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Directory stamps this close to now may still change within their granularity.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// Whether this process may read `file` (its effective ids against the file's mode, as an
/// open would check): a session whose file became unreadable is read again, so its error names
/// it, instead of being listed from the persistent listing.
pub(super) fn readable(file: &Path) -> bool {
    #[cfg(unix)]
    {
        rustix::fs::accessat(
            rustix::fs::CWD,
            file,
            rustix::fs::Access::READ_OK,
            rustix::fs::AtFlags::EACCESS,
        )
        .is_ok()
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        true
    }
}

/// Re-reads `dir` when its stamp changed; answers whether it did. `subdirs` keeps directories,
/// else files. A missing directory has no entries.
pub(super) fn refresh_dir(
    dirs: &mut FxHashMap<PathBuf, (Option<SystemTime>, Vec<PathBuf>)>,
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
        // At the files' level everything is kept (a FIFO, a socket, a link, a directory): one
        // whose name makes it a session file but that is not a readable regular file is then
        // named in the listing's errors when its head is read, instead of vanishing without a
        // word; the names filter out the rest (a Claude Code session's own directory).
        if !subdirs || kind.is_dir() {
            found.push(entry.path());
        }
    }
    // By bytes: the entries share their directory, so this is `Path`'s order, without its
    // component-by-component comparison (a twentieth of a warm listing).
    found.sort_unstable_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    // A stamp that recent may still hide a change within its granularity: keep no stamp, so the
    // next listing reads the directory again.
    let settled = modified.filter(|m| now.duration_since(*m).is_ok_and(|age| age >= SETTLE));
    let changed = dirs.get(dir).is_none_or(|(_, old)| *old != found);
    dirs.insert(dir.to_path_buf(), (settled, found));
    Ok(changed)
}

/// Whether the mode lets every user read the file (owner, group and others), so that no
/// process is refused by it (an ACL can still refuse one: that changes the status time, which
/// the caller checks too).
pub(super) fn world_readable(meta: &fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o444 == 0o444
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// Stamps of files a directory at a time: each file is looked up by its name in its directory,
/// opened once (`O_PATH`), instead of by its whole path (a warm listing is a `stat` per file,
/// and the kernel's walk of every component of every path was a fifth of it).
#[derive(Default)]
pub(super) struct StatAt {
    #[cfg(unix)]
    dir: Option<(PathBuf, Option<rustix::fd::OwnedFd>)>,
}

impl StatAt {
    /// `file`'s stamp (symlinks followed, as `fs::metadata`) and whether every user may read
    /// it; `None` when it cannot be looked at.
    pub(super) fn stamp(&mut self, file: &Path) -> Option<(FileStamp, bool)> {
        #[cfg(unix)]
        if let (Some(parent), Some(name)) = (file.parent(), file.file_name()) {
            if self.dir.as_ref().is_none_or(|(dir, _)| dir != parent) {
                use rustix::fs::{Mode, OFlags};
                let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
                let fd = rustix::fs::open(parent, flags, Mode::empty()).ok();
                self.dir = Some((parent.to_path_buf(), fd));
            }
            if let Some((_, Some(fd))) = &self.dir {
                let stat = rustix::fs::statat(fd, name, rustix::fs::AtFlags::empty()).ok()?;
                return Some(stamp_of(&stat));
            }
        }
        let meta = fs::metadata(file).ok()?;
        Some((FileStamp::of(&meta), world_readable(&meta)))
    }
}

/// The stamp `FileStamp::of` gives for the same file's metadata, and whether its mode lets
/// every user read it.
#[cfg(unix)]
fn stamp_of(stat: &rustix::fs::Stat) -> (FileStamp, bool) {
    let time = |sec: i64, nsec: i64| -> Option<SystemTime> {
        let nanos = Duration::from_nanos(u64::try_from(nsec).ok()?);
        if sec >= 0 {
            SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(sec.unsigned_abs()) + nanos)
        } else {
            SystemTime::UNIX_EPOCH
                .checked_sub(Duration::from_secs(sec.unsigned_abs()))?
                .checked_add(nanos)
        }
    };
    #[allow(clippy::unnecessary_cast)]
    let (mtime, mtime_nsec, ctime, ctime_nsec) = (
        stat.st_mtime as i64,
        stat.st_mtime_nsec as i64,
        stat.st_ctime as i64,
        stat.st_ctime_nsec as i64,
    );
    let changed = ctime
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(ctime_nsec));
    let stamp = FileStamp::from_parts(
        u64::try_from(stat.st_size).unwrap_or(0),
        time(mtime, mtime_nsec),
        stat.st_ino,
    )
    .with_changed(changed);
    (stamp, stat.st_mode & 0o444 == 0o444)
}
