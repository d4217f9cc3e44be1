//! An in-memory `SessionQuery` double that only hands out surfaces it was given (it folds
//! nothing itself) and records how it was used: reads that hang, wait, or meet at a rendezvous.

use dsh_session_references::session::sort_sessions;
use dsh_session_references::session::{
    BoxFuture, SessionError, SessionHeader, SessionQuery, SessionSummary, SurfaceSnapshot,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

struct Entry {
    snapshot: SurfaceSnapshot,
    title: Option<String>,
}

#[derive(Default)]
struct Behaviour {
    /// `read_surface` of these ids never completes.
    hang: HashSet<String>,
    /// `read_surface` of these ids completes only after the delay.
    delay: HashMap<String, Duration>,
    /// `list_sessions` never completes.
    hang_list: bool,
    /// Reads wait until this many reads have started (proves they run concurrently).
    rendezvous: Option<usize>,
}

/// An in-memory `SessionQuery`: holds surfaces, never folds, counts reads.
#[derive(Default)]
pub struct MemoryQuery {
    entries: Mutex<Vec<Entry>>,
    behaviour: Mutex<Behaviour>,
    reads: Mutex<HashMap<String, usize>>,
    started: Mutex<usize>,
    /// Notified whenever a `read_surface` or `list_sessions` call starts.
    pub read_started: Notify,
    rendezvous_done: Notify,
}

impl MemoryQuery {
    pub fn new() -> Arc<MemoryQuery> {
        Arc::new(MemoryQuery::default())
    }

    pub fn insert(&self, snapshot: SurfaceSnapshot, title: Option<&str>) {
        let mut entries = self.entries.lock().unwrap();
        entries.retain(|e| e.snapshot.session.id != snapshot.session.id);
        entries.push(Entry {
            snapshot,
            title: title.map(str::to_string),
        });
    }

    /// A session with a header only.
    pub fn add(&self, id: &str, created_at: i64, cwd: Option<&str>, title: Option<&str>) {
        let header = SessionHeader::new(id, created_at, cwd.map(str::to_string));
        self.insert(
            SurfaceSnapshot {
                session: header,
                captured_through_seq: None,
                events: Vec::new(),
            },
            title,
        );
    }

    pub fn remove(&self, id: &str) {
        self.entries
            .lock()
            .unwrap()
            .retain(|e| e.snapshot.session.id != id);
    }

    pub fn hang_on(&self, id: &str) {
        self.behaviour.lock().unwrap().hang.insert(id.to_string());
    }

    pub fn delay(&self, id: &str, delay: Duration) {
        self.behaviour
            .lock()
            .unwrap()
            .delay
            .insert(id.to_string(), delay);
    }

    pub fn hang_list(&self) {
        self.behaviour.lock().unwrap().hang_list = true;
    }

    /// Every read waits until `count` reads have started.
    pub fn rendezvous(&self, count: usize) {
        self.behaviour.lock().unwrap().rendezvous = Some(count);
    }

    pub fn read_count(&self, id: &str) -> usize {
        self.reads.lock().unwrap().get(id).copied().unwrap_or(0)
    }

    pub fn total_reads(&self) -> usize {
        self.reads.lock().unwrap().values().sum()
    }

    fn snapshot(&self, id: &str) -> Result<SurfaceSnapshot, SessionError> {
        self.entries
            .lock()
            .unwrap()
            .iter()
            .find(|e| e.snapshot.session.id == id)
            .map(|e| e.snapshot.clone())
            .ok_or_else(|| SessionError::NotFound { id: id.to_string() })
    }
}

impl SessionQuery for MemoryQuery {
    fn list_sessions(&self) -> BoxFuture<'_, Result<Arc<Vec<SessionSummary>>, SessionError>> {
        Box::pin(async move {
            self.read_started.notify_one();
            if self.behaviour.lock().unwrap().hang_list {
                std::future::pending::<()>().await;
            }
            let mut list: Vec<SessionSummary> = self
                .entries
                .lock()
                .unwrap()
                .iter()
                .map(|e| SessionSummary {
                    header: Arc::new(e.snapshot.session.clone()),
                    live: false,
                    persisted: true,
                })
                .collect();
            sort_sessions(&mut list);
            Ok(Arc::new(list))
        })
    }

    fn read_surface<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SurfaceSnapshot, SessionError>> {
        Box::pin(async move {
            *self
                .reads
                .lock()
                .unwrap()
                .entry(id.to_string())
                .or_default() += 1;
            let (hang, delay, rendezvous) = {
                let b = self.behaviour.lock().unwrap();
                (b.hang.contains(id), b.delay.get(id).copied(), b.rendezvous)
            };
            self.read_started.notify_one();
            if let Some(count) = rendezvous {
                let reached = {
                    let mut started = self.started.lock().unwrap();
                    *started += 1;
                    *started >= count
                };
                if reached {
                    self.rendezvous_done.notify_waiters();
                } else {
                    let notified = self.rendezvous_done.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    if *self.started.lock().unwrap() < count {
                        notified.await;
                    }
                }
            }
            if hang {
                std::future::pending::<()>().await;
            }
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            self.snapshot(id)
        })
    }

    fn read_title<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, SessionError>> {
        Box::pin(async move {
            self.entries
                .lock()
                .unwrap()
                .iter()
                .find(|e| e.snapshot.session.id == id)
                .map(|e| e.title.clone())
                .ok_or_else(|| SessionError::NotFound { id: id.to_string() })
        })
    }
}
