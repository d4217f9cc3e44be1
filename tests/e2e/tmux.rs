//! End to end: the real `dsh-refs` binary in tmux, typed at like a person, checked on disk.

use crate::support::tmux::Tmux;
use crate::support::write_source;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
/// The shell command that starts the TUI in `workdir` on `home` (plain logs), with `extra` flags.
fn tui_command(workdir: &Path, home: &Path, extra: &str) -> String {
    format!(
        "cd {} && {} --home {} --compression none {extra}",
        workdir.display(),
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.display()
    )
}

/// The log of the session the TUI created (the only one besides the source).
fn target_log(home: &Path) -> Option<PathBuf> {
    let sessions = home.join("sessions");
    for project in std::fs::read_dir(&sessions).ok()? {
        for session in std::fs::read_dir(project.ok()?.path()).ok()? {
            let dir = session.ok()?.path();
            if dir.ends_with("src-session-1") {
                continue;
            }
            let log = dir.join("session.jsonl");
            if log.exists() {
                return Some(log);
            }
        }
    }
    None
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn wait_for_log(home: &Path, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = Instant::now();
    loop {
        if let Some(path) = target_log(home) {
            let records = records(&path);
            if pred(&records) {
                return records;
            }
        }
        if start.elapsed() > Duration::from_secs(30) {
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn count(records: &[Value], kind: &str) -> usize {
    records.iter().filter(|r| r["type"] == kind).count()
}

fn message(record: &Value) -> &Value {
    if record["type"] == "steering/message" {
        &record["data"]["message"]
    } else {
        &record["data"]
    }
}

#[test]
fn mention_a_session_idle_then_while_running() {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let workdir = tempfile::tempdir().unwrap();
    let command = tui_command(workdir.path(), home.path(), "--offline-delay-ms 120");
    let tmux = Tmux::start("main", &command, 110, 32);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));

    // Idle path: pick the session from the popup by part of its id.
    tmux.type_text("summarize @src-ses");
    tmux.wait_for_screen("the candidate", |s| {
        s.contains("Leap day parsing") && s.contains("src-session-1")
    });
    tmux.keys(&["Tab"]);
    tmux.wait_for_screen("the inserted mention", |s| s.contains("@Leap day parsing"));
    tmux.type_text("for me");
    tmux.keys(&["Enter"]);
    let first = wait_for_log(home.path(), "the first turn", |r| count(r, "turn/end") == 1);
    let users: Vec<&Value> = first
        .iter()
        .filter(|r| r["type"] == "user/message")
        .collect();
    assert_eq!(users.len(), 2, "context, then the readable prompt");
    let context = message(users[0]);
    assert_eq!(context["source"]["kind"], "session-reference");
    assert_eq!(context["source"]["version"], 1);
    let reference = &context["source"]["references"][0];
    assert_eq!(reference["sessionId"], "src-session-1");
    assert_eq!(reference["label"], "Leap day parsing");
    assert_eq!(reference["capturedThroughSeq"], 4);
    assert_eq!(reference["originalMessages"], 2);
    assert_eq!(reference["retainedMessages"], 2);
    assert_eq!(reference["inputIndex"], 0);
    let context_text = context["content"][0]["text"].as_str().unwrap();
    assert!(context_text.starts_with("## Referenced sessions\n\n"));
    assert!(context_text.contains("non-leap month table"));
    let prompt = message(users[1]);
    assert_eq!(prompt["source"]["kind"], "user");
    assert_eq!(
        prompt["content"][0]["text"],
        "summarize @Leap day parsing for me"
    );
    let ctx_seq = users[0]["seq"].as_u64().unwrap();
    assert_eq!(users[1]["seq"].as_u64().unwrap(), ctx_seq + 1, "adjacent");
    tmux.wait_for_screen("the reference card", |s| {
        s.contains("Referenced sessions · Leap day parsing (src-session-1)")
    });

    // Running path: a slow turn is open; a mentioned message becomes steering.
    tmux.type_text("tell me a long story about parsers");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("a running turn", |s| s.contains("running"));
    wait_for_log(home.path(), "the second turn to start", |r| {
        count(r, "turn/start") == 2
    });
    tmux.type_text("also check @src-session");
    tmux.wait_for_screen("the candidate again", |s| {
        s.contains("src-session-1") && s.contains("session ")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the inserted mention", |s| {
        s.contains("also check @Leap day parsing")
    });
    tmux.keys(&["Enter"]);
    let second = wait_for_log(home.path(), "the steering", |r| {
        count(r, "steering/message") == 1
    });
    assert_eq!(
        count(&second, "turn/end"),
        1,
        "the mention went in while the turn ran"
    );
    let at = second
        .iter()
        .position(|r| r["type"] == "steering/message")
        .unwrap();
    let context = message(&second[at - 1]);
    assert_eq!(second[at - 1]["type"], "user/message");
    assert_eq!(context["source"]["kind"], "session-reference");
    assert_eq!(
        context["source"]["references"][0]["sessionId"],
        "src-session-1"
    );
    let steer = message(&second[at]);
    assert_eq!(steer["source"]["kind"], "user");
    assert_eq!(steer["content"][0]["text"], "also check @Leap day parsing");
    let done = wait_for_log(home.path(), "the second turn to end", |r| {
        count(r, "turn/end") == 2
    });
    assert_eq!(
        count(&done, "turn/start"),
        2,
        "steering did not start a turn of its own"
    );

    // Ctrl+C twice quits and restores the terminal.
    tmux.keys(&["C-c"]);
    tmux.keys(&["C-c"]);
    tmux.wait_for_screen("the shell prompt back", |s| {
        !s.contains("type @ to reference")
    });
}

/// The user texts the TUI's session logged, in order.
fn user_texts(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["type"] == "user/message" || r["type"] == "steering/message")
        .map(message)
        .filter(|m| m["source"]["kind"] == "user")
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Appends log-only records (an unknown type, kept and ignored: SPEC §1.4) of `bytes` in all to
/// the source session: its preparation then takes long enough (reading and skimming them) that
/// keys sent in one burst with the Enter that starts it all arrive while it runs, even on a
/// loaded machine (the source alone prepared within a millisecond, and a burst split by the
/// scheduler let the preparation finish between its keys).
fn pad_source(home: &Path, bytes: usize) {
    use std::io::Write;
    let log = home.join("sessions/--proj-api--/src-session-1/session.jsonl");
    let mut file = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    let text = "padding ".repeat(2048);
    for n in 0..bytes.div_ceil(text.len()) {
        writeln!(
            file,
            r#"{{"type":"test/padding","seq":{},"time":1780000000006,"data":{{"text":"{text}"}}}}"#,
            5 + n
        )
        .unwrap();
    }
}

#[test]
fn keys_sent_with_enter_and_while_preparing_are_kept_and_emoji_edit_whole() {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    pad_source(home.path(), 4 << 20);
    let workdir = tempfile::tempdir().unwrap();
    let command = tui_command(workdir.path(), home.path(), "--offline-delay-ms 0");
    let tmux = Tmux::start("burst", &command, 110, 32);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));

    // Backspace after a ZWJ family and after a skin-toned thumb removes each whole.
    tmux.type_text("x\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}");
    tmux.keys(&["BSpace"]);
    tmux.type_text("y\u{1f44d}\u{1f3fd}");
    tmux.keys(&["BSpace"]);
    tmux.type_text("z");
    tmux.wait_for_screen("the edited text", |s| s.contains("xyz"));
    // One burst: the message, Enter, and the start of the next one.
    tmux.keys(&["-l", "first"]);
    tmux.keys(&["Enter", "s", "e", "c", "o", "n", "d"]);
    let records = wait_for_log(home.path(), "the first turn", |r| count(r, "turn/end") == 1);
    assert_eq!(user_texts(&records), ["xyzfirst"]);
    tmux.wait_for_screen("the kept draft", |s| s.contains("› second"));

    // A mention is prepared; keys sent in the same burst as its Enter stay in the composer.
    tmux.keys(&["C-u"]);
    tmux.type_text("see @src-ses");
    tmux.wait_for_screen("the candidate", |s| s.contains("src-session-1"));
    tmux.keys(&["Tab"]);
    tmux.wait_for_screen("the mention", |s| s.contains("see @Leap day parsing"));
    tmux.keys(&["Enter", "t", "h", "e", "n", "Enter"]);
    // Waited for here with the screen in the failure message: what the TUI said is the clue.
    let started = Instant::now();
    let records = loop {
        let logged = target_log(home.path()).map(|p| self::records(&p));
        if let Some(logged) = logged.filter(|r| count(r, "turn/end") >= 2) {
            break logged;
        }
        if started.elapsed() > Duration::from_secs(30) {
            panic!(
                "timed out waiting for the second turn; screen:\n{}",
                tmux.screen()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        user_texts(&records),
        ["xyzfirst", "see @Leap day parsing"],
        "the Enter typed while preparing sent nothing more"
    );
    tmux.wait_for_screen("the kept draft", |s| s.contains("› then"));
    tmux.keys(&["Enter"]);
    let records = wait_for_log(home.path(), "the third turn", |r| count(r, "turn/end") == 3);
    assert_eq!(
        user_texts(&records),
        ["xyzfirst", "see @Leap day parsing", "then"]
    );
}

/// The composer's text row (the line with the `›` prompt inside the rounded box).
fn composer_row(screen: &str) -> String {
    screen
        .lines()
        .rev()
        .find(|l| l.starts_with("│›"))
        .unwrap_or("")
        .to_string()
}

#[test]
fn slash_menu_help_overlay_and_ctrl_c_semantics() {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let workdir = tempfile::tempdir().unwrap();
    let command = tui_command(workdir.path(), home.path(), "");
    let tmux = Tmux::start("slash", &command, 100, 30);
    tmux.wait_for_screen("the welcome header", |s| {
        s.contains("cross-session references") && s.contains("tip")
    });

    // `/` opens the menu; typing narrows it; Enter runs /help here.
    tmux.type_text("/");
    tmux.wait_for_screen("the command menu", |s| {
        s.contains("/sessions") && s.contains("/resume [ID|WORDS]") && s.contains("/quit")
    });
    tmux.type_text("he");
    tmux.wait_for_screen("the narrowed menu", |s| {
        s.contains("/help") && !s.contains("/sessions")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the key help overlay", |s| {
        s.contains("Keys · esc to close") && s.contains("new line")
    });
    tmux.keys(&["Escape"]);
    tmux.wait_for_screen("the overlay closed", |s| !s.contains("Keys · esc to close"));

    // /sessions lists the other session; nothing was sent to the model.
    tmux.type_text("/sessions");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the session list", |s| {
        s.contains("Leap day parsing · src-session-1")
    });
    assert!(
        target_log(home.path()).is_none_or(|log| count(&records(&log), "user/message") == 0),
        "no command reached the model"
    );

    // Ctrl-C with a draft clears it; Up brings it back; a second Ctrl-C clears it again.
    tmux.type_text("a draft worth keeping");
    tmux.wait_for_screen("the draft", |s| {
        composer_row(s).contains("a draft worth keeping")
    });
    tmux.keys(&["C-c"]);
    tmux.wait_for_screen("the draft cleared", |s| {
        !composer_row(s).contains("a draft worth keeping")
    });
    tmux.keys(&["Up"]);
    tmux.wait_for_screen("the draft recalled", |s| {
        composer_row(s).contains("a draft worth keeping")
    });
    tmux.keys(&["C-c"]);
    tmux.wait_for_screen("the draft cleared again", |s| {
        !composer_row(s).contains("a draft worth keeping")
    });
    // Empty and idle: the first press only arms, the second quits.
    tmux.keys(&["C-c"]);
    tmux.wait_for_screen("the quit hint", |s| s.contains("again to quit"));
    tmux.keys(&["C-c"]);
    tmux.wait_for_screen("the shell back", |s| {
        !s.contains("cross-session references")
    });
}

#[test]
fn an_at_file_reaches_the_log() {
    let home = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    std::fs::create_dir(workdir.path().join("src")).unwrap();
    std::fs::write(
        workdir.path().join("src/parser.rs"),
        "fn parse_leap_day() -> bool {\n    true\n}\n",
    )
    .unwrap();
    let command = tui_command(workdir.path(), home.path(), "");
    let tmux = Tmux::start("file", &command, 110, 32);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    // Picked from the popup's file rows, then sent.
    tmux.type_text("explain @parser");
    tmux.wait_for_screen("the file row", |s| s.contains("src/parser.rs"));
    tmux.keys(&["Tab"]);
    tmux.wait_for_screen("the file chip with its size", |s| {
        composer_row(s).contains("explain @src/parser.rs ⟨41 B⟩")
    });
    tmux.type_text("please");
    tmux.keys(&["Enter"]);
    let records = wait_for_log(home.path(), "the turn", |r| count(r, "turn/end") == 1);
    let users: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "user/message")
        .collect();
    assert_eq!(users.len(), 2, "the file context, then the prompt");
    let context = message(users[0]);
    assert_eq!(context["source"]["kind"], "plugin");
    assert_eq!(context["source"]["plugin"], "file");
    assert_eq!(context["source"]["path"], "src/parser.rs");
    assert_eq!(context["source"]["truncated"], false);
    let text = context["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("fn parse_leap_day() -> bool"), "{text}");
    assert_eq!(
        message(users[1])["content"][0]["text"],
        "explain @src/parser.rs please"
    );
    tmux.wait_for_screen("the file card", |s| {
        s.contains("context · file src/parser.rs · 41 B")
    });
}

#[test]
fn a_badge_appears_when_a_mention_is_inserted() {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let workdir = tempfile::tempdir().unwrap();
    let command = tui_command(workdir.path(), home.path(), "");
    let tmux = Tmux::start("badge", &command, 110, 32);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.type_text("compare @src-ses");
    tmux.wait_for_screen("the candidate", |s| s.contains("src-session-1"));
    tmux.keys(&["Tab"]);
    let screen = tmux.wait_for_screen("the badge", |s| {
        composer_row(s).contains("@Leap day parsing ⟨2 msgs · ")
    });
    assert!(screen.contains("next +1 ref"), "{screen}");
    // The mention goes (the space, then the mention as one unit): so does its badge.
    tmux.keys(&["BSpace", "BSpace"]);
    tmux.wait_for_screen("the badge gone", |s| {
        !s.contains("⟨2 msgs") && !s.contains("next +1 ref")
    });
    assert!(target_log(home.path()).is_none(), "nothing was sent");
}

#[test]
fn slash_new_then_slash_resume_on_the_same_terminal() {
    let home = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let command = tui_command(workdir.path(), home.path(), "");
    let tmux = Tmux::start("new", &command, 110, 32);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.type_text("the first session speaks");
    tmux.keys(&["Enter"]);
    wait_for_log(home.path(), "the first turn", |r| count(r, "turn/end") == 1);
    let first_id = target_log(home.path())
        .and_then(|log| log.parent()?.file_name()?.to_str().map(str::to_string))
        .unwrap();
    tmux.wait_for_screen("the answer", |s| s.contains("Offline model"));
    tmux.type_text("/new");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("a fresh session", |s| {
        s.contains("cross-session references") && !s.contains("the first session speaks")
    });
    tmux.type_text(&format!("/resume {first_id}"));
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the first session again", |s| {
        s.contains("the first session speaks") && s.contains(&first_id[..12])
    });
    // Still one terminal, still answering keys: quit as usual.
    tmux.keys(&["C-c"]);
    tmux.wait_for_screen("the quit hint", |s| s.contains("again to quit"));
    tmux.keys(&["C-c"]);
    tmux.wait_for_screen("the shell back", |s| {
        !s.contains("the first session speaks")
    });
}

/// A configuration that unbinds every way out (issue 32): Ctrl-C twice still quits, and so
/// does Ctrl-D on an empty composer.
#[test]
fn a_keymap_that_unbinds_quitting_traps_nobody() {
    for way_out in [&["C-c", "C-c"][..], &["C-d"][..]] {
        let home = tempfile::tempdir().unwrap();
        write_source(home.path());
        std::fs::write(
            home.path().join("config.toml"),
            "[keys]\nclear-or-quit = []\ninterrupt = []\ndelete = \"delete\"\ndetails = \"ctrl+c\"\n",
        )
        .unwrap();
        let workdir = tempfile::tempdir().unwrap();
        let command = tui_command(workdir.path(), home.path(), "");
        let tmux = Tmux::start("trap", &command, 100, 30);
        tmux.wait_for_screen("the welcome header", |s| {
            s.contains("cross-session references") && s.contains("tip")
        });
        for (at, key) in way_out.iter().enumerate() {
            tmux.keys(&[key]);
            // The first Ctrl-C only arms; wait for its hint before the second.
            if way_out.len() > 1 && at == 0 {
                tmux.wait_for_screen("the quit hint", |s| s.contains("again to quit"));
            }
        }
        tmux.wait_for_screen("the shell back", |s| {
            !s.contains("cross-session references")
        });
    }
}
