//! Reading a written demo log back and checking it the way dsh would.
//!
//! The crate's reader checks the lines, the seqs (after unpacking chunk rows) and the torn tail;
//! this module adds what a demo log must also satisfy: its directory matches its header, it ends
//! with `turn/end`, and its surface folds under dsh's rules (`surface.ts`): a replace names the
//! **seqs** of current surface nodes, `start` at or before `end`, and the replacing event's
//! `sourceEventSeqs` are earlier events that include every node it shadows. The fold here is the
//! demo's own, written from SPEC §1.5, so the check does not depend on the crate's fold.

use dsh_session_references::session::format::{Record, SurfaceOp, ASSISTANT_MESSAGE, TURN_END};
use dsh_session_references::session::{paths, reader, Event, SessionHeader};
use std::path::Path;

/// One replace seen while folding.
#[derive(Debug, Clone, PartialEq)]
pub struct Replacement {
    pub seq: u64,
    pub start: u64,
    pub end: u64,
    /// Surface positions of `start` and `end` when the replace was applied.
    pub start_index: usize,
    pub end_index: usize,
    pub shadowed: Vec<u64>,
    pub sources: Vec<u64>,
}

/// A demo log as read back.
#[derive(Debug, Clone)]
pub struct Checked {
    pub header: SessionHeader,
    /// Every event, chunk rows unpacked, in seq order.
    pub events: Vec<Event>,
    /// The current surface after the seq-based fold.
    pub surface: Vec<Event>,
    pub replacements: Vec<Replacement>,
    pub title: Option<String>,
}

/// Folds `events` by seq (SPEC §1.5); an invalid replace is an error naming its seq.
pub fn fold_by_seq(events: &[Event]) -> Result<(Vec<Event>, Vec<Replacement>), String> {
    let mut surface: Vec<Event> = Vec::new();
    let mut replacements = Vec::new();
    for event in events {
        check_provenance(event)?;
        match event.surface_op {
            None => {}
            Some(SurfaceOp::Append) => surface.push(event.clone()),
            Some(SurfaceOp::Replace { start, end }) => {
                let find = |seq: u64, which: &str| {
                    surface.iter().position(|e| e.seq == seq).ok_or_else(|| {
                        format!(
                            "seq {}: surface replace: {which} seq {seq} not found in surface",
                            event.seq
                        )
                    })
                };
                let start_index = find(start, "start")?;
                let end_index = find(end, "end")?;
                if start_index > end_index {
                    return Err(format!(
                        "seq {}: surface replace: start seq {start} is after end seq {end}",
                        event.seq
                    ));
                }
                let sources = event.source_event_seqs.clone().unwrap_or_default();
                let shadowed: Vec<u64> = surface[start_index..=end_index]
                    .iter()
                    .map(|e| e.seq)
                    .collect();
                let missing: Vec<u64> = shadowed
                    .iter()
                    .filter(|s| !sources.contains(s))
                    .copied()
                    .collect();
                if !missing.is_empty() {
                    return Err(format!(
                        "seq {}: sourceEventSeqs must include every shadowed node; missing {missing:?}",
                        event.seq
                    ));
                }
                surface.splice(start_index..=end_index, std::iter::once(event.clone()));
                replacements.push(Replacement {
                    seq: event.seq,
                    start,
                    end,
                    start_index,
                    end_index,
                    shadowed,
                    sources,
                });
            }
        }
    }
    Ok((surface, replacements))
}

/// dsh's event-local rules: only surface events carry `surfaceOp` or `sourceEventSeqs`, a
/// surface event carries a `surfaceOp`, and its sources are distinct earlier events (an empty
/// list only on `assistant/message`).
fn check_provenance(event: &Event) -> Result<(), String> {
    let seq = event.seq;
    if !event.is_surface() {
        if event.surface_op.is_some() || event.source_event_seqs.is_some() {
            return Err(format!(
                "seq {seq}: {} is not a surface event and cannot carry surfaceOp or sourceEventSeqs",
                event.kind
            ));
        }
        return Ok(());
    }
    if event.surface_op.is_none() {
        return Err(format!("seq {seq}: {} needs a surfaceOp", event.kind));
    }
    let Some(sources) = &event.source_event_seqs else {
        return Ok(());
    };
    if sources.is_empty() && event.kind != ASSISTANT_MESSAGE {
        return Err(format!("seq {seq}: empty sourceEventSeqs"));
    }
    if let Some(late) = sources.iter().find(|s| **s >= seq) {
        return Err(format!(
            "seq {seq}: sourceEventSeqs must reference earlier events, found {late}"
        ));
    }
    let mut sorted = sources.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != sources.len() {
        return Err(format!("seq {seq}: sourceEventSeqs must not repeat a seq"));
    }
    Ok(())
}

/// Reads and checks the demo log at `path` (relative to `home` for the directory check).
pub fn check_log(home: &Path, path: &Path) -> Result<Checked, String> {
    let name = path.display();
    let (scan, records) = reader::read_log(path).map_err(|e| format!("{name}: {e}"))?;
    if let Some(torn) = &scan.torn_tail {
        return Err(format!("{name}: torn tail at line {}", torn.line));
    }
    let header = scan.header.clone();
    let expected = paths::session_dir(home, &header.id, header.cwd.as_deref())
        .map(|dir| dir.join(paths::PLAIN_LOG));
    if expected.as_deref() != Some(path) {
        return Err(format!(
            "{name}: not where its header puts it ({expected:?})"
        ));
    }
    let mut events = Vec::new();
    for record in records {
        match record {
            Record::Event(event) => events.push(event),
            Record::Packed(packed) => events.extend(packed.unpack()),
        }
    }
    if events.first().map(|e| e.seq) != Some(0) {
        return Err(format!("{name}: seqs must start at 0"));
    }
    if events.last().map(|e| e.kind.as_str()) != Some(TURN_END) {
        return Err(format!("{name}: the log must end with turn/end"));
    }
    if let Some(pair) = events.windows(2).find(|w| w[1].time < w[0].time) {
        return Err(format!("{name}: time goes back at seq {}", pair[1].seq));
    }
    let (surface, replacements) = fold_by_seq(&events).map_err(|e| format!("{name}: {e}"))?;
    let title = events
        .iter()
        .filter_map(dsh_session_references::session::surface::title_of)
        .next_back();
    Ok(Checked {
        header,
        events,
        surface,
        replacements,
        title,
    })
}
