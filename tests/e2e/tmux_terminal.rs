//! The terminal as a person's own (issue 24 item 9), the real binary in tmux: `--no-mouse`
//! leaves mouse reports off (the terminal's selection and copy keep working), the default asks
//! for them (the wheel scrolls), and `/copy` puts the last answer on the clipboard through
//! OSC 52 (tmux with `set-clipboard on` keeps it as a paste buffer).

use crate::support::tmux::Tmux;

fn command(home: &std::path::Path, extra: &str) -> String {
    format!(
        "{} --home {} --compression none --offline-delay-ms 0 {extra}",
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.display()
    )
}

#[test]
fn no_mouse_leaves_the_mouse_to_the_terminal() {
    let home = tempfile::tempdir().unwrap();
    let tmux = Tmux::start("mouse-on", &command(home.path(), ""), 100, 24);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    assert_eq!(
        tmux.run(&["display-message", "-p", "#{mouse_any_flag}"])
            .trim(),
        "1"
    );
    tmux.quit();

    let tmux = Tmux::start("mouse-off", &command(home.path(), "--no-mouse"), 100, 24);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    assert_eq!(
        tmux.run(&["display-message", "-p", "#{mouse_any_flag}"])
            .trim(),
        "0"
    );
    tmux.quit();
}

#[test]
fn copy_puts_the_last_answer_on_the_clipboard() {
    let home = tempfile::tempdir().unwrap();
    let tmux = Tmux::start("copy", &command(home.path(), ""), 100, 24);
    tmux.run(&["set-option", "-s", "set-clipboard", "on"]);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    // Nothing is written to the clipboard unless asked.
    tmux.type_text("hello there");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for_screen("the answer", |s| {
        s.contains("Offline model") && s.contains("idle")
    });
    assert!(tmux.run(&["list-buffers"]).trim().is_empty(), "{screen}");
    tmux.type_text("/copy");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the copy notice", |s| s.contains("Copied the last answer"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let copied = loop {
        let buffer = tmux.run(&["show-buffer"]);
        if !buffer.is_empty() || std::time::Instant::now() > deadline {
            break buffer;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(copied.starts_with("Offline model"), "{copied:?}");
    tmux.quit();
}
