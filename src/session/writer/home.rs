//! The encoding a new session gets: a home holds logs of one kind.
//!
//! Purpose: dsh refuses to list a home that holds both plain and zstd logs (SPEC §1.2), so
//! before a new session is created [`home_encoding`] looks at the logs the home already holds
//! and either confirms the encoding asked for, picks the home's own, or names a log of the
//! other kind.
//! Invariant: a request that conflicts with a log the home holds is an error
//! ([`SessionError::MixedEncoding`]), never a second kind of log; without a request a home with
//! any zstd log (or none at all) gets zstd, a plain home plain. The walk stops at the first log
//! that decides, so a home of the kind asked for costs one `stat` per session.
//! Proof: `tests/session/writer.rs` (`a_home_keeps_one_encoding`); its cost over big homes is
//! measured by `examples/measure.rs`.

use crate::session::error::{Result, SessionError};
use crate::session::paths;
use crate::session::reader::Encoding;
use std::fs;
use std::path::{Path, PathBuf};

/// The encoding for a new session in `home` (SPEC §1.2: a home has one encoding, as dsh refuses to
/// list a home that holds logs of both kinds). `requested` must match the logs the home already
/// holds, else the answer is an error naming one of them; without a request, the home's own
/// encoding (zstd if it holds any zstd log), and zstd for an empty or new home.
///
/// Walks `sessions/*/*/` until it finds a log of the kind that decides (a conflicting one, or
/// any zstd log without a request): a home of the kind asked for (or a plain home without a
/// request) costs one `stat` per session, about as much as the listing the TUI warms anyway.
pub fn home_encoding(home: &Path, requested: Option<Encoding>) -> Result<Encoding> {
    let sessions = home.join(paths::SESSIONS_DIR);
    let decisive = match requested {
        Some(Encoding::Plain) | None => Encoding::Zstd,
        Some(Encoding::Zstd) => Encoding::Plain,
    };
    let mut found_plain = false;
    let mut decided = None;
    // One `stat` per session: the decisive kind; the other only until one plain log is seen.
    'walk: for project in sorted_dirs(&sessions)? {
        for session in sorted_dirs(&project)? {
            let log = session.join(decisive.file_name());
            if log.is_file() {
                decided = Some(log);
                break 'walk;
            }
            if requested.is_none() && !found_plain {
                found_plain = session.join(paths::PLAIN_LOG).is_file();
            }
        }
    }
    match (requested, decided) {
        (Some(requested), Some(other)) => {
            let (asked, held) = match requested {
                Encoding::Plain => ("uncompressed (session.jsonl)", "zstd"),
                Encoding::Zstd => ("zstd (session.jsonl.zstd)", "uncompressed"),
            };
            Err(SessionError::MixedEncoding {
                asked,
                held,
                home: home.to_path_buf(),
                example: other,
            })
        }
        (Some(requested), None) => Ok(requested),
        (None, Some(_)) => Ok(Encoding::Zstd),
        (None, None) if found_plain => Ok(Encoding::Plain),
        (None, None) => Ok(Encoding::Zstd),
    }
}

/// The subdirectories of `dir`, sorted (none if it does not exist).
fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SessionError::io(dir, e)),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| SessionError::io(dir, e))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    Ok(dirs)
}
