//! `prepare` with three referenced sources of 1, 10 and 100 MB each (logical size), plain and
//! zstd, compared in BENCHMARKS.md with `cat` / `zstd -dc` of the same files.
//!
//! ```sh
//! cargo bench --bench prepare        # first run generates target/bench-data/big-* (~800 MB)
//! ```

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dsh_session_references::reference::{
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::{ContentBlock, DiskStore, Encoding};
use std::sync::Arc;
use std::time::Duration;
use support::gen;
use tokio_util::sync::CancellationToken;

fn prepare(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let agent = AgentIdentity::new("agent", Some("/home/dev/work/big".into()));
    let cancel = CancellationToken::new();
    let mut group = c.benchmark_group("prepare_3_sources");
    for mb in [1u64, 10, 100] {
        for (name, encoding) in [("plain", Encoding::Plain), ("zstd", Encoding::Zstd)] {
            let (home, logs) = gen::cached_big_home(mb, encoding).unwrap();
            group.throughput(Throughput::Bytes(
                logs.iter().map(|l| l.logical_bytes).sum(),
            ));
            let service = SessionReferences::new(
                Arc::new(DiskStore::new(&home)),
                SessionReferenceConfig::default(),
            )
            .unwrap();
            let references: Vec<ReferenceInput> = gen::BIG_SOURCES
                .iter()
                .map(|id| ReferenceInput::new(*id, None))
                .collect();
            group.bench_function(BenchmarkId::new(name, format!("{mb}MB")), |b| {
                b.iter(|| {
                    rt.block_on(service.prepare(
                        &agent,
                        vec![ContentBlock::text("compare these")],
                        references.clone(),
                        &cancel,
                    ))
                    .unwrap()
                })
            });
        }
    }
    group.finish();
}

/// The group `criterion_main!` runs, in a module of its own: `criterion_group!` makes a `pub fn`
/// that it gives no way to document (`missing_docs`), and here it is not public.
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(5));
        targets = prepare
    }
}
criterion_main!(group::benches);
