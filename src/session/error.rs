//! Errors of the session layer. Every variant names what was wrong and where.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session not found: {id:?}")]
    NotFound { id: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: line {line}: {reason}")]
    Corrupt {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    #[error("{path}: unsupported session log version {version} (this build reads version 0)")]
    UnsupportedVersion { path: PathBuf, version: u64 },
    #[error("{path}: invalid session header: {reason}")]
    InvalidHeader { path: PathBuf, reason: String },
    #[error("{}session {id:?}: event seq {seq}: invalid surfaceOp: {reason}", log_location(.log))]
    InvalidSurfaceOp {
        id: String,
        seq: u64,
        reason: String,
        /// The log file and 1-based line of the event, when it was read from one.
        log: Option<(PathBuf, u64)>,
    },
    #[error("invalid session id {id:?}: {reason}")]
    InvalidId { id: String, reason: String },
    #[error("session {id:?} already exists at {path}")]
    AlreadyExists { id: String, path: PathBuf },
    /// The writer refused to append (nothing was written): another writer is active, the log
    /// is damaged past its valid prefix, or it changed in a way this writer will not guess at.
    #[error("{path}: not written: {reason}")]
    NotWritable { path: PathBuf, reason: String },
    #[error(
        "{path}: session busy: another process has held its lock for over {} ms; try again",
        waited.as_millis()
    )]
    Busy {
        path: PathBuf,
        waited: std::time::Duration,
    },
    /// A scan that ended inside an unterminated line was asked to continue.
    #[error("{path}: a scan ending in an unterminated line cannot be resumed")]
    UnresumableScan { path: PathBuf },
    /// The log is shorter than the valid prefix read before: someone truncated it.
    #[error("{path}: the log shrank below its valid prefix")]
    Shrank { path: PathBuf },
    /// A batch does not continue the log's seqs (nothing was written).
    #[error("{path}: cannot append seq {seq} where {expected} is next")]
    SeqGap {
        path: PathBuf,
        seq: u64,
        expected: u64,
    },
    /// A new session asked for the other encoding than the home's logs have.
    #[error(
        "cannot start a session with {asked} logs in {home}: that home already holds {held} \
         logs (such as {example}), and a home has one encoding (dsh refuses to list a home \
         that mixes them); leave the compression choice out to use the home's own"
    )]
    MixedEncoding {
        asked: &'static str,
        held: &'static str,
        home: PathBuf,
        example: PathBuf,
    },
    /// A blocking read or write task stopped before answering (it panicked or was cancelled).
    #[error("{what} failed: {source}")]
    TaskFailed {
        what: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
    /// The log was let go (its agent was shut down) or its writer is gone.
    #[error("the session log is closed: {why}")]
    Closed { why: &'static str },
    /// A failure of a host's own [`super::SessionQuery`] implementation. This crate never
    /// returns it; hosts that have no closer variant use it.
    #[error("{0}")]
    Other(String),
}

impl SessionError {
    /// Names the log file and line an error about one event came from (a fold only knows the
    /// session and the seq); other errors are returned as they are.
    pub fn in_log(self, path: &std::path::Path, line: u64) -> Self {
        match self {
            SessionError::InvalidSurfaceOp {
                id,
                seq,
                reason,
                log: None,
            } => SessionError::InvalidSurfaceOp {
                id,
                seq,
                reason,
                log: Some((path.to_path_buf(), line)),
            },
            other => other,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = SessionError> = std::result::Result<T, E>;

fn log_location(log: &Option<(PathBuf, u64)>) -> String {
    match log {
        Some((path, line)) => format!("{}: line {line}: ", path.display()),
        None => String::new(),
    }
}
