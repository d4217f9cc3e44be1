//! The MCP handler (SPEC §10): resources, the `reference` prompt and its completion, and the
//! change notifier, over the reference service, the merged session sources and discovery.
//!
//! Where a list comes from: once an index exists (it was there when the server started, or this
//! process's indexer finished a pass), `resources/list` is ranked straight from it
//! ([`crate::discovery::recent`]: the first `--max-resources` rows in rank order, a few
//! milliseconds at 100,000 sessions) and no row is loaded for it. Until this process's indexer
//! has finished its first pass, the index may be behind the home (sessions written or removed
//! while no server ran), so the ranking is made whole against the store's listing (sessions
//! gone from disk left out, sessions the index lacks merged in by creation time): the first list
//! of a cold start names every session on disk. A new home is listed by a walk of the store
//! instead. A session the index does not hold yet is labelled by its source's own title (an
//! agent's persistent listing answers from what a previous process read; issue 35), by its id
//! only when the source has no title for it. The
//! indexer (and its watcher) starts only after the first answer is out, so that answer never
//! shares the cores with a pass over the whole home; the pass then brings the index, and so the
//! list, up to date with the home, and the change notifier tells the host.
//!
//! Invariant: every answer is computed whole before it is sent (a read is the context text of
//! one `prepare`, never partial); blocking work (the index, the listing, ranking) runs on
//! blocking threads, never on the async workers that serve the protocol; nothing here writes a
//! log: reads go through the store, the index is discovery's cache under `<home>/index/`. The
//! host is told `list_changed` exactly when what a list would show (ids and labels in rank
//! order) differs from what it last received or was told. A list answered before the index has
//! caught up with the home holds every session on disk and none that is gone.
//! Proof: `tests/mcp/` (the real binary through `rmcp`'s client, and in process over
//! `tokio::io::duplex`), including a warm start whose index is behind the home
//! (`a_warm_start_lists_every_session_on_disk_at_once_and_then_labels_the_new_ones`), and
//! `listing::tests::a_cold_start_merges_unindexed_sessions_in_rank_order`, and
//! `a_first_list_titles_agent_sessions_no_index_holds` (agent sessions titled in a first list).

pub use super::completion::COMPLETIONS;
use super::completion::{is_placeholder, unique_tokens};
use super::listing::{self, Entry};
use super::{Expose, Options};
use crate::discovery::lifecycle::{resolve_prefix, ResolveError};
use crate::discovery::recent::RecentReader;
use crate::discovery::{Discovery, IndexerThread, SearchQuery, SessionInfo};
use crate::reference::{
    AgentIdentity, ErrorCode as RefCode, ReferenceInput, SessionReferenceConfig,
    SessionReferenceError, SessionReferences,
};
use crate::session::{ContentBlock, SessionQuery, SessionSummary};
use crate::sync::LockExt;
use rmcp::ErrorData as McpError;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The name of the one prompt.
pub const PROMPT: &str = "reference";
/// Its one argument.
pub const ARGUMENT: &str = "session";
/// Candidates an ambiguous or unknown `session` names.
pub const SHOWN_CANDIDATES: usize = 10;
/// How long the first listing of a home without an index waits for the index's first pass.
pub const FIRST_PASS_WAIT: std::time::Duration = std::time::Duration::from_millis(300);
/// A new home of at most this many sessions waits [`FIRST_PASS_WAIT`] for its first pass (a
/// pass over a few thousand sessions fits in it); a bigger one is listed at once by id.
pub const SMALL_HOME: usize = 2_000;
/// How long a listing waits for the index's rows before it answers with what is at hand (ids
/// for labels); the rows finish loading in the background and `list_changed` follows.
pub const ROWS_WAIT: std::time::Duration = std::time::Duration::from_millis(30);
/// How long after an answer the background work (the indexer's pass, the watcher) starts: the
/// answer is on its way to the host first.
pub const BACKGROUND_AFTER: std::time::Duration = std::time::Duration::from_millis(50);
/// The background work starts this long after the server did even when no request came.
pub const BACKGROUND_ANYWAY: std::time::Duration = std::time::Duration::from_secs(5);
/// How long resolving a word waits for the index's first pass.
pub const WORD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// The MIME type of a read.
pub const MIME: &str = "text/markdown";

/// The server of one home. Cheap to clone: a clone shares the home's state (discovery, the
/// index, the service) and the connection's ([`Server::for_connection`] gives a new one).
#[derive(Clone)]
pub struct Server {
    inner: Arc<Inner>,
    connection: Arc<Connection>,
}

/// What one client connection was told (each HTTP session, or stdio's one client).
#[derive(Default)]
struct Connection {
    /// The fingerprint of the list the host was last told about (an answer to
    /// `resources/list`, or a `list_changed` since); `None` until the host first lists.
    told: Mutex<Option<u64>>,
    /// Cancelled when the connection's input ends (stdio's EOF).
    ended: CancellationToken,
}

struct Inner {
    cwd: Option<String>,
    max_resources: usize,
    expose: Expose,
    discovery: Discovery,
    service: SessionReferences,
    /// No session has this id: reading any session is never a self-reference.
    agent: AgentIdentity,
    /// The index's rows by id, kept while the searcher hands out the same copy.
    rows: Mutex<Option<RowMap>>,
    /// Run the indexer (started after the first answer, see [`Server::start_background`]).
    index: bool,
    indexer: Mutex<Option<IndexerThread>>,
    /// An index was there when the server started: lists are ranked from it at once.
    index_at_start: bool,
    /// The ranked listing straight from the index.
    recent: Mutex<RecentReader>,
}

type RowMap = (Arc<Vec<SessionInfo>>, Arc<HashMap<String, usize>>);

/// What one listing saw: the sessions and the index's rows for them.
pub struct Snapshot {
    /// The merged listing.
    pub listing: Arc<Vec<SessionSummary>>,
    rows: Arc<Vec<SessionInfo>>,
    at: Arc<HashMap<String, usize>>,
}

impl Snapshot {
    fn row(&self, id: &str) -> Option<&SessionInfo> {
        self.at.get(id).map(|&i| &self.rows[i])
    }

    fn map(&self) -> HashMap<&str, &SessionInfo> {
        self.at
            .iter()
            .map(|(id, &i)| (id.as_str(), &self.rows[i]))
            .collect()
    }

    /// The ranked, capped resources.
    pub fn ranked(&self, cwd: Option<&str>, max: usize) -> Vec<Entry> {
        listing::ranked(&self.listing, &self.map(), cwd, max)
    }
}

pub(super) fn error_data(err: &SessionReferenceError) -> serde_json::Value {
    json!({"code": err.code(), "message": err.message()})
}

pub(super) fn internal(message: impl Into<String>) -> McpError {
    McpError::internal_error(message.into(), None)
}

impl Server {
    /// Builds the server and starts what keeps it current: the discovery indexer (with its
    /// watcher) and a first load of the listing and the index's rows, so the first
    /// `resources/list` finds them warm.
    pub fn new(options: &Options) -> Result<Server, super::ServeError> {
        // One store for discovery and the service: one listing of the home, started from the
        // listing cache under `<home>/index/` (a new process lists at the cost of checking it).
        let discovery = options.workspace.discovery_sharing_store();
        let store: Arc<dyn SessionQuery> = discovery.query().clone();
        let defaults = SessionReferenceConfig::default();
        let config = SessionReferenceConfig {
            max_references: 1,
            max_reference_bytes: options
                .max_reference_bytes
                .unwrap_or(defaults.max_reference_bytes),
            ..defaults
        };
        let service = SessionReferences::new(store, config).map_err(super::ServeError::Config)?;
        let index_at_start = discovery.db_path().is_file();
        let recent = Mutex::new(RecentReader::new(discovery.db_path()));
        Ok(Server {
            inner: Arc::new(Inner {
                cwd: options.cwd.clone(),
                max_resources: options.max_resources,
                expose: options.expose,
                discovery,
                service,
                agent: AgentIdentity::new(
                    format!("dsh-refs-mcp-{}", uuid::Uuid::new_v4()),
                    options.cwd.clone(),
                ),
                rows: Mutex::new(None),
                index: options.index,
                indexer: Mutex::new(None),
                index_at_start,
                recent,
            }),
            connection: Arc::default(),
        })
    }

    /// The same home's server for another client connection (nothing told yet), whose input
    /// ends when `ended` is cancelled (never, for a token nobody cancels).
    pub fn for_connection(&self, ended: CancellationToken) -> Server {
        Server {
            inner: self.inner.clone(),
            connection: Arc::new(Connection {
                told: Mutex::new(None),
                ended,
            }),
        }
    }

    /// Resolves once this connection's input has ended.
    pub(crate) async fn input_ended(&self) {
        self.connection.ended.cancelled().await;
    }

    /// What is exposed.
    pub fn expose(&self) -> Expose {
        self.inner.expose
    }

    /// The merged listing of every served source (the store's, from its cache when current).
    async fn listing(&self) -> Result<Arc<Vec<SessionSummary>>, McpError> {
        self.inner
            .discovery
            .query()
            .list_sessions()
            .await
            .map_err(|e| internal(format!("listing the sessions failed: {e}")))
    }

    /// The merged listing and the index's rows now (the rows are empty until an index exists).
    pub async fn snapshot(&self) -> Result<Snapshot, McpError> {
        let listing = self.listing().await?;
        let this = self.clone();
        let (rows, at) = tokio::task::spawn_blocking(move || this.rows_blocking())
            .await
            .map_err(|e| internal(format!("the listing task failed: {e}")))?;
        Ok(Snapshot { listing, rows, at })
    }

    /// Like [`Server::snapshot`], but waits at most [`ROWS_WAIT`] for the index's rows: a big
    /// index's first load (every row) goes on in the background, this answers labelled by ids,
    /// and the change notifier sends `list_changed` once the rows are loaded.
    async fn snapshot_at_hand(&self) -> Result<Snapshot, McpError> {
        let this = self.clone();
        let rows = tokio::task::spawn_blocking(move || this.rows_blocking());
        let listing = self.listing().await?;
        let (rows, at) = match tokio::time::timeout(ROWS_WAIT, rows).await {
            Ok(loaded) => loaded.map_err(|e| internal(format!("the listing task failed: {e}")))?,
            Err(_) => {
                // The change notifier sees the labels change once they are loaded.
                tracing::debug!("the index's rows are still loading; listed by id");
                (Arc::new(Vec::new()), Arc::new(HashMap::new()))
            }
        };
        Ok(Snapshot { listing, rows, at })
    }

    /// Starts what keeps the server current (the discovery indexer and its watcher), once, and
    /// only `BACKGROUND_AFTER` from now: called as an answer goes out, so that a first listing
    /// is never slowed by the indexer's pass over the whole home.
    pub fn start_background(&self) {
        if !self.inner.index || self.inner.indexer.locked().is_some() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(BACKGROUND_AFTER).await;
            this.start_indexer_now();
        });
    }

    /// Starts the indexer now (idempotent).
    fn start_indexer_now(&self) {
        if !self.inner.index {
            return;
        }
        let mut slot = self.inner.indexer.locked();
        if slot.is_none() {
            *slot = Some(self.inner.discovery.spawn_indexer());
        }
    }

    fn indexing(&self) -> bool {
        self.inner.indexer.locked().is_some()
    }

    /// Whether lists are ranked straight from the index: it was there at the start, or this
    /// process's indexer has finished a pass over the home (before that, a new index holds only
    /// part of it).
    fn ranks_from_index(&self) -> bool {
        self.inner.index_at_start || self.inner.discovery.passes() > 0
    }

    /// The first `max` entries straight from the index, or `None` when it cannot answer. With
    /// `listing` (the store's, on a cold start before this process's indexer has finished a
    /// pass), made whole against it: sessions no longer on disk are left out and sessions the
    /// index does not hold yet are merged in (SPEC §10: the first list is complete).
    fn entries_from_index(&self, listing: Option<&[SessionSummary]>) -> Option<Vec<Entry>> {
        let discovery = &self.inner.discovery;
        let (cwd, max) = (self.inner.cwd.as_deref(), self.inner.max_resources);
        let mut recent = self.inner.recent.locked();
        let found = match listing {
            None => {
                let covers = |id: &str| discovery.covers(id);
                recent
                    .top(cwd, &covers, max)
                    .map(|rows| rows.iter().map(listing::entry_of_row).collect())
            }
            Some(listing) => recent.ids().and_then(|known| {
                let on_disk: HashSet<&str> = listing.iter().map(|s| s.id()).collect();
                let covers = |id: &str| discovery.covers(id) && on_disk.contains(id);
                let rows = recent.top(cwd, &covers, max)?;
                let unknown: Vec<&SessionSummary> =
                    listing.iter().filter(|s| !known.contains(s.id())).collect();
                if !unknown.is_empty() {
                    tracing::debug!(
                        sessions = unknown.len(),
                        "listed sessions the index does not hold yet"
                    );
                }
                Ok(listing::reconciled(&rows, &unknown, cwd, max))
            }),
        };
        match found {
            Ok(entries) => Some(entries),
            Err(e) => {
                tracing::debug!(error = %e, "the index cannot rank; listing instead");
                None
            }
        }
    }

    /// [`Server::entries_from_index`] on a blocking thread, made whole against the store's
    /// listing until this process's indexer has finished its first pass.
    async fn ranked_from_index(&self) -> Result<Option<Vec<Entry>>, McpError> {
        let listing = if self.inner.discovery.passes() == 0 {
            Some(self.listing().await?)
        } else {
            None
        };
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            this.entries_from_index(listing.as_deref().map(|l| &l[..]))
        })
        .await
        .map_err(|e| internal(format!("the ranking task failed: {e}")))
    }

    /// The label of session `id` as the listing gives it.
    async fn label_of(&self, id: &str) -> Result<String, McpError> {
        if self.ranks_from_index() {
            let (this, key) = (self.clone(), id.to_string());
            let row = tokio::task::spawn_blocking(move || this.inner.recent.locked().get(&key))
                .await
                .map_err(|e| internal(format!("the label task failed: {e}")))?;
            if let Ok(Some(row)) = row {
                return Ok(listing::label_of(
                    &row.id,
                    row.title.as_deref(),
                    row.first_prompt.as_deref(),
                ));
            }
        }
        let this = self.clone();
        let (rows, at) = tokio::task::spawn_blocking(move || this.rows_blocking())
            .await
            .map_err(|e| internal(format!("the label task failed: {e}")))?;
        let row = at.get(id).map(|&i| &rows[i]);
        if row.is_none() {
            let query = self.inner.discovery.query();
            if let Ok(Some(title)) = query.read_title(id).await {
                return Ok(listing::label_of(id, Some(&title), None));
            }
        }
        Ok(listing::label(id, row))
    }

    /// The fingerprint of what a list shows (ids and labels, in order).
    pub fn fingerprint(entries: &[Entry]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for e in entries {
            e.id.hash(&mut hasher);
            e.label.hash(&mut hasher);
        }
        hasher.finish()
    }

    /// Notes that the host now knows the list of fingerprint `now`; whether that differs from
    /// what it knew before (always `false` before the host first listed).
    pub(crate) fn tell(&self, now: u64, first_time_counts: bool) -> bool {
        let mut told = self.connection.told.locked();
        let changed = match *told {
            Some(was) => was != now,
            None => first_time_counts,
        };
        if told.is_some() || first_time_counts {
            *told = Some(now);
        }
        changed
    }

    /// Whether an index was there when the server started.
    pub fn index_at_start(&self) -> bool {
        self.inner.index_at_start
    }

    /// Whether the host has listed at least once.
    pub(crate) fn has_listed(&self) -> bool {
        self.connection.told.locked().is_some()
    }

    fn rows_blocking(&self) -> RowMap {
        let rows = match self.inner.discovery.sessions_blocking() {
            Ok(rows) => rows,
            Err(e) => {
                tracing::debug!(error = %e, "no index rows yet; sessions are labelled by id");
                Arc::new(Vec::new())
            }
        };
        let mut cached = self.inner.rows.locked();
        if let Some((of, at)) = &*cached {
            if Arc::ptr_eq(of, &rows) {
                return (of.clone(), at.clone());
            }
        }
        let at: HashMap<String, usize> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), i))
            .collect();
        let at = Arc::new(at);
        *cached = Some((rows.clone(), at.clone()));
        (rows, at)
    }

    /// The ranked, capped entries (ranking runs on a blocking thread). The first listing waits
    /// up to `FIRST_PASS_WAIT` for the indexer's first pass, so a small or already indexed
    /// home is labelled by titles and first prompts at once; a big new home is listed by id and
    /// relabelled (with `list_changed`) as the index fills.
    pub async fn entries(&self) -> Result<Vec<Entry>, McpError> {
        let mut entries = self.ranked_entries().await?;
        self.title_unindexed(&mut entries).await;
        Ok(entries)
    }

    /// Labels the entries the index does not hold yet (a new home, sessions written while no
    /// server ran) by their sources' own titles: the agents' persistent listings and the
    /// store's title cache answer from what a previous process read, so a first list shows
    /// titles, never bare ids, without waiting for the index.
    async fn title_unindexed(&self, entries: &mut [Entry]) {
        let ids: Vec<String> = entries
            .iter()
            .filter(|e| e.messages.is_none())
            .map(|e| e.id.clone())
            .collect();
        if ids.is_empty() {
            return;
        }
        let query = self.inner.discovery.query();
        let titles = query.read_titles(&ids).await;
        let unindexed = entries.iter_mut().filter(|e| e.messages.is_none());
        for (entry, title) in unindexed.zip(titles) {
            if let Ok(Some(title)) = title {
                entry.label = listing::label_of(&entry.id, Some(&title), None);
            }
        }
    }

    /// [`Server::entries`] before the sessions the index lacks are titled.
    async fn ranked_entries(&self) -> Result<Vec<Entry>, McpError> {
        if self.ranks_from_index() {
            if let Some(entries) = self.ranked_from_index().await? {
                return Ok(entries);
            }
        }
        // No index to rank from yet (a new home): the listing comes first, then the indexer
        // starts, so the walk over the home has both cores; a small home waits a moment for
        // the first pass and is labelled by titles and first prompts at once.
        let listing = self.listing().await?;
        // A big home's indexer starts once this answer is out (`start_background`).
        if listing.len() <= SMALL_HOME {
            self.start_indexer_now();
        }
        if self.indexing() && listing.len() <= SMALL_HOME {
            let started = std::time::Instant::now();
            while self.inner.discovery.passes() == 0 && started.elapsed() < FIRST_PASS_WAIT {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            if self.ranks_from_index() {
                if let Some(entries) = self.ranked_from_index().await? {
                    return Ok(entries);
                }
            }
        }
        let snapshot = self.snapshot_at_hand().await?;
        let (cwd, max) = (self.inner.cwd.clone(), self.inner.max_resources);
        tokio::task::spawn_blocking(move || snapshot.ranked(cwd.as_deref(), max))
            .await
            .map_err(|e| internal(format!("the ranking task failed: {e}")))
    }

    /// The text a model receives for a reference to `id` (SPEC §3.7), read afresh, labelled as
    /// the listing labels it.
    pub async fn read_text(&self, id: &str) -> Result<String, McpError> {
        let listing = self.listing().await?;
        if !listing.iter().any(|s| s.id() == id) {
            let err =
                SessionReferenceError::new(RefCode::ReadFailed, format!("session not found: {id}"));
            return Err(McpError::resource_not_found(
                format!("no session {id:?} is listed"),
                Some(error_data(&err)),
            ));
        }
        let label = self.label_of(id).await?;
        let prepared = self
            .inner
            .service
            .prepare(
                &self.inner.agent,
                Vec::new(),
                vec![ReferenceInput::new(id, Some(label))],
                &CancellationToken::new(),
            )
            .await
            .map_err(|err| {
                let data = Some(error_data(&err));
                match err.kind() {
                    RefCode::InvalidReference => McpError::invalid_params(err.to_string(), data),
                    _ => McpError::internal_error(err.to_string(), data),
                }
            })?;
        let context = prepared
            .additional_context
            .ok_or_else(|| internal("prepare returned no context for a reference"))?;
        context
            .content
            .iter()
            .find_map(|block| match block {
                ContentBlock::Text { text, .. } => Some(text.clone()),
                _ => None,
            })
            .ok_or_else(|| internal("the context message holds no text"))
    }

    /// The session `value` names: an id, a unique id prefix, or one word found by discovery.
    pub async fn resolve(&self, value: &str) -> Result<String, McpError> {
        let value = value.trim();
        if is_placeholder(value) {
            return Err(McpError::invalid_params(
                format!(
                    "the host sent its argument placeholder {value:?} instead of a session id: \
                     it fills the prompt's text in itself and cannot pass a session to read; \
                     pick the session with @ instead"
                ),
                None,
            ));
        }
        let snapshot = self.snapshot().await?;
        let unknown = |candidates: Vec<(String, String)>, total: usize, what: &str| {
            let mut text = format!("{what} {value:?}");
            if candidates.is_empty() {
                text.push_str("; no session matches it");
            } else {
                text.push_str(&format!("; {total} sessions match, give more of the id:"));
                for (id, label) in &candidates {
                    text.push_str(&format!("\n  {id}  {label}"));
                }
                if total > candidates.len() {
                    text.push_str(&format!("\n  … and {} more", total - candidates.len()));
                }
            }
            McpError::invalid_params(
                text,
                Some(json!({
                    "candidates": candidates.iter().map(|(id, label)| json!({"sessionId": id, "label": label})).collect::<Vec<_>>(),
                    "total": total,
                })),
            )
        };
        let labelled = |ids: Vec<String>| -> Vec<(String, String)> {
            ids.into_iter()
                .map(|id| {
                    let label = listing::label(&id, snapshot.row(&id));
                    (id, label)
                })
                .collect()
        };
        let resolved = {
            let (listing, value) = (snapshot.listing.clone(), value.to_string());
            tokio::task::spawn_blocking(move || resolve_prefix(&listing, &value))
                .await
                .map_err(|e| internal(format!("the lookup task failed: {e}")))?
        };
        match resolved {
            Ok(id) => return Ok(id),
            Err(ResolveError::Ambiguous {
                candidates, total, ..
            }) => {
                return Err(unknown(
                    labelled(candidates.into_iter().take(SHOWN_CANDIDATES).collect()),
                    total,
                    "ambiguous session",
                ))
            }
            Err(ResolveError::Empty) => {
                return Err(McpError::invalid_params(
                    "the session argument is empty: give an id, an id prefix or a word",
                    None,
                ))
            }
            Err(_) => {}
        }
        if value.split_whitespace().count() != 1 {
            return Err(unknown(Vec::new(), 0, "no session id starts with"));
        }
        // A word needs the index: give its first pass a moment (a prompt is typed by hand).
        if self.inner.index {
            self.start_indexer_now();
            let started = std::time::Instant::now();
            while self.inner.discovery.passes() == 0 && started.elapsed() < WORD_WAIT {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
        let hits = self.search(value, SHOWN_CANDIDATES).await?;
        match hits.0.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(unknown(
                Vec::new(),
                0,
                "no session id starts with, and no session mentions,",
            )),
            _ => Err(unknown(labelled(hits.0), hits.1, "ambiguous word")),
        }
    }

    /// Discovery's hits for `word` (ids, best first) and how many matched.
    async fn search(&self, word: &str, limit: usize) -> Result<(Vec<String>, usize), McpError> {
        let query = SearchQuery {
            text: word.to_string(),
            agent: Some(self.inner.agent.id.clone()),
            cwd: self.inner.cwd.clone(),
            limit,
            now_ms: crate::session::clock::now_ms(),
            snippets: false,
        };
        match self.inner.discovery.search(query).await {
            Ok(result) => Ok((
                result.hits.into_iter().map(|h| h.meta.id).collect(),
                result.total,
            )),
            Err(e) => {
                tracing::debug!(error = %e, "discovery search failed");
                Ok((Vec::new(), 0))
            }
        }
    }

    /// Up to `COMPLETIONS` single-token values for `typed`, each resolving to one session:
    /// the shortest unique prefix (at least 8 characters, or the whole id) of the sessions whose
    /// id starts with it, in listing rank, else of discovery's hits for it.
    pub async fn complete_session(&self, typed: &str) -> Result<Vec<String>, McpError> {
        let typed = typed.trim().to_string();
        let snapshot = Arc::new(self.snapshot().await?);
        let cwd = self.inner.cwd.clone();
        let (ranked, listing) = {
            let (snapshot, typed) = (snapshot.clone(), typed.clone());
            tokio::task::spawn_blocking(move || {
                let ranked: Vec<String> = snapshot
                    .ranked(cwd.as_deref(), usize::MAX)
                    .into_iter()
                    .map(|e| e.id)
                    .filter(|id| id.starts_with(&typed))
                    .take(COMPLETIONS * 2)
                    .collect();
                (ranked, snapshot.listing.clone())
            })
            .await
            .map_err(|e| internal(format!("the completion task failed: {e}")))?
        };
        let mut ids = ranked;
        if ids.is_empty() && !typed.is_empty() && !typed.contains(char::is_whitespace) {
            ids = self.search(&typed, COMPLETIONS * 2).await?.0;
        }
        tokio::task::spawn_blocking(move || unique_tokens(&listing, &ids, &typed))
            .await
            .map_err(|e| internal(format!("the completion task failed: {e}")))
    }
}
