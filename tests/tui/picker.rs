//! Snapshots of the `--resume` session picker (SPEC §8).

use dsh_session_references::discovery::Field;
use dsh_session_references::discovery::{Hit, SessionMeta};
use dsh_session_references::tui::focus::{Command, Handled};
use dsh_session_references::tui::picker::PickerState;
use dsh_session_references::tui::snapshot::render_snapshot;
use insta::assert_snapshot;

const NOW: i64 = 1_700_000_000_000;
const MIN: i64 = 60_000;

fn hit(id: &str, title: Option<&str>, prompt: &str, cwd: Option<&str>, ago: i64) -> Hit {
    Hit {
        meta: SessionMeta {
            id: id.into(),
            title: title.map(Into::into),
            first_prompt: Some(prompt.into()),
            cwd: cwd.map(Into::into),
            created_at: NOW - 10 * ago,
            last_activity: NOW - ago,
            messages: 4,
            conversation_bytes: 900,
            source: None,
        },
        score: 1.0,
        matched: vec![Field::Title],
        snippet: None,
    }
}

#[test]
fn picker_with_a_query_and_a_truncated_list() {
    let mut state = PickerState::new();
    state.start();
    let g = match state.handle_key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char('t'),
        crossterm::event::KeyModifiers::NONE,
    )) {
        Handled::Emit(Command::Search { generation, .. }) => generation,
        other => panic!("{other:?}"),
    };
    assert!(state.apply(
        g,
        Ok((
            vec![
                hit(
                    "f382e8f5",
                    Some("Fix the flaky tokenizer test"),
                    "p",
                    Some("/home/dev/parser"),
                    5 * MIN
                ),
                hit(
                    "be266e1a",
                    None,
                    "why does \u{1b}[2Jthe lexer skip BOMs?",
                    None,
                    90 * MIN
                ),
            ],
            12
        ))
    ));
    assert_snapshot!(render_snapshot(90, 5, |area, buf| state
        .view(NOW)
        .render(area, buf)));
}

#[test]
fn picker_before_an_answer_and_with_none() {
    let mut state = PickerState::new();
    state.start();
    assert_snapshot!(
        "searching",
        render_snapshot(60, 3, |area, buf| state.view(NOW).render(area, buf))
    );
    assert!(state.apply(0, Ok((vec![], 0))));
    assert_snapshot!(
        "nothing",
        render_snapshot(60, 3, |area, buf| state.view(NOW).render(area, buf))
    );
}

fn two_dirs() -> Vec<Hit> {
    vec![
        hit(
            "f382e8f5",
            Some("Fix the flaky tokenizer test"),
            "the tokenizer test fails one run in ten; find out why and pin it",
            Some("/home/dev/parser"),
            5 * MIN,
        ),
        hit(
            "be266e1a",
            Some("Dark mode toggle"),
            "add a dark mode toggle",
            Some("/home/dev/web"),
            3 * 24 * 60 * MIN,
        ),
    ]
}

#[test]
fn a_wide_picker_shows_age_first_and_a_preview_and_filters_to_this_directory() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let mut state = PickerState::with_query("t", Some("/home/dev/web".into()));
    assert_eq!(
        state.start(),
        Handled::Emit(Command::Search {
            generation: 0,
            query: "t".into()
        })
    );
    assert!(state.apply(0, Ok((two_dirs(), 2))));
    assert_snapshot!(
        "wide_with_preview",
        render_snapshot(100, 7, |area, buf| state.view(NOW).render(area, buf))
    );
    // Tab (the key table's picker-this-dir): this directory's sessions only, and back.
    let tab = KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE);
    assert_eq!(state.handle_key(tab), Handled::Consumed);
    assert!(state.this_dir_only());
    assert_snapshot!(
        "this_directory_only",
        render_snapshot(100, 7, |area, buf| state.view(NOW).render(area, buf))
    );
    assert_eq!(
        state.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        Handled::Emit(Command::Resume("be266e1a".into()))
    );
    state.handle_key(tab);
    assert_eq!(state.selected().unwrap().id, "f382e8f5");
}

#[test]
fn the_picker_clears_what_was_under_it() {
    let mut state = PickerState::new();
    state.start();
    assert!(state.apply(0, Ok((vec![], 0))));
    let text = render_snapshot(40, 4, |area, buf| {
        for y in 0..area.height {
            buf.set_string(0, y, "W".repeat(40), ratatui::style::Style::new());
        }
        state.view(NOW).render(area, buf)
    });
    assert!(!text.contains('W'), "{text}");
}

/// Issue 38 item 5: the pane under the highlighted session's details holds its last messages
/// (the `@` popup's preview pane): `reading…` first, then the messages, a hostile one escaped;
/// an answer for a session no longer highlighted is refused; below 90 columns no pane.
#[test]
fn the_preview_pane_reads_then_shows_the_last_messages() {
    use dsh_session_references::host::Preview;
    let mut state = PickerState::with_query("t", Some("/home/dev/web".into()));
    state.start();
    assert!(state.apply(0, Ok((two_dirs(), 2))));
    let (id, label) = state
        .preview_wanted()
        .expect("the highlighted session's preview");
    assert_eq!(
        (id.as_str(), label.as_str()),
        ("f382e8f5", "Fix the flaky tokenizer test")
    );
    assert!(!state.set_preview("be266e1a", None), "not highlighted");
    assert!(state.set_preview(&id, None));
    assert_eq!(state.preview_wanted(), None, "asked for already");
    let draw = |state: &PickerState, width: u16| {
        render_snapshot(width, 12, |area, buf| state.view(NOW).render(area, buf))
    };
    assert_snapshot!("preview_reading", draw(&state, 100));
    let preview = Preview {
        bytes: 900,
        original: 4,
        retained: 4,
        truncated: false,
        last: vec![
            (
                "user".into(),
                "why does the tokenizer \u{1b}[2Jskip BOMs?".into(),
            ),
            (
                "assistant".into(),
                "The refill drops\nthe first byte.".into(),
            ),
        ],
    };
    assert!(state.set_preview(&id, Some(Ok(preview))));
    assert_snapshot!("preview_loaded", draw(&state, 100));
    let narrow = draw(&state, 89);
    assert!(!narrow.contains("preview ·"), "{narrow}");
    // Moving on asks for the next session's preview.
    state.handle_key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Down,
        crossterm::event::KeyModifiers::NONE,
    ));
    assert_eq!(
        state.preview_wanted().map(|(id, _)| id).as_deref(),
        Some("be266e1a")
    );
    assert!(!draw(&state, 100).contains("The refill drops"));
}
