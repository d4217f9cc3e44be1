//! One Claude Code record as the readers use it: the envelope fields, and what the `message`
//! gives the projection (its id, its model, its text and whether it held only tool results).
//!
//! Purpose: a heavy transcript is mostly bytes no reader keeps: a tool result stored twice
//! (in `message.content` and in `toolUseResult`), base64 images, thinking and its signature.
//! `parse` walks a line key by key (`Walk`) and passes over those values with the skimmer's
//! block loop, decoding only the few strings it keeps; `Message::of` does the same inside
//! `message`, and `parse_with_message` does both in one pass over the line where the reader says it
//! will want the message (a record's message is most of a heavy line's bytes). Whatever the walk
//! does not vouch for (an escaped key, a repeated field, a float inside a content block, a
//! surrogate escape, a field of an unexpected type…) goes to serde (`parse_serde`,
//! `Message::of_serde`), which stays the one definition of a record.
//!
//! Invariant: for every line, `parse` answers what `parse_serde` answers, and
//! `Message::of` what `Message::of_serde` answers, field for field: the walk accepts a line
//! only where serde accepts it with the same values (a line serde rejects is skipped by both).
//! `parse_with_message` answers `parse`'s record, and a message only where it is the one
//! `Message::of` gives for that record's `message` bytes.
//! Proof: `tests/session/reliability_agent_skim.rs` (every Claude Code fixture line and
//! generated hostile lines, both paths compared, and whole conversations projected both ways),
//! the fuzz target `fuzz/fuzz_targets/agent_skim.rs`, and the tests below.

use crate::session::skim::Walk;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// The fields of a record the readers use; `message` and `compactMetadata` as raw JSON.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Record<'a> {
    pub kind: Option<Cow<'a, str>>,
    pub uuid: Option<Cow<'a, str>>,
    pub parent_uuid: Option<Cow<'a, str>>,
    pub session_id: Option<Cow<'a, str>>,
    pub cwd: Option<Cow<'a, str>>,
    pub timestamp: Option<Cow<'a, str>>,
    pub subtype: Option<Cow<'a, str>>,
    pub custom_title: Option<Cow<'a, str>>,
    pub ai_title: Option<Cow<'a, str>>,
    pub is_sidechain: Option<bool>,
    pub is_meta: Option<bool>,
    pub is_compact_summary: Option<bool>,
    pub message: Option<&'a [u8]>,
    pub compact_metadata: Option<&'a [u8]>,
}

/// The record as serde reads it (the definition [`parse`] agrees with).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    uuid: Option<String>,
    parent_uuid: Option<String>,
    session_id: Option<String>,
    cwd: Option<String>,
    timestamp: Option<String>,
    is_sidechain: Option<bool>,
    is_meta: Option<bool>,
    is_compact_summary: Option<bool>,
    subtype: Option<String>,
    custom_title: Option<String>,
    ai_title: Option<String>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    compact_metadata: Option<&'a RawValue>,
}

/// A record line, or `None` when it is not a JSON object serde reads as a record.
pub(super) fn parse(bytes: &[u8]) -> Option<Record<'_>> {
    walk_record(bytes, |_| false)
        .map(|(record, _)| record)
        .or_else(|| parse_serde(bytes))
}

/// [`parse`], and the record's [`Message`] when `wanted` says, of the record's fields read
/// before its `message`, that the reader will ask for it: then the walk reads the message's
/// body where it lies, in the one pass over the line, instead of the reader walking the
/// message's bytes a second time ([`Message::of`]). The message is exactly what
/// [`Message::of`] gives for the record's `message`: it comes only from a walk of the same
/// bytes that `Message::of` would walk first; wherever that walk does not vouch for the body,
/// or `wanted` says no (given only the fields before the `message`: Claude Code writes an
/// assistant record's `type` after it), the answer has no message and the reader asks
/// [`Message::of`] as before.
pub(super) fn parse_with_message<'a>(
    bytes: &'a [u8],
    wanted: impl Fn(&Record<'a>) -> bool,
) -> Option<(Record<'a>, Option<Message<'a>>)> {
    walk_record(bytes, wanted).or_else(|| parse_serde(bytes).map(|record| (record, None)))
}

/// [`parse`] by serde alone.
pub(super) fn parse_serde(bytes: &[u8]) -> Option<Record<'_>> {
    let line: Line<'_> = serde_json::from_slice(bytes).ok()?;
    let owned = |s: Option<String>| s.map(Cow::Owned);
    Some(Record {
        kind: owned(line.kind),
        uuid: owned(line.uuid),
        parent_uuid: owned(line.parent_uuid),
        session_id: owned(line.session_id),
        cwd: owned(line.cwd),
        timestamp: owned(line.timestamp),
        subtype: owned(line.subtype),
        custom_title: owned(line.custom_title),
        ai_title: owned(line.ai_title),
        is_sidechain: line.is_sidechain,
        is_meta: line.is_meta,
        is_compact_summary: line.is_compact_summary,
        message: line.message.map(|m| m.get().as_bytes()),
        compact_metadata: line.compact_metadata.map(|m| m.get().as_bytes()),
    })
}

/// [`parse_with_message`] of the line that starts at `rest[0]`, found in the same walk:
/// `Some` only where the walk vouches for a record whose object is followed (after blanks) by
/// a newline, with the line's length (the index of that newline). The walk never passes a
/// newline (it is neither a blank nor allowed in a string), so what it gives is what it gives
/// for `rest[..len]` alone. `None` says nothing of the line: the reader finds its end and asks
/// [`parse_with_message`].
pub(super) fn parse_line_in<'a>(
    rest: &'a [u8],
    wanted: impl Fn(&Record<'a>) -> bool,
) -> Option<(Record<'a>, Option<Message<'a>>, usize)> {
    let mut walk = Walk::new(rest);
    let (record, message) = walk_object(&mut walk, wanted)?;
    let len = walk.line_end()?;
    Some((record, message, len))
}

/// The walk: `None` for anything it does not vouch for. With the record's message body, walked
/// in place, when `wanted` asks for it at the `message` key ([`parse_with_message`]).
fn walk_record<'a>(
    bytes: &'a [u8],
    wanted: impl Fn(&Record<'a>) -> bool,
) -> Option<(Record<'a>, Option<Message<'a>>)> {
    let mut walk = Walk::new(bytes);
    let parsed = walk_object(&mut walk, wanted)?;
    walk.at_end().then_some(parsed)
}

/// The record's object from where `walk` stands, up to its closing brace.
fn walk_object<'a>(
    walk: &mut Walk<'a>,
    wanted: impl Fn(&Record<'a>) -> bool,
) -> Option<(Record<'a>, Option<Message<'a>>)> {
    let mut record = Record::default();
    let mut message = None;
    // The known fields seen (serde rejects a repeated one).
    let mut seen = 0u16;
    if walk.object()? {
        loop {
            let key = walk.key()?;
            let bit = match key {
                b"type" => 1,
                b"uuid" => 1 << 1,
                b"parentUuid" => 1 << 2,
                b"sessionId" => 1 << 3,
                b"cwd" => 1 << 4,
                b"timestamp" => 1 << 5,
                b"subtype" => 1 << 6,
                b"customTitle" => 1 << 7,
                b"aiTitle" => 1 << 8,
                b"isSidechain" => 1 << 9,
                b"isMeta" => 1 << 10,
                b"isCompactSummary" => 1 << 11,
                b"message" => 1 << 12,
                b"compactMetadata" => 1 << 13,
                _ => 0,
            };
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            match key {
                b"type" => record.kind = walk.string_or_null()?,
                b"uuid" => record.uuid = walk.string_or_null()?,
                b"parentUuid" => record.parent_uuid = walk.string_or_null()?,
                b"sessionId" => record.session_id = walk.string_or_null()?,
                b"cwd" => record.cwd = walk.string_or_null()?,
                b"timestamp" => record.timestamp = walk.string_or_null()?,
                b"subtype" => record.subtype = walk.string_or_null()?,
                b"customTitle" => record.custom_title = walk.string_or_null()?,
                b"aiTitle" => record.ai_title = walk.string_or_null()?,
                b"isSidechain" => record.is_sidechain = walk.bool_or_null()?,
                b"isMeta" => record.is_meta = walk.bool_or_null()?,
                b"isCompactSummary" => record.is_compact_summary = walk.bool_or_null()?,
                b"message" if wanted(&record) => {
                    (record.message, message) = message_in_place(walk)?;
                }
                b"message" => record.message = raw_or_null(walk)?,
                b"compactMetadata" => record.compact_metadata = raw_or_null(walk)?,
                _ => {
                    walk.skip()?;
                }
            }
            if !walk.member_end()? {
                break;
            }
        }
    }
    Some((record, message))
}

/// A record's `message` value, raw as [`raw_or_null`] reads it, and its [`Message`] read in
/// the same pass when the body walk vouches for it. Where it does not, the walk goes back to
/// the value's start and reads it raw: the message is then left to [`Message::of`].
#[allow(clippy::type_complexity)]
fn message_in_place<'a>(walk: &mut Walk<'a>) -> Option<(Option<&'a [u8]>, Option<Message<'a>>)> {
    if walk.null() {
        return Some((None, None));
    }
    walk.peek()?;
    let start = walk.position();
    if let Some(message) = walk_body_at(walk) {
        // The body walk read exactly one value, as `skip` would have, and checked it at
        // least as strictly: these are the bytes `Message::of` would be given.
        return Some((Some(walk.since(start)), Some(message)));
    }
    walk.rewind(start);
    Some((Some(walk.skip()?), None))
}

/// A value kept raw (`Option<&RawValue>`): `null` is `None`.
fn raw_or_null<'a>(walk: &mut Walk<'a>) -> Option<Option<&'a [u8]>> {
    if walk.null() {
        return Some(None);
    }
    walk.skip().map(Some)
}

/// What a record's `message` gives the projection. A `message` serde cannot read as a message
/// body gives nothing (no id, no model, no text), as one without those fields.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Message<'a> {
    pub id: Option<Cow<'a, str>>,
    pub model: Option<Cow<'a, str>>,
    /// The `text` of the content (text blocks joined by newlines).
    pub text: String,
    /// The content held only `tool_result` blocks (at least one).
    pub only_tools: bool,
}

#[derive(Deserialize)]
struct MessageBody<'a> {
    id: Option<String>,
    model: Option<String>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
}

impl<'a> Message<'a> {
    /// The message of a record (`None`: the record had none).
    pub fn of(raw: Option<&'a [u8]>) -> Message<'a> {
        let Some(raw) = raw else {
            return Message::default();
        };
        walk_body(raw).unwrap_or_else(|| Message::of_serde(Some(raw)))
    }

    /// [`Message::of`] by serde alone.
    pub fn of_serde(raw: Option<&'a [u8]>) -> Message<'a> {
        let body = raw
            .and_then(|raw| std::str::from_utf8(raw).ok())
            .and_then(|raw| serde_json::from_str::<MessageBody>(raw).ok());
        let Some(body) = body else {
            return Message::default();
        };
        let (text, only_tools) = body
            .content
            .and_then(|c| serde_json::from_str::<Content>(c.get()).ok())
            .map_or((String::new(), false), content_text);
        Message {
            id: body.id.map(Cow::Owned),
            model: body.model.map(Cow::Owned),
            text,
            only_tools,
        }
    }
}

fn content_text(content: Content) -> (String, bool) {
    match content {
        Content::Text(text) => (text, false),
        Content::Blocks(blocks) => {
            let only_tools = !blocks.is_empty()
                && blocks
                    .iter()
                    .all(|b| b.kind.as_deref() == Some("tool_result"));
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.kind.as_deref() == Some("text"))
                .filter_map(|b| b.text.as_deref())
                .collect();
            (texts.join("\n"), only_tools)
        }
    }
}

/// The walk of a message body: `None` for anything it does not vouch for.
fn walk_body(raw: &[u8]) -> Option<Message<'_>> {
    let mut walk = Walk::new(raw);
    let message = walk_body_at(&mut walk)?;
    walk.at_end().then_some(message)
}

/// [`walk_body`] of the object where `walk` stands, read whole (to just past its `}`).
fn walk_body_at<'a>(walk: &mut Walk<'a>) -> Option<Message<'a>> {
    let mut message = Message::default();
    let (mut id, mut model, mut content) = (false, false, false);
    if walk.object()? {
        loop {
            match walk.key()? {
                b"id" if !id => {
                    id = true;
                    message.id = walk.string_or_null()?;
                }
                b"model" if !model => {
                    model = true;
                    message.model = walk.string_or_null()?;
                }
                b"content" if !content => {
                    content = true;
                    if !walk.null() {
                        (message.text, message.only_tools) = walk_content(walk)?;
                    }
                }
                b"id" | b"model" | b"content" => return None,
                _ => {
                    walk.skip()?;
                }
            }
            if !walk.member_end()? {
                break;
            }
        }
    }
    Some(message)
}

/// A message's content (a string, or an array of blocks read for their `type` and `text`),
/// checked as serde decodes it into [`Content`]: `None` for anything else.
fn walk_content(walk: &mut Walk<'_>) -> Option<(String, bool)> {
    if walk.peek()? == b'"' {
        return Some((walk.string()?.into_owned(), false));
    }
    let mut texts: Vec<Cow<'_, str>> = Vec::new();
    let (mut any, mut only_tools) = (false, true);
    if walk.array()? {
        loop {
            let (kind, text) = walk_block(walk)?;
            any = true;
            only_tools &= kind.as_deref() == Some("tool_result");
            if kind.as_deref() == Some("text") {
                texts.extend(text);
            }
            if !walk.element_end()? {
                break;
            }
        }
    }
    Some((texts.join("\n"), any && only_tools))
}

/// A content block's `type` and `text`, other fields checked as decoded values.
#[allow(clippy::type_complexity)]
fn walk_block<'a>(walk: &mut Walk<'a>) -> Option<(Option<Cow<'a, str>>, Option<Cow<'a, str>>)> {
    let (mut kind, mut text) = (None, None);
    let (mut seen_kind, mut seen_text) = (false, false);
    if walk.object()? {
        loop {
            match walk.key()? {
                b"type" if !seen_kind => {
                    seen_kind = true;
                    kind = walk.string_or_null()?;
                }
                b"text" if !seen_text => {
                    seen_text = true;
                    text = walk.string_or_null()?;
                }
                b"type" | b"text" => return None,
                _ => walk.skip_decoded()?,
            }
            if !walk.member_end()? {
                break;
            }
        }
    }
    Some((kind, text))
}

/// Hooks for the differential tests and the fuzz target: the walk and serde, side by side.
#[doc(hidden)]
pub mod differential {
    /// The record and its message as the walk reads them, and as serde does (debug text each;
    /// `None` where the line is not a record). The walk's message is the one read in place in
    /// the record's pass (`parse_with_message`) where it read one, else
    /// `Message::of`'s; and where `parse` and the in-place walk disagree on
    /// the record, the walked side says so (the two sides then differ).
    pub fn both(line: &[u8]) -> (Option<String>, Option<String>) {
        let walked = super::parse_with_message(line, |_| true).map(|(r, in_place)| {
            let of = super::Message::of(r.message);
            let agree = in_place.as_ref().is_none_or(|m| *m == of);
            let plain = super::parse(line).is_some_and(|p| p == r);
            let message = in_place.unwrap_or(of);
            let mut shown = format!("{r:?} {message:?}");
            if !agree || !plain {
                shown.push_str(" (the in-place walk disagrees with parse or Message::of)");
            }
            shown
        });
        let decoded = super::parse_serde(line).map(|r| {
            let message = super::Message::of_serde(r.message);
            format!("{r:?} {message:?}")
        });
        (walked, decoded)
    }

    /// The conversation the complete lines of `file` project (debug text), read as
    /// `prepare` reads it, or by serde alone.
    pub fn conversation(file: &[u8], serde_only: bool) -> String {
        format!("{:?}", scan(file, serde_only))
    }

    /// [`conversation`] as a mapped file is read: each line offered with the rest of the file
    /// after it, so that the walk finds where it ends (`LineSink::line_in`); a line it leaves
    /// is found with `memchr` and fed whole. The last line without its newline is not fed.
    pub fn conversation_in_rest(file: &[u8]) -> String {
        let mut scan = super::super::ConversationScan::default();
        crate::session::external::agent::feed_as_mapped(file, &mut scan);
        format!("{:?}", scan.finish())
    }

    /// How many items [`conversation`] has, without its debug text (for
    /// `examples/scan_in_memory.rs`, which times the scan alone).
    pub fn conversation_items(file: &[u8], serde_only: bool) -> usize {
        scan(file, serde_only).items.len()
    }

    fn scan(file: &[u8], serde_only: bool) -> crate::session::external::Conversation {
        use crate::session::external::lines::LineSink;
        let mut scan = if serde_only {
            super::super::ConversationScan::serde_only()
        } else {
            super::super::ConversationScan::default()
        };
        let complete = match memchr::memrchr(b'\n', file) {
            Some(end) => &file[..end],
            None => return scan.finish(),
        };
        // Cut at each newline with `memchr`, as the reader does (a byte-by-byte split would
        // cost more than the scan it feeds).
        let mut start = 0;
        let ends = memchr::memchr_iter(b'\n', complete).chain([complete.len()]);
        for (index, end) in ends.enumerate() {
            if !scan.line(index as u64, &complete[start..end]) {
                break;
            }
            start = end + 1;
        }
        scan.finish()
    }

    /// The line at the start of `rest` as the reader of a mapped file feeds it
    /// (`parse_line_in`): its record and message (debug text, as [`both`]'s walked
    /// side) and its length, or `None` where the walk leaves the line to the reader.
    pub fn line_in(rest: &[u8]) -> Option<(String, usize)> {
        super::parse_line_in(rest, |_| true).map(|(r, in_place, len)| {
            let message = in_place.unwrap_or_else(|| super::Message::of(r.message));
            (format!("{r:?} {message:?}"), len)
        })
    }

    /// `Some` when the record walk reads the line (no serde fallback for the record), holding
    /// whether it read the message in place too (`false`: the message is left to
    /// `Message::of`, the walk having gone back to read it raw).
    pub fn message_in_place(line: &[u8]) -> Option<bool> {
        super::walk_record(line, |_| true).map(|(_, in_place)| in_place.is_some())
    }

    /// Whether the walk alone (no serde fallback) reads the line, its message read in place in
    /// the same pass: for tests that the fast path is taken at all.
    pub fn walked(line: &[u8]) -> bool {
        super::walk_record(line, |_| true)
            .is_some_and(|(r, in_place)| r.message.is_none() || in_place.is_some())
    }
}
