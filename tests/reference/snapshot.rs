//! Snapshot semantics (SPEC §3.8) against the on-disk store: once prepared and logged, a context
//! does not change when its source is appended to, compacted or deleted.

use crate::support::conversation_texts;
use dsh_session_references::reference::{
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::format::EventData;
use dsh_session_references::session::reader::Encoding;
use dsh_session_references::session::store::DiskStore;
use dsh_session_references::session::surface::Replacement;
use dsh_session_references::session::writer::{NewEvent, SessionWriter};
use dsh_session_references::session::{
    ContentBlock, Message, MessageSource, SessionHeader, SessionQuery, SurfaceOp,
};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn message(role: &str, text: &str, source: MessageSource, id: &str) -> Message {
    Message::new(role, vec![ContentBlock::text(text)], source, id.to_string())
}

fn user(text: &str, id: &str) -> NewEvent {
    NewEvent::new(EventData::UserMessage(message(
        "user",
        text,
        MessageSource::user(),
        id,
    )))
}

fn assistant(text: &str, id: &str) -> NewEvent {
    NewEvent::new(EventData::AssistantMessage {
        turn: 1.into(),
        step: 1.into(),
        message: message("assistant", text, MessageSource::model("p", "m"), id),
        extra: Default::default(),
    })
}

#[tokio::test]
async fn prepared_context_and_target_replay_survive_source_changes() {
    let home = tempfile::tempdir().unwrap();
    let mut source = SessionWriter::create(
        home.path(),
        SessionHeader::new("src", 1, Some("/project".into())),
        Encoding::Plain,
    )
    .unwrap();
    source
        .append(vec![
            user("first question", "u1"),
            assistant("first answer", "a1"),
        ])
        .unwrap();

    let store = DiskStore::new(home.path().to_path_buf());
    let query: Arc<dyn SessionQuery> = Arc::new(store.clone());
    let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
    let agent = AgentIdentity::new("tgt", Some("/project".into()));
    let references = vec![ReferenceInput::new("src", Some("Source".into()))];
    let prepared = service
        .prepare(
            &agent,
            vec![ContentBlock::text("what did @Source decide?")],
            references.clone(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let context = prepared.additional_context.clone().unwrap();
    assert_eq!(
        conversation_texts(&context),
        ["first question", "first answer"]
    );
    let recorded = prepared.clone();

    // The target logs the context first, then the readable prompt, in one batch.
    let mut target = SessionWriter::create(
        home.path(),
        SessionHeader::new("tgt", 2, Some("/project".into())),
        Encoding::Plain,
    )
    .unwrap();
    let readable = Message::new(
        "user",
        prepared.content.clone(),
        MessageSource::user(),
        "u-readable".into(),
    );
    target
        .append(vec![
            NewEvent::new(EventData::UserMessage(context.clone())),
            NewEvent::new(EventData::UserMessage(readable.clone())),
        ])
        .unwrap();

    // The source moves on: an append, then a compaction that shadows everything.
    source.append(vec![user("later question", "u2")]).unwrap();
    let changed = service
        .prepare(
            &agent,
            vec![],
            references.clone(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        conversation_texts(changed.additional_context.as_ref().unwrap()),
        ["first question", "first answer", "later question"]
    );
    source
        .append(vec![NewEvent::new(EventData::UserMessage(message(
            "user",
            "<compacted-summary>all of it</compacted-summary>",
            MessageSource::plugin("compact"),
            "c1",
        )))
        .with_replacement(Replacement {
            surface_op: SurfaceOp::Replace { start: 0, end: 2 },
            source_event_seqs: vec![0, 1, 2],
        })])
        .unwrap();
    let compacted = service
        .prepare(
            &agent,
            vec![],
            references.clone(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        conversation_texts(compacted.additional_context.as_ref().unwrap()),
        ["<compacted-summary>all of it</compacted-summary>"]
    );

    // Then it is deleted.
    let source_dir = source.path().parent().unwrap().to_path_buf();
    drop(source);
    std::fs::remove_dir_all(&source_dir).unwrap();
    let err = service
        .prepare(&agent, vec![], references, &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "SESSION_REFERENCE_READ_FAILED");

    // What was prepared and recorded is unchanged.
    assert_eq!(prepared, recorded);
    let replay = store.read_surface("tgt").await.unwrap();
    assert_eq!(replay.events.len(), 2);
    assert_eq!(replay.events[0].message("tgt").unwrap().unwrap(), context);
    assert_eq!(replay.events[1].message("tgt").unwrap().unwrap(), readable);
    let replayed_context = replay.events[0].message("tgt").unwrap().unwrap();
    assert_eq!(
        conversation_texts(&replayed_context),
        ["first question", "first answer"]
    );
}
