//! A scripted OpenAI-compatible server on 127.0.0.1 for provider tests: each request takes the
//! next scripted reply (status, headers, body parts with pauses), the server records every
//! request it got, and it notices when a client goes away before a body was fully sent.
#![allow(dead_code)]

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One piece of a response body.
#[derive(Debug, Clone)]
pub enum Part {
    Bytes(String),
    Sleep(Duration),
    /// Break the connection (the body ends with an error).
    Abort,
    /// Never send anything more.
    Hang,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub parts: Vec<Part>,
    /// How long the server waits before sending the status line and headers.
    pub delay: Duration,
}

impl Reply {
    pub fn sse(parts: Vec<Part>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            parts,
            delay: Duration::ZERO,
        }
    }

    pub fn status(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            parts: vec![Part::Bytes(body.to_string())],
            delay: Duration::ZERO,
        }
    }

    pub fn delayed(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What the server got.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub body: Value,
    pub authorization: Option<String>,
    pub at: Instant,
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    /// Bodies dropped before their last part was sent (the client went away).
    disconnects: AtomicUsize,
}

pub struct Server {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Server {
    pub async fn start(script: Vec<Reply>) -> Server {
        let shared = Arc::new(Shared::default());
        *shared.script.lock().unwrap() = script.into();
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Server { addr, shared }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn disconnects(&self) -> usize {
        self.shared.disconnects.load(Ordering::SeqCst)
    }

    /// Waits up to `limit` for a disconnect to be observed.
    pub async fn wait_disconnect(&self, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.disconnects() > 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }
}

struct DropGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.disconnects.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(Recorded {
        body,
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        at: Instant::now(),
    });
    let reply = shared
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| Reply::status(500, r#"{"error":{"message":"no scripted reply"}}"#));
    tokio::time::sleep(reply.delay).await;
    let guard = DropGuard {
        shared: shared.clone(),
        finished: false,
    };
    let parts: VecDeque<Part> = reply.parts.into();
    let stream =
        futures_util::stream::unfold((parts, guard), |(mut parts, mut guard)| async move {
            loop {
                match parts.pop_front() {
                    None => return None,
                    Some(Part::Sleep(d)) => tokio::time::sleep(d).await,
                    Some(Part::Bytes(b)) => {
                        // The last part marks the body complete: dropping it later is no disconnect.
                        if parts.is_empty() {
                            guard.finished = true;
                        }
                        return Some((Ok::<Bytes, std::io::Error>(Bytes::from(b)), (parts, guard)));
                    }
                    Some(Part::Abort) => {
                        guard.finished = true;
                        return Some((
                            Err(std::io::Error::other("scripted abort")),
                            (parts, guard),
                        ));
                    }
                    Some(Part::Hang) => std::future::pending::<()>().await,
                }
            }
        });
    let mut response = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (name, value) in &reply.headers {
        response = response.header(name.as_str(), value.as_str());
    }
    response.body(Body::from_stream(stream)).unwrap()
}

/// An SSE `data:` event for a chat-completion chunk with this delta.
pub fn delta(delta: Value) -> String {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

pub fn finish(reason: &str) -> String {
    let chunk =
        json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]});
    format!("data: {chunk}\n\n")
}

pub fn usage(prompt: u64, cached: u64, completion: u64, reasoning: u64) -> String {
    let chunk = json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": cached}, "completion_tokens_details": {"reasoning_tokens": reasoning}}});
    format!("data: {chunk}\n\n")
}

pub const DONE: &str = "data: [DONE]\n\n";

/// Splits `text` into small, irregular chunks (1–13 bytes, on char boundaries) with short
/// pauses between some of them, as a real network would deliver it.
pub fn chunked(text: &str) -> Vec<Part> {
    const SIZES: [usize; 7] = [1, 7, 3, 13, 2, 5, 11];
    let mut parts = Vec::new();
    let mut rest = text;
    let mut i = 0;
    while !rest.is_empty() {
        let mut n = SIZES[i % SIZES.len()].min(rest.len());
        while !rest.is_char_boundary(n) {
            n += 1;
        }
        parts.push(Part::Bytes(rest[..n].to_string()));
        if i % 5 == 4 {
            parts.push(Part::Sleep(Duration::from_millis(1)));
        }
        rest = &rest[n..];
        i += 1;
    }
    parts
}

/// A whole DeepSeek-style answer: reasoning, then text, then usage and `[DONE]`.
pub fn answer(reasoning: &[&str], text: &[&str]) -> String {
    let mut out = String::from(": keep-alive\n\n");
    out.push_str(&delta(
        json!({"role": "assistant", "content": "", "reasoning_content": ""}),
    ));
    for r in reasoning {
        out.push_str(&delta(json!({"reasoning_content": r})));
    }
    for t in text {
        out.push_str(&delta(json!({"content": t})));
    }
    out.push_str(&finish("stop"));
    out.push_str(&usage(120, 100, 9, 4));
    out.push_str(DONE);
    out
}
