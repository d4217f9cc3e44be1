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
    #[error("session {id:?}: event seq {seq}: invalid surfaceOp: {reason}")]
    InvalidSurfaceOp {
        id: String,
        seq: u64,
        reason: String,
    },
    #[error("invalid session id {id:?}: {reason}")]
    InvalidId { id: String, reason: String },
    #[error("session {id:?} already exists at {path}")]
    AlreadyExists { id: String, path: PathBuf },
    #[error(
        "{path}: session busy: another process has held its lock for over {} ms; try again",
        waited.as_millis()
    )]
    Busy {
        path: PathBuf,
        waited: std::time::Duration,
    },
    #[error("{0}")]
    Other(String),
}

impl SessionError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = SessionError> = std::result::Result<T, E>;
