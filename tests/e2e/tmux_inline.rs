//! Inline mode (issue 38 item 1), the real binary in tmux: the conversation is written into the
//! terminal's scrollback, read back with `capture-pane -S -` after quitting, with the shell's
//! next line right after it; a resumed session whose text holds OSC, CSI and bidi controls
//! reaches the terminal only escaped (`capture-pane -e` and the pane's title say so); a resize
//! in the middle of a streaming answer leaves it whole and once, with no viewport left behind.

use crate::support::tmux::Tmux;
use std::path::Path;

fn command(home: &Path, extra: &str) -> String {
    format!(
        "{} --home {} --compression none {extra}",
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.display()
    )
}

/// Everything the pane holds, its scrollback first (`-e`: with the escapes tmux would send to
/// draw it again).
fn everything(tmux: &Tmux, escapes: bool) -> String {
    let mut args = vec!["capture-pane", "-p", "-S", "-"];
    if escapes {
        args.push("-e");
    }
    tmux.run(&args)
}

/// The non-blank lines of `text`, trimmed at the end.
fn lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Sends `text` and waits until its answer was written above the viewport.
fn say(tmux: &Tmux, text: &str) {
    tmux.type_text(text);
    tmux.keys(&["Enter"]);
    let quoted = format!("Your last message: \"{text}\"");
    let start = std::time::Instant::now();
    loop {
        let all = everything(tmux, false);
        if all.contains(&quoted) && all.contains("idle") {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "no answer to {text}:\n{all}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_conversation_stays_in_the_scrollback_and_the_prompt_follows_it() {
    let home = tempfile::tempdir().unwrap();
    // A low pane: most of the conversation has to go into the scrollback.
    let tmux = Tmux::start_in_shell(
        "inline-scrollback",
        &format!(
            "echo BEFORE-TUI; {}",
            command(home.path(), "--offline-delay-ms 0 --inline")
        ),
        90,
        14,
    );
    tmux.wait_for_screen("the composer", |s| {
        s.contains("Message (type @ to reference")
    });
    for n in 1..=4 {
        say(&tmux, &format!("message number {n}"));
    }
    // `/new`: the next session's welcome is written below the last one's conversation.
    tmux.type_text("/new");
    tmux.keys(&["Enter"]);
    let start = std::time::Instant::now();
    while everything(&tmux, false)
        .matches("cross-session references")
        .count()
        < 2
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "no second welcome"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    tmux.wait_for_screen("the next composer", |s| s.contains("Message (type @"));
    say(&tmux, "in the next session");
    tmux.quit_to_shell();
    let all = everything(&tmux, false);
    let rows = lines(&all);
    // In order, each once: what was there before, the welcome, every prompt and answer, the
    // line the program prints on exit, then the shell.
    let mut expected = vec!["BEFORE-TUI".to_string(), "✻ dsh-refs".to_string()];
    for n in 1..=4 {
        expected.push(format!("› message number {n}"));
        expected.push(format!("Your last message: \"message number {n}\""));
    }
    expected.push("✻ dsh-refs".into());
    expected.push("› in the next session".into());
    expected.push("Your last message: \"in the next session\"".into());
    expected.push("resume this session with:".into());
    expected.push("EXITED=0".into());
    let mut at = 0;
    for want in &expected {
        let found = rows[at..]
            .iter()
            .position(|row| row.contains(want.as_str()))
            .unwrap_or_else(|| panic!("{want:?} missing after row {at}:\n{all}"));
        let times = if want == "✻ dsh-refs" { 2 } else { 1 };
        assert_eq!(
            rows.iter()
                .filter(|row| row.contains(want.as_str()))
                .count(),
            times,
            "{want:?} not {times} time(s):\n{all}"
        );
        at += found + 1;
    }
    // The viewport went with the program: no composer, status or key help left anywhere.
    for gone in [
        "Message (type @ to reference",
        "○ idle",
        "ctrl+c quit",
        "╭",
        "╰",
    ] {
        assert!(!all.contains(gone), "{gone:?} left behind:\n{all}");
    }
    // The answers sit right above the exit line: nothing between them and the shell.
    let last = rows
        .iter()
        .position(|r| r.contains("Your last message: \"in the next session\""))
        .unwrap();
    assert!(
        rows[last + 1].starts_with("resume this session with:"),
        "{all}"
    );
}

/// A session whose every text is hostile: a title change (OSC 0), a screen clear (CSI 2J), a
/// colour, a right-to-left override.
fn write_hostile_session(home: &Path) {
    let dir = home.join("sessions/--tmp--/hostile-session");
    std::fs::create_dir_all(&dir).unwrap();
    let hostile = r"TITLE\u001b]0;pwned\u0007 CLEAR\u001b[2J RED\u001b[31m FLIP\u202etxt.exe END";
    let lines = [
        r#"{"type":"session","version":0,"id":"hostile-session","createdAt":1780000000000,"cwd":"/tmp","delegationDepth":0}"#.to_string(),
        r#"{"type":"turn/start","seq":0,"time":1780000000001,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#.to_string(),
        format!(
            r#"{{"type":"user/message","seq":1,"time":1780000000002,"data":{{"content":[{{"type":"text","text":"USER {hostile}"}}],"source":{{"kind":"user"}},"role":"user","id":"u1"}},"surfaceOp":"append"}}"#
        ),
        format!(
            r#"{{"type":"assistant/message","seq":2,"time":1780000000004,"data":{{"turn":1,"step":1,"message":{{"role":"assistant","content":[{{"type":"text","text":"MODEL {hostile}"}}],"source":{{"kind":"model","provider":"p","model":"m"}},"id":"a1"}}}},"surfaceOp":"append"}}"#
        ),
        r#"{"type":"turn/end","seq":3,"time":1780000000005,"data":{"turn":1,"reason":{"kind":"completed"}}}"#.to_string(),
    ];
    std::fs::write(dir.join("session.jsonl"), lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_hostile_resumed_session_reaches_the_scrollback_only_escaped() {
    let home = tempfile::tempdir().unwrap();
    write_hostile_session(home.path());
    let tmux = Tmux::start_in_shell(
        "inline-hostile",
        &format!(
            "echo BEFORE-TUI; {}",
            command(
                home.path(),
                "--offline-delay-ms 0 --inline --resume hostile-session"
            )
        ),
        100,
        20,
    );
    tmux.wait_for_screen("the composer", |s| {
        s.contains("Message (type @ to reference")
    });
    let title = tmux.run(&["display-message", "-p", "#{pane_title}"]);
    say(&tmux, "after the hostile history");
    tmux.quit_to_shell();
    let plain = everything(&tmux, false);
    let styled = everything(&tmux, true);
    // Shown, spelled out, where the person reads them.
    for shown in [
        r"USER TITLE\x1B]0;pwned\x07 CLEAR\x1B[2J RED\x1B[31m FLIP\u{202E}txt.exe END",
        r"MODEL TITLE\x1B]0;pwned\x07",
    ] {
        assert!(plain.contains(shown), "{shown:?} not shown:\n{plain}");
    }
    // Never acted on: the screen was not cleared (what came before is still there), the title
    // was not changed, no raw control or override is in what tmux holds.
    assert!(plain.contains("BEFORE-TUI"), "{plain}");
    for title in [title, tmux.run(&["display-message", "-p", "#{pane_title}"])] {
        assert!(!title.contains("pwned"), "the title changed: {title:?}");
    }
    assert!(!styled.contains('\u{202e}'), "a raw override:\n{styled}");
    assert!(!styled.contains("\u{1b}]"), "a raw OSC:\n{styled}");
    // The only escapes in the styled capture are tmux's own colours: none is red (31), the
    // colour the session asked for.
    assert!(
        !styled.contains("\u{1b}[31m"),
        "the session's colour:\n{styled}"
    );
    assert!(plain.contains("EXITED=0"), "{plain}");
}

#[test]
fn a_resize_in_the_middle_of_an_answer_leaves_it_whole_and_no_viewport_behind() {
    let home = tempfile::tempdir().unwrap();
    let tmux = Tmux::start_in_shell(
        "inline-resize",
        &command(home.path(), "--offline-delay-ms 60 --inline"),
        90,
        20,
    );
    tmux.wait_for_screen("the composer", |s| {
        s.contains("Message (type @ to reference")
    });
    tmux.type_text("stream slowly please");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the answer streaming", |s| s.contains("Offline model"));
    tmux.run(&["resize-window", "-x", "60", "-y", "12"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    tmux.run(&["resize-window", "-x", "100", "-y", "24"]);
    let screen = tmux.wait_for_screen("the answer done", |s| {
        s.contains("Your last message: \"stream slowly please\"") && s.contains("○ idle")
    });
    // One composer and one status line on the screen: the old viewports left nothing behind.
    assert_eq!(
        screen.matches("Message (type @ to reference").count(),
        1,
        "{screen}"
    );
    assert_eq!(screen.matches("○ idle").count(), 1, "{screen}");
    tmux.quit_to_shell();
    let all = everything(&tmux, false);
    assert_eq!(all.matches("› stream slowly please").count(), 1, "{all}");
    assert_eq!(
        all.matches("Your last message: \"stream slowly please\"")
            .count(),
        1,
        "{all}"
    );
    assert!(!all.contains("Message (type @ to reference"), "{all}");
    assert!(all.contains("EXITED=0"), "{all}");
}

#[test]
fn the_config_makes_inline_the_default_and_no_inline_takes_the_alternate_screen_back() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "[tui]\ninline = true\n").unwrap();
    // No flag: the config's inline mode, the conversation kept.
    let tmux = Tmux::start_in_shell(
        "inline-config",
        &command(home.path(), "--offline-delay-ms 0"),
        90,
        20,
    );
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    say(&tmux, "kept by the config");
    tmux.quit_to_shell();
    let all = everything(&tmux, false);
    assert!(all.contains("› kept by the config"), "{all}");
    drop(tmux);
    // `--no-inline`: the alternate screen, gone with the program.
    let tmux = Tmux::start_in_shell(
        "inline-config-off",
        &command(home.path(), "--offline-delay-ms 0 --no-inline"),
        90,
        20,
    );
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.type_text("gone with the screen");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the answer", |s| s.contains("Your last message"));
    tmux.quit_to_shell();
    let all = everything(&tmux, false);
    assert!(!all.contains("gone with the screen"), "{all}");
    drop(tmux);
    // A wrong value is a start-up error naming the file.
    std::fs::write(home.path().join("config.toml"), "[tui]\ninline = \"yes\"\n").unwrap();
    let tmux = Tmux::start_in_shell(
        "inline-config-bad",
        &command(home.path(), "--offline-delay-ms 0"),
        200,
        20,
    );
    let screen = tmux.wait_for_screen("the error", |s| s.contains("EXITED="));
    assert!(screen.contains("EXITED=1"), "{screen}");
    assert!(screen.contains("config.toml"), "{screen}");
}

#[test]
fn a_screen_too_small_says_so_on_one_line_and_growing_brings_the_app_back() {
    let home = tempfile::tempdir().unwrap();
    let tmux = Tmux::start_in_shell(
        "inline-small",
        &command(home.path(), "--offline-delay-ms 0 --inline"),
        16,
        3,
    );
    let screen = tmux.wait_for_screen("the too-small line", |s| s.contains("terminal too"));
    assert!(!screen.contains("Message (type @"), "{screen}");
    tmux.run(&["resize-window", "-x", "100", "-y", "24"]);
    let screen = tmux.wait_for_screen("the composer", |s| {
        s.contains("Message (type @ to reference") && s.contains("○ idle")
    });
    // The welcome held back while the screen was too small is written now, once.
    assert_eq!(
        screen.matches("cross-session references").count(),
        1,
        "{screen}"
    );
    assert_eq!(screen.matches("○ idle").count(), 1, "{screen}");
    say(&tmux, "grown again");
    tmux.quit_to_shell();
    let all = everything(&tmux, false);
    assert_eq!(all.matches("› grown again").count(), 1, "{all}");
    assert!(!all.contains("Message (type @ to reference"), "{all}");
    assert!(all.contains("EXITED=0"), "{all}");
}
