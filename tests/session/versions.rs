//! A log whose header has a format version other than 0 (SPEC §1.2): left out of the listing,
//! and reading it by id (surface, conversation, title, the log path a resume opens) is the
//! unsupported-version error naming the file, never "session not found".

use dsh_session_references::session::{DiskStore, SessionError, SessionQuery};
use std::fs;
use std::path::Path;

fn place(home: &Path, project: &str, id: &str, header: &str) -> std::path::PathBuf {
    let dir = home.join("sessions").join(project).join(id);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("session.jsonl");
    let title = "{\"type\":\"session/title\",\"seq\":0,\"time\":1,\"data\":{\"title\":\"t\",\
                 \"messageSeqs\":[],\"source\":{\"kind\":\"fallback\"}}}";
    fs::write(&path, format!("{header}\n{title}\n")).unwrap();
    path
}

#[tokio::test]
async fn another_version_is_unsupported_by_id_and_not_listed() {
    let home = tempfile::tempdir().unwrap();
    place(
        home.path(),
        "--w--",
        "old",
        r#"{"type":"session","id":"old","createdAt":1,"cwd":"/w"}"#,
    );
    let future = place(
        home.path(),
        "--w--",
        "future",
        r#"{"type":"session","version":1,"id":"future","createdAt":2,"cwd":"/w"}"#,
    );
    let store = DiskStore::new(home.path());
    let listed = store.list_sessions().await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.id()).collect();
    assert_eq!(
        ids,
        ["old"],
        "a missing version is 0; version 1 is not listed"
    );
    assert_eq!(store.unsupported_logs().len(), 1);

    let unsupported = |err: SessionError| match err {
        SessionError::UnsupportedVersion { path, version } => {
            assert_eq!((path.as_path(), version), (future.as_path(), 1));
        }
        other => panic!("expected the unsupported-version error, got {other}"),
    };
    unsupported(store.read_surface("future").await.unwrap_err());
    unsupported(store.read_conversation_surface("future").await.unwrap_err());
    unsupported(store.read_title("future").await.unwrap_err());
    unsupported(store.log_path("future").unwrap_err());
    // A fresh store, asked by id before any listing, answers the same.
    unsupported(
        DiskStore::new(home.path())
            .read_surface_blocking("future")
            .unwrap_err(),
    );
    assert!(matches!(
        store.read_surface("nope").await.unwrap_err(),
        SessionError::NotFound { .. }
    ));
    assert_eq!(store.read_title("old").await.unwrap().as_deref(), Some("t"));
}

#[test]
fn a_readable_log_wins_over_an_unsupported_one_with_the_same_id() {
    let home = tempfile::tempdir().unwrap();
    place(
        home.path(),
        "--a--",
        "x",
        r#"{"type":"session","version":1,"id":"x","createdAt":1}"#,
    );
    place(
        home.path(),
        "--b--",
        "x",
        r#"{"type":"session","version":0,"id":"x","createdAt":1}"#,
    );
    let store = DiskStore::new(home.path());
    assert_eq!(store.list_sessions_blocking().unwrap().len(), 1);
    assert!(store.read_surface_blocking("x").is_ok());
}
