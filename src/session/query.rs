//! `SessionQuery`: the read interface the session-reference service consumes (SPEC §1.6).
//!
//! It is object-safe (`Arc<dyn SessionQuery>`) so hosts can compose backends: the on-disk store,
//! the sessions live in this process, or their own.

use super::error::Result;
use super::format::{Event, SessionHeader};
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

/// The boxed, `Send` future every [`SessionQuery`] method returns (keeps the trait object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A session's conversation that its backend keeps already projected to plain messages
/// (another agent's session): what projecting its
/// [`read_conversation_surface`](SessionQuery::read_conversation_surface) would give, without
/// building the surface and decoding it again.
#[derive(Debug, Clone, PartialEq)]
pub struct PlainConversation {
    /// The header its surface carries.
    pub session: SessionHeader,
    /// The surface's `captured_through_seq`.
    pub captured_through_seq: Option<u64>,
    /// The messages, oldest first (a message with empty text included: the projection skips it).
    pub messages: Vec<PlainMessage>,
}

/// One message of a [`PlainConversation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainMessage {
    /// Who said it.
    pub role: PlainRole,
    /// Its text.
    pub text: String,
}

/// The role of a [`PlainMessage`], as its surface event would be classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlainRole {
    /// A prompt the person typed.
    Prompt,
    /// The assistant's reply.
    Reply,
    /// A compaction summary standing for the history before it.
    Checkpoint,
}

/// One row of [`SessionQuery::list_sessions`].
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The session's header (shared with the store's cached list).
    pub header: Arc<SessionHeader>,
    /// Held by an agent in this process.
    pub live: bool,
    /// Has a log on disk.
    pub persisted: bool,
}

impl SessionSummary {
    /// The session's id (from the header, never from a directory name).
    pub fn id(&self) -> &str {
        &self.header.id
    }
    /// The session's working directory; `None` when the header has none.
    pub fn cwd(&self) -> Option<&str> {
        self.header.cwd.as_deref()
    }
    /// When the session was created, in epoch milliseconds.
    pub fn created_at(&self) -> i64 {
        self.header.created_at
    }
}

/// The folded current surface of one session at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct SurfaceSnapshot {
    /// The header of the session read.
    pub session: SessionHeader,
    /// The highest raw-log seq of any event type; `None` for an empty log.
    pub captured_through_seq: Option<u64>,
    /// Surface events in surface order.
    pub events: Vec<Event>,
}

/// Read access to sessions. Unknown ids fail with [`super::SessionError::NotFound`].
pub trait SessionQuery: Send + Sync {
    /// Every session, once each (ids are unique), newest `createdAt` first, ties by id
    /// ascending. Never folds logs.
    fn list_sessions(&self) -> BoxFuture<'_, Result<Arc<Vec<SessionSummary>>>>;
    /// The folded current surface; a live session wins over its persisted copy.
    fn read_surface<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SurfaceSnapshot>>;
    /// The title of the last `session/title` event, if any.
    fn read_title<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<String>>>;

    /// The titles of `ids`, in order, each as [`SessionQuery::read_title`] gives it: a backend
    /// that reads titles on a thread of its own answers them all in one hand-off (a first
    /// listing of hundreds of untitled entries otherwise pays a thread switch each). The
    /// default asks one by one.
    fn read_titles<'a>(&'a self, ids: &'a [String]) -> BoxFuture<'a, Vec<Result<Option<String>>>> {
        Box::pin(read_titles_one_by_one(self, ids))
    }

    /// The ids of the sessions this backend's previous process listed, without checking any
    /// file, when it keeps its listing between processes: what a first answer may show at once
    /// while [`SessionQuery::list_sessions`] checks every file (so it may still name a session
    /// deleted since). `None` (the default): nothing kept; list instead.
    fn remembered_ids(&self) -> BoxFuture<'_, Option<HashSet<String>>> {
        Box::pin(async { None })
    }

    /// The surface as [`SessionQuery::read_surface`] returns it, for readers that only project
    /// its conversation (the session-reference service): a backend may leave out payloads the
    /// projection (SPEC §3.5) never reads. Tool results and other non-message surface events may
    /// then carry `data: null`, and message events only their text blocks, source, role, id and
    /// display content. Seqs, order, surface ops and `captured_through_seq` are exact.
    ///
    /// The default is `read_surface`; the disk store overrides it so that the memory a snapshot
    /// costs follows its conversation text, not the size of the log.
    fn read_conversation_surface<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        self.read_surface(id)
    }

    /// The conversation of session `id` as plain messages, when this backend keeps it so (the
    /// sessions of other agents): the same messages, roles and text that projecting
    /// [`SessionQuery::read_conversation_surface`] gives. `None` (the default): read the surface.
    fn read_plain_conversation<'a>(
        &'a self,
        _id: &'a str,
    ) -> Option<BoxFuture<'a, Result<PlainConversation>>> {
        None
    }

    /// For a reader with a thread of its own (the discovery indexer): the conversation surface
    /// ([`SessionQuery::read_conversation_surface`]) and the title of one session, read on the
    /// calling thread, which may block. `None` when this backend has no such path; the caller
    /// then uses the async methods. The disk store answers it with one scan of the log, without
    /// an async hand-off (two thread switches per read).
    fn read_for_index_blocking(
        &self,
        id: &str,
    ) -> Option<Result<(SurfaceSnapshot, Option<String>)>> {
        let _ = id;
        None
    }
}

impl<T: SessionQuery + ?Sized> SessionQuery for Arc<T> {
    fn list_sessions(&self) -> BoxFuture<'_, Result<Arc<Vec<SessionSummary>>>> {
        (**self).list_sessions()
    }
    fn read_surface<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        (**self).read_surface(id)
    }
    fn read_title<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
        (**self).read_title(id)
    }
    fn read_titles<'a>(&'a self, ids: &'a [String]) -> BoxFuture<'a, Vec<Result<Option<String>>>> {
        (**self).read_titles(ids)
    }
    fn remembered_ids(&self) -> BoxFuture<'_, Option<HashSet<String>>> {
        (**self).remembered_ids()
    }
    fn read_conversation_surface<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SurfaceSnapshot>> {
        (**self).read_conversation_surface(id)
    }
    fn read_plain_conversation<'a>(
        &'a self,
        id: &'a str,
    ) -> Option<BoxFuture<'a, Result<PlainConversation>>> {
        (**self).read_plain_conversation(id)
    }
    fn read_for_index_blocking(
        &self,
        id: &str,
    ) -> Option<Result<(SurfaceSnapshot, Option<String>)>> {
        (**self).read_for_index_blocking(id)
    }
}

/// `list_sessions` order: newest `createdAt` first, ties by id ascending.
pub fn sort_sessions(sessions: &mut [SessionSummary]) {
    sessions.sort_by(session_order);
}

/// The listing order [`sort_sessions`] sorts by: newest `createdAt` first, ties by id ascending.
pub fn session_order(a: &SessionSummary, b: &SessionSummary) -> std::cmp::Ordering {
    b.created_at()
        .cmp(&a.created_at())
        .then_with(|| a.id().cmp(b.id()))
}

/// The titles of `ids`, in order, asked of `query` one by one ([`SessionQuery::read_title`]):
/// what [`SessionQuery::read_titles`] does for a backend with no faster way.
pub async fn read_titles_one_by_one<Q: SessionQuery + ?Sized>(
    query: &Q,
    ids: &[String],
) -> Vec<Result<Option<String>>> {
    let mut titles = Vec::with_capacity(ids.len());
    for id in ids {
        titles.push(query.read_title(id).await);
    }
    titles
}

/// Polls every future concurrently and returns their outputs in input order.
pub async fn join_all<'a, T>(futures: Vec<BoxFuture<'a, T>>) -> Vec<T> {
    let mut pending: Vec<Option<BoxFuture<'a, T>>> = futures.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (slot, output) in pending.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => {
                        *output = Some(value);
                        *slot = None;
                    }
                    Poll::Pending => done = false,
                }
            }
        }
        if done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|output| output.expect("every future completed"))
        .collect()
}
