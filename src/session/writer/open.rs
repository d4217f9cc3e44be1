//! Creating a session log, and opening an existing one for appending.
//!
//! Purpose: the two ways a [`SessionWriter`] comes to be. `create` writes the header to a
//! temporary file and hard-links it into place (a link never replaces a file, so two creators
//! cannot both win); `open` takes the session's writer lock, then scans the log under a shared
//! lock and only observes what lies past its valid prefix.
//! Invariant: a session either exists with a whole header or not at all, and opening a log
//! changes no byte of it (SPEC §1.2): a torn tail, or a batch left pending by a crashed writer,
//! is recorded in the writer's `tail` for the first append to judge.
//! Proof: `tests/session/writer.rs` (`opening_a_log_changes_no_byte`, and a second writer of
//! ours refused while the first holds the session) and `tests/session/reliability_crash.rs`.

use super::batch::encode_batch;
use super::lock::lock_dir;
use super::tail::observe;
use super::SessionWriter;
use crate::session::error::{Result, SessionError};
use crate::session::format::SessionHeader;
use crate::session::paths;
use crate::session::reader::{Encoding, LogScan, RecordSink};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

impl SessionWriter {
    /// Creates the session directory and a log holding only the header.
    pub fn create(home: &Path, header: SessionHeader, encoding: Encoding) -> Result<Self> {
        let dir = paths::session_dir(home, &header.id, header.cwd.as_deref()).ok_or_else(|| {
            SessionError::InvalidId {
                id: header.id.clone(),
                reason: "an empty id cannot be stored".into(),
            }
        })?;
        fs::create_dir_all(&dir).map_err(|e| SessionError::io(&dir, e))?;
        let exists = |dir: &Path| {
            for existing in [paths::PLAIN_LOG, paths::ZSTD_LOG] {
                let path = dir.join(existing);
                if path.exists() {
                    return Err(SessionError::AlreadyExists {
                        id: header.id.clone(),
                        path,
                    });
                }
            }
            Ok(())
        };
        exists(&dir)?;
        let dir_lock = lock_dir(&dir)?;
        exists(&dir)?;
        let path = dir.join(encoding.file_name());
        let mut line = serde_json::to_vec(&header).expect("headers serialize");
        line.push(b'\n');
        let bytes = encode_batch(encoding, &line, &path)?;
        let temp = dir.join(format!(
            ".{}.{}.tmp",
            encoding.file_name(),
            std::process::id()
        ));
        {
            let mut file = File::create(&temp).map_err(|e| SessionError::io(&temp, e))?;
            file.write_all(&bytes)
                .and_then(|_| file.sync_data())
                .map_err(|e| SessionError::io(&temp, e))?;
        }
        // A hard link never replaces an existing file: two creators cannot both win.
        let linked = fs::hard_link(&temp, &path);
        let _ = fs::remove_file(&temp);
        linked.map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => SessionError::AlreadyExists {
                id: header.id.clone(),
                path: path.clone(),
            },
            _ => SessionError::io(&path, e),
        })?;
        let file = open_append(&path)?;
        Ok(SessionWriter {
            path,
            encoding,
            file,
            _dir_lock: dir_lock,
            header,
            next_seq: 0,
            has_events: false,
            len: bytes.len() as u64,
            needs_newline: false,
            tail: None,
            adopted: Vec::new(),
            fault: None,
        })
    }

    /// Opens an existing log for appending. Changes no byte: a torn tail (or a batch left
    /// pending by a crashed writer) is only observed here; the first append decides about it.
    /// Refused while another writer of ours holds the session.
    pub fn open(path: &Path) -> Result<(Self, LogScan)> {
        Self::open_with(path, &mut |_| Ok(()))
    }

    /// [`SessionWriter::open`], handing the valid records to `sink` on the way (one read).
    pub fn open_with(path: &Path, sink: &mut dyn RecordSink) -> Result<(Self, LogScan)> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let dir_lock = lock_dir(dir)?;
        let file = open_append(path)?;
        file.lock_shared().map_err(|e| SessionError::io(path, e))?;
        let observed = observe(path, &file, sink);
        let _ = file.unlock();
        let (scan, tail) = observed?;
        if let Some(tail) = &tail {
            tracing::warn!(
                path = %path.display(),
                at = tail.at,
                len = tail.len,
                cuttable = tail.cuttable,
                reason = %tail.reason,
                "the log holds bytes past its valid prefix; left untouched until an append"
            );
        }
        Ok((
            SessionWriter {
                path: path.to_path_buf(),
                encoding: scan.encoding,
                file,
                _dir_lock: dir_lock,
                header: scan.header.clone(),
                next_seq: scan.next_seq,
                has_events: scan.has_events,
                len: scan.valid_len,
                needs_newline: scan.missing_final_newline,
                tail,
                adopted: Vec::new(),
                fault: None,
            },
            scan,
        ))
    }
}

fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .append(true)
        .read(true)
        .open(path)
        .map_err(|e| SessionError::io(path, e))
}
