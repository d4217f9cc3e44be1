//! The one key table: help shows exactly the bindings in effect, and handlers obey it.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::tui::composer::Composer;
use dsh_session_references::tui::focus::{Command, Handled};
use dsh_session_references::tui::help::{overlay_rows, KeyHelp, KeyOverlay, OverlayRow};
use dsh_session_references::tui::keys::{Action, KeyBinding, Keymap};
use dsh_session_references::tui::popup::PopupState;
use dsh_session_references::tui::snapshot::render_snapshot;
use dsh_session_references::tui::Renderable;
use std::collections::BTreeSet;
use std::sync::Arc;

fn overridden() -> Keymap {
    Keymap::with_overrides(&[
        ("submit".into(), vec!["ctrl+s".into()]),
        ("newline".into(), vec!["enter".into(), "ctrl+j".into()]),
        ("popup-accept".into(), vec!["ctrl+y".into()]),
        ("details".into(), vec![]),
    ])
    .unwrap()
}

/// (action, key) pairs the overlay lists.
fn listed(keymap: &Keymap) -> BTreeSet<(Action, String)> {
    overlay_rows(keymap)
        .into_iter()
        .flat_map(|row| match row {
            OverlayRow::Binding { action, keys } => {
                keys.into_iter().map(|k| (action, k)).collect::<Vec<_>>()
            }
            _ => Vec::new(),
        })
        .collect()
}

#[test]
fn the_overlay_lists_exactly_the_bindings_in_effect() {
    for keymap in [Keymap::standard(), overridden()] {
        let in_effect: BTreeSet<(Action, String)> = keymap
            .bindings()
            .into_iter()
            .map(|(a, k)| (a, k.to_string()))
            .collect();
        assert_eq!(listed(&keymap), in_effect);
        // And it is drawn: every key and every description of a bound action is on screen.
        let view_state = KeyOverlay::new();
        let view = view_state.view(&keymap);
        let height = view.desired_height(140);
        let screen = render_snapshot(140, height, |area, buf| view.render(area, buf));
        for (action, key) in &in_effect {
            assert!(screen.contains(key.as_str()), "{key} drawn");
            assert!(screen.contains(action.description()), "{action:?} drawn");
        }
    }
    let unbound = overridden();
    assert!(!listed(&unbound).iter().any(|(a, _)| *a == Action::Details));
}

#[test]
fn every_key_on_the_help_line_is_a_binding_of_its_action() {
    for keymap in [Keymap::standard(), overridden()] {
        let keymap = Arc::new(keymap);
        let keys: BTreeSet<String> = keymap
            .bindings()
            .into_iter()
            .map(|(_, k)| k.to_string())
            .collect();
        for bits in 0u8..64 {
            let help = KeyHelp {
                popup_open: bits & 1 != 0,
                running: bits & 2 != 0,
                preparing: bits & 4 != 0,
                quit_pending: bits & 8 != 0,
                has_details: bits & 16 != 0,
                composer_empty: bits & 32 != 0,
                has_draft: bits & 32 == 0,
                keymap: Some(keymap.clone()),
            };
            for (shown, _) in help.entries() {
                for key in shown.split('/').filter(|k| *k != "@") {
                    assert!(keys.contains(key), "{key} shown but not bound ({bits:b})");
                }
            }
        }
    }
    // An override shows up on the help line.
    let help = KeyHelp {
        keymap: Some(Arc::new(overridden())),
        ..KeyHelp::default()
    };
    assert_eq!(help.entries()[0], ("ctrl+s".to_string(), "send"));
}

#[test]
fn handlers_obey_the_overrides() {
    let keymap = Arc::new(overridden());
    let mut composer = Composer::new();
    composer.set_keymap(keymap.clone());
    composer.insert_str("a");
    let enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(composer.handle_key(enter), Handled::Emit(Command::Edited));
    composer.insert_str("b");
    assert_eq!(composer.display_text(), "a\nb");
    let ctrl_s = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL);
    assert_eq!(composer.handle_key(ctrl_s), Handled::Emit(Command::Submit));

    let mut popup = PopupState::new();
    let request = popup.open("", false).unwrap();
    popup.apply_results(
        request.id,
        Ok(vec![dsh_session_references::reference::Candidate {
            session_id: "s1".into(),
            label: "one".into(),
            cwd: None,
            created_at: 0,
        }]),
    );
    let tab = KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE);
    assert_eq!(popup.handle_key_with(&keymap, tab), Handled::Ignored);
    let ctrl_y = KeyEvent::new(KeyCode::Char('y'), KeyModifiers::CONTROL);
    assert!(matches!(
        popup.handle_key_with(&keymap, ctrl_y),
        Handled::Emit(Command::Insert(_))
    ));
}

#[test]
fn key_spellings_shown_are_read_back() {
    for (_, key) in Keymap::standard().bindings() {
        assert_eq!(KeyBinding::parse(&key.to_string()).unwrap(), key);
    }
}

#[test]
fn key_overlay() {
    let keymap = Keymap::standard();
    let state = KeyOverlay::new();
    let view = state.view(&keymap);
    let out = [
        render_snapshot(90, 52, |area, buf| view.render(area, buf)),
        render_snapshot(40, 8, |area, buf| view.render(area, buf)),
    ]
    .join("\n");
    insta::assert_snapshot!(out);
}

#[test]
fn slash_menu() {
    use dsh_session_references::tui::slash::SlashMenu;
    let mut menu = SlashMenu::default();
    menu.sync(Some(""));
    let all = menu.view();
    let all = render_snapshot(70, all.desired_height(70), |area, buf| {
        all.render(area, buf)
    });
    menu.sync(Some("s"));
    menu.handle_action(Action::PopupDown, false);
    let some = menu.view();
    let some = render_snapshot(50, some.desired_height(50), |area, buf| {
        some.render(area, buf)
    });
    menu.sync(Some("zz"));
    let none = menu.view();
    let none = render_snapshot(60, none.desired_height(60), |area, buf| {
        none.render(area, buf)
    });
    insta::assert_snapshot!([all, some, none].join("\n"));
}

#[test]
fn a_wrong_key_override_is_a_clear_start_up_error() {
    let home = tempfile::tempdir().unwrap();
    for (config, expected) in [
        (
            "[keys]\nsubmitt = \"ctrl+s\"\n",
            "unknown action \"submitt\"",
        ),
        ("[keys]\nsubmit = \"ctrl+nope\"\n", "unknown key \"nope\""),
        (
            "[keys]\nnewline = \"enter\"\n",
            "enter is bound to both \"submit\" and \"newline\"",
        ),
        ("[keys]\nsubmit = 3\n", "config.toml"),
    ] {
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
            .arg("--home")
            .arg(home.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{config}: {stderr}");
        assert!(stderr.contains(expected), "{config}: {stderr}");
        assert!(stderr.contains("config.toml"), "names the file: {stderr}");
    }
}
