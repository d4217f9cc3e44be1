//! Compactions and pruned tool results folded by seqs (SPEC §1.5), through every read path: the
//! full reader, the conversation-only read (tool results skimmed), the store's cached fold
//! resumed on a grown log, and `prepare`. Seqs here never equal surface positions, in plain and
//! zstd logs.

use crate::support::conversation_texts;
use dsh_session_references::reference::{
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::store::{read_conversation_surface_file, read_surface_file};
use dsh_session_references::session::surface::{compaction_replace, Replacement};
use dsh_session_references::session::{
    ContentBlock, DiskStore, Encoding, EventData, Message, MessageSource, NewEvent, SessionError,
    SessionHeader, SessionQuery, SessionWriter, SurfaceOp, SurfaceSnapshot,
};
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn user(text: &str) -> NewEvent {
    message_event(text, MessageSource::user())
}

fn message_event(text: &str, source: MessageSource) -> NewEvent {
    EventData::UserMessage(Message::new(
        "user",
        vec![ContentBlock::text(text)],
        source,
        format!("u-{text}"),
    ))
    .into()
}

fn assistant(text: &str) -> NewEvent {
    EventData::AssistantMessage {
        turn: 1.into(),
        step: 1.into(),
        message: Message::new(
            "assistant",
            vec![ContentBlock::text(text)],
            MessageSource::model("p", "m"),
            format!("a-{text}"),
        ),
        extra: Map::new(),
    }
    .into()
}

fn tool_result(output: &str) -> NewEvent {
    EventData::ToolResult {
        turn: 1.into(),
        step: 1.into(),
        message: Message::new(
            "user",
            vec![ContentBlock::ToolResult {
                tool_call_id: "call-1".into(),
                content: vec![ContentBlock::text(output)],
                is_error: None,
                extra: Map::new(),
            }],
            MessageSource::Tool {
                call_id: "call-1".into(),
                extra: Map::new(),
            },
            "r-1".into(),
        ),
        extra: Map::new(),
    }
    .into()
}

fn turn(start: bool, turn: u64) -> NewEvent {
    if start {
        EventData::TurnStart {
            turn,
            trigger: "prompt".into(),
            extra: Map::new(),
        }
    } else {
        EventData::TurnEnd {
            turn,
            reason: "stop".into(),
            extra: Map::new(),
        }
    }
    .into()
}

fn marker() -> Map<String, Value> {
    Map::new()
}

fn seqs(snapshot: &SurfaceSnapshot) -> Vec<u64> {
    snapshot.events.iter().map(|e| e.seq).collect()
}

/// Writes `compact/start`, `compact/summary`, the checkpoint replacing the current surface nodes
/// `start..=end` (by seqs, full provenance) and `compact/end`, as one batch.
fn compact(writer: &mut SessionWriter, surface: &[u64], start: u64, end: u64, summary: &str) {
    let first = writer.next_seq();
    let replacement = compaction_replace(
        &writer.header().id.clone(),
        first + 2,
        surface,
        start,
        end,
        &[first, first + 1],
    )
    .unwrap();
    writer
        .append(vec![
            EventData::CompactStart(marker()).into(),
            EventData::CompactSummary(marker()).into(),
            message_event(summary, MessageSource::plugin("compact")).with_replacement(replacement),
            EventData::CompactEnd(marker()).into(),
        ])
        .unwrap();
}

/// One stage of the log below: what was appended, and the surface seqs it leaves.
type Stage = (&'static str, Vec<u64>);

/// Grows a log stage by stage, calling `check` after each with the surface expected then.
///
/// Seqs: 0 turn/start, 1 "q1", 2 "a1", 3 tool output, 4 "a2", 5 turn/end; 6 prunes 3; 7..=10
/// compact 1..=4 (7 start, 8 summary, 9 "cp1", 10 end); 11 turn/start, 12 "q2", 13 "a3", 14
/// turn/end; 15..=18 compact 9..=13 (17 "cp2"); 19 "q3", 20 "a4".
fn grow_log(home: &Path, encoding: Encoding, mut check: impl FnMut(&Path, &Stage)) {
    let header = SessionHeader::new("src", 1, Some("/w".into()));
    let mut writer = SessionWriter::create(home, header, encoding).unwrap();
    let path = writer.path().to_path_buf();
    writer
        .append(vec![
            turn(true, 1),
            user("q1"),
            assistant("a1"),
            tool_result("a very long tool output"),
            assistant("a2"),
            turn(false, 1),
        ])
        .unwrap();
    check(&path, &("first turn", vec![1, 2, 3, 4]));

    // A pruned tool result: a tool/result replacing exactly one node, itself.
    let prune = compaction_replace("src", 6, &[1, 2, 3, 4], 3, 3, &[]).unwrap();
    assert_eq!(prune.source_event_seqs, [3]);
    writer
        .append(vec![tool_result("[pruned]").with_replacement(prune)])
        .unwrap();
    check(&path, &("pruned tool result", vec![1, 2, 6, 4]));

    compact(&mut writer, &[1, 2, 6, 4], 1, 4, "cp1");
    check(&path, &("first compaction", vec![9]));

    writer
        .append(vec![
            turn(true, 2),
            user("q2"),
            assistant("a3"),
            turn(false, 2),
        ])
        .unwrap();
    check(&path, &("second turn", vec![9, 12, 13]));

    // The second compaction shadows the first checkpoint too.
    compact(&mut writer, &[9, 12, 13], 9, 13, "cp2");
    check(&path, &("second compaction", vec![17]));

    writer.append(vec![user("q3"), assistant("a4")]).unwrap();
    check(&path, &("after the compactions", vec![17, 19, 20]));
}

#[test]
fn full_and_conversation_reads_fold_by_seqs() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let store = DiskStore::new(home.path());
        grow_log(home.path(), encoding, |path, (stage, expected)| {
            let what = format!("{encoding:?}, {stage}");
            let full = read_surface_file(path).unwrap();
            assert_eq!(&seqs(&full), expected, "{what}: full read");
            let conversation = read_conversation_surface_file(path).unwrap();
            assert_eq!(&seqs(&conversation), expected, "{what}: conversation read");
            // The store: the full read, and the cached conversation resumed on the grown log.
            let stored = store.read_surface_blocking("src").unwrap();
            assert_eq!(stored, full, "{what}: store full read");
            let cached = store.read_conversation_surface_blocking("src").unwrap();
            assert_eq!(cached, conversation, "{what}: cached conversation");
            assert_eq!(full.captured_through_seq, conversation.captured_through_seq);
        });
    }
}

#[test]
fn the_pruned_tool_result_keeps_its_provenance_and_replacement_text() {
    let home = tempfile::tempdir().unwrap();
    let mut checked = false;
    grow_log(home.path(), Encoding::Plain, |path, (stage, _)| {
        if *stage != "pruned tool result" {
            return;
        }
        let full = read_surface_file(path).unwrap();
        let pruned = &full.events[2];
        assert_eq!(
            pruned.surface_op,
            Some(SurfaceOp::Replace { start: 3, end: 3 })
        );
        assert_eq!(pruned.source_event_seqs.as_deref(), Some(&[3][..]));
        assert!(pruned.data.get().contains("[pruned]"));
        checked = true;
    });
    assert!(checked);
}

#[tokio::test]
async fn prepare_yields_the_latest_checkpoint_and_what_follows() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let mut stages = Vec::new();
        grow_log(home.path(), encoding, |_, (stage, _)| stages.push(*stage));
        assert_eq!(stages.len(), 6);
        let store = DiskStore::new(home.path());
        let query: Arc<dyn SessionQuery> = Arc::new(store);
        let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
        let agent = AgentIdentity::new("tgt", Some("/w".into()));
        let prepared = service
            .prepare(
                &agent,
                vec![ContentBlock::text("what did @Source decide?")],
                vec![ReferenceInput::new("src", Some("Source".into()))],
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(
            conversation_texts(prepared.additional_context.as_ref().unwrap()),
            ["cp2", "q3", "a4"],
            "{encoding:?}"
        );
    }
}

/// A log of three appended messages (seqs 1..=3 after a turn/start), then `last`.
fn log_ending_with(home: &Path, encoding: Encoding, last: NewEvent) -> std::path::PathBuf {
    let header = SessionHeader::new("bad", 1, Some("/w".into()));
    let mut writer = SessionWriter::create(home, header, encoding).unwrap();
    writer
        .append(vec![turn(true, 1), user("q1"), assistant("a1"), user("q2")])
        .unwrap();
    writer.append(vec![last, turn(false, 1)]).unwrap();
    writer.path().to_path_buf()
}

fn replace(start: u64, end: u64, sources: Option<Vec<u64>>) -> NewEvent {
    let mut event = message_event("cp", MessageSource::plugin("compact"))
        .with_surface_op(SurfaceOp::Replace { start, end });
    event.source_event_seqs = sources;
    event
}

#[test]
fn invalid_replaces_are_clear_errors_on_every_read_path() {
    let cases = [
        // Positions 0..=2 would be valid; seq 0 is the turn/start, not a surface node.
        (
            replace(0, 2, None),
            "start seq 0 is not a current surface node",
        ),
        (
            replace(1, 9, None),
            "end seq 9 is not a current surface node",
        ),
        (
            replace(3, 1, None),
            "start seq 3 (surface position 2) comes after end seq 1",
        ),
        (
            replace(1, 3, Some(vec![1, 3])),
            "sourceEventSeqs misses shadowed surface node(s) 2",
        ),
    ];
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        for (i, (event, expected)) in cases.clone().into_iter().enumerate() {
            let home = tempfile::tempdir().unwrap();
            let path = log_ending_with(home.path(), encoding, event);
            let store = DiskStore::new(home.path());
            let errors = [
                read_surface_file(&path).unwrap_err(),
                read_conversation_surface_file(&path).unwrap_err(),
                store.read_surface_blocking("bad").unwrap_err(),
                store.read_conversation_surface_blocking("bad").unwrap_err(),
            ];
            for err in errors {
                let text = err.to_string();
                assert!(
                    matches!(&err, SessionError::InvalidSurfaceOp { seq: 4, .. }),
                    "{encoding:?} case {i}: {text}"
                );
                // The file and logical line (header 1, seqs 0..=3 on lines 2..=5).
                let at = format!("{}: line 6: session \"bad\": event seq 4", path.display());
                assert!(text.starts_with(&at), "{text}");
                assert!(text.contains(expected), "{encoding:?} case {i}: {text}");
            }
        }
    }
}

#[test]
fn a_replace_without_provenance_is_read_as_older_logs_need() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = log_ending_with(home.path(), encoding, replace(1, 2, None));
        assert_eq!(seqs(&read_surface_file(&path).unwrap()), [4, 3]);
        assert_eq!(
            seqs(&read_conversation_surface_file(&path).unwrap()),
            [4, 3]
        );
        let full = Replacement {
            surface_op: SurfaceOp::Replace { start: 1, end: 2 },
            source_event_seqs: vec![2, 1],
        };
        let home = tempfile::tempdir().unwrap();
        let event = message_event("cp", MessageSource::plugin("compact")).with_replacement(full);
        let path = log_ending_with(home.path(), encoding, event);
        assert_eq!(seqs(&read_surface_file(&path).unwrap()), [4, 3]);
    }
}
