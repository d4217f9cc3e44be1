//! The composition root: how the engine is put together, once, for every face.
//!
//! Purpose: the command line's subcommands, `exec`, the MCP server and the TUI all work on the
//! same things: a dsh home, the other agents' sessions served beside it, the store that reads
//! the home, the discovery index and the reference service. A [`Workspace`] resolves and opens
//! them in one place, and every face receives one instead of wiring the engine itself. The map:
//!
//! ```text
//!   Settings (--home / --demo / $DSH_HOME, --sources, agent homes)
//!      │  Workspace::open: resolve the home, build the SourceSet (one call site)
//!      ▼
//!   home ──► DiskStore (the home's sessions; listing cache under <home>/index/listing)
//!      │          │
//!      │          ├─ + LiveSessions (the TUI, exec) ──► HostSessions
//!      │          ▼
//!      │     SourceSet::serve ──► Arc<dyn SessionQuery>: every served session (dsh and
//!      │          │                each agent's), merged, newest first
//!      │          ▼
//!      │     SessionReferences (candidates, prepare: SPEC §3)   ◄── faces: candidates,
//!      │                                                             prepare, exec, TUI, MCP
//!      └──► Discovery (feature `discovery`): the index under <home>/index/, over the same
//!           sources; a store of its own ([`Workspace::discovery`]) or the workspace's
//!           ([`Workspace::discovery_sharing_store`], the MCP server's one listing)
//! ```
//!
//! Invariant: outside this file no face (`cli`, `tui`, `mcp`) builds a `SourceSet` from flags,
//! opens a `DiskStore` or makes a `Discovery`; they ask the workspace. The source set is built
//! at one call site (`source_set`). Nothing here names a terminal crate. Proof:
//! `tests/architecture.rs` (`faces_receive_the_workspace`) and the unit tests below.

use crate::reference::{SessionReferenceConfig, SessionReferenceError, SessionReferences};
use crate::session::external::{SourceChoice, SourceSet};
use crate::session::{DiskStore, HostSessions, LiveSessions, SessionQuery};
use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(feature = "discovery")]
use std::sync::OnceLock;

/// What a workspace is opened from: the global flags, before any resolution.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `--home`.
    pub home: Option<PathBuf>,
    /// `--demo`: the demo home, already installed by the face that embeds it (it wins over
    /// `--home`).
    pub demo_home: Option<PathBuf>,
    /// `--sources`.
    pub sources: Option<SourceChoice>,
    /// The agent homes named on the command line (`--claude-home`, `--codex-home`, …), each
    /// with its agent's registry name; an agent not named here finds its home in the
    /// environment or at its default.
    pub agent_homes: Vec<(&'static str, PathBuf)>,
}

/// The one place the other agents' sessions are chosen from the settings.
fn source_set(settings: &Settings) -> SourceSet {
    let homes: Vec<(&str, Option<&Path>)> = settings
        .agent_homes
        .iter()
        .map(|(name, home)| (*name, Some(home.as_path())))
        .collect();
    SourceSet::from_homes(settings.sources.as_ref(), &homes)
}

/// The engine of one run: the home, the sources served, the store and (lazily) discovery. Cheap
/// to clone (every clone shares one store and one discovery).
#[derive(Clone)]
pub struct Workspace {
    inner: Arc<Inner>,
}

struct Inner {
    home: PathBuf,
    demo: bool,
    sources: SourceSet,
    store: DiskStore,
    #[cfg(feature = "discovery")]
    discovery: OnceLock<crate::discovery::Discovery>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("home", &self.inner.home)
            .field("demo", &self.inner.demo)
            .field("sources", &self.inner.sources)
            .finish()
    }
}

impl Workspace {
    /// Resolves the home (the demo home, else `--home`, else `$DSH_HOME`, else `~/.dsh`) and
    /// the sources, and opens the home's store.
    pub fn open(settings: &Settings) -> Workspace {
        let demo = settings.demo_home.is_some();
        let home = match &settings.demo_home {
            Some(home) => home.clone(),
            None => crate::session::paths::resolve_home(settings.home.as_deref()),
        };
        Workspace::with_sources(home, source_set(settings), demo)
    }

    /// A workspace on `home` serving `sources` (already chosen: a host's own options, a test).
    pub fn with_sources(home: impl Into<PathBuf>, sources: SourceSet, demo: bool) -> Workspace {
        let home = home.into();
        Workspace {
            inner: Arc::new(Inner {
                store: DiskStore::with_listing_cache(home.clone()),
                home,
                demo,
                sources,
                #[cfg(feature = "discovery")]
                discovery: OnceLock::new(),
            }),
        }
    }

    /// The dsh home.
    pub fn home(&self) -> &Path {
        &self.inner.home
    }

    /// Whether this is the demo home (`--demo`: the offline model answers, hints repeat it).
    pub fn demo(&self) -> bool {
        self.inner.demo
    }

    /// The other agents' sessions served beside (or instead of) the home's (SPEC §9).
    pub fn sources(&self) -> &SourceSet {
        &self.inner.sources
    }

    /// The store of the home's own sessions (shared by every clone; its listing is cached
    /// under `<home>/index/listing`).
    pub fn store(&self) -> &DiskStore {
        &self.inner.store
    }

    /// Every served session: the home's (unless hidden) merged with the other agents'.
    pub fn served(&self) -> Arc<dyn SessionQuery> {
        self.inner.sources.serve(Arc::new(self.inner.store.clone()))
    }

    /// Every served session, the home's as this process's agents hold them (`live`) too.
    pub fn served_live(&self, live: LiveSessions) -> Arc<dyn SessionQuery> {
        let host = HostSessions::new(self.inner.store.clone(), live);
        self.inner.sources.serve(Arc::new(host))
    }

    /// The reference service over [`Workspace::served_live`] (or [`Workspace::served`] without
    /// live sessions), with `config`.
    pub fn references(
        &self,
        live: Option<LiveSessions>,
        config: SessionReferenceConfig,
    ) -> Result<SessionReferences, SessionReferenceError> {
        let query = match live {
            Some(live) => self.served_live(live),
            None => self.served(),
        };
        SessionReferences::new(query, config)
    }

    /// Discovery of every served session, reading through a store of its own (so indexing
    /// never evicts what `prepare` keeps in the workspace store's conversation cache); made on
    /// first use, then shared by every clone.
    #[cfg(feature = "discovery")]
    pub fn discovery(&self) -> &crate::discovery::Discovery {
        self.inner.discovery.get_or_init(|| {
            crate::discovery::Discovery::for_home(&self.inner.home, &self.inner.sources)
        })
    }

    /// Discovery of every served session through the workspace's own store: one listing for
    /// discovery and whoever serves [`crate::discovery::Discovery::query`] (the MCP server).
    #[cfg(feature = "discovery")]
    pub fn discovery_sharing_store(&self) -> crate::discovery::Discovery {
        crate::discovery::Discovery::for_store(self.inner.store.clone(), &self.inner.sources)
    }

    /// Discovery of the home's own dsh sessions only, whatever the sources (`--resume WORD`:
    /// only dsh sessions can be resumed).
    #[cfg(feature = "discovery")]
    pub fn own_discovery(&self) -> crate::discovery::Discovery {
        crate::discovery::Discovery::for_home(&self.inner.home, &SourceSet::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_home_wins_and_clones_share_one_store() {
        let demo = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let ws = Workspace::open(&Settings {
            home: Some(other.path().to_path_buf()),
            demo_home: Some(demo.path().to_path_buf()),
            ..Settings::default()
        });
        assert_eq!(ws.home(), demo.path());
        assert!(ws.demo());
        let clone = ws.clone();
        assert!(std::ptr::eq(ws.store(), clone.store()));
        let plain = Workspace::open(&Settings {
            home: Some(other.path().to_path_buf()),
            sources: Some(SourceChoice::parse("dsh").unwrap()),
            ..Settings::default()
        });
        assert_eq!(plain.home(), other.path());
        assert!(!plain.demo());
        assert!(plain.sources().external.is_empty());
        assert_eq!(plain.store().home(), other.path());
    }
}
