//! Drawing the `@` popup: [`PopupView`] renders a [`PopupState`] into a buffer, fitting each
//! row's fields to the width.
//!
//! Pure: the clock comes in as `now_ms`. Invariant: every text from a log is escaped for one
//! line (SPEC §5.2) and no row is wider than the popup; a row's name (a session's label, or the
//! first prompt of an untitled one) is never cut to make room for a description (id, cwd, size,
//! age): the tags narrow, then the descriptions are cut or dropped, and the name is cut only
//! when it alone is wider than the row (issue 38 item 2). Proof: the popup snapshots
//! (`tests/tui/popup.rs`), `tests/tui/menus.rs` (every width 60..=200) and
//! `rendering_never_panics`.

use super::state::{PopupState, Row, NARROW};
use crate::escape::EscapeMode;
use crate::reference::Candidate;
use crate::session::external::ExternalAgent;
use crate::tui::file_match::FileRow;
use crate::tui::lookup::{size_text, truncation_text, PopupRow};
use crate::tui::render::{clip, Renderable};
use crate::tui::scroll::visible_top;
use crate::tui::style;
use crate::tui::text::{ci_matches, format_age, str_width, StyledText};
use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Clear, Widget};

/// Whitespace runs (newlines included) folded to one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Draws a [`PopupState`]. Pure: the clock comes in as `now_ms`.
#[derive(Debug, Clone, Copy)]
pub struct PopupView<'a> {
    state: &'a PopupState,
    now_ms: i64,
}

impl<'a> PopupView<'a> {
    /// The view of `state`, ages measured against `now_ms` (epoch ms).
    pub fn new(state: &'a PopupState, now_ms: i64) -> PopupView<'a> {
        PopupView { state, now_ms }
    }
}

impl PopupView<'_> {
    /// The name a session row shows: its label, or the first prompt of an untitled session
    /// (instead of repeating its id).
    fn name_of<'c>(&'c self, c: &'c Candidate) -> std::borrow::Cow<'c, str> {
        let first_prompt = self
            .detail(&c.session_id)
            .filter(|_| c.label == c.session_id)
            .and_then(|d| d.first_prompt.as_deref());
        match first_prompt {
            Some(prompt) => one_line(prompt).into(),
            None => c.label.as_str().into(),
        }
    }

    /// Whether the rows shown use the short tags (`s `, `f `): below [`NARROW`] columns, or
    /// when a session's name would not fit whole beside the long tag.
    fn narrow_tags(&self, width: usize, rows: &[Row]) -> bool {
        width < NARROW
            || rows.iter().any(|row| match *row {
                Row::Session(s) => {
                    let c = &self.state.sessions[s];
                    let badge =
                        ExternalAgent::of_id(&c.session_id).map_or(0, |a| a.name().len() + 1);
                    let mut name = StyledText::new();
                    name.push_untrusted(&self.name_of(c), EscapeMode::SingleLine, Style::new());
                    prefix(false, false, true).width() + badge + name.width() > width
                }
                Row::File(_) => false,
            })
    }

    fn session_line(
        &self,
        c: &Candidate,
        width: usize,
        selected: bool,
        narrow: bool,
    ) -> StyledText {
        let query = &self.state.query;
        // Another agent's session wears its source as a badge (SPEC §9).
        let agent = ExternalAgent::of_id(&c.session_id);
        let detail = self.detail(&c.session_id);
        // With discovery: last activity (not creation), size, and a live badge.
        let age = match detail {
            Some(d) => {
                let mut extra = String::new();
                if d.live {
                    extra.push_str("live · ");
                }
                extra.push_str(&size_text(d));
                extra.push_str(" · ");
                extra.push_str(&format_age(d.last_activity.max(c.created_at), self.now_ms));
                extra
            }
            None => format_age(c.created_at, self.now_ms),
        };
        let base = if selected {
            Style::new().add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        let hl = base.patch(style::matched());
        let dim_hl = style::dim().patch(style::matched());
        let field = |raw: &str, style: Style, hl: Style| {
            let marks = ci_matches(raw, query);
            let mut t = StyledText::new();
            t.push_highlighted(raw, EscapeMode::SingleLine, style, |i| marks[i], hl);
            t
        };
        // An untitled session shows its first prompt instead of repeating its id.
        let first_prompt = detail
            .filter(|_| c.label == c.session_id)
            .and_then(|d| d.first_prompt.as_deref());
        // The name is what identifies the row: it is never cut to make room for anything else
        // (the tags narrow first, [`Self::narrow_tags`]); it is cut only when it alone is wider
        // than the row.
        let name = field(&self.name_of(c), base, hl);
        let mut line = prefix(selected, narrow, true);
        if let Some(agent) = agent {
            line.push(agent.name(), style::session_tag());
            line.push(" ", Style::new());
        }
        let name = name.truncate(width.saturating_sub(line.width()));
        line.append(name);
        // The descriptions share what is left: the age (right-aligned) while it fits, then
        // the id and the cwd, each dropped rather than squeezed (the id first).
        let rest = width.saturating_sub(line.width());
        let age_w = str_width(&age) + 1;
        let show_age = rest >= age_w;
        let mut fields = Vec::new();
        if c.label != c.session_id || first_prompt.is_some() {
            fields.push(Field {
                text: field(&c.session_id, style::dim(), dim_hl),
                weight: 1,
                keep_tail: false,
            });
        }
        fields.push(Field {
            text: match &c.cwd {
                Some(cwd) => field(cwd, style::dim(), dim_hl),
                None => field("(no cwd)", style::dim(), style::dim()),
            },
            weight: 2,
            keep_tail: true,
        });
        let fields_w = rest
            .saturating_sub(if show_age { age_w } else { 0 })
            .saturating_sub(SEP);
        let body = fit_fields(fields, fields_w);
        let mut pad = rest.saturating_sub(if show_age { age_w } else { 0 });
        if body.width() > 0 {
            line.push(&" ".repeat(SEP), Style::new());
            pad = pad.saturating_sub(SEP + body.width());
            line.append(body);
        }
        if show_age {
            line.push(&" ".repeat(pad + 1), Style::new());
            line.push(&age, style::dim());
        }
        line.truncate(width)
    }

    fn detail(&self, id: &str) -> Option<&PopupRow> {
        self.state.details.as_ref()?.rows.get(id)
    }

    fn file_line(&self, f: &FileRow, width: usize, selected: bool, narrow: bool) -> StyledText {
        let mut line = prefix(selected, narrow, false);
        let base = if selected {
            Style::new().add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        let mut path = StyledText::new();
        path.push_highlighted(
            &f.path,
            EscapeMode::SingleLine,
            base,
            |i| u32::try_from(i).is_ok_and(|i| f.indices.binary_search(&i).is_ok()),
            base.patch(style::matched()),
        );
        line.append(path.truncate_left(width.saturating_sub(line.width())));
        line.truncate(width)
    }
}

/// One column of a session row, for [`fit_fields`].
struct Field {
    text: StyledText,
    weight: usize,
    /// Cut from the left (paths: the last components say the most).
    keep_tail: bool,
}

/// Narrowest useful width of a description field; below it the field is left out.
const MIN_FIELD: usize = 6;
/// Cells between two fields of a row.
const SEP: usize = 2;

/// Lays the description `fields` out in `width` cells, [`SEP`] apart. When they don't fit,
/// space is shared by weight (a field that needs less than its share gives the rest back) and
/// fields that would be squeezed below [`MIN_FIELD`] are dropped, the first (the id, when there
/// is one) first, so a narrow row keeps the end of the cwd rather than two fields cut to
/// nothing.
fn fit_fields(mut fields: Vec<Field>, width: usize) -> StyledText {
    loop {
        if fields.is_empty() {
            return StyledText::new();
        }
        let avail = width.saturating_sub(SEP * (fields.len() - 1));
        let needs: Vec<usize> = fields.iter().map(|f| f.text.width()).collect();
        let alloc = share(
            &needs,
            &fields.iter().map(|f| f.weight).collect::<Vec<_>>(),
            avail,
        );
        let squeezed = (0..fields.len()).any(|i| alloc[i] < needs[i] && alloc[i] < MIN_FIELD);
        if squeezed {
            fields.remove(0);
            continue;
        }
        let mut out = StyledText::new();
        for (i, (f, w)) in fields.iter().zip(alloc).enumerate() {
            if i > 0 {
                out.push(&" ".repeat(SEP), style::dim());
            }
            out.append(if f.keep_tail {
                f.text.truncate_left(w)
            } else {
                f.text.truncate(w)
            });
        }
        return out.truncate(width);
    }
}

/// Weighted max-min sharing of `total` cells among `needs`.
fn share(needs: &[usize], weights: &[usize], total: usize) -> Vec<usize> {
    let mut alloc = vec![0; needs.len()];
    let mut open: Vec<usize> = (0..needs.len()).collect();
    let mut left = total;
    while !open.is_empty() {
        let weight: usize = open.iter().map(|&i| weights[i].max(1)).sum();
        let satisfied: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| needs[i] <= left * weights[i].max(1) / weight)
            .collect();
        if satisfied.is_empty() {
            let mut given = 0;
            for &i in &open {
                alloc[i] = left * weights[i].max(1) / weight;
                given += alloc[i];
            }
            alloc[open[0]] += left - given;
            break;
        }
        for i in satisfied {
            alloc[i] = needs[i];
            left -= needs[i];
            open.retain(|&j| j != i);
        }
    }
    alloc
}

fn prefix(selected: bool, narrow: bool, session: bool) -> StyledText {
    let mut line = StyledText::new();
    if selected {
        line.push("› ", style::user_prefix());
    } else {
        line.push("  ", Style::new());
    }
    let (tag, tag_style) = match (session, narrow) {
        (true, false) => ("session ", style::session_tag()),
        (true, true) => ("s ", style::session_tag()),
        (false, false) => ("file    ", style::file_tag()),
        (false, true) => ("f ", style::file_tag()),
    };
    line.push(tag, tag_style);
    line
}

impl Renderable for PopupView<'_> {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        let state = self.state;
        if area.is_empty() || !state.open {
            return;
        }
        Clear.render(area, buf);
        let title = if state.paths_only {
            " @ files "
        } else {
            " @ sessions · files "
        };
        let mut block = Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(style::border())
            .title(Line::styled(
                title,
                Style::new().add_modifier(Modifier::BOLD),
            ));
        let status = state.status();
        let inner = block.inner(area);
        let cap = usize::from(inner.height).saturating_sub(usize::from(status.is_some()));
        let truncated = state
            .details
            .as_ref()
            .filter(|_| !state.paths_only)
            .and_then(|d| truncation_text(state.sessions.len(), d.total));
        if state.is_loading() && !state.sessions.is_empty() {
            block = block.title_bottom(Line::styled(" loading… ", style::dim()));
        } else if let Some(text) = truncated {
            block =
                block.title_bottom(Line::styled(text, style::dim()).alignment(Alignment::Right));
        } else if state.rows.len() > cap && cap > 0 {
            let pos = format!(" {}/{} ", state.scroll.selected + 1, state.rows.len());
            block = block.title_bottom(Line::styled(pos, style::dim()).alignment(Alignment::Right));
        }
        block.render(area, buf);
        if inner.is_empty() {
            return;
        }
        let width = usize::from(inner.width);
        let mut y = inner.y;
        if let Some((text, _)) = status {
            buf.set_line(inner.x, y, &text.truncate(width).to_line(), inner.width);
            y += 1;
        }
        let scroll = visible_top(
            state.scroll.top,
            state.scroll.selected,
            cap,
            state.rows.len(),
        );
        let shown = &state.rows[scroll.min(state.rows.len())..];
        let narrow = self.narrow_tags(width, &shown[..cap.min(shown.len())]);
        for (i, row) in state.rows.iter().enumerate().skip(scroll).take(cap) {
            let selected = i == state.scroll.selected;
            let mut line = match *row {
                Row::Session(s) => self.session_line(&state.sessions[s], width, selected, narrow),
                Row::File(f) => self.file_line(&state.files[f], width, selected, narrow),
            };
            if selected {
                line.patch_style(style::selected());
                buf.set_style(Rect::new(inner.x, y, inner.width, 1), style::selected());
            }
            buf.set_line(inner.x, y, &line.to_line(), inner.width);
            y += 1;
        }
    }

    fn desired_height(&self, _width: u16) -> u16 {
        let state = self.state;
        if !state.open {
            return 0;
        }
        let content = usize::from(state.status().is_some()) + state.rows.len();
        let content = content.clamp(1, state.page_rows.max(1));
        u16::try_from(content + 2).unwrap_or(u16::MAX)
    }
}
