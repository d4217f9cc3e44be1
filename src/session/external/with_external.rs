//! [`WithExternal`]: the host's sessions and the read-only sources of other agents served as one
//! [`SessionQuery`] (SPEC §9). Each id goes to the one source whose namespace it carries; the
//! listing asks every source at once and merges their answers.

use super::{ExternalAgent, ExternalSessions};
use crate::session::error::Result;
use crate::session::query::{
    join_all, sort_sessions, BoxFuture, PlainConversation, SessionQuery, SessionSummary,
    SurfaceSnapshot,
};
use crate::sync::LockExt;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The host's sessions merged with read-only external sources (SPEC §9).
///
/// Ids in an external namespace (`claude:`, `codex:`) are answered by that source; every other
/// id by the host. The merged list is cached and rebuilt only when one of its parts answered a
/// different `Arc`, so an unchanged answer is the same `Arc` (callers cache on that).
#[derive(Clone)]
pub struct WithExternal {
    host: Arc<dyn SessionQuery>,
    /// Whether the host's own sessions are listed (`--sources` without `dsh` hides them).
    list_host: bool,
    sources: Vec<ExternalSessions>,
    merged: Arc<Mutex<Option<MergedList>>>,
}

struct MergedList {
    parts: Vec<Arc<Vec<SessionSummary>>>,
    list: Arc<Vec<SessionSummary>>,
}

impl WithExternal {
    /// Serves `host`'s sessions (listed only when `list_host`) beside `sources`.
    pub fn new(
        host: Arc<dyn SessionQuery>,
        list_host: bool,
        sources: Vec<ExternalSessions>,
    ) -> Self {
        WithExternal {
            host,
            list_host,
            sources,
            merged: Arc::new(Mutex::new(None)),
        }
    }

    /// The external sources served, in the order given.
    pub fn sources(&self) -> &[ExternalSessions] {
        &self.sources
    }

    fn source(&self, id: &str) -> Option<&ExternalSessions> {
        self.source_at(id).map(|at| &self.sources[at])
    }

    /// Where in `sources` the source that reads `id` is (`None`: the host reads it).
    fn source_at(&self, id: &str) -> Option<usize> {
        let agent = ExternalAgent::of_id(id)?;
        self.sources.iter().position(|s| s.agent() == agent)
    }
}

impl SessionQuery for WithExternal {
    fn list_sessions(&self) -> BoxFuture<'_, Result<Arc<Vec<SessionSummary>>>> {
        Box::pin(async move {
            let mut parts = Vec::with_capacity(self.sources.len() + 1);
            // One source after another: listing them at once (tried) made the `stat`s of two
            // threads contend in the kernel, and a new MCP server's first list took longer.
            if self.list_host {
                parts.push(self.host.list_sessions().await?);
            }
            for source in &self.sources {
                match source.list_sessions().await {
                    Ok(list) => parts.push(list),
                    // One agent's broken home must not hide every other session.
                    Err(err) => {
                        tracing::warn!(source = source.agent().name(), error = %err, "could not list external sessions");
                    }
                }
            }
            if parts.len() == 1 {
                return Ok(parts.pop().expect("one part"));
            }
            let mut cache = self.merged.locked();
            if let Some(merged) = cache.as_ref() {
                if merged.parts.len() == parts.len()
                    && merged
                        .parts
                        .iter()
                        .zip(&parts)
                        .all(|(a, b)| Arc::ptr_eq(a, b))
                {
                    return Ok(merged.list.clone());
                }
            }
            let mut all = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
            for part in &parts {
                all.extend(part.iter().cloned());
            }
            sort_sessions(&mut all);
            let list = Arc::new(all);
            *cache = Some(MergedList {
                parts,
                list: list.clone(),
            });
            Ok(list)
        })
    }

    /// The host's listing (its own sessions are not kept so) and each source's remembered ids;
    /// a source that keeps none is left out of this first answer.
    fn remembered_ids(&self) -> BoxFuture<'_, Option<HashSet<String>>> {
        Box::pin(async move {
            let host = async {
                match self.list_host {
                    true => self.host.list_sessions().await.ok(),
                    false => None,
                }
            };
            let sources = join_all(self.sources.iter().map(|s| s.remembered_ids()).collect());
            let (host, sources) = tokio::join!(host, sources);
            if sources.iter().all(Option::is_none) {
                return None;
            }
            let mut ids: HashSet<String> = host
                .iter()
                .flat_map(|list| list.iter().map(|s| s.id().to_string()))
                .collect();
            for part in sources.into_iter().flatten() {
                ids.extend(part);
            }
            Some(ids)
        })
    }

    fn read_surface<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        match self.source(id) {
            Some(source) => source.read_surface(id),
            None => self.host.read_surface(id),
        }
    }

    fn read_title<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
        match self.source(id) {
            Some(source) => source.read_title(id),
            None => self.host.read_title(id),
        }
    }

    /// Each source's titles in one hand-off of its own (the host's as the host reads them), the
    /// sources at once, the answers back in the order asked.
    fn read_titles<'a>(&'a self, ids: &'a [String]) -> BoxFuture<'a, Vec<Result<Option<String>>>> {
        Box::pin(async move {
            // Each id's reader (a source's index, or the host) and the positions it answers.
            let mut groups: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
            for (at, id) in ids.iter().enumerate() {
                let reader = self.source_at(id);
                match groups.iter_mut().find(|(r, _)| *r == reader) {
                    Some((_, positions)) => positions.push(at),
                    None => groups.push((reader, vec![at])),
                }
            }
            let asked: Vec<Vec<String>> = groups
                .iter()
                .map(|(_, positions)| positions.iter().map(|&at| ids[at].clone()).collect())
                .collect();
            let reads = groups
                .iter()
                .zip(&asked)
                .map(|((reader, _), asked)| match reader {
                    Some(source) => self.sources[*source].read_titles(asked),
                    None => self.host.read_titles(asked),
                })
                .collect();
            let answers = join_all(reads).await;
            let mut titles: Vec<Option<Result<Option<String>>>> =
                ids.iter().map(|_| None).collect();
            for ((_, positions), answer) in groups.iter().zip(answers) {
                for (&at, title) in positions.iter().zip(answer) {
                    titles[at] = Some(title);
                }
            }
            titles.into_iter().map(|t| t.unwrap_or(Ok(None))).collect()
        })
    }

    fn read_conversation_surface<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        match self.source(id) {
            Some(source) => source.read_conversation_surface(id),
            None => self.host.read_conversation_surface(id),
        }
    }

    fn read_plain_conversation<'a>(
        &'a self,
        id: &'a str,
    ) -> Option<BoxFuture<'a, Result<PlainConversation>>> {
        match self.source(id) {
            Some(source) => source.read_plain_conversation(id),
            None => self.host.read_plain_conversation(id),
        }
    }

    fn read_for_index_blocking(
        &self,
        id: &str,
    ) -> Option<Result<(SurfaceSnapshot, Option<String>)>> {
        match self.source(id) {
            Some(source) => source.read_for_index_blocking(id),
            None => self.host.read_for_index_blocking(id),
        }
    }
}
