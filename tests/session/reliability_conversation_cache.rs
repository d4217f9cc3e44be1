//! The store's conversation cache answers exactly like a fresh read, while a log grows, gets a
//! torn tail, has it cut, is compacted, and is replaced by another file; the indexer's reads
//! keep only folds that were cached already or whose log may still grow.

use crate::support::gen;
use crate::support::user;

use dsh_session_references::session::store::read_conversation_surface_file;
use dsh_session_references::session::surface::compaction_replace;
use dsh_session_references::session::{
    ContentBlock, DiskStore, Encoding, EventData, Message, MessageSource, NewEvent, SessionHeader,
    SessionWriter,
};
use std::io::Write;

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

/// The indexer's reads (`read_for_index_blocking`) leave the cache as they found it for a log
/// that has settled, cache a log that may still grow, keep what the service cached, and always
/// answer like a fresh read.
#[test]
fn index_reads_cache_only_recent_or_already_cached_logs() {
    use dsh_session_references::session::SessionQuery;
    use std::time::{Duration, SystemTime};

    let home = tempfile::tempdir().unwrap();
    let ids = ["old", "new", "served"];
    let mut writers = Vec::new();
    for id in ids {
        let mut writer = SessionWriter::create(
            home.path(),
            SessionHeader::new(id, 1, Some("/w".into())),
            Encoding::Plain,
        )
        .unwrap();
        writer
            .append(vec![user(&format!("hello from {id}"))])
            .unwrap();
        writers.push(writer);
    }
    let paths: Vec<std::path::PathBuf> = writers.iter().map(|w| w.path().to_path_buf()).collect();
    let path = |i: usize| paths[i].clone();
    let age = |p: &std::path::Path, secs: u64| {
        let file = std::fs::OpenOptions::new().append(true).open(p).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(secs))
            .unwrap();
    };
    // Written an hour ago: settled. Written a minute ago: may still grow.
    age(&path(0), 3_600);
    age(&path(1), 60);
    age(&path(2), 3_600);

    let store = DiskStore::new(home.path());
    // The indexer reads session `i`: the answer is a fresh read's, and the cache then holds
    // `entries` folds.
    let index_read = |i: usize, entries: usize, what: &str| {
        let (snapshot, title) = store.read_for_index_blocking(ids[i]).unwrap().unwrap();
        assert_eq!(title, None);
        let fresh = read_conversation_surface_file(&path(i)).unwrap();
        assert_eq!(snapshot, fresh, "{what}: answer");
        assert_eq!(store.conversation_cache_size().0, entries, "{what}: cache");
    };

    index_read(0, 0, "a settled log read once by the indexer is not kept");
    index_read(1, 1, "a recent log is kept");
    writers[1].append(vec![user("grown")]).unwrap();
    index_read(1, 1, "its growth is read from where the indexer stopped");
    assert_fresh(&store, "served", &path(2), "served");
    assert_eq!(store.conversation_cache_size().0, 2);
    index_read(2, 2, "a settled log the service read stays cached");
    writers[0].append(vec![user("back again")]).unwrap();
    index_read(0, 3, "a settled log that grows is recent again and kept");
}
