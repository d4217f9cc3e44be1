//! Service configuration (SPEC §3.1), validated once at construction so that every later call
//! can rely on sane limits.

use super::error::{Result, SessionReferenceError};

/// Limits of a [`super::SessionReferences`] service.
///
/// Fields are signed so that values coming from JSON or a command line (which may be zero or
/// negative) reach [`SessionReferenceConfig::validate`] and fail with `INVALID_CONFIG` instead of
/// being rejected by a type conversion somewhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionReferenceConfig {
    /// Maximum distinct sources in one prepared message, `1..=3`.
    pub max_references: i64,
    /// Default number of candidates returned by `list_candidates`, at least 1.
    pub candidate_limit: i64,
    /// Maximum serialized bytes of one source's data object, at least 1.
    pub max_reference_bytes: i64,
}

/// The hard upper bound of `max_references`.
pub const MAX_REFERENCES_LIMIT: i64 = 3;

impl Default for SessionReferenceConfig {
    fn default() -> Self {
        SessionReferenceConfig {
            max_references: 3,
            candidate_limit: 50,
            max_reference_bytes: 65_536,
        }
    }
}

impl SessionReferenceConfig {
    /// Checks every rule of SPEC §3.1.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_REFERENCES_LIMIT).contains(&self.max_references) {
            return Err(SessionReferenceError::invalid_config(format!(
                "max_references must be an integer from 1 to {MAX_REFERENCES_LIMIT}, got {}",
                self.max_references
            )));
        }
        if self.candidate_limit < 1 {
            return Err(SessionReferenceError::invalid_config(format!(
                "candidate_limit must be an integer of at least 1, got {}",
                self.candidate_limit
            )));
        }
        if self.max_reference_bytes < 1 {
            return Err(SessionReferenceError::invalid_config(format!(
                "max_reference_bytes must be an integer of at least 1, got {}",
                self.max_reference_bytes
            )));
        }
        Ok(())
    }

    pub(crate) fn max_references(&self) -> usize {
        usize::try_from(self.max_references).expect("validated")
    }

    pub(crate) fn candidate_limit(&self) -> usize {
        usize::try_from(self.candidate_limit).unwrap_or(usize::MAX)
    }

    pub(crate) fn max_reference_bytes(&self) -> usize {
        usize::try_from(self.max_reference_bytes).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::error::ErrorCode;

    #[test]
    fn defaults_are_valid() {
        SessionReferenceConfig::default().validate().unwrap();
    }

    #[test]
    fn rejects_out_of_range_values() {
        let base = SessionReferenceConfig::default();
        for config in [
            SessionReferenceConfig {
                max_references: 0,
                ..base
            },
            SessionReferenceConfig {
                max_references: 4,
                ..base
            },
            SessionReferenceConfig {
                candidate_limit: 0,
                ..base
            },
            SessionReferenceConfig {
                max_reference_bytes: 0,
                ..base
            },
            SessionReferenceConfig {
                max_reference_bytes: -5,
                ..base
            },
        ] {
            let err = config.validate().unwrap_err();
            assert_eq!(err.kind(), ErrorCode::InvalidConfig, "{config:?}");
        }
        SessionReferenceConfig {
            max_references: 1,
            candidate_limit: 1,
            max_reference_bytes: 1,
        }
        .validate()
        .unwrap();
    }
}
