//! The indexer thread of [`Discovery`](super::Discovery): passes over the served sessions on a
//! cadence, woken early by the watcher, the searcher reloaded after each.
//!
//! Purpose: the background half of discovery, apart from the service the faces call. Invariant:
//! one pass at a time; a pass never holds the searcher while it writes; the thread ends when its
//! handle is dropped. Proof: `tests/discovery/` (passes, watch, a dropped handle joins).

use super::*;

/// The watcher of one indexer thread.
pub(super) enum Slot {
    /// Not watching (never asked, or failed).
    Off,
    /// Adding its watches, on a thread of its own.
    Starting,
    /// Running; held only to be dropped (which stops it).
    Running(#[allow(dead_code)] watch::Watching),
    /// The indexer thread ended: a watcher made now is dropped at once.
    Stopped,
}

/// Starts the watcher of `root` on a thread of its own (adding a watch per directory takes a
/// while on a big home, and the first pass need not wait for it); its events land in `shared`'s
/// pending set. Once it runs, a full pass is asked for, to catch what changed before.
pub(super) fn start_watcher(shared: &Arc<Shared>, root: PathBuf, slot: &Arc<Mutex<Slot>>) {
    *slot.locked() = Slot::Starting;
    let (shared, fallback, slot) = (shared.clone(), slot.clone(), slot.clone());
    let reporter = Arc::downgrade(&shared);
    let report = move |seen: Result<Vec<watch::Touched>, String>| {
        let Some(shared) = reporter.upgrade() else {
            return;
        };
        let mut wake = shared.wake.locked();
        match seen {
            Ok(seen) => {
                let now = Instant::now();
                for touched in seen {
                    wake.pending.add(touched, now);
                }
            }
            Err(e) => {
                wake.watch_failed.get_or_insert(e);
            }
        }
        drop(wake);
        shared.woken.notify_all();
    };
    let spawned = std::thread::Builder::new()
        .name("dsh-discovery-watch".into())
        .spawn(move || {
            let made = watch::start(&root, report);
            let mut slot = slot.locked();
            if !matches!(*slot, Slot::Starting) {
                // The indexer ended, or the watcher failed while its watches were added.
                return;
            }
            match made {
                Ok(watcher) => {
                    *slot = Slot::Running(watcher);
                    let mut wake = shared.wake.locked();
                    wake.watching = true;
                    wake.poked = true;
                    drop(wake);
                    drop(slot);
                    tracing::debug!(root = %root.display(), "discovery watches the sessions");
                    shared.woken.notify_all();
                }
                Err(e) => {
                    *slot = Slot::Off;
                    tracing::warn!(
                        root = %root.display(),
                        error = %e,
                        "cannot watch the sessions for changes; discovery polls them"
                    );
                }
            }
        });
    if let Err(e) = spawned {
        *fallback.locked() = Slot::Off;
        tracing::warn!(error = %e, "cannot start the discovery watcher; discovery polls");
    }
}

/// Waits until the indexer is poked, stopped, or `bound` has passed (the poke is left for
/// the first pass to take).
pub(super) fn wait_for_poke(shared: &Shared, stopped: &AtomicBool, bound: Duration) {
    let until = Instant::now() + bound;
    let mut wake = shared.wake.locked();
    loop {
        let now = Instant::now();
        if wake.poked || stopped.load(Ordering::SeqCst) || now >= until {
            return;
        }
        wake = shared
            .woken
            .wait_timeout(wake, until - now)
            .expect("wake lock")
            .0;
    }
}

/// What the indexer thread does next.
pub(super) enum Work {
    /// A full pass (listing and stamping everything); `scheduled` when the interval ran out.
    Full { scheduled: bool, watching: bool },
    /// Watched events: a targeted refresh of `ids`, then a full pass if `listing`.
    Events {
        ids: HashSet<String>,
        listing: bool,
        watching: bool,
    },
}

/// At most this many ids that a full pass did not list are remembered so that their events do
/// not ask for full passes again (until the next scheduled pass).
pub(super) const MAX_STRANGERS: usize = 1024;

/// The indexer thread's loop: full passes at `cadence`, targeted refreshes on events.
///
/// `ready` turns true once a full pass has begun with the watcher running: from then on every
/// write to a log is seen by an event (what happened before, that pass found).
pub(super) fn run_indexer(
    shared: &Arc<Shared>,
    stopped: &AtomicBool,
    cadence: Cadence,
    slot: &Mutex<Slot>,
    ready: &AtomicBool,
) {
    let mut passes = Passes {
        next: Instant::now(),
        last_end: Instant::now(),
        last: Duration::ZERO,
    };
    // Ids whose events a full pass could not resolve (a directory named unlike its header's id).
    let mut strangers: HashSet<String> = HashSet::new();
    while !stopped.load(Ordering::SeqCst) {
        let work = {
            let mut wake = shared.wake.locked();
            loop {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                if let Some(e) = wake.watch_failed.take() {
                    wake.watching = false;
                    ready.store(false, Ordering::SeqCst);
                    drop(wake);
                    let was = std::mem::replace(&mut *slot.locked(), Slot::Off);
                    if matches!(was, Slot::Running(_) | Slot::Starting) {
                        tracing::warn!(error = %e, "the sessions watcher failed; discovery polls");
                    }
                    let polled = passes.last_end + cadence.after(passes.last, false);
                    passes.next = passes.next.min(polled);
                    wake = shared.wake.locked();
                    continue;
                }
                let now = Instant::now();
                if std::mem::take(&mut wake.poked) || now >= passes.next {
                    break Work::Full {
                        scheduled: now >= passes.next,
                        watching: wake.watching,
                    };
                }
                let mut deadline = passes.next;
                // A full pass asked for by events waits as long as the last one took.
                if let Some(due) = wake.pending.due(passes.last_end + passes.last) {
                    if now >= due {
                        let (ids, listing) = wake.pending.take();
                        break Work::Events {
                            ids,
                            listing,
                            watching: wake.watching,
                        };
                    }
                    deadline = deadline.min(due);
                }
                wake = shared
                    .woken
                    .wait_timeout(wake, deadline.saturating_duration_since(now))
                    .expect("wake lock")
                    .0;
            }
        };
        match work {
            Work::Full {
                scheduled,
                watching,
            } => {
                if scheduled {
                    strangers.clear();
                }
                passes.run(shared, cadence, watching);
                ready.fetch_or(watching, Ordering::SeqCst);
            }
            Work::Events {
                mut ids,
                listing,
                watching,
            } => {
                ids.retain(|id| !strangers.contains(id));
                let unknown = match ids.is_empty() {
                    true => Vec::new(),
                    false => match shared.refresh_sessions(&ids) {
                        Ok(unknown) => unknown,
                        Err(e) => {
                            tracing::warn!(error = %e, "discovery: targeted refresh failed");
                            ids.into_iter().collect()
                        }
                    },
                };
                if !unknown.is_empty() && !listing {
                    // New sessions: a full pass finds them (no sooner than the rate limit).
                    let mut wake = shared.wake.locked();
                    wake.pending.require_listing(unknown, Instant::now());
                    continue;
                }
                if listing {
                    passes.run(shared, cadence, watching);
                    ready.fetch_or(watching, Ordering::SeqCst);
                    if !unknown.is_empty() {
                        let unknown: HashSet<String> = unknown.into_iter().collect();
                        for id in shared.refresh_sessions(&unknown).unwrap_or_default() {
                            if strangers.len() < MAX_STRANGERS {
                                strangers.insert(id);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// When the indexer thread's full passes ran and the next one is due.
pub(super) struct Passes {
    next: Instant,
    last_end: Instant,
    last: Duration,
}

impl Passes {
    /// One full pass, timed; the next is due at `cadence` after it.
    pub(super) fn run(&mut self, shared: &Arc<Shared>, cadence: Cadence, watching: bool) {
        let started = Instant::now();
        if let Err(e) = shared.refresh() {
            tracing::warn!(error = %e, "discovery indexing pass failed");
        }
        self.last_end = Instant::now();
        self.last = self.last_end.duration_since(started);
        self.next = self.last_end + cadence.after(self.last, watching);
    }
}

impl Shared {
    /// After this process indexed. Without a background indexer the next search reloads the
    /// searcher's in-memory rows itself. With one, they are loaded on a thread of their own and
    /// swapped in under the lock, so neither a search nor the next indexing waits for a reload
    /// (100,000 rows take ~0.4 s). The copy is marked current as of the database before the load
    /// began: a commit that lands meanwhile asks for one more reload.
    pub(super) fn reload_searcher(self: &Arc<Self>) {
        let background = self.searcher.locked().background_reload();
        if !background {
            self.searcher.locked().invalidate();
            return;
        }
        if self.reloading.swap(true, Ordering::SeqCst) {
            self.reload_again.store(true, Ordering::SeqCst);
            return;
        }
        let shared = self.clone();
        let spawned = std::thread::Builder::new()
            .name("dsh-discovery-reload".into())
            .spawn(move || loop {
                let before = shared.searcher.locked().data_version_now();
                match (before, Searcher::load(&shared.path)) {
                    (Ok(version), Ok(loaded)) => shared.searcher.locked().install(loaded, version),
                    _ => shared.searcher.locked().invalidate(),
                }
                if !shared.reload_again.swap(false, Ordering::SeqCst) {
                    shared.reloading.store(false, Ordering::SeqCst);
                    // A request that came between the swap and the store runs now.
                    if !shared.reload_again.swap(false, Ordering::SeqCst)
                        || shared.reloading.swap(true, Ordering::SeqCst)
                    {
                        break;
                    }
                }
            });
        if spawned.is_err() {
            self.reloading.store(false, Ordering::SeqCst);
            self.searcher.locked().invalidate();
        }
    }

    /// A targeted refresh of `ids` ([`Indexer::refresh_sessions`]); the ids it could not do
    /// (not in the last listing, or no pass yet) are returned for a full pass to find.
    pub(super) fn refresh_sessions(
        self: &Arc<Self>,
        ids: &HashSet<String>,
    ) -> Result<Vec<String>, IndexError> {
        let mut slot = self.indexer.locked();
        let Some(indexer) = slot.as_mut() else {
            return Ok(ids.iter().cloned().collect());
        };
        let done = indexer.refresh_sessions(ids);
        drop(slot);
        let done = done?;
        if done.stats.indexed + done.stats.failed > 0 {
            self.reload_searcher();
        }
        Ok(done.unknown)
    }

    pub(super) fn refresh(self: &Arc<Self>) -> Result<PassStats, IndexError> {
        let mut slot = self.indexer.locked();
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
            self.reload_searcher();
        }
        self.passes.fetch_add(1, Ordering::SeqCst);
        stats
    }
}

/// Stops the background indexer when dropped.
pub struct IndexerThread {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) shared: Arc<Shared>,
    pub(super) slot: Arc<Mutex<Slot>>,
    pub(super) ready: Arc<AtomicBool>,
}

impl IndexerThread {
    /// Whether the file watcher runs now (else changes are found by polling passes only).
    pub fn watching(&self) -> bool {
        matches!(*self.slot.locked(), Slot::Running(_))
    }

    /// Whether the watcher is still adding its watches (on a big home this takes seconds); once
    /// it is not, it either runs ([`IndexerThread::watching`]) or could not start (the indexer
    /// then polls; the reason is logged).
    pub fn watch_starting(&self) -> bool {
        matches!(*self.slot.locked(), Slot::Starting)
    }

    /// Whether the watcher runs and a full pass has run since it started: from now on a write
    /// to a log is indexed on its event, without waiting for a pass.
    pub fn watched(&self) -> bool {
        self.ready.load(Ordering::SeqCst) && self.watching()
    }
}

impl Drop for IndexerThread {
    fn drop(&mut self) {
        if let Ok(mut searcher) = self.shared.searcher.lock() {
            searcher.set_background_reload(false);
        }
        self.stop.store(true, Ordering::SeqCst);
        self.shared.woken.notify_all();
    }
}
