//! One Codex rollout record as the readers use it: the envelope (`timestamp`, `type`, the raw
//! `payload`), and a cheap look at the payload's `type` that says when a reader has nothing to
//! take from it.
//!
//! Purpose: a heavy rollout is mostly payloads no reader keeps: tool output stored twice
//! (`function_call_output` and `exec_command_end`), encrypted reasoning, the ~20 KB
//! `base_instructions`. `envelope` walks a line key by key (`Walk`) and checks the payload
//! with the skimmer's block loop without decoding it; `payload_is_one_of` reads only the
//! payload's `type`, so a payload of a type the reader drops is never decoded. Whatever the
//! walk does not vouch for goes to serde (`envelope_serde`), which stays the one definition
//! of a record.
//!
//! A mapped file's reader offers the walk the rest of the file from a line's start
//! (`envelope_in`): the walk then also says where the line ends, and the reader makes no pass of
//! its own over the line to find its newline (the first read of a 10 MB rollout: 9.1 → 8.1 ms of
//! CPU).
//!
//! Invariant: `envelope` answers what `envelope_serde` answers for every line; `envelope_in`
//! answers, for the bytes up to the first newline, what `envelope` answers for that line, and
//! that newline's index, or leaves the line to the reader; when
//! `payload_is_one_of` answers `false`, serde either rejects the payload or reads a `type`
//! outside the list (so a reader that drops such payloads drops exactly what it dropped when
//! it decoded every one). Proof: `tests/session/reliability_agent_skim.rs` (every Codex
//! fixture line and mutations of it compared with serde, each also as the rest of a file with
//! three different tails; every fixture rollout and its mutations projected both ways, and as
//! a mapped file is read), the fuzz target `agent_skim` and the tests in `codex/`.

use crate::session::skim::Walk;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// A rollout record's envelope, its payload as raw JSON.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Line<'a> {
    pub timestamp: Option<Cow<'a, str>>,
    pub kind: Cow<'a, str>,
    pub payload: &'a [u8],
}

impl<'a> Line<'a> {
    /// The payload's text (valid UTF-8 whenever the envelope was read).
    pub fn payload_text(&self) -> &'a str {
        std::str::from_utf8(self.payload).unwrap_or_default()
    }
}

#[derive(Deserialize)]
struct SerdeLine<'a> {
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(borrow)]
    payload: &'a RawValue,
}

/// The envelope of a line, or `None` when serde does not read it as one.
pub(super) fn envelope(bytes: &[u8]) -> Option<Line<'_>> {
    walk_envelope(bytes).or_else(|| envelope_serde(bytes))
}

/// [`envelope`] by serde alone.
pub(super) fn envelope_serde(bytes: &[u8]) -> Option<Line<'_>> {
    let line: SerdeLine<'_> = serde_json::from_slice(bytes).ok()?;
    Some(Line {
        timestamp: line.timestamp.map(Cow::Owned),
        kind: Cow::Owned(line.kind),
        payload: line.payload.get().as_bytes(),
    })
}

fn walk_envelope(bytes: &[u8]) -> Option<Line<'_>> {
    let mut walk = Walk::new(bytes);
    let line = walk_members(&mut walk)?;
    walk.at_end().then_some(line)
}

/// The envelope of the line at the start of `rest` (the rest of a file's bytes from a line's
/// start) and the index of the newline that ends it: `None` unless the walk reads the record's
/// object and finds only blanks between it and a newline. The walk never passes a newline
/// ([`Walk::line_end`]), so it reads exactly what [`envelope`] reads of that line alone.
pub(super) fn envelope_in(rest: &[u8]) -> Option<(Line<'_>, usize)> {
    let mut walk = Walk::new(rest);
    let line = walk_members(&mut walk)?;
    Some((line, walk.line_end()?))
}

/// The envelope's object from where `walk` stands, up to its closing brace.
fn walk_members<'a>(walk: &mut Walk<'a>) -> Option<Line<'a>> {
    let (mut timestamp, mut kind, mut payload) = (None, None, None);
    if walk.object()? {
        loop {
            match walk.key()? {
                b"timestamp" if timestamp.is_none() => timestamp = Some(walk.string_or_null()?),
                b"type" if kind.is_none() => kind = Some(walk.string()?),
                b"payload" if payload.is_none() => payload = Some(walk.skip()?),
                b"timestamp" | b"type" | b"payload" => return None,
                _ => {
                    walk.skip()?;
                }
            }
            if !walk.member_end()? {
                break;
            }
        }
    }
    Some(Line {
        timestamp: timestamp.flatten(),
        kind: kind?,
        payload: payload?,
    })
}

/// Whether a payload may be one of `kinds` (by its `type`): `false` only when its first `type`
/// is a string outside the list, is `null`, or is absent from an object read whole. A payload
/// the walk cannot read is `true`: serde decides.
pub(super) fn payload_is_one_of(payload: &[u8], kinds: &[&str]) -> bool {
    let mut walk = Walk::new(payload);
    let Some(members) = walk.object() else {
        return true;
    };
    if !members {
        return false;
    }
    loop {
        let Some(key) = walk.key() else {
            return true;
        };
        if key == b"type" {
            return match walk.string_or_null() {
                Some(Some(kind)) => kinds.contains(&&*kind),
                Some(None) => false,
                None => true,
            };
        }
        if walk.skip().is_none() {
            return true;
        }
        match walk.member_end() {
            Some(true) => continue,
            Some(false) => return false,
            None => return true,
        }
    }
}

/// Hooks for the differential tests and the fuzz target.
#[doc(hidden)]
pub mod differential {
    /// The envelope as the walk reads it and as serde does (debug text each).
    pub fn both(line: &[u8]) -> (Option<String>, Option<String>) {
        let show = |line: Option<super::Line<'_>>| line.map(|l| format!("{l:?}"));
        (
            show(super::envelope(line)),
            show(super::envelope_serde(line)),
        )
    }

    /// Whether the walk alone reads the line.
    pub fn walked(line: &[u8]) -> bool {
        super::walk_envelope(line).is_some()
    }

    /// The line at the start of `rest` as the reader of a mapped file feeds it (`envelope_in`):
    /// its envelope (debug text, as [`both`]'s) and its length, or `None` where the walk leaves
    /// the line to the reader.
    pub fn line_in(rest: &[u8]) -> Option<(String, usize)> {
        super::envelope_in(rest).map(|(line, len)| (format!("{line:?}"), len))
    }

    /// [`conversation`] as a mapped file is read: each line offered with the rest of the file
    /// after it, so that the walk finds where it ends (`LineSink::line_in`); a line it leaves
    /// is found with `memchr` and fed whole. The last line without its newline is not fed.
    pub fn conversation_in_rest(file: &[u8]) -> String {
        let mut scan = super::super::codex::ConversationScan::default();
        super::super::agent::feed_as_mapped(file, &mut scan);
        format!("{:?}", scan.finish())
    }

    /// Whether the look at `payload`'s type passes it over as none of `kinds`, and serde's
    /// `type` for it (`Err` when serde rejects it as a payload).
    pub fn payload_kind(payload: &[u8], kinds: &[&str]) -> (bool, Result<Option<String>, ()>) {
        #[derive(serde::Deserialize)]
        struct Kind {
            #[serde(rename = "type")]
            kind: Option<String>,
        }
        let serde = serde_json::from_slice::<Kind>(payload)
            .map(|k| k.kind)
            .map_err(|_| ());
        (!super::payload_is_one_of(payload, kinds), serde)
    }

    /// The conversation the complete lines of a rollout project (debug text), read as
    /// `prepare` reads it, or decoding every payload by serde.
    pub fn conversation(file: &[u8], serde_only: bool) -> String {
        use crate::session::external::lines::LineSink;
        let mut scan = if serde_only {
            super::super::codex::ConversationScan::serde_only()
        } else {
            super::super::codex::ConversationScan::default()
        };
        if let Some(end) = memchr::memrchr(b'\n', file) {
            for (index, line) in file[..end].split(|&b| b == b'\n').enumerate() {
                if !scan.line(index as u64, line) {
                    break;
                }
            }
        }
        format!("{:?}", scan.finish())
    }
}
