//! Sessions held by agents in this process, and the composition a host serves to the
//! session-reference service: live sessions over the on-disk store, a live session winning over
//! its persisted copy (its in-memory surface is never behind the log).

use super::error::Result;
use super::format::{Event, Record, SessionHeader};
use super::query::{sort_sessions, BoxFuture, SessionQuery, SessionSummary, SurfaceSnapshot};
use super::reader::RecordSink;
use super::store::DiskStore;
use super::surface::SurfaceBuilder;
use crate::sync::{LockExt, RwLockExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

/// One session held by an agent in this process.
#[derive(Debug)]
pub struct LiveSession {
    header: Arc<SessionHeader>,
    state: Mutex<LiveState>,
}

#[derive(Debug)]
struct LiveState {
    surface: SurfaceBuilder,
    persisted: bool,
}

impl LiveSession {
    /// A live session with an empty surface, not yet persisted; [`LiveSession::record`] feeds it.
    pub fn new(header: SessionHeader) -> Self {
        let id = header.id.clone();
        LiveSession {
            header: Arc::new(header),
            state: Mutex::new(LiveState {
                surface: SurfaceBuilder::new(&id),
                persisted: false,
            }),
        }
    }

    /// The session's header (shared, never changed after creation).
    pub fn header(&self) -> &Arc<SessionHeader> {
        &self.header
    }

    /// Records events just appended to the log (or replayed from it on resume).
    pub fn record(&self, events: &[Event]) -> Result<()> {
        let mut state = self.state.locked();
        for event in events {
            state.surface.apply_event(event.clone())?;
        }
        Ok(())
    }

    /// Records raw-log records (packed chunk rows included), e.g. when a session is resumed.
    pub fn record_records(&self, records: Vec<Record>) -> Result<()> {
        let mut state = self.state.locked();
        for record in records {
            state.surface.accept(record)?;
        }
        Ok(())
    }

    /// Marks that the log exists on disk.
    pub fn set_persisted(&self, persisted: bool) {
        self.state.locked().persisted = persisted;
    }

    /// Whether the log exists on disk (as last set by [`LiveSession::set_persisted`]).
    pub fn persisted(&self) -> bool {
        self.state.locked().persisted
    }

    /// The title of the last `session/title` event recorded; `None` before the first.
    pub fn title(&self) -> Option<String> {
        let state = self.state.locked();
        state.surface.title().map(str::to_string)
    }

    /// The folded current surface and the highest seq recorded (`None` before any event): what
    /// `read_surface` answers for this session.
    pub fn snapshot(&self) -> SurfaceSnapshot {
        let state = self.state.locked();
        SurfaceSnapshot {
            session: (*self.header).clone(),
            captured_through_seq: state.surface.last_seq(),
            events: state.surface.surface().to_vec(),
        }
    }
}

/// The registry of live sessions. Cheap to clone; clones share the registry.
#[derive(Clone, Default)]
pub struct LiveSessions {
    sessions: Arc<RwLock<HashMap<String, Arc<LiveSession>>>>,
}

impl LiveSessions {
    /// Adds (or replaces) the session under its header's id.
    pub fn insert(&self, session: Arc<LiveSession>) {
        let id = session.header.id.clone();
        self.sessions
            .write()
            .expect("live lock")
            .insert(id, session);
    }

    /// Takes the session with `id` out of the registry and hands it back; `None` if it was absent.
    pub fn remove(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.sessions.write_locked().remove(id)
    }

    /// The session with `id`, if one is live.
    pub fn get(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.sessions.read_locked().get(id).cloned()
    }

    /// Every live session, in no particular order.
    pub fn all(&self) -> Vec<Arc<LiveSession>> {
        self.sessions
            .read()
            .expect("live lock")
            .values()
            .cloned()
            .collect()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.sessions.read_locked().is_empty()
    }
}

/// `SessionQuery` for a host: live sessions first, then the on-disk store.
///
/// The popup lists sessions on every keystroke and a host always has at least one live session
/// (its own), so the merged list is cached: it is rebuilt only when the store's list (an `Arc`
/// that the store keeps while nothing changes) or the set of live sessions changed. An unchanged
/// answer is the same `Arc`, which lets callers cache work derived from it.
#[derive(Clone)]
pub struct HostSessions {
    /// The on-disk store, consulted for every session that is not live.
    pub disk: DiskStore,
    /// The sessions live in this process; they win over their persisted copies.
    pub live: LiveSessions,
    merged: Arc<Mutex<Option<Merged>>>,
}

/// The last merged list and what it was built from.
struct Merged {
    persisted: Arc<Vec<SessionSummary>>,
    /// Each live session's header and persisted flag, by id.
    live: Vec<(Arc<SessionHeader>, bool)>,
    list: Arc<Vec<SessionSummary>>,
}

impl HostSessions {
    /// Serves `live` over `disk`, with an empty list cache.
    pub fn new(disk: DiskStore, live: LiveSessions) -> Self {
        HostSessions {
            disk,
            live,
            merged: Arc::new(Mutex::new(None)),
        }
    }
}

impl SessionQuery for HostSessions {
    fn list_sessions(&self) -> BoxFuture<'_, Result<Arc<Vec<SessionSummary>>>> {
        Box::pin(async move {
            let persisted = self.disk.list_sessions().await?;
            let mut live = self.live.all();
            if live.is_empty() {
                return Ok(persisted);
            }
            live.sort_by(|a, b| a.header.id.cmp(&b.header.id));
            let signature: Vec<(Arc<SessionHeader>, bool)> = live
                .iter()
                .map(|s| (s.header.clone(), s.persisted()))
                .collect();
            let mut cache = self.merged.locked();
            if let Some(merged) = cache.as_ref() {
                let same_live = merged.live.len() == signature.len()
                    && merged
                        .live
                        .iter()
                        .zip(&signature)
                        .all(|(a, b)| Arc::ptr_eq(&a.0, &b.0) && a.1 == b.1);
                if same_live && Arc::ptr_eq(&merged.persisted, &persisted) {
                    return Ok(merged.list.clone());
                }
            }
            let live_by_id: HashMap<&str, &Arc<LiveSession>> =
                live.iter().map(|s| (s.header.id.as_str(), s)).collect();
            let mut merged = Vec::with_capacity(persisted.len() + live.len());
            for summary in persisted.iter() {
                if !live_by_id.contains_key(summary.id()) {
                    merged.push(summary.clone());
                }
            }
            let on_disk: std::collections::HashSet<&str> =
                persisted.iter().map(|s| s.id()).collect();
            for session in &live {
                merged.push(SessionSummary {
                    header: session.header.clone(),
                    live: true,
                    persisted: session.persisted() || on_disk.contains(session.header.id.as_str()),
                });
            }
            sort_sessions(&mut merged);
            let list = Arc::new(merged);
            *cache = Some(Merged {
                persisted,
                live: signature,
                list: list.clone(),
            });
            Ok(list)
        })
    }

    fn read_surface<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        Box::pin(async move {
            match self.live.get(id) {
                Some(session) => Ok(session.snapshot()),
                None => self.disk.read_surface(id).await,
            }
        })
    }

    fn read_title<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            match self.live.get(id) {
                Some(session) => Ok(session.title()),
                None => self.disk.read_title(id).await,
            }
        })
    }

    fn read_conversation_surface<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        Box::pin(async move {
            match self.live.get(id) {
                Some(session) => Ok(session.snapshot()),
                None => self.disk.read_conversation_surface(id).await,
            }
        })
    }
}
