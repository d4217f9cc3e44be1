//! Who owns a session: the writer lock on its directory, and whether the log is still ours.
//!
//! Purpose: one writer of ours per session. A writer holds an exclusive, non-blocking `flock`
//! on the session directory for its whole life ([`lock_dir`]); a UI asks the same lock whether
//! to offer sending at all ([`held_by_another_writer`]). Before each append the writer also
//! checks that the name it opened still names its file ([`replaced`]).
//! Invariant: a second writer (another process, or another agent here) gets
//! [`SessionError::NotWritable`] instead of interleaving; a lock found held is tried again for
//! [`LOCK_SETTLE`] first, so a child between `fork` and `exec` holding a just-released lock is
//! not mistaken for a writer. A deleted or replaced log is never appended to.
//! Proof: `tests/session/writer.rs` (`a_second_writer_of_ours_is_refused_until_the_first_lets_go`,
//! `a_log_replaced_or_deleted_under_its_writer_is_refused`).

use crate::session::error::{Result, SessionError};
use std::fs::{self, File};
use std::path::Path;

/// Whether another writer of ours holds the session whose log is at `path` (a cheap check for a
/// UI deciding whether to offer sending at all).
pub fn held_by_another_writer(path: &Path) -> bool {
    let dir = path.parent().unwrap_or(Path::new("."));
    matches!(lock_dir(dir), Err(SessionError::NotWritable { .. }))
}

/// Takes the exclusive, non-blocking writer lock on a session directory. A lock found held is
/// tried again for a moment ([`LOCK_SETTLE`]) before it counts as another writer's: a lock this
/// process's writer has just released can still be held for a few milliseconds by a child
/// between its `fork` and `exec` (the descriptor is close-on-exec, but the child holds it until
/// it execs), which is not a writer at all.
pub(super) fn lock_dir(dir: &Path) -> Result<File> {
    let handle = File::open(dir).map_err(|e| SessionError::io(dir, e))?;
    let deadline = std::time::Instant::now() + LOCK_SETTLE;
    loop {
        match handle.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return lock_result(dir, handle, other),
        }
    }
}

/// How long a held writer lock is tried again before it counts as another writer's.
const LOCK_SETTLE: std::time::Duration = std::time::Duration::from_millis(100);

fn lock_result(
    dir: &Path,
    handle: File,
    locked: std::result::Result<(), std::fs::TryLockError>,
) -> Result<File> {
    match locked {
        Ok(()) => Ok(handle),
        Err(std::fs::TryLockError::WouldBlock) => Err(SessionError::NotWritable {
            path: dir.to_path_buf(),
            reason: "another dsh-refs writer holds this session (it is open in another \
                     process or agent); it can only be read until that one closes"
                .into(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(SessionError::io(dir, e)),
    }
}

/// Why the file at `path` is no longer the one this writer has open (deleted, or replaced by
/// another file under the same name), if it is not: appending to ours would write where no
/// reader looks.
pub(super) fn replaced(path: &Path, ours: &fs::Metadata) -> Option<String> {
    match fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some("the log was deleted since this writer opened it".into())
        }
        Err(_) => None,
        Ok(now) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                if (now.dev(), now.ino()) != (ours.dev(), ours.ino()) {
                    return Some(
                        "the log was replaced by another file since this writer opened it".into(),
                    );
                }
            }
            #[cfg(not(unix))]
            let _ = (now, ours);
            None
        }
    }
}
