//! The composer's layout tests and property tests (clusters, mentions, tokens over random input).

use super::layout::cluster_width;
use super::tests::{candidate, typed};
use super::*;
use crate::tui::snapshot::render_snapshot;
use crate::tui::Renderable;
use proptest::prelude::*;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use unicode_segmentation::UnicodeSegmentation;

#[test]
fn up_and_down_follow_wrapped_rows() {
    let mut c = typed("abcdefghij");
    c.last_width.set(4);
    assert_eq!(c.layout(4), vec![0..4, 4..8, 8..10]);
    assert_eq!(c.move_up(), Handled::Emit(Command::Moved));
    assert_eq!(c.cursor(), 6);
    assert_eq!(c.move_up(), Handled::Emit(Command::Moved));
    assert_eq!(c.cursor(), 2);
    assert_eq!(c.move_up(), Handled::Ignored, "no history");
    assert_eq!(c.move_down(), Handled::Emit(Command::Moved));
    assert_eq!(c.cursor(), 6);
}

#[test]
fn a_full_row_gives_the_cursor_a_row_of_its_own() {
    let c = typed("abcd");
    assert_eq!(c.layout(4), vec![0..4, 4..4]);
    let pos = c.cursor_position(Rect::new(0, 0, 8, 5)).unwrap();
    assert_eq!((pos.x, pos.y), (3, 2));
}

#[test]
fn the_layout_is_computed_once_per_frame() {
    let mut c = typed("one two three four five six seven");
    let area = Rect::new(0, 0, 20, 6);
    let frame = |c: &Composer| {
        let mut buf = Buffer::empty(area);
        let _ = c.desired_height(area.width);
        c.render(area, &mut buf);
        c.cursor_pos(area)
    };
    let before = c.layouts.get();
    let first = frame(&c);
    assert_eq!(
        c.layouts.get(),
        before + 1,
        "height, drawing and cursor share one"
    );
    assert_eq!(frame(&c), first);
    assert_eq!(
        c.layouts.get(),
        before + 1,
        "an unchanged frame computes none"
    );
    c.insert_char('!');
    let edited = frame(&c);
    assert_eq!(c.layouts.get(), before + 2);
    assert_ne!(edited, first, "and an edit is seen");
    c.move_left();
    frame(&c);
    assert_eq!(c.layouts.get(), before + 3, "a cursor move is seen too");
}

#[test]
fn words_wrap_with_hanging_spaces() {
    let c = typed("ab cd  ef");
    assert_eq!(c.layout(4), vec![0..3, 3..7, 7..9]);
}

proptest! {
    /// The private helper must agree with the service's parser: whatever id and label a
    /// candidate has, the submitted text parses back to that id and the drawn label.
    #[test]
    fn submission_round_trips_through_the_parser(id in any::<String>(), label in any::<String>()) {
        let mut c = typed("x @q");
        c.insert_mention(&candidate(&id, &label));
        let parsed = crate::reference::parse_session_reference_text(&c.submission_text())
            .expect("canonical mention parses");
        prop_assert_eq!(parsed.references.len(), 1);
        prop_assert_eq!(&parsed.references[0].session_id, &id);
        let shown = escape::escape_line(&label);
        prop_assert_eq!(&parsed.references[0].label, shown.as_ref());
        prop_assert_eq!(parsed.text, c.display_text());
    }
}

proptest! {
    /// Clusters and widths found from fixed boundaries agree with segmenting each run of
    /// characters (between mentions) whole.
    #[test]
    fn clusters_match_whole_text_segmentation(
        parts in proptest::collection::vec(proptest::sample::select(vec![
            "a", " ", "\n", "\t", "\u{1b}", "\u{301}", "\u{200d}", "\u{1f468}", "\u{1f1eb}",
            "\u{1f3fd}", "\u{1100}", "\u{1161}", "\u{11a8}", "\u{ac00}", "漢", "\u{600}",
            "\u{903}", "\u{fe0f}", "é", "@M", "\u{915}", "\u{94d}", "\u{a9}", "\u{1f1f7}",
            "\u{200b}", "\u{d}",
        ]), 0..200)
    ) {
        let mut c = Composer::new();
        for part in &parts {
            if *part == "@M" {
                c.insert_mention_element(MentionElement {
                    label: "M\u{1f468}".into(),
                    session_id: "m".into(),
                });
            } else {
                c.insert_str(part);
            }
        }
        let widths = c.cell_widths();
        let mut i = 0;
        while i < c.elems.len() {
            if c.elems[i].is_atom() {
                prop_assert_eq!(c.cluster_at(i), i..i + 1);
                prop_assert_eq!(widths[i], 4);
                i += 1;
                continue;
            }
            let run: String = c.elems[i..]
                .iter()
                .map_while(|e| match e {
                    Elem::Char(ch) => Some(*ch),
                    _ => None,
                })
                .collect();
            for g in run.graphemes(true) {
                let n = g.chars().count();
                for j in i..i + n {
                    prop_assert_eq!(c.cluster_at(j), i..i + n, "{:?}", g);
                }
                let want = if g == "\n" { 0 } else { cluster_width(g) };
                prop_assert_eq!(widths[i], want, "{:?}", g);
                prop_assert!(widths[i + 1..i + n].iter().all(|w| *w == 0));
                i += n;
            }
        }
    }
}

proptest! {
    #[test]
    fn random_edits_and_sizes_never_panic(
        text in "\\PC{0,40}|[a-z @\"\\n\\t\\x1b]{0,40}",
        keys in proptest::collection::vec(0u8..14, 0..40),
        w in 0u16..60,
        h in 0u16..8,
    ) {
        let mut c = typed(&text);
        for k in keys {
            let code = match k {
                0 => KeyCode::Left,
                1 => KeyCode::Right,
                2 => KeyCode::Up,
                3 => KeyCode::Down,
                4 => KeyCode::Backspace,
                5 => KeyCode::Delete,
                6 => KeyCode::Home,
                7 => KeyCode::End,
                8 => KeyCode::Char('@'),
                9 => KeyCode::Char(' '),
                10 => KeyCode::Char('"'),
                _ => KeyCode::Char('é'),
            };
            c.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
            if k == 13 {
                c.insert_mention(&candidate("id", "x\u{1b}y"));
            }
            if let Some(t) = c.active_token() {
                prop_assert!(t.start < t.end && t.end <= c.elems.len());
            }
            prop_assert!(c.cursor() <= c.elems.len());
        }
        let _ = c.desired_height(w);
        let out = render_snapshot(w, h, |area, buf| c.render(area, buf));
        prop_assert!(!out.contains('\x1b'), "raw ESC on screen");
        if let Some(p) = c.cursor_position(Rect::new(0, 0, w, h)) {
            prop_assert!(p.x < w && p.y < h);
        }
    }
}
