//! The names Codex keeps beside its rollouts: thread names in `session_index.jsonl`, and names
//! and generated titles in its newest state database (`state_<n>.sqlite`).
//!
//! Purpose: a Codex title is the name the person gave (state database, else the TUI's index,
//! else a rollout event), then Codex's own generated title, then the first prompt; the first two
//! live outside the rollout.
//! Invariant: each side file is read again only when its stamp changed (the database and its
//! log by their own stamps, the home's stamp for a newer database, what the database said kept
//! between processes by those stamps, `codex_state_keep`; the index only from where the last
//! read ended when it grew, in this process or one before, [`super::codex_index`]),
//! read-only and bounded as `codex_state` and `scan::read_lines` read them; nothing is written
//! under the home.
//! Proof: `tests/session/external_sessions.rs` and `tests/session/real_agents.rs` (titles from
//! each side store, no byte or mtime changed), `tests/session/codex_session_index.rs`.

use super::codex_index::SessionIndex;
#[cfg(feature = "discovery")]
use super::codex_state;
#[cfg(feature = "discovery")]
use super::dirs::SETTLE;
#[cfg(feature = "discovery")]
use super::scan::FileStamp;
use super::{agent::SideNames, title_line};
#[cfg(feature = "discovery")]
use crate::sync::LockExt;
#[cfg(feature = "discovery")]
use std::collections::HashMap;
#[cfg(feature = "discovery")]
use std::fs;
use std::path::{Path, PathBuf};
#[cfg(feature = "discovery")]
use std::sync::{Arc, Mutex};
use std::time::Duration;
#[cfg(feature = "discovery")]
use std::time::{Instant, SystemTime};

/// A side store checked this recently is not checked again: a listing asks for thousands of
/// titles in a row, and one look at the side files serves them all. A rename lands at most
/// this late.
const RECHECK: Duration = Duration::from_millis(100);

/// Codex's state database: the home's stamp when it was chosen, the database and its log's
/// stamps when read, and what it said per thread id.
#[cfg(feature = "discovery")]
struct CodexState {
    home: Option<SystemTime>,
    db: Option<PathBuf>,
    stamps: (Option<FileStamp>, Option<FileStamp>),
    checked: Instant,
    threads: Arc<HashMap<String, codex_state::ThreadTitle>>,
}

/// The side stores of one Codex home.
pub struct CodexSide {
    #[cfg(feature = "discovery")]
    home: PathBuf,
    index: SessionIndex,
    #[cfg(feature = "discovery")]
    state: Mutex<Option<CodexState>>,
    /// Where what the state database said is kept between processes (`None`: not kept).
    #[cfg(feature = "discovery")]
    kept_titles: Option<PathBuf>,
}

impl CodexSide {
    /// The side stores of `home` (nothing is read until asked); what is folded from
    /// `session_index.jsonl` and what the state database said are kept beside the listing
    /// cache `listing`, when there is one.
    pub fn new(home: PathBuf, listing: Option<&Path>) -> CodexSide {
        CodexSide {
            index: SessionIndex::new(&home, listing),
            #[cfg(feature = "discovery")]
            home,
            #[cfg(feature = "discovery")]
            state: Mutex::new(None),
            #[cfg(feature = "discovery")]
            kept_titles: listing.map(super::codex_state_keep::path_beside),
        }
    }

    /// The name and title the newest state database holds for thread `own`, read again only
    /// when the home (a new database), the database or its log changed.
    #[cfg(feature = "discovery")]
    fn thread(&self, own: &str) -> (Option<String>, Option<String>) {
        self.state_thread(own)
            .map(|t| (t.name, t.title))
            .unwrap_or_default()
    }

    /// Without SQLite (feature `discovery`) the state database is not read: a Codex title comes
    /// from `session_index.jsonl`, the rollout's events and its first prompt.
    #[cfg(not(feature = "discovery"))]
    fn thread(&self, _own: &str) -> (Option<String>, Option<String>) {
        (None, None)
    }

    #[cfg(feature = "discovery")]
    fn state_thread(&self, own: &str) -> Option<codex_state::ThreadTitle> {
        let home = &self.home;
        let mut cache = self.state.locked();
        if let Some(state) = cache.as_ref().filter(|s| s.checked.elapsed() < RECHECK) {
            return state.threads.get(own).cloned();
        }
        let home_stamp = fs::metadata(home).ok().and_then(|m| m.modified().ok());
        let db = match cache.as_ref() {
            Some(state) if state.home.is_some() && state.home == home_stamp => state.db.clone(),
            _ => codex_state::newest_state_db(home),
        };
        let stamp = |p: &Path| fs::symlink_metadata(p).ok().map(|m| FileStamp::of(&m));
        let stamps = db.as_deref().map_or((None, None), |db| {
            (stamp(db), stamp(&super::sqlite_snapshot::wal_of(db)))
        });
        let fresh = cache
            .as_ref()
            .is_some_and(|state| state.db == db && state.stamps == stamps);
        if let Some(state) = cache.as_mut().filter(|_| fresh) {
            state.checked = Instant::now();
        }
        if !fresh {
            let threads = match (&db, stamps) {
                (Some(path), (Some(db_stamp), log)) => self.threads_of(path, (db_stamp, log)),
                _ => HashMap::new(),
            };
            // A home stamp this recent may hide a change: keep none, so it is looked at again.
            let settled = home_stamp.filter(|m| {
                SystemTime::now()
                    .duration_since(*m)
                    .is_ok_and(|age| age >= SETTLE)
            });
            *cache = Some(CodexState {
                home: settled,
                db,
                stamps,
                checked: Instant::now(),
                threads: Arc::new(threads),
            });
        }
        cache.as_ref()?.threads.get(own).cloned()
    }

    /// What the state database `db` stamped `stamps` says of each thread: as a previous process
    /// kept it when the stamps are the same, else read (and kept for the next process).
    #[cfg(feature = "discovery")]
    fn threads_of(
        &self,
        db: &Path,
        stamps: super::codex_state_keep::Stamps,
    ) -> HashMap<String, codex_state::ThreadTitle> {
        use super::codex_state_keep::{load, save};
        let keep = self.kept_titles.as_deref();
        if let Some(threads) = keep.and_then(|keep| load(keep, db, stamps)) {
            return threads;
        }
        match codex_state::read_threads(db) {
            Ok(threads) => {
                if let Some(keep) = keep {
                    save(keep, db, stamps, &threads);
                }
                threads
            }
            Err(err) => {
                tracing::warn!(error = %err, "could not read the Codex state database");
                HashMap::new()
            }
        }
    }

    /// The last non-empty `thread_name` of `session_index.jsonl` for thread `own`.
    fn index_name(&self, own: &str) -> Option<String> {
        self.index.name(own, RECHECK)
    }
}

impl SideNames for CodexSide {
    /// The state database's name, else the TUI's index.
    fn given_name(&self, own: &str) -> Option<String> {
        self.thread(own)
            .0
            .as_deref()
            .and_then(title_line)
            .or_else(|| self.index_name(own))
    }

    /// The state database's generated title.
    fn generated_title(&self, own: &str) -> Option<String> {
        self.thread(own).1.as_deref().and_then(title_line)
    }
}
