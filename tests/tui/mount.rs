//! The submit transaction of the mount (SPEC §5.3) against a real store and agent.

use dsh_session_references::agent::{Admission, Agent, AgentConfig, OfflineModel};
use dsh_session_references::host::{SessionReferenceMount, SubmitError};
use dsh_session_references::reference::{
    format_session_reference_mention, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::{
    BoxFuture, ContentBlock, DiskStore, Encoding, EventData, HostSessions, LiveSessions, Message,
    MessageSource, SessionHeader, SessionQuery, SessionSummary, SessionWriter, SurfaceSnapshot,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn write_source(home: &Path) {
    let mut writer = SessionWriter::create(
        home,
        SessionHeader::new("source-1", 5, Some("/work".into())),
        Encoding::Plain,
    )
    .unwrap();
    let prompt = Message::new(
        "user",
        vec![ContentBlock::text("how do we parse dates?")],
        MessageSource::user(),
        "u1".into(),
    );
    writer
        .append(vec![EventData::UserMessage(prompt).into()])
        .unwrap();
}

struct Setup {
    _home: tempfile::TempDir,
    agent: Agent,
    live: LiveSessions,
    disk: DiskStore,
    home: std::path::PathBuf,
}

fn setup() -> Setup {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let live = LiveSessions::default();
    let agent = Agent::start(AgentConfig {
        home: home.path().to_path_buf(),
        header: SessionHeader::new("target", 10, Some("/work".into())),
        encoding: Encoding::Plain,
        model: Arc::new(OfflineModel::new(Duration::ZERO)),
        live: live.clone(),
    });
    Setup {
        home: home.path().to_path_buf(),
        disk: DiskStore::new(home.path()),
        _home: home,
        agent,
        live,
    }
}

fn mount_over(setup: &Setup, query: Arc<dyn SessionQuery>) -> SessionReferenceMount {
    let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
    SessionReferenceMount::new(Some(service), Arc::new(setup.agent.clone()))
}

fn target_log(home: &Path) -> std::path::PathBuf {
    home.join("sessions/--work--/target/session.jsonl")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_dispatches_context_then_message() {
    let s = setup();
    let mount = mount_over(
        &s,
        Arc::new(HostSessions::new(s.disk.clone(), s.live.clone())),
    );
    let candidates = mount
        .candidates("sour", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(candidates.len(), 1, "the agent itself is never a candidate");
    let text = format!(
        "what did {} decide?",
        format_session_reference_mention("source-1", Some("dates"))
    );
    let submitted = mount
        .submit(&text, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(submitted.admission, Admission::Queued);
    assert_eq!(submitted.referenced, 1);
    let path = target_log(&s.home);
    for _ in 0..300 {
        if std::fs::read_to_string(&path).is_ok_and(|t| t.contains("turn/end")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let snapshot = dsh_session_references::session::store::read_surface_file(&path).unwrap();
    let messages: Vec<Message> = snapshot
        .events
        .iter()
        .map(|e| e.message("target").unwrap().unwrap())
        .collect();
    match &messages[0].source {
        MessageSource::SessionReference { references, .. } => {
            assert_eq!(references[0]["sessionId"], "source-1");
            assert_eq!(references[0]["label"], "dates");
        }
        other => panic!("{other:?}"),
    }
    assert!(messages[0].text().contains("how do we parse dates?"));
    assert_eq!(messages[1].text(), "what did @dates decide?");
    assert_eq!(messages[1].id, submitted.message_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_failure_enqueues_nothing() {
    let s = setup();
    let mount = mount_over(&s, Arc::new(s.disk.clone()));
    let text = format_session_reference_mention("missing", None);
    let err = mount
        .submit(&text, &CancellationToken::new())
        .await
        .unwrap_err();
    let shown = err.to_string();
    assert!(shown.starts_with("Session reference failed: "), "{shown}");
    assert!(shown.contains("missing"), "{shown}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(s.agent.status().queued_prompts, 0);
    assert!(!target_log(&s.home).exists());
    assert!(s.agent.hooks().is_empty());
}

#[tokio::test]
async fn without_service_mentions_are_refused() {
    let s = setup();
    let mount = SessionReferenceMount::new(None, Arc::new(s.agent.clone()));
    let text = format_session_reference_mention("source-1", None);
    let err = mount
        .submit(&text, &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Session reference capability unavailable");
    assert!(matches!(err, SubmitError::Unavailable));
    // A plain message still goes out.
    let ok = mount
        .submit("hello", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(ok.admission, Admission::Queued);
}

#[tokio::test]
async fn invalid_reference_is_refused_before_anything_runs() {
    let s = setup();
    let mount = mount_over(&s, Arc::new(s.disk.clone()));
    let err = mount
        .submit("see @[x](dsh-session:%%%)", &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("Invalid session reference: "),
        "{err}"
    );
    assert_eq!(s.agent.status().queued_prompts, 0);
}

/// A store whose surface reads never return.
struct Stuck(DiskStore);
impl SessionQuery for Stuck {
    fn list_sessions(
        &self,
    ) -> BoxFuture<'_, dsh_session_references::session::error::Result<Arc<Vec<SessionSummary>>>>
    {
        self.0.list_sessions()
    }
    fn read_surface<'a>(
        &'a self,
        _id: &'a str,
    ) -> BoxFuture<'a, dsh_session_references::session::error::Result<SurfaceSnapshot>> {
        Box::pin(std::future::pending())
    }
    fn read_title<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, dsh_session_references::session::error::Result<Option<String>>> {
        self.0.read_title(id)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_during_a_stuck_prepare_cancels_promptly() {
    let s = setup();
    let mount = mount_over(&s, Arc::new(Stuck(s.disk.clone())));
    let cancel = CancellationToken::new();
    let text = format_session_reference_mention("source-1", None);
    let task = {
        let mount = mount.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move { mount.submit(&text, &cancel).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    cancel.cancel();
    let err = tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .expect("settles promptly")
        .unwrap()
        .unwrap_err();
    assert!(err.was_cancelled(), "{err}");
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(s.agent.status().queued_prompts, 0);
    assert!(!target_log(&s.home).exists());
}
