//! A reviewable text form of a rendered buffer, for snapshot tests here and in hosts.
//!
//! The plain grid alone would hide what matters in this bundle (which characters are
//! highlighted, what is dim, which row is selected), and ratatui's `Debug` output is hard to
//! read in a diff. So the grid is followed by one line per run of equally styled cells.

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::Terminal;
use std::fmt::Write;

/// Draws with `draw` into a `width`×`height` [`TestBackend`] and returns [`buffer_snapshot`].
pub fn render_snapshot(width: u16, height: u16, draw: impl FnOnce(Rect, &mut Buffer)) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    terminal
        .draw(|frame| {
            let area = frame.area();
            draw(area, frame.buffer_mut());
        })
        .expect("draw to test backend");
    buffer_snapshot(terminal.backend().buffer())
}

/// Rows between `|` bars, then `styles:` with `row col..col: style "text"` runs.
pub fn buffer_snapshot(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    let mut runs = String::new();
    for y in area.top()..area.bottom() {
        out.push('|');
        let mut skip = 0usize;
        let mut run: Option<(u16, Style, String)> = None;
        for x in area.left()..area.right() {
            let cell = &buf[(x, y)];
            let symbol = cell.symbol();
            if skip > 0 {
                skip -= 1;
            } else {
                out.push_str(symbol);
                skip = super::text::str_width(symbol).saturating_sub(1);
            }
            let style = Style::default()
                .fg(cell.fg)
                .bg(cell.bg)
                .add_modifier(cell.modifier);
            match &mut run {
                Some((_, s, text)) if *s == style => text.push_str(symbol),
                _ => {
                    if let Some((start, s, text)) = run.take() {
                        push_run(&mut runs, y, start, x, s, &text);
                    }
                    run = Some((x, style, symbol.to_string()));
                }
            }
        }
        if let Some((start, s, text)) = run.take() {
            push_run(&mut runs, y, start, area.right(), s, &text);
        }
        out.push_str("|\n");
    }
    if !runs.is_empty() {
        out.push_str("styles:\n");
        out.push_str(&runs);
    }
    out
}

fn push_run(out: &mut String, y: u16, start: u16, end: u16, style: Style, text: &str) {
    let described = describe(style);
    if described.is_empty() {
        return;
    }
    let _ = writeln!(out, "  {y} {start}..{end}: {described} {text:?}");
}

fn describe(style: Style) -> String {
    let mut parts = Vec::new();
    if let Some(fg) = style.fg.filter(|c| *c != Color::Reset) {
        parts.push(format!("fg={fg}"));
    }
    if let Some(bg) = style.bg.filter(|c| *c != Color::Reset) {
        parts.push(format!("bg={bg}"));
    }
    for (m, name) in [
        (Modifier::BOLD, "bold"),
        (Modifier::DIM, "dim"),
        (Modifier::ITALIC, "italic"),
        (Modifier::UNDERLINED, "underlined"),
        (Modifier::REVERSED, "reversed"),
        (Modifier::CROSSED_OUT, "crossed"),
    ] {
        if style.add_modifier.contains(m) {
            parts.push(name.to_string());
        }
    }
    parts.join(" ")
}
