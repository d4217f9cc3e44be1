//! The composer: atomic mentions, canonical submission text, history, drawing.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::reference::Candidate;
use dsh_session_references::tui::composer::Composer;
use dsh_session_references::tui::focus::{Command, Handled};
use dsh_session_references::tui::popup::{PopupItem, PopupState};
use dsh_session_references::tui::snapshot::render_snapshot;
use dsh_session_references::tui::Renderable;
use insta::assert_snapshot;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn type_str(composer: &mut Composer, text: &str) {
    for c in text.chars() {
        composer.handle_key(key(KeyCode::Char(c)));
    }
}

fn candidate(id: &str, label: &str) -> Candidate {
    Candidate {
        session_id: id.into(),
        label: label.into(),
        cwd: Some("/home/dev/webapp".into()),
        created_at: 0,
    }
}

/// Draws at `width` with the composer's own height, marking the cursor cell with `▮`.
fn draw(composer: &Composer, width: u16) -> String {
    let height = composer.desired_height(width);
    render_snapshot(width, height, |area, buf| {
        composer.render(area, buf);
        if let Some(pos) = composer.cursor_position(area) {
            buf[(pos.x, pos.y)].set_symbol("▮");
        }
    })
}

fn with_mention() -> Composer {
    let mut composer = Composer::new();
    type_str(&mut composer, "Compare with @web");
    let token = composer.active_token().expect("an @ token");
    assert_eq!(token.query, "web");
    assert!(!token.quoted);
    composer.insert_mention(&candidate("session-7f3a", "Fix webapp [login] loop"));
    type_str(&mut composer, "and tell me what differs");
    composer
}

#[test]
fn mention_is_drawn_compactly_and_submitted_canonically() {
    let composer = with_mention();
    assert_eq!(
        composer.display_text(),
        "Compare with @Fix webapp [login] loop and tell me what differs"
    );
    assert_eq!(
        composer.submission_text(),
        "Compare with @[Fix webapp [login\\] loop](dsh-session:InNlc3Npb24tN2YzYSI) and tell me what differs"
    );
    assert_snapshot!(draw(&composer, 50));
}

#[test]
fn mention_is_deleted_and_skipped_as_one_unit() {
    let mut composer = with_mention();
    // Put the cursor just after the mention's trailing space.
    for _ in 0.."and tell me what differs".len() {
        composer.handle_key(key(KeyCode::Left));
    }
    composer.handle_key(key(KeyCode::Left)); // over the space
    composer.handle_key(key(KeyCode::Left)); // over the whole mention
    assert_eq!(composer.cursor(), "Compare with ".len());
    composer.handle_key(key(KeyCode::Right)); // back over it
    assert_eq!(composer.cursor(), "Compare with ".len() + 1);
    composer.handle_key(key(KeyCode::Backspace));
    assert_eq!(
        composer.display_text(),
        "Compare with  and tell me what differs"
    );
    assert!(composer.mentions().is_empty());
    assert!(!composer.submission_text().contains("dsh-session"));

    let mut composer = with_mention();
    composer.handle_key(key(KeyCode::Home));
    for _ in 0.."Compare with ".len() {
        composer.handle_key(key(KeyCode::Right));
    }
    composer.handle_key(key(KeyCode::Delete));
    assert_eq!(
        composer.display_text(),
        "Compare with  and tell me what differs"
    );
}

#[test]
fn hostile_label_is_escaped_in_the_mention_but_the_uri_keeps_the_raw_id() {
    let mut composer = Composer::new();
    type_str(&mut composer, "@");
    composer.insert_mention(&candidate("id\u{1b}x", "evil\u{1b}]0;x\u{7}\nnext"));
    assert_eq!(composer.display_text(), "@evil\\x1B]0;x\\x07\\x0Anext ");
    assert_eq!(
        composer.submission_text(),
        // label escaped for the screen, then `\` and `]` escaped by the Markdown; id raw
        "@[evil\\\\x1B\\]0;x\\\\x07\\\\x0Anext](dsh-session:ImlkXHUwMDFieCI) "
    );
    assert_snapshot!(draw(&composer, 40));
}

#[test]
fn popup_and_composer_together() {
    let mut composer = Composer::new();
    let mut popup = PopupState::new();
    type_str(&mut composer, "see @7f");
    let request = popup
        .sync(composer.active_token().as_ref())
        .expect("lookup");
    assert_eq!(request.query, "7f");
    popup.apply_results(request.id, Ok(vec![candidate("session-7f3a", "Fix login")]));
    // Enter inserts in the popup; it does not send.
    let outcome = popup.handle_key(key(KeyCode::Enter));
    let Handled::Emit(Command::Insert(item)) = outcome else {
        panic!("expected accept, got {outcome:?}");
    };
    assert!(matches!(item, PopupItem::Session(_)));
    composer.insert_item(&item);
    assert!(popup.sync(composer.active_token().as_ref()).is_none());
    assert!(!popup.is_open());
    assert_eq!(composer.display_text(), "see @Fix login ");
}

#[test]
fn esc_closes_the_popup_and_leaves_the_text() {
    let mut composer = Composer::new();
    let mut popup = PopupState::new();
    type_str(&mut composer, "@abc");
    popup.sync(composer.active_token().as_ref());
    assert!(popup.is_open());
    assert_eq!(popup.handle_key(key(KeyCode::Esc)), Handled::Consumed);
    assert!(!popup.is_open());
    assert_eq!(composer.display_text(), "@abc");
    // Typing on in the same token keeps it closed; a new token opens it again.
    type_str(&mut composer, "d");
    assert!(popup.sync(composer.active_token().as_ref()).is_none());
    assert!(!popup.is_open());
    type_str(&mut composer, " @x");
    assert!(popup.sync(composer.active_token().as_ref()).is_some());
    assert!(popup.is_open());
}

#[test]
fn history_recall_keeps_mentions_and_the_draft() {
    let mut composer = with_mention();
    let (sent, _) = composer.take_submission();
    assert!(sent.contains("dsh-session:"));
    type_str(&mut composer, "second");
    composer.take_submission();
    type_str(&mut composer, "draft");

    assert_eq!(
        composer.handle_key(key(KeyCode::Up)),
        Handled::Emit(Command::Edited)
    );
    assert_eq!(composer.display_text(), "second");
    assert_eq!(
        composer.handle_key(key(KeyCode::Up)),
        Handled::Emit(Command::Edited)
    );
    assert_eq!(composer.submission_text(), sent);
    assert_eq!(composer.mentions().len(), 1);
    assert_eq!(composer.handle_key(key(KeyCode::Up)), Handled::Ignored);
    composer.handle_key(key(KeyCode::Down));
    assert_eq!(composer.display_text(), "second");
    composer.handle_key(key(KeyCode::Down));
    assert_eq!(composer.display_text(), "draft");
}

#[test]
fn failed_send_restores_the_input() {
    let mut composer = with_mention();
    let before = composer.submission_text();
    let (_, snapshot) = composer.take_submission();
    assert!(composer.is_empty());
    composer.restore(snapshot);
    assert_eq!(composer.submission_text(), before);
    assert_eq!(composer.mentions().len(), 1);
}

#[test]
fn multi_line_with_wrapping_and_cursor() {
    let mut composer = Composer::new();
    type_str(&mut composer, "first line");
    composer.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    type_str(&mut composer, "a much longer second line that wraps around");
    composer.handle_key(ctrl('j'));
    type_str(&mut composer, "third");
    draw(&composer, 30); // Up/Down follow the wrapped rows of the last draw
    assert_eq!(
        composer.handle_key(key(KeyCode::Up)),
        Handled::Emit(Command::Moved)
    );
    assert_snapshot!(draw(&composer, 30));
}

#[test]
fn placeholder_when_empty() {
    assert_snapshot!(draw(&Composer::new(), 50));
}

#[test]
fn collapsed_paste() {
    let mut composer = Composer::new();
    composer.insert_str("Review this log: ");
    let log: String = (1..=200).map(|n| format!("12:00:{n:02} ok\n")).collect();
    composer.handle_paste(&log);
    composer.insert_str(" and say what failed");
    let out = render_snapshot(60, 5, |area, buf| composer.render(area, buf));
    assert!(composer.submission_text().contains("12:00:200 ok"));
    insta::assert_snapshot!(out);
}

#[test]
fn mention_badges() {
    let mut composer = Composer::new();
    composer.insert_str("compare @");
    composer.insert_mention(&candidate("session-1", "Fix login"));
    composer.insert_str("with @");
    composer.insert_mention(&candidate("session-2", "Old terraform"));
    let mut badges = std::collections::BTreeMap::new();
    badges.insert("session-1".to_string(), "12 msgs · 48 KiB".to_string());
    badges.insert(
        "session-2".to_string(),
        "truncated · kept 1/104 msgs · 64 KiB".to_string(),
    );
    composer.set_badges(badges);
    let out = render_snapshot(70, 5, |area, buf| composer.render(area, buf));
    assert!(composer.submission_text().contains("dsh-session:"));
    assert!(
        !composer.submission_text().contains("msgs"),
        "badges are not sent"
    );
    insta::assert_snapshot!(out);
}
