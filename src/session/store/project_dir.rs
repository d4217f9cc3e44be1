//! A project directory as the listing walks it: session directories stamped and logs opened
//! relative to the open directory.
//!
//! Purpose: a first listing of 100,000 sessions was mostly the kernel walking each absolute
//! path again (nine components, for five lookups a session); relative to the project directory
//! each lookup is one or two components, and a session costs a `stat`, at most two `open`s and
//! a read.
//! Invariant: what is found is what the same lookups by absolute path find (symlinks followed,
//! anything but a regular file refused as a log); where the project directory cannot be opened
//! they are made by path. Proof: `tests/session/store.rs` and
//! `tests/cli/reliability_hostile_home.rs` (unreadable, replaced and odd session directories) run
//! through it.

use crate::session::files;
use crate::session::reader::Encoding;
use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::stamp::Stamp;

/// A project directory being refreshed: its path, and the directory itself when it could be
/// opened (its session directories are then looked up relative to it).
pub(super) struct ProjectDir<'a> {
    pub(super) path: &'a Path,
    pub(super) opened: Option<&'a fs::File>,
}

impl ProjectDir<'_> {
    /// The stamp of the session directory `name` (`None` when it cannot be looked at).
    pub(super) fn stamp(&self, name: &OsStr, now: SystemTime) -> Option<Stamp> {
        #[cfg(unix)]
        if let Some(opened) = self.opened {
            return Stamp::at(opened, name, now);
        }
        fs::metadata(self.path.join(name))
            .ok()
            .map(|m| Stamp::of(&m, now))
    }

    /// The regular file `file` in its session directory `name`, opened for reading relative to
    /// the project directory (as [`files::open_read`] opens one: non-blocking, a symlink
    /// followed, anything but a regular file refused); `None` when the project directory is not
    /// open here.
    fn open(&self, name: &OsStr, file: &str) -> Option<std::io::Result<fs::File>> {
        #[cfg(unix)]
        if let Some(opened) = self.opened {
            use rustix::fs::{Mode, OFlags};
            let relative = Path::new(name).join(file);
            let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
            let file = rustix::fs::openat(opened, &relative, flags, Mode::empty())
                .map(fs::File::from)
                .map_err(std::io::Error::from);
            return Some(file.and_then(files::regular));
        }
        let _ = (name, file);
        None
    }
}

/// The log inside the session directory `name` of `project` (at `session_dir`), opened: the
/// zstd one preferred, as dsh. An absent name is passed over; one that is not a regular file (a
/// FIFO, a directory, a link) is answered with its error unless the other encoding's log opens,
/// and a log that is there but cannot be opened (permissions) with the error too, so each is
/// reported like an unreadable header: one such file costs its one session, named. Two `open`s at most, relative to the project directory,
/// and no `stat` by path: the kernel's path walks were most of a cold listing.
pub(super) fn open_log(
    project: &ProjectDir,
    name: &OsStr,
    session_dir: &Path,
) -> Option<(Encoding, PathBuf, std::io::Result<fs::File>)> {
    let mut not_regular = None;
    for encoding in [Encoding::Zstd, Encoding::Plain] {
        let path = session_dir.join(encoding.file_name());
        let opened = project
            .open(name, encoding.file_name())
            .unwrap_or_else(|| files::open_read(&path));
        match opened {
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            // A FIFO, a directory or a link in a log's place: the other encoding's log may
            // still be there; if not, this one is the session's, named as what it is.
            Err(e) if e.kind() == ErrorKind::InvalidInput => {
                not_regular.get_or_insert((encoding, path, Err(e)));
            }
            opened => return Some((encoding, path, opened)),
        }
    }
    not_regular
}
