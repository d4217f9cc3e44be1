//! The pending-batch marker of a plain log: where a batch being written starts.
//!
//! Purpose: a plain batch is not self-delimiting (each of its lines is a record on its own), so
//! a `write` cut short by a kill could leave its first lines looking valid. Before a plain
//! append the writer writes the batch's start offset to `.session.jsonl.pending` beside the log
//! ([`write_marker`]) and removes it once the batch is written; a marker that outlives its
//! writer makes readers stop at its start ([`pending_batch_start`], read by `reader/lock.rs`
//! and by the writer's own observation) and the next append cut the log back to it.
//! Invariant: only a whole marker counts (digits and a newline, at most [`MAX_MARKER_BYTES`],
//! in a regular file) and only if it points at a line boundary past the header, so a marker cut
//! short or zero-filled by a crash never makes a writer cut acknowledged data; a FIFO or a
//! symlink in the marker's place is neither read from nor written through.
//! Proof: `tests/session/reliability_crash.rs`
//! (`sigkill_at_random_points_loses_nothing_acknowledged`: the markers that hid a partial batch
//! are counted) and `tests/cli/reliability_hostile_home.rs` (markers that are not regular files:
//! `a_fifo_pending_marker_neither_hangs_nor_counts`,
//! `a_pending_marker_linked_to_dev_zero_is_not_read`,
//! `a_symlinked_marker_to_a_valid_offset_is_not_followed`).

use crate::session::error::{Result, SessionError};
use crate::session::files;
use crate::session::reader::Encoding;
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Removes the pending marker of the log at `path`, if there is one.
pub(super) fn remove_marker(path: &Path) -> Result<()> {
    let marker = pending_marker(path);
    match fs::remove_file(&marker) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SessionError::io(&marker, e)),
    }
}

/// The pending-batch marker of a plain log (see the module docs).
pub(super) fn pending_marker(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.pending"))
}

/// The longest marker read: `u64::MAX` has 20 digits, plus its newline.
const MAX_MARKER_BYTES: usize = 32;

/// Where a batch left pending by a crashed writer starts, if a marker says so.
///
/// Only a whole marker counts (the number and its newline), and only if it points at a line
/// boundary past the header: a marker cut short or zero-filled by a crash must never make a
/// writer cut acknowledged data.
pub(crate) fn pending_batch_start(path: &Path) -> Option<u64> {
    if Encoding::of_path(path) != Encoding::Plain {
        return None;
    }
    // A marker is a number and a newline: a few dozen bytes at most, and only a regular file
    // (a FIFO or a symlink to a device in its place must neither block nor feed us forever).
    let marker = files::read_small(&pending_marker(path), MAX_MARKER_BYTES)?;
    let marker = std::str::from_utf8(&marker).ok()?;
    let start: u64 = marker.strip_suffix('\n')?.parse().ok()?;
    if start == 0 {
        return None;
    }
    let mut file = files::open_read(path).ok()?;
    let mut before = [0u8; 1];
    file.seek(SeekFrom::Start(start - 1)).ok()?;
    file.read_exact(&mut before).ok()?;
    (before[0] == b'\n').then_some(start)
}

/// Writes a pending marker, refusing (instead of blocking on or writing through) anything but a
/// regular file in its place.
pub(super) fn write_marker(marker: &Path, start: u64) -> std::io::Result<()> {
    let mut file = files::open_regular(
        marker,
        OpenOptions::new().write(true).create(true).truncate(true),
        files::Symlinks::Refuse,
    )?;
    file.write_all(format!("{start}\n").as_bytes())
}
