//! A hostile or broken model server (issue 20 §2), against a raw HTTP server on 127.0.0.1 that
//! writes exactly what it is told to: a `data:` line that never ends, bytes that never stop while
//! the user cancels, an error body dripped forever, a 200 that is not an event stream, redirects,
//! a `Retry-After` of days. Each ends the turn promptly with an error that names the cause.

use crate::support::raw_http::{text_event, RawBody, RawReply, RawServer};
use dsh_session_references::agent::config::{ProviderSettings, MAX_STREAM_BYTES};
use dsh_session_references::agent::openai::OpenAiProvider;
use dsh_session_references::agent::ModelRequest;
use dsh_session_references::agent::{
    Agent, AgentConfig, AgentEvent, ModelError, ModelOutput, ModelProvider,
};
use dsh_session_references::session::{
    ContentBlock, Encoding, LiveSessions, Message, MessageSource, SessionHeader,
};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn settings(base_url: &str) -> ProviderSettings {
    ProviderSettings {
        provider: "openai-compatible".into(),
        base_url: base_url.into(),
        model: "m".into(),
        api_key_env: None,
        api_key: None,
        reasoning_effort: None,
        max_tokens: None,
        connect_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(30),
        max_retries: 3,
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
            "u1".into(),
        )],
    }
}

/// Runs one request, giving up (as a test failure) after `limit`.
async fn run_within(
    settings: ProviderSettings,
    limit: Duration,
) -> (Result<ModelOutput, ModelError>, Duration) {
    let provider = OpenAiProvider::new(settings).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let started = Instant::now();
    let result = tokio::time::timeout(
        limit,
        provider.stream(request(), tx, CancellationToken::new()),
    )
    .await
    .unwrap_or_else(|_| panic!("no answer within {limit:?}"));
    (result, started.elapsed())
}

fn failure(result: &Result<ModelOutput, ModelError>) -> (String, String) {
    match result {
        Err(e) => e.failure(),
        Ok(o) => panic!("expected a failure, got {o:?}"),
    }
}

/// A `data:` line that never ends: before, every chunk rescanned the whole unfinished line
/// (an 8 MiB line cost 6 s of CPU, the 64 MiB stream cap about 7 minutes). Now the line is cut
/// at the line limit, within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_line_that_never_ends_fails_at_the_line_limit_within_seconds() {
    let server = RawServer::start(|_| {
        RawReply::sse(RawBody::Endless {
            first: b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec(),
            repeat: vec![b'x'; 64 * 1024],
            pause: Duration::ZERO,
        })
    })
    .await;
    let (result, took) = run_within(settings(&server.base_url()), Duration::from_secs(60)).await;
    let (code, message) = failure(&result);
    assert_eq!(code, "TOO_LARGE", "{message}");
    assert!(
        message.contains("line") && message.contains("4194304 bytes"),
        "{message}"
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

/// The limit is per line, not per answer: many small events that add up past it stream fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_events_adding_up_past_the_line_limit_are_fine() {
    let word = text_event("word ");
    let count = 6 * 1024 * 1024 / word.len();
    let mut body = word.repeat(count);
    body.push_str("data: [DONE]\n\n");
    let server =
        RawServer::start(move |_| RawReply::sse(RawBody::Bytes(body.clone().into()))).await;
    let (result, _) = run_within(settings(&server.base_url()), Duration::from_secs(60)).await;
    assert_eq!(result.unwrap().text.len(), count * 5);
}

/// Cancels `rounds` requests while the server keeps sending, 300 ms into each; returns how long
/// each took from the cancel to the answer.
async fn cancel_while_sending(server: &RawServer, rounds: usize) -> Vec<Duration> {
    let mut taken = Vec::new();
    for _ in 0..rounds {
        let mut s = settings(&server.base_url());
        s.max_stream_bytes = u64::MAX;
        let provider = Arc::new(OpenAiProvider::new(s).unwrap());
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let cancel = CancellationToken::new();
        let task = {
            let (provider, cancel) = (provider.clone(), cancel.clone());
            tokio::spawn(async move { provider.stream(request(), tx, cancel).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        cancel.cancel();
        let result = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the cancel was not honoured within 5 s")
            .unwrap();
        taken.push(started.elapsed());
        assert_eq!(result, Err(ModelError::Cancelled));
    }
    taken.sort();
    taken
}

/// Bytes that keep arriving never hide the cancellation (Esc, Ctrl-C): one endless line, sent
/// as fast as we read it (below the line limit before the cancel), and complete events back to
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_wins_while_bytes_keep_arriving() {
    // 64 KiB every 10 ms: about 2 MiB in the 300 ms before the cancel.
    let line = RawServer::start(|_| {
        RawReply::sse(RawBody::Endless {
            first: b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec(),
            repeat: vec![b'x'; 64 * 1024],
            pause: Duration::from_millis(10),
        })
    })
    .await;
    let taken = cancel_while_sending(&line, 3).await;
    assert!(taken[1] < Duration::from_millis(100), "{taken:?}");
    let events = RawServer::start(|_| {
        RawReply::sse(RawBody::Endless {
            first: Vec::new(),
            repeat: text_event("word ").repeat(256).into_bytes(),
            pause: Duration::ZERO,
        })
    })
    .await;
    let taken = cancel_while_sending(&events, 3).await;
    assert!(taken[1] < Duration::from_millis(100), "{taken:?}");
}

/// The TUI's Esc and Ctrl-C and exec's Ctrl-C cancel the agent; through it the provider stops
/// while the server is still sending (one endless line, 64 KiB every 10 ms), and the turn ends
/// `aborted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_cancels_a_turn_whose_server_keeps_sending() {
    let home = tempfile::tempdir().unwrap();
    let server = RawServer::start(|_| {
        RawReply::sse(RawBody::Endless {
            first: b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec(),
            repeat: vec![b'x'; 64 * 1024],
            pause: Duration::from_millis(10),
        })
    })
    .await;
    let agent = Agent::start(AgentConfig {
        home: home.path().to_path_buf(),
        header: SessionHeader::new("s-cancel", 1, Some("/work".into())),
        encoding: Encoding::Plain,
        model: Arc::new(OpenAiProvider::new(settings(&server.base_url())).unwrap()),
        live: LiveSessions::default(),
    });
    let mut rx = agent.subscribe();
    agent.dispatch(agent.user_message("go"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.requests() == 0 {
        assert!(Instant::now() < deadline, "the request never came");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    assert!(agent.cancel());
    let reason = loop {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some(AgentEvent::Logged(events))) => {
                if let Some(end) = events.iter().find(|e| e.kind == "turn/end") {
                    let data: Value = serde_json::from_str(end.data.get()).unwrap();
                    break data["reason"].clone();
                }
            }
            Ok(Some(_)) => {}
            other => panic!("no turn/end within 5 s of the cancel: {other:?}"),
        }
    };
    let took = started.elapsed();
    assert_eq!(reason["kind"], "aborted");
    assert!(took < Duration::from_secs(1), "{took:?}");
    agent.shutdown();
}

/// An error body dripped a byte at a time, under the idle timeout, forever: before, the turn
/// waited as long as the server liked. Now the body has a total deadline and the status error
/// comes with what arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_body_dripped_forever_is_cut_at_its_deadline() {
    let server = RawServer::start(|_| {
        RawReply::new(
            "400 Bad Request",
            &[("content-type", "text/plain")],
            RawBody::Endless {
                first: b"slow:".to_vec(),
                repeat: b"z".to_vec(),
                pause: Duration::from_millis(100),
            },
        )
    })
    .await;
    let mut s = settings(&server.base_url());
    s.idle_timeout = Duration::from_millis(400);
    let (result, took) = run_within(s, Duration::from_secs(30)).await;
    let (code, message) = failure(&result);
    assert_eq!(code, "BAD_REQUEST", "{message}");
    assert!(message.contains("slow:zz"), "{message}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    // A flood of an error body is cut at its size cap, at once.
    let flood = RawServer::start(|_| {
        RawReply::new(
            "400 Bad Request",
            &[("content-type", "text/plain")],
            RawBody::Endless {
                first: b"big:".to_vec(),
                repeat: vec![b'y'; 64 * 1024],
                pause: Duration::ZERO,
            },
        )
    })
    .await;
    let (result, took) = run_within(settings(&flood.base_url()), Duration::from_secs(30)).await;
    let (_, message) = failure(&result);
    assert!(message.contains("big:yyy"), "{message}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// HTTP 200 that is no event stream (a plain `chat.completion`, a captive portal's page): the
/// error names the content type and the setting to check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_that_is_not_an_event_stream_names_its_content_type() {
    let cases = [
        (
            "application/json",
            r#"{"id":"c","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hi"}}]}"#,
        ),
        (
            "text/html; charset=utf-8",
            "<html><body>Sign in to the hotel Wi-Fi</body></html>",
        ),
    ];
    for (kind, body) in cases {
        let server = RawServer::start(move |_| {
            RawReply::new(
                "200 OK",
                &[("content-type", kind)],
                RawBody::Bytes(body.as_bytes().to_vec()),
            )
        })
        .await;
        let (result, _) = run_within(settings(&server.base_url()), Duration::from_secs(10)).await;
        let (code, message) = failure(&result);
        assert_eq!(code, "NOT_STREAMING", "{message}");
        assert!(
            message.contains("the server did not stream")
                && message.contains(kind)
                && message.contains("check base_url"),
            "{message}"
        );
    }
}

/// Redirects are not followed (a 307/308 would re-POST the conversation to another host, and
/// any redirect's answer would be shown as the model's): the error names where the server
/// pointed, and the other host gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_not_followed_and_name_the_location() {
    let elsewhere = RawServer::start(|_| {
        let mut body = text_event("from elsewhere");
        body.push_str("data: [DONE]\n\n");
        RawReply::sse(RawBody::Bytes(body.into_bytes()))
    })
    .await;
    for status in [
        "301 Moved Permanently",
        "302 Found",
        "307 Temporary Redirect",
        "308 Permanent Redirect",
    ] {
        let location = format!("http://{}/v1/chat/completions", elsewhere.addr);
        let server = RawServer::start(move |_| {
            RawReply::new(
                status,
                &[("location", location.as_str()), ("content-length", "0")],
                RawBody::Bytes(Vec::new()),
            )
        })
        .await;
        let (result, _) = run_within(settings(&server.base_url()), Duration::from_secs(10)).await;
        let (code, message) = failure(&result);
        assert_eq!(code, "REDIRECT", "{message}");
        let number = &status[..3];
        assert!(
            message.contains(&format!("HTTP {number}"))
                && message.contains(&elsewhere.addr.to_string())
                && message.contains("base_url"),
            "{message}"
        );
        assert_eq!(server.requests(), 1, "{status}: retried");
    }
    assert_eq!(elsewhere.requests(), 0, "a redirect was followed");
}

/// A `Retry-After` longer than we wait fails the turn at once, naming the wait — also beyond a
/// day, which used to be discarded (and the request retried at once, three times).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_retry_after_fails_at_once_naming_the_wait() {
    for (value, named) in [
        ("3600", "1 h"),
        ("172800", "48 h"),
        ("1e300", "more than a year"),
    ] {
        let server = RawServer::start(move |_| {
            RawReply::new(
                "429 Too Many Requests",
                &[("content-type", "application/json"), ("retry-after", value)],
                RawBody::Bytes(br#"{"error":{"message":"quota exhausted"}}"#.to_vec()),
            )
        })
        .await;
        let (result, took) =
            run_within(settings(&server.base_url()), Duration::from_secs(10)).await;
        let (code, message) = failure(&result);
        assert_eq!(code, "RATE_LIMIT", "{message}");
        assert!(
            message.contains("quota exhausted")
                && message.contains(&format!("asked to wait {named}")),
            "{value}: {message}"
        );
        assert_eq!(server.requests(), 1, "{value}: retried");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }
}
