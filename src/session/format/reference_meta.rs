//! The per-source metadata of a session-reference context (SPEC §3.9), read back from a log.
//!
//! Purpose: the transcript card, the offline model and `exec --json` all describe what a
//! logged context attached; they read it through one typed view instead of indexing the JSON by
//! key names each. The writer is `reference::render::ReferenceMeta` (exact key order); this is
//! its reader, which lives with the message source because a log is read by layers that may not
//! use the reference service (the agent's offline model).
//!
//! Invariant: reading never fails and never panics on any JSON. A log is untrusted and may have
//! been written by someone else, so each field reads on its own: a field that is absent or of
//! another JSON type is `None` and leaves the others intact, and an entry that is not an object
//! reads as all-absent. Proof: the tests below, and `reference::render`'s round trip from the
//! writer's output.

use super::message::MessageSource;
use crate::session::external::ExternalAgent;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// One `references` entry of a logged session-reference context, each field as the log has it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedReference {
    /// `sessionId`.
    #[serde(default, deserialize_with = "lenient")]
    pub session_id: Option<String>,
    /// `label`.
    #[serde(default, deserialize_with = "lenient")]
    pub label: Option<String>,
    /// `capturedThroughSeq` (`None` also for `null`, an empty source).
    #[serde(default, deserialize_with = "lenient")]
    pub captured_through_seq: Option<u64>,
    /// `compacted`.
    #[serde(default, deserialize_with = "lenient")]
    pub compacted: Option<bool>,
    /// `originalMessages`.
    #[serde(default, deserialize_with = "lenient")]
    pub original_messages: Option<u64>,
    /// `retainedMessages`.
    #[serde(default, deserialize_with = "lenient")]
    pub retained_messages: Option<u64>,
    /// `omittedMessages`.
    #[serde(default, deserialize_with = "lenient")]
    pub omitted_messages: Option<u64>,
    /// `omittedBytes`.
    #[serde(default, deserialize_with = "lenient")]
    pub omitted_bytes: Option<u64>,
    /// `truncated`.
    #[serde(default, deserialize_with = "lenient")]
    pub truncated: Option<bool>,
    /// `inputIndex`.
    #[serde(default, deserialize_with = "lenient")]
    pub input_index: Option<u64>,
    /// `source`: the other agent that wrote the referenced session (SPEC §9); a name this build
    /// does not know reads as `None`.
    #[serde(default, deserialize_with = "lenient")]
    pub source: Option<ExternalAgent>,
}

impl RecordedReference {
    /// One entry; anything but an object reads as all-absent.
    pub fn read(entry: &Value) -> RecordedReference {
        match entry {
            Value::Object(_) => RecordedReference::deserialize(entry).unwrap_or_default(),
            _ => RecordedReference::default(),
        }
    }

    /// The entries of a `references` value, in order; `None` when it is not an array.
    pub fn read_all(references: &Value) -> Option<Vec<RecordedReference>> {
        Some(references.as_array()?.iter().map(Self::read).collect())
    }
}

impl MessageSource {
    /// The `references` entries of a session-reference source, read as [`RecordedReference`]s;
    /// `None` for any other source, or when `references` is not an array.
    pub fn recorded_references(&self) -> Option<Vec<RecordedReference>> {
        match self {
            MessageSource::SessionReference { references, .. } => {
                RecordedReference::read_all(references)
            }
            _ => None,
        }
    }
}

/// A field of type `T`, or `None` when the JSON there is not one.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_field_reads_on_its_own() {
        let read = RecordedReference::read(&json!({
            "sessionId": "s1",
            "label": 7,
            "capturedThroughSeq": null,
            "originalMessages": 5,
            "retainedMessages": -1,
            "omittedBytes": 2.5,
            "truncated": true,
            "source": "claude",
            "more": {"x": 1}
        }));
        assert_eq!(read.session_id.as_deref(), Some("s1"));
        assert_eq!(read.label, None);
        assert_eq!(read.captured_through_seq, None);
        assert_eq!(read.original_messages, Some(5));
        assert_eq!(read.retained_messages, None);
        assert_eq!(read.omitted_bytes, None);
        assert_eq!(read.truncated, Some(true));
        assert_eq!(read.source, Some(ExternalAgent::Claude));
        let unknown = RecordedReference::read(&json!({"source": "crush"}));
        assert_eq!(unknown.source, None);
    }

    #[test]
    fn shapes_that_are_not_entries() {
        assert_eq!(RecordedReference::read_all(&json!({"a": 1})), None);
        assert_eq!(RecordedReference::read_all(&Value::Null), None);
        let all = RecordedReference::read_all(&json!([["s1", "l"], "x", null, {}])).unwrap();
        assert_eq!(all, vec![RecordedReference::default(); 4]);
    }
}
