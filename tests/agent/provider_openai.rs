//! The OpenAI-compatible provider against a real HTTP server on 127.0.0.1 (SPEC §7): the exact
//! request, streaming of reasoning, text and usage, every failure, retries and cancellation;
//! then the agent's log (request/header, assistant message, partial answers).

use crate::support::model::{answer, chunked, delta, Part, Reply, Server, DONE};
use dsh_session_references::agent::config::{ApiKey, ProviderSettings};
use dsh_session_references::agent::openai::{OpenAiProvider, SYSTEM_PROMPT};
use dsh_session_references::agent::ModelRequest;
use dsh_session_references::agent::{
    Agent, AgentConfig, AgentEvent, ModelError, ModelEvent, ModelOutput, ModelProvider,
};
use dsh_session_references::session::{
    ContentBlock, Encoding, LiveSessions, Message, MessageSource, SessionHeader,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-test-7Qz9-distinctive-key";

fn settings(base_url: &str) -> ProviderSettings {
    ProviderSettings {
        provider: "deepseek".into(),
        base_url: base_url.into(),
        model: "deepseek-v4-flash".into(),
        api_key_env: Some("DSH_TEST_KEY".into()),
        api_key: Some(ApiKey::new(KEY)),
        reasoning_effort: None,
        max_tokens: None,
        connect_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_millis(400),
        max_retries: 2,
        retry_base: Duration::from_millis(10),
        max_stream_bytes: dsh_session_references::agent::config::MAX_STREAM_BYTES,
    }
}

fn user(text: &str) -> Message {
    Message::new(
        "user",
        vec![ContentBlock::text(text)],
        MessageSource::user(),
        "u1".into(),
    )
}

fn request(text: &str) -> ModelRequest {
    ModelRequest {
        session_id: "s".into(),
        messages: vec![user(text)],
    }
}

/// Runs one request; returns the result and every event it reported.
async fn run(
    settings: ProviderSettings,
    cancel: CancellationToken,
) -> (Result<ModelOutput, ModelError>, Vec<ModelEvent>) {
    let provider = OpenAiProvider::new(settings).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let result = provider.stream(request("hi"), tx, cancel).await;
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    (result, events)
}

fn failure(result: &Result<ModelOutput, ModelError>) -> (String, String) {
    match result {
        Err(e) => e.failure(),
        Ok(o) => panic!("expected a failure, got {o:?}"),
    }
}

#[tokio::test]
async fn streams_reasoning_text_and_usage_from_small_irregular_chunks() {
    let body = answer(&["Let me ", "think."], &["Hel", "lo, ", "wörld 🌍"]);
    let server = Server::start(vec![Reply::sse(chunked(&body))]).await;
    let (result, events) = run(settings(&server.base_url()), CancellationToken::new()).await;
    let output = result.unwrap();
    assert_eq!(output.reasoning, "Let me think.");
    assert_eq!(output.text, "Hello, wörld 🌍");
    let usage = output.usage.unwrap();
    assert_eq!(
        usage.to_json(),
        json!({"inputTokens": 20, "outputTokens": 9, "cacheReadTokens": 100, "reasoningTokens": 4})
    );
    let texts: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, "Hello, wörld 🌍");
    assert!(matches!(events.first(), Some(ModelEvent::Reasoning(r)) if r == "Let me "));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        requests[0].body,
        json!({
            "model": "deepseek-v4-flash",
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": "hi"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[tokio::test]
async fn status_failures_are_specific() {
    let cases = [
        (
            Reply::status(
                401,
                r#"{"error":{"message":"Authentication Fails (sk-test-7Qz9-distinctive-key)"}}"#,
            ),
            "AUTH",
            "DSH_TEST_KEY",
        ),
        (
            Reply::status(403, r#"{"error":{"message":"forbidden"}}"#),
            "AUTH",
            "DSH_TEST_KEY",
        ),
        (
            Reply::status(404, r#"{"error":{"message":"Model Not Exist"}}"#),
            "NOT_FOUND",
            "\"deepseek-v4-flash\" does not exist there, or the base URL is wrong: Model Not Exist",
        ),
        (
            Reply::status(400, r#"{"error":{"message":"max_tokens is too large"}}"#),
            "BAD_REQUEST",
            "the server refused the request (HTTP 400): max_tokens is too large",
        ),
    ];
    for (reply, code, needle) in cases {
        let server = Server::start(vec![reply]).await;
        let (result, _) = run(settings(&server.base_url()), CancellationToken::new()).await;
        let (got_code, message) = failure(&result);
        assert_eq!(got_code, code, "{message}");
        assert!(message.contains(needle), "{message}");
        assert!(!message.contains(KEY), "the key leaked: {message}");
        assert_eq!(server.requests().len(), 1, "no retry for {code}");
    }
}

#[tokio::test]
async fn rate_limits_are_retried_after_retry_after() {
    let body = answer(&[], &["ok"]);
    let server = Server::start(vec![
        Reply::status(429, r#"{"error":{"message":"slow down"}}"#).header("retry-after", "1"),
        Reply::sse(chunked(&body)),
    ])
    .await;
    let (result, events) = run(settings(&server.base_url()), CancellationToken::new()).await;
    assert_eq!(result.unwrap().text, "ok");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let gap = requests[1].at - requests[0].at;
    // The backoff would be 10 ms: the gap shows Retry-After was honoured.
    assert!(gap >= Duration::from_millis(950), "{gap:?}");
    assert!(events.iter().any(|e| matches!(
        e,
        ModelEvent::Retrying { attempt: 1, max: 2, delay, reason } if *delay == Duration::from_secs(1) && reason == "HTTP 429"
    )));
}

#[tokio::test]
async fn server_errors_are_retried_a_bounded_number_of_times() {
    let server = Server::start(vec![
        Reply::status(503, "busy"),
        Reply::status(502, "bad gateway"),
        Reply::status(500, r#"{"error":{"message":"still broken"}}"#),
        Reply::sse(chunked(&answer(&[], &["never reached"]))),
    ])
    .await;
    let (result, events) = run(settings(&server.base_url()), CancellationToken::new()).await;
    let (code, message) = failure(&result);
    assert_eq!(code, "SERVER");
    assert!(
        message.contains("HTTP 500")
            && message.contains("after 2 retries")
            && message.contains("still broken"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 3);
    let retries = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::Retrying { .. }))
        .count();
    assert_eq!(retries, 2);
}

#[tokio::test]
async fn connection_refused_is_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (result, _) = run(
        settings(&format!("http://{addr}/v1")),
        CancellationToken::new(),
    )
    .await;
    let (code, message) = failure(&result);
    assert_eq!(code, "TRANSPORT");
    assert!(message.contains("connection refused"), "{message}");
}

#[tokio::test]
async fn a_tls_failure_is_named() {
    // An https URL pointing at a plain HTTP server: the handshake fails.
    let server = Server::start(vec![]).await;
    let (result, _) = run(
        settings(&format!("https://{}/v1", server.addr)),
        CancellationToken::new(),
    )
    .await;
    let (code, message) = failure(&result);
    assert_eq!(code, "TLS", "{message}");
    assert!(
        message.starts_with("TLS error talking to https://127.0.0.1:"),
        "{message}"
    );
}

#[tokio::test]
async fn a_connect_timeout_is_named() {
    // A listener with a full accept queue that never accepts: the handshake never completes.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let _listener = socket.listen(0).unwrap();
    let mut fillers = Vec::new();
    for _ in 0..8 {
        if let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_millis(100),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            fillers.push(s);
        }
    }
    let started = Instant::now();
    let (result, _) = run(
        settings(&format!("http://{addr}/v1")),
        CancellationToken::new(),
    )
    .await;
    let (code, message) = failure(&result);
    assert_eq!(code, "TIMEOUT", "{message}");
    assert!(message.contains("timed out after 0.5s"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_silent_stream_hits_the_idle_timeout_and_keeps_the_partial_text() {
    let mut parts = chunked(&delta(json!({"content": "partial "})));
    parts.push(Part::Hang);
    let server = Server::start(vec![Reply::sse(parts)]).await;
    let started = Instant::now();
    let (result, events) = run(settings(&server.base_url()), CancellationToken::new()).await;
    let (code, message) = failure(&result);
    assert_eq!(code, "TIMEOUT");
    assert!(message.contains("went silent for 0.4s"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(events, vec![ModelEvent::Text("partial ".into())]);
}

#[tokio::test]
async fn keep_alive_comments_count_as_bytes_for_the_idle_timeout() {
    // 1 s of comments every 100 ms (idle timeout 400 ms), then the answer: no timeout.
    let mut parts = Vec::new();
    for _ in 0..10 {
        parts.push(Part::Bytes(": keep-alive\n\n".into()));
        parts.push(Part::Sleep(Duration::from_millis(100)));
    }
    parts.extend(chunked(&answer(&[], &["awake"])));
    let server = Server::start(vec![Reply::sse(parts)]).await;
    let (result, _) = run(settings(&server.base_url()), CancellationToken::new()).await;
    assert_eq!(result.unwrap().text, "awake");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = Server::start(vec![
        Reply::sse(chunked(&answer(&[], &["late"]))).delayed(Duration::from_secs(5))
    ])
    .await;
    let started = Instant::now();
    let (result, _) = run(settings(&server.base_url()), CancellationToken::new()).await;
    let (code, message) = failure(&result);
    assert_eq!(code, "TIMEOUT");
    assert!(message.contains("sent no response for 0.9s"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn streams_cut_short_or_malformed_fail_clearly() {
    let complete_event = delta(json!({"content": "a"}));
    let half = &complete_event[..complete_event.len() / 2];
    let cases = vec![
        (
            chunked(&complete_event),
            "STREAM_CLOSED",
            "ended before [DONE]",
        ),
        (
            chunked(&format!("{complete_event}{half}")),
            "STREAM_CLOSED",
            "ended in the middle of an event",
        ),
        (
            chunked(&format!(
                "{complete_event}data: {{\"choices\": [oops\n\n{DONE}"
            )),
            "MALFORMED_RESPONSE",
            "malformed event",
        ),
        (
            {
                let mut p = chunked(&complete_event);
                p.push(Part::Abort);
                p
            },
            "TRANSPORT",
            "the connection broke mid-answer",
        ),
        (chunked(DONE), "EMPTY_RESPONSE", "no content"),
    ];
    for (parts, code, needle) in cases {
        let server = Server::start(vec![Reply::sse(parts)]).await;
        let (result, _) = run(settings(&server.base_url()), CancellationToken::new()).await;
        let (got, message) = failure(&result);
        assert_eq!(got, code, "{message}");
        assert!(message.contains(needle), "{message}");
    }
}

#[tokio::test]
async fn cancelling_returns_at_once_and_closes_the_connection() {
    let mut parts = chunked(&delta(json!({"content": "first"})));
    parts.push(Part::Hang);
    let server = Server::start(vec![Reply::sse(parts)]).await;
    let provider = Arc::new(OpenAiProvider::new(settings(&server.base_url())).unwrap());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let task = {
        let provider = provider.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move { provider.stream(request("hi"), tx, cancel).await })
    };
    assert_eq!(rx.recv().await, Some(ModelEvent::Text("first".into())));
    let started = Instant::now();
    cancel.cancel();
    let result = task.await.unwrap();
    assert_eq!(result, Err(ModelError::Cancelled));
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
    assert!(
        server.wait_disconnect(Duration::from_secs(2)).await,
        "the server never saw the client go away"
    );
}

// ---- The agent: what reaches the log -------------------------------------------------------

fn start(home: &Path, id: &str, provider: OpenAiProvider) -> Agent {
    Agent::start(AgentConfig {
        home: home.to_path_buf(),
        header: SessionHeader::new(id, 1, Some("/work".into())),
        encoding: Encoding::Plain,
        model: Arc::new(provider),
        live: LiveSessions::default(),
    })
}

fn log_path(home: &Path, id: &str) -> PathBuf {
    home.join("sessions/--work--")
        .join(id)
        .join("session.jsonl")
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

/// Runs one prompt to its `turn/end`; returns the turn's end reason.
async fn turn(agent: &Agent, message: Message, contexts: Vec<Message>) -> Value {
    let mut rx = agent.subscribe();
    agent.dispatch_with_contexts(message, contexts);
    loop {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Some(AgentEvent::Logged(events))) => {
                if let Some(end) = events.iter().find(|e| e.kind == "turn/end") {
                    let data: Value = serde_json::from_str(end.data.get()).unwrap();
                    return data["reason"].clone();
                }
            }
            Ok(Some(_)) => {}
            other => panic!("no turn/end: {other:?}"),
        }
    }
}

fn snapshot() -> Message {
    Message::new(
        "user",
        vec![ContentBlock::text("## Referenced sessions\n\nsnapshot")],
        MessageSource::SessionReference {
            version: 1.into(),
            references: json!([{"sessionId": "s0", "label": "s0"}]),
            extra: Default::default(),
        },
        "ctx".into(),
    )
}

#[tokio::test]
async fn the_agent_logs_header_reasoning_text_and_usage_and_never_sends_reasoning_back() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(vec![
        Reply::sse(chunked(&answer(
            &["Hmm, ", "the snapshot."],
            &["First ", "answer."],
        ))),
        Reply::sse(chunked(&answer(&["again"], &["Second."]))),
    ])
    .await;
    let agent = start(
        home.path(),
        "s1",
        OpenAiProvider::new(settings(&server.base_url())).unwrap(),
    );
    let first = agent.user_message("what did s0 decide?");
    assert_eq!(
        turn(&agent, first, vec![snapshot()]).await,
        json!({"kind": "completed"})
    );
    let second = agent.user_message("and then?");
    assert_eq!(
        turn(&agent, second, vec![]).await,
        json!({"kind": "completed"})
    );
    agent.shutdown();

    let requests = server.requests();
    let roles = |i: usize| -> Vec<(String, String)> {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_string(),
                    m["content"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let system = ("system".to_string(), SYSTEM_PROMPT.to_string());
    let snapshot_msg = (
        "user".to_string(),
        "## Referenced sessions\n\nsnapshot".to_string(),
    );
    let q1 = ("user".to_string(), "what did s0 decide?".to_string());
    assert_eq!(
        roles(0),
        vec![system.clone(), snapshot_msg.clone(), q1.clone()]
    );
    assert_eq!(
        roles(1),
        vec![
            system,
            snapshot_msg,
            q1,
            ("assistant".to_string(), "First answer.".to_string()),
            ("user".to_string(), "and then?".to_string()),
        ]
    );
    assert!(
        !requests[1].body.to_string().contains("the snapshot."),
        "reasoning was sent back"
    );

    let log = lines(&log_path(home.path(), "s1"));
    let headers = of_type(&log, "request/header");
    assert_eq!(headers.len(), 1, "one header for an unchanged model");
    assert_eq!(
        headers[0]["data"],
        json!({"header": {"config": {"provider": "deepseek", "model": "deepseek-v4-flash"}}, "reason": "initial"})
    );
    let kinds: Vec<&str> = log[1..]
        .iter()
        .map(|l| l["type"].as_str().unwrap())
        .collect();
    let step = kinds.iter().position(|k| *k == "step/start").unwrap();
    assert_eq!(kinds[step + 1], "request/header", "{kinds:?}");
    assert_eq!(
        &kinds[step + 2..step + 5],
        ["reasoning-chunks", "text-chunks", "assistant/message"]
    );
    let messages = of_type(&log, "assistant/message");
    let data = &messages[0]["data"];
    assert_eq!(
        data["message"]["content"],
        json!([{"type": "reasoning", "text": "Hmm, the snapshot."}, {"type": "text", "text": "First answer."}])
    );
    assert_eq!(
        data["message"]["source"],
        json!({"kind": "model", "provider": "deepseek", "model": "deepseek-v4-flash"})
    );
    assert_eq!(
        data["usage"],
        json!({"inputTokens": 20, "outputTokens": 9, "cacheReadTokens": 100, "reasoningTokens": 4})
    );
    let keys: Vec<&String> = data.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["turn", "step", "message", "usage"]);
    assert_eq!(of_type(&log, "reasoning-chunks")[0]["data"]["index"], 0);
    assert_eq!(of_type(&log, "text-chunks")[0]["data"]["index"], 1);
}

#[tokio::test]
async fn resume_logs_resume_or_change_and_a_failure_keeps_the_partial_answer() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(vec![
        Reply::sse(chunked(&answer(&[], &["one"]))),
        Reply::sse(chunked(&answer(&[], &["two"]))),
        Reply::sse({
            let mut p = chunked(&delta(json!({"content": "half an ans"})));
            // Let the server flush what it sent before it breaks the connection.
            p.push(Part::Sleep(Duration::from_millis(100)));
            p.push(Part::Abort);
            p
        }),
    ])
    .await;
    let agent = start(
        home.path(),
        "s2",
        OpenAiProvider::new(settings(&server.base_url())).unwrap(),
    );
    turn(&agent, agent.user_message("q1"), vec![]).await;
    agent.shutdown();
    agent.closed().await;
    let path = log_path(home.path(), "s2");

    // Same model: `resume`.
    let same = OpenAiProvider::new(settings(&server.base_url())).unwrap();
    let agent = Agent::resume(&path, Arc::new(same), LiveSessions::default()).unwrap();
    turn(&agent, agent.user_message("q2"), vec![]).await;
    agent.shutdown();
    agent.closed().await;

    // Another model: `change`, and this request breaks mid-answer.
    let mut other = settings(&server.base_url());
    other.model = "deepseek-v4-pro".into();
    let agent = Agent::resume(
        &path,
        Arc::new(OpenAiProvider::new(other).unwrap()),
        LiveSessions::default(),
    )
    .unwrap();
    let reason = turn(&agent, agent.user_message("q3"), vec![]).await;
    agent.shutdown();
    assert_eq!(reason["kind"], "error");
    assert_eq!(reason["step"], 1);
    assert_eq!(reason["failure"]["code"], "TRANSPORT");
    assert!(reason["failure"]["message"]
        .as_str()
        .unwrap()
        .contains("broke mid-answer"));

    let log = lines(&path);
    let reasons: Vec<(&str, &str)> = of_type(&log, "request/header")
        .iter()
        .map(|h| {
            (
                h["data"]["reason"].as_str().unwrap(),
                h["data"]["header"]["config"]["model"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            ("initial", "deepseek-v4-flash"),
            ("resume", "deepseek-v4-flash"),
            ("change", "deepseek-v4-pro")
        ]
    );
    let last = *of_type(&log, "assistant/message").last().unwrap();
    assert_eq!(last["data"]["interrupted"], true);
    assert_eq!(
        last["data"]["message"]["content"],
        json!([{"type": "text", "text": "half an ans"}])
    );
    assert_eq!(
        last["data"]["message"]["source"]["model"],
        "deepseek-v4-pro"
    );
    // The log stays readable by our reader (and so resumable).
    dsh_session_references::session::reader::read_log(&path).unwrap();
}

#[tokio::test]
async fn respond_streams_text_deltas_as_they_arrive() {
    let mut parts = chunked(&delta(json!({"content": "early"})));
    parts.push(Part::Hang);
    let server = Server::start(vec![Reply::sse(parts)]).await;
    let provider = Arc::new(OpenAiProvider::new(settings(&server.base_url())).unwrap());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let task = {
        let (provider, cancel) = (provider.clone(), cancel.clone());
        tokio::spawn(async move { provider.respond(request("hi"), tx, cancel).await })
    };
    let first = tokio::time::timeout(Duration::from_secs(2), rx.recv()).await;
    assert_eq!(first.unwrap().as_deref(), Some("early"));
    cancel.cancel();
    assert_eq!(task.await.unwrap(), Err(ModelError::Cancelled));
}

/// Every real dsh log maps to a request that carries each assistant text as `assistant`, every
/// other surface text as `user`, and none of the log's reasoning or tool output.
#[test]
fn real_dsh_logs_map_to_sound_requests() {
    use dsh_session_references::agent::openai::chat_messages;
    use dsh_session_references::session::store::read_surface_file;
    let mut mapped = 0;
    for path in crate::support::fixture_logs() {
        let snapshot = read_surface_file(&path).unwrap();
        let messages: Vec<Message> = snapshot
            .events
            .iter()
            .filter_map(|e| e.message(&snapshot.session.id).ok().flatten())
            .collect();
        let wire = chat_messages(&messages);
        assert_eq!(wire[0]["role"], "system");
        let body = serde_json::to_string(&wire).unwrap();
        let mut assistant_texts = 0;
        for message in &messages {
            for block in &message.content {
                match block {
                    ContentBlock::Reasoning { text, .. } if text.len() > 20 => {
                        assert!(
                            !body.contains(text.as_str()),
                            "{}: reasoning sent",
                            path.display()
                        )
                    }
                    ContentBlock::ToolResult { content, .. } => {
                        for inner in content {
                            if let Some(text) = inner.as_text().filter(|t| t.len() > 40) {
                                let quoted = serde_json::to_string(text).unwrap();
                                assert!(
                                    !body.contains(&quoted),
                                    "{}: tool output sent",
                                    path.display()
                                );
                            }
                        }
                    }
                    _ => {}
                }
            }
            let is_assistant = matches!(message.source, MessageSource::Model { .. })
                || message.role.as_deref() == Some("assistant");
            if is_assistant
                && message
                    .content
                    .iter()
                    .any(|b| b.as_text().is_some_and(|t| !t.is_empty()))
            {
                assistant_texts += 1;
            }
        }
        let wire_assistant = wire.iter().filter(|m| m["role"] == "assistant").count();
        assert_eq!(wire_assistant, assistant_texts, "{}", path.display());
        assert!(wire
            .iter()
            .all(|m| m["content"].as_str().is_some_and(|c| !c.is_empty())));
        mapped += 1;
    }
    assert!(mapped >= 100, "{mapped}");
}

#[tokio::test]
async fn a_runaway_stream_is_cut_at_the_byte_limit() {
    // Bytes without an event boundary, forever: the parser's buffer must not grow unbounded.
    let mut parts = vec![Part::Bytes("data: {\"choices\":[".into())];
    parts.extend(std::iter::repeat_n(Part::Bytes("x".repeat(1000)), 100));
    parts.push(Part::Hang);
    let server = Server::start(vec![Reply::sse(parts)]).await;
    let mut limited = settings(&server.base_url());
    limited.max_stream_bytes = 16 * 1024;
    let (result, _) = run(limited, CancellationToken::new()).await;
    let (code, message) = failure(&result);
    assert_eq!(code, "TOO_LARGE");
    assert!(message.contains("exceeded 16384 bytes"), "{message}");
}

#[tokio::test]
async fn a_retry_after_beyond_a_minute_fails_at_once() {
    let server = Server::start(vec![Reply::status(
        429,
        r#"{"error":{"message":"quota exhausted"}}"#,
    )
    .header("retry-after", "3600")])
    .await;
    let started = Instant::now();
    let (result, _) = run(settings(&server.base_url()), CancellationToken::new()).await;
    let (code, message) = failure(&result);
    assert_eq!(code, "RATE_LIMIT");
    assert!(
        message.contains("HTTP 429") && message.contains("quota exhausted"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);
    assert!(started.elapsed() < Duration::from_secs(2));
}
