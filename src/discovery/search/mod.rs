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
//! Rooms: `rows` holds the in-memory copy of the session rows, `matching` matches a row's
//! fields in memory, `fts` finds the full-text rows, `top` keeps the best hits, `snippet`
//! cuts a hit's excerpt. This module runs a search through them in named phases.
//!
//! Proof: unit tests in the rooms (query terms, prefilters, masks, snippets) and the bytes of a
//! serialized hit below; `tests/discovery/search.rs` (labelled queries over the demo home and a
//! generated home, exclusion of the agent, snippets, the keys `dsh-refs search --json` prints).

mod fts;
mod matching;
mod rows;
mod scan;
mod snippet;
mod top;

pub use fts::query_terms;
pub use rows::{Loaded, SessionInfo};

use super::index::{self, IndexError, Result};
use super::meta::SessionMeta;
use super::rank::{self, Field};
use fts::fts_hits;
use matching::{cwd_match, fuzzy_words, perfect_score, query_mask};
use nucleo_matcher::pattern::{AtomKind, CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher};
use rows::{arrange, load_rows};
use rusqlite::Connection;
use scan::{Scan, Walk};
use serde::Serialize;
use snippet::{short, snippet};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use top::Ranked;

/// The in-memory copy of the session rows is reloaded after another connection committed, at
/// most every ten times what the last load took, and at least this often.
pub const RELOAD_EVERY: Duration = Duration::from_millis(500);
/// How old the in-memory copy may get while a background indexer keeps it current.
pub const STALE_AFTER: Duration = Duration::from_secs(10);

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

/// One hit: the session's row ([`SessionMeta`], whose fields read through `Deref`:
/// `hit.title` is `hit.meta.title`) and what the search found in it. Serialized as the row's
/// keys followed by its own, in this order: `sessionId`, `title`, `firstPrompt`, `cwd`,
/// `createdAt`, `lastActivity`, `messages`, `conversationBytes`, `source`, `score`, `matched`,
/// `snippet` (`title`, `firstPrompt`, `cwd`, `source` and `snippet` are `null` when absent).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// The session's row as the index holds it (the first nine keys).
    #[serde(flatten)]
    pub meta: SessionMeta,
    /// `score`: the ranking blend of `rank::score`, rounded to three decimals; higher is
    /// better.
    pub score: f64,
    /// `matched`: the fields the query matched, strongest first; empty only for an empty query.
    pub matched: Vec<Field>,
    /// `snippet`: a one-line excerpt of the best match, when it was the conversation (only if
    /// [`SearchQuery::snippets`] asked) or the first prompt; `null` otherwise.
    pub snippet: Option<String>,
}

impl std::ops::Deref for Hit {
    type Target = SessionMeta;

    fn deref(&self) -> &SessionMeta {
        &self.meta
    }
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
    /// only a copy older than `STALE_AFTER`).
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

    /// One search, in phases: the full-text hits per session ([`Searcher::fts_by_session`]),
    /// where they sit in the rows ([`Searcher::fts_in_rows`]), the rows to walk
    /// ([`Searcher::narrowed_rows`]), the walk ([`Scan::walk`]), hits on sessions newer than
    /// the rows ([`Searcher::fetch_rows`]), then the hits with their snippets
    /// ([`Searcher::hits_of`]).
    fn search_inner(
        &mut self,
        query: &SearchQuery,
        listed: Option<&HashSet<String>>,
    ) -> Result<SearchResult> {
        self.refresh_rows()?;
        let rows = self.rows.clone();
        let titles = self.titles.clone();
        let ids = self.ids.clone();
        let text = query.text.trim();
        let fts = self.fts_by_session(text)?;
        let (fts_here, fts_positions, fts_unknown) = self.fts_in_rows(&fts, rows.len());
        let lower = text.to_lowercase();
        // Words are matched as plain fuzzy atoms: no operator syntax, so narrowing holds.
        let pattern = Pattern::new(
            text,
            CaseMatching::Ignore,
            Normalization::Smart,
            AtomKind::Fuzzy,
        );
        let perfect = perfect_score(&pattern, text, &mut self.matcher);
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
        let words = fuzzy_words(text);
        let scan = Scan {
            query,
            listed,
            text,
            lower: &lower,
            rows: &rows,
            titles: &titles,
            ids: &ids,
            fts: &fts,
            fts_here: &fts_here,
            pattern: &pattern,
            perfect,
            cwd_scores: &cwd_scores,
            need: query_mask(text),
            words: &words,
        };
        let (narrow, spare) = self.narrowed_rows(text, &rows);
        let mut fetched = Vec::new();
        let mut walk = Walk::new(query.limit, spare);
        scan.walk(
            &mut walk,
            narrow.as_deref(),
            &fts_positions,
            &mut self.matcher,
        );
        let matched = std::mem::take(&mut walk.matched);
        self.narrowed = Some((text.to_string(), rows.clone(), matched));
        self.spare_rows = narrow.unwrap_or_default();
        fetched.extend(self.fetch_rows(fts_unknown)?);
        for info in &fetched {
            scan.offer_fetched(&mut walk, info);
        }
        self.spare_flags = cleared(fts_here, &fts_positions);
        let total = walk.scored.offered;
        let hits = self.hits_of(walk.scored.into_best_first(), &fts, query, text)?;
        Ok(SearchResult {
            hits,
            total,
            from_listing: self.listing_only,
        })
    }

    /// The full-text hits of `text` per session rowid: (conversation quality, heading-row
    /// quality, best chunk). None over a listing.
    fn fts_by_session(&mut self, text: &str) -> Result<HashMap<i64, (f64, f64, i64)>> {
        let mut fts: HashMap<i64, (f64, f64, i64)> = HashMap::new();
        if self.listing_only {
            return Ok(fts);
        }
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
        Ok(fts)
    }

    /// The full-text hits by position in the rows (one flag per row, so the walk looks up
    /// nothing per row; the flag buffer is reused), the positions flagged, and the hits on
    /// sessions indexed after the rows were loaded.
    fn fts_in_rows(
        &mut self,
        fts: &HashMap<i64, (f64, f64, i64)>,
        rows: usize,
    ) -> (Vec<bool>, Vec<u32>, Vec<i64>) {
        let mut fts_here: Vec<bool> = std::mem::take(&mut self.spare_flags);
        fts_here.clear();
        let mut fts_positions: Vec<u32> = Vec::new();
        let mut fts_unknown: Vec<i64> = Vec::new();
        if !fts.is_empty() {
            fts_here.resize(rows, false);
            for sid in fts.keys() {
                match self.at.get(sid) {
                    Some(&i) => {
                        fts_here[i as usize] = true;
                        fts_positions.push(i);
                    }
                    None => fts_unknown.push(*sid),
                }
            }
        }
        (fts_here, fts_positions, fts_unknown)
    }

    /// The rows to walk: those the previous query matched when `text` extends it over the same
    /// rows (`Some`), else all (`None`); and a spare buffer for the rows this walk matches.
    fn narrowed_rows(
        &mut self,
        text: &str,
        rows: &Arc<Vec<SessionInfo>>,
    ) -> (Option<Vec<u32>>, Vec<u32>) {
        let spare = std::mem::take(&mut self.spare_rows);
        match self.narrowed.take() {
            Some((before, over, indices))
                if !before.is_empty()
                    && text.starts_with(before.as_str())
                    && Arc::ptr_eq(&over, rows) =>
            {
                (Some(indices), spare)
            }
            Some((_, _, indices)) => (None, indices),
            None => (None, spare),
        }
    }

    /// The rows of sessions indexed after the in-memory copy was taken, by rowid.
    fn fetch_rows(&mut self, rowids: Vec<i64>) -> Result<Vec<SessionInfo>> {
        let mut fetched = Vec::new();
        if rowids.is_empty() {
            return Ok(fetched);
        }
        let path = self.path.clone();
        let conn = self.connection()?;
        for rowid in rowids {
            let found = load_rows(conn, Some(rowid)).map_err(|e| IndexError::Sql {
                path: path.clone(),
                source: e,
            })?;
            fetched.extend(found);
        }
        Ok(fetched)
    }

    /// The hits of the best `scored` rows, each with its snippet: the best chunk's text for a
    /// conversation match (when the query asks for snippets), the first prompt for a match
    /// there.
    fn hits_of(
        &mut self,
        scored: Vec<Ranked<'_>>,
        fts: &HashMap<i64, (f64, f64, i64)>,
        query: &SearchQuery,
        text: &str,
    ) -> Result<Vec<Hit>> {
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
                meta: info.meta.clone(),
                score: (score * 1000.0).round() / 1000.0,
                matched: fields,
                snippet,
            });
        }
        Ok(hits)
    }
}

/// `flags` with the `set` positions cleared again, for reuse by the next search.
fn cleared(mut flags: Vec<bool>, set: &[u32]) -> Vec<bool> {
    for &i in set {
        flags[i as usize] = false;
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes `dsh-refs search --json` prints for a hit: keys in the documented order,
    /// `null` for what is absent.
    #[test]
    fn a_hit_serializes_in_the_documented_order() {
        let hit = Hit {
            meta: SessionMeta {
                id: "claude:abc".into(),
                title: Some("Fix the tokenizer".into()),
                first_prompt: Some("why does it \"split\"?".into()),
                cwd: Some("/w".into()),
                created_at: 1,
                last_activity: 2,
                messages: 3,
                conversation_bytes: 4096,
                source: Some("claude".into()),
            },
            score: 0.125,
            matched: vec![Field::Title, Field::FirstPrompt],
            snippet: Some("split".into()),
        };
        assert_eq!(
            serde_json::to_string(&hit).unwrap(),
            concat!(
                r#"{"sessionId":"claude:abc","title":"Fix the tokenizer","#,
                r#""firstPrompt":"why does it \"split\"?","cwd":"/w","createdAt":1,"#,
                r#""lastActivity":2,"messages":3,"conversationBytes":4096,"source":"claude","#,
                r#""score":0.125,"matched":["title","firstPrompt"],"snippet":"split"}"#
            )
        );
        let bare = Hit {
            meta: SessionMeta {
                id: "s".into(),
                ..SessionMeta::default()
            },
            score: 1.0,
            matched: Vec::new(),
            snippet: None,
        };
        assert_eq!(
            serde_json::to_string(&bare).unwrap(),
            concat!(
                r#"{"sessionId":"s","title":null,"firstPrompt":null,"cwd":null,"createdAt":0,"#,
                r#""lastActivity":0,"messages":0,"conversationBytes":0,"source":null,"#,
                r#""score":1.0,"matched":[],"snippet":null}"#
            )
        );
        assert_eq!(
            serde_json::to_string_pretty(&bare).unwrap().lines().nth(1),
            Some(r#"  "sessionId": "s","#)
        );
    }
}
