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
    while !agent.status().window_open {
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
