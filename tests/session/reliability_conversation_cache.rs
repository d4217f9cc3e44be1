//! The store's conversation cache answers exactly like a fresh read, while a log grows, gets a
//! torn tail, has it cut, is compacted, and is replaced by another file.

use crate::support::gen;

use dsh_session_references::session::store::read_conversation_surface_file;
use dsh_session_references::session::surface::compaction_replace;
use dsh_session_references::session::{
    ContentBlock, DiskStore, Encoding, EventData, Message, MessageSource, NewEvent, SessionHeader,
    SessionWriter,
};
use std::io::Write;

fn user(text: &str) -> NewEvent {
    EventData::UserMessage(Message::new(
        "user",
        vec![ContentBlock::text(text)],
        MessageSource::user(),
        format!("u-{text}"),
    ))
    .into()
}

fn assert_fresh(store: &DiskStore, id: &str, path: &std::path::Path, what: &str) {
    let cached = store.read_conversation_surface_blocking(id).unwrap();
    let fresh = read_conversation_surface_file(path).unwrap();
    assert_eq!(cached, fresh, "{what}");
}

#[test]
fn cached_conversations_equal_fresh_reads() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let mut spec = gen::BigLogSpec::new(200_000, encoding);
        spec.tool_output = 4_000;
        let log = gen::generate_big_log(home.path(), "src", Some("/w"), &spec).unwrap();
        let path = log.path.clone();
        let store = DiskStore::new(home.path());
        assert_fresh(&store, "src", &path, "first read");
        assert_fresh(&store, "src", &path, "unchanged");

        let (mut writer, _) = SessionWriter::open(&path).unwrap();
        for round in 0..20 {
            writer.append(vec![user(&format!("more {round}"))]).unwrap();
            assert_fresh(&store, "src", &path, &format!("{encoding:?} grown {round}"));
        }
        // A compaction replacing the whole surface (by seqs, with full provenance).
        let surface: Vec<u64> = read_conversation_surface_file(&path)
            .unwrap()
            .events
            .iter()
            .map(|e| e.seq)
            .collect();
        let replacement = compaction_replace(
            "src",
            writer.next_seq(),
            &surface,
            surface[0],
            *surface.last().unwrap(),
            &[],
        )
        .unwrap();
        let checkpoint = Message::new(
            "user",
            vec![ContentBlock::text("summary")],
            MessageSource::plugin("compact"),
            "cp".into(),
        );
        writer
            .append(vec![
                NewEvent::new(EventData::UserMessage(checkpoint)).with_replacement(replacement)
            ])
            .unwrap();
        assert_fresh(&store, "src", &path, "compacted");
        drop(writer);

        // A torn tail (a crash mid-append by someone else's writer), then its cut.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"{\"type\":\"user/mes").unwrap();
        // Written long ago: settled, so the next append may cut it.
        file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
            .unwrap();
        drop(file);
        assert_fresh(&store, "src", &path, "torn tail");
        let (mut writer, _) = SessionWriter::open(&path).unwrap();
        assert_fresh(&store, "src", &path, "torn tail kept by opening");
        writer.append(vec![user("after the cut")]).unwrap();
        assert_fresh(&store, "src", &path, "appended after the cut");
        drop(writer);

        // Replaced by another file under the same name (another inode).
        let other = tempfile::tempdir().unwrap();
        let mut writer = SessionWriter::create(
            other.path(),
            SessionHeader::new("src", 1, Some("/w".into())),
            encoding,
        )
        .unwrap();
        writer.append(vec![user("a different log")]).unwrap();
        std::fs::copy(writer.path(), path.with_extension("tmp")).unwrap();
        std::fs::rename(path.with_extension("tmp"), &path).unwrap();
        assert_fresh(&store, "src", &path, "replaced");
    }
}
