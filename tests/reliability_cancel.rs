//! Cancellation, measured: Esc during a `prepare` stuck on a read gives the composer back within
//! 100 ms, and nothing is dispatched.
//!
//! The mount's submit transaction runs against two kinds of stuck storage: a read future that
//! never completes, and a read blocked in a worker thread (as a hung disk or network mount would
//! block `spawn_blocking`). Each round starts a submit, lets it get stuck, cancels (what Esc does)
//! and measures the time until the submit settles. The figures go to RELIABILITY.md. The file
//! is a test binary of its own so that no other test shares the two cores while it measures.

use dsh_session_references::agent::Admission;
use dsh_session_references::host::{AgentSurface, SessionReferenceMount};
use dsh_session_references::reference::{
    format_session_reference_mention, AgentIdentity, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::error::Result as SessionResult;
use dsh_session_references::session::{
    BoxFuture, Message, SessionHeader, SessionQuery, SessionSummary, SurfaceSnapshot,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct CountingAgent {
    dispatched: AtomicUsize,
}

impl AgentSurface for CountingAgent {
    fn identity(&self) -> AgentIdentity {
        AgentIdentity::new("target", None)
    }
    fn dispatch(&self, _message: Message) -> Admission {
        self.dispatched.fetch_add(1, Ordering::SeqCst);
        Admission::Queued
    }
    fn dispatch_with_contexts(&self, _message: Message, _contexts: Vec<Message>) -> Admission {
        self.dispatched.fetch_add(1, Ordering::SeqCst);
        Admission::Queued
    }
}

/// Storage whose reads never answer in time.
#[derive(Clone, Copy)]
enum Stuck {
    /// A future that stays pending forever.
    Pending,
    /// A worker thread blocked for 2 s (a hung disk).
    BlockedThread,
}

impl SessionQuery for Stuck {
    fn list_sessions(&self) -> BoxFuture<'_, SessionResult<Arc<Vec<SessionSummary>>>> {
        Box::pin(async {
            Ok(Arc::new(vec![SessionSummary {
                header: Arc::new(SessionHeader::new("source", 1, None)),
                live: false,
                persisted: true,
            }]))
        })
    }
    fn read_surface<'a>(&'a self, _id: &'a str) -> BoxFuture<'a, SessionResult<SurfaceSnapshot>> {
        let stuck = *self;
        Box::pin(async move {
            match stuck {
                Stuck::Pending => std::future::pending().await,
                Stuck::BlockedThread => {
                    let _ =
                        tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_secs(2)))
                            .await;
                    Err(dsh_session_references::session::SessionError::Other(
                        "unreachable in time".into(),
                    ))
                }
            }
        })
    }
    fn read_title<'a>(&'a self, _id: &'a str) -> BoxFuture<'a, SessionResult<Option<String>>> {
        Box::pin(async { Ok(None) })
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_during_a_stuck_prepare_returns_within_100ms() {
    let text = format!(
        "compare {}",
        format_session_reference_mention("source", None)
    );
    for stuck in [Stuck::Pending, Stuck::BlockedThread] {
        let agent = Arc::new(CountingAgent::default());
        let service =
            SessionReferences::new(Arc::new(stuck), SessionReferenceConfig::default()).unwrap();
        let mount = SessionReferenceMount::new(Some(service), agent.clone());
        let rounds = 40;
        let mut latencies = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let cancel = CancellationToken::new();
            let task = {
                let (mount, cancel, text) = (mount.clone(), cancel.clone(), text.clone());
                tokio::spawn(async move { mount.submit(&text, &cancel).await })
            };
            tokio::time::sleep(Duration::from_millis(5)).await;
            let esc = Instant::now();
            cancel.cancel();
            let result = tokio::time::timeout(Duration::from_secs(2), task)
                .await
                .expect("settles after Esc")
                .unwrap();
            latencies.push(esc.elapsed());
            let err = result.unwrap_err();
            assert!(err.was_cancelled(), "{err}");
        }
        assert_eq!(agent.dispatched.load(Ordering::SeqCst), 0, "nothing sent");
        let p50 = percentile(&mut latencies, 0.5);
        let p99 = percentile(&mut latencies, 0.99);
        let max = *latencies.last().unwrap();
        println!(
            "{}: {rounds} cancels, Esc to settled p50={p50:.1?} p99={p99:.1?} max={max:.1?}",
            match stuck {
                Stuck::Pending => "pending read",
                Stuck::BlockedThread => "blocked read thread",
            }
        );
        assert!(max < Duration::from_millis(100), "max {max:?}");
    }
}
