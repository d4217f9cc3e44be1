//! A raw HTTP/1.1 server on 127.0.0.1 for hostile-server tests: each connection reads one
//! request (head and `Content-Length` body), counts it, and writes exactly the bytes it was
//! scripted to — a status line and headers of any kind, then a body that may never end or drip
//! one byte at a time. No HTTP library is involved on this side, so nothing tidies what we send.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The body after the head.
#[derive(Debug, Clone)]
pub enum RawBody {
    /// These bytes, then the connection closes.
    Bytes(Vec<u8>),
    /// `first`, then `repeat` over and over with `pause` between writes, forever.
    Endless {
        first: Vec<u8>,
        repeat: Vec<u8>,
        pause: Duration,
    },
}

/// One scripted answer: the status line and headers (without the blank line) and the body.
#[derive(Debug, Clone)]
pub struct RawReply {
    pub head: String,
    pub body: RawBody,
}

impl RawReply {
    /// `HTTP/1.1 {status}` with these headers and `connection: close`.
    pub fn new(status: &str, headers: &[(&str, &str)], body: RawBody) -> RawReply {
        let mut head = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        RawReply { head, body }
    }

    /// 200 `text/event-stream` with this body.
    pub fn sse(body: RawBody) -> RawReply {
        RawReply::new("200 OK", &[("content-type", "text/event-stream")], body)
    }
}

pub struct RawServer {
    pub addr: SocketAddr,
    requests: Arc<AtomicUsize>,
}

impl RawServer {
    /// Answers request `n` (from 0) with `script(n)`.
    pub async fn start(script: impl Fn(usize) -> RawReply + Send + Sync + 'static) -> RawServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = requests.clone();
        let script = Arc::new(script);
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let (counter, script) = (counter.clone(), script.clone());
                tokio::spawn(async move {
                    let _ = answer(socket, counter, script).await;
                });
            }
        });
        RawServer { addr, requests }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests read so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn answer(
    mut socket: tokio::net::TcpStream,
    counter: Arc<AtomicUsize>,
    script: Arc<dyn Fn(usize) -> RawReply + Send + Sync>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 8192];
    let body_at = loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let text = String::from_utf8_lossy(&head[..body_at]).to_lowercase();
    let length: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut have = head.len() - body_at;
    while have < length {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        have += n;
    }
    let n = counter.fetch_add(1, Ordering::SeqCst);
    let reply = script(n);
    socket.write_all(reply.head.as_bytes()).await?;
    socket.write_all(b"\r\n").await?;
    match reply.body {
        RawBody::Bytes(bytes) => {
            socket.write_all(&bytes).await?;
            socket.shutdown().await?;
        }
        RawBody::Endless {
            first,
            repeat,
            pause,
        } => {
            socket.write_all(&first).await?;
            loop {
                socket.write_all(&repeat).await?;
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
    Ok(())
}

/// One SSE text event.
pub fn text_event(text: &str) -> String {
    let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]});
    format!("data: {chunk}\n\n")
}
