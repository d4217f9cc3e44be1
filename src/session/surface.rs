//! Surface and title folds (SPEC §1.5).
//!
//! The surface is what the model currently sees: `append` pushes, `replace{start,end}` splices an
//! inclusive range of current nodes out and puts the replacing event there (compaction). Shadowed
//! events stay in the raw log only. The title is the last `session/title` in the raw log.

use super::error::{Result, SessionError};
use super::format::{Event, Record, SurfaceOp, SESSION_TITLE};
use super::query::SurfaceSnapshot;
use super::reader::RecordSink;
use super::SessionHeader;

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
#[derive(Debug)]
pub struct SurfaceBuilder {
    surface: SurfaceFold,
    title: Option<String>,
    last_seq: Option<u64>,
}

impl SurfaceBuilder {
    pub fn new(session_id: &str) -> Self {
        SurfaceBuilder {
            surface: SurfaceFold::new(session_id),
            title: None,
            last_seq: None,
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
}
