//! The persistent listing as a process first reads it ([`Saved`]): the heads the first listing
//! takes (each still checked by `stat`), the title scans, and the ids a first answer may name
//! before any file is checked ([`ExternalSessions::remembered_ids_blocking`]).
//!
//! Read once per process, outside the listing's lock, so that a first answer waits for this
//! read only and never for a listing that is checking every file. Proof:
//! `tests/discovery/remembered.rs` (a file deleted since is still named; another home's kept
//! listing never is) and `tests/session/agent_listing_cache.rs`.

use super::{ExternalSessions, FileStamp, Head, Held, TitleEntry};
use crate::sync::LockExt;
use rustc_hash::FxHashMap;
use std::collections::HashSet;
use std::ffi::OsString;
use std::sync::{Mutex, OnceLock};

/// What the persistent listing held when this process read it.
#[derive(Default)]
pub(super) struct Saved {
    /// Its heads and stamps, until the first listing takes them.
    pub(super) heads: Mutex<Option<FxHashMap<OsString, (FileStamp, Head)>>>,
    /// The (namespaced) ids it listed, made when first asked for (most processes never ask),
    /// while the heads are still here.
    ids: OnceLock<Option<HashSet<String>>>,
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
        let mut heads = FxHashMap::with_capacity_and_hasher(saved.len(), Default::default());
        let mut titles = self.inner.titles.locked();
        titles.reserve(saved.len());
        for file in saved {
            // A title state is decoded when its title is first needed.
            if let Some(title) = file.title {
                let entry = TitleEntry {
                    offset: title.offset,
                    line: title.line,
                    state: Held::Kept(title.state),
                };
                titles.insert(file.path.clone().into_os_string(), (title.stamp, entry));
            }
            heads.insert(file.path.into_os_string(), (file.stamp, file.head));
        }
        Saved {
            heads: Mutex::new(Some(heads)),
            ids: OnceLock::new(),
            refused: false,
        }
    }

    /// The ids of the sessions the persistent listing held, without looking at any file: what
    /// a first answer may show while [`ExternalSessions::list_sessions_blocking`] checks each
    /// file (a session deleted since is among them until then). Once this process has listed,
    /// that listing's ids. `None` when there is neither (nothing kept, a database agent, or
    /// the heads already taken by a listing still under way).
    pub fn remembered_ids_blocking(&self) -> Option<HashSet<String>> {
        self.inner.cache.as_ref()?;
        if let Some(list) = self
            .inner
            .listing
            .try_lock()
            .ok()
            .and_then(|l| l.list.clone())
        {
            return Some(list.iter().map(|s| s.id().to_string()).collect());
        }
        let saved = self.saved();
        let name = self.agent().name();
        let ids = saved.ids.get_or_init(|| {
            let heads = saved.heads.locked();
            let ids: HashSet<String> = heads
                .as_ref()?
                .values()
                .map(|(_, head)| format!("{name}:{}", head.id))
                .collect();
            (!ids.is_empty()).then_some(ids)
        });
        ids.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::persist::{self, SavedFile, SavedTitle, TitleState};
    use super::super::super::ExternalAgent;
    use super::*;
    use std::fs;
    use std::path::{Path, PathBuf};

    fn session(dir: &Path, id: &str, prompt: &str) -> PathBuf {
        let file = dir.join(format!("{id}.jsonl"));
        fs::write(
            &file,
            format!(
                r#"{{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"{id}","cwd":"/w","timestamp":"2026-01-01T00:00:00Z","message":{{"role":"user","content":"{prompt}"}}}}"#
            ) + "\n",
        )
        .unwrap();
        file
    }

    fn held_kept(source: &ExternalSessions, file: &Path) -> bool {
        let titles = source.inner.titles.locked();
        matches!(
            titles.get(file.as_os_str()),
            Some((
                _,
                TitleEntry {
                    state: Held::Kept(_),
                    ..
                }
            ))
        )
    }

    /// A kept title state is decoded only when its title is asked for, written back as it was
    /// when it was not, and one that is not the agent's own is read again from the file.
    #[test]
    fn a_kept_title_state_is_decoded_when_needed_and_a_foreign_one_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let (claude, dsh) = (dir.path().join("claude"), dir.path().join("dsh"));
        let project = claude.join("projects").join("-w");
        fs::create_dir_all(&project).unwrap();
        let a = session(&project, "a", "alpha prompt");
        let b = session(&project, "b", "bravo prompt");
        let process = || ExternalSessions::with_listing_cache(ExternalAgent::Claude, &claude, &dsh);
        let first = process();
        first.list_sessions_blocking().unwrap();
        for id in ["claude:a", "claude:b"] {
            first.read_title_blocking(id).unwrap();
        }
        first.flush();
        drop(first);

        let second = process();
        second.list_sessions_blocking().unwrap();
        assert!(held_kept(&second, &a) && held_kept(&second, &b));
        assert_eq!(
            second.read_title_blocking("claude:a").unwrap().as_deref(),
            Some("alpha prompt")
        );
        assert!(!held_kept(&second, &a), "asked for, decoded");
        assert!(held_kept(&second, &b), "not asked for, still as kept");
        let cache = persist::path(&dsh, "claude", &claude);
        let kept_bytes = fs::read(&cache).unwrap();
        second
            .inner
            .titles_dirty
            .store(true, std::sync::atomic::Ordering::Release);
        second.flush();
        drop(second);
        // Written again, both states are the bytes that were kept: a's decoded to choose its
        // title but not read further, b's never decoded.
        assert_eq!(fs::read(&cache).unwrap(), kept_bytes);
        let third = process();
        third.list_sessions_blocking().unwrap();
        assert!(held_kept(&third, &b), "b's kept state was not written back");
        assert_eq!(
            third.read_title_blocking("claude:b").unwrap().as_deref(),
            Some("bravo prompt"),
            "a state written back as it was kept"
        );
        drop(third);

        // A state of another shape, with the file's own stamp and length: read again.
        let root = claude.join("projects");
        let meta = fs::metadata(&a).unwrap();
        let stamp = FileStamp::of(&meta);
        let files = vec![SavedFile {
            path: a.clone(),
            stamp,
            head: Head {
                id: "a".into(),
                created_at: 1_767_225_600_000,
                cwd: Some("/w".into()),
            },
            title: Some(SavedTitle {
                stamp,
                offset: meta.len(),
                line: 1,
                state: TitleState::Value(serde_json::json!("not a title state")),
            }),
        }];
        persist::save(&cache, "claude", &claude, &root, &files).unwrap();
        let fourth = process();
        fourth.list_sessions_blocking().unwrap();
        assert_eq!(
            fourth.read_title_blocking("claude:a").unwrap().as_deref(),
            Some("alpha prompt")
        );
    }
}
