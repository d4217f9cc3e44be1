//! The popup's state and view, on small cases.

use super::*;
use crate::reference::Candidate;
use crate::tui::file_match::FileIndex;
use crate::tui::focus::{Command, Handled};
use crate::tui::render::Renderable;
use crate::tui::snapshot::render_snapshot;
use crossterm::event::KeyEvent;
use crossterm::event::{KeyCode, KeyModifiers};
use proptest::prelude::*;
use std::sync::Arc;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn candidates(n: usize) -> Vec<Candidate> {
    (0..n)
        .map(|i| Candidate {
            session_id: format!("s{i}"),
            label: format!("Session {i}"),
            cwd: None,
            created_at: 0,
        })
        .collect()
}

fn with(n: usize) -> PopupState {
    let mut state = PopupState::new();
    let request = state.open("", false).unwrap();
    assert!(state.apply_results(request.id, Ok(candidates(n))));
    state
}

#[test]
fn selection_wraps_both_ways() {
    let mut state = with(3);
    assert_eq!(state.selected_index(), Some(0));
    assert_eq!(state.handle_key(key(KeyCode::Up)), Handled::Consumed);
    assert_eq!(state.selected_index(), Some(2));
    state.handle_key(key(KeyCode::Down));
    assert_eq!(state.selected_index(), Some(0));
    state.handle_key(ctrl('p'));
    assert_eq!(state.selected_index(), Some(2));
    state.handle_key(ctrl('n'));
    assert_eq!(state.selected_index(), Some(0));
}

#[test]
fn paging_moves_a_page_and_keeps_the_selection_visible() {
    let mut state = with(20);
    state.set_page_rows(5);
    state.handle_key(key(KeyCode::PageDown));
    assert_eq!(state.selected_index(), Some(5));
    assert_eq!(state.scroll(), 1);
    state.handle_key(key(KeyCode::PageDown));
    state.handle_key(key(KeyCode::PageDown));
    state.handle_key(key(KeyCode::PageDown));
    assert_eq!(state.selected_index(), Some(19));
    assert_eq!(state.scroll(), 15);
    state.handle_key(key(KeyCode::PageUp));
    assert_eq!(state.selected_index(), Some(14));
    assert_eq!(state.scroll(), 14);
    state.handle_key(key(KeyCode::Down));
    state.handle_key(key(KeyCode::Down));
    state.handle_key(key(KeyCode::Down));
    state.handle_key(key(KeyCode::Down));
    state.handle_key(key(KeyCode::Down));
    assert_eq!(state.selected_index(), Some(19));
    state.handle_key(key(KeyCode::Down));
    assert_eq!((state.selected_index(), state.scroll()), (Some(0), 0));
}

#[test]
fn stale_results_are_dropped() {
    let mut state = PopupState::new();
    let first = state.open("a", false).unwrap();
    let second = state.open("ab", false).unwrap();
    assert!(first.id < second.id);
    assert!(!state.apply_results(first.id, Ok(candidates(5))));
    assert!(state.is_loading());
    assert!(state.is_empty());
    assert!(state.apply_results(second.id, Ok(candidates(2))));
    assert!(!state.is_loading());
    assert_eq!(state.len(), 2);
    // An answer arriving after the popup closed is dropped too.
    let third = state.open("abc", false).unwrap();
    state.close();
    assert!(!state.apply_results(third.id, Ok(candidates(1))));
}

#[test]
fn same_query_does_not_look_up_again() {
    let mut state = PopupState::new();
    assert!(state.open("x", false).is_some());
    assert!(state.open("x", false).is_none());
    assert!(state.open("x", true).is_none(), "paths only never looks up");
    assert!(state.open("x", false).is_some());
}

#[test]
fn esc_closes_and_enter_accepts() {
    let mut state = with(2);
    state.handle_key(key(KeyCode::Down));
    match state.handle_key(key(KeyCode::Enter)) {
        Handled::Emit(Command::Insert(PopupItem::Session(c))) => assert_eq!(c.session_id, "s1"),
        other => panic!("unexpected {other:?}"),
    }
    match state.handle_key(key(KeyCode::Tab)) {
        Handled::Emit(Command::Insert(PopupItem::Session(c))) => assert_eq!(c.session_id, "s1"),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(state.handle_key(key(KeyCode::Char('x'))), Handled::Ignored);
    assert_eq!(state.handle_key(key(KeyCode::Esc)), Handled::Consumed);
    assert!(!state.is_open());
    assert_eq!(state.handle_key(key(KeyCode::Down)), Handled::Ignored);
}

#[test]
fn with_nothing_to_offer_the_popup_traps_no_key() {
    let mut state = PopupState::new();
    let request = state.open("zzz", false).unwrap();
    // Still loading: Enter waits for the answer rather than sending.
    assert_eq!(state.handle_key(key(KeyCode::Enter)), Handled::Consumed);
    let request2 = state.open("zzzz", false).unwrap();
    assert!(!state.apply_results(request.id, Ok(Vec::new())));
    state.apply_results(request2.id, Ok(Vec::new()));
    // Answered with nothing: Enter (send), Up and Down (history) go to the composer.
    for code in [KeyCode::Enter, KeyCode::Up, KeyCode::Down, KeyCode::PageUp] {
        assert_eq!(state.handle_key(key(code)), Handled::Ignored, "{code:?}");
    }
    assert!(state.is_open());
    assert_eq!(state.handle_key(key(KeyCode::Tab)), Handled::Consumed);
}

#[test]
fn a_user_pick_survives_a_new_answer() {
    let mut state = with(5);
    state.move_down();
    state.move_down();
    let request = state.begin_lookup("");
    let mut answer = candidates(5);
    answer.rotate_left(1); // s2 is now at index 1
    state.apply_results(request, Ok(answer));
    match state.selected() {
        Some(PopupItem::Session(c)) => assert_eq!(c.session_id, "s2"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn rows_while_loading_are_filtered_locally() {
    let mut state = with(12);
    state.open("s1", false).unwrap();
    let ids: Vec<String> = state
        .items()
        .into_iter()
        .map(|item| match item {
            PopupItem::Session(c) => c.session_id,
            PopupItem::File(f) => f.path,
        })
        .collect();
    assert_eq!(ids, ["s1", "s10", "s11"]);
}

proptest! {
    #[test]
    fn rendering_never_panics(
        w in 0u16..100,
        h in 0u16..14,
        query in "\\PC{0,12}",
        labels in proptest::collection::vec(any::<String>(), 0..12),
        moves in 0usize..30,
        error in proptest::option::of(any::<String>()),
    ) {
        let mut state = PopupState::new();
        state.set_file_index(Arc::new(FileIndex::new(labels.iter().cloned())));
        if let Some(request) = state.open(&query, false) {
            let answer = match error {
                Some(e) => Err(e),
                None => Ok(labels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| Candidate {
                        session_id: format!("{l}{i}"),
                        label: l.clone(),
                        cwd: (i % 2 == 0).then(|| l.clone()),
                        created_at: i as i64 * 1_000_000,
                    })
                    .collect()),
            };
            state.apply_results(request.id, answer);
        }
        for _ in 0..moves {
            state.move_down();
        }
        let view = state.view(10_000_000);
        let _ = view.desired_height(w);
        let out = render_snapshot(w, h, |area, buf| view.render(area, buf));
        prop_assert!(!out.contains('\x1b'), "raw ESC on screen");
    }
}
