//! What a hostile model server costs us (issue 20 §2, RELIABILITY.md "Trust, round two"),
//! against a raw HTTP/1.1 server on 127.0.0.1 that writes whatever it is told to:
//!
//! ```sh
//! # one `data:` line of 8 MiB that never ends: time until the turn fails, and how
//! cargo run --release --example measure_provider -- line --mb 8
//! # the same at 64 MiB (the stream's byte cap)
//! cargo run --release --example measure_provider -- line --mb 64
//! # cancel while the server keeps sending: 20 rounds, the time from cancel to the answer ending
//! cargo run --release --example measure_provider -- cancel --rounds 20 --drip line
//! cargo run --release --example measure_provider -- cancel --rounds 20 --drip events
//! ```
//!
//! `line` sends `data: {"x":"` and then `--mb` MiB of `x` in 64 KiB writes, as fast as the
//! client reads, then hangs (no newline, ever); the provider's idle timeout is 120 s, so an
//! error that comes sooner is the provider's own decision. `--limit SECS` gives up waiting.
//! `cancel` starts a request, lets the server send for 200 ms (`line`: one endless `data:` line,
//! 64 KiB every 10 ms; `events`: complete text events, back to back, as fast as we read), cancels,
//! and times until `stream` returns (no byte cap, so only the cancel can end it).

use dsh_session_references::agent::config::{ProviderSettings, MAX_STREAM_BYTES};
use dsh_session_references::agent::openai::OpenAiProvider;
use dsh_session_references::agent::ModelRequest;
use dsh_session_references::agent::{ModelError, ModelProvider};
use dsh_session_references::session::{ContentBlock, Message, MessageSource};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy)]
enum Drip {
    /// One `data:` line that never ends.
    Line,
    /// Complete text events, back to back, forever.
    Events,
}

/// Serves every connection: reads the request head and body (`Content-Length`), answers 200
/// `text/event-stream` and then the `drip` body. `total` bounds the line mode (bytes of `x`).
async fn serve(drip: Drip, total: usize, pause: Duration) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 4096];
                let body_at = loop {
                    let Ok(n) = socket.read(&mut byte).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&byte[..n]);
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
                    match socket.read(&mut byte).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => have += n,
                    }
                }
                let start = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                             connection: close\r\n\r\n";
                if socket.write_all(start.as_bytes()).await.is_err() {
                    return;
                }
                match drip {
                    Drip::Line => {
                        let _ = socket.write_all(b"data: {\"x\":\"").await;
                        let chunk = vec![b'x'; 64 * 1024];
                        let mut sent = 0;
                        while sent < total {
                            let n = chunk.len().min(total - sent);
                            if socket.write_all(&chunk[..n]).await.is_err() {
                                return;
                            }
                            sent += n;
                            if !pause.is_zero() {
                                tokio::time::sleep(pause).await;
                            }
                        }
                        std::future::pending::<()>().await;
                    }
                    Drip::Events => {
                        let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word \"}}]}\n\n";
                        let burst = event.repeat(64);
                        loop {
                            if socket.write_all(burst.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

fn settings(addr: std::net::SocketAddr) -> ProviderSettings {
    ProviderSettings {
        provider: "openai-compatible".into(),
        base_url: format!("http://{addr}/v1"),
        model: "m".into(),
        api_key_env: None,
        api_key: None,
        reasoning_effort: None,
        max_tokens: None,
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(120),
        max_retries: 0,
        retry_base: Duration::from_millis(10),
        max_stream_bytes: MAX_STREAM_BYTES,
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        session_id: "s".into(),
        messages: vec![Message::new(
            "user",
            vec![ContentBlock::text("hi")],
            MessageSource::user(),
            "u".into(),
        )],
    }
}

async fn line(mb: usize, limit: Duration) {
    let addr = serve(Drip::Line, mb * 1024 * 1024, Duration::ZERO).await;
    let provider = OpenAiProvider::new(settings(addr)).unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let started = Instant::now();
    let result = tokio::time::timeout(
        limit,
        provider.stream(request(), tx, CancellationToken::new()),
    )
    .await;
    let elapsed = started.elapsed().as_secs_f64();
    match result {
        Err(_) => println!("line {mb} MiB: no answer after {elapsed:.2} s (gave up)"),
        Ok(Ok(_)) => println!("line {mb} MiB: completed?! after {elapsed:.2} s"),
        Ok(Err(e)) => {
            let (code, message) = e.failure();
            println!("line {mb} MiB: {code} after {elapsed:.2} s: {message}");
        }
    }
}

async fn cancel(rounds: usize, drip: Drip) {
    // The endless line comes at 64 KiB every 10 ms (about 1.3 MiB before the cancel, under the
    // line limit); the events as fast as we read them.
    let pause = match drip {
        Drip::Line => Duration::from_millis(10),
        Drip::Events => Duration::ZERO,
    };
    let addr = serve(drip, usize::MAX, pause).await;
    let mut latencies = Vec::new();
    for _ in 0..rounds {
        let mut unlimited = settings(addr);
        unlimited.max_stream_bytes = u64::MAX;
        let provider = std::sync::Arc::new(OpenAiProvider::new(unlimited).unwrap());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // Drain the events, as the runtime does.
        tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let token = CancellationToken::new();
        let task = {
            let (provider, token) = (provider.clone(), token.clone());
            tokio::spawn(async move { provider.stream(request(), tx, token).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = Instant::now();
        token.cancel();
        let result = tokio::time::timeout(Duration::from_secs(30), task).await;
        let waited = started.elapsed();
        match result {
            Ok(Ok(Err(ModelError::Cancelled))) => latencies.push(waited),
            Ok(Ok(other)) => {
                println!("round ended otherwise after {waited:?}: {other:?}");
                latencies.push(waited);
            }
            _ => {
                println!("cancel not honoured within 30 s");
                latencies.push(waited);
            }
        }
    }
    latencies.sort();
    let pick = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
    println!(
        "cancel while dripping ({}): {rounds} rounds, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        match drip {
            Drip::Line => "one endless line",
            Drip::Events => "events back to back",
        },
        pick(0.5).as_secs_f64() * 1000.0,
        pick(0.99).as_secs_f64() * 1000.0,
        latencies.last().unwrap().as_secs_f64() * 1000.0,
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let command = args.next().expect("line | cancel");
    let mut mb = 8;
    let mut rounds = 20;
    let mut drip = Drip::Line;
    let mut limit = Duration::from_secs(600);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--mb" => mb = value.parse().expect("--mb N"),
            "--rounds" => rounds = value.parse().expect("--rounds N"),
            "--limit" => limit = Duration::from_secs(value.parse().expect("--limit SECS")),
            "--drip" => {
                drip = match value.as_str() {
                    "line" => Drip::Line,
                    "events" => Drip::Events,
                    other => panic!("--drip line|events, not {other}"),
                }
            }
            other => panic!("unknown flag {other}"),
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        match command.as_str() {
            "line" => line(mb, limit).await,
            "cancel" => cancel(rounds, drip).await,
            other => panic!("line | cancel, not {other}"),
        }
    });
    runtime.shutdown_timeout(Duration::from_millis(100));
}
