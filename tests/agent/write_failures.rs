//! A typed message the agent took in but could not write is reported back as unsent, on the
//! prompt path and on the steering path; nothing of it reaches the log.

use dsh_session_references::agent::{Admission, Agent, AgentEvent, OfflineModel};
use dsh_session_references::session::reader::{read_log, Encoding};
use dsh_session_references::session::writer::WriteFault;
use dsh_session_references::session::{LiveSessions, SessionHeader, SessionWriter};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

fn full_disk() -> Option<WriteFault> {
    Some(WriteFault {
        after: 0,
        kind: std::io::ErrorKind::StorageFull,
    })
}

async fn unsent(rx: &mut UnboundedReceiver<AgentEvent>) -> (Vec<String>, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(AgentEvent::Unsent {
                message_ids,
                reason,
            })) => return (message_ids, reason),
            Ok(Some(_)) => {}
            other => panic!("no unsent report: {other:?}"),
        }
    }
}

fn resumed(home: &std::path::Path, delay: Duration) -> (Agent, std::path::PathBuf) {
    let path = SessionWriter::create(
        home,
        SessionHeader::new("s", 1, Some("/w".into())),
        Encoding::Zstd,
    )
    .unwrap()
    .path()
    .to_path_buf();
    let agent = Agent::resume(
        &path,
        Arc::new(OfflineModel::new(delay)),
        LiveSessions::default(),
    )
    .unwrap();
    (agent, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_that_cannot_be_written_is_unsent() {
    let home = tempfile::tempdir().unwrap();
    let (agent, path) = resumed(home.path(), Duration::ZERO);
    let mut rx = agent.subscribe();
    agent.set_write_fault(full_disk());
    let message = agent.user_message("a prompt");
    let id = message.id.clone();
    assert_eq!(agent.followup(message), Admission::Queued);
    let (ids, reason) = unsent(&mut rx).await;
    assert_eq!(ids, vec![id]);
    assert!(
        reason.contains("No space") || reason.contains("storage"),
        "{reason}"
    );
    assert!(read_log(&path).unwrap().1.is_empty(), "nothing logged");
    agent.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_that_cannot_be_written_is_unsent() {
    let home = tempfile::tempdir().unwrap();
    let (agent, path) = resumed(home.path(), Duration::from_millis(40));
    let mut rx = agent.subscribe();
    agent.followup(agent.user_message("tell me a long story about parsers"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    // The turn is open and its prompt is on disk (the log writer acknowledges batches after
    // the decision, so an open window alone does not mean the prompt was written).
    let logged = |path: &std::path::Path| {
        read_log(path).is_ok_and(|(_, records)| {
            serde_json::to_string(&records)
                .unwrap()
                .contains("tell me a long story")
        })
    };
    while !agent.status().window_open || !logged(&path) {
        assert!(tokio::time::Instant::now() < deadline, "the turn opens");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    agent.set_write_fault(full_disk());
    let steer = agent.user_message("steer this way");
    let id = steer.id.clone();
    assert_eq!(agent.steer(steer), Admission::Staged);
    let (ids, _) = unsent(&mut rx).await;
    assert_eq!(ids, vec![id]);
    agent.shutdown();
    let (_, records) = read_log(&path).unwrap();
    assert!(!serde_json::to_string(&records)
        .unwrap()
        .contains("steer this way"));
}

/// dsh (which takes no lock) appended a turn while our agent had the session open: the agent's
/// next turn is written after it, and its surface (what the model sees) includes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_another_writer_appended_are_adopted_into_the_surface() {
    use dsh_session_references::session::{
        ContentBlock, EventData, Message, MessageSource, NewEvent,
    };
    let home = tempfile::tempdir().unwrap();
    let (agent, path) = resumed(home.path(), Duration::ZERO);
    // The other writer's turn, appended byte for byte as dsh would.
    let scratch = tempfile::tempdir().unwrap();
    let theirs = scratch.path().join("session.jsonl.zstd");
    std::fs::copy(&path, &theirs).unwrap();
    let start = std::fs::metadata(&theirs).unwrap().len() as usize;
    {
        let (mut writer, _) = SessionWriter::open(&theirs).unwrap();
        writer
            .append(vec![
                NewEvent::new(EventData::TurnStart {
                    turn: 1,
                    trigger: serde_json::json!({"kind": "message"}),
                    extra: Default::default(),
                }),
                NewEvent::new(EventData::UserMessage(Message::new(
                    "user",
                    vec![ContentBlock::text("written by dsh")],
                    MessageSource::user(),
                    "dsh-1".into(),
                ))),
                NewEvent::new(EventData::TurnEnd {
                    turn: 1,
                    reason: serde_json::json!({"kind": "completed"}),
                    extra: Default::default(),
                }),
            ])
            .unwrap();
    }
    let bytes = std::fs::read(&theirs).unwrap();
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&bytes[start..])
        .unwrap();
    let mut rx = agent.subscribe();
    agent.followup(agent.user_message("ours"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, records) = read_log(&path).unwrap();
        if records.iter().filter(|r| r.kind() == "turn/end").count() == 2 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "our turn is logged");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (scan, records) = read_log(&path).unwrap();
    assert!(scan.torn_tail.is_none());
    let text = serde_json::to_string(&records).unwrap();
    assert!(
        text.contains("written by dsh") && text.contains("\"turn\":2"),
        "{text}"
    );
    let surface = agent.live().snapshot();
    let messages: Vec<String> = surface
        .events
        .iter()
        .filter_map(|e| e.message("s").ok().flatten())
        .map(|m| m.text())
        .collect();
    assert_eq!(messages[0], "written by dsh", "{messages:?}");
    assert_eq!(messages[1], "ours", "{messages:?}");
    // The UI heard of the adopted record too.
    let mut heard = false;
    while let Ok(event) = rx.try_recv() {
        if let AgentEvent::Logged(events) = event {
            heard |= events.iter().any(|e| {
                e.message("s")
                    .ok()
                    .flatten()
                    .is_some_and(|m| m.text() == "written by dsh")
            });
        }
    }
    assert!(heard);
    agent.shutdown();
}
