//! Reading a log's length while no writer of ours is half-way through a batch.
//!
//! Purpose: a reader takes a shared `flock` for the moment it reads the length (our writers
//! append under an exclusive one), and a plain log's pending marker caps that length at the
//! start of a batch whose writer died (see [`crate::session::writer`]).
//!
//! Invariant: the length answered never ends inside one of our batches, and no reader waits
//! longer than `wait` for the lock: then it answers [`SessionError::Busy`] naming the log.
//! Proof: `tests/session/writer.rs` (readers beside a writer, stale markers) and the busy-log
//! tests in `tests/session/store.rs`.

use crate::session::error::{Result, SessionError};
use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a reader waits for a writer's lock before it reports the session busy. Our writers
/// hold it for one `write`; a lock held longer belongs to a stuck or hostile process.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// The file length under a shared lock: our writers hold an exclusive lock while appending. A
/// plain log whose last writer died mid-batch ends, for readers, where that batch starts (see
/// [`crate::session::writer`]): a live writer removes its marker before it unlocks.
///
/// The lock is tried, not awaited: another process holding it for longer than `wait` makes this
/// a [`SessionError::Busy`] naming the log, never a reader blocked forever.
pub(crate) fn stable_len(path: &Path, file: &File, wait: Duration) -> Result<u64> {
    lock_shared_within(path, file, wait)?;
    let len =
        file.metadata().map(|m| m.len()).map(
            |len| match crate::session::writer::pending_batch_start(path) {
                Some(start) => len.min(start),
                None => len,
            },
        );
    let _ = file.unlock();
    len.map_err(|e| SessionError::io(path, e))
}

/// Takes a shared lock on `file`, retrying with growing pauses until `wait` has passed.
fn lock_shared_within(path: &Path, file: &File, wait: Duration) -> Result<()> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock_shared() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(SessionError::io(path, e)),
        }
        let waited = started.elapsed();
        if waited >= wait {
            return Err(SessionError::Busy {
                path: path.to_path_buf(),
                waited,
            });
        }
        std::thread::sleep(pause.min(wait - waited));
        // Short pauses: a writer appending back to back leaves only brief gaps between batches,
        // and a long pause would miss every one of them.
        pause = (pause * 2).min(Duration::from_millis(4));
    }
}
