//! The composer's unit tests: tokens and chips, clusters, history, keys and pastes.

use super::*;
use crate::reference::Candidate;
use crate::tui::snapshot::render_snapshot;
use crate::tui::Renderable;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

pub(super) fn typed(text: &str) -> Composer {
    let mut c = Composer::new();
    c.insert_str(text);
    c
}

fn at(text: &str, cursor: usize) -> Composer {
    let mut c = typed(text);
    c.cursor = cursor;
    c
}

fn token(c: &Composer) -> Option<(String, bool)> {
    c.active_token().map(|t| (t.query, t.quoted))
}

pub(super) fn candidate(id: &str, label: &str) -> Candidate {
    Candidate {
        session_id: id.into(),
        label: label.into(),
        cwd: None,
        created_at: 0,
    }
}

#[test]
fn tokens_start_at_a_boundary() {
    assert_eq!(token(&typed("@")), Some((String::new(), false)));
    assert_eq!(token(&typed("hi @ses")), Some(("ses".into(), false)));
    assert_eq!(token(&typed("line\n@ses")), Some(("ses".into(), false)));
    assert_eq!(token(&typed("mail me@host")), None);
    assert_eq!(token(&typed("@ses done")), None, "cursor past the token");
    // Cursor in the middle of a token: the whole token is the query.
    assert_eq!(token(&at("@session x", 3)), Some(("session".into(), false)));
    // Cursor before the `@` is not in the token.
    assert_eq!(token(&at("a @ses", 2)), None);
}

#[test]
fn quoted_tokens_are_paths_and_may_hold_spaces() {
    assert_eq!(token(&typed("@\"")), Some((String::new(), true)));
    assert_eq!(token(&typed("open @\"my fi")), Some(("my fi".into(), true)));
    let closed = at("@\"my file\" next", 5);
    assert_eq!(token(&closed), Some(("my file".into(), true)));
    let mut c = typed("@\"my fi");
    c.insert_file("docs/my file.md");
    assert_eq!(c.display_text(), "@\"docs/my file.md\" ");
    let mut c = typed("see @mai");
    c.insert_file("src/main.rs");
    assert_eq!(c.display_text(), "see @src/main.rs ");
}

fn chip(path: &str) -> FileElement {
    FileElement {
        path: path.into(),
        bytes: 2048,
        outside: false,
    }
}

#[test]
fn long_chip_names_are_cut_never_wrapped() {
    let label = format!("{} tail-of-the-title", "very long title ".repeat(12));
    let mut c = typed("see ");
    c.insert_mention(&candidate("s-1", &label));
    let deep = format!("{}name.rs", "deeply/nested/dir/".repeat(6));
    c.insert_str(&format!(" @{deep}"));
    let token = c.plain_tokens().pop().expect("the typed path is a token");
    assert!(c.make_chip(&token, chip(&deep)));
    let out = render_snapshot(70, 6, |area, buf| c.render(area, buf));
    // Each chip is one short unit: the label keeps its start, the path its file name.
    assert!(
        out.contains("@very long title very long title very l…"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("@…") && l.contains("nested/dir/name.rs ⟨2 KiB⟩")),
        "the path chip is one row, its start cut: {out}"
    );
    assert!(!out.contains("tail-of-the-title"), "{out}");
    // What is sent is whole.
    let sent = c.snapshot().submission_text();
    assert!(sent.contains("tail-of-the-title"), "{sent}");
    assert!(sent.contains(&deep), "{sent}");
}

#[test]
fn only_plain_typed_tokens_become_chips() {
    let mut c = typed("see @src/main.rs, and @\"my file\" x");
    let paths: Vec<String> = c.plain_tokens().into_iter().map(|t| t.path).collect();
    assert_eq!(paths, ["src/main.rs,", "my file"]);
    let token = c.plain_token_ending_at(17).unwrap();
    assert!(c.make_chip(&token, chip("src/main.rs")));
    assert_eq!(c.display_text(), "see @src/main.rs, and @\"my file\" x");
    assert_eq!(c.files().len(), 1);
    assert_eq!(c.cursor(), c.elems.len(), "the cursor stays at the end");
    assert_eq!(
        c.snapshot().files(),
        [chip("src/main.rs")],
        "the send gets the chip itself"
    );
    // A token inside a collapsed paste or a mention label is no token of the text.
    let mut c = Composer::new();
    c.handle_paste(&format!("{}@/home/me/.ssh/id_rsa", "x\n".repeat(20)));
    c.insert_mention(&candidate("s", "notes @/etc/passwd"));
    assert!(c.plain_tokens().is_empty());
    // A chip goes back to text in history: a recalled line attaches nothing by itself.
    let mut c = typed("@a.md ");
    let token = c.plain_token_ending_at(5).unwrap();
    assert!(c.make_chip(&token, chip("a.md")));
    assert_eq!(
        ComposerSnapshot::from_parts(c.snapshot().parts()).files(),
        []
    );
    // Edited away before the answer: nothing to replace.
    let mut c = typed("@b.md ");
    let token = c.plain_token_ending_at(5).unwrap();
    c.clear();
    assert!(!c.make_chip(&token, chip("b.md")));
}

#[test]
fn a_token_glued_to_a_mention_is_not_at_a_boundary() {
    let mut c = typed("@");
    c.insert_mention(&candidate("a", "A"));
    c.backspace(); // drop the space: `@A` followed directly by `@`
    c.insert_str("@x");
    assert_eq!(token(&c), None);
}

#[test]
fn mention_replaces_the_token_in_the_middle_of_text() {
    let mut c = typed("ask @ses about it");
    c.cursor = 8;
    c.insert_mention(&candidate("s-1", "Fix"));
    assert_eq!(c.display_text(), "ask @Fix  about it");
    assert_eq!(c.cursor(), 6);
    assert_eq!(
        c.submission_text(),
        "ask @[Fix](dsh-session:InMtMSI)  about it"
    );
}

#[test]
fn mention_markdown_matches_the_spec_examples() {
    let markdown = |id: &str, label: &str| {
        MentionElement {
            label: label.to_string(),
            session_id: id.to_string(),
        }
        .markdown()
    };
    assert_eq!(
        markdown("target", "target"),
        "@[target](dsh-session:InRhcmdldCI)"
    );
    assert_eq!(markdown("", ""), "@[](dsh-session:IiI)");
    assert_eq!(
        markdown("😀", "a\\b]c"),
        "@[a\\\\b\\]c](dsh-session:IvCfmIAi)"
    );
}

#[test]
fn combining_marks_move_with_their_base() {
    let mut c = typed("ae\u{301}b");
    c.move_left();
    assert_eq!(c.cursor(), 3);
    c.move_left();
    assert_eq!(c.cursor(), 1);
    c.move_right();
    assert_eq!(c.cursor(), 3);
    c.backspace();
    assert_eq!(c.display_text(), "ab");
}

/// Backspace from the end until empty: what each press removed.
fn backspaced(text: &str) -> Vec<String> {
    let mut c = typed(text);
    let mut removed = Vec::new();
    while !c.is_empty() {
        let before = c.display_text();
        assert!(c.backspace());
        removed.push(before[c.display_text().len()..].to_string());
    }
    removed
}

const FAMILY: &str = "\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}";
const FRANCE: &str = "\u{1f1eb}\u{1f1f7}";
const GERMANY: &str = "\u{1f1e9}\u{1f1ea}";
const THUMB_MEDIUM: &str = "\u{1f44d}\u{1f3fd}";
/// 각 as conjoining jamo (L V T).
const HANGUL_JAMO: &str = "\u{1100}\u{1161}\u{11a8}";

#[test]
fn backspace_removes_whole_grapheme_clusters() {
    assert_eq!(backspaced(&format!("a{FAMILY}")), [FAMILY, "a"]);
    assert_eq!(backspaced(&format!("{FRANCE}{GERMANY}")), [GERMANY, FRANCE]);
    assert_eq!(backspaced(&format!("x{THUMB_MEDIUM}")), [THUMB_MEDIUM, "x"]);
    assert_eq!(backspaced("e\u{301}\u{302}!"), ["!", "e\u{301}\u{302}"]);
    assert_eq!(
        backspaced(&format!("{HANGUL_JAMO}{HANGUL_JAMO}")),
        [HANGUL_JAMO; 2]
    );
    // Text before and after stays exactly as typed.
    let mut c = typed(&format!("hi {FAMILY} there"));
    c.cursor = 3 + FAMILY.chars().count();
    c.backspace();
    assert_eq!(c.display_text(), "hi  there");
}

#[test]
fn delete_and_arrows_step_over_whole_clusters() {
    for cluster in [FAMILY, FRANCE, THUMB_MEDIUM, "e\u{301}", HANGUL_JAMO] {
        let text = format!("<{cluster}{cluster}>");
        let n = cluster.chars().count();
        let mut c = typed(&text);
        c.cursor = 1;
        c.move_right();
        assert_eq!(c.cursor(), 1 + n, "{cluster:?}");
        c.move_right();
        assert_eq!(c.cursor(), 1 + 2 * n, "{cluster:?}");
        c.move_left();
        assert_eq!(c.cursor(), 1 + n, "{cluster:?}");
        c.delete();
        assert_eq!(c.display_text(), format!("<{cluster}>"), "{cluster:?}");
        c.move_left();
        assert_eq!(c.cursor(), 1, "{cluster:?}");
        c.delete();
        assert_eq!(c.display_text(), "<>", "{cluster:?}");
    }
    // Regional indicators pair from the start of their run: the middle is not a boundary.
    let mut c = typed(&format!("{FRANCE}{GERMANY}{FRANCE}"));
    c.move_left();
    c.move_left();
    assert_eq!(c.cursor(), 2);
}

#[test]
fn word_motions_never_stop_inside_a_cluster() {
    // A space that a combining mark extends is one cluster with it.
    let mut c = typed("ab \u{301}cd");
    c.move_word_left();
    assert_eq!(c.cursor(), 2);
    let mut c = typed(&format!("x {THUMB_MEDIUM} y"));
    c.cursor = 0;
    c.move_word_right();
    assert_eq!(c.cursor(), 1);
    c.move_word_right();
    assert_eq!(c.cursor(), 4);
    c.delete_word_back();
    assert_eq!(c.display_text(), "x  y");
}

#[test]
fn mentions_stay_atomic_next_to_clusters() {
    let mut c = typed("@");
    c.insert_mention(&candidate("s-1", "Fix"));
    c.insert_str(FAMILY);
    c.insert_str("\u{301}");
    assert_eq!(c.mentions().len(), 1);
    c.backspace(); // the mark extends the family: both go
    assert_eq!(c.display_text(), "@Fix ");
    c.backspace();
    assert_eq!(c.display_text(), "@Fix");
    c.backspace();
    assert_eq!(c.display_text(), "");
    // A mark typed right after a mention does not merge into it.
    let mut c = typed("@");
    c.insert_mention(&candidate("s-1", "Fix"));
    c.backspace();
    c.insert_str("\u{301}");
    c.move_left();
    assert_eq!(c.cursor(), 1);
    c.move_left();
    assert_eq!(c.cursor(), 0);
    c.delete();
    assert_eq!(c.display_text(), "\u{301}");
    assert!(c.mentions().is_empty());
}

#[test]
fn cursor_column_counts_cells_per_cluster() {
    for cluster in [FAMILY, FRANCE, THUMB_MEDIUM, "e\u{301}", HANGUL_JAMO, "漢"] {
        let text = format!("a{cluster}b");
        let c = typed(&text);
        let area = Rect::new(0, 0, 40, 3);
        let pos = c.cursor_position(area).unwrap();
        // Where the buffer itself ends up after drawing the same text.
        let mut buf = Buffer::empty(area);
        let (x, _) = buf.set_stringn(0, 0, &text, 40, Style::new());
        let origin = Composer::text_area(area).x;
        assert_eq!(pos.x - origin, x, "{cluster:?}");
    }
}

#[test]
fn rows_never_wrap_inside_a_cluster() {
    let c = typed(&format!("abc{FAMILY}"));
    // The family is 2 cells: at width 4 it moves to the next row whole.
    assert_eq!(c.layout(4), vec![0..3, 3..8]);
}

#[test]
fn a_failed_message_goes_back_in_front_of_the_new_draft() {
    let mut c = typed("@");
    c.insert_mention(&candidate("s-1", "Fix"));
    c.insert_str("please");
    let sent = c.take_draft();
    assert!(c.is_empty());
    c.insert_str("next");
    c.move_left();
    c.restore_before(sent.clone());
    assert_eq!(c.display_text(), "@Fix please\nnext");
    assert_eq!(c.mentions().len(), 1, "the mention is back as a mention");
    c.insert_char('!');
    assert_eq!(
        c.display_text(),
        "@Fix please\nnex!t",
        "cursor where typing was"
    );
    // Nothing typed since: the message comes back as it was, cursor included.
    let mut c = Composer::new();
    c.restore_before(sent.clone());
    assert_eq!(c.snapshot(), sent);
    // A draft already starting on a new line gets no second line break.
    let mut c = typed("\nx");
    c.restore_before(sent);
    assert_eq!(c.display_text(), "@Fix please\nx");
}

#[test]
fn filing_a_sent_message_keeps_history_browsing_and_its_draft() {
    let mut c = typed("old");
    let old = c.take_draft();
    c.push_history(old);
    let sent = {
        c.insert_str("sent");
        c.take_draft()
    };
    c.insert_str("typed meanwhile");
    assert_eq!(c.move_up(), Handled::Emit(Command::Edited));
    assert_eq!(c.display_text(), "old");
    c.push_history(sent);
    assert_eq!(c.move_down(), Handled::Emit(Command::Edited));
    assert_eq!(c.display_text(), "sent");
    assert_eq!(c.move_down(), Handled::Emit(Command::Edited));
    assert_eq!(c.display_text(), "typed meanwhile");
}

#[test]
fn editing_a_recalled_message_keeps_the_draft_it_replaced() {
    let mut c = typed("old");
    let old = c.take_draft();
    c.push_history(old);
    c.insert_str("half typed");
    assert_eq!(c.move_up(), Handled::Emit(Command::Edited));
    assert_eq!(c.display_text(), "old");
    c.insert_char('!');
    assert_eq!(c.display_text(), "old!");
    assert_eq!(c.move_up(), Handled::Emit(Command::Edited));
    assert_eq!(
        c.display_text(),
        "half typed",
        "the replaced draft is recalled"
    );
    assert_eq!(c.move_down(), Handled::Emit(Command::Edited));
    assert_eq!(c.display_text(), "old!", "and the edit is the draft now");
}

#[test]
fn line_keys() {
    let mut c = typed("one\ntwo words");
    c.handle_key(KeyEvent::new(KeyCode::Char('a'), KeyModifiers::CONTROL));
    assert_eq!(c.cursor(), 4);
    c.handle_key(KeyEvent::new(KeyCode::Char('e'), KeyModifiers::CONTROL));
    assert_eq!(c.cursor(), 13);
    c.handle_key(KeyEvent::new(KeyCode::Char('w'), KeyModifiers::CONTROL));
    assert_eq!(c.display_text(), "one\ntwo ");
    c.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    assert_eq!(c.display_text(), "one\n");
    c.handle_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
    assert_eq!(c.display_text(), "one");
    assert_eq!(
        c.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        Handled::Emit(Command::Submit)
    );
    c.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT));
    c.handle_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::CONTROL));
    assert_eq!(c.display_text(), "one\n\n");
}

#[test]
fn a_large_paste_is_collapsed_but_sent_whole() {
    let big: String = (1..=200).map(|n| format!("line {n}\r\n")).collect();
    let mut c = typed("see ");
    c.handle_paste(&big);
    c.insert_str(" thanks");
    assert_eq!(c.display_text(), "see [Pasted 200 lines] thanks");
    assert_eq!(
        c.submission_text(),
        format!("see {} thanks", big.replace("\r\n", "\n"))
    );
    assert_eq!(c.desired_height(60), 3, "one row, not two hundred");
    // One unit for the cursor and for deletion.
    for _ in 0.." thanks".len() {
        c.backspace();
    }
    c.backspace();
    assert_eq!(c.display_text(), "see ");
    // One long line collapses by its length; a short paste stays text.
    let mut c = Composer::new();
    c.handle_paste(&"x".repeat(PASTE_COLLAPSE_CHARS + 1));
    assert_eq!(
        c.display_text(),
        format!("[Pasted {} chars]", PASTE_COLLAPSE_CHARS + 1)
    );
    let mut c = Composer::new();
    c.handle_paste("a\nb");
    assert_eq!(c.display_text(), "a\nb");
}

#[test]
fn paste_normalizes_line_endings_and_never_submits() {
    let mut c = Composer::new();
    assert_eq!(c.handle_paste("a\r\nb\rc"), Handled::Emit(Command::Edited));
    assert_eq!(c.display_text(), "a\nb\nc");
}
