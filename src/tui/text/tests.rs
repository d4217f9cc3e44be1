//! Unit tests of `tui::text`: widths, wrapping, styled text, ages.
use super::*;

fn plain(lines: &[Line]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

fn text(s: &str) -> StyledText {
    let mut t = StyledText::new();
    t.push(s, Style::default());
    t
}

#[test]
fn wraps_on_spaces_then_mid_word() {
    let none = StyledText::new();
    let lines = text("hello brave new world").wrap(11, &none, &none);
    assert_eq!(plain(&lines), ["hello brave", "new world"]);
    let lines = text("abcdefghij").wrap(4, &none, &none);
    assert_eq!(plain(&lines), ["abcd", "efgh", "ij"]);
    let lines = text("a\n\nb").wrap(4, &none, &none);
    assert_eq!(plain(&lines), ["a", "", "b"]);
    let lines = text("one two").wrap(5, &text("> "), &text("  "));
    assert_eq!(plain(&lines), ["> one", "  two"]);
}

#[test]
fn truncation_marks_the_cut() {
    assert_eq!(text("abcdef").truncate(4).to_line().to_string(), "abc…");
    assert_eq!(text("abcdef").truncate(6).to_line().to_string(), "abcdef");
    assert_eq!(
        text("abcdef").truncate_left(4).to_line().to_string(),
        "…def"
    );
    assert_eq!(text("漢字漢字").truncate(4).to_line().to_string(), "漢…");
    assert_eq!(text("abc").truncate(0).width(), 0);
}

const FAMILY: &str = "\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}";
const FRANCE: &str = "\u{1f1eb}\u{1f1f7}";

/// Where the buffer itself ends up after drawing `s` in one style.
fn drawn_width(s: &str) -> usize {
    let area = ratatui::layout::Rect::new(0, 0, 80, 1);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    usize::from(buf.set_stringn(0, 0, s, 80, Style::default()).0)
}

#[test]
fn widths_are_what_the_buffer_draws() {
    for s in [
        FAMILY,
        FRANCE,
        "a\u{1f44d}\u{1f3fd}b",
        "e\u{301}",
        "\u{1100}\u{1161}\u{11a8}",
        "漢字",
    ] {
        assert_eq!(text(s).width(), drawn_width(s), "{s:?}");
    }
}

#[test]
fn truncation_and_wrapping_never_split_a_cluster() {
    // The family is 2 cells wide: truncating to 3 keeps it whole, to 2 drops it whole.
    let t = text(&format!("{FAMILY}xyz"));
    assert_eq!(t.truncate(4).to_line().to_string(), format!("{FAMILY}x…"));
    assert_eq!(t.truncate(2).to_line().to_string(), "…");
    let t = text(&format!("abc{FRANCE}{FRANCE}"));
    assert_eq!(
        t.truncate_left(4).to_line().to_string(),
        format!("…{FRANCE}")
    );
    let none = StyledText::new();
    let lines = text(&format!("ab{FAMILY}{FAMILY}")).wrap(4, &none, &none);
    assert_eq!(plain(&lines), [format!("ab{FAMILY}"), FAMILY.to_string()]);
    let lines = text("ae\u{301}\u{301}bc").wrap(2, &none, &none);
    assert_eq!(plain(&lines), ["ae\u{301}\u{301}", "bc"]);
}

proptest::proptest! {
    /// The windowed segmentation agrees with segmenting each style run whole.
    #[test]
    fn units_match_whole_run_segmentation(
        parts in proptest::collection::vec(
            (proptest::sample::select(vec![
                "a", " ", "\n", "\r", "\u{301}", "\u{200d}", "\u{1f468}", "\u{1f1eb}",
                "\u{1f3fd}", "\u{1100}", "\u{1161}", "\u{11a8}", "\u{ac00}", "漢", "\u{600}",
                "\u{903}", "\u{fe0f}", "é", "\u{915}", "\u{94d}", "\u{a9}", "\u{1f1f7}",
            ]), 0u8..40),
            0..400,
        )
    ) {
        let mut t = StyledText::new();
        for (part, bold) in &parts {
            let style = if *bold == 0 { Style::new().bold() } else { Style::new() };
            t.push(part, style);
        }
        let got: Vec<(usize, usize)> = units(&t.cells).map(|u| (u.start, u.end)).collect();
        let mut want = Vec::new();
        let mut i = 0;
        while i < t.cells.len() {
            let style = t.cells[i].1;
            let run: String = t.cells[i..].iter().take_while(|c| c.1 == style).map(|c| c.0).collect();
            for g in run.graphemes(true) {
                let n = g.chars().count();
                want.push((i, i + n));
                i += n;
            }
        }
        proptest::prop_assert_eq!(got, want);
    }
}

#[test]
fn char_width_fast_path_agrees_with_the_buffer() {
    for c in (' '..='~')
        .chain('\u{a0}'..='\u{ac}')
        .chain('\u{ae}'..='\u{2ff}')
    {
        let mut bytes = [0u8; 4];
        assert_eq!(Span::raw(&*c.encode_utf8(&mut bytes)).width(), 1, "{c:?}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    /// A boundary called certain is one in the whole text, whatever surrounds the pair.
    #[test]
    fn certain_boundaries_are_boundaries(
        chars in proptest::collection::vec(proptest::sample::select(vec![
            'a', ' ', '\n', '\r', '\u{1b}', '\u{301}', '\u{200d}', '\u{1f468}', '\u{1f1eb}',
            '\u{1f1f7}', '\u{1f3fd}', '\u{1100}', '\u{1161}', '\u{11a8}', '\u{ac00}', '漢',
            '\u{600}', '\u{903}', '\u{fe0f}', 'é', '\u{915}', '\u{94d}', '\u{a9}', '\u{200b}',
            '\u{ad}', '\u{e0020}', '\u{110bd}', '\u{1f44d}', '\u{2764}', '\u{20e3}', '#',
        ]), 0..24)
    ) {
        let text: String = chars.iter().collect();
        let mut boundaries = std::collections::HashSet::new();
        let mut at = 0;
        for g in text.graphemes(true) {
            boundaries.insert(at);
            at += g.chars().count();
        }
        for k in 1..chars.len() {
            if certain_boundary(chars[k - 1], chars[k]) {
                proptest::prop_assert!(boundaries.contains(&k), "{:?} at {}", text, k);
            }
        }
    }
}

#[test]
fn case_insensitive_marks() {
    let marks = ci_matches("Fix LOGIN login", "login");
    let got: String = marks.iter().map(|m| if *m { '^' } else { ' ' }).collect();
    assert_eq!(got, "    ^^^^^ ^^^^^");
    assert!(ci_matches("abc", "").iter().all(|m| !m));
    assert!(ci_matches("ab", "abc").iter().all(|m| !m));
}

#[test]
fn untrusted_text_is_escaped_and_tabs_expand() {
    let mut t = StyledText::new();
    t.push_untrusted("a\u{1b}\tb\r\nc", EscapeMode::MultiLine, Style::default());
    let none = StyledText::new();
    assert_eq!(plain(&t.wrap(40, &none, &none)), ["a\\x1B    b", "c"]);
}
