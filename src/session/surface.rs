//! Surface and title folds (SPEC §1.5).
//!
//! The surface is what the model currently sees: `append` pushes, `replace{start,end}` splices an
//! inclusive range of current nodes out and puts the replacing event there (compaction, or a
//! pruned tool result). `start` and `end` are **event seqs**, not positions: both are looked up
//! among the current surface nodes (as dsh does), so a replace stays right after earlier replaces
//! have moved every position, and a later replace may shadow a replacing event. Shadowed events
//! stay in the raw log only. The title is the last `session/title` in the raw log.
//!
//! Invariant: the fold applies a replace only when both seqs are current nodes, `start` is at or
//! before `end`, and the replacing event's `sourceEventSeqs` names every node it shadows; anything
//! else is an [`SessionError::InvalidSurfaceOp`] naming the session and the replacing seq, and the
//! surface is left as it was. One exception, a decision for older logs: a replace whose
//! `sourceEventSeqs` key is absent altogether (or `null`) carries no provenance to check and is
//! accepted; a present list that misses a shadowed node is an error. Proof: [`shadowed_range`]
//! and [`missing_provenance`] are the only way into a splice and are unit-tested below, with
//! seqs that differ from positions; `tests/session/compaction.rs` drives the same logs through
//! the full reader, the conversation-only read, the store's cached resumed fold and `prepare`.
//!
//! Writers build a replace with [`compaction_replace`], which runs the same checks on the
//! surface it is given and returns the op with full provenance.
//!
//! A session reference reads big logs only for their conversation, so [`SurfaceBuilder`] has a
//! conversation-only mode ([`SurfaceBuilder::conversation_only`]): surface events keep their place
//! in the fold, but only message events keep a payload, and only the parts the projection reads
//! (text blocks, source, display content). Tool results and other surface events become stubs with
//! `data: null` (their seqs, ops and provenance are kept, so replaces fold the same way), packed
//! chunk rows are only counted, and titles are not tracked. The folded surface then costs memory
//! in proportion to its conversation text, not to the log.

use super::error::{Result, SessionError};
use super::format::{
    ContentBlock, Event, EventData, EventKind, Message, RawData, Record, SurfaceOp,
    ASSISTANT_MESSAGE, SESSION_TITLE, STEERING_MESSAGE, USER_MESSAGE,
};
use super::query::SurfaceSnapshot;
use super::reader::RecordSink;
use super::skim::Envelope;
use super::SessionHeader;
use std::collections::HashSet;
use std::ops::RangeInclusive;

/// Folds surface events into the current surface.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SurfaceFold {
    session_id: String,
    events: Vec<Event>,
}

impl SurfaceFold {
    /// An empty surface for the session `session_id` (named in its errors).
    pub fn new(session_id: impl Into<String>) -> Self {
        SurfaceFold {
            session_id: session_id.into(),
            events: Vec::new(),
        }
    }

    /// Applies one event; events without a `surfaceOp` leave the surface alone. An invalid
    /// replace is an error and changes nothing.
    pub fn apply(&mut self, event: Event) -> Result<()> {
        match event.surface_op {
            None => Ok(()),
            Some(SurfaceOp::Append) => {
                self.events.push(event);
                Ok(())
            }
            Some(SurfaceOp::Replace { start, end }) => {
                let invalid = |reason: String| SessionError::InvalidSurfaceOp {
                    id: self.session_id.clone(),
                    seq: event.seq,
                    reason,
                    log: None,
                };
                let range = shadowed_range(&self.events, |e| e.seq, start, end).map_err(invalid)?;
                if let Some(sources) = &event.source_event_seqs {
                    let shadowed = self.events[range.clone()].iter().map(|e| e.seq);
                    missing_provenance(shadowed, sources).map_err(invalid)?;
                }
                self.events.splice(range, std::iter::once(event));
                Ok(())
            }
        }
    }

    /// The current surface, in surface order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The current surface, taken.
    pub fn into_events(self) -> Vec<Event> {
        self.events
    }
}

/// Folds a whole event sequence.
pub fn fold(session_id: &str, events: impl IntoIterator<Item = Event>) -> Result<Vec<Event>> {
    let mut surface = SurfaceFold::new(session_id);
    for event in events {
        surface.apply(event)?;
    }
    Ok(surface.into_events())
}

/// Where a replace of the nodes with seqs `start` through `end` lies in `nodes` (the current
/// surface, in order; `seq_of` reads a node's seq): the inclusive range of positions it shadows.
/// The reason it is invalid otherwise.
///
/// Both seqs are searched from the back (`end`, then `start` before it), so a valid replace reads
/// only the nodes from `start` on: what the splice moves or drops anyway. Replacing recent nodes
/// (a pruned tool result) stays cheap on a long surface, and a hostile log of such replaces
/// cannot make the fold quadratic. Only a failing replace looks at the rest.
pub fn shadowed_range<T>(
    nodes: &[T],
    seq_of: impl Fn(&T) -> u64,
    start: u64,
    end: u64,
) -> std::result::Result<RangeInclusive<usize>, String> {
    let end_at = nodes.iter().rposition(|n| seq_of(n) == end);
    if let Some(end_at) = end_at {
        if let Some(start_at) = nodes[..=end_at].iter().rposition(|n| seq_of(n) == start) {
            return Ok(start_at..=end_at);
        }
    }
    let not_a_node = |which: &str, seq: u64| {
        format!(
            "replace {which} seq {seq} is not a current surface node ({} nodes)",
            nodes.len()
        )
    };
    let Some(start_at) = nodes.iter().position(|n| seq_of(n) == start) else {
        return Err(not_a_node("start", start));
    };
    let Some(end_at) = end_at else {
        return Err(not_a_node("end", end));
    };
    Err(format!(
        "replace start seq {start} (surface position {start_at}) comes after end seq {end} \
         (surface position {end_at})"
    ))
}

/// Checks that `sources` (a replacing event's `sourceEventSeqs`) names every `shadowed` seq; the
/// reason otherwise, naming the first few it misses.
pub fn missing_provenance(
    shadowed: impl Iterator<Item = u64>,
    sources: &[u64],
) -> std::result::Result<(), String> {
    const NAMED: usize = 8;
    let sources: HashSet<u64> = sources.iter().copied().collect();
    let mut missing = Vec::new();
    let mut count = 0usize;
    for seq in shadowed.filter(|seq| !sources.contains(seq)) {
        count += 1;
        if missing.len() < NAMED {
            missing.push(seq.to_string());
        }
    }
    if count == 0 {
        return Ok(());
    }
    let more = if count > NAMED {
        format!(" and {} more", count - NAMED)
    } else {
        String::new()
    };
    Err(format!(
        "sourceEventSeqs misses shadowed surface node(s) {}{more}",
        missing.join(", ")
    ))
}

/// A surface replace ready to be written: the op (by seqs) and its full provenance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// `{"op":"replace","start":S,"end":E}` with `S` and `E` event seqs.
    pub surface_op: SurfaceOp,
    /// `leading` followed by every shadowed seq, in surface order.
    pub source_event_seqs: Vec<u64>,
}

/// Builds the replace that shadows the current surface nodes from seq `start` through seq `end`
/// (inclusive, in surface order), as SPEC §1.5 asks writers to write it.
///
/// `surface` is the current surface's seqs in order (e.g. the `seq` of each event of a
/// [`SurfaceSnapshot`]); `leading` are the seqs the provenance lists first: a compaction's
/// `compact/start` and `compact/summary`, nothing for a pruned tool result. The result passes the
/// fold's checks for that surface; a range the fold would reject is the same error here
/// ([`SessionError::InvalidSurfaceOp`], with `seq` the seq the replacing event would get).
pub fn compaction_replace(
    session_id: &str,
    replacing_seq: u64,
    surface: &[u64],
    start: u64,
    end: u64,
    leading: &[u64],
) -> Result<Replacement> {
    let range = shadowed_range(surface, |&seq| seq, start, end).map_err(|reason| {
        SessionError::InvalidSurfaceOp {
            id: session_id.to_string(),
            seq: replacing_seq,
            reason,
            log: None,
        }
    })?;
    let mut source_event_seqs = leading.to_vec();
    source_event_seqs.extend(surface[range].iter().filter(|seq| !leading.contains(seq)));
    Ok(Replacement {
        surface_op: SurfaceOp::Replace { start, end },
        source_event_seqs,
    })
}

/// The title carried by a `session/title` event, if well formed.
pub fn title_of(event: &Event) -> Option<String> {
    if event.kind != SESSION_TITLE {
        return None;
    }
    title_from_data(event.data.get().as_bytes())
}

/// Reads `data.title` from the raw `data` JSON of a `session/title` event.
pub fn title_from_data(data: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct TitleOnly {
        title: String,
    }
    serde_json::from_slice::<TitleOnly>(data)
        .ok()
        .map(|t| t.title)
}

/// A sink that folds only the title (the last `session/title`) while a log streams by; every other
/// record is skimmed. It sees only what the reader validated, so a title in a torn tail (or past
/// any other defect) never counts.
#[derive(Debug, Clone, Default)]
pub struct TitleFold {
    title: Option<String>,
}

impl TitleFold {
    /// Continues from a title already folded from the log's valid prefix.
    pub fn new(title: Option<String>) -> Self {
        TitleFold { title }
    }

    /// The title of the last `session/title` event seen; `None` if none was.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The title, taken.
    pub fn into_title(self) -> Option<String> {
        self.title
    }
}

impl RecordSink for TitleFold {
    fn accept(&mut self, record: Record) -> Result<()> {
        if let Record::Event(event) = record {
            if let Some(title) = title_of(&event) {
                self.title = Some(title);
            }
        }
        Ok(())
    }

    fn wants(&self, kind: &str) -> bool {
        kind == SESSION_TITLE
    }
}

/// A sink that folds the surface and tracks title and the last seq while a log streams by.
#[derive(Debug, Clone)]
pub struct SurfaceBuilder {
    surface: SurfaceFold,
    title: Option<String>,
    last_seq: Option<u64>,
    conversation_only: bool,
}

impl SurfaceBuilder {
    /// An empty builder that keeps every surface event whole.
    pub fn new(session_id: &str) -> Self {
        SurfaceBuilder {
            surface: SurfaceFold::new(session_id),
            title: None,
            last_seq: None,
            conversation_only: false,
        }
    }

    /// A builder that keeps only what the conversation projection reads (see the module docs).
    pub fn conversation_only(session_id: &str) -> Self {
        SurfaceBuilder {
            conversation_only: true,
            ..SurfaceBuilder::new(session_id)
        }
    }

    /// The title of the last `session/title` event seen; `None` if none was.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The seq of the last event seen (packed members included); `None` before the first.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// The current surface, in surface order.
    pub fn surface(&self) -> &[Event] {
        self.surface.events()
    }

    /// Applies one raw-log event.
    pub fn apply_event(&mut self, event: Event) -> Result<()> {
        self.last_seq = Some(event.seq);
        if let Some(title) = title_of(&event) {
            self.title = Some(title);
        }
        self.surface.apply(event)
    }

    /// The snapshot of what was seen: the surface, with `captured_through_seq` the last seq.
    pub fn into_snapshot(self, session: SessionHeader) -> SurfaceSnapshot {
        SurfaceSnapshot {
            session,
            captured_through_seq: self.last_seq,
            events: self.surface.into_events(),
        }
    }
}

impl RecordSink for SurfaceBuilder {
    fn accept(&mut self, record: Record) -> Result<()> {
        match record {
            Record::Event(event) if self.conversation_only => {
                // The title is kept too (one scan serves an indexer's conversation and title).
                if let Some(title) = title_of(&event) {
                    self.title = Some(title);
                }
                let event = if is_conversation_type(&event.kind) {
                    if event.data.get().len() > SLIM_ABOVE {
                        slim_message_event(event, &self.surface.session_id)
                    } else {
                        event
                    }
                } else {
                    Event {
                        data: RawData::null(),
                        ..event
                    }
                };
                self.last_seq = Some(event.seq);
                self.surface.apply(event)
            }
            Record::Event(event) => self.apply_event(event),
            // Packed chunk rows are never surface events; only their seqs count.
            Record::Packed(packed) => {
                if let Some(last) = packed.last_seq() {
                    self.last_seq = Some(last);
                }
                Ok(())
            }
        }
    }

    fn wants(&self, kind: &str) -> bool {
        !self.conversation_only || is_conversation_type(kind) || kind == SESSION_TITLE
    }

    fn accept_envelope(&mut self, envelope: Envelope<'_>) -> Result<()> {
        if envelope.seq_count > 0 {
            self.last_seq = Some(envelope.first_seq + (envelope.seq_count - 1));
        }
        if envelope.packed || envelope.surface_op.is_none() {
            return Ok(());
        }
        self.surface.apply(Event {
            kind: EventKind::new(envelope.kind),
            seq: envelope.first_seq,
            time: envelope.time,
            data: RawData::null(),
            source_event_seqs: envelope.source_event_seqs,
            surface_op: envelope.surface_op,
            extra: Default::default(),
        })
    }
}

/// Message payloads up to this size are kept as they are: slimming costs a decode and an encode,
/// and pays off only for messages that carry much more than text (tool-call arguments, reasoning).
const SLIM_ABOVE: usize = 4096;

/// Event types whose payload the conversation projection reads.
fn is_conversation_type(kind: &str) -> bool {
    matches!(kind, USER_MESSAGE | STEERING_MESSAGE | ASSISTANT_MESSAGE)
}

/// A message event reduced to what the projection reads: text blocks, source, role, id and the
/// display content. An event that does not decode is kept whole, so the projection reports it as
/// it would have.
fn slim_message_event(event: Event, session_id: &str) -> Event {
    let slim = |mut message: Message| {
        message
            .content
            .retain(|block| matches!(block, ContentBlock::Text { .. }));
        message.extra.clear();
        if let Some(envelope) = &mut message.envelope {
            envelope.extra.clear();
        }
        message
    };
    let data = match event.decode(session_id) {
        Ok(EventData::UserMessage(message)) => EventData::UserMessage(slim(message)),
        Ok(EventData::SteeringMessage {
            turn,
            message,
            extra,
        }) => EventData::SteeringMessage {
            turn,
            message: slim(message),
            extra,
        },
        Ok(EventData::AssistantMessage {
            turn,
            step,
            message,
            extra,
        }) => EventData::AssistantMessage {
            turn,
            step,
            message: slim(message),
            extra,
        },
        _ => return event,
    };
    Event {
        data: data.to_raw().into(),
        ..event
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A surface event with seq `seq`, its op and provenance given as JSON text.
    fn event(seq: u64, op: &str, sources: Option<&str>) -> Event {
        let sources = sources.map_or(String::new(), |s| format!(",\"sourceEventSeqs\":{s}"));
        let line = format!(
            "{{\"type\":\"user/message\",\"seq\":{seq},\"time\":1,\"data\":{{\"content\":[],\
             \"source\":{{\"kind\":\"user\"}},\"role\":\"user\",\"id\":\"u{seq}\"}}{sources},\
             \"surfaceOp\":{op}}}"
        );
        match serde_json::from_str::<Record>(&line).unwrap() {
            Record::Event(event) => event,
            Record::Packed(_) => unreachable!(),
        }
    }

    fn append(seq: u64) -> Event {
        event(seq, "\"append\"", None)
    }

    fn replace(seq: u64, start: u64, end: u64, sources: Option<&str>) -> Event {
        event(
            seq,
            &format!("{{\"op\":\"replace\",\"start\":{start},\"end\":{end}}}"),
            sources,
        )
    }

    fn seqs(events: &[Event]) -> Vec<u64> {
        events.iter().map(|e| e.seq).collect()
    }

    fn fold_seqs(events: Vec<Event>) -> Result<Vec<u64>> {
        fold("s", events).map(|surface| seqs(&surface))
    }

    #[test]
    fn replace_looks_up_seqs_not_positions() {
        // Seqs 0..=2 are log-only events elsewhere; the surface starts at seq 3.
        let surface = fold_seqs(vec![
            append(3),
            append(4),
            append(5),
            append(6),
            replace(7, 4, 5, Some("[4,5]")),
        ])
        .unwrap();
        assert_eq!(surface, [3, 7, 6]);
    }

    #[test]
    fn compaction_after_an_earlier_compaction() {
        let surface = fold_seqs(vec![
            append(0),
            append(1),
            append(2),
            // compact/start 3, compact/summary 4, checkpoint 5.
            replace(5, 0, 2, Some("[3,4,0,1,2]")),
            append(7),
            append(8),
            // The second compaction shadows the first checkpoint too.
            replace(11, 5, 8, Some("[9,10,5,7,8]")),
            append(13),
        ])
        .unwrap();
        assert_eq!(surface, [11, 13]);
    }

    #[test]
    fn pruned_tool_result_and_a_replace_of_a_replacing_event() {
        let surface = fold_seqs(vec![
            append(0),
            append(1),
            append(2),
            replace(3, 1, 1, Some("[1]")),
            replace(4, 3, 3, Some("[3]")),
        ])
        .unwrap();
        assert_eq!(surface, [0, 4, 2]);
    }

    #[test]
    fn absent_provenance_is_accepted_present_must_be_complete() {
        let base = || vec![append(0), append(1), append(2)];
        let with = |last: Event| {
            let mut events = base();
            events.push(last);
            fold_seqs(events)
        };
        assert_eq!(with(replace(3, 0, 1, None)).unwrap(), [3, 2]);
        assert_eq!(with(replace(3, 0, 1, Some("null"))).unwrap(), [3, 2]);
        let err = with(replace(3, 0, 1, Some("[0]"))).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, SessionError::InvalidSurfaceOp { seq: 3, .. }),
            "{text}"
        );
        assert!(text.contains("misses shadowed surface node(s) 1"), "{text}");
        assert!(with(replace(3, 0, 1, Some("[]"))).is_err());
    }

    #[test]
    fn invalid_ranges_name_the_seq_and_change_nothing() {
        let mut surface = SurfaceFold::new("s");
        for seq in [0, 1, 2] {
            surface.apply(append(seq)).unwrap();
        }
        surface.apply(replace(3, 0, 1, Some("[0,1]"))).unwrap();
        let cases = [
            // A shadowed node is no longer on the surface.
            (
                replace(4, 0, 3, None),
                "start seq 0 is not a current surface node",
            ),
            // The end was never a node (a position that would have been valid).
            (
                replace(4, 3, 1, None),
                "end seq 1 is not a current surface node",
            ),
            (
                replace(4, 2, 3, None),
                "start seq 2 (surface position 1) comes after end seq 3",
            ),
            (
                replace(4, 9, 9, None),
                "start seq 9 is not a current surface node (2 nodes)",
            ),
        ];
        for (event, expected) in cases {
            let err = surface.apply(event).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("session \"s\": event seq 4"), "{text}");
            assert!(text.contains(expected), "{text}");
            assert_eq!(seqs(surface.events()), [3, 2]);
        }
    }

    #[test]
    fn a_replace_reads_only_the_nodes_from_its_start_on() {
        let surface: Vec<u64> = (0..10_000).map(|n| n * 2).collect();
        let reads = std::cell::Cell::new(0usize);
        let counted = |seq: &u64| {
            reads.set(reads.get() + 1);
            *seq
        };
        // A pruned recent node, then a recent range.
        assert_eq!(
            shadowed_range(&surface, counted, 19_998, 19_998),
            Ok(9_999..=9_999)
        );
        assert_eq!(reads.replace(0), 2);
        assert_eq!(
            shadowed_range(&surface, counted, 19_990, 19_996),
            Ok(9_995..=9_998)
        );
        assert!(reads.replace(0) <= 10, "{}", reads.get());
        // A compaction of everything reads each node about once.
        assert_eq!(shadowed_range(&surface, counted, 0, 19_998), Ok(0..=9_999));
        assert!(reads.replace(0) <= 10_001);
        // Invalid: start after end; a seq that is not a node (odd seqs never are).
        let err = shadowed_range(&surface, |&s| s, 20, 10).unwrap_err();
        assert!(
            err.contains(
                "start seq 20 (surface position 10) comes after end seq 10 (surface position 5)"
            ),
            "{err}"
        );
        let err = shadowed_range(&surface, |&s| s, 3, 10).unwrap_err();
        assert!(err.contains("start seq 3 is not"), "{err}");
        let err = shadowed_range(&surface, |&s| s, 10, 3).unwrap_err();
        assert!(err.contains("end seq 3 is not"), "{err}");
    }

    #[test]
    fn missing_provenance_names_a_bounded_number_of_seqs() {
        let err = missing_provenance(0..100, &[5]).unwrap_err();
        assert!(err.contains("0, 1, 2, 3, 4, 6, 7, 8 and 91 more"), "{err}");
        assert!(missing_provenance(0..3, &[9, 2, 1, 0]).is_ok());
    }

    #[test]
    fn compaction_replace_builds_what_the_fold_accepts() {
        let replacement = compaction_replace("s", 9, &[3, 5, 6, 8], 5, 6, &[7]).unwrap();
        assert_eq!(
            replacement.surface_op,
            SurfaceOp::Replace { start: 5, end: 6 }
        );
        assert_eq!(replacement.source_event_seqs, [7, 5, 6]);
        let mut checkpoint = append(9);
        checkpoint.surface_op = Some(replacement.surface_op);
        checkpoint.source_event_seqs = Some(replacement.source_event_seqs);
        let surface = fold_seqs(vec![append(3), append(5), append(6), append(8), checkpoint]);
        assert_eq!(surface.unwrap(), [3, 9, 8]);

        let err = compaction_replace("s", 9, &[3, 5], 5, 3, &[]).unwrap_err();
        assert!(
            matches!(&err, SessionError::InvalidSurfaceOp { seq: 9, reason, .. }
                if reason.contains("comes after")),
            "{err}"
        );
        assert!(compaction_replace("s", 9, &[3, 5], 4, 5, &[]).is_err());
    }
}
