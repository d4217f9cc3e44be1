//! The two parts of an event that every record repeats, held so that repeating them costs no
//! allocation: its type ([`EventKind`]) and a payload that may be `null` ([`RawData`]).
//!
//! Purpose: a long log holds tens of thousands of `tool/result` and `tool/call` records. A
//! session reference reads them only for their seqs and surface ops, and keeps each as a stub
//! with `data: null` (`crate::session::surface`); the conversation cache clones its fold for
//! every answer. With a `String` type and a boxed `null`, every stub cost two allocations when
//! made and two more per clone. Now a known type is a `&'static str` and a `null` payload is
//! no box at all, so a stub, and its clone, allocate nothing.
//!
//! Invariant: both read as the text they stand for: an [`EventKind`] derefs to the type string
//! as written, a [`RawData`] to the payload's raw JSON (`null` for [`RawData::null`]); equality,
//! hashing, display and serialization go through that text, so an interned type and an owned one
//! of the same text are equal, and a record serializes byte for byte as before. Proof: the unit
//! tests below, and every round-trip test of the format (`tests/session/store.rs`,
//! `tests/reference/conformance.rs`).

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::borrow::{Borrow, Cow};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Every event type this crate names: read from a log, one of these costs no allocation.
const KNOWN: [&str; 15] = [
    super::USER_MESSAGE,
    super::STEERING_MESSAGE,
    super::ASSISTANT_MESSAGE,
    super::TOOL_RESULT,
    super::TURN_START,
    super::TURN_END,
    super::STEP_START,
    super::STEP_END,
    super::ASSISTANT_CHUNK,
    super::TOOL_CALL,
    super::SESSION_TITLE,
    super::COMPACT_START,
    super::COMPACT_SUMMARY,
    super::COMPACT_END,
    super::REQUEST_HEADER,
];

/// An event's `type`: a known type is held as a static string, any other one owned.
#[derive(Clone)]
pub struct EventKind(Cow<'static, str>);

impl EventKind {
    /// The type `text`: interned when it is one of the known types, else copied.
    pub fn new(text: &str) -> EventKind {
        match KNOWN.iter().find(|known| **known == text) {
            Some(known) => EventKind(Cow::Borrowed(known)),
            None => EventKind(Cow::Owned(text.to_string())),
        }
    }

    /// The type as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for EventKind {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for EventKind {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for EventKind {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for EventKind {
    fn from(text: &str) -> EventKind {
        EventKind::new(text)
    }
}

impl From<String> for EventKind {
    fn from(text: String) -> EventKind {
        match KNOWN.iter().find(|known| **known == text) {
            Some(known) => EventKind(Cow::Borrowed(known)),
            None => EventKind(Cow::Owned(text)),
        }
    }
}

impl PartialEq for EventKind {
    fn eq(&self, other: &EventKind) -> bool {
        self.0 == other.0
    }
}

impl Eq for EventKind {}

impl PartialEq<str> for EventKind {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for EventKind {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for EventKind {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<EventKind> for &str {
    fn eq(&self, other: &EventKind) -> bool {
        **self == *other.0
    }
}

impl Hash for EventKind {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl fmt::Debug for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for EventKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for EventKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<EventKind, D::Error> {
        struct KindVisitor;

        impl Visitor<'_> for KindVisitor {
            type Value = EventKind;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an event type string")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<EventKind, E> {
                Ok(EventKind::new(text))
            }

            fn visit_string<E: de::Error>(self, text: String) -> Result<EventKind, E> {
                Ok(EventKind::from(text))
            }
        }

        deserializer.deserialize_str(KindVisitor)
    }
}

/// An event's `data`: raw JSON text exactly as read (or as encoded when written), or `null`
/// without a box ([`RawData::null`], what a stub carries).
#[derive(Clone, Default)]
pub struct RawData(Option<Box<RawValue>>);

impl RawData {
    /// `null`, allocating nothing.
    pub const fn null() -> RawData {
        RawData(None)
    }

    /// The raw JSON, boxed (a `null` made by [`RawData::null`] is boxed now).
    pub fn into_raw(self) -> Box<RawValue> {
        self.0.unwrap_or_else(|| RawValue::NULL.to_owned())
    }
}

impl Deref for RawData {
    type Target = RawValue;

    fn deref(&self) -> &RawValue {
        self.0.as_deref().unwrap_or(RawValue::NULL)
    }
}

impl AsRef<RawValue> for RawData {
    fn as_ref(&self) -> &RawValue {
        self
    }
}

impl From<Box<RawValue>> for RawData {
    fn from(raw: Box<RawValue>) -> RawData {
        RawData(Some(raw))
    }
}

impl PartialEq for RawData {
    fn eq(&self, other: &RawData) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawData {}

impl fmt::Debug for RawData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl fmt::Display for RawData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for RawData {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RawData, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(RawData::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_type_is_interned_and_equal_to_its_text() {
        let known = EventKind::new("tool/result");
        assert!(matches!(known.0, Cow::Borrowed(_)));
        let other = EventKind::new("x/custom");
        assert!(matches!(other.0, Cow::Owned(_)));
        assert_eq!(known, EventKind::from("tool/result".to_string()));
        assert_eq!(known, "tool/result");
        assert_eq!(other.as_str(), "x/custom");
        assert_eq!(format!("{known} {other:?}"), "tool/result \"x/custom\"");
        let read: EventKind = serde_json::from_str("\"session/title\"").unwrap();
        assert!(matches!(read.0, Cow::Borrowed(_)));
        let escaped: EventKind = serde_json::from_str("\"session\\/title\"").unwrap();
        assert_eq!(escaped, read, "an escaped spelling reads as the same type");
        assert_eq!(serde_json::to_string(&read).unwrap(), "\"session/title\"");
    }

    #[test]
    fn a_null_payload_reads_and_writes_as_null() {
        let null = RawData::null();
        assert_eq!(null.get(), "null");
        assert_eq!(serde_json::to_string(&null).unwrap(), "null");
        assert_eq!(
            null,
            RawData::from(RawValue::from_string("null".into()).unwrap())
        );
        let raw: RawData = serde_json::from_str("{\"a\": [1, 2]}").unwrap();
        assert_eq!(raw.get(), "{\"a\": [1, 2]}", "kept exactly as read");
        assert_eq!(serde_json::to_string(&raw).unwrap(), "{\"a\": [1, 2]}");
        assert_eq!(null.into_raw().get(), "null");
    }
}
