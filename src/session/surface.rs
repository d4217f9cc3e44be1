//! Surface and title folds (SPEC §1.5).
//!
//! The surface is what the model currently sees: `append` pushes, `replace{start,end}` splices an
//! inclusive range of current nodes out and puts the replacing event there (compaction). Shadowed
//! events stay in the raw log only. The title is the last `session/title` in the raw log.
//!
//! A session reference reads big logs only for their conversation, so [`SurfaceBuilder`] has a
//! conversation-only mode ([`SurfaceBuilder::conversation_only`]): surface events keep their place
//! in the fold, but only message events keep a payload, and only the parts the projection reads
//! (text blocks, source, display content). Tool results and other surface events become stubs with
//! `data: null`, packed chunk rows are only counted, and titles are not tracked. The folded surface
//! then costs memory in proportion to its conversation text, not to the log.

use super::error::{Result, SessionError};
use super::format::{
    ContentBlock, Event, EventData, Message, Record, SurfaceOp, ASSISTANT_MESSAGE, SESSION_TITLE,
    STEERING_MESSAGE, USER_MESSAGE,
};
use super::query::SurfaceSnapshot;
use super::reader::RecordSink;
use super::skim::Envelope;
use super::SessionHeader;
use serde_json::value::RawValue;

/// Folds surface events into the current surface.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SurfaceFold {
    session_id: String,
    events: Vec<Event>,
}

impl SurfaceFold {
    pub fn new(session_id: impl Into<String>) -> Self {
        SurfaceFold {
            session_id: session_id.into(),
            events: Vec::new(),
        }
    }

    /// Applies one event; events without a `surfaceOp` leave the surface alone.
    pub fn apply(&mut self, event: Event) -> Result<()> {
        match event.surface_op {
            None => Ok(()),
            Some(SurfaceOp::Append) => {
                self.events.push(event);
                Ok(())
            }
            Some(SurfaceOp::Replace { start, end }) => {
                if start > end || end >= self.events.len() {
                    return Err(SessionError::InvalidSurfaceOp {
                        id: self.session_id.clone(),
                        seq: event.seq,
                        reason: format!(
                            "replace {start}..={end} on a surface of {} events",
                            self.events.len()
                        ),
                    });
                }
                self.events.splice(start..=end, std::iter::once(event));
                Ok(())
            }
        }
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

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

/// The title of a raw record line, if it is a `session/title` event.
pub fn title_from_line(line: &[u8]) -> Option<String> {
    if !line
        .windows(SESSION_TITLE.len())
        .any(|w| w == SESSION_TITLE.as_bytes())
    {
        return None;
    }
    match serde_json::from_slice::<Record>(line) {
        Ok(Record::Event(event)) => title_of(&event),
        _ => None,
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

    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

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
                let event = if is_conversation_type(&event.kind) {
                    if event.data.get().len() > SLIM_ABOVE {
                        slim_message_event(event, &self.surface.session_id)
                    } else {
                        event
                    }
                } else {
                    Event {
                        data: null_data(),
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
        !self.conversation_only || is_conversation_type(kind)
    }

    fn accept_envelope(&mut self, envelope: Envelope<'_>) -> Result<()> {
        if envelope.seq_count > 0 {
            self.last_seq = Some(envelope.first_seq + (envelope.seq_count - 1));
        }
        if envelope.packed || envelope.surface_op.is_none() {
            return Ok(());
        }
        self.surface.apply(Event {
            kind: envelope.kind.to_string(),
            seq: envelope.first_seq,
            time: envelope.time,
            data: null_data(),
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

fn null_data() -> Box<RawValue> {
    RawValue::from_string("null".into()).expect("null is JSON")
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
        data: data.to_raw(),
        ..event
    }
}
