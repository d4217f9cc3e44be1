//! The store's listing cache (`<home>/index/listing`, issue 25): a second process lists from it
//! without reading headers, and a listing served from it is always the walk's listing — after
//! sessions were added, removed or replaced behind it, and when the file is another home's, torn
//! or damaged.

use dsh_session_references::session::{DiskStore, Encoding, SessionHeader, SessionWriter};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Sets the mtime of every directory under `<home>/sessions` (three levels) written in the last
/// ten minutes an hour back, and each time a little differently (`salt`): a directory changed
/// since the last aging never gets its old stamp back, and one left alone keeps it. The store
/// trusts no directory stamp younger than two seconds.
fn age(home: &Path, salt: u64) {
    let now = SystemTime::now();
    let old = now - Duration::from_secs(3600) + Duration::from_nanos(salt * 1_000);
    let set = |path: &Path| {
        let recent = fs::metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).unwrap_or_default() < Duration::from_secs(600));
        if recent {
            fs::File::open(path).unwrap().set_modified(old).unwrap();
        }
    };
    let sessions = home.join("sessions");
    for project in fs::read_dir(&sessions).unwrap().flatten() {
        for session in fs::read_dir(project.path()).unwrap().flatten() {
            set(&session.path());
        }
        set(&project.path());
    }
    set(&sessions);
}

fn write_session(home: &Path, id: &str, created: i64, cwd: &str) -> PathBuf {
    let header = SessionHeader::new(id, created, Some(cwd.to_string()));
    let writer = SessionWriter::create(home, header, Encoding::Plain).unwrap();
    writer.path().to_path_buf()
}

/// 30 sessions over three projects.
fn home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..30 {
        let cwd = format!("/work/project-{}", i % 3);
        write_session(dir.path(), &format!("session-{i:02}"), 1_000 + i, &cwd);
    }
    age(dir.path(), 1);
    dir
}

/// (id, createdAt, cwd) in listing order.
fn listing(store: &DiskStore) -> Vec<(String, i64, Option<String>)> {
    store
        .list_sessions_blocking()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s.id().to_string(),
                s.created_at(),
                s.cwd().map(str::to_string),
            )
        })
        .collect()
}

/// What a store without a cache (the walk) lists.
fn walked(home: &Path) -> Vec<(String, i64, Option<String>)> {
    listing(&DiskStore::new(home))
}

fn cache_file(home: &Path) -> PathBuf {
    home.join("index").join("listing")
}

#[test]
fn a_second_store_lists_from_the_cache_without_reading_headers() {
    let home = home();
    let first = DiskStore::with_listing_cache(home.path());
    let expected = listing(&first);
    assert_eq!(expected.len(), 30);
    assert_eq!(first.stats().header_reads, 30);
    assert!(cache_file(home.path()).is_file(), "the cache was written");

    let second = DiskStore::with_listing_cache(home.path());
    assert_eq!(listing(&second), expected);
    let stats = second.stats();
    assert_eq!(stats.header_reads, 0, "{stats:?}");
    assert_eq!(stats.dir_reads, 0, "{stats:?}");
    // It reads the logs it lists, by id.
    let id = &expected[0].0;
    assert!(second.log_path(id).unwrap().is_file());
    // A plain store never writes one.
    let other = tempfile::tempdir().unwrap();
    write_session(other.path(), "x", 1, "/w");
    age(other.path(), 1);
    assert_eq!(walked(other.path()).len(), 1);
    assert!(!other.path().join("index").exists());
}

#[test]
fn sessions_added_removed_or_replaced_behind_the_cache_are_listed_as_the_walk_lists_them() {
    let home = home();
    listing(&DiskStore::with_listing_cache(home.path()));
    let sessions = home.path().join("sessions");

    // Added: a new session in an existing project and one in a new project.
    write_session(home.path(), "added-a", 5_000, "/work/project-0");
    write_session(home.path(), "added-b", 5_001, "/work/elsewhere");
    // Removed: a whole session directory.
    let removed = DiskStore::new(home.path()).log_path("session-04").unwrap();
    fs::remove_dir_all(removed.parent().unwrap()).unwrap();
    // Replaced: another log renamed over a session's log (its project directory is unchanged),
    // with another id, time and cwd in its header.
    let replaced = DiskStore::new(home.path()).log_path("session-05").unwrap();
    let other = tempfile::tempdir().unwrap();
    let stranger = write_session(other.path(), "replacement", 9_999, "/moved/away");
    fs::copy(&stranger, replaced.with_extension("new")).unwrap();
    fs::rename(replaced.with_extension("new"), &replaced).unwrap();
    // A log removed from a session directory that stays.
    let emptied = DiskStore::new(home.path()).log_path("session-07").unwrap();
    fs::remove_file(&emptied).unwrap();
    age(home.path(), 2);

    let store = DiskStore::with_listing_cache(home.path());
    let listed = listing(&store);
    assert_eq!(listed, walked(home.path()));
    let ids: Vec<&str> = listed.iter().map(|s| s.0.as_str()).collect();
    assert!(
        ids.contains(&"added-a") && ids.contains(&"added-b"),
        "{ids:?}"
    );
    assert!(ids.contains(&"replacement"), "{ids:?}");
    for gone in ["session-04", "session-05", "session-07"] {
        assert!(!ids.contains(&gone), "{gone} is still listed: {ids:?}");
    }
    // Only what changed was read: two project directories' headers (they changed), the
    // replaced log and the new project's, not all thirty.
    let stats = store.stats();
    assert!(stats.header_reads < 25, "{stats:?}");

    // And the refreshed cache serves the next store the same listing, reading nothing.
    let next = DiskStore::with_listing_cache(home.path());
    assert_eq!(listing(&next), listed);
    assert_eq!(next.stats().header_reads, 0);
    drop(sessions);
}

#[test]
fn a_recent_change_is_never_trusted_to_the_cache() {
    let home = home();
    listing(&DiskStore::with_listing_cache(home.path()));
    // Replaced and not aged: the session directory's stamp is now, within the racy window.
    let replaced = DiskStore::new(home.path()).log_path("session-11").unwrap();
    let other = tempfile::tempdir().unwrap();
    let stranger = write_session(other.path(), "fresh", 7, "/fresh");
    fs::copy(&stranger, replaced.with_extension("new")).unwrap();
    fs::rename(replaced.with_extension("new"), &replaced).unwrap();
    let store = DiskStore::with_listing_cache(home.path());
    assert_eq!(listing(&store), walked(home.path()));
    assert!(listing(&store).iter().any(|s| s.0 == "fresh"));
}

#[test]
fn a_foreign_torn_or_damaged_cache_is_ignored() {
    let home = home();
    let expected = listing(&DiskStore::with_listing_cache(home.path()));
    let cache = fs::read(cache_file(home.path())).unwrap();

    // Another home with the first home's cache file: its own sessions are listed.
    let foreign = tempfile::tempdir().unwrap();
    for i in 0..5 {
        write_session(foreign.path(), &format!("foreign-{i}"), i, "/elsewhere");
    }
    age(foreign.path(), 1);
    fs::create_dir_all(foreign.path().join("index")).unwrap();
    fs::write(cache_file(foreign.path()), &cache).unwrap();
    let store = DiskStore::with_listing_cache(foreign.path());
    assert_eq!(listing(&store), walked(foreign.path()));
    assert_eq!(store.stats().header_reads, 5);

    // Torn, damaged anywhere, or emptied: ignored, and the walk's listing answered.
    let mut damaged = Vec::new();
    for cut in [0, 1, cache.len() / 3, cache.len() - 1] {
        damaged.push(cache[..cut].to_vec());
    }
    for at in [0, 30, cache.len() / 2, cache.len() - 3] {
        let mut bytes = cache.clone();
        bytes[at] ^= 0x20;
        damaged.push(bytes);
    }
    for bytes in damaged {
        fs::write(cache_file(home.path()), &bytes).unwrap();
        let store = DiskStore::with_listing_cache(home.path());
        assert_eq!(listing(&store), expected);
        assert_eq!(store.stats().header_reads, 30);
    }
}

#[cfg(unix)]
#[test]
fn the_cache_is_never_written_through_a_symlinked_index() {
    let home = home();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), home.path().join("index")).unwrap();
    let store = DiskStore::with_listing_cache(home.path());
    assert_eq!(listing(&store).len(), 30);
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
}
