//! The `@` popup's session rows from both sources (SPEC §8): contract candidates
//! (`list_candidates`, SPEC §3.3, unchanged) merged with discovery hits, deduplicated by id.
//!
//! Discovery is asked at the same time as the contract, on the async workers (the search
//! itself runs on a blocking thread), and its answer travels with the lookup's [`QueryId`](super::popup::QueryId), so a
//! stale answer is dropped like any other. When discovery fails or is absent the contract list
//! is shown alone: the index never makes a listing fail.
//!
//! Merge rule ([`merge`], pure): discovery hits first in their ranked order (title, first prompt,
//! conversation, recency, same-cwd), then contract candidates the hits did not hold (e.g.
//! sessions not indexed yet), each id once, at most `limit` rows. A row's label is the contract's
//! rule (latest title, else the id), so the inserted mention is the same whichever source found
//! it. Each row also gets a [`PopupRow`]: the session's row as discovery knows it
//! ([`SessionMeta`]: last activity, message count, size, first prompt) and a live badge; the
//! total tells the popup to say `50 of 312 · type to narrow`.
//!
//! Each answered lookup pokes the background indexer: that asks for a pass, and in a new process
//! starts the indexer that waited for the popup's first answer
//! ([`Discovery::spawn_indexer_after`]), so its start-up pass never competes with that answer.
//!
//! Proof: unit tests below (merge, dedupe, truncation, labels); `tests/tui/popup.rs` snapshots
//! the rows with details and the truncated list.

use crate::discovery::{Discovery, Hit, SearchQuery, SessionMeta};
use crate::host::SessionReferenceMount;
use crate::reference::Candidate;
use crate::session::external::ExternalAgent;
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Rows the popup asks for (the contract's default `candidate_limit`).
pub const POPUP_LIMIT: usize = 50;

/// What discovery knows about a popup row beyond the contract's candidate: the session's row
/// and what only the popup adds to it (the row's fields read through `Deref`: `row.messages`
/// is `row.meta.messages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PopupRow {
    /// The session's row as its hit carried it; for a row known only to be live, its id and
    /// nothing else (no messages, no size, no times).
    pub meta: SessionMeta,
    /// Another process is writing this session now.
    pub live: bool,
    /// A short excerpt of a conversation match.
    pub snippet: Option<String>,
}

impl std::ops::Deref for PopupRow {
    type Target = SessionMeta;

    fn deref(&self) -> &SessionMeta {
        &self.meta
    }
}

/// Details for the rows of one lookup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionDetails {
    /// The details, by session id (each key is its row's `meta.id`).
    pub rows: HashMap<String, PopupRow>,
    /// How many sessions matched in all (more than the rows when the list is truncated).
    pub total: usize,
}

/// The merged answer of one lookup.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// The popup's session rows: discovery's hits first, then the contract's other candidates, at
    /// most `limit`.
    pub candidates: Vec<Candidate>,
    /// What discovery knows about those rows.
    pub details: SessionDetails,
}

/// Merges contract `candidates` with discovery `hits` (`total` of them matched in all).
pub fn merge(candidates: Vec<Candidate>, hits: &[Hit], total: usize, limit: usize) -> Merged {
    let mut out: Vec<Candidate> = Vec::with_capacity(limit);
    let mut rows = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for hit in hits {
        if out.len() >= limit {
            break;
        }
        if !seen.insert(hit.id.clone()) {
            continue;
        }
        out.push(Candidate {
            session_id: hit.id.clone(),
            label: hit.title.clone().unwrap_or_else(|| hit.id.clone()),
            cwd: hit.cwd.clone(),
            created_at: hit.created_at,
        });
        rows.insert(
            hit.id.clone(),
            PopupRow {
                meta: hit.meta.clone(),
                live: false,
                snippet: hit.snippet.clone(),
            },
        );
    }
    let mut contract_only = 0;
    for candidate in candidates {
        if seen.contains(&candidate.session_id) {
            continue;
        }
        contract_only += 1;
        seen.insert(candidate.session_id.clone());
        if out.len() < limit {
            out.push(candidate);
        }
    }
    let total = (total + contract_only).max(out.len());
    Merged {
        candidates: out,
        details: SessionDetails { rows, total },
    }
}

/// A first answer for the popup of a new process, before its listing has checked any file:
/// discovery's hits among the sessions the previous process listed
/// ([`Discovery::search_remembered`]), with their details; no contract candidates. `None`
/// when there is no such answer. [`lookup`] answers the same query afterwards, and its rows
/// replace these.
pub async fn remembered(
    discovery: Discovery,
    agent: (String, Option<String>),
    query: String,
    now_ms: i64,
) -> Option<(Vec<Candidate>, Arc<SessionDetails>)> {
    let found = discovery
        .search_remembered(SearchQuery {
            text: query,
            agent: Some(agent.0),
            cwd: agent.1,
            limit: POPUP_LIMIT,
            now_ms,
            snippets: false,
        })
        .await?;
    let merged = merge(Vec::new(), &found.hits, found.total, POPUP_LIMIT);
    // No rows is no answer: "no sessions" must not flash before the checked rows.
    (!merged.candidates.is_empty()).then(|| (merged.candidates, Arc::new(merged.details)))
}

/// Runs one popup lookup: the contract list, and discovery when there is one, merged.
pub async fn lookup(
    mount: SessionReferenceMount,
    discovery: Option<Discovery>,
    agent: (String, Option<String>),
    query: String,
    now_ms: i64,
    cancel: CancellationToken,
) -> (Result<Vec<Candidate>, String>, Option<Arc<SessionDetails>>) {
    let contract = mount.candidates(&query, &cancel);
    let Some(discovery) = discovery else {
        let result = contract.await.map_err(|e| e.message().to_string());
        return (result, None);
    };
    let search = discovery.search(SearchQuery {
        text: query.clone(),
        agent: Some(agent.0),
        cwd: agent.1,
        limit: POPUP_LIMIT,
        now_ms,
        snippets: false,
    });
    let (contract, found) = tokio::join!(contract, search);
    let candidates = match contract {
        Ok(candidates) => candidates,
        Err(e) => return (Err(e.message().to_string()), None),
    };
    let found = match found {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "discovery search failed; showing the contract list");
            return (Ok(candidates), None);
        }
    };
    let mut merged = merge(candidates, &found.hits, found.total, POPUP_LIMIT);
    if found.from_listing {
        // Hits from the listing know no counts or sizes: show none rather than "0 msgs".
        merged.details.rows.clear();
    }
    // The live badge: one read of the kernel's lock table for the shown rows, off the workers.
    // Only dsh sessions can be live (another agent's session is never locked by a dsh
    // process): rows that are all other agents' need no probe.
    let ids: Vec<String> = merged
        .candidates
        .iter()
        .filter(|c| ExternalAgent::of_id(&c.session_id).is_none())
        .map(|c| c.session_id.clone())
        .collect();
    let listing = match ids.is_empty() {
        true => None,
        false => discovery.query().list_sessions().await.ok(),
    };
    if let Some(listing) = listing {
        let probe = discovery.clone();
        let live = tokio::task::spawn_blocking(move || {
            let by_id: HashMap<&str, _> = listing.iter().map(|s| (s.id(), s)).collect();
            let shown: Vec<_> = ids
                .iter()
                .filter_map(|id| by_id.get(id.as_str()).copied())
                .collect();
            let live = probe.live_elsewhere(&shown);
            shown
                .iter()
                .zip(live)
                .filter(|(_, live)| *live)
                .map(|(s, _)| s.id().to_string())
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for id in live {
            merged
                .details
                .rows
                .entry(id)
                .and_modify(|row| row.live = true)
                .or_insert_with_key(|id| PopupRow {
                    meta: SessionMeta {
                        id: id.clone(),
                        ..SessionMeta::default()
                    },
                    live: true,
                    snippet: None,
                });
        }
    }
    // A pass now; in a new process, the deferred indexer's first one (this answer is ready).
    discovery.poke();
    (Ok(merged.candidates), Some(Arc::new(merged.details)))
}

/// A row's message count and size: `12 msgs · 48 KiB`.
pub fn size_text(row: &SessionMeta) -> String {
    let size = super::text::format_size(row.conversation_bytes);
    let msgs = if row.messages == 1 { "msg" } else { "msgs" };
    format!("{} {msgs} · {size}", row.messages)
}

/// The popup's bottom line for a truncated list, e.g. `50 of 312 · type to narrow`.
pub fn truncation_text(shown: usize, total: usize) -> Option<String> {
    (total > shown).then(|| format!(" {shown} of {total} · type to narrow "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::rank::Field;

    fn hit(id: &str, title: Option<&str>) -> Hit {
        Hit {
            meta: SessionMeta {
                id: id.into(),
                title: title.map(Into::into),
                first_prompt: Some(format!("prompt of {id}")),
                cwd: Some("/w".into()),
                created_at: 1,
                last_activity: 5,
                messages: 3,
                conversation_bytes: 2048,
                source: None,
            },
            score: 1.0,
            matched: vec![Field::Title],
            snippet: None,
        }
    }

    fn candidate(id: &str, label: &str) -> Candidate {
        Candidate {
            session_id: id.into(),
            label: label.into(),
            cwd: None,
            created_at: 2,
        }
    }

    #[test]
    fn hits_come_first_and_each_id_once() {
        let merged = merge(
            vec![candidate("b", "B title"), candidate("c", "c")],
            &[hit("a", Some("A title")), hit("b", Some("B title"))],
            2,
            10,
        );
        let ids: Vec<&str> = merged
            .candidates
            .iter()
            .map(|c| c.session_id.as_str())
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(merged.details.total, 3);
        assert_eq!(merged.details.rows["a"].messages, 3);
        assert_eq!(
            merged.details.rows["a"].meta,
            hit("a", Some("A title")).meta
        );
        assert!(!merged.details.rows.contains_key("c"));
    }

    #[test]
    fn labels_follow_the_contract_rule() {
        let merged = merge(vec![], &[hit("x", None), hit("y", Some("Why"))], 2, 10);
        assert_eq!(merged.candidates[0].label, "x");
        assert_eq!(merged.candidates[1].label, "Why");
    }

    #[test]
    fn a_truncated_list_knows_its_total() {
        let hits: Vec<Hit> = (0..60).map(|i| hit(&format!("s{i}"), None)).collect();
        let merged = merge(vec![candidate("extra", "extra")], &hits[..50], 312, 50);
        assert_eq!(merged.candidates.len(), 50);
        assert_eq!(merged.details.total, 313);
        assert_eq!(
            truncation_text(50, 313).as_deref(),
            Some(" 50 of 313 · type to narrow ")
        );
        assert_eq!(truncation_text(5, 5), None);
    }

    #[test]
    fn sizes_read_like_people_write_them() {
        let mut d = SessionMeta {
            messages: 1,
            conversation_bytes: 10,
            ..SessionMeta::default()
        };
        assert_eq!(size_text(&d), "1 msg · 10 B");
        d.messages = 12;
        d.conversation_bytes = 48 * 1024;
        assert_eq!(size_text(&d), "12 msgs · 48 KiB");
        d.conversation_bytes = 3 * 1024 * 1024 + 1024 * 512;
        assert_eq!(size_text(&d), "12 msgs · 3.5 MiB");
    }
}

/// [`remembered`] over real homes on disk: what a previous process listed and indexed.
#[cfg(test)]
mod remembered_tests {
    use super::*;
    use crate::session::external::{ExternalSessions, SourceSet};
    use std::path::Path;

    const DEMO: &str = "tests/data/fixtures/claude-code/projects/-path-to-Demo";
    const ID: &str = "fe5e1c67-53e7-4862-81ae-d0e013e3270b";

    fn process(dsh: &Path, claude: &Path) -> Discovery {
        let sources = SourceSet {
            hide_dsh: false,
            external: vec![ExternalSessions::with_listing_cache(
                ExternalAgent::Claude,
                claude,
                dsh,
            )],
        };
        Discovery::for_home(dsh, &sources)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_first_rows_are_labelled_by_title_and_carry_their_details() {
        let dir = tempfile::tempdir().unwrap();
        let (dsh, claude) = (dir.path().join("dsh"), dir.path().join("claude"));
        let project = claude.join("projects").join("-path-to-Demo");
        std::fs::create_dir_all(&project).unwrap();
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEMO);
        std::fs::copy(
            from.join(format!("{ID}.jsonl")),
            project.join(format!("{ID}.jsonl")),
        )
        .unwrap();
        let agent = ("me".to_string(), None);
        // Nothing kept yet: no first answer.
        let first = process(&dsh, &claude);
        let none = remembered(first.clone(), agent.clone(), String::new(), 0).await;
        assert!(none.is_none());
        first.query().list_sessions().await.unwrap();
        let index = first.clone();
        tokio::task::spawn_blocking(move || index.refresh_blocking().unwrap())
            .await
            .unwrap();
        drop(first);

        let next = process(&dsh, &claude);
        let (rows, details) = remembered(next.clone(), agent.clone(), String::new(), 0)
            .await
            .expect("rows from what was kept");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].session_id, format!("claude:{ID}"));
        assert_ne!(rows[0].label, rows[0].session_id, "labelled by its id");
        assert!(details.rows[&rows[0].session_id].messages > 0);
        // A query that matches nothing is no answer (no "no sessions" before the checked one).
        let nothing = remembered(next, agent, "zzqqxxnomatch".into(), 0).await;
        assert!(nothing.is_none());
    }
}
