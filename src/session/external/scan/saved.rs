//! The persistent listing as a process first reads it ([`Saved`]): the heads the first listing
//! takes (each still checked by `stat`), the title scans, and the ids a first answer may name
//! before any file is checked ([`ExternalSessions::remembered_ids_blocking`]).
//!
//! Read once per process, outside the listing's lock, so that a first answer waits for this
//! read only and never for a listing that is checking every file. Proof:
//! `tests/discovery/remembered.rs` (a file deleted since is still named; another home's kept
//! listing never is) and `tests/session/agent_listing_cache.rs`.

use super::{ExternalSessions, FileStamp, Head, TitleEntry};
use crate::sync::LockExt;
use rustc_hash::FxHashMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex};

/// What the persistent listing held when this process read it.
#[derive(Default)]
pub(super) struct Saved {
    /// Its heads and stamps, until the first listing takes them.
    pub(super) heads: Mutex<Option<FxHashMap<OsString, (FileStamp, Head)>>>,
    /// The (namespaced) ids it listed.
    ids: Arc<Vec<String>>,
    /// It could not be trusted: this process writes it again.
    pub(super) refused: bool,
}

impl ExternalSessions {
    /// The persistent listing, read once per process (the title cache is filled from it). A
    /// cache that cannot be trusted is ignored with a warning and rewritten by this process.
    pub(super) fn saved(&self) -> &Saved {
        self.inner.saved.get_or_init(|| self.read_saved())
    }

    fn read_saved(&self) -> Saved {
        let Some(cache) = &self.inner.cache else {
            return Saved::default();
        };
        let name = self.agent().name();
        let root = self.inner.home.join(Self::sessions_subdir(self.agent()));
        let saved = match super::super::persist::load(cache, name, &self.inner.home, &root) {
            Ok(saved) => saved,
            Err(super::super::persist::Refused::Missing) => return Saved::default(),
            Err(super::super::persist::Refused::Invalid(why)) => {
                tracing::warn!(source = name, reason = %why, "rebuilding the agent listing cache");
                return Saved {
                    refused: true,
                    ..Saved::default()
                };
            }
        };
        let format = self.agent().format();
        let mut heads = FxHashMap::with_capacity_and_hasher(saved.len(), Default::default());
        let mut ids = Vec::with_capacity(saved.len());
        let mut titles = self.inner.titles.locked();
        titles.reserve(saved.len());
        for file in saved {
            if let Some(title) = file.title {
                if let Some(state) = format.title_scan(Some(&title.state)) {
                    let entry = TitleEntry {
                        offset: title.offset,
                        line: title.line,
                        state,
                    };
                    titles.insert(file.path.clone().into_os_string(), (title.stamp, entry));
                }
            }
            ids.push(format!("{name}:{}", file.head.id));
            heads.insert(file.path.into_os_string(), (file.stamp, file.head));
        }
        Saved {
            heads: Mutex::new(Some(heads)),
            ids: Arc::new(ids),
            refused: false,
        }
    }

    /// The ids of the sessions the persistent listing held, without looking at any file: what
    /// a first answer may show while [`ExternalSessions::list_sessions_blocking`] checks each
    /// file (a session deleted since is among them until then). Once this process has listed,
    /// that listing's ids. `None` when there is neither (nothing kept, or a database agent).
    pub fn remembered_ids_blocking(&self) -> Option<Arc<Vec<String>>> {
        self.inner.cache.as_ref()?;
        if let Some(list) = self
            .inner
            .listing
            .try_lock()
            .ok()
            .and_then(|l| l.list.clone())
        {
            return Some(Arc::new(list.iter().map(|s| s.id().to_string()).collect()));
        }
        let saved = self.saved();
        (!saved.refused && !saved.ids.is_empty()).then(|| saved.ids.clone())
    }
}
