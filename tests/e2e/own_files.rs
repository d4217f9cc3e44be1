//! Our own files in a home, replaced or damaged, through the real binary in tmux (issue 20 §4):
//! a FIFO `history.jsonl` never holds the TUI's start-up (it was a blank screen for ever), and
//! an entry sent after a history line torn by a crash is recalled with ↑ after a restart.

use crate::support::tmux::Tmux;
use std::path::Path;
use std::time::{Duration, Instant};

fn tui(workdir: &Path, home: &Path) -> String {
    format!(
        "cd {} && {} --home {} --compression none --offline-delay-ms 0",
        workdir.display(),
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.display()
    )
}

/// Waits until `path` holds `text` (the TUI appends history off its loop).
fn wait_for_file(path: &Path, text: &str) -> String {
    let started = Instant::now();
    loop {
        let now = std::fs::read_to_string(path).unwrap_or_default();
        if now.contains(text) {
            return now;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{} never held {text:?}: {now:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_fifo_history_never_holds_start_up() {
    let home = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let history = home.path().join("history.jsonl");
    let status = std::process::Command::new("mkfifo")
        .arg(&history)
        .status()
        .unwrap();
    assert!(status.success());
    let tmux = Tmux::start("fifo-history", &tui(workdir.path(), home.path()), 100, 24);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    // A message goes out; the history is not kept, and the FIFO is left as it is.
    tmux.type_text("hello through a fifo home");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the offline answer", |s| {
        s.contains("Your last message: \"hello through a fifo home\"")
    });
    quit(&tmux);
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&history)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn an_entry_after_a_torn_history_line_is_recalled_after_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let history = home.path().join("history.jsonl");
    // One whole entry, then a line cut by a crash in the middle of its JSON.
    std::fs::write(
        &history,
        "{\"sessionId\":\"s\",\"time\":1,\"parts\":[{\"text\":\"the whole one\"}]}\n\
         {\"sessionId\":\"s\",\"time\":2,\"parts\":[{\"text\":\"cut by",
    )
    .unwrap();
    let command = tui(workdir.path(), home.path());
    let tmux = Tmux::start("torn-history", &command, 100, 24);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.type_text("sent after the crash");
    tmux.keys(&["Enter"]);
    wait_for_file(&history, "sent after the crash");
    tmux.wait_for_screen("the offline answer", |s| {
        s.contains("Your last message: \"sent after the crash\"")
    });
    quit(&tmux);
    drop(tmux);
    let tmux = Tmux::start("torn-history-2", &command, 100, 24);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.keys(&["Up"]);
    tmux.wait_for_screen("the entry sent after the crash", |s| {
        s.contains("› sent after the crash")
    });
    tmux.keys(&["Up"]);
    tmux.wait_for_screen("the entry before the crash", |s| {
        s.contains("› the whole one")
    });
    tmux.keys(&["C-u"]);
    quit(&tmux);
}

/// Ctrl-C pairs until the TUI has ended: a pair that lands while the turn's last writes finish
/// cancels them instead of quitting, as a person's would.
fn quit(tmux: &Tmux) {
    for _ in 0..5 {
        tmux.keys(&["C-c"]);
        std::thread::sleep(Duration::from_millis(150));
        tmux.keys(&["C-c"]);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(4) {
            if !tmux.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("dsh-refs did not quit; screen:\n{}", tmux.screen());
}
