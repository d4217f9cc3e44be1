//! The session lifecycle through the real binary (SPEC §8): `sessions` prints whole ids,
//! `--resume` takes a unique prefix (an ambiguous one is an error listing the candidates),
//! `--continue` opens the last active session of the current directory, quitting prints how to
//! resume a written session, and `--demo` keeps one demo home per user, installed once.
//! Interactive runs are in tmux, as a person would use them.

use crate::support::tmux::Tmux;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_dsh-refs");

/// The lifecycle's panes: a shell that stays open, 120×30, so what `dsh-refs` prints on exit
/// can be read.
fn shell(name: &str, command: &str) -> Tmux {
    Tmux::start_in_shell(&format!("life-{name}"), command, 120, 30)
}

/// A plain-text dsh log for session `id` in `cwd`, created at `created`, titled `title`.
fn write_session(home: &Path, id: &str, cwd: &str, created: i64, title: &str) {
    let key: String = cwd
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = home.join(format!("sessions/--{key}--/{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let header = serde_json::json!({
        "type": "session", "version": 0, "id": id, "createdAt": created, "cwd": cwd,
        "delegationDepth": 0
    });
    let lines = [
        header.to_string(),
        format!(
            r#"{{"type":"user/message","seq":0,"time":{},"data":{{"content":[{{"type":"text","text":"hello"}}],"source":{{"kind":"user"}},"role":"user","id":"u-{id}"}},"surfaceOp":"append"}}"#,
            created + 1
        ),
        format!(
            r#"{{"type":"session/title","seq":1,"time":{},"data":{{"title":"{title}","messageSeqs":[0],"source":{{"kind":"fallback"}}}}}}"#,
            created + 2
        ),
    ];
    std::fs::write(dir.join("session.jsonl"), lines.join("\n") + "\n").unwrap();
}

fn run(home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn sessions_prints_whole_ids() {
    let home = tempfile::tempdir().unwrap();
    let long = format!("session-{}", "0123456789abcdef".repeat(4));
    write_session(home.path(), &long, "/w", 1_780_000_000_000, "Long id");
    let out = run(home.path(), &["sessions"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(&long), "{text}");
}

#[test]
fn resume_prefixes_must_be_unique() {
    let home = tempfile::tempdir().unwrap();
    write_session(home.path(), "abc123-first", "/w", 1_780_000_000_000, "One");
    write_session(home.path(), "abc456-second", "/w", 1_780_000_100_000, "Two");

    let out = run(home.path(), &["--resume", "abc"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("2 sessions start with \"abc\"")
            && err.contains("abc123-first")
            && err.contains("abc456-second"),
        "{err}"
    );
    // One candidate a line: the line breaks printed as line breaks, not `\x0A`.
    assert!(err.contains("\n  abc") && !err.contains("\\x0A"), "{err}");

    let out = run(home.path(), &["--resume", "zzz"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no session id is or starts with \"zzz\""),
        "{err}"
    );

    let out = run(home.path(), &["--resume", "claude:0000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("read-only"));

    // `--resume` with no id lists the recent sessions with whole ids.
    let out = run(home.path(), &["--resume"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("abc123-first  One") && text.contains("abc456-second  Two"),
        "{text}"
    );

    // --continue and --resume together are a usage error.
    let out = run(home.path(), &["--continue", "--resume", "abc"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_unique_prefix_resumes_and_quitting_prints_the_resume_command() {
    let home = tempfile::tempdir().unwrap();
    write_session(
        home.path(),
        "abc123-first",
        "/w",
        1_780_000_000_000,
        "Leap day parsing",
    );
    write_session(home.path(), "xyz-other", "/w", 1_780_000_100_000, "Other");
    let tmux = shell(
        "prefix",
        &format!("{BIN} --home {} --resume abc1", home.path().display()),
    );
    tmux.wait_for_screen("the resumed session in the status line", |s| {
        s.contains("Leap day parsing (abc123-first)")
    });
    let screen = tmux.quit_to_shell();
    assert!(
        screen.contains("dsh-refs --home ")
            && screen.contains("--resume abc123-first")
            && screen.contains("EXITED=0"),
        "{screen}"
    );
}

#[test]
fn continue_opens_the_last_active_session_of_this_directory() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap();
    let cwd = cwd.to_str().unwrap();
    write_session(
        home.path(),
        "old-here",
        cwd,
        1_780_000_000_000,
        "Older here",
    );
    write_session(
        home.path(),
        "new-here",
        cwd,
        1_780_000_100_000,
        "Newer here",
    );
    write_session(
        home.path(),
        "newest-elsewhere",
        "/else",
        1_780_000_200_000,
        "Elsewhere",
    );
    // The older session was used last: its log is the most recently written.
    std::thread::sleep(Duration::from_millis(20));
    let old_log = std::fs::read_dir(home.path().join("sessions"))
        .unwrap()
        .flat_map(|p| std::fs::read_dir(p.unwrap().path()).unwrap())
        .map(|d| d.unwrap().path())
        .find(|d| d.ends_with("old-here"))
        .unwrap()
        .join("session.jsonl");
    let bytes = std::fs::read(&old_log).unwrap();
    std::fs::write(&old_log, bytes).unwrap();

    let tmux = shell(
        "continue",
        &format!(
            "cd {cwd} && {BIN} --home {} --continue",
            home.path().display()
        ),
    );
    tmux.wait_for_screen("the continued session", |s| {
        s.contains("Older here (old-here)")
    });
    let screen = tmux.quit_to_shell();
    assert!(screen.contains("--resume old-here"), "{screen}");

    // Nothing to continue in a directory without sessions: a clear error.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(empty.path())
        .arg("--home")
        .arg(home.path())
        .arg("--continue")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("no session of"));
}

#[test]
fn a_new_session_prints_how_to_resume_it_only_once_written() {
    let home = tempfile::tempdir().unwrap();
    let tmux = shell(
        "untouched",
        &format!(
            "{BIN} --home {} --compression none --offline-delay-ms 0",
            home.path().display()
        ),
    );
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    let screen = tmux.quit_to_shell();
    assert!(!screen.contains("--resume"), "nothing written: {screen}");
    drop(tmux);

    let tmux = shell(
        "written",
        &format!(
            "{BIN} --home {} --compression none --offline-delay-ms 0",
            home.path().display()
        ),
    );
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.type_text("remember the capybara");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the answer", |s| {
        s.contains("○ idle") && s.contains("capybara")
    });
    let screen = tmux.quit_to_shell();
    let out = run(home.path(), &["sessions", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = listed[0]["sessionId"].as_str().unwrap().to_string();
    assert!(screen.contains(&format!("--resume {id}")), "{screen}");
}

#[test]
fn demo_installs_one_home_per_user_and_reuses_it() {
    let cache = tempfile::tempdir().unwrap();
    let demo_home = cache.path().join("dsh-refs/demo-home");
    let command = format!(
        "XDG_CACHE_HOME={} {BIN} --demo --offline-delay-ms 0",
        cache.path().display()
    );
    let tmux = shell("demo1", &command);
    tmux.wait_for_screen("the demo home in the status line", |s| {
        s.contains("type @ to reference")
            && s.contains(&format!("demo home {}", demo_home.display()))
    });
    let screen = tmux.quit_to_shell();
    assert!(
        screen.contains(&format!("demo home: {}", demo_home.display())),
        "{screen}"
    );
    assert!(demo_home.join("sessions").is_dir());
    drop(tmux);

    // A second run reuses the same home (what a demo wrote is still there).
    std::fs::write(demo_home.join("kept.txt"), "mine").unwrap();
    let tmux = shell("demo2", &command);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.quit_to_shell();
    assert_eq!(
        std::fs::read_to_string(demo_home.join("kept.txt")).unwrap(),
        "mine"
    );
    // The finder reads the same home.
    let out = Command::new(BIN)
        .env("XDG_CACHE_HOME", cache.path())
        .args(["--demo", "search", "tokenizer", "--json", "--limit", "1"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found["hits"][0]["title"], "Fix the flaky tokenizer test");
    let leftovers: Vec<_> = std::fs::read_dir(cache.path().join("dsh-refs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["demo-home"]);
    assert!(
        demo_home.join("index").is_dir(),
        "the demo's index lives in the demo home"
    );
}

#[test]
fn resume_without_an_id_opens_the_finder_as_a_picker() {
    let home = tempfile::tempdir().unwrap();
    write_session(
        home.path(),
        "abc123-first",
        "/w",
        1_780_000_000_000,
        "Leap day parsing",
    );
    write_session(
        home.path(),
        "xyz-other",
        "/w",
        1_780_000_100_000,
        "Dark mode toggle",
    );
    let tmux = shell(
        "picker",
        &format!("{BIN} --home {} --resume", home.path().display()),
    );
    tmux.wait_for_screen("the picker", |s| {
        s.contains("Resume a session") && s.contains("Leap day parsing") && s.contains("Dark mode")
    });
    tmux.type_text("leap");
    tmux.wait_for_screen("the narrowed list", |s| {
        s.contains("Leap day parsing") && !s.contains("Dark mode toggle")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the picked session", |s| {
        s.contains("Leap day parsing (abc123-first)")
    });
    let screen = tmux.quit_to_shell();
    assert!(screen.contains("--resume abc123-first"), "{screen}");

    // Esc starts nothing.
    let tmux = shell(
        "picker-esc",
        &format!("{BIN} --home {} --resume", home.path().display()),
    );
    tmux.wait_for_screen("the picker", |s| s.contains("Resume a session"));
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for_screen("the exit", |s| s.contains("EXITED="));
    assert!(screen.contains("EXITED=0"), "{screen}");
}

#[test]
fn resume_with_a_word_finds_sessions_by_it() {
    let home = tempfile::tempdir().unwrap();
    write_session(
        home.path(),
        "abc123-first",
        "/w",
        1_780_000_000_000,
        "Leap day parsing",
    );
    write_session(
        home.path(),
        "xyz-other",
        "/w",
        1_780_000_100_000,
        "Dark mode toggle",
    );
    // Without a terminal: the matches, and how to open one.
    let out = run(home.path(), &["--resume", "leap"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}{:?}", out.stderr);
    assert!(
        text.contains("abc123-first  Leap day parsing") && !text.contains("xyz-other"),
        "{text}"
    );
    assert!(text.contains("resume one with: dsh-refs"), "{text}");

    // On a terminal: the picker with the word typed, narrowed to its match.
    let tmux = shell(
        "picker-word",
        &format!("{BIN} --home {} --resume leap", home.path().display()),
    );
    let screen = tmux.wait_for_screen("the picker with the word", |s| {
        s.contains("Resume a session › leap") && s.contains("Leap day parsing")
    });
    assert!(!screen.contains("Dark mode toggle"), "{screen}");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the picked session", |s| {
        s.contains("Leap day parsing (abc123-first)")
    });
    let screen = tmux.quit_to_shell();
    assert!(screen.contains("--resume abc123-first"), "{screen}");
}

#[test]
fn hints_keep_demo_and_sessions_show_last_activity() {
    // `--demo --continue` somewhere without a demo session: the hint keeps `--demo`.
    let cache = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["--demo", "--continue"])
        .env("XDG_CACHE_HOME", cache.path())
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("start one with dsh-refs --demo, or list them with dsh-refs --demo sessions"),
        "{err}"
    );

    // `sessions` says when each session was last active, in the TUI's one age format.
    let home = tempfile::tempdir().unwrap();
    write_session(home.path(), "abc123-first", "/w", 1_780_000_000_000, "One");
    let out = run(home.path(), &["sessions"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let header = text.lines().next().unwrap();
    assert!(header.contains("LAST ACTIVE"), "{text}");
    let row = text.lines().nth(1).unwrap();
    // Just written: seconds old, as the popup and picker rows say it.
    assert!(
        row.contains(" now ")
            || row
                .split_whitespace()
                .any(|w| w.ends_with('s') && w[..w.len() - 1].parse::<u32>().is_ok()),
        "{text}"
    );
}

#[test]
fn resume_without_an_id_draws_the_picker_over_the_app_on_one_terminal() {
    let home = tempfile::tempdir().unwrap();
    write_session(
        home.path(),
        "abc123-first",
        "/w",
        1_780_000_000_000,
        "Leap day parsing",
    );
    let tmux = shell(
        "picker-app",
        &format!("{BIN} --home {} --resume", home.path().display()),
    );
    // The app's own picker: its composer and status line are drawn below it.
    tmux.wait_for_screen("the picker over the app", |s| {
        s.contains("Resume a session") && s.contains("Leap day parsing") && s.contains("idle")
    });
    // Ctrl-C (clear-or-quit in the key table) cancels like Esc: nothing starts.
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for_screen("the exit", |s| s.contains("EXITED="));
    assert!(screen.contains("EXITED=0"), "{screen}");
    assert!(!screen.contains("--resume"), "nothing written: {screen}");
}
