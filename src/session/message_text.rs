//! The text of a surface message, read without building the message.
//!
//! A session reference needs two things from each `user/message`, `steering/message` and
//! `assistant/message` on a source's surface: whether its source is a direct prompt or a
//! compaction checkpoint, and its `text` blocks joined. Decoding the whole [`Message`] (every
//! block, tool-call arguments, the source's fields, through `serde_json::Value`) costs far more
//! than that, and a big source has thousands of messages on its surface.
//!
//! [`message_text`] walks the raw JSON instead, looking only at those members. It is a shortcut,
//! never a second definition: it answers only for messages in the identified shape with no
//! `envelope` (display content follows the full rules), and only when every member the full
//! decode insists on has the type it requires; anything else is `None`, and the caller decodes
//! the message the regular way. Duplicate keys resolve as in `serde_json::Map` (the last one
//! wins). The tests compare it with the full decode on every fixture and on generated shapes.
//!
//! [`Message`]: super::Message

use super::format::{
    MessageSource, ASSISTANT_MESSAGE, COMPACT_PLUGIN, STEERING_MESSAGE, USER_MESSAGE,
};
use super::skim::surely_decodable;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// Where a message came from, as far as a session reference cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceClass {
    /// `{kind: "user"}`: typed by a person.
    DirectUser,
    /// `{kind: "plugin", plugin: "compact"}`: a compaction checkpoint.
    CompactCheckpoint,
    /// Anything else (a model, a plugin, a tool, an earlier snapshot, unknown kinds).
    Other,
}

impl SourceClass {
    /// The class of a decoded message's source.
    pub fn of(source: &MessageSource) -> SourceClass {
        if source.is_direct_user() {
            SourceClass::DirectUser
        } else if source.is_compact_checkpoint() {
            SourceClass::CompactCheckpoint
        } else {
            SourceClass::Other
        }
    }
}

/// A message's source class and its `text` blocks joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageText {
    /// Whether the message is a direct prompt, a compaction checkpoint or anything else.
    pub source: SourceClass,
    /// The `text` blocks' strings joined with `\n`, as [`super::format::join_text`] joins them.
    pub text: String,
}

/// The text of a surface message of event type `kind` whose `data` is `data`, or `None` when
/// the full decode must decide (another event type, another shape, an `envelope`, or a member
/// with a type the full decode would reject).
pub fn message_text(kind: &str, data: &RawValue) -> Option<MessageText> {
    // The full decode builds a `serde_json::Value` of all of `data`, which rejects what raw
    // values let through (unpaired surrogates, huge numbers, deep nesting).
    if !surely_decodable(data.get().as_bytes()) {
        return None;
    }
    let data = RawObject::parse(data)?;
    let (message, id_required) = match kind {
        // A flat user message gets a legacy id, so its id may be missing.
        USER_MESSAGE => (data, false),
        STEERING_MESSAGE | ASSISTANT_MESSAGE => (RawObject::parse(data.get("message")?)?, true),
        _ => return None,
    };
    if let Some(role) = message.get("role") {
        if !is_null(role) {
            string(role)?;
        }
    }
    match message.get("id") {
        Some(id) => drop(string(id)?),
        None if id_required => return None,
        None => {}
    }
    if message
        .get("envelope")
        .is_some_and(|envelope| !is_null(envelope))
    {
        return None;
    }
    let source = RawObject::parse(message.get("source")?)?;
    let content: Vec<&RawValue> = serde_json::from_str(message.get("content")?.get()).ok()?;
    let mut text = String::new();
    let mut first = true;
    for block in content {
        if let Some(block_text) = text_block(block)? {
            if !first {
                text.push('\n');
            }
            text.push_str(&block_text);
            first = false;
        }
    }
    Some(MessageText {
        source: source_class(&source),
        text,
    })
}

/// The text of a `{type: "text", text: "…"}` block; `Some(None)` for any other block.
fn text_block(block: &RawValue) -> Option<Option<Cow<'_, str>>> {
    if !block.get().starts_with('{') {
        return Some(None);
    }
    let block = RawObject::parse(block)?;
    let is_text = block
        .get("type")
        .and_then(string)
        .is_some_and(|kind| kind == "text");
    Some(if is_text {
        block.get("text").and_then(string)
    } else {
        None
    })
}

fn source_class(source: &RawObject<'_>) -> SourceClass {
    let member = |key: &str| source.get(key).and_then(string);
    match member("kind").as_deref() {
        Some("user") => SourceClass::DirectUser,
        Some("plugin") if member("plugin").is_some_and(|plugin| plugin == COMPACT_PLUGIN) => {
            SourceClass::CompactCheckpoint
        }
        _ => SourceClass::Other,
    }
}

fn is_null(value: &RawValue) -> bool {
    value.get() == "null"
}

/// A JSON string's value; `None` for any other value.
fn string(value: &RawValue) -> Option<Cow<'_, str>> {
    serde_json::from_str::<Text<'_>>(value.get())
        .ok()
        .map(|text| text.0)
}

/// A JSON object's members as raw values, in order. Only an object deserializes into it.
struct RawObject<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> RawObject<'a> {
    fn parse(value: &'a RawValue) -> Option<RawObject<'a>> {
        serde_json::from_str(value.get()).ok()
    }

    /// The member `key`; the last one when the key is repeated, as `serde_json::Map` keeps.
    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| *value)
    }
}

impl<'de> Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(Text(key)) = map.next_key()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(RawObject(members))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// A string, borrowed from the input when it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Chars;
        impl<'de> Visitor<'de> for Chars {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text.to_string())))
            }
            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Chars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::format::Record;
    use crate::test_rng::TestRng;

    /// The full decode's answer, in the same terms.
    fn full(kind: &str, data: &str) -> Option<MessageText> {
        let record: Record = serde_json::from_str(&format!(
            r#"{{"type":"{kind}","seq":3,"time":0,"data":{data},"surfaceOp":"append"}}"#
        ))
        .ok()?;
        let Record::Event(event) = record else {
            return None;
        };
        let message = event.message("s").ok()??;
        if message.envelope.is_some() {
            return None;
        }
        Some(MessageText {
            source: SourceClass::of(&message.source),
            text: message.text(),
        })
    }

    fn agrees(kind: &str, data: &str) -> Option<MessageText> {
        let raw: Box<RawValue> = serde_json::from_str(data).unwrap();
        let fast = message_text(kind, &raw);
        if let Some(fast) = &fast {
            assert_eq!(Some(fast), full(kind, data).as_ref(), "{kind} {data}");
        }
        fast
    }

    #[test]
    fn identified_messages_are_read_directly() {
        let got = agrees(
            USER_MESSAGE,
            r#"{"role":"user","content":[{"type":"text","text":"a\u0041"},{"type":"image"},{"type":"text","text":"b"}],"source":{"kind":"user","rpcId":1},"id":"u"}"#,
        )
        .unwrap();
        assert_eq!(got.source, SourceClass::DirectUser);
        assert_eq!(got.text, "aA\nb");
        let got = agrees(
            ASSISTANT_MESSAGE,
            r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"reasoning","text":"r"},{"type":"text","text":"t"},{"type":"tool-call","id":"c","name":"n","arguments":{}}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a"}}"#,
        )
        .unwrap();
        assert_eq!((got.source, got.text.as_str()), (SourceClass::Other, "t"));
        let got = agrees(
            USER_MESSAGE,
            r#"{"content":[{"type":"text","text":"sum"}],"source":{"kind":"plugin","plugin":"compact"},"id":"c","envelope":null}"#,
        )
        .unwrap();
        assert_eq!(got.source, SourceClass::CompactCheckpoint);
        // Repeated keys: the last wins, as in the full decode.
        let got = agrees(
            STEERING_MESSAGE,
            r#"{"turn":1,"message":{"content":[{"type":"text","text":"x","text":"y"}],"source":{"kind":"model"},"source":{"kind":"user"},"id":"s"}}"#,
        )
        .unwrap();
        assert_eq!(
            (got.source, got.text.as_str()),
            (SourceClass::DirectUser, "y")
        );
    }

    #[test]
    fn anything_the_full_decode_treats_differently_is_left_to_it() {
        for (kind, data) in [
            // Flat shapes, envelopes, other event types.
            (
                USER_MESSAGE,
                r#"{"content":[],"source":{"kind":"user"},"envelope":{"displayContent":"d"},"id":"u"}"#,
            ),
            (
                ASSISTANT_MESSAGE,
                r#"{"turn":1,"content":[{"type":"text","text":"t"}],"provenance":{}}"#,
            ),
            (
                STEERING_MESSAGE,
                r#"{"turn":1,"content":[],"source":{"kind":"user"}}"#,
            ),
            (
                "tool/result",
                r#"{"message":{"content":[],"source":{"kind":"tool"},"id":"t"}}"#,
            ),
            // Members the full decode rejects.
            (
                USER_MESSAGE,
                r#"{"content":[],"source":{"kind":"user"},"id":null}"#,
            ),
            (
                USER_MESSAGE,
                r#"{"content":[],"source":{"kind":"user"},"id":"u","role":1}"#,
            ),
            (
                USER_MESSAGE,
                r#"{"content":{},"source":{"kind":"user"},"id":"u"}"#,
            ),
            (USER_MESSAGE, r#"{"content":[],"source":["user"],"id":"u"}"#),
            (USER_MESSAGE, r#"{"content":[],"id":"u"}"#),
            (USER_MESSAGE, r#"{"source":{"kind":"user"},"id":"u"}"#),
            (
                ASSISTANT_MESSAGE,
                r#"{"message":{"content":[],"source":{"kind":"user"}}}"#,
            ),
            (ASSISTANT_MESSAGE, r#"{"message":[{"content":[]}]}"#),
            (USER_MESSAGE, r#"[1,2]"#),
            (
                USER_MESSAGE,
                r#"{"content":[{"type":"text","text":"\ud800"}],"source":{"kind":"user"},"id":"u"}"#,
            ),
            // Anywhere in the message: the full decode builds a value of all of it.
            (
                USER_MESSAGE,
                r#"{"content":[],"source":{"kind":"user"},"id":"u","x":"\udc00"}"#,
            ),
            (
                USER_MESSAGE,
                r#"{"content":[{"type":"tool-call","arguments":[1e400]}],"source":{"kind":"user"},"id":"u"}"#,
            ),
        ] {
            assert!(agrees(kind, data).is_none(), "{kind} {data}");
            // The full decode either rejects it or needs the rules the shortcut leaves out.
        }
        // Blocks that are not text blocks are skipped exactly as the full decode skips them.
        let got = agrees(
            USER_MESSAGE,
            r#"{"content":[["text","x"],"text",{"type":"text","text":1},{"type":"TEXT","text":"x"},{"text":"x"}],"source":{"kind":"user"},"id":"u"}"#,
        )
        .unwrap();
        assert_eq!(got.text, "");
    }

    /// Random message shapes built from the members the rules look at, with every kind of value
    /// in every place: whatever the shortcut answers, the full decode answers the same.
    #[test]
    fn generated_shapes_agree_with_the_full_decode() {
        let values = [
            "null",
            "1",
            "\"user\"",
            "\"text\"",
            "\"plugin\"",
            "\"compact\"",
            "\"a\\nb\"",
            "[]",
            "{}",
            r#"[{"type":"text","text":"t"}]"#,
            r#"[{"type":"text","text":"t"},{"type":"reasoning","text":"r"},7,{"type":"text","text":"u"}]"#,
            r#"{"kind":"user"}"#,
            r#"{"kind":"plugin","plugin":"compact"}"#,
            r#"{"kind":"plugin","plugin":1}"#,
            r#"["user"]"#,
            r#""\ud83d\ude00""#,
            r#""\udc00""#,
            "1e400",
            "-1.5E-3",
            &"1".repeat(400),
            &format!("{}{}", "[".repeat(130), "]".repeat(130)),
        ];
        let keys = [
            "role", "content", "source", "id", "envelope", "message", "turn",
        ];
        let mut rng = TestRng::new(11);
        let mut next = |n: usize| rng.below(n);
        let mut decided = 0;
        for _ in 0..20_000 {
            // Mostly well-formed members, any of them replaced, dropped or repeated.
            let valid = [
                ("role", "\"user\""),
                ("content", values[10]),
                ("source", values[11 + next(3)]),
                ("id", "\"m\""),
            ];
            let mut members = Vec::new();
            for (key, value) in valid {
                match next(8) {
                    0 => {}
                    1 => members.push(format!("\"{key}\":{}", values[next(values.len())])),
                    _ => members.push(format!("\"{key}\":{value}")),
                }
            }
            for _ in 0..next(3) {
                let member = format!(
                    "\"{}\":{}",
                    keys[next(keys.len())],
                    values[next(values.len())]
                );
                let at = next(members.len() + 1);
                members.insert(at, member);
            }
            let inner = format!("{{{}}}", members.join(","));
            let kind = [USER_MESSAGE, STEERING_MESSAGE, ASSISTANT_MESSAGE][next(3)];
            let data = match next(3) {
                0 => inner,
                _ => format!(r#"{{"turn":1,"message":{inner}}}"#),
            };
            decided += usize::from(agrees(kind, &data).is_some());
        }
        // The generator reaches the decided cases, not only the fallbacks.
        assert!(decided > 100, "only {decided} shapes were decided");
    }
}
