//! `list_candidates` over generated homes of 1k, 10k and 100k sessions: the first call of a fresh
//! service (cold store cache) and the per-keystroke calls that follow (warm).
//!
//! ```sh
//! cargo bench --bench candidates                 # first run generates target/bench-data/home-*
//! ```
//! Percentiles (p50/p99) come from `examples/measure.rs`; criterion reports means.

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dsh_session_references::reference::{AgentIdentity, SessionReferenceConfig, SessionReferences};
use dsh_session_references::session::DiskStore;
use std::sync::Arc;
use std::time::Duration;
use support::gen;
use tokio_util::sync::CancellationToken;

fn service(home: &std::path::Path) -> SessionReferences {
    SessionReferences::new(
        Arc::new(DiskStore::new(home)),
        SessionReferenceConfig::default(),
    )
    .unwrap()
}

fn candidates(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let agent = AgentIdentity::new("agent-self", Some(gen::project_cwd(3)));
    let cancel = CancellationToken::new();
    let mut group = c.benchmark_group("list_candidates");
    for sessions in [1_000, 10_000, 100_000] {
        let home = gen::cached_home(sessions).unwrap();
        if sessions <= 10_000 {
            group.bench_with_input(BenchmarkId::new("cold", sessions), &home, |b, home| {
                b.iter(|| {
                    let service = service(home);
                    rt.block_on(service.list_candidates(&agent, "", None, &cancel))
                        .unwrap()
                })
            });
        }
        let service = service(&home);
        rt.block_on(service.list_candidates(&agent, "", None, &cancel))
            .unwrap();
        // One keystroke after another: the query grows, as when typing.
        let typed: Vec<String> = (0..=7).map(|n| "harness"[..n].to_string()).collect();
        group.bench_with_input(BenchmarkId::new("warm", sessions), &typed, |b, typed| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % typed.len();
                rt.block_on(service.list_candidates(&agent, &typed[k], None, &cancel))
                    .unwrap()
            })
        });
    }
    group.finish();
}

/// The group `criterion_main!` runs, in a module of its own: `criterion_group!` makes a `pub fn`
/// that it gives no way to document (`missing_docs`), and here it is not public.
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(3));
        targets = candidates
    }
}
criterion_main!(group::benches);
