//! A home shared with hostile or careless programs: files replaced by FIFOs and device links,
//! locks held by other processes, unreadable directories, logs rewritten in place, headers that
//! inflate without end. What must hold: every command ends (each run here has a deadline and is
//! killed past it), reads stay bounded, and a broken thing is skipped or named, never lied about.

use crate::support::user;
use dsh_session_references::session::{
    Encoding, EventData, NewEvent, SessionHeader, SessionWriter,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A command's outcome, or a failed test if it ran past `deadline`.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn dsh_refs_as(home: &Path, args: &[&str], deadline: Duration, uid: Option<u32>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh-refs"));
    command
        .arg("--home")
        .arg(home)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        command.uid(uid).gid(uid);
    }
    let mut child = command.spawn().expect("spawn dsh-refs");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dsh-refs {args:?} still running after {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn dsh_refs(home: &Path, args: &[&str]) -> Run {
    dsh_refs_as(home, args, Duration::from_secs(20), None)
}

fn ok(run: Run, what: &str) -> String {
    assert_eq!(
        run.code, 0,
        "{what}: stderr: {}\nstdout: {}",
        run.stderr, run.stdout
    );
    run.stdout
}

/// Creates session `id` in `cwd` holding one user message; returns its log path.
fn session(home: &Path, id: &str, cwd: &str, encoding: Encoding, text: &str) -> PathBuf {
    let header = SessionHeader::new(id, 1_700_000_000_000, Some(cwd.to_string()));
    let mut writer = SessionWriter::create(home, header, encoding).unwrap();
    writer.append(vec![user(text)]).unwrap();
    writer.path().to_path_buf()
}

/// The three reading commands, each of which must answer and mention the source session.
fn assert_commands_answer(home: &Path, source: &str, what: &str) {
    let listed = ok(dsh_refs(home, &["sessions"]), what);
    assert!(listed.contains(source), "{what}: sessions: {listed}");
    let candidates = ok(
        dsh_refs(home, &["candidates", "--as", "agent", "--cwd", "/w"]),
        what,
    );
    assert!(
        candidates.contains(source),
        "{what}: candidates: {candidates}"
    );
    let prepared = ok(prepare(home, source), what);
    assert!(
        prepared.contains("hello from the source"),
        "{what}: prepare: {prepared}"
    );
}

/// `prepare` of a message that mentions `source`.
fn prepare(home: &Path, source: &str) -> Run {
    let mention = ok(dsh_refs(home, &["mention", "format", source]), "mention");
    let text = format!("{} what happened?", mention.trim_end());
    dsh_refs(home, &["prepare", "--as", "agent", "--cwd", "/w", &text])
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

fn pending_marker(log: &Path) -> PathBuf {
    log.with_file_name(".session.jsonl.pending")
}

#[test]
fn a_fifo_pending_marker_neither_hangs_nor_counts() {
    let home = tempfile::tempdir().unwrap();
    session(home.path(), "agent", "/w", Encoding::Plain, "agent");
    let log = session(
        home.path(),
        "src",
        "/w",
        Encoding::Plain,
        "hello from the source",
    );
    mkfifo(&pending_marker(&log));
    assert_commands_answer(home.path(), "src", "FIFO marker");
}

#[test]
fn a_pending_marker_linked_to_dev_zero_is_not_read() {
    let home = tempfile::tempdir().unwrap();
    session(home.path(), "agent", "/w", Encoding::Plain, "agent");
    let log = session(
        home.path(),
        "src",
        "/w",
        Encoding::Plain,
        "hello from the source",
    );
    std::os::unix::fs::symlink("/dev/zero", pending_marker(&log)).unwrap();
    assert_commands_answer(home.path(), "src", "/dev/zero marker");
}

#[test]
fn a_symlinked_marker_to_a_valid_offset_is_not_followed() {
    // A marker is only ever written as a regular file: a symlink, even to a well-formed offset
    // that would cut the log to its header, is not a marker.
    let home = tempfile::tempdir().unwrap();
    session(home.path(), "agent", "/w", Encoding::Plain, "agent");
    let log = session(
        home.path(),
        "src",
        "/w",
        Encoding::Plain,
        "hello from the source",
    );
    let header_len = std::fs::read(&log)
        .unwrap()
        .iter()
        .position(|b| *b == b'\n')
        .unwrap()
        + 1;
    let elsewhere = home.path().join("offset");
    std::fs::write(&elsewhere, format!("{header_len}\n")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, pending_marker(&log)).unwrap();
    assert_commands_answer(home.path(), "src", "symlinked marker");
    // The same bytes as a regular file do count: the batch reads as pending.
    std::fs::remove_file(pending_marker(&log)).unwrap();
    std::fs::copy(&elsewhere, pending_marker(&log)).unwrap();
    let prepared = prepare(home.path(), "src");
    assert!(
        !prepared.stdout.contains("hello from the source"),
        "{}",
        prepared.stdout
    );
}

#[test]
fn a_log_locked_by_another_process_is_listed_and_reported_busy() {
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        session(home.path(), "agent", "/w", encoding, "agent");
        session(
            home.path(),
            "other",
            "/w",
            encoding,
            "hello from the source",
        );
        let log = session(home.path(), "src", "/w", encoding, "locked away");
        // Another open file description: its lock conflicts with every reader's, as another
        // process's would.
        let holder = std::fs::File::open(&log).unwrap();
        holder.lock().unwrap();
        let deadline = Duration::from_secs(10);
        let listed = ok(
            dsh_refs_as(home.path(), &["sessions"], deadline, None),
            "sessions",
        );
        assert!(
            listed.contains("src") && listed.contains("other"),
            "{listed}"
        );
        let candidates = dsh_refs_as(
            home.path(),
            &["candidates", "--as", "agent", "--cwd", "/w"],
            deadline,
            None,
        );
        let candidates = ok(candidates, "candidates");
        assert!(candidates.contains("\"src\""), "{candidates}");
        // The locked session: a clear error naming it, after a bounded wait.
        let started = Instant::now();
        let prepared = prepare(home.path(), "src");
        let all = format!("{}{}", prepared.stdout, prepared.stderr);
        assert!(
            all.contains("busy") && all.contains(&*log.to_string_lossy()),
            "{all}"
        );
        assert!(!all.contains("locked away"), "{all}");
        assert!(started.elapsed() < deadline, "{:?}", started.elapsed());
        // Another session is unaffected.
        let prepared = ok(prepare(home.path(), "other"), "prepare other");
        assert!(prepared.contains("hello from the source"), "{prepared}");
        holder.unlock().unwrap();
        let prepared = ok(prepare(home.path(), "src"), "prepare after unlock");
        assert!(prepared.contains("locked away"), "{prepared}");
    }
}

/// Opens a home to every user (tempdirs are private), so a run as `nobody` can read it.
#[cfg(unix)]
fn open_to_all(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if dir.is_dir() { 0o755 } else { 0o644 };
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap() {
            open_to_all(&entry.unwrap().path());
        }
    }
}

#[cfg(unix)]
#[test]
fn an_unreadable_project_directory_is_skipped() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    session(home.path(), "agent", "/w", Encoding::Plain, "agent");
    session(
        home.path(),
        "src",
        "/w",
        Encoding::Plain,
        "hello from the source",
    );
    let hidden = session(home.path(), "hidden", "/private", Encoding::Plain, "secret");
    open_to_all(home.path());
    let project = hidden.parent().unwrap().parent().unwrap().to_path_buf();
    std::fs::set_permissions(&project, std::fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads a mode-000 directory anyway: then the commands run as `nobody`, for whom the
    // directory is as unreadable as it is for its owner's colleagues.
    let uid = std::fs::read_dir(&project).is_ok().then_some(65534);
    let deadline = Duration::from_secs(20);
    let run = |args: &[&str]| ok(dsh_refs_as(home.path(), args, deadline, uid), "run");
    let listed = run(&["sessions"]);
    assert!(
        listed.contains("src") && !listed.contains("hidden"),
        "{listed}"
    );
    let candidates = run(&["candidates", "--as", "agent", "--cwd", "/w"]);
    assert!(candidates.contains("\"src\""), "{candidates}");
    let mention = run(&["mention", "format", "src"]);
    let text = format!("{} what happened?", mention.trim_end());
    let prepared = run(&["prepare", "--as", "agent", "--cwd", "/w", &text]);
    assert!(prepared.contains("hello from the source"), "{prepared}");
    std::fs::set_permissions(&project, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Sets a file's modification time back, out of the store's window of untrusted stamps.
fn age(path: &Path) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(60);
    file.set_modified(old).unwrap();
}

#[test]
fn unreadable_headers_are_read_once_per_change_and_bounded() {
    use dsh_session_references::session::DiskStore;
    let home = tempfile::tempdir().unwrap();
    session(home.path(), "good", "/w", Encoding::Plain, "fine");
    // A sparse log without a newline: a header that never ends.
    let dir = home.path().join("sessions/--w--/sparse");
    std::fs::create_dir_all(&dir).unwrap();
    let sparse = dir.join("session.jsonl");
    std::fs::write(&sparse, b"{\"type\":\"session\",\"id\":\"sparse").unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&sparse)
        .unwrap();
    file.set_len(64 << 20).unwrap();
    drop(file);
    // A zstd bomb: a small first frame that inflates to 64 MiB of spaces.
    let dir = home.path().join("sessions/--w--/bomb");
    std::fs::create_dir_all(&dir).unwrap();
    let bomb = dir.join("session.jsonl.zstd");
    std::fs::write(
        &bomb,
        zstd::bulk::compress(&vec![b' '; 64 << 20], 3).unwrap(),
    )
    .unwrap();
    age(&sparse);
    age(&bomb);

    let store = DiskStore::new(home.path());
    let listed = store.list_sessions_blocking().unwrap();
    assert_eq!(listed.len(), 1, "only the good session is listed");
    let first = store.stats().header_reads;
    assert_eq!(first, 3);
    for _ in 0..5 {
        store.list_sessions_blocking().unwrap();
    }
    assert_eq!(
        store.stats().header_reads,
        first,
        "unchanged bad logs are not read again"
    );

    // A bad log that changes is read again.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&sparse)
        .unwrap();
    std::io::Write::write_all(&mut file, b"x").unwrap();
    drop(file);
    age(&sparse);
    store.list_sessions_blocking().unwrap();
    assert_eq!(store.stats().header_reads, first + 1);
    store.list_sessions_blocking().unwrap();
    assert_eq!(store.stats().header_reads, first + 1);

    // And one replaced by a good log is listed.
    std::fs::remove_file(&bomb).unwrap();
    let header = SessionHeader::new("was-a-bomb", 1, Some("/w".into()));
    let line = format!("{}\n", serde_json::to_string(&header).unwrap());
    std::fs::write(
        bomb.with_file_name("session.jsonl.zstd"),
        zstd::bulk::compress(line.as_bytes(), 3).unwrap(),
    )
    .unwrap();
    let listed = store.list_sessions_blocking().unwrap();
    assert!(listed.iter().any(|s| s.id() == "was-a-bomb"));
}

fn title(text: &str) -> NewEvent {
    NewEvent::new(EventData::SessionTitle {
        title: text.into(),
        message_seqs: vec![],
        source: serde_json::json!({"kind": "user"}),
        extra: Default::default(),
    })
}

/// Overwrites `path` in place (same inode) with `bytes`.
fn rewrite_in_place(path: &Path, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
}

#[test]
fn a_log_rewritten_in_place_is_never_served_from_stale_caches() {
    use dsh_session_references::session::store::read_conversation_surface_file;
    use dsh_session_references::session::DiskStore;
    for encoding in [Encoding::Plain, Encoding::Zstd] {
        let home = tempfile::tempdir().unwrap();
        let path = session(home.path(), "src", "/w", encoding, "aaaa");
        let mut writer = SessionWriter::open(&path).unwrap().0;
        writer.append(vec![title("old title")]).unwrap();
        drop(writer);
        let store = DiskStore::new(home.path());
        let before = store.read_conversation_surface_blocking("src").unwrap();
        assert_eq!(
            store.read_title_blocking("src").unwrap().as_deref(),
            Some("old title")
        );

        // Another program rewrites the log in place: the same lines with other words (same
        // lengths, so the old prefix ends on a line boundary of the new content), then more.
        let other = tempfile::tempdir().unwrap();
        let other_path = session(other.path(), "src", "/w", encoding, "bbbb");
        let mut writer = SessionWriter::open(&other_path).unwrap().0;
        writer.append(vec![title("new title")]).unwrap();
        writer.append(vec![user("cccc")]).unwrap();
        drop(writer);
        let new_bytes = std::fs::read(&other_path).unwrap();
        assert!(new_bytes.len() as u64 > std::fs::metadata(&path).unwrap().len());
        rewrite_in_place(&path, &new_bytes);

        let after = store.read_conversation_surface_blocking("src").unwrap();
        let fresh = read_conversation_surface_file(&path).unwrap();
        assert_ne!(before, fresh, "{encoding:?}: the content did change");
        assert_eq!(
            after, fresh,
            "{encoding:?}: the cache answered a mix of old and new"
        );
        assert_eq!(
            store.read_title_blocking("src").unwrap().as_deref(),
            Some("new title"),
            "{encoding:?}"
        );
    }
}

#[test]
fn the_conversation_cache_is_bounded_by_bytes() {
    use dsh_session_references::session::DiskStore;
    const KIB: usize = 1 << 10;
    let home = tempfile::tempdir().unwrap();
    // Sessions of `n` user messages of 8 KiB text (about 16 KiB of JSON each: the text is
    // also in the message's display content).
    let big = |id: &str, n: usize| {
        let header = SessionHeader::new(id, 1, Some("/w".into()));
        let mut writer = SessionWriter::create(home.path(), header, Encoding::Plain).unwrap();
        let batch = (0..n)
            .map(|i| user(&format!("{i:04}{}", "t".repeat(8 * KIB - 4))))
            .collect();
        writer.append(batch).unwrap();
    };
    big("huge", 40);
    for id in ["b", "c", "d"] {
        big(id, 24);
    }
    let store = DiskStore::new(home.path());
    // The defaults (64 MiB in all, 32 MiB an entry), scaled down.
    store.set_conversation_cache_limits(1024 * KIB, 512 * KIB);
    // Larger than an entry may be: answered, not kept.
    let huge = store.read_conversation_surface_blocking("huge").unwrap();
    assert_eq!(huge.events.len(), 40);
    assert_eq!(store.conversation_cache_size(), (0, 0));
    store.read_conversation_surface_blocking("b").unwrap();
    store.read_conversation_surface_blocking("c").unwrap();
    let (entries, bytes) = store.conversation_cache_size();
    assert_eq!(entries, 2, "{bytes}");
    assert!(bytes > 768 * KIB && bytes <= 1024 * KIB, "{bytes}");
    // A third one pushes the least recently used out.
    store.read_conversation_surface_blocking("d").unwrap();
    let (entries, bytes) = store.conversation_cache_size();
    assert_eq!(entries, 2);
    assert!(bytes <= 1024 * KIB, "{bytes}");
}
