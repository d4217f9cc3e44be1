//! End to end (issue 38 item 5): `dsh-refs --resume` in tmux shows the highlighted session's
//! last messages in the picker's preview pane, read in the background, and hides the pane when
//! the terminal is made narrower than 90 columns.

use crate::support::tmux::Tmux;
use crate::support::write_source;

#[test]
fn the_resume_picker_previews_the_highlighted_session() {
    let home = tempfile::tempdir().unwrap();
    write_source(home.path());
    let command = format!(
        "{} --home {} --compression none --resume",
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.path().display()
    );
    let tmux = Tmux::start("picker-preview", &command, 120, 30);
    tmux.wait_for_screen("the preview pane", |s| {
        s.contains("Resume a session")
            && s.contains("preview · Leap day parsing")
            && s.contains("assistant: The validator used a non-leap")
    });
    // Typing goes on over it; narrower than 90 columns, the pane goes.
    tmux.type_text("leap");
    tmux.wait_for_screen("the query", |s| s.contains("Resume a session › leap"));
    tmux.run(&["resize-window", "-x", "80"]);
    // tmux cuts the old frame at 80 columns before the app has drawn again, so "the pane is
    // gone" is the row's directory in the list and no trace of the pane's frame.
    let narrow = tmux.wait_for_screen("no pane", |s| {
        s.contains("Leap day parsing") && s.contains("/proj/api") && !s.contains("╭ prev")
    });
    assert!(
        narrow.lines().all(|l| l.chars().count() <= 80),
        "resized: {narrow}"
    );
    tmux.keys(&["Escape"]);
}
