//! Discovery search over the index (SPEC §8): a ranked blend of fuzzy title and id-prefix
//! matching (nucleo), cwd substring, full-text conversation matches (FTS5 bm25), recency of last
//! activity and same-cwd affinity; per hit the matched fields and a short snippet.
//!
//! Per-session fields (id, title, cwd, times, sizes, first prompt) are held in memory, loaded from
//! the database when another connection committed (throttled by [`RELOAD_EVERY`], so a search
//! during an index build does not reload on every keystroke; full-text hits on sessions newer
//! than that copy are fetched by row). Fuzzy matching runs over that copy; conversation text is
//! matched by FTS5 in the database. A search only reads: it never blocks the indexer (WAL).
//!
//! Invariant: the agent's own session and sessions the caller's listing does not hold are never
//! hits; every hit has at least one matched field unless the query is empty (then every
//! session is a hit, ranked by recency and affinity alone).
//! Proof: unit tests below (query terms); `tests/discovery/search.rs` (labelled queries over the
//! demo home and a generated home, exclusion of the agent, snippets).

use super::index::{self, IndexError, Result};
use super::rank::{self, Field, Matches};
use crate::session::title::own_words_of_title;
use nucleo_matcher::pattern::{AtomKind, CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The in-memory copy of the session rows is reloaded after another connection committed, at
/// most every ten times what the last load took, and at least this often.
pub const RELOAD_EVERY: Duration = Duration::from_millis(500);
/// How old the in-memory copy may get while a background indexer keeps it current.
pub const STALE_AFTER: Duration = Duration::from_secs(10);
/// The `cwd_key` of a row without an interned cwd.
const NO_CWD: u32 = u32::MAX;
/// Full-text rows considered per query (best bm25 first).
const FTS_ROWS: usize = 1000;
/// A fuzzy title or first-prompt match below this quality does not count.
const FUZZY_FLOOR: f64 = 0.4;
/// Snippet length in tokens.
const SNIPPET_TOKENS: usize = 16;

/// One session as the index describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    /// The row's SQLite rowid in `sessions` (stable until the session is removed or the
    /// database rebuilt; full-text rows name their session by it).
    pub rowid: i64,
    /// The whole session id.
    pub id: String,
    /// The indexed title; `None` when the session had none (or its read failed).
    pub title: Option<String>,
    /// The session's working directory, as its header wrote it.
    pub cwd: Option<String>,
    /// Creation time, epoch milliseconds.
    pub created_at: i64,
    /// Time of the latest event, epoch milliseconds (what recency ranks by).
    pub last_activity: i64,
    /// Projected conversation items (SPEC §3.5); 0 for a session whose read failed.
    pub messages: u64,
    /// UTF-8 bytes of projected conversation text; 0 for a session whose read failed.
    pub conversation_bytes: u64,
    /// The first user prompt, at most 512 bytes.
    pub first_prompt: Option<String>,
    /// The other agent it came from (`claude`, `codex`); `None` for a dsh session.
    pub source: Option<String>,
    /// The id and cwd lower-cased once, for matching, and where the id's own part starts
    /// (after an agent namespace).
    id_lower: String,
    own_start: usize,
    /// Where `id_lower` sits in the searcher's id arena (start, length), as titles do.
    id_span: Option<(u32, u32)>,
    cwd_lower: Option<String>,
    /// Which of the searcher's distinct cwds this row's is ([`NO_CWD`] for none, or for a row
    /// fetched outside the in-memory copy): a cwd is matched once per search, not once per row.
    cwd_key: u32,
    /// Which characters title, id and cwd hold ([`char_mask`]): a row whose fields lack one of
    /// the query's characters cannot match in memory and is skipped without matching.
    masks: [u64; 3],
    /// Where the title, lower-cased, sits in the searcher's title arena when it is plain ASCII
    /// (start, length): a query's words are first tried on it as plain subsequences
    /// ([`subsequences`]), and only a title holding them all is scored. One arena in scan
    /// order, not a buffer per row: the scan reads it sequentially instead of missing the
    /// cache on every row.
    title_span: Option<(u32, u32)>,
}

impl SessionInfo {
    /// A row for a session known from a listing only (no index): `rowid` is any number unique
    /// among the rows searched together; no messages, sizes or first prompt are known, and the
    /// last activity is taken to be the creation time.
    pub fn listed(
        rowid: i64,
        id: String,
        title: Option<String>,
        cwd: Option<String>,
        created_at: i64,
        source: Option<String>,
    ) -> SessionInfo {
        SessionInfo {
            rowid,
            id,
            title,
            cwd,
            created_at,
            last_activity: created_at,
            messages: 0,
            conversation_bytes: 0,
            first_prompt: None,
            source,
            id_lower: String::new(),
            own_start: 0,
            id_span: None,
            cwd_lower: None,
            cwd_key: NO_CWD,
            masks: [0; 3],
            title_span: None,
        }
        .matchable()
    }

    /// Fills in the lower-cased fields and character masks matching reads.
    fn matchable(mut self) -> SessionInfo {
        self.id_lower = self.id.to_lowercase();
        self.own_start = self.id_lower.find(':').map_or(0, |i| i + 1);
        self.cwd_lower = self.cwd.as_deref().map(str::to_lowercase);
        self.masks = [
            self.title
                .as_deref()
                .map_or(0, |t| char_mask(own_words_of_title(t))),
            char_mask(&self.id_lower),
            self.cwd_lower.as_deref().map_or(0, char_mask),
        ];
        self
    }
}

/// An in-memory copy of the session rows built off the searcher ([`Searcher::load`]).
pub struct Loaded {
    rows: Arc<Vec<SessionInfo>>,
    at: Arc<HashMap<i64, u32>>,
    cwds: Arc<Vec<(String, String)>>,
    titles: Arc<Vec<u8>>,
    ids: Arc<Vec<u8>>,
    cost: Duration,
}

/// A search request.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    /// What was typed (trimmed before matching); an empty or blank text makes every listed
    /// session but the agent's a hit.
    pub text: String,
    /// The agent's own session: never a hit.
    pub agent: Option<String>,
    /// The agent's cwd, for affinity.
    pub cwd: Option<String>,
    /// At most this many hits are returned (0: none, though `total` still counts them).
    pub limit: usize,
    /// Epoch ms "now" for recency.
    pub now_ms: i64,
    /// Compute snippets of conversation matches (the popup shows none, so it asks for none).
    pub snippets: bool,
}

/// One hit. Serialized with keys in this order: `sessionId`, `title`, `firstPrompt`, `cwd`,
/// `createdAt`, `lastActivity`, `messages`, `conversationBytes`, `source`, `score`, `matched`,
/// `snippet` (`title`, `firstPrompt`, `cwd`, `source` and `snippet` are `null` when absent).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// `sessionId`: the whole session id.
    #[serde(rename = "sessionId")]
    pub session_id: String,
    /// `title`: the indexed title.
    pub title: Option<String>,
    /// `firstPrompt`: the first user prompt, at most 512 bytes.
    #[serde(rename = "firstPrompt")]
    pub first_prompt: Option<String>,
    /// `cwd`: the session's working directory.
    pub cwd: Option<String>,
    /// `createdAt`: creation time, epoch milliseconds.
    #[serde(rename = "createdAt")]
    pub created_at: i64,
    /// `lastActivity`: time of the latest event, epoch milliseconds.
    #[serde(rename = "lastActivity")]
    pub last_activity: i64,
    /// `messages`: projected conversation items.
    pub messages: u64,
    /// `conversationBytes`: UTF-8 bytes of projected conversation text.
    #[serde(rename = "conversationBytes")]
    pub conversation_bytes: u64,
    /// `source`: `claude` or `codex` for another agent's session, `null` for dsh.
    pub source: Option<String>,
    /// `score`: the ranking blend of [`rank::score`], rounded to three decimals; higher is
    /// better.
    pub score: f64,
    /// `matched`: the fields the query matched, strongest first; empty only for an empty query.
    pub matched: Vec<Field>,
    /// `snippet`: a one-line excerpt of the best match, when it was the conversation (only if
    /// [`SearchQuery::snippets`] asked) or the first prompt; `null` otherwise.
    pub snippet: Option<String>,
}

/// Hits, best first, and how many sessions matched in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchResult {
    /// At most [`SearchQuery::limit`] hits, best first (ties: latest activity, then id).
    pub hits: Vec<Hit>,
    /// Sessions that matched in all, before the limit (for "50 of 312").
    pub total: usize,
    /// The index could not answer and the hits come from the listing
    /// ([`Searcher::over_listing`]): their message counts, sizes and first prompts are unknown
    /// (0 and `None`), and no conversation text was searched.
    pub from_listing: bool,
}

/// Runs searches over one index database (a read-only connection of its own).
pub struct Searcher {
    path: PathBuf,
    conn: Option<Connection>,
    /// The (device, inode) of the file `conn` reads.
    file: Option<(u64, u64)>,
    rows: Arc<Vec<SessionInfo>>,
    /// Where each session rowid sits in `rows`.
    at: Arc<HashMap<i64, u32>>,
    /// The distinct cwds of `rows` (as written, and lower-cased), by `cwd_key`.
    cwds: Arc<Vec<(String, String)>>,
    /// The ASCII titles of `rows`, lower-cased, one after another (see `title_span`).
    titles: Arc<Vec<u8>>,
    /// The ids of `rows`, lower-cased, one after another (see `id_span`).
    ids: Arc<Vec<u8>>,
    data_version: Option<i64>,
    loaded_at: Option<Instant>,
    /// How long the last load of the rows took.
    load_cost: Duration,
    matcher: Matcher,
    /// The last query's text and the rows any in-memory field matched (fuzzy title at any score,
    /// id prefix, cwd substring), for the rows it was computed over: a query that extends it can
    /// only match among those (every field is monotone under extension), so typing narrows.
    narrowed: Option<(String, Arc<Vec<SessionInfo>>, Vec<u32>)>,
    /// A background indexer reloads the rows after it writes (see `refresh_rows`).
    background_reload: bool,
    /// Buffers kept from one search to the next (a flag per row, a list of rows): a search over
    /// 100,000 rows does not map fresh pages each time.
    spare_flags: Vec<bool>,
    spare_rows: Vec<u32>,
    /// Searches rows handed to it ([`Searcher::over_listing`]), with no database at all.
    listing_only: bool,
}

impl Searcher {
    /// A searcher of the index database at `path`. Nothing is opened until the first search,
    /// so the database need not exist yet (searching before it does fails with
    /// [`IndexError::Sql`]).
    pub fn new(path: PathBuf) -> Searcher {
        Searcher {
            path,
            conn: None,
            file: None,
            rows: Arc::new(Vec::new()),
            at: Arc::new(HashMap::new()),
            cwds: Arc::new(Vec::new()),
            titles: Arc::new(Vec::new()),
            ids: Arc::new(Vec::new()),
            data_version: None,
            loaded_at: None,
            load_cost: Duration::ZERO,
            matcher: Matcher::new(Config::DEFAULT),
            narrowed: None,
            background_reload: false,
            spare_flags: Vec::new(),
            spare_rows: Vec::new(),
            listing_only: false,
        }
    }

    /// A searcher of `rows` alone, for when the index cannot be used (busy, a full disk, a
    /// path it cannot be made at): titles, ids and cwds are matched as over the index's copy;
    /// nothing matches conversation text, and no database is opened.
    pub fn over_listing(rows: Vec<SessionInfo>) -> Searcher {
        let mut searcher = Searcher::new(PathBuf::new());
        let (rows, at, cwds, titles, ids) = arrange(rows);
        searcher.install(
            Loaded {
                rows: Arc::new(rows),
                at: Arc::new(at),
                cwds: Arc::new(cwds),
                titles: Arc::new(titles),
                ids: Arc::new(ids),
                cost: Duration::ZERO,
            },
            0,
        );
        searcher.listing_only = true;
        searcher
    }

    /// The database this searcher reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self, source: rusqlite::Error) -> IndexError {
        IndexError::Sql {
            path: self.path.clone(),
            source,
        }
    }

    fn connection(&mut self) -> Result<&Connection> {
        if self.conn.is_some() && index::entry_id(&self.path) != self.file {
            // Rebuilt by an indexer (another file now): read the new one.
            self.conn = None;
            self.loaded_at = None;
            self.data_version = None;
        }
        if self.conn.is_none() {
            self.conn = Some(index::open_reader(&self.path)?);
            self.file = index::entry_id(&self.path);
        }
        Ok(self.conn.as_ref().expect("opened"))
    }

    /// Reloads the session rows if the database changed (and the last load is old enough).
    fn refresh_rows(&mut self) -> Result<()> {
        if self.listing_only {
            return Ok(());
        }
        // With a background indexer reloading after its own writes ([`Searcher::install`]), a
        // search keeps the copy it has for up to [`STALE_AFTER`]: full-text hits are read from
        // the database either way, so an append is found at once, and no search waits ~0.4 s
        // for 100,000 rows. Another process's writes are picked up after that long.
        if self.background_reload
            && !self.rows.is_empty()
            && self.loaded_at.is_some_and(|at| at.elapsed() < STALE_AFTER)
        {
            return Ok(());
        }
        // Throttled in proportion to what a load costs: a small index is always current.
        let pause = (self.load_cost * 10).min(RELOAD_EVERY);
        if self.loaded_at.is_some_and(|at| at.elapsed() < pause) {
            return Ok(());
        }
        let version: i64 = {
            let conn = self.connection()?;
            conn.query_row("PRAGMA data_version", [], |r| r.get(0))
        }
        .map_err(|e| self.sql(e))?;
        if self.data_version == Some(version) && self.loaded_at.is_some() {
            self.loaded_at = Some(Instant::now());
            return Ok(());
        }
        let started = Instant::now();
        let rows = {
            let conn = self.connection()?;
            load_rows(conn, None)
        }
        .map_err(|e| self.sql(e))?;
        self.load_cost = started.elapsed();
        let (rows, at, cwds, titles, ids) = arrange(rows);
        self.titles = Arc::new(titles);
        self.ids = Arc::new(ids);
        self.at = Arc::new(at);
        self.cwds = Arc::new(cwds);
        self.rows = Arc::new(rows);
        self.data_version = Some(version);
        self.loaded_at = Some(Instant::now());
        Ok(())
    }

    /// What `PRAGMA data_version` says on this searcher's connection now (it moves when
    /// another connection commits).
    pub fn data_version_now(&mut self) -> Result<i64> {
        let version = self
            .connection()?
            .query_row("PRAGMA data_version", [], |r| r.get(0));
        version.map_err(|e| self.sql(e))
    }

    /// The in-memory copy of the session rows of the database at `path`, built on the calling
    /// thread with a connection of its own (no searcher is locked meanwhile).
    pub fn load(path: &Path) -> Result<Loaded> {
        let conn = index::open_reader(path)?;
        let started = Instant::now();
        let rows = load_rows(&conn, None).map_err(|source| IndexError::Sql {
            path: path.to_path_buf(),
            source,
        })?;
        let (rows, at, cwds, titles, ids) = arrange(rows);
        Ok(Loaded {
            rows: Arc::new(rows),
            at: Arc::new(at),
            cwds: Arc::new(cwds),
            titles: Arc::new(titles),
            ids: Arc::new(ids),
            cost: started.elapsed(),
        })
    }

    /// Takes `loaded` as the in-memory copy, current as of `data_version` (read with
    /// [`Searcher::data_version_now`] before the load began).
    pub fn install(&mut self, loaded: Loaded, data_version: i64) {
        self.rows = loaded.rows;
        self.at = loaded.at;
        self.cwds = loaded.cwds;
        self.titles = loaded.titles;
        self.ids = loaded.ids;
        self.load_cost = loaded.cost;
        self.data_version = Some(data_version);
        self.loaded_at = Some(Instant::now());
    }

    /// Whether a background indexer reloads the rows after its writes (then searches reload
    /// only a copy older than [`STALE_AFTER`]).
    pub fn set_background_reload(&mut self, on: bool) {
        self.background_reload = on;
    }

    /// Whether a background indexer reloads the rows ([`Searcher::set_background_reload`]).
    pub fn background_reload(&self) -> bool {
        self.background_reload
    }

    /// Forgets the in-memory copy: the next search reloads it (after this process indexed).
    pub fn invalidate(&mut self) {
        self.loaded_at = None;
    }

    /// Every indexed session (the in-memory copy, refreshed as [`Searcher::search`] does).
    pub fn sessions(&mut self) -> Result<Arc<Vec<SessionInfo>>> {
        self.refresh_rows()?;
        Ok(self.rows.clone())
    }

    /// Runs `query` over the sessions in `listed` (all indexed sessions when `None`).
    pub fn search(
        &mut self,
        query: &SearchQuery,
        listed: Option<&HashSet<String>>,
    ) -> Result<SearchResult> {
        if self.listing_only {
            return self.search_inner(query, listed);
        }
        // One read transaction: every statement sees one snapshot, and the WAL read lock is
        // taken once instead of once per statement (a common word reads a thousand rows).
        let began = match self.connection() {
            Ok(conn) => conn.execute_batch("BEGIN").map_err(|e| self.sql(e)),
            Err(e) => Err(e),
        };
        let result = began.and_then(|()| self.search_inner(query, listed));
        if let Some(conn) = &self.conn {
            // Ends the read transaction (none is open when a rebuilt file was reopened).
            let _ = conn.execute_batch("COMMIT");
        }
        if result.is_err() {
            // A rebuilt database is another file: open it afresh next time.
            self.conn = None;
            self.loaded_at = None;
            self.data_version = None;
        }
        result
    }

    fn search_inner(
        &mut self,
        query: &SearchQuery,
        listed: Option<&HashSet<String>>,
    ) -> Result<SearchResult> {
        self.refresh_rows()?;
        let rows = self.rows.clone();
        let at = self.at.clone();
        let titles = self.titles.clone();
        let ids = self.ids.clone();
        let text = query.text.trim();
        let keep = |info: &SessionInfo| {
            query.agent.as_deref() != Some(info.id.as_str())
                && listed.is_none_or(|l| l.contains(&info.id))
        };
        // Full text first: (conversation quality, title-row quality, best chunk) per session.
        let mut fts: HashMap<i64, (f64, f64, i64)> = HashMap::new();
        if !self.listing_only {
            let path = self.path.clone();
            let conn = self.connection()?;
            let hits = fts_hits(conn, text).map_err(|e| IndexError::Sql { path, source: e })?;
            for (row, sid, kind, bm25) in hits {
                let q = rank::conversation_quality(bm25);
                let entry = fts.entry(sid).or_default();
                if kind == 1 {
                    if q > entry.0 {
                        entry.0 = q;
                        entry.2 = row;
                    }
                } else {
                    entry.1 = entry.1.max(q);
                }
            }
        }
        // The full-text hits by position in `rows` (one flag per row, so the scans below look
        // up nothing per row), and those on sessions indexed after `rows` was loaded.
        let mut fts_here: Vec<bool> = std::mem::take(&mut self.spare_flags);
        fts_here.clear();
        let mut fts_positions: Vec<u32> = Vec::new();
        let mut fts_unknown: Vec<i64> = Vec::new();
        if !fts.is_empty() {
            fts_here.resize(rows.len(), false);
            for sid in fts.keys() {
                match at.get(sid) {
                    Some(&i) => {
                        fts_here[i as usize] = true;
                        fts_positions.push(i);
                    }
                    None => fts_unknown.push(*sid),
                }
            }
        }
        let is_fts = |i: usize| fts_here.get(i).copied().unwrap_or(false);
        let lower = text.to_lowercase();
        // Words are matched as plain fuzzy atoms: no operator syntax, so narrowing holds.
        let pattern = Pattern::new(
            text,
            CaseMatching::Ignore,
            Normalization::Smart,
            AtomKind::Fuzzy,
        );
        let perfect = perfect_score(&pattern, text, &mut self.matcher);
        let mut buf = Vec::new();
        // Each distinct cwd matched once: (substring score, whether it is the agent's).
        let cwd_scores: Vec<(f64, bool)> = self
            .cwds
            .iter()
            .map(|(cwd, cwd_lower)| {
                (
                    cwd_match(cwd_lower, &lower),
                    query.cwd.as_deref() == Some(cwd.as_str()),
                )
            })
            .collect();
        let mut scored = TopK::new(query.limit);
        let same_cwd = |info: &SessionInfo| {
            query.cwd.is_some()
                && match cwd_scores.get(info.cwd_key as usize) {
                    Some(&(_, same)) => same,
                    None => info.cwd == query.cwd,
                }
        };
        let score_row = |info: &SessionInfo, m: Matches| {
            if !text.is_empty() && !m.any() {
                return None;
            }
            if !keep(info) {
                return None;
            }
            Some(rank::score(
                &m,
                info.last_activity,
                query.now_ms,
                same_cwd(info),
            ))
        };
        // See [`recency_at_most`].
        let mut recency_bound: Option<(i64, f64, u32)> = None;
        // Rows to look at in memory: all, or those the previous query matched when this one
        // extends it (same rows).
        let mut spare = std::mem::take(&mut self.spare_rows);
        let narrow: Option<Vec<u32>> = match self.narrowed.take() {
            Some((before, over, indices))
                if !before.is_empty()
                    && text.starts_with(before.as_str())
                    && Arc::ptr_eq(&over, &rows) =>
            {
                Some(indices)
            }
            Some((_, _, indices)) => {
                spare = indices;
                None
            }
            None => None,
        };
        let mut matched_here: Vec<u32> = spare;
        matched_here.clear();
        let need = query_mask(text);
        let words = fuzzy_words(text);
        // One row: its in-memory fields matched (`memory`: not for a full-text hit outside the
        // narrowed rows), completed with its full-text ones, scored and offered.
        let mut consider = |i: usize, memory: bool, matcher: &mut Matcher| {
            let info = &rows[i];
            let mut m = Matches::default();
            let mut any = false;
            let mut title_pending = false;
            // The title holds every word as typed: a match above the floor ([`contains_words`]).
            let mut certain = false;
            if memory && !text.is_empty() {
                // A field lacking one of the query's characters cannot match: not even tried.
                let [title_mask, id_mask, cwd_mask] = info.masks.map(|have| have & need == need);
                if info.title.is_some() && title_mask {
                    // An ASCII title that lacks one of the words in order cannot match.
                    let hay = info
                        .title_span
                        .map(|(at, len)| &titles[at as usize..(at + len) as usize]);
                    title_pending = match (hay, &words) {
                        (Some(hay), Some(words)) => {
                            certain = contains_words(hay, words);
                            certain || subsequences(hay, words)
                        }
                        _ => true,
                    };
                }
                if id_mask {
                    let id = match info.id_span {
                        Some((at, len)) => &ids[at as usize..(at + len) as usize],
                        None => info.id_lower.as_bytes(),
                    };
                    let (id, id_hit) = id_prefix(id, info.own_start, lower.as_bytes());
                    m.id = id;
                    any |= id_hit;
                }
                if let (Some(cwd), true) = (&info.cwd_lower, cwd_mask) {
                    m.cwd = match cwd_scores.get(info.cwd_key as usize) {
                        Some(&(score, _)) => score,
                        None => cwd_match(cwd, &lower),
                    };
                    any |= m.cwd > 0.0;
                }
            }
            let (conversation, heading) = match is_fts(i).then(|| fts.get(&info.rowid)).flatten() {
                Some(&(conversation, heading, _)) => (conversation, heading),
                None => (0.0, 0.0),
            };
            m.conversation = conversation;
            if title_pending {
                // A title certain to match: when even a perfect title could not lift the row
                // into the best hits kept so far, it is counted without being scored (the rows
                // come newest first, so most old rows stop here for a word every title holds).
                if certain && scored.is_full() {
                    if !keep(info) {
                        // Never a hit (the agent's own or an unlisted session).
                        matched_here.push(i as u32);
                        return;
                    }
                    let recency =
                        recency_at_most(&mut recency_bound, info.last_activity, query.now_ms);
                    let best_case = Matches { title: 1.0, ..m };
                    let ranked = Ranked {
                        score: rank::score_with_recency(&best_case, recency, same_cwd(info)),
                        info,
                        matches: best_case,
                    };
                    if !scored.would_take(&ranked) {
                        matched_here.push(i as u32);
                        scored.offered += 1;
                        return;
                    }
                }
                // The person's own words: a label the session referenced is no title match.
                let title = own_words_of_title(info.title.as_deref().unwrap_or_default());
                let (q, hit) = fuzzy(&pattern, title, perfect, matcher, &mut buf);
                m.title = q;
                any |= hit;
            }
            if any {
                matched_here.push(i as u32);
            }
            // The heading row holds the title and the first prompt: a word match there that
            // fuzzy title matching missed is the first prompt's.
            if heading > 0.0 && m.title == 0.0 {
                m.first_prompt = heading;
            }
            if !(m.any() || text.is_empty()) {
                return;
            }
            if scored.is_full() {
                // Turned away on a bound when it cannot be kept: no `exp` for most rows.
                if !keep(info) {
                    return;
                }
                let recency = recency_at_most(&mut recency_bound, info.last_activity, query.now_ms);
                let bound = Ranked {
                    score: rank::score_with_recency(&m, recency, same_cwd(info)),
                    info,
                    matches: m,
                };
                if !scored.would_take(&bound) {
                    scored.offered += 1;
                    return;
                }
            }
            if let Some(score) = score_row(info, m) {
                scored.push(Ranked {
                    score,
                    info,
                    matches: m,
                });
            }
        };
        match &narrow {
            Some(indices) => {
                for &i in indices {
                    consider(i as usize, true, &mut self.matcher);
                }
                // Full-text hits outside the narrowed rows still count.
                if !fts_positions.is_empty() {
                    let mut listed_here = vec![false; rows.len()];
                    for &i in indices {
                        listed_here[i as usize] = true;
                    }
                    for &i in &fts_positions {
                        if !listed_here[i as usize] {
                            consider(i as usize, false, &mut self.matcher);
                        }
                    }
                }
            }
            None => {
                for i in 0..rows.len() {
                    consider(i, true, &mut self.matcher);
                }
            }
        }
        self.narrowed = Some((text.to_string(), rows.clone(), matched_here));
        self.spare_rows = narrow.unwrap_or_default();
        for &i in &fts_positions {
            fts_here[i as usize] = false;
        }
        self.spare_flags = fts_here;
        // Full-text hits on sessions indexed after the in-memory copy was taken.
        let mut fetched = Vec::new();
        if !fts_unknown.is_empty() {
            let path = self.path.clone();
            let conn = self.connection()?;
            for rowid in fts_unknown {
                let found = load_rows(conn, Some(rowid)).map_err(|e| IndexError::Sql {
                    path: path.clone(),
                    source: e,
                })?;
                fetched.extend(found);
            }
        }
        for info in &fetched {
            let (conversation, heading, _) = fts[&info.rowid];
            let m = Matches {
                conversation,
                first_prompt: heading,
                ..Matches::default()
            };
            if let Some(score) = score_row(info, m) {
                scored.push(Ranked {
                    score,
                    info,
                    matches: m,
                });
            }
        }
        let total = scored.offered;
        let scored = scored.into_best_first();
        let mut hits = Vec::with_capacity(scored.len());
        for Ranked {
            score,
            info,
            matches: m,
        } in scored
        {
            let fields = m.fields();
            let snippet = match fields.first() {
                Some(Field::Conversation) => match fts.get(&info.rowid) {
                    Some(&(_, _, row)) if query.snippets => {
                        let path = self.path.clone();
                        let conn = self.connection()?;
                        let terms = query_terms(text);
                        snippet(conn, &terms, row)
                            .map_err(|e| IndexError::Sql { path, source: e })?
                    }
                    _ => None,
                },
                Some(Field::FirstPrompt) => info.first_prompt.as_deref().map(short),
                _ => None,
            };
            hits.push(Hit {
                session_id: info.id.clone(),
                title: info.title.clone(),
                first_prompt: info.first_prompt.clone(),
                cwd: info.cwd.clone(),
                created_at: info.created_at,
                last_activity: info.last_activity,
                messages: info.messages,
                conversation_bytes: info.conversation_bytes,
                source: info.source.clone(),
                score: (score * 1000.0).round() / 1000.0,
                matched: fields,
                snippet,
            });
        }
        Ok(SearchResult {
            hits,
            total,
            from_listing: self.listing_only,
        })
    }
}

/// The in-memory copy as searches walk it: most recent activity first (the best hits by recency
/// come first, so the top-k keeps them and turns the rest away cheaply), where each rowid sits,
/// and the distinct cwds with each row's key into them.
#[allow(clippy::type_complexity)]
fn arrange(
    mut rows: Vec<SessionInfo>,
) -> (
    Vec<SessionInfo>,
    HashMap<i64, u32>,
    Vec<(String, String)>,
    Vec<u8>,
    Vec<u8>,
) {
    rows.sort_by(|a, b| {
        b.last_activity
            .cmp(&a.last_activity)
            .then_with(|| b.rowid.cmp(&a.rowid))
    });
    let at = rows
        .iter()
        .enumerate()
        .map(|(i, info)| (info.rowid, i as u32))
        .collect();
    let mut keys: HashMap<String, u32> = HashMap::new();
    let mut cwds = Vec::new();
    let mut titles = Vec::new();
    let mut ids = Vec::new();
    for info in &mut rows {
        if let (Ok(start), Ok(len)) = (u32::try_from(ids.len()), u32::try_from(info.id_lower.len()))
        {
            ids.extend_from_slice(info.id_lower.as_bytes());
            info.id_span = Some((start, len));
        }
        if let Some(title) = info
            .title
            .as_deref()
            .map(own_words_of_title)
            .filter(|t| t.is_ascii())
        {
            if let (Ok(start), Ok(len)) = (u32::try_from(titles.len()), u32::try_from(title.len()))
            {
                titles.extend(title.bytes().map(|b| b.to_ascii_lowercase()));
                info.title_span = Some((start, len));
            }
        }
        if let (Some(cwd), Some(lower)) = (&info.cwd, &info.cwd_lower) {
            info.cwd_key = *keys.entry(cwd.clone()).or_insert_with(|| {
                cwds.push((cwd.clone(), lower.clone()));
                (cwds.len() - 1) as u32
            });
        }
    }
    (rows, at, cwds, titles, ids)
}

/// An upper bound of the recency of a row active at `last_activity`: the recency of a row at
/// least as recent, computed at most 256 bounds ago (`slot`), else computed here. Rows mostly
/// come newest first, so one `exp` serves many rows.
fn recency_at_most(slot: &mut Option<(i64, f64, u32)>, last_activity: i64, now_ms: i64) -> f64 {
    match *slot {
        Some((at, recency, uses)) if last_activity <= at && uses < 256 => {
            *slot = Some((at, recency, uses + 1));
            recency
        }
        _ => {
            let recency = rank::recency(last_activity, now_ms);
            *slot = Some((last_activity, recency, 0));
            recency
        }
    }
}

/// A scored hit before it becomes a [`Hit`].
struct Ranked<'a> {
    score: f64,
    info: &'a SessionInfo,
    matches: Matches,
}

impl Ranked<'_> {
    /// Best first: higher score, then more recent activity, then id.
    fn order(&self, other: &Self) -> std::cmp::Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| other.info.last_activity.cmp(&self.info.last_activity))
            .then_with(|| self.info.id.cmp(&other.info.id))
    }
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.order(other).is_eq()
    }
}
impl Eq for Ranked<'_> {}
impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked<'_> {
    /// Worse is greater, so a max-heap's top is the worst hit kept.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order(other)
    }
}

/// The best `limit` hits offered and how many were offered: memory and work in proportion to
/// what is shown, not to how many sessions matched (a common word matches all of them).
struct TopK<'a> {
    limit: usize,
    heap: std::collections::BinaryHeap<Ranked<'a>>,
    offered: usize,
}

impl<'a> TopK<'a> {
    fn new(limit: usize) -> TopK<'a> {
        TopK {
            limit,
            heap: std::collections::BinaryHeap::with_capacity(limit.min(4096) + 1),
            offered: 0,
        }
    }

    fn push(&mut self, hit: Ranked<'a>) {
        self.offered += 1;
        if self.heap.len() < self.limit {
            self.heap.push(hit);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if hit.order(&worst).is_lt() {
                *worst = hit;
            }
        }
    }

    /// Whether as many hits as shown are kept already (only then can a row be turned away).
    fn is_full(&self) -> bool {
        self.heap.len() >= self.limit
    }

    /// Whether `hit` would be kept now.
    fn would_take(&self, hit: &Ranked<'_>) -> bool {
        if !self.is_full() {
            return true;
        }
        self.heap
            .peek()
            .is_some_and(|worst| hit.order(worst).is_lt())
    }

    fn into_best_first(self) -> Vec<Ranked<'a>> {
        self.heap.into_sorted_vec()
    }
}

/// A set of the characters `text` holds, as bits: ASCII letters (case-folded) and digits one bit
/// each, other ASCII characters sharing the rest. Text with any other character may match
/// anything after normalization (`é` matches `e`), so it holds every bit.
fn char_mask(text: &str) -> u64 {
    let mut mask = 0u64;
    for c in text.bytes() {
        if !c.is_ascii() {
            return u64::MAX;
        }
        mask |= 1 << char_bit(c);
    }
    mask
}

fn char_bit(c: u8) -> u32 {
    match c.to_ascii_lowercase() {
        c @ b'a'..=b'z' => u32::from(c - b'a'),
        c @ b'0'..=b'9' => 26 + u32::from(c - b'0'),
        c => 36 + u32::from(c) % 28,
    }
}

/// The characters every in-memory match of `text` needs (whitespace only separates words);
/// 0 (no filtering) for text outside plain ASCII or with escapes.
fn query_mask(text: &str) -> u64 {
    if !text.is_ascii() || text.contains('\\') {
        return 0;
    }
    text.bytes()
        .filter(|c| !c.is_ascii_whitespace())
        .fold(0, |mask, c| mask | 1 << char_bit(c))
}

/// A one-line excerpt of at most 80 characters.
fn short(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= 80 {
        return line;
    }
    let mut out: String = line.chars().take(79).collect();
    out.push('…');
    out
}

fn load_rows(conn: &Connection, rowid: Option<i64>) -> rusqlite::Result<Vec<SessionInfo>> {
    let sql = "SELECT rowid, id, title, cwd, created_at, last_activity, messages,
               conversation_bytes, first_prompt, source FROM sessions";
    let map = |r: &rusqlite::Row<'_>| {
        Ok(SessionInfo::matchable(SessionInfo {
            rowid: r.get(0)?,
            id: r.get(1)?,
            title: r.get(2)?,
            cwd: r.get(3)?,
            created_at: r.get(4)?,
            last_activity: r.get(5)?,
            messages: r.get::<_, i64>(6)?.max(0) as u64,
            conversation_bytes: r.get::<_, i64>(7)?.max(0) as u64,
            first_prompt: r.get(8)?,
            source: r.get(9)?,
            id_lower: String::new(),
            own_start: 0,
            id_span: None,
            cwd_lower: None,
            cwd_key: NO_CWD,
            masks: [0; 3],
            title_span: None,
        }))
    };
    match rowid {
        Some(rowid) => Ok(conn
            .query_row(&format!("{sql} WHERE rowid = ?1"), [rowid], map)
            .optional()?
            .into_iter()
            .collect()),
        None => {
            let mut stmt = conn.prepare(sql)?;
            let rows = stmt.query_map([], map)?;
            rows.collect()
        }
    }
}

/// The words of a query as full-text terms: lower-cased, at most 16, each with whether it is
/// matched as a prefix (only the word being typed, and only from three characters on: a short
/// prefix expands to thousands of terms whose lists FTS5 must merge).
pub fn query_terms(text: &str) -> Vec<(String, bool)> {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .take(16)
        .collect();
    let last = words.len().saturating_sub(1);
    words
        .iter()
        .enumerate()
        .map(|(i, word)| (word.to_lowercase(), i == last && word.chars().count() >= 3))
        .collect()
}

/// Terms as an FTS5 expression: each quoted (a prefix marked `*`), all required. `None` when
/// there are none.
fn expression(terms: &[(String, bool)]) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    let quoted: Vec<String> = terms
        .iter()
        .map(|(word, prefix)| format!("\"{word}\"{}", if *prefix { "*" } else { "" }))
        .collect();
    Some(quoted.join(" AND "))
}

/// The words of a query as an FTS5 expression (see [`query_terms`]). `None` when the query has
/// no word characters.
pub fn fts_expression(text: &str) -> Option<String> {
    expression(&query_terms(text))
}

/// (row, session rowid, row kind, bm25) of the newest matching rows. Rows are written oldest
/// activity first (and appended chunks last), so the newest rows are the recently active
/// sessions.
///
/// FTS5's `bm25()` first counts, for every term of the expression, all the rows that hold it
/// (its inverse document frequency), which for a word in every session is a walk over 100,000
/// rows per query. So the rows are found without it, and bm25 is computed over the query's
/// selective terms only: whole words held by fewer than [`FTS_ROWS`] rows. A word held by more
/// weighs next to nothing in bm25 anyway (FTS5 floors the weight of a word in half the rows at
/// ~0); when no term is selective every row gets that floor (a match, ranked by recency).
fn fts_hits(conn: &Connection, text: &str) -> rusqlite::Result<Vec<(i64, i64, i64, f64)>> {
    let terms = query_terms(text);
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    // The owner join sits outside the limited subquery: FTS5 walks its lists newest row first
    // and stops at the limit only when it alone answers the ORDER BY.
    let mut stmt = conn.prepare_cached(
        "SELECT f.rowid, o.sid, o.kind FROM
            (SELECT rowid FROM doc WHERE doc MATCH ?1 ORDER BY rowid DESC LIMIT ?2) AS f
         JOIN owner AS o ON o.row = f.rowid",
    )?;
    let mut newest = |terms: &[(String, bool)]| -> rusqlite::Result<Vec<(i64, i64, i64)>> {
        let expr = expression(terms).expect("terms");
        stmt.query_map(params![expr, FTS_ROWS as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect()
    };
    // A word being typed is a prefix, and FTS5 answers a prefix by merging the whole list of
    // every word it starts (`the*`: ~25 ms over 100,000 sessions) before it can stop at the
    // limit. So the whole word is tried first: when it alone fills the window (a complete,
    // common word), the window is its rows and the longer words are not looked up.
    let whole: Vec<(String, bool)> = terms.iter().map(|(w, _)| (w.clone(), false)).collect();
    let mut found = newest(&whole)?;
    if found.len() < FTS_ROWS && terms.iter().any(|(_, prefix)| *prefix) {
        found = newest(&terms)?;
    }
    let Some(oldest) = found.iter().map(|f| f.0).min() else {
        return Ok(Vec::new());
    };
    let mut selective = Vec::new();
    for (word, prefix) in &terms {
        if *prefix {
            continue;
        }
        let one = expression(&[(word.clone(), false)]).expect("a word");
        let mut count = conn.prepare_cached(
            "SELECT count(*) FROM (SELECT rowid FROM doc WHERE doc MATCH ?1 LIMIT ?2)",
        )?;
        let held: i64 = count.query_row(params![one, FTS_ROWS as i64], |r| r.get(0))?;
        if (held as usize) < FTS_ROWS {
            selective.push((word.clone(), false));
        }
    }
    let mut ranks: HashMap<i64, f64> = HashMap::new();
    if let Some(rare) = expression(&selective) {
        // Fewer than FTS_ROWS rows hold these words: their bm25 is cheap to compute.
        let mut stmt = conn.prepare_cached(
            "SELECT rowid, bm25(doc) FROM doc WHERE doc MATCH ?1 AND rowid >= ?2",
        )?;
        let rows = stmt.query_map(params![rare, oldest], |r| Ok((r.get(0)?, r.get(1)?)))?;
        for row in rows {
            let (rowid, bm25): (i64, f64) = row?;
            ranks.insert(rowid, bm25);
        }
    }
    Ok(found
        .into_iter()
        .map(|(row, sid, kind)| {
            (
                row,
                sid,
                kind,
                ranks.get(&row).copied().unwrap_or(BM25_FLOOR),
            )
        })
        .collect())
}

/// The bm25 of a row matched only by words most rows hold (FTS5's own floor for such a word's
/// weight, 1e-6, times a typical term-frequency factor).
const BM25_FLOOR: f64 = -1e-6;

/// The snippet of row `row` (a conversation chunk that matched): a window of its text around
/// the first word a query term matches ([`snippet_of`]). FTS5's own `snippet()` would evaluate
/// the whole query again for the row, and a prefix term expands over the whole index each time
/// (13 ms per snippet for `the*` over 100,000 sessions); the row's text alone is one lookup.
fn snippet(
    conn: &Connection,
    terms: &[(String, bool)],
    row: i64,
) -> rusqlite::Result<Option<String>> {
    let mut stmt = conn.prepare_cached("SELECT body FROM chunk WHERE row = ?1")?;
    let body: Option<String> = stmt.query_row([row], |r| r.get(0)).optional()?;
    Ok(body.map(|body| snippet_of(&body, terms, SNIPPET_TOKENS)))
}

/// About `tokens` words of `body` on one line, starting up to three words before the first
/// word that equals a term (or starts with it, for a prefix term), case-insensitively; from the
/// start of `body` when no word does (FTS5 also matched it after folding diacritics). `…` marks
/// a cut at either end.
pub fn snippet_of(body: &str, terms: &[(String, bool)], tokens: usize) -> String {
    // Word spans: maximal runs of alphanumeric characters, as the tokenizer splits them.
    let mut words: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (i, c) in body.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                words.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, body.len()));
    }
    let matches = |word: &str, term: &str, prefix: bool| {
        if word.is_ascii() {
            // No allocation for the common case: compared as bytes, case folded.
            let (word, term) = (word.as_bytes(), term.as_bytes());
            let head = if prefix {
                word.get(..term.len())
            } else {
                Some(word)
            };
            head.is_some_and(|head| head.eq_ignore_ascii_case(term))
        } else {
            let word = word.to_lowercase();
            word == term || (prefix && word.starts_with(term))
        }
    };
    let hit = words.iter().position(|&(s, e)| {
        terms
            .iter()
            .any(|(term, prefix)| matches(&body[s..e], term, *prefix))
    });
    let first = hit.map_or(0, |i| i.saturating_sub(3));
    let last = (first + tokens.max(1)).min(words.len());
    if first >= last {
        return short_keep(body);
    }
    let from = if first == 0 { 0 } else { words[first].0 };
    let to = if last == words.len() {
        body.len()
    } else {
        words[last - 1].1
    };
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    out.push_str(&short_keep(&body[from..to]));
    if to < body.len() && !body[to..].trim().is_empty() {
        out.push('…');
    }
    out
}

/// Whitespace folded to single spaces (a snippet is shown on one line).
fn short_keep(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn perfect_score(pattern: &Pattern, text: &str, matcher: &mut Matcher) -> u32 {
    let mut buf = Vec::new();
    let hay = Utf32Str::new(text, &mut buf);
    pattern.score(hay, matcher).unwrap_or(0)
}

/// The query's words as the fuzzy pattern splits them (at whitespace), lower-cased, when the
/// query is plain ASCII without escapes; `None` otherwise (no prefilter).
fn fuzzy_words(text: &str) -> Option<Vec<Vec<u8>>> {
    if !text.is_ascii() || text.contains('\\') {
        return None;
    }
    let words: Vec<Vec<u8>> = text
        .split_ascii_whitespace()
        .map(|w| w.to_ascii_lowercase().into_bytes())
        .collect();
    (!words.is_empty()).then_some(words)
}

/// Whether every word's characters occur in `hay` in order (each word on its own, as the fuzzy
/// matcher needs them): a title for which this fails is no fuzzy match, so it is not scored.
/// Both sides are lower-cased ASCII.
fn subsequences(hay: &[u8], words: &[Vec<u8>]) -> bool {
    words.iter().all(|word| {
        let mut rest = hay.iter();
        word.iter().all(|c| rest.any(|h| h == c))
    })
}

/// Whether every word occurs in `hay` as it is (contiguously). Such a title is a fuzzy match
/// whose quality is at least [`FUZZY_FLOOR`]: each word's contiguous run scores at least its
/// plain per-character score, which is more than the floor's share of a perfect match
/// (property-tested below against nucleo).
fn contains_words(hay: &[u8], words: &[Vec<u8>]) -> bool {
    // Titles are short: a plain scan beats a vectorized searcher's set-up.
    words.iter().all(|word| match word.split_first() {
        None => true,
        Some((&first, rest)) => hay
            .iter()
            .enumerate()
            .any(|(i, &c)| c == first && hay[i + 1..].starts_with(rest)),
    })
}

/// The quality of a fuzzy match (0 below [`FUZZY_FLOOR`]) and whether it matched at all.
fn fuzzy(
    pattern: &Pattern,
    haystack: &str,
    perfect: u32,
    matcher: &mut Matcher,
    buf: &mut Vec<char>,
) -> (f64, bool) {
    if pattern.atoms.is_empty() {
        return (0.0, false);
    }
    let hay = Utf32Str::new(haystack, buf);
    match pattern.score(hay, matcher) {
        Some(score) => {
            let q = rank::fuzzy_quality(score, perfect);
            (if q >= FUZZY_FLOOR { q } else { 0.0 }, true)
        }
        None => (0.0, false),
    }
}

/// Whether the lower-cased `id` (or its part from `own_start`, after an agent namespace) starts
/// with the lower-cased query, and the score: 1 for a prefix of at least two characters.
fn id_prefix(id: &[u8], own_start: usize, lower: &[u8]) -> (f64, bool) {
    let hit = id.starts_with(lower) || id[own_start..].starts_with(lower);
    let score = if hit && lower.len() >= 2 { 1.0 } else { 0.0 };
    (score, hit)
}

/// 0.7 when the (lower-cased) cwd's last component contains the query, 0.5 for elsewhere in it.
fn cwd_match(cwd: &str, lower: &str) -> f64 {
    if lower.is_empty() {
        return 0.0;
    }
    if !cwd.contains(lower) {
        return 0.0;
    }
    let last = cwd
        .rsplit(['/', '\\'])
        .find(|s| !s.is_empty())
        .unwrap_or("");
    if last.contains(lower) {
        0.7
    } else {
        0.5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_become_quoted_prefix_terms() {
        assert_eq!(
            fts_expression("Dark mode").as_deref(),
            Some("\"dark\" AND \"mode\"*")
        );
        assert_eq!(fts_expression("to").as_deref(), Some("\"to\""));
        // FTS syntax in a query is only ever words.
        assert_eq!(
            fts_expression("a\" OR b* NEAR(").as_deref(),
            Some("\"a\" AND \"or\" AND \"b\" AND \"near\"*")
        );
        assert_eq!(fts_expression("  -- ?? "), None);
        assert_eq!(fts_expression(""), None);
    }

    #[test]
    fn id_and_cwd_matches() {
        assert_eq!(id_prefix(b"claude:abcd-1", 7, b"ab"), (1.0, true));
        assert_eq!(
            id_prefix(b"7a712ba3", 0, b"7A71"),
            (0.0, false),
            "callers lower-case both"
        );
        assert_eq!(id_prefix(b"7a712ba3", 0, b"7a71"), (1.0, true));
        assert_eq!(
            id_prefix(b"7a712ba3", 0, b"7"),
            (0.0, true),
            "too short to score"
        );
        assert_eq!(cwd_match("/home/dev/parser", "parser"), 0.7);
        assert_eq!(cwd_match("/home/dev/parser", "dev"), 0.5);
        assert_eq!(cwd_match("/home/dev/parser", "web"), 0.0);
    }

    #[test]
    fn the_subsequence_prefilter_only_ever_lets_matches_through() {
        let words = fuzzy_words("Si CUNA").unwrap();
        assert!(subsequences(b"speed up the sicunar", &words));
        assert!(
            !subsequences(b"speed up the anucis", &words),
            "letters present, order wrong"
        );
        assert!(fuzzy_words("café").is_none());
        assert!(fuzzy_words("a\\ b").is_none());
        assert!(fuzzy_words("   ").is_none());
        // Agreement with the fuzzy matcher on generated titles and queries: whenever the
        // prefilter says no, nucleo finds no match either.
        let mut rng = crate::test_rng::TestRng::new(7);
        let mut matcher = Matcher::new(Config::DEFAULT);
        let mut buf = Vec::new();
        let alphabet = b"abcdeSTU -";
        for _ in 0..5000 {
            let title: String = (0..rng.below(24))
                .map(|_| alphabet[rng.below(alphabet.len())] as char)
                .collect();
            let query: String = (0..1 + rng.below(5))
                .map(|_| alphabet[rng.below(alphabet.len())] as char)
                .collect();
            let Some(words) = fuzzy_words(&query) else {
                continue;
            };
            let pattern = Pattern::new(
                &query,
                CaseMatching::Ignore,
                Normalization::Smart,
                AtomKind::Fuzzy,
            );
            let nucleo = pattern
                .score(Utf32Str::new(&title, &mut buf), &mut matcher)
                .is_some();
            let lower = title.to_ascii_lowercase();
            assert_eq!(
                subsequences(lower.as_bytes(), &words),
                nucleo,
                "title {title:?} query {query:?}"
            );
        }
    }

    #[test]
    fn a_title_holding_the_words_is_a_match_above_the_floor() {
        let mut rng = crate::test_rng::TestRng::new(11);
        let mut matcher = Matcher::new(Config::DEFAULT);
        let mut buf = Vec::new();
        let alphabet = b"abcdeSTU -_/.";
        let mut tried = 0;
        for _ in 0..20_000 {
            let title: String = (0..rng.below(60))
                .map(|_| alphabet[rng.below(alphabet.len())] as char)
                .collect();
            // Words cut out of the title (so it holds them), one to three of them.
            let mut query = String::new();
            for _ in 0..1 + rng.below(3) {
                if title.len() < 2 {
                    break;
                }
                let from = rng.below(title.len() - 1);
                let to = (from + 1 + rng.below(8)).min(title.len());
                query.push_str(title[from..to].trim());
                query.push(' ');
            }
            let Some(words) = fuzzy_words(&query) else {
                continue;
            };
            let lower = title.to_ascii_lowercase();
            if !contains_words(lower.as_bytes(), &words) {
                continue;
            }
            tried += 1;
            let pattern = Pattern::new(
                &query,
                CaseMatching::Ignore,
                Normalization::Smart,
                AtomKind::Fuzzy,
            );
            let perfect = perfect_score(&pattern, &query, &mut matcher);
            let (quality, hit) = fuzzy(&pattern, &title, perfect, &mut matcher, &mut buf);
            assert!(
                hit && quality >= FUZZY_FLOOR,
                "title {title:?} query {query:?}: {quality}"
            );
        }
        assert!(tried > 10_000, "{tried}");
    }

    #[test]
    fn character_masks_only_ever_let_matches_through() {
        let need = query_mask("Dark m");
        assert_eq!(need & char_mask("add a dark mode toggle"), need);
        assert_ne!(need & char_mask("tokenizer"), need);
        assert_eq!(
            query_mask("résumé"),
            0,
            "non-ASCII queries are not filtered"
        );
        assert_eq!(
            char_mask("café"),
            u64::MAX,
            "normalization may match anything"
        );
        assert_eq!(query_mask("a\\ b"), 0);
        assert_eq!(query_mask(""), 0);
    }

    #[test]
    fn a_snippet_is_a_window_around_the_first_matching_word() {
        let body = "one two three four five six seven\neight Lexer nine ten eleven twelve";
        assert_eq!(
            snippet_of(body, &query_terms("lexer"), 4),
            "…six seven eight Lexer…",
            "three words before the match, cut marks at both ends"
        );
        // A prefix term matches the start of a word; a whole term only a whole word.
        assert_eq!(
            snippet_of(body, &query_terms("ele"), 5),
            "…Lexer nine ten eleven twelve"
        );
        assert_eq!(snippet_of(body, &query_terms("ele x"), 2), "one two…");
        // No word matches (FTS5 matched after folding diacritics): the start of the text.
        assert_eq!(
            snippet_of("café au lait", &query_terms("cafe"), 16),
            "café au lait"
        );
        assert_eq!(snippet_of("", &query_terms("x"), 16), "");
        assert_eq!(snippet_of("  ?? ", &query_terms("x"), 16), "??");
    }

    #[test]
    fn snippets_and_excerpts_are_one_line() {
        assert_eq!(short("a\n b\tc"), "a b c");
        assert_eq!(short(&"x ".repeat(100)).chars().count(), 80);
    }
}
