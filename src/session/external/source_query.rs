//! The asynchronous face of one agent's sessions ([`SessionQuery`]) and its conversation reads.
//!
//! Purpose: a source's listing and titles live in `scan.rs`; this file reads one session's
//! conversation (from what a previous process kept of a heavy session, else from its file or
//! database) and answers [`SessionQuery`], each read on a blocking thread, never on an async
//! worker. Invariant: the surface, the plain messages and the conversation of a session come
//! from one read and agree (`reference::projection`'s
//! `plain_conversations_project_like_their_surfaces`). Proof: the agents' session tests under
//! `tests/session/` and `tests/session/agent_conversation_cache.rs`.

use super::conversation_cache::Keep;
use super::{header, not_found, Conversation, ExternalSessions, Head};
use crate::session::error::{Result, SessionError};
use crate::session::query::{
    BoxFuture, PlainConversation, SessionQuery, SessionSummary, SurfaceSnapshot,
};
use std::sync::Arc;

impl ExternalSessions {
    /// The projected conversation of session `id`, as a reference reads it: a heavy session
    /// is kept for the next process.
    pub fn read_conversation_blocking(&self, id: &str) -> Result<(SurfaceSnapshot, Conversation)> {
        self.surface_blocking(id, Keep::Reference)
    }

    /// The surface and conversation of session `id`; `keep`: who reads, which decides whether
    /// a heavy session read here is kept for the next process ([`Keep`]: a reference's read
    /// always; the discovery indexer's pass while there is room or the session is recent).
    fn surface_blocking(&self, id: &str, keep: Keep) -> Result<(SurfaceSnapshot, Conversation)> {
        let (head, conversation) = self.conversation_blocking(id, keep)?;
        let snapshot = super::surface(header(self.agent(), &head), &conversation);
        Ok((snapshot, conversation))
    }

    /// The head and projected conversation of session `id` (`keep` as in
    /// [`ExternalSessions::surface_blocking`]).
    fn conversation_blocking(&self, id: &str, keep: Keep) -> Result<(Head, Conversation)> {
        if let Some(database) = self.agent().format().database() {
            let row = self.database_row(id)?;
            let conversation = database
                .conversation(self.home(), &row.head.id)?
                .ok_or_else(|| not_found(id))?;
            return Ok((row.head, conversation));
        }
        let cache = self.listing_cache_path();
        let kept = super::conversation_cache::Keeping {
            listing: cache,
            keep,
        };
        super::conversation_cache::kept_or_read(kept, self.agent(), self.home(), id, || {
            let (path, head) = self.locate(id)?;
            let head = match head {
                Some(head) => head,
                None => {
                    let head = self.agent().format().read_head(&path)?;
                    head.ok_or_else(|| not_found(id))?
                }
            };
            Ok((path, head))
        })
    }

    fn spawn<T: Send + 'static>(
        &self,
        work: impl FnOnce(ExternalSessions) -> Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T>> {
        let this = self.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || work(this)).await {
                Ok(result) => result,
                Err(source) => Err(SessionError::TaskFailed {
                    what: "external session read",
                    source,
                }),
            }
        })
    }
}

impl SessionQuery for ExternalSessions {
    fn list_sessions(&self) -> BoxFuture<'_, Result<Arc<Vec<SessionSummary>>>> {
        self.spawn(|this| this.list_sessions_blocking())
    }

    fn read_surface<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        let id = id.to_string();
        // The discovery indexer reads every session this way: a bulk reader's keeping.
        self.spawn(move |this| Ok(this.surface_blocking(&id, Keep::Bulk)?.0))
    }

    fn read_title<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
        let id = id.to_string();
        self.spawn(move |this| this.read_title_blocking(&id))
    }

    fn read_titles<'a>(&'a self, ids: &'a [String]) -> BoxFuture<'a, Vec<Result<Option<String>>>> {
        let owned = ids.to_vec();
        let read = self.spawn(move |this| {
            let ids: Vec<&str> = owned.iter().map(String::as_str).collect();
            Ok(this.read_titles_blocking(&ids))
        });
        Box::pin(async move {
            match read.await {
                Ok(titles) => titles,
                // The one hand-off failed (its task stopped): each title is asked on its own,
                // and fails with its own error.
                Err(_) => crate::session::query::read_titles_one_by_one(self, ids).await,
            }
        })
    }

    fn remembered_ids(&self) -> BoxFuture<'_, Option<std::collections::HashSet<String>>> {
        let read = self.spawn(|this| Ok(this.remembered_ids_blocking()));
        Box::pin(async move { read.await.ok().flatten() })
    }

    fn read_plain_conversation<'a>(
        &'a self,
        id: &'a str,
    ) -> Option<BoxFuture<'a, Result<PlainConversation>>> {
        let id = id.to_string();
        Some(self.spawn(move |this| {
            let (head, conversation) = this.conversation_blocking(&id, Keep::Reference)?;
            Ok(super::plain(header(this.agent(), &head), conversation))
        }))
    }
}
