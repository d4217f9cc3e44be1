//! Discovery: finding the session you mean (SPEC §8), beside the reference contract.
//!
//! Purpose: `list_candidates` (SPEC §3.3) matches ids and cwds only, as the seed says; people
//! remember titles, first prompts and words from the conversation. This layer keeps a full-text
//! index of every session the app serves (`index`), searches it with a ranked blend
//! (`search`, `rank`) and resolves the session-lifecycle flags (`lifecycle`). It never
//! changes URIs, snapshots or logs: it is a cache under `<home>/index/`, and `list_candidates`
//! and `dsh-refs candidates` are untouched.
//!
//! Layering: discovery uses [`crate::session`] (listing, reading, stamps) and the pure
//! projection of [`crate::reference::project`], so the indexed text is by construction what a
//! snapshot would carry; nothing below it knows it exists. It is the `discovery` feature (it
//! brings rusqlite with bundled SQLite, and notify); `tui` and `cli` build on it, a host without
//! it keeps the contract list.
//!
//! Keeping up: the background indexer ([`Discovery::spawn_indexer`]) runs a full pass (list
//! everything, stamp every log) at start and then at a [`Cadence`] (started deferred,
//! [`Discovery::spawn_indexer_after`], the first pass and the watcher wait for a poke or a
//! bound: the TUI's first `@` then has the cores to itself); with the file watcher of
//! `watch` running on `<home>/sessions`, a write to a log is indexed by a targeted refresh of
//! its session alone ([`Indexer::refresh_sessions`]) about `watch::COALESCE` (50 ms) later, a new
//! session by a full pass its events ask for, and the polling passes slow to at least
//! [`WATCHED_MIN_INTERVAL`] apart. A watcher that cannot start or fails leaves the polling as
//! it was; other agents' homes are polled only.
//!
//! Invariant: indexing runs on its own thread ([`Discovery::spawn_indexer`]) or on the caller's
//! (the command line), never on an async worker or a UI thread, and the watcher's callback
//! never waits for it; a failing index never fails a listing (callers fall back to the contract
//! list), nor a search: [`Discovery::search`] and `dsh-refs search` answer from the listing's
//! titles, ids and cwds when the index cannot (busy, a full disk, a path it cannot be made at),
//! and say so once.
//! Proof: `tests/discovery/index.rs`, `tests/discovery/cache.rs`, `tests/discovery/search.rs`,
//! `tests/discovery/watch.rs`
//! (an append and a new session found with polling passes an hour apart),
//! `tests/discovery/deferred.rs` (a deferred indexer starts at its bound or on a poke, and finds
//! what was written while it waited),
//! `tests/e2e/cli_lifecycle.rs`.

pub(crate) mod index;
mod indexer;
// Serve only the faces (the TUI's and the command line's start-up): unused in a build without them.
#[cfg_attr(partial_faces, allow(dead_code))]
pub(crate) mod lifecycle;
pub(crate) mod meta;
pub(crate) mod rank;
#[cfg_attr(partial_faces, allow(dead_code))]
pub(crate) mod recent;
pub(crate) mod search;
pub(crate) mod terms;
pub(crate) mod watch;

use crate::sync::LockExt;
pub use index::{
    db_path, db_path_for, is_busy_error, FileStamper, IndexError, Indexer, PassStats, Stamper,
    Targeted, BUSY_TIMEOUT, READER_BUSY_TIMEOUT, SCHEMA_VERSION,
};
pub use meta::SessionMeta;
pub use rank::Field;
pub use search::{Hit, SearchQuery, SearchResult, Searcher, SessionInfo};
pub use watch::{start as watch_sessions, Touched, Watching};

pub use indexer::IndexerThread;
use indexer::*;

use crate::session::external::{ExternalAgent, SourceSet};
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
/// With the file watcher running, full passes only catch what events miss: at least this long
/// apart (and otherwise as without it).
pub const WATCHED_MIN_INTERVAL: Duration = Duration::from_secs(5);

/// When the background indexer runs full passes, and whether it watches for changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    /// The shortest wait between full passes without a watcher ([`MIN_INTERVAL`]).
    pub min: Duration,
    /// The longest wait between full passes ([`MAX_INTERVAL`]); otherwise four times the last.
    pub max: Duration,
    /// The shortest wait between full passes while the watcher runs ([`WATCHED_MIN_INTERVAL`]).
    pub watched_min: Duration,
    /// Whether to watch the dsh store's sessions directory (`watch`); `false` polls only.
    pub watch: bool,
}

impl Default for Cadence {
    fn default() -> Self {
        Cadence {
            min: MIN_INTERVAL,
            max: MAX_INTERVAL,
            watched_min: WATCHED_MIN_INTERVAL,
            watch: true,
        }
    }
}

impl Cadence {
    /// The wait after a full pass that took `last`.
    fn after(&self, last: Duration, watching: bool) -> Duration {
        let min = if watching {
            self.watched_min.max(self.min)
        } else {
            self.min
        };
        (last * 4).max(min).min(self.max.max(min))
    }
}

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
    /// The dsh store's sessions directory, watched for changes (`None`: polling only).
    watch_root: Option<PathBuf>,
    wake: Mutex<Wake>,
    woken: Condvar,
    passes: AtomicU64,
    /// A reload of the searcher's rows runs on a thread of its own ([`Shared::reload_searcher`]);
    /// `reload_again` asks it for one more when the index changed meanwhile.
    reloading: AtomicBool,
    reload_again: AtomicBool,
    /// The ids of the last listing a search was limited to, kept while the store hands out the
    /// same listing (it caches it): building the set of 100,000 ids cost a search ~15 ms.
    listed: Mutex<Option<ListedIds>>,
    /// The searcher of the listing's titles used while the index cannot answer, kept while the
    /// store hands out the same listing.
    fallback: Mutex<Option<(Arc<Vec<SessionSummary>>, Searcher)>>,
    /// The index's failure was logged once already (it is said once, not on every keystroke).
    said_unavailable: AtomicBool,
    /// That sentence, until a screen takes it ([`Discovery::take_note`]).
    note: Mutex<Option<String>>,
}

/// A listing and the set of its ids.
type ListedIds = (Arc<Vec<SessionSummary>>, Arc<HashSet<String>>);

/// Why the background indexer should wake: a poke, watched events, a failed watcher.
#[derive(Default)]
struct Wake {
    poked: bool,
    pending: watch::Pending,
    /// The watcher reported an error: it is dropped and polling goes on alone.
    watch_failed: Option<String>,
    /// The watcher runs (set with `poked`, so the pass that takes the poke knows it).
    watching: bool,
}

impl Shared {
    /// The ids of `listing`, built once per listing the store hands out.
    fn listed_ids(&self, listing: &Arc<Vec<SessionSummary>>) -> Arc<HashSet<String>> {
        let mut cached = self.listed.locked();
        match &*cached {
            Some((of, ids)) if Arc::ptr_eq(of, listing) => ids.clone(),
            _ => {
                let ids = Arc::new(listed_ids(listing));
                *cached = Some((listing.clone(), ids.clone()));
                ids
            }
        }
    }
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
        Discovery::with_watch_root(db, query, stamper, covers, None)
    }

    fn with_watch_root(
        db: PathBuf,
        query: Arc<dyn SessionQuery>,
        stamper: Arc<dyn Stamper>,
        covers: Arc<dyn Fn(&str) -> bool + Send + Sync>,
        watch_root: Option<PathBuf>,
    ) -> Discovery {
        Discovery {
            shared: Arc::new(Shared {
                searcher: Mutex::new(Searcher::new(db.clone())),
                path: db,
                query,
                stamper,
                indexer: Mutex::new(None),
                covers,
                watch_root,
                wake: Mutex::new(Wake::default()),
                woken: Condvar::new(),
                passes: AtomicU64::new(0),
                reloading: AtomicBool::new(false),
                reload_again: AtomicBool::new(false),
                listed: Mutex::new(None),
                fallback: Mutex::new(None),
                said_unavailable: AtomicBool::new(false),
                note: Mutex::new(None),
            }),
        }
    }

    /// Discovery of the dsh sessions under `home` and the other agents' sessions `sources`
    /// serves, indexed at `<home>/index/`. Reads through a store of its own, so indexing never
    /// evicts what `prepare` keeps in the app's conversation cache. The background indexer
    /// watches `<home>/sessions` unless the dsh sessions are hidden. The store keeps its
    /// listing in `<home>/index/listing` ([`DiskStore::with_listing_cache`]): the first search
    /// and the first pass of a new process check directory stamps instead of reading every
    /// header (at 100,000 sessions the walk kept the first `@` waiting for seconds).
    pub fn for_home(home: &Path, sources: &SourceSet) -> Discovery {
        Discovery::for_store(DiskStore::with_listing_cache(home), sources)
    }

    /// Discovery like [`Discovery::for_home`] over `store`, the store of its home: whoever keeps
    /// a clone of `store` (or serves [`Discovery::query`]) shares its one listing.
    pub fn for_store(store: DiskStore, sources: &SourceSet) -> Discovery {
        let home = store.home().to_path_buf();
        let watch_root = (!sources.hide_dsh).then(|| store.sessions_dir());
        let query = sources.serve(Arc::new(store.clone()));
        let stamper = Arc::new(FileStamper {
            store,
            external: sources.external.clone(),
        });
        let dsh = !sources.hide_dsh;
        let agents: Vec<ExternalAgent> = sources.external.iter().map(|s| s.agent()).collect();
        let covers = Arc::new(move |id: &str| match ExternalAgent::of_id(id) {
            Some(agent) => agents.contains(&agent),
            None => dsh,
        });
        let homes: Vec<(&str, &Path)> = sources
            .external
            .iter()
            .map(|s| (s.agent().name(), s.home()))
            .collect();
        let db = index::db_path_for(&home, &homes);
        Discovery::with_watch_root(db, query, stamper, covers, watch_root)
    }

    /// The index database this discovery writes and searches (`<home>/index/discovery.sqlite3`, or [`db_path_for`] its served homes,
    /// for [`Discovery::for_home`]); it need not exist before the first pass.
    pub fn db_path(&self) -> &Path {
        &self.shared.path
    }

    /// Whether this process serves session `id` (its source is one of the served ones); the
    /// index keeps rows of other sources for the processes that serve them.
    pub fn covers(&self, id: &str) -> bool {
        (self.shared.covers)(id)
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
        self.shared.searcher.locked().search(query, listed)
    }

    /// Every indexed session's row (the searcher's in-memory copy, loaded or refreshed as a
    /// search would), on this thread (which must not be an async worker). Fails while no index
    /// exists yet.
    pub fn sessions_blocking(&self) -> Result<Arc<Vec<SessionInfo>>, IndexError> {
        self.shared.searcher.locked().sessions()
    }

    /// Lists the served sessions, then searches off the async workers; hits are limited to the
    /// listing (so hidden sources and deleted sessions never show). When the index cannot
    /// answer (busy, a full disk, a path it cannot be made at) the listing's titles, ids and
    /// cwds answer instead ([`Discovery::search_listing`]); the failure is logged once.
    pub async fn search(&self, query: SearchQuery) -> Result<SearchResult, IndexError> {
        let listing = self.shared.query.list_sessions().await?;
        let this = self.clone();
        let (for_index, for_listing) = (listing.clone(), query.clone());
        let found = match tokio::task::spawn_blocking(move || {
            let listed = this.shared.listed_ids(&for_index);
            this.search_blocking(&query, Some(&listed))
        })
        .await
        {
            Ok(result) => result,
            Err(e) => Err(IndexError::Store(crate::session::SessionError::Other(
                format!("search task failed: {e}"),
            ))),
        };
        match found {
            Err(e @ (IndexError::Sql { .. } | IndexError::Io { .. })) => {
                // A home's first process searches before its indexer has made the index: that
                // is an index not built yet, not one that cannot be used.
                let not_built = matches!(&e, IndexError::Sql { path, .. } if !path.exists());
                let note = match not_built {
                    true => self.first_note(NOT_BUILT_NOTE.to_string()),
                    false => self.unavailable_once(&e),
                };
                if let Some(note) = note {
                    tracing::warn!("{note}");
                    *self.shared.note.locked() = Some(note);
                }
                self.search_listing(&for_listing, &listing).await
            }
            other => other,
        }
    }

    /// A first answer for `query` before any file is checked: the index's hits limited to the
    /// sessions the served sources listed last time ([`SessionQuery::remembered_ids`], so
    /// never a hidden source's or another home's). `None` when nothing was kept or the index
    /// cannot answer; [`Discovery::search`] gives the checked answer either way.
    pub async fn search_remembered(&self, query: SearchQuery) -> Option<SearchResult> {
        let ids = self.shared.query.remembered_ids().await?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.search_blocking(&query, Some(&ids)).ok())
            .await
            .ok()
            .flatten()
            .filter(|found| !found.from_listing)
    }

    /// The sentence [`Discovery::search`] logged when it first answered without the index, for
    /// a screen to show once (`None` after it was taken, or while the index answers).
    pub fn take_note(&self) -> Option<String> {
        self.shared.note.locked().take()
    }

    /// The first time only: the sentence that says the index cannot answer and why (later
    /// failures say nothing more).
    pub fn unavailable_once(&self, error: &IndexError) -> Option<String> {
        self.first_note(unavailable_note(error))
    }

    /// `note`, the first time the index is said not to answer (`None` after that).
    fn first_note(&self, note: String) -> Option<String> {
        if self.shared.said_unavailable.swap(true, Ordering::SeqCst) {
            return None;
        }
        Some(note)
    }

    /// Searches the titles, ids and cwds of `listing` without the index (titles read through
    /// the served query, which caches them); conversation words match nothing. Blocking work
    /// runs off the async workers.
    pub async fn search_listing(
        &self,
        query: &SearchQuery,
        listing: &Arc<Vec<SessionSummary>>,
    ) -> Result<SearchResult, IndexError> {
        let cached = {
            let fallback = self.shared.fallback.locked();
            matches!(&*fallback, Some((of, _)) if Arc::ptr_eq(of, listing))
        };
        if !cached {
            let mut rows = Vec::with_capacity(listing.len());
            for (n, summary) in listing.iter().enumerate() {
                let title = self
                    .shared
                    .query
                    .read_title(summary.id())
                    .await
                    .ok()
                    .flatten();
                rows.push(SessionInfo::listed(
                    n as i64,
                    summary.id().to_string(),
                    title,
                    summary.cwd().map(str::to_string),
                    summary.created_at(),
                    crate::session::external::source_of(&summary.header)
                        .map(|a| a.name().to_string()),
                ));
            }
            let listing = listing.clone();
            let searcher = tokio::task::spawn_blocking(move || Searcher::over_listing(rows))
                .await
                .map_err(|e| {
                    IndexError::Store(crate::session::SessionError::Other(format!(
                        "search task failed: {e}"
                    )))
                })?;
            *self.shared.fallback.locked() = Some((listing, searcher));
        }
        let this = self.clone();
        let query = query.clone();
        tokio::task::spawn_blocking(move || {
            let mut fallback = this.shared.fallback.locked();
            match &mut *fallback {
                Some((_, searcher)) => searcher.search(&query, None),
                None => Ok(SearchResult::default()),
            }
        })
        .await
        .map_err(|e| {
            IndexError::Store(crate::session::SessionError::Other(format!(
                "search task failed: {e}"
            )))
        })?
    }

    /// Asks the background indexer for a pass now (e.g. when the popup opens).
    pub fn poke(&self) {
        self.shared.wake.locked().poked = true;
        self.shared.woken.notify_all();
    }

    /// Starts the background indexer at the default [`Cadence`] (watching for changes).
    pub fn spawn_indexer(&self) -> IndexerThread {
        self.spawn_indexer_with(Cadence::default())
    }

    /// Starts the background indexer: a full pass now, then whenever poked or the interval of
    /// `cadence` passes; with the watcher running, a targeted refresh of the sessions whose logs
    /// were written, `watch::COALESCE` (50 ms) after a burst of events begins. It stops (watcher
    /// included) when the returned handle is dropped, without waiting for a pass to end.
    pub fn spawn_indexer_with(&self, cadence: Cadence) -> IndexerThread {
        self.spawn_indexer_after(cadence, Duration::ZERO)
    }

    /// Starts the background indexer like [`Discovery::spawn_indexer_with`], but its first pass
    /// and its watcher wait until it is poked ([`Discovery::poke`]: the TUI's popup pokes it
    /// once it has answered) or `defer` has passed, whichever comes first: a new process's
    /// first listing and search then have the cores to themselves. Nothing is missed by the
    /// wait: the first pass still lists and stamps every session, and the watcher starts with
    /// it and, once its watches are in place, asks for one more pass (a change made during the
    /// wait is found by those passes, one made after by an event or a later pass).
    pub fn spawn_indexer_after(&self, cadence: Cadence, defer: Duration) -> IndexerThread {
        // The indexer reloads the searcher's rows after it writes: searches need not.
        self.shared.searcher.locked().set_background_reload(true);
        let stop = Arc::new(AtomicBool::new(false));
        let watch_root = cadence
            .watch
            .then(|| self.shared.watch_root.clone())
            .flatten();
        // Starting from here on, so that `watch_starting` never reads "not starting" before the
        // attempt has begun.
        let slot = Arc::new(Mutex::new(if watch_root.is_some() {
            Slot::Starting
        } else {
            Slot::Off
        }));
        let ready = Arc::new(AtomicBool::new(false));
        let shared = self.shared.clone();
        let (stopped, watcher, caught_up) = (stop.clone(), slot.clone(), ready.clone());
        let spawned = std::thread::Builder::new()
            .name("dsh-discovery-index".into())
            .spawn(move || {
                if !defer.is_zero() {
                    wait_for_poke(&shared, &stopped, defer);
                }
                if let Some(root) = watch_root {
                    start_watcher(&shared, root, &watcher);
                }
                run_indexer(&shared, &stopped, cadence, &watcher, &caught_up);
                // Drops a running watcher; one still starting is dropped when it is made.
                *watcher.locked() = Slot::Stopped;
            });
        if let Err(e) = &spawned {
            *slot.locked() = Slot::Off;
            tracing::warn!(error = %e, "could not start the discovery indexer");
        }
        IndexerThread {
            stop,
            shared: self.shared.clone(),
            slot,
            ready,
        }
    }

    /// Which of `summaries` another process is writing now.
    pub fn live_elsewhere(&self, summaries: &[&SessionSummary]) -> Vec<bool> {
        self.shared.stamper.live_elsewhere(summaries)
    }
}

/// What is said once when the index is not made yet (a home's first process, its indexer still
/// building): no failure, and what answers meanwhile.
pub const NOT_BUILT_NOTE: &str = "the discovery index is not built yet; searching the titles, \
    ids and cwds of the listing meanwhile (conversation text is searched once it is built)";

/// What is said once when the index cannot answer: why, and what answers instead.
pub fn unavailable_note(error: &IndexError) -> String {
    let why = match error {
        IndexError::Sql { source, .. } if index::is_busy(source) => {
            "is busy (another process holds it)".to_string()
        }
        other => format!("cannot be used ({other})"),
    };
    format!(
        "the discovery index {why}; searching the titles, ids and cwds of the listing instead \
         (conversation text is not searched until the index works again)"
    )
}

/// The ids of a listing.
pub fn listed_ids(listing: &[SessionSummary]) -> HashSet<String> {
    listing.iter().map(|s| s.id().to_string()).collect()
}
