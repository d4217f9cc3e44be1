//! Errors of the session layer. Every variant names what was wrong and where.

use std::path::PathBuf;

/// Every failure of the session layer: reading, listing, folding or writing a log. The
/// `Display` text names the file (and line, or seq) and what was wrong; I/O causes are kept as
/// the `source`.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No session has this id in the backend asked (SPEC §1.6).
    #[error("session not found: {id:?}")]
    NotFound {
        /// The id asked for, exactly as given.
        id: String,
    },
    /// An operating-system error on a file or directory of the home.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory the failing call was about.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A defect that cannot be a torn tail because a `turn/end` follows it (SPEC §1.2): a line
    /// that does not parse, a seq gap, a bad zstd frame. Also an external file that is not that
    /// agent's format (then `line` is 1). Nothing of the log is returned.
    #[error("{path}: line {line}: {reason}")]
    Corrupt {
        /// The log file.
        path: PathBuf,
        /// 1-based line of the decompressed JSON Lines text; a dsh log's header is line 1.
        line: u64,
        /// What was wrong with that line.
        reason: String,
    },
    /// The header's `version` is not 0, the only dsh format version this build reads.
    #[error("{path}: unsupported session log version {version} (this build reads version 0)")]
    UnsupportedVersion {
        /// The log file.
        path: PathBuf,
        /// The `version` the header carries.
        version: u64,
    },
    /// The first line is not a `{"type":"session",…}` header this build can read (the log is
    /// empty, the line is not JSON or longer than 4 MiB, `type` or `id` is wrong or missing).
    #[error("{path}: invalid session header: {reason}")]
    InvalidHeader {
        /// The log file.
        path: PathBuf,
        /// What was wrong with the header line.
        reason: String,
    },
    /// A `surfaceOp` the surface fold refuses (SPEC §1.5): a `replace` whose `start`/`end` seqs
    /// are not current surface nodes in order, or whose `sourceEventSeqs` leave out a shadowed
    /// node.
    #[error("{}session {id:?}: event seq {seq}: invalid surfaceOp: {reason}", log_location(.log))]
    InvalidSurfaceOp {
        /// The session being folded.
        id: String,
        /// The `seq` of the event carrying the bad `surfaceOp`.
        seq: u64,
        /// What the fold found wrong.
        reason: String,
        /// The log file and 1-based line of the event, when it was read from one.
        log: Option<(PathBuf, u64)>,
    },
    /// An id a new session cannot have: the empty id (`encodeSegment` has no directory for it).
    #[error("invalid session id {id:?}: {reason}")]
    InvalidId {
        /// The refused id.
        id: String,
        /// Why it cannot be stored.
        reason: String,
    },
    /// Creating a session whose directory already holds a log (of either encoding); nothing
    /// was written.
    #[error("session {id:?} already exists at {path}")]
    AlreadyExists {
        /// The id of the session being created.
        id: String,
        /// The log file that is already there.
        path: PathBuf,
    },
    /// The writer refused to append (nothing was written): another writer is active, the log
    /// is damaged past its valid prefix, or it changed in a way this writer will not guess at.
    #[error("{path}: not written: {reason}")]
    NotWritable {
        /// The log file.
        path: PathBuf,
        /// Which of those it was, in words.
        reason: String,
    },
    /// A reader gave up waiting for the shared lock on a log that a writer keeps locked (an
    /// append batch in flight for longer than the wait).
    #[error(
        "{path}: session busy: another process has held its lock for over {} ms; try again",
        waited.as_millis()
    )]
    Busy {
        /// The log file.
        path: PathBuf,
        /// How long the reader waited before giving up.
        waited: std::time::Duration,
    },
    /// A scan that ended inside an unterminated line was asked to continue.
    #[error("{path}: a scan ending in an unterminated line cannot be resumed")]
    UnresumableScan {
        /// The log file.
        path: PathBuf,
    },
    /// The log is shorter than the valid prefix read before: someone truncated it.
    #[error("{path}: the log shrank below its valid prefix")]
    Shrank {
        /// The log file.
        path: PathBuf,
    },
    /// A batch does not continue the log's seqs (nothing was written).
    #[error("{path}: cannot append seq {seq} where {expected} is next")]
    SeqGap {
        /// The log file.
        path: PathBuf,
        /// The first seq of the refused batch.
        seq: u64,
        /// The seq the log needs next (one past its last record).
        expected: u64,
    },
    /// A new session asked for the other encoding than the home's logs have.
    #[error(
        "cannot start a session with {asked} logs in {home}: that home already holds {held} \
         logs (such as {example}), and a home has one encoding (dsh refuses to list a home \
         that mixes them); leave the compression choice out to use the home's own"
    )]
    MixedEncoding {
        /// The encoding asked for, in words with its file name (`"zstd (session.jsonl.zstd)"`).
        asked: &'static str,
        /// The encoding the home's logs already have (`"zstd"` or `"uncompressed"`).
        held: &'static str,
        /// The dsh home.
        home: PathBuf,
        /// One log of the other encoding found there.
        example: PathBuf,
    },
    /// A blocking read or write task stopped before answering (it panicked or was cancelled).
    #[error("{what} failed: {source}")]
    TaskFailed {
        /// The operation the task ran (`"store task"`, `"external session read"`).
        what: &'static str,
        /// Why the task stopped.
        #[source]
        source: tokio::task::JoinError,
    },
    /// The log was let go (its agent was shut down) or its writer is gone.
    #[error("the session log is closed: {why}")]
    Closed {
        /// Which of the two, in words.
        why: &'static str,
    },
    /// A failure of a host's own [`super::SessionQuery`] implementation. This crate never
    /// returns it; hosts that have no closer variant use it.
    #[error("{0}")]
    Other(
        /// The host's message, shown as it is.
        String,
    ),
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

    /// An [`SessionError::Io`] about `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.into(),
            source,
        }
    }
}

/// The session layer's result: [`SessionError`] unless said otherwise.
pub type Result<T, E = SessionError> = std::result::Result<T, E>;

fn log_location(log: &Option<(PathBuf, u64)>) -> String {
    match log {
        Some((path, line)) => format!("{}: line {line}: ", path.display()),
        None => String::new(),
    }
}
