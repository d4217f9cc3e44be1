//! Trust, round two (issue 20 §4–§5) through the real binary: our own files in a home (the
//! config, the demo home's path, the discovery index) replaced by something hostile never block
//! start-up, never leave debris and never stop a search. Every run has a deadline and is killed
//! past it, so a hang fails the test instead of holding the suite.

use dsh_session_references::session::{
    ContentBlock, Encoding, EventData, Message, MessageSource, SessionHeader, SessionWriter,
};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs `dsh-refs` with `args` (after `--home HOME` when given) and extra environment.
fn run(home: Option<&Path>, args: &[&str], env: &[(&str, &Path)], deadline: Duration) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh-refs"));
    if let Some(home) = home {
        // The user's home is the dsh home too, so no other agent's home on this machine (a
        // `~/.claude` would be served by default) changes which index the run uses.
        command.arg("--home").arg(home).env("HOME", home);
    }
    command
        .args(args)
        .env_remove("DSH_PROVIDER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("spawn dsh-refs");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dsh-refs {args:?} still running after {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = started.elapsed();
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        took,
    }
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// A session `id` whose title is `title`, holding one user message `text`.
pub fn titled_session(home: &Path, id: &str, title: &str, text: &str) {
    let header = SessionHeader::new(id, 1_700_000_000_000, Some("/w".to_string()));
    let mut writer = SessionWriter::create(home, header, Encoding::Plain).unwrap();
    writer
        .append(vec![
            EventData::UserMessage(Message::new(
                "user",
                vec![ContentBlock::text(text)],
                MessageSource::user(),
                format!("u-{id}"),
            ))
            .into(),
            EventData::SessionTitle {
                title: title.to_string(),
                message_seqs: vec![],
                source: serde_json::json!({"kind": "generated"}),
                extra: serde_json::Map::new(),
            }
            .into(),
        ])
        .unwrap();
}

#[test]
fn a_fifo_config_toml_is_named_at_start_up_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    mkfifo(&home.join("config.toml"));
    // The TUI reads the config before it takes the terminal; `exec` reads it too.
    for args in [&[][..], &["exec", "hello"][..]] {
        let out = run(Some(&home), args, &[], Duration::from_secs(20));
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("config.toml") && out.stderr.contains("a FIFO, not a regular file"),
            "{args:?}: {}",
            out.stderr
        );
    }
}

/// `dsh-refs --demo sessions` with `demo-home` under `cache` as it is now.
fn demo_sessions(cache: &Path) -> Run {
    run(
        None,
        &["--demo", "sessions"],
        &[("XDG_CACHE_HOME", cache)],
        Duration::from_secs(20),
    )
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("demo-home.installing-"))
        .collect()
}

#[test]
fn a_dangling_or_looping_demo_home_link_is_named_and_leaves_no_copy() {
    let cache = tempfile::tempdir().unwrap();
    let parent = cache.path().join("dsh-refs");
    std::fs::create_dir(&parent).unwrap();
    let home = parent.join("demo-home");
    for (target, says) in [
        (parent.join("gone"), "is dangling"),
        (home.clone(), "loops"),
        (parent.join("a-file"), "not a directory"),
    ] {
        std::fs::write(parent.join("a-file"), b"x").unwrap();
        let _ = std::fs::remove_file(&home);
        std::os::unix::fs::symlink(&target, &home).unwrap();
        let out = demo_sessions(cache.path());
        assert_eq!(out.code, 1, "{says}: {}", out.stderr);
        assert!(
            out.stderr.contains("demo home")
                && out.stderr.contains(&home.display().to_string())
                && out.stderr.contains(says),
            "{says}: {}",
            out.stderr
        );
        assert_eq!(leftovers(&parent), Vec::<String>::new(), "{says}");
        assert!(std::fs::symlink_metadata(&home).unwrap().is_symlink());
        assert_eq!(std::fs::read(parent.join("a-file")).unwrap(), b"x");
    }
    // A copy left by an install that was killed is removed by the next, which succeeds.
    std::fs::remove_file(&home).unwrap();
    let abandoned = parent.join("demo-home.installing-4194999");
    std::fs::create_dir(&abandoned).unwrap();
    std::fs::write(abandoned.join("half"), b"copied").unwrap();
    let out = demo_sessions(cache.path());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(home.join(".dsh-refs-demo").is_file());
    assert_eq!(leftovers(&parent), Vec::<String>::new());
    // A link to a working demo home is followed.
    let moved = parent.join("elsewhere");
    std::fs::rename(&home, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &home).unwrap();
    let out = demo_sessions(cache.path());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(std::fs::symlink_metadata(&home).unwrap().is_symlink());
    assert_eq!(leftovers(&parent), Vec::<String>::new());
}

/// The database of `home`'s discovery index.
fn db_of(home: &Path) -> std::path::PathBuf {
    dsh_session_references::discovery::db_path(home)
}

fn two_titled(home: &Path) {
    titled_session(
        home,
        "s-fix",
        "Fix the flaky tokenizer",
        "the lexer drops a byte",
    );
    titled_session(
        home,
        "s-dark",
        "Dark mode colours",
        "make the palette darker",
    );
}

fn search_json(home: &Path, words: &str) -> Run {
    run(
        Some(home),
        &["search", "--json", words],
        &[],
        Duration::from_secs(60),
    )
}

fn hit_ids(out: &Run) -> Vec<String> {
    let answer: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {} / {}", out.stdout, out.stderr));
    answer["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["sessionId"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn search_answers_past_a_symlink_or_a_directory_at_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    two_titled(&home);
    let db = db_of(&home);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let outside = dir.path().join("outside.sqlite3");
    std::fs::write(&outside, b"").unwrap();
    std::os::unix::fs::symlink(&outside, &db).unwrap();
    let out = search_json(&home, "lexer");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(hit_ids(&out), ["s-fix"]);
    assert_eq!(
        std::fs::read(&outside).unwrap(),
        b"",
        "written through the link"
    );

    let home = dir.path().join("home2");
    two_titled(&home);
    let db = db_of(&home);
    std::fs::create_dir_all(&db).unwrap();
    let out = search_json(&home, "palette");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(hit_ids(&out), ["s-dark"]);
    assert!(db.is_file());
}

/// Words that FTS5 cannot compress away: `n` distinct made-up words.
fn many_words(seed: u64, n: usize) -> String {
    let mut x = seed | 1;
    let mut out = String::new();
    for _ in 0..n {
        let mut word = String::new();
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            word.push((b'a' + (x % 26) as u8) as char);
        }
        out.push_str(&word);
        out.push(' ');
    }
    out
}

/// A real full disk: the index directory is a 1 MiB tmpfs mounted in a user and mount
/// namespace of the search's own (`unshare`, util-linux), and the home holds about 2 MB of
/// distinct words to index.
#[test]
fn search_answers_on_a_full_disk_and_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    two_titled(&home);
    for n in 0..4 {
        titled_session(
            &home,
            &format!("s-bulk-{n}"),
            &format!("Bulk notes {n}"),
            &many_words(n + 7, 60_000),
        );
    }
    let index_dir = db_of(&home).parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&index_dir).unwrap();
    let script = "mount -t tmpfs -o size=1M none \"$1\" && shift && exec \"$@\"";
    let started = Instant::now();
    let out = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(&index_dir)
        .arg(env!("CARGO_BIN_EXE_dsh-refs"))
        .arg("--home")
        .arg(&home)
        .args(["search", "--json", "tokenizer"])
        .stdin(Stdio::null())
        .output()
        .expect("this test needs `unshare` (util-linux) and user namespaces");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: started.elapsed(),
    };
    eprintln!("search on a full disk answered in {:?}", run.took);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(hit_ids(&run), ["s-fix"]);
    assert!(
        run.stderr.contains("database or disk is full"),
        "the disk really filled: {}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches("searching the titles").count(),
        1,
        "said once: {}",
        run.stderr
    );
}

#[test]
fn search_answers_while_another_process_holds_the_index_exclusively() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    two_titled(&home);
    let first = search_json(&home, "lexer");
    assert_eq!(hit_ids(&first), ["s-fix"], "{}", first.stderr);
    let db = db_of(&home);
    // Held as the sqlite3 shell would hold it after `PRAGMA locking_mode=EXCLUSIVE; BEGIN
    // EXCLUSIVE;` and a write: no other connection may even read.
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder
        .execute_batch(
            "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; UPDATE sessions SET title = title",
        )
        .unwrap();
    let inode = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&db).unwrap().ino()
    };
    let before = inode();
    titled_session(
        &home,
        "s-new",
        "Brand new notes",
        "written while it is held",
    );
    let out = search_json(&home, "brand new");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(hit_ids(&out), ["s-new"], "{}", out.stderr);
    assert!(out.stderr.contains("is busy"), "{}", out.stderr);
    eprintln!("search with a held index answered in {:?}", out.took);
    assert!(out.took < Duration::from_secs(15), "{:?}", out.took);
    assert_eq!(inode(), before, "never deleted under its holder");
    holder.execute_batch("COMMIT").unwrap();
    drop(holder);
    let out = search_json(&home, "brand new");
    assert_eq!(hit_ids(&out), ["s-new"]);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}

/// The demo home's copy fails half-way on a real full disk (the cache directory is a 256 KiB
/// tmpfs in a user and mount namespace; the demo home is ~560 KiB): a clear error, and the
/// half-written `demo-home.installing-<pid>` is gone afterwards.
#[test]
fn a_demo_install_that_fails_half_way_leaves_no_copy() {
    let cache = tempfile::tempdir().unwrap();
    let script = "mount -t tmpfs -o size=256k none \"$1\" || exit 99; \
                  XDG_CACHE_HOME=\"$1\" \"$2\" --demo sessions; echo EXIT=$?; \
                  ls -a \"$1/dsh-refs\"";
    let out = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(cache.path())
        .arg(env!("CARGO_BIN_EXE_dsh-refs"))
        .stdin(Stdio::null())
        .output()
        .expect("this test needs `unshare` (util-linux) and user namespaces");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("EXIT=1"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("could not install the demo home")
            && stderr.contains("demo-home.installing-")
            && stderr.contains("No space left"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("demo-home.installing-"),
        "a half copy was left: {stdout}"
    );
}
