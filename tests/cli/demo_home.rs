//! The bundled demo home (`assets/demo-home`) is what the crate's writer makes of the scripts in
//! `assets/demo-script`, it reads back and folds under dsh's rules, its compaction is written
//! the way SPEC §1.5 requires, and the service still does with it what the demo shows.

#[path = "../../examples/make_demo_home/mod.rs"]
#[allow(dead_code)]
mod make_demo_home;

use dsh_session_references::reference::context_json;
use dsh_session_references::reference::project;
use dsh_session_references::reference::{
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::format::{
    COMPACT_END, COMPACT_START, COMPACT_SUMMARY, USER_MESSAGE,
};
use dsh_session_references::session::{
    ContentBlock, DiskStore, Event, MessageSource, SurfaceOp, SurfaceSnapshot,
};
use make_demo_home::verify::{check_log, fold_by_seq, Checked};
use make_demo_home::{check_home, differences, generate, DEMO_HOME, SCRIPT_DIR};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const COMPACTED: &str = "be266e1a-9461-46be-a367-b6f347259b89";
const INFRA: &str = "1e0f9a72-694b-41d1-a29f-87cdaff19373";
const REFERENCING: &str = "7a712ba3-b648-4c24-90a9-8184f793c5cc";
const REFERENCED: &str = "f382e8f5-9f34-4706-bea8-95f943fbcb40";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn demo_logs() -> Vec<Checked> {
    check_home(&root().join(DEMO_HOME)).unwrap()
}

fn log<'a>(logs: &'a [Checked], id: &str) -> &'a Checked {
    logs.iter().find(|l| l.header.id == id).unwrap()
}

/// The demo home as `dsh-refs --demo` installs it (from the copy embedded by `build.rs`).
fn installed_home() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    dsh_session_references::demo::install_into(&home).unwrap();
    (dir, home)
}

fn by_seq(events: &[Event], seq: u64) -> &Event {
    events.iter().find(|e| e.seq == seq).unwrap()
}

#[test]
fn every_demo_session_reads_and_folds() {
    let logs = demo_logs();
    assert_eq!(logs.len(), 8);
    let titled = logs.iter().filter(|l| l.title.is_some()).count();
    assert_eq!(titled, 7, "exactly one session is labelled by its id");
    assert_eq!(logs.iter().filter(|l| l.header.cwd.is_none()).count(), 1);
    let store = DiskStore::new(root().join(DEMO_HOME));
    for log in &logs {
        assert!(!log.surface.is_empty(), "{}", log.header.id);
        if log.replacements.is_empty() {
            // Without a replace, the crate's fold and the seq fold agree on every event.
            let read = store.read_surface_blocking(&log.header.id).unwrap();
            assert_eq!(read.events, log.surface, "{}", log.header.id);
            assert_eq!(read.captured_through_seq, log.events.last().map(|e| e.seq));
        }
    }
}

#[test]
fn the_compaction_replaces_by_seq_with_full_provenance() {
    let logs = demo_logs();
    let log = log(&logs, COMPACTED);
    assert_eq!(log.replacements.len(), 2, "compacted twice");
    for replace in &log.replacements {
        // The range names event seqs, and they are not the surface positions.
        assert_ne!(replace.start, replace.start_index as u64);
        assert_ne!(replace.end, replace.end_index as u64);
        let checkpoint = by_seq(&log.events, replace.seq);
        assert_eq!(checkpoint.kind, USER_MESSAGE);
        let message = checkpoint.message(COMPACTED).unwrap().unwrap();
        assert!(message.source.is_compact_checkpoint());
        assert_eq!(
            checkpoint.surface_op,
            Some(SurfaceOp::Replace {
                start: replace.start,
                end: replace.end
            })
        );
        // compact/start, compact/summary, the checkpoint, compact/end, in a row.
        let start = by_seq(&log.events, replace.seq - 2);
        let summary = by_seq(&log.events, replace.seq - 1);
        assert_eq!(start.kind, COMPACT_START);
        assert_eq!(summary.kind, COMPACT_SUMMARY);
        assert_eq!(by_seq(&log.events, replace.seq + 1).kind, COMPACT_END);
        let mut provenance = vec![start.seq, summary.seq];
        provenance.extend(&replace.shadowed);
        assert_eq!(checkpoint.source_event_seqs.as_ref(), Some(&provenance));
        let summary: Value = serde_json::from_str(summary.data.get()).unwrap();
        assert_eq!(summary["shadowedSeqs"], serde_json::json!(replace.shadowed));
    }
    // The second compaction starts at the first checkpoint, at surface position 0.
    let (first, second) = (&log.replacements[0], &log.replacements[1]);
    assert_eq!(second.start, first.seq);
    assert_eq!(second.start_index, 0);
    // The projection is the latest checkpoint plus what follows it.
    let snapshot = SurfaceSnapshot {
        session: log.header.clone(),
        captured_through_seq: log.events.last().map(|e| e.seq),
        events: log.surface.clone(),
    };
    let items = project(&snapshot);
    assert_eq!(log.surface[0].seq, second.seq);
    assert!(items[0].checkpoint);
    assert!(items[0].text.contains("The work is done"));
    assert_eq!(items.iter().filter(|i| i.checkpoint).count(), 1);
    assert!(items[1]
        .text
        .starts_with("Summarize the whole change for the PR description."));
    assert_eq!(items.len(), 3);
}

#[test]
fn the_seq_fold_rejects_a_replace_by_position() {
    // What the old generator wrote: `start` 0 was a position, and no provenance.
    let logs = demo_logs();
    let mut events = log(&logs, COMPACTED).events.clone();
    let checkpoint = log(&logs, COMPACTED).replacements[0].seq;
    let event = events.iter_mut().find(|e| e.seq == checkpoint).unwrap();
    event.surface_op = Some(SurfaceOp::Replace { start: 0, end: 19 });
    let err = fold_by_seq(&events).unwrap_err();
    assert!(err.contains("start seq 0 not found in surface"), "{err}");
    let event = events.iter_mut().find(|e| e.seq == checkpoint).unwrap();
    event.surface_op = Some(SurfaceOp::Replace { start: 1, end: 342 });
    event.source_event_seqs = None;
    let err = fold_by_seq(&events).unwrap_err();
    assert!(err.contains("must include every shadowed node"), "{err}");
    event_at(&mut events, checkpoint).source_event_seqs = Some(vec![checkpoint]);
    let err = fold_by_seq(&events).unwrap_err();
    assert!(err.contains("must reference earlier events"), "{err}");
    event_at(&mut events, checkpoint).source_event_seqs = None;
    event_at(&mut events, checkpoint - 1).surface_op = Some(SurfaceOp::Append);
    let err = fold_by_seq(&events).unwrap_err();
    assert!(
        err.contains("compact/summary is not a surface event"),
        "{err}"
    );
}

fn event_at(events: &mut [Event], seq: u64) -> &mut Event {
    events.iter_mut().find(|e| e.seq == seq).unwrap()
}

#[test]
fn generation_is_deterministic_and_matches_the_files_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    generate(&root().join(SCRIPT_DIR), &a).unwrap();
    generate(&root().join(SCRIPT_DIR), &b).unwrap();
    let (a, b) = (a.join("sessions"), b.join("sessions"));
    assert_eq!(differences(&a, &b).unwrap(), Vec::<String>::new());
    // What `--check` verifies: run `cargo run --example make-demo-home` after editing a script.
    let on_disk = root().join(DEMO_HOME).join("sessions");
    assert_eq!(differences(&a, &on_disk).unwrap(), Vec::<String>::new());
    // And it notices one changed byte.
    let some_log = make_demo_home::tree(&b)
        .unwrap()
        .into_keys()
        .next()
        .unwrap();
    let path = b.join(&some_log);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let diffs = differences(&a, &b).unwrap();
    assert_eq!(diffs.len(), 1);
    assert!(diffs[0].starts_with("differs: "), "{diffs:?}");
}

#[test]
fn the_embedded_demo_home_is_the_generated_one() {
    let (_dir, home) = installed_home();
    let diffs = differences(&root().join(DEMO_HOME), &home).unwrap();
    assert_eq!(diffs, Vec::<String>::new());
    for log in check_home(&home).unwrap() {
        let path = DiskStore::new(&home).log_path(&log.header.id).unwrap();
        check_log(&home, &path).unwrap();
    }
}

async fn prepare(
    home: &Path,
    source: &str,
    label: Option<&str>,
) -> Result<dsh_session_references::reference::Prepared, &'static str> {
    let service = SessionReferences::new(
        Arc::new(DiskStore::new(home)),
        SessionReferenceConfig::default(),
    )
    .unwrap();
    let agent = AgentIdentity::new("observer", Some("/home/dev/projects/parser".into()));
    service
        .prepare(
            &agent,
            vec![ContentBlock::text("see @ref")],
            vec![ReferenceInput::new(source, label.map(str::to_string))],
            &CancellationToken::new(),
        )
        .await
        .map_err(|e| e.code())
}

fn reference_entry(prepared: &dsh_session_references::reference::Prepared) -> Value {
    let context = prepared.additional_context.as_ref().unwrap();
    let MessageSource::SessionReference { references, .. } = &context.source else {
        panic!("not a session-reference source: {:?}", context.source);
    };
    references[0].clone()
}

#[tokio::test]
async fn prepare_of_each_demo_session_behaves_as_the_demo_shows() {
    let (_dir, home) = installed_home();
    let logs = check_home(&home).unwrap();
    for log in logs.iter().filter(|l| l.replacements.is_empty()) {
        let prepared = prepare(&home, &log.header.id, None).await.unwrap();
        let entry = reference_entry(&prepared);
        let truncated = entry["truncated"].as_bool().unwrap();
        if log.header.id == INFRA {
            // The long session only fits after dropping and cutting messages.
            assert!(truncated);
            assert!(entry["omittedMessages"].as_u64().unwrap() > 0);
            assert!(entry["omittedBytes"].as_u64().unwrap() > 100_000);
        } else {
            assert!(!truncated, "{}: {entry}", log.header.id);
        }
        assert_eq!(entry["compacted"], false);
    }
    // The recorded reference is what the service renders for that source today.
    let referencing = log(&logs, REFERENCING);
    let recorded = referencing
        .surface
        .iter()
        .filter_map(|e| e.message(REFERENCING).unwrap())
        .find(|m| matches!(m.source, MessageSource::SessionReference { .. }))
        .unwrap();
    let fresh = prepare(&home, REFERENCED, Some("Fix the flaky tokenizer test"))
        .await
        .unwrap();
    let fresh_context = fresh.additional_context.unwrap();
    assert_eq!(recorded.content, fresh_context.content);
    let text = recorded.content[0].as_text().unwrap();
    let sources: Value = serde_json::from_str(context_json(text).unwrap()).unwrap();
    assert_eq!(sources[0]["sessionId"], REFERENCED);
    assert_eq!(sources[0]["label"], "Fix the flaky tokenizer test");
    // The readable prompt follows its context, with the mention as `@label`.
    let position = |pred: &dyn Fn(&Event) -> bool| referencing.surface.iter().position(pred);
    let context_at = position(&|e| {
        e.message(REFERENCING)
            .unwrap()
            .is_some_and(|m| matches!(m.source, MessageSource::SessionReference { .. }))
    })
    .unwrap();
    let prompt = referencing.surface[context_at + 1]
        .message(REFERENCING)
        .unwrap()
        .unwrap();
    assert!(prompt.text().starts_with("@Fix the flaky tokenizer test: "));
}

/// The crate's own fold (SPEC §1.5, seq-based) agrees with the example's independent fold.
#[tokio::test]
async fn prepare_of_the_compacted_session_keeps_the_latest_checkpoint() {
    let (_dir, home) = installed_home();
    let logs = check_home(&home).unwrap();
    let read = DiskStore::new(&home)
        .read_surface_blocking(COMPACTED)
        .unwrap();
    assert_eq!(read.events, log(&logs, COMPACTED).surface);
    let prepared = prepare(&home, COMPACTED, None).await.unwrap();
    let entry = reference_entry(&prepared);
    assert_eq!(entry["compacted"], true);
    assert_eq!(entry["retainedMessages"], 3);
    let context = prepared.additional_context.unwrap();
    let text = context.content[0].as_text().unwrap();
    let sources: Value = serde_json::from_str(context_json(text).unwrap()).unwrap();
    let conversation = sources[0]["conversation"].as_array().unwrap();
    assert!(conversation[0]["text"]
        .as_str()
        .unwrap()
        .contains("The work is done"));
    assert!(!text.contains("Go ahead with the sync-point approach"));
}
