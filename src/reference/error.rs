//! The one error type of the session-reference layer (SPEC §3.2).
//!
//! Hosts branch on [`SessionReferenceError::code`] (stable strings that also appear in the CLI's
//! JSON), show [`SessionReferenceError::message`] to people, and can walk the cause chain through
//! [`std::error::Error::source`] when they need the storage failure behind a `READ_FAILED`.

use std::fmt;

/// What went wrong, as a stable machine-readable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `SESSION_REFERENCE_INVALID_CONFIG`: a configuration value out of range (SPEC §3.1).
    InvalidConfig,
    /// `SESSION_REFERENCE_INVALID_REFERENCE`: a malformed `dsh-session:` URI or mention, or a
    /// candidate `limit` of 0.
    InvalidReference,
    /// `SESSION_REFERENCE_SELF_REFERENCE`: a message mentions the agent's own session.
    SelfReference,
    /// `SESSION_REFERENCE_TOO_MANY`: more distinct sessions than `max_references`.
    TooMany,
    /// `SESSION_REFERENCE_READ_FAILED`: reading a source failed (the cause is the storage error).
    ReadFailed,
    /// `SESSION_REFERENCE_BUDGET_EXCEEDED`: a source cannot fit in `max_reference_bytes` even
    /// after retention; no context is returned.
    BudgetExceeded,
    /// `SESSION_REFERENCE_CANCELLED`: the caller's cancellation token fired first.
    Cancelled,
}

impl ErrorCode {
    /// The stable `SESSION_REFERENCE_…` string.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidConfig => "SESSION_REFERENCE_INVALID_CONFIG",
            ErrorCode::InvalidReference => "SESSION_REFERENCE_INVALID_REFERENCE",
            ErrorCode::SelfReference => "SESSION_REFERENCE_SELF_REFERENCE",
            ErrorCode::TooMany => "SESSION_REFERENCE_TOO_MANY",
            ErrorCode::ReadFailed => "SESSION_REFERENCE_READ_FAILED",
            ErrorCode::BudgetExceeded => "SESSION_REFERENCE_BUDGET_EXCEEDED",
            ErrorCode::Cancelled => "SESSION_REFERENCE_CANCELLED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A failure of URI decoding, mention parsing, configuration, `list_candidates` or `prepare`.
#[derive(Debug)]
pub struct SessionReferenceError {
    code: ErrorCode,
    message: String,
    cause: Option<Cause>,
}

impl SessionReferenceError {
    /// An error with `code` and a human message, without a cause.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        SessionReferenceError {
            code,
            message: message.into(),
            cause: None,
        }
    }

    /// Attaches the underlying failure.
    pub fn with_cause(mut self, cause: impl Into<Cause>) -> Self {
        self.cause = Some(cause.into());
        self
    }

    pub(crate) fn invalid_config(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidConfig, message)
    }

    pub(crate) fn invalid_reference(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidReference, message)
    }

    pub(crate) fn cancelled(what: &str) -> Self {
        Self::new(ErrorCode::Cancelled, format!("{what} was cancelled"))
    }

    /// The code as an enum, for matching.
    pub fn kind(&self) -> ErrorCode {
        self.code
    }

    /// The stable `SESSION_REFERENCE_…` code.
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    /// The human-readable message (without the code).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The underlying failure, if any.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

impl fmt::Display for SessionReferenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SessionReferenceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn std::error::Error + 'static))
    }
}

/// The reference layer's result: [`SessionReferenceError`] unless said otherwise.
pub type Result<T, E = SessionReferenceError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable() {
        let all = [
            (ErrorCode::InvalidConfig, "INVALID_CONFIG"),
            (ErrorCode::InvalidReference, "INVALID_REFERENCE"),
            (ErrorCode::SelfReference, "SELF_REFERENCE"),
            (ErrorCode::TooMany, "TOO_MANY"),
            (ErrorCode::ReadFailed, "READ_FAILED"),
            (ErrorCode::BudgetExceeded, "BUDGET_EXCEEDED"),
            (ErrorCode::Cancelled, "CANCELLED"),
        ];
        for (code, suffix) in all {
            assert_eq!(code.as_str(), format!("SESSION_REFERENCE_{suffix}"));
        }
    }

    #[test]
    fn cause_is_exposed_as_source() {
        let inner = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let err = SessionReferenceError::new(ErrorCode::ReadFailed, "read failed: gone")
            .with_cause(inner);
        assert_eq!(err.code(), "SESSION_REFERENCE_READ_FAILED");
        assert_eq!(err.to_string(), "read failed: gone");
        let source = std::error::Error::source(&err).expect("cause");
        assert_eq!(source.to_string(), "gone");
        assert!(err.cause().is_some());
    }
}
