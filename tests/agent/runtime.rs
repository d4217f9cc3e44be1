//! The admission runtime: what reaches the log, in which batches, for each path of SPEC §4.

use dsh_session_references::agent::{
    Admission, Agent, AgentConfig, AgentEvent, OfflineModel, PromptDecision, PromptSubmitListener,
};
use dsh_session_references::agent::{AgentInfo, HookResult, Next};
use dsh_session_references::session::reader::read_log;
use dsh_session_references::session::{
    BoxFuture, ContentBlock, Encoding, Event, LiveSessions, Message, MessageSource, Record,
    SessionHeader,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn start(home: &Path, id: &str, delay_ms: u64) -> Agent {
    Agent::start(AgentConfig {
        home: home.to_path_buf(),
        header: SessionHeader::new(id, 1, Some("/work".into())),
        encoding: Encoding::Zstd,
        model: Arc::new(OfflineModel::new(Duration::from_millis(delay_ms))),
        live: LiveSessions::default(),
    })
}

fn snapshot_context(label: &str) -> Message {
    Message::new(
        "user",
        vec![ContentBlock::text(format!(
            "## Referenced sessions\n\n{label}"
        ))],
        MessageSource::SessionReference {
            version: 1.into(),
            references: serde_json::json!([{"sessionId": label, "label": label}]),
            extra: Default::default(),
        },
        format!("ctx-{label}"),
    )
}

fn log_path(home: &Path, id: &str) -> PathBuf {
    home.join("sessions/--work--")
        .join(id)
        .join("session.jsonl.zstd")
}

/// The log's batches (one zstd frame each) as lists of event types.
fn batches(path: &Path) -> Vec<Vec<String>> {
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let size = zstd::zstd_safe::find_frame_compressed_size(rest).unwrap();
        let plain = zstd::stream::decode_all(&rest[..size]).unwrap();
        let kinds = plain
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_slice(l).unwrap();
                v["type"].as_str().unwrap().to_string()
            })
            .collect();
        out.push(kinds);
        rest = &rest[size..];
    }
    out
}

fn events(path: &Path) -> Vec<Event> {
    read_log(path)
        .unwrap()
        .1
        .into_iter()
        .filter_map(|r| match r {
            Record::Event(e) => Some(e),
            Record::Packed(_) => None,
        })
        .collect()
}

fn count(path: &Path, kind: &str) -> usize {
    if !path.exists() {
        return 0;
    }
    events(path).iter().filter(|e| e.kind == kind).count()
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_path_logs_context_then_prompt_in_one_batch() {
    let home = tempfile::tempdir().unwrap();
    let agent = start(home.path(), "target", 0);
    let message = agent.user_message("compare with @src");
    let admission = agent.dispatch_with_contexts(message.clone(), vec![snapshot_context("src")]);
    assert_eq!(admission, Admission::Queued);
    let path = log_path(home.path(), "target");
    wait_for("turn end", || count(&path, "turn/end") == 1).await;
    let batches = batches(&path);
    assert_eq!(batches[0], vec!["session"]);
    assert_eq!(
        batches[1],
        vec!["turn/start", "user/message", "user/message"]
    );
    let logged = events(&path);
    let context = logged[1].message("target").unwrap().unwrap();
    assert!(matches!(
        context.source,
        MessageSource::SessionReference { .. }
    ));
    let prompt = logged[2].message("target").unwrap().unwrap();
    assert_eq!(prompt.id, message.id);
    assert!(prompt.source.is_direct_user());
    assert!(agent.hooks().is_empty(), "the one-shot wrapper is released");

    // A later unrelated prompt gets no snapshot.
    agent.followup(agent.user_message("and now?"));
    wait_for("second turn", || count(&path, "turn/end") == 2).await;
    let logged = events(&path);
    let second_turn: Vec<&Event> = logged
        .iter()
        .skip_while(|e| !(e.kind == "turn/start" && e.data.get().contains("\"turn\":2")))
        .collect();
    let users: Vec<Message> = second_turn
        .iter()
        .filter(|e| e.kind == "user/message")
        .map(|e| e.message("target").unwrap().unwrap())
        .collect();
    assert_eq!(users.len(), 1);
    assert!(users[0].source.is_direct_user());
    // The offline model saw the snapshot in the first turn.
    let answers: Vec<String> = logged
        .iter()
        .filter(|e| e.kind == "assistant/message")
        .map(|e| e.message("target").unwrap().unwrap().text())
        .collect();
    assert!(
        answers[0].contains("Referenced session: \"src\""),
        "{}",
        answers[0]
    );
    assert!(answers[0].contains("compare with @src"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_path_stages_context_and_steering_together() {
    let home = tempfile::tempdir().unwrap();
    let agent = start(home.path(), "target", 30);
    let mut rx = agent.subscribe();
    agent.followup(agent.user_message("a long question to keep the turn open"));
    // Wait until the model is streaming: the window is open.
    loop {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
        {
            Some(AgentEvent::Delta(_)) => break,
            Some(_) => continue,
            None => panic!("agent gone"),
        }
    }
    assert!(agent.status().window_open && agent.status().running);
    let steering = agent.user_message("also look at @src");
    let admission = agent.dispatch_with_contexts(steering.clone(), vec![snapshot_context("src")]);
    assert_eq!(admission, Admission::Staged);
    assert_eq!(agent.status().staged_steering, 1);
    let path = log_path(home.path(), "target");
    wait_for("turn end", || count(&path, "turn/end") == 1).await;
    let batches = batches(&path);
    assert!(
        batches.contains(&vec![
            "user/message".to_string(),
            "steering/message".to_string()
        ]),
        "{batches:?}"
    );
    let logged = events(&path);
    let at = logged
        .iter()
        .position(|e| e.kind == "steering/message")
        .unwrap();
    let context = logged[at - 1].message("target").unwrap().unwrap();
    assert!(matches!(
        context.source,
        MessageSource::SessionReference { .. }
    ));
    let steer = logged[at].message("target").unwrap().unwrap();
    assert_eq!(steer.id, steering.id);
    // The steering earned a second step inside the same turn.
    assert_eq!(count(&path, "assistant/message"), 2);
    assert_eq!(count(&path, "turn/start"), 1);
    assert!(agent.hooks().is_empty());
}

struct Blocker;
impl PromptSubmitListener for Blocker {
    fn on_prompt_submit<'a>(
        &'a self,
        _agent: &'a AgentInfo,
        _message: &'a Message,
        _cancel: &'a CancellationToken,
        _next: Next<'a>,
    ) -> BoxFuture<'a, HookResult> {
        Box::pin(async {
            Ok(PromptDecision::Block {
                reason: "policy".into(),
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_writes_nothing_and_releases_the_wrapper() {
    let home = tempfile::tempdir().unwrap();
    let agent = start(home.path(), "target", 0);
    agent.hooks().append(Arc::new(Blocker));
    let mut rx = agent.subscribe();
    let message = agent.user_message("blocked @src");
    agent.dispatch_with_contexts(message.clone(), vec![snapshot_context("src")]);
    loop {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
        {
            Some(AgentEvent::PromptBlocked { message_id, reason }) => {
                assert_eq!(message_id, message.id);
                assert_eq!(reason, "policy");
                break;
            }
            Some(AgentEvent::Logged(events)) => panic!("logged {events:?}"),
            Some(_) => continue,
            None => panic!("agent gone"),
        }
    }
    assert!(
        !log_path(home.path(), "target").exists(),
        "nothing written at all"
    );
    assert_eq!(agent.hooks().len(), 1, "only the blocker is left");
}

#[tokio::test]
async fn discarded_prompt_releases_the_wrapper() {
    // Single-threaded runtime: the agent loop cannot claim the prompt before we discard it.
    let home = tempfile::tempdir().unwrap();
    let agent = start(home.path(), "target", 0);
    let message = agent.user_message("never mind @src");
    assert_eq!(
        agent.dispatch_with_contexts(message.clone(), vec![snapshot_context("src")]),
        Admission::Queued
    );
    assert_eq!(agent.hooks().len(), 1);
    assert!(agent.discard(&message.id));
    assert!(agent.hooks().is_empty());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!log_path(home.path(), "target").exists());
}

struct Gate;
impl PromptSubmitListener for Gate {
    fn on_prompt_submit<'a>(
        &'a self,
        agent: &'a AgentInfo,
        message: &'a Message,
        cancel: &'a CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            cancel.cancelled().await;
            next.run(agent, message, cancel).await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_admission_releases_the_wrapper_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let agent = start(home.path(), "target", 0);
    agent.hooks().append(Arc::new(Gate));
    let message = agent.user_message("slow admission @src");
    agent.dispatch_with_contexts(message, vec![snapshot_context("src")]);
    wait_for("admission", || agent.status().window_open).await;
    assert!(agent.cancel());
    wait_for("release", || agent.hooks().len() == 1).await;
    wait_for("window closed", || !agent.status().window_open).await;
    assert!(!log_path(home.path(), "target").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_the_turn_as_aborted() {
    let home = tempfile::tempdir().unwrap();
    let agent = start(home.path(), "target", 50);
    let mut rx = agent.subscribe();
    agent.followup(agent.user_message("stream a long answer please"));
    loop {
        if let Some(AgentEvent::Delta(_)) = rx.recv().await {
            break;
        }
    }
    assert!(agent.cancel());
    let path = log_path(home.path(), "target");
    wait_for("turn end", || count(&path, "turn/end") == 1).await;
    let end = events(&path)
        .into_iter()
        .find(|e| e.kind == "turn/end")
        .unwrap();
    assert!(end.data.get().contains("\"aborted\""), "{}", end.data.get());
    // The partial answer is kept, marked interrupted (SPEC §7).
    let partial = events(&path)
        .into_iter()
        .find(|e| e.kind == "assistant/message")
        .unwrap();
    let data: serde_json::Value = serde_json::from_str(partial.data.get()).unwrap();
    assert_eq!(data["interrupted"], true);
    assert!(data["message"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Offline"));
    assert_eq!(count(&path, "assistant/message"), 1);
    assert_eq!(count(&path, "step/end"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_outside_the_window_appends_at_once_and_titles_come_from_the_first_prompt() {
    let home = tempfile::tempdir().unwrap();
    let agent = start(home.path(), "target", 0);
    assert_eq!(
        agent.inject(snapshot_context("x")).await.unwrap(),
        Admission::Appended
    );
    let path = log_path(home.path(), "target");
    assert_eq!(batches(&path)[1], vec!["user/message"]);
    assert_eq!(count(&path, "turn/start"), 0);
    agent.followup(agent.user_message("Fix the flaky parser test in CI today please"));
    wait_for("turn", || count(&path, "turn/end") == 1).await;
    let title = events(&path)
        .into_iter()
        .find(|e| e.kind == "session/title")
        .unwrap();
    assert!(
        title
            .data
            .get()
            .contains("\"Fix the flaky parser test in\""),
        "{}",
        title.data.get()
    );
    // Resume continues the same log with contiguous seqs.
    agent.shutdown();
    let resumed = Agent::resume(
        &path,
        Arc::new(OfflineModel::new(Duration::ZERO)),
        LiveSessions::default(),
    )
    .unwrap();
    resumed.followup(resumed.user_message("again"));
    wait_for("resumed turn", || count(&path, "turn/end") == 2).await;
    let logged = events(&path);
    assert!(logged
        .iter()
        .any(|e| e.kind == "turn/start" && e.data.get().contains("\"turn\":2")));
    assert_eq!(count(&path, "session/title"), 1);
}
