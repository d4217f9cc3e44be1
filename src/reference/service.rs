//! The session-reference service (SPEC §3.3, §3.4): candidates for the `@` popup, and `prepare`,
//! which turns a message's references into one sourced context message.
//!
//! Everything but the reads is synchronous and pure. Reads race the caller's cancellation token,
//! so a cancelled preparation settles at once even when storage never answers; the abandoned
//! read futures are dropped with their results.
//!
//! Sources are read with [`SessionQuery::read_conversation_surface`]: the projection only looks at
//! messages, so a store may skip decoding tool output and chunk rows, which is what keeps
//! `prepare` near the cost of reading the files and its memory near the retained text.

use super::candidate::Candidate;
use super::config::SessionReferenceConfig;
use super::error::{ErrorCode, Result, SessionReferenceError};
pub use super::identity::AgentIdentity;
use super::json::string_literal;
use super::mention::ParsedReference;
use super::projection::project_owned;
use super::ranking::RankIndex;
use super::render::{render_context, ConversationEntry, ReferenceMeta};
use super::retention::{retain, Retained, SourceMeta};
use crate::session::external::ExternalAgent;
use crate::session::query::join_all;
use crate::session::{
    ContentBlock, Message, MessageSource, SessionError, SessionQuery, SurfaceSnapshot,
};
use crate::sync::LockExt;
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// One requested source, as mentioned (label defaults to the id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceInput {
    /// The id of the session to snapshot.
    pub session_id: String,
    /// The label the model sees for it; `None` means the id.
    pub label: Option<String>,
}

impl ReferenceInput {
    /// A reference to `session_id`, labelled `label` (the id when `None`).
    pub fn new(session_id: impl Into<String>, label: Option<String>) -> Self {
        ReferenceInput {
            session_id: session_id.into(),
            label,
        }
    }
}

impl From<ParsedReference> for ReferenceInput {
    fn from(reference: ParsedReference) -> Self {
        ReferenceInput {
            session_id: reference.session_id,
            label: Some(reference.label),
        }
    }
}

/// The result of [`SessionReferences::prepare`].
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The caller's content, detached.
    pub content: Vec<ContentBlock>,
    /// The context message to log before the content, when there were references.
    pub additional_context: Option<Message>,
    /// The context's per-source metadata, typed (the same entries its source's `references`
    /// holds, SPEC §3.9), in normalized order; empty without references.
    pub references: Vec<ReferenceMeta>,
}

/// What a mention of one session would send, prepared alone ([`SessionReferences::preview`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferencePreview {
    /// UTF-8 bytes of the context message this source alone would add.
    pub context_bytes: usize,
    /// Its metadata entry (SPEC §3.9).
    pub meta: ReferenceMeta,
    /// The conversation the snapshot would carry, in surface order (what retention kept).
    pub conversation: Vec<ConversationEntry>,
}

/// A normalized reference: distinct id, resolved label.
struct Source {
    session_id: String,
    label: String,
}

/// The session-reference service over any [`SessionQuery`]. Cheap to clone.
#[derive(Clone)]
pub struct SessionReferences {
    query: Arc<dyn SessionQuery>,
    config: SessionReferenceConfig,
    /// Ranking work shared by consecutive `list_candidates` calls (see [`super::ranking`]).
    ranking: Arc<Mutex<Option<RankIndex>>>,
}

impl std::fmt::Debug for SessionReferences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionReferences")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SessionReferences {
    /// Validates `config` (`INVALID_CONFIG`) and builds the service.
    pub fn new(query: Arc<dyn SessionQuery>, config: SessionReferenceConfig) -> Result<Self> {
        config.validate()?;
        Ok(SessionReferences {
            query,
            config,
            ranking: Arc::new(Mutex::new(None)),
        })
    }

    /// The configuration the service was built with (already validated).
    pub fn config(&self) -> &SessionReferenceConfig {
        &self.config
    }

    /// The store the service reads sources and candidates from.
    pub fn query(&self) -> &Arc<dyn SessionQuery> {
        &self.query
    }

    /// Sessions the agent may mention, best first (SPEC §3.3). `limit` defaults to the
    /// configured `candidate_limit`.
    pub async fn list_candidates(
        &self,
        agent: &AgentIdentity,
        query: &str,
        limit: Option<i64>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Candidate>> {
        let limit = match limit {
            None => self.config.candidate_limit(),
            Some(limit) if limit >= 1 => usize::try_from(limit).unwrap_or(usize::MAX),
            Some(limit) => {
                return Err(SessionReferenceError::invalid_reference(format!(
                    "the candidate limit must be at least 1, got {limit}"
                )))
            }
        };
        if cancel.is_cancelled() {
            return Err(SessionReferenceError::cancelled("listing candidates"));
        }
        let sessions = until_cancelled(cancel, "listing candidates", self.query.list_sessions())
            .await?
            .map_err(|err| {
                SessionReferenceError::new(
                    ErrorCode::ReadFailed,
                    format!("could not list sessions: {err}"),
                )
                .with_cause(err)
            })?;
        let selected = {
            let mut index = self.ranking.locked();
            if !index.as_ref().is_some_and(|i| i.serves(&sessions, agent)) {
                *index = Some(RankIndex::new(sessions.clone(), agent));
            }
            index.as_mut().expect("index just built").rank(query, limit)
        };
        let titles = until_cancelled(
            cancel,
            "listing candidates",
            join_all(
                selected
                    .iter()
                    .map(|session| self.query.read_title(session.id()))
                    .collect(),
            ),
        )
        .await?;
        Ok(selected
            .into_iter()
            .zip(titles)
            .map(|(session, title)| {
                let title = title.unwrap_or_else(|err| {
                    // A broken title must not hide the session from the popup: fall back to its
                    // id as the spec does for untitled sessions.
                    tracing::warn!(session = session.id(), error = %err, "could not read title");
                    None
                });
                Candidate {
                    session_id: session.id().to_string(),
                    label: title.unwrap_or_else(|| session.id().to_string()),
                    cwd: session.cwd().map(str::to_string),
                    created_at: session.created_at(),
                }
            })
            .collect())
    }

    /// Reads every referenced session once and builds the context message (SPEC §3.4).
    pub async fn prepare(
        &self,
        agent: &AgentIdentity,
        content: Vec<ContentBlock>,
        references: Vec<ReferenceInput>,
        cancel: &CancellationToken,
    ) -> Result<Prepared> {
        let retained = self.retain_all(agent, references, cancel).await?;
        if retained.is_empty() {
            return Ok(Prepared {
                content,
                additional_context: None,
                references: Vec::new(),
            });
        }
        let (message, references) = context_message(&retained);
        Ok(Prepared {
            content,
            additional_context: Some(message),
            references,
        })
    }

    /// What a mention of `reference` would send, prepared alone (SPEC §5.6): the badge and the
    /// popup's preview read it. The same steps as [`prepare`](Self::prepare) (a send prepares
    /// afresh); errors are `prepare`'s.
    pub async fn preview(
        &self,
        agent: &AgentIdentity,
        reference: ReferenceInput,
        cancel: &CancellationToken,
    ) -> Result<ReferencePreview> {
        let mut retained = self.retain_all(agent, vec![reference], cancel).await?;
        let (retained, source) = retained.pop().ok_or_else(|| {
            SessionReferenceError::invalid_reference("a preview needs one reference")
        })?;
        let context_bytes = render_context(&[retained.data.to_json()]).len();
        Ok(ReferencePreview {
            context_bytes,
            meta: ReferenceMeta::new(&retained.data, &retained.stats, 0, source),
            conversation: retained.data.conversation,
        })
    }

    /// Steps 1–4 of §3.4: normalize, read every source once, project and retain each; in
    /// normalized order, each with the other agent that wrote it. Empty without references.
    async fn retain_all(
        &self,
        agent: &AgentIdentity,
        references: Vec<ReferenceInput>,
        cancel: &CancellationToken,
    ) -> Result<Vec<(Retained, Option<ExternalAgent>)>> {
        let sources = self.normalize(agent, references)?;
        if sources.is_empty() {
            return Ok(Vec::new());
        }
        if cancel.is_cancelled() {
            return Err(SessionReferenceError::cancelled(
                "preparing session references",
            ));
        }
        // Each source is projected and retained (steps 4's per-source work, independent by
        // §3.6) on a blocking thread as soon as its read lands, so sources are processed in
        // parallel and overlap the reads still running.
        let max_bytes = self.config.max_reference_bytes();
        let work = sources
            .iter()
            .map(|source| {
                let id = source.session_id.as_str();
                // A backend that keeps the conversation as plain messages (another agent's
                // session) gives them without a surface to build and decode again.
                let read: crate::session::BoxFuture<'_, _> =
                    match self.query.read_plain_conversation(id) {
                        Some(plain) => Box::pin(async move { plain.await.map(Read::Plain) }),
                        None => {
                            let surface = self.query.read_conversation_surface(id);
                            Box::pin(async move { surface.await.map(Read::Surface) })
                        }
                    };
                let meta = (source.session_id.clone(), source.label.clone());
                Box::pin(async move {
                    let read = read.await?;
                    // Sessions of other agents name their source in the metadata (SPEC §9).
                    let agent = crate::session::external::source_of(read.header());
                    Ok(retain_source(meta, read, max_bytes)
                        .await
                        .map(|retained| (retained, agent)))
                }) as crate::session::BoxFuture<'_, _>
            })
            .collect();
        #[allow(clippy::type_complexity)]
        let outcomes: Vec<
            std::result::Result<Result<(Retained, Option<ExternalAgent>)>, SessionError>,
        > = until_cancelled(cancel, "preparing session references", join_all(work)).await?;
        if cancel.is_cancelled() {
            return Err(SessionReferenceError::cancelled(
                "preparing session references",
            ));
        }
        // Every read is judged before any budget (steps 3 then 4), each in normalized order.
        let mut retained_sources = Vec::with_capacity(outcomes.len());
        for (outcome, source) in outcomes.into_iter().zip(&sources) {
            retained_sources.push(outcome.map_err(|err| read_failed(source, err))?);
        }
        retained_sources.into_iter().collect()
    }

    /// Step 1 of §3.4: self check per element, dedupe (first label wins), limit after dedupe.
    fn normalize(
        &self,
        agent: &AgentIdentity,
        references: Vec<ReferenceInput>,
    ) -> Result<Vec<Source>> {
        let mut seen = HashSet::new();
        let mut sources = Vec::new();
        for reference in references {
            if reference.session_id == agent.id {
                return Err(SessionReferenceError::new(
                    ErrorCode::SelfReference,
                    format!(
                        "session {} cannot reference itself",
                        string_literal(&agent.id)
                    ),
                ));
            }
            if !seen.insert(reference.session_id.clone()) {
                continue;
            }
            let label = reference
                .label
                .unwrap_or_else(|| reference.session_id.clone());
            sources.push(Source {
                session_id: reference.session_id,
                label,
            });
        }
        let max = self.config.max_references();
        if sources.len() > max {
            return Err(SessionReferenceError::new(
                ErrorCode::TooMany,
                format!(
                    "a message may reference at most {max} distinct sessions, got {}",
                    sources.len()
                ),
            ));
        }
        Ok(sources)
    }
}

/// A source's conversation as its backend gave it.
enum Read {
    Surface(SurfaceSnapshot),
    Plain(crate::session::PlainConversation),
}

impl Read {
    fn header(&self) -> &crate::session::SessionHeader {
        match self {
            Read::Surface(snapshot) => &snapshot.session,
            Read::Plain(plain) => &plain.session,
        }
    }
}

/// Step 4 of §3.4 for one source: projection (§3.5) and retention (§3.6), on a blocking thread.
async fn retain_source(
    (session_id, label): (String, String),
    read: Read,
    max_bytes: usize,
) -> Result<Retained> {
    let work = move || {
        // Consumed event by event: the raw surface is freed as its text is projected.
        let (session, captured_through_seq, items) = match read {
            Read::Surface(snapshot) => project_owned(snapshot),
            Read::Plain(plain) => super::projection::project_plain(plain),
        };
        let meta = SourceMeta {
            session_id,
            label,
            cwd: session.cwd,
            captured_through_seq,
        };
        retain(meta, items, max_bytes)
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(retained) => retained,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        // The runtime is shutting down.
        Err(_) => Err(SessionReferenceError::cancelled(
            "preparing session references",
        )),
    }
}

/// Step 5 of §3.4: the context message of the retained sources, in normalized order, and its
/// typed metadata.
///
/// An entry for another agent's session ends with `"source"` (`"claude"`, `"codex"`), after the
/// §3.9 keys; entries for dsh sessions keep exactly the §3.9 keys.
fn context_message(sources: &[(Retained, Option<ExternalAgent>)]) -> (Message, Vec<ReferenceMeta>) {
    let entries: Vec<ReferenceMeta> = sources
        .iter()
        .enumerate()
        .map(|(index, (retained, agent))| {
            ReferenceMeta::new(&retained.data, &retained.stats, index, *agent)
        })
        .collect();
    let objects: Vec<_> = sources
        .iter()
        .map(|(retained, _)| retained.data.to_json())
        .collect();
    let source = MessageSource::SessionReference {
        version: 1.into(),
        references: ReferenceMeta::to_references(&entries),
        extra: Default::default(),
    };
    let message = Message::new(
        "user",
        vec![ContentBlock::text(render_context(&objects))],
        source,
        format!("session-reference-{}", uuid::Uuid::new_v4()),
    );
    (message, entries)
}

fn read_failed(source: &Source, err: SessionError) -> SessionReferenceError {
    SessionReferenceError::new(
        ErrorCode::ReadFailed,
        format!(
            "could not read session {}: {err}",
            string_literal(&source.session_id)
        ),
    )
    .with_cause(err)
}

/// The stable ranking and filtering of §3.3 steps 3–6 (without titles), done literally: the
/// reference [`RankIndex`] is tested against.
#[cfg(test)]
fn rank_candidates(
    sessions: &[crate::session::SessionSummary],
    agent: &AgentIdentity,
    query: &str,
    limit: usize,
) -> Vec<crate::session::SessionSummary> {
    use crate::session::SessionSummary;
    let needle = query.to_lowercase();
    let matches = |session: &&SessionSummary| {
        session.id() != agent.id
            && (needle.is_empty()
                || session.id().to_lowercase().contains(&needle)
                || session
                    .cwd()
                    .is_some_and(|cwd| cwd.to_lowercase().contains(&needle)))
    };
    let group = |session: &SessionSummary| match (session.cwd(), agent.cwd.as_deref()) {
        (Some(cwd), Some(own)) if cwd == own => 0,
        (None, _) => 1,
        _ => 2,
    };
    let mut kept: Vec<&SessionSummary> = sessions.iter().filter(matches).collect();
    // `sort_by_key` is stable, so list order (newest first) survives within each group.
    kept.sort_by_key(|session| group(session));
    kept.into_iter().take(limit).cloned().collect()
}

/// Runs `future` unless `cancel` fires first; the future is dropped on cancellation.
async fn until_cancelled<T>(
    cancel: &CancellationToken,
    what: &str,
    future: impl Future<Output = T>,
) -> Result<T> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(SessionReferenceError::cancelled(what)),
        value = future => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{SessionHeader, SessionSummary};

    fn summary(id: &str, cwd: Option<&str>) -> SessionSummary {
        SessionSummary {
            header: Arc::new(SessionHeader::new(id, 0, cwd.map(str::to_string))),
            live: false,
            persisted: true,
        }
    }

    #[test]
    fn ranking_groups_are_stable() {
        let sessions = vec![
            summary("other-new", Some("/elsewhere")),
            summary("nocwd-new", None),
            summary("same-new", Some("/w")),
            summary("me", Some("/w")),
            summary("other-old", Some("/x")),
            summary("same-old", Some("/w")),
            summary("nocwd-old", None),
        ];
        let agent = AgentIdentity::new("me", Some("/w".into()));
        let ids: Vec<String> = rank_candidates(&sessions, &agent, "", 10)
            .iter()
            .map(|s| s.id().to_string())
            .collect();
        assert_eq!(
            ids,
            [
                "same-new",
                "same-old",
                "nocwd-new",
                "nocwd-old",
                "other-new",
                "other-old"
            ]
        );
        let ids: Vec<String> = rank_candidates(&sessions, &agent, "ELSE", 10)
            .iter()
            .map(|s| s.id().to_string())
            .collect();
        assert_eq!(ids, ["other-new"]);
        assert_eq!(rank_candidates(&sessions, &agent, "", 2).len(), 2);
        // Without an agent cwd, cwd-less sessions lead.
        let agent = AgentIdentity::new("me", None);
        let first = rank_candidates(&sessions, &agent, "", 1);
        assert_eq!(first[0].id(), "nocwd-new");
    }

    #[test]
    fn the_index_ranks_exactly_like_the_spec() {
        let cwds = [
            Some("/w"),
            None,
            Some("/X/Ünï"),
            Some("/x/other"),
            Some("/w/sub"),
        ];
        let sessions: Vec<SessionSummary> = (0..300)
            .map(|i| summary(&format!("S{i:03}-İd{}", i % 7), cwds[i % cwds.len()]))
            .collect();
        let list = Arc::new(sessions);
        for agent in [
            AgentIdentity::new("S004-İd4", Some("/w".into())),
            AgentIdentity::new("nobody", None),
        ] {
            let mut index = RankIndex::new(list.clone(), &agent);
            // A typing sequence (narrowing), then unrelated queries (no narrowing).
            for query in [
                "", "s", "s0", "s01", "s01", "x", "/x", "/x/ü", "ünï", "İ", "i̇d", "zz", "", "W",
            ] {
                for limit in [1, 7, 1000] {
                    let want: Vec<&str> = rank_candidates(&list, &agent, query, limit)
                        .iter()
                        .map(|s| s.id())
                        .map(|id| list.iter().find(|s| s.id() == id).unwrap().id())
                        .collect();
                    let got = index.rank(query, limit);
                    let got: Vec<&str> = got
                        .iter()
                        .map(|s| list.iter().find(|t| t.id() == s.id()).unwrap().id())
                        .collect();
                    assert_eq!(got, want, "{query:?} limit {limit}");
                }
            }
        }
    }

    #[test]
    fn service_futures_are_send() {
        fn assert_send<T: Send>(_: &T) {}
        let service =
            SessionReferences::new(Arc::new(NoSessions), SessionReferenceConfig::default())
                .unwrap();
        let agent = AgentIdentity::new("a", None);
        let cancel = CancellationToken::new();
        assert_send(&service.list_candidates(&agent, "", None, &cancel));
        assert_send(&service.prepare(&agent, vec![], vec![], &cancel));
    }

    struct NoSessions;

    impl SessionQuery for NoSessions {
        fn list_sessions(
            &self,
        ) -> crate::session::BoxFuture<'_, crate::session::error::Result<Arc<Vec<SessionSummary>>>>
        {
            Box::pin(async { Ok(Arc::new(Vec::new())) })
        }
        fn read_surface<'a>(
            &'a self,
            id: &'a str,
        ) -> crate::session::BoxFuture<'a, crate::session::error::Result<SurfaceSnapshot>> {
            Box::pin(async move { Err(SessionError::NotFound { id: id.to_string() }) })
        }
        fn read_title<'a>(
            &'a self,
            _id: &'a str,
        ) -> crate::session::BoxFuture<'a, crate::session::error::Result<Option<String>>> {
            Box::pin(async { Ok(None) })
        }
    }
}
