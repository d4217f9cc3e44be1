//! The names Codex keeps beside its rollouts: thread names in `session_index.jsonl`, and names
//! and generated titles in its newest state database (`state_<n>.sqlite`).
//!
//! Purpose: a Codex title is the name the person gave (state database, else the TUI's index,
//! else a rollout event), then Codex's own generated title, then the first prompt; the first two
//! live outside the rollout.
//! Invariant: each side file is read again only when its stamp changed (the database and its
//! log by their own stamps, the home's stamp for a newer database), read-only and bounded as
//! `codex_state` and `scan::read_lines` read them; nothing is written under the home.
//! Proof: `tests/session/external_sessions.rs` and `tests/session/real_agents.rs` (titles from
//! each side store, no byte or mtime changed).

#[cfg(feature = "discovery")]
use super::codex_state;
#[cfg(feature = "discovery")]
use super::dirs::SETTLE;
use super::lines::LineSink;
use super::scan::{read_lines, FileStamp};
use super::{agent::SideNames, title_line};
use crate::sync::LockExt;
use serde::Deserialize;
use std::collections::HashMap;
use std::fs;
#[cfg(feature = "discovery")]
use std::path::Path;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
#[cfg(feature = "discovery")]
use std::time::SystemTime;
use std::time::{Duration, Instant};

/// Codex's `session_index.jsonl` names by thread id, with the stamp they were read at and
/// when that stamp was last checked.
type CodexIndex = (FileStamp, Instant, Arc<HashMap<String, String>>);

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
    home: PathBuf,
    index: Mutex<Option<CodexIndex>>,
    #[cfg(feature = "discovery")]
    state: Mutex<Option<CodexState>>,
}

impl CodexSide {
    /// The side stores of `home` (nothing is read until asked).
    pub fn new(home: PathBuf) -> CodexSide {
        CodexSide {
            home,
            index: Mutex::new(None),
            #[cfg(feature = "discovery")]
            state: Mutex::new(None),
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
            let threads = match &db {
                Some(path) => codex_state::read_threads(path).unwrap_or_else(|err| {
                    tracing::warn!(error = %err, "could not read the Codex state database");
                    HashMap::new()
                }),
                None => HashMap::new(),
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

    /// The last non-empty `thread_name` of `session_index.jsonl` for thread `own`.
    fn index_name(&self, own: &str) -> Option<String> {
        let path = self.home.join("session_index.jsonl");
        let mut cache = self.index.locked();
        if let Some((_, checked, index)) = cache.as_ref() {
            if checked.elapsed() < RECHECK {
                return index.get(own).cloned();
            }
        }
        let Ok(meta) = fs::metadata(&path) else {
            *cache = None;
            return None;
        };
        let stamp = FileStamp::of(&meta);
        let index = match cache.as_ref() {
            Some((old, _, index)) if *old == stamp => {
                let index = index.clone();
                *cache = Some((stamp, Instant::now(), index.clone()));
                index
            }
            _ => {
                let mut scan = IndexScan::default();
                if let Err(err) = read_lines(&path, 0, 0, &mut scan) {
                    tracing::warn!(file = %path.display(), error = %err, "could not read the Codex session index");
                }
                let index = Arc::new(scan.names);
                *cache = Some((stamp, Instant::now(), index.clone()));
                index
            }
        };
        index.get(own).cloned()
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

/// `session_index.jsonl`: the last non-empty `thread_name` per id.
#[derive(Default)]
pub(super) struct IndexScan {
    /// Thread id → its last non-empty `thread_name`.
    pub(super) names: HashMap<String, String>,
}

impl LineSink for IndexScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        #[derive(Deserialize)]
        struct Entry {
            id: String,
            thread_name: Option<String>,
        }
        if let Ok(entry) = serde_json::from_slice::<Entry>(bytes) {
            if let Some(name) = entry.thread_name.as_deref().and_then(title_line) {
                self.names.insert(entry.id, name);
            }
        }
        true
    }
}
