//! Discovery: finding the session you mean (SPEC §8), beside the reference contract.
//!
//! Purpose: `list_candidates` (SPEC §3.3) matches ids and cwds only, as the seed says; people
//! remember titles, first prompts and words from the conversation. This layer keeps a full-text
//! index of every session the app serves ([`index`]), searches it with a ranked blend
//! ([`search`], [`rank`]) and resolves the session-lifecycle flags ([`lifecycle`]). It never
//! changes URIs, snapshots or logs: it is a cache under `<home>/index/`, and `list_candidates`
//! and `dsh-refs candidates` are untouched.
//!
//! Layering: discovery uses [`crate::session`] (listing, reading, stamps) and the pure
//! projection of [`crate::reference::projection`], so the indexed text is by construction what a
//! snapshot would carry; nothing below it knows it exists.
//!
//! Invariant: indexing runs on its own thread ([`Discovery::spawn_indexer`]) or on the caller's
//! (the command line), never on an async worker or a UI thread; a failing index never fails a
//! listing (callers fall back to the contract list).
//! Proof: `tests/discovery/index.rs`, `tests/discovery/search.rs`, `tests/e2e/cli_lifecycle.rs`.

pub mod index;
pub mod lifecycle;
pub mod rank;
pub mod search;

pub use index::{FileStamper, IndexError, Indexer, PassStats, Stamper};
pub use search::{Hit, SearchQuery, SearchResult, Searcher, SessionInfo};

use crate::session::external::{Agent, SourceSet};
use crate::session::{DiskStore, SessionQuery, SessionSummary};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The background indexer waits at least this long between passes (unless poked)...
pub const MIN_INTERVAL: Duration = Duration::from_millis(500);
/// ...and at most this long, and otherwise four times as long as its last pass took.
pub const MAX_INTERVAL: Duration = Duration::from_secs(30);

/// The discovery service of one home: an index kept up to date and searched.
#[derive(Clone)]
pub struct Discovery {
    shared: Arc<Shared>,
}

struct Shared {
    path: PathBuf,
    query: Arc<dyn SessionQuery>,
    stamper: Arc<dyn Stamper>,
    indexer: Mutex<Option<Indexer>>,
    covers: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    searcher: Mutex<Searcher>,
    wake: Mutex<bool>,
    woken: Condvar,
    passes: AtomicU64,
}

impl Discovery {
    /// Discovery over `query` with its index at `db`; `covers` says which ids this process is
    /// responsible for (rows of other ids are kept even when not listed).
    pub fn new(
        db: PathBuf,
        query: Arc<dyn SessionQuery>,
        stamper: Arc<dyn Stamper>,
        covers: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> Discovery {
        Discovery {
            shared: Arc::new(Shared {
                searcher: Mutex::new(Searcher::new(db.clone())),
                path: db,
                query,
                stamper,
                indexer: Mutex::new(None),
                covers,
                wake: Mutex::new(false),
                woken: Condvar::new(),
                passes: AtomicU64::new(0),
            }),
        }
    }

    /// Discovery of the dsh sessions under `home` and the other agents' sessions `sources`
    /// serves, indexed at `<home>/index/`. Reads through a store of its own, so indexing never
    /// evicts what `prepare` keeps in the app's conversation cache.
    pub fn for_home(home: &Path, sources: &SourceSet) -> Discovery {
        let store = DiskStore::new(home);
        let query = sources.serve(Arc::new(store.clone()));
        let stamper = Arc::new(FileStamper {
            store,
            external: sources.external.clone(),
        });
        let dsh = !sources.hide_dsh;
        let agents: Vec<Agent> = sources.external.iter().map(|s| s.agent()).collect();
        let covers = Arc::new(move |id: &str| match Agent::of_id(id) {
            Some(agent) => agents.contains(&agent),
            None => dsh,
        });
        Discovery::new(index::db_path(home), query, stamper, covers)
    }

    /// The index database this discovery writes and searches (`<home>/index/discovery.sqlite3`
    /// for [`Discovery::for_home`]); it need not exist before the first pass.
    pub fn db_path(&self) -> &Path {
        &self.shared.path
    }

    /// The sessions served (the listing hits are filtered by).
    pub fn query(&self) -> &Arc<dyn SessionQuery> {
        &self.shared.query
    }

    /// Completed indexing passes so far (any thread).
    pub fn passes(&self) -> u64 {
        self.shared.passes.load(Ordering::SeqCst)
    }

    /// Runs one indexing pass on this thread (which must not be an async worker).
    pub fn refresh_blocking(&self) -> Result<PassStats, IndexError> {
        self.shared.refresh()
    }

    /// Searches on this thread, hits limited to `listed` (all indexed sessions when `None`).
    pub fn search_blocking(
        &self,
        query: &SearchQuery,
        listed: Option<&HashSet<String>>,
    ) -> Result<SearchResult, IndexError> {
        self.shared
            .searcher
            .lock()
            .expect("searcher lock")
            .search(query, listed)
    }

    /// Lists the served sessions, then searches off the async workers; hits are limited to the
    /// listing (so hidden sources and deleted sessions never show).
    pub async fn search(&self, query: SearchQuery) -> Result<SearchResult, IndexError> {
        let listing = self.shared.query.list_sessions().await?;
        let this = self.clone();
        match tokio::task::spawn_blocking(move || {
            let listed = listed_ids(&listing);
            this.search_blocking(&query, Some(&listed))
        })
        .await
        {
            Ok(result) => result,
            Err(e) => Err(IndexError::Store(crate::session::SessionError::Other(
                format!("search task failed: {e}"),
            ))),
        }
    }

    /// Asks the background indexer for a pass now (e.g. when the popup opens).
    pub fn poke(&self) {
        *self.shared.wake.lock().expect("wake lock") = true;
        self.shared.woken.notify_all();
    }

    /// Starts the background indexer: a pass now, then whenever poked or the interval passes.
    /// It stops when the returned handle is dropped (without waiting for a pass to end).
    pub fn spawn_indexer(&self) -> IndexerThread {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = self.shared.clone();
        let stopped = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("dsh-discovery-index".into())
            .spawn(move || {
                while !stopped.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    if let Err(e) = shared.refresh() {
                        tracing::warn!(error = %e, "discovery indexing pass failed");
                    }
                    let wait = (started.elapsed() * 4).clamp(MIN_INTERVAL, MAX_INTERVAL);
                    let mut woken = shared.wake.lock().expect("wake lock");
                    let deadline = Instant::now() + wait;
                    while !*woken && !stopped.load(Ordering::SeqCst) {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        woken = shared.woken.wait_timeout(woken, left).expect("wake lock").0;
                    }
                    *woken = false;
                }
            });
        if let Err(e) = &spawned {
            tracing::warn!(error = %e, "could not start the discovery indexer");
        }
        IndexerThread {
            stop,
            shared: self.shared.clone(),
        }
    }

    /// Which of `summaries` another process is writing now.
    pub fn live_elsewhere(&self, summaries: &[&SessionSummary]) -> Vec<bool> {
        self.shared.stamper.live_elsewhere(summaries)
    }
}

impl Shared {
    fn refresh(&self) -> Result<PassStats, IndexError> {
        let mut slot = self.indexer.lock().expect("indexer lock");
        if slot.is_none() {
            let indexer = Indexer::new(
                self.path.clone(),
                self.query.clone(),
                self.stamper.clone(),
                self.covers.clone(),
            )
            .map_err(|source| IndexError::Io {
                path: self.path.clone(),
                source,
            })?;
            *slot = Some(indexer);
        }
        let stats = slot.as_mut().expect("indexer made").refresh();
        drop(slot);
        if stats
            .as_ref()
            .is_ok_and(|s| s.indexed + s.failed + s.removed > 0)
        {
            self.searcher.lock().expect("searcher lock").invalidate();
        }
        self.passes.fetch_add(1, Ordering::SeqCst);
        stats
    }
}

/// Stops the background indexer when dropped.
pub struct IndexerThread {
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
}

impl Drop for IndexerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.shared.woken.notify_all();
    }
}

/// The ids of a listing.
pub fn listed_ids(listing: &[SessionSummary]) -> HashSet<String> {
    listing.iter().map(|s| s.id().to_string()).collect()
}
