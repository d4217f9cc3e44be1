//! The session picker of `/resume` and of `dsh-refs --resume` with no id (SPEC §8): the finder
//! as a full-screen list over the app to choose the session to continue.
//!
//! [`PickerState`] is pure (a query line, hits, a `ScrollState` selection) and drawn by
//! [`PickerView`]. It never runs a terminal loop of its own: the app opens it (at start for
//! `--resume`, so the panic hook and the one terminal guard cover it too) and runs the searches
//! it asks for as tasks tagged with a generation number, so typing never waits for the index and
//! an answer to an older query is dropped. Every key is read through the key table: the picker's
//! own action (`picker-this-dir`), the list actions of the popup (move, page, accept, close),
//! `clear-or-quit` to cancel and the composer's `backspace` for the query; typed characters go
//! to the query, and any other key does nothing.
//!
//! From 90 columns a pane beside the list shows the highlighted session's details and its last
//! messages in the `@` popup's preview pane ([`PreviewPane`], reused): the app reads the
//! preview off the loop ([`PickerState::preview_wanted`], [`PickerState::set_preview`]), so a
//! slow read never holds a key up, and a preview is drawn only while its session is
//! highlighted (an answer for another one is refused).
//!
//! Proof: unit tests below (keys, stale answers); `tests/tui/picker.rs` snapshots the view (the
//! preview pane reading and read); `tests/tui/picker_preview.rs` drives the app (the pane
//! follows the selection, a slow preview never blocks typing, a stale one is dropped);
//! `tests/e2e/cli_lifecycle.rs` picks a session through the real binary in tmux.

use super::focus::{Command, Handled};
use super::keys::KeyBinding;
use super::keys::{Action, KeyContext, Keymap};
use super::popup::PreviewPane;
use super::render::clip;
use super::render::Renderable;
use super::scroll::{visible_top, ScrollState};
use super::style;
use super::text::{format_age, format_size, StyledText};
use crate::discovery::Hit;
use crate::escape::EscapeMode;
use crate::host::Preview;
use crossterm::event::{KeyEvent, KeyEventKind};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Clear, Widget};

/// The picker's state: the query line, the hits of the latest search, the selection. Pure: the
/// caller runs the searches it asks for.
#[derive(Debug, Clone, Default)]
pub struct PickerState {
    query: String,
    generation: u64,
    hits: Vec<Hit>,
    total: usize,
    scroll: ScrollState,
    loading: bool,
    error: Option<String>,
    /// The directory the picker was opened in (what the this-directory filter keeps).
    cwd: Option<String>,
    /// Only sessions of `cwd` are shown.
    this_dir: bool,
    /// The preview of a session (its last messages), for the id it was read for: the app reads
    /// it off the loop for the highlighted session ([`PickerState::preview_wanted`]); shown only
    /// while that session is highlighted (`None` inside: still reading).
    preview: Option<(String, Option<Result<Preview, String>>)>,
}

impl PickerState {
    /// An empty picker; call [`PickerState::start`] for the first search.
    pub fn new() -> PickerState {
        PickerState::default()
    }

    /// A picker opened in `cwd` with `query` already typed (`/resume WORD`, `--resume WORD`).
    pub fn with_query(query: &str, cwd: Option<String>) -> PickerState {
        PickerState {
            query: query.to_string(),
            cwd,
            ..PickerState::default()
        }
    }

    /// The first search: the query given (empty: recent sessions, this directory's first).
    pub fn start(&mut self) -> Handled {
        self.loading = true;
        self.search()
    }

    /// Whether only this directory's sessions are shown.
    pub fn this_dir_only(&self) -> bool {
        self.this_dir
    }

    /// The hits shown: all of them, or this directory's only.
    fn visible(&self) -> Vec<&Hit> {
        self.hits
            .iter()
            .filter(|h| !self.this_dir || (self.cwd.is_some() && h.cwd == self.cwd))
            .collect()
    }

    /// The query typed so far.
    pub fn query(&self) -> &str {
        &self.query
    }

    /// The hits of the latest applied search, best first.
    pub fn hits(&self) -> &[Hit] {
        &self.hits
    }

    /// The highlighted hit, if there is any.
    pub fn selected(&self) -> Option<&Hit> {
        self.visible().get(self.scroll.selected).copied()
    }

    /// The highlighted session's id and label when its preview is not the one held (asked for
    /// or read): the app starts reading it, off the loop, and says so with
    /// [`PickerState::set_preview`].
    pub fn preview_wanted(&self) -> Option<(String, String)> {
        let hit = self.selected()?;
        if self.preview.as_ref().is_some_and(|(id, _)| *id == hit.id) {
            return None;
        }
        Some((hit.id.clone(), label_of(hit).to_string()))
    }

    /// The preview of session `id`: `None` while it is read. An answer for a session no longer
    /// highlighted is dropped (false).
    pub fn set_preview(&mut self, id: &str, result: Option<Result<Preview, String>>) -> bool {
        if self.selected().is_none_or(|hit| hit.id != id) {
            return false;
        }
        self.preview = Some((id.to_string(), result));
        true
    }

    /// The preview held for the highlighted session, when there is one: `Some(None)` while it
    /// is read.
    fn shown_preview(&self) -> Option<Option<&Result<Preview, String>>> {
        let hit = self.selected()?;
        match &self.preview {
            Some((id, result)) if *id == hit.id => Some(result.as_ref()),
            _ => None,
        }
    }

    /// Applies the answer of search `generation`; false (and nothing changes) when stale.
    pub fn apply(&mut self, generation: u64, result: Result<(Vec<Hit>, usize), String>) -> bool {
        if generation != self.generation {
            return false;
        }
        self.loading = false;
        match result {
            Ok((hits, total)) => {
                self.hits = hits;
                self.total = total;
                self.error = None;
            }
            Err(e) => {
                self.hits.clear();
                self.total = 0;
                self.error = Some(e);
            }
        }
        let len = self.visible().len();
        self.scroll.select(self.scroll.selected, len, PAGE);
        true
    }

    /// Reacts to one key by the standard keymap.
    pub fn handle_key(&mut self, key: KeyEvent) -> Handled {
        self.handle_key_with(Keymap::shared_standard(), key)
    }

    /// Reacts to one key through `keymap`: toggles the this-directory filter
    /// (`picker-this-dir`), moves or pages the selection and picks or closes (the popup's list
    /// actions), cancels (`clear-or-quit`), deletes from the query (`backspace`) or types into
    /// it. A key bound to none of these does nothing ([`Handled::Ignored`]: the app's focus
    /// stack takes it, since the picker is modal).
    pub fn handle_key_with(&mut self, keymap: &Keymap, key: KeyEvent) -> Handled {
        if key.kind == KeyEventKind::Release {
            return Handled::Ignored;
        }
        let action = keymap
            .action(KeyContext::Picker, &key)
            .or_else(|| keymap.action(KeyContext::Popup, &key))
            .or_else(|| {
                keymap
                    .action(KeyContext::App, &key)
                    .filter(|a| *a == Action::ClearOrQuit)
            })
            .or_else(|| {
                keymap
                    .action(KeyContext::Composer, &key)
                    .filter(|a| *a == Action::Backspace)
            });
        match action {
            Some(action) => self.handle_action(action),
            None => match key.code {
                crossterm::event::KeyCode::Char(c) if KeyBinding::of(&key).is_typed_text() => {
                    self.query.push(c);
                    self.changed()
                }
                _ => Handled::Ignored,
            },
        }
    }

    /// Does one action of the key table: moving is [`Handled::Consumed`], a changed query asks
    /// for a search ([`Command::Search`]), accepting a row resumes it ([`Command::Resume`]) and
    /// closing cancels ([`Command::ClosePicker`]); an action with nothing to do, and one the
    /// picker has no use for, is [`Handled::Ignored`].
    pub fn handle_action(&mut self, action: Action) -> Handled {
        let len = self.visible().len();
        let moved = |s: &mut PickerState, f: fn(&mut ScrollState, usize, usize)| {
            if len == 0 {
                return Handled::Ignored;
            }
            f(&mut s.scroll, len, PAGE);
            Handled::Consumed
        };
        match action {
            Action::PickerThisDir => {
                self.this_dir = !self.this_dir;
                self.scroll.reset();
                Handled::Consumed
            }
            Action::PopupUp => moved(self, ScrollState::move_up_wrap),
            Action::PopupDown => moved(self, ScrollState::move_down_wrap),
            Action::PopupPageUp => moved(self, ScrollState::page_up),
            Action::PopupPageDown => moved(self, ScrollState::page_down),
            Action::PopupAccept => match self.selected() {
                Some(hit) => Handled::Emit(Command::Resume(hit.id.clone())),
                None => Handled::Ignored,
            },
            Action::PopupClose | Action::ClearOrQuit => Handled::Emit(Command::ClosePicker),
            Action::Backspace => {
                if self.query.pop().is_some() {
                    self.changed()
                } else {
                    Handled::Ignored
                }
            }
            _ => Handled::Ignored,
        }
    }

    fn changed(&mut self) -> Handled {
        self.generation += 1;
        self.scroll.reset();
        self.loading = true;
        self.search()
    }

    /// The search for the current query and generation.
    fn search(&self) -> Handled {
        Handled::Emit(Command::Search {
            generation: self.generation,
            query: self.query.clone(),
        })
    }

    /// The widget that draws the picker, with ages measured from `now_ms` (Unix milliseconds).
    pub fn view(&self, now_ms: i64) -> PickerView<'_> {
        PickerView {
            state: self,
            now_ms,
            keymap: Keymap::shared_standard(),
        }
    }

    /// [`view`](Self::view), its key hints spelled by `keymap`.
    pub fn view_with<'a>(&'a self, now_ms: i64, keymap: &'a Keymap) -> PickerView<'a> {
        PickerView {
            state: self,
            now_ms,
            keymap,
        }
    }
}

/// What names a hit: its title, else its first prompt, else its id.
fn label_of(hit: &Hit) -> &str {
    hit.title
        .as_deref()
        .or(hit.first_prompt.as_deref())
        .unwrap_or(&hit.id)
}

/// Draws a [`PickerState`]; pure (the clock comes in as `now_ms`).
pub struct PickerView<'a> {
    state: &'a PickerState,
    now_ms: i64,
    keymap: &'a Keymap,
}

impl super::render::Renderable for PickerView<'_> {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        PickerView::render(self, area, buf)
    }

    /// The picker fills what it is given.
    fn desired_height(&self, _width: u16) -> u16 {
        u16::MAX
    }
}

/// Width from which the picker shows a preview pane beside the list.
const PREVIEW_FROM: u16 = 90;
/// Rows a page move goes (the view shows the selection whatever its height).
const PAGE: usize = 10;

impl PickerView<'_> {
    /// Draws the query line, the hits (age first) and the selection into `area` (clipped to
    /// `buf`), everything under it cleared first; a preview of the highlighted session on the
    /// right when the area is wide enough.
    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        Clear.render(area, buf);
        let s = self.state;
        let line = |buf: &mut Buffer, x: u16, y: u16, w: u16, text: StyledText| {
            if y < area.bottom() {
                buf.set_line(x, y, &text.truncate(usize::from(w)).to_line(), w);
            }
        };
        let mut head = StyledText::new();
        head.push(
            "Resume a session › ",
            Style::new().add_modifier(Modifier::BOLD),
        );
        head.push_untrusted(&s.query, EscapeMode::SingleLine, Style::new());
        head.push("▏", style::dim());
        line(buf, area.x, area.y, area.width, head);
        let visible = s.visible();
        let mut info = StyledText::new();
        let status = if let Some(e) = &s.error {
            format!("search failed: {e}")
        } else if s.loading && s.hits.is_empty() {
            "searching…".into()
        } else if visible.is_empty() && s.this_dir {
            "no sessions of this directory match".into()
        } else if visible.is_empty() {
            "no sessions match".into()
        } else if s.this_dir {
            format!("{} in this directory", visible.len())
        } else if s.total > s.hits.len() {
            format!("{} of {} · type to narrow", s.hits.len(), s.total)
        } else {
            format!("{} sessions", s.hits.len())
        };
        info.push_untrusted(&status, EscapeMode::SingleLine, style::dim());
        let filter = self.keymap.label(Action::PickerThisDir, 1);
        let mut hint = String::from("  ↑↓ move · Enter resume · Esc cancel");
        if !filter.is_empty() {
            let which = if s.this_dir { "all" } else { "this dir" };
            hint.push_str(&format!(" · {filter} {which}"));
        }
        info.push(&hint, style::dim());
        line(buf, area.x, area.y + 1, area.width, info);
        let (list_w, preview) = if area.width >= PREVIEW_FROM {
            let list_w = area.width * 3 / 5;
            (
                list_w,
                Some(Rect::new(
                    area.x + list_w + 1,
                    area.y + 2,
                    area.width - list_w - 1,
                    area.height.saturating_sub(2),
                )),
            )
        } else {
            (area.width, None)
        };
        let rows = usize::from(area.height.saturating_sub(2));
        let selected_row = s.scroll.selected;
        let scroll = visible_top(0, selected_row, rows, visible.len());
        for (i, hit) in visible.iter().enumerate().skip(scroll).take(rows) {
            let selected = i == selected_row;
            let base = if selected {
                Style::new().add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            };
            let mut row = StyledText::new();
            row.push(if selected { "› " } else { "  " }, style::session_tag());
            row.push(
                &format!("{:>4}  ", format_age(hit.last_activity, self.now_ms)),
                style::dim(),
            );
            row.push_untrusted(label_of(hit), EscapeMode::SingleLine, base);
            row.push("  ", Style::new());
            row.push_untrusted(&hit.id, EscapeMode::SingleLine, style::dim());
            if preview.is_none() {
                row.push("  ", Style::new());
                match &hit.cwd {
                    Some(cwd) => row.push_untrusted(cwd, EscapeMode::SingleLine, style::dim()),
                    None => row.push("(no cwd)", style::dim()),
                };
                row.push(&format!("  {} msgs", hit.messages), style::dim());
            }
            let mut row = row.truncate(usize::from(list_w));
            if selected {
                row.patch_style(style::selected());
            }
            let y = area.y + 2 + (i - scroll) as u16;
            if selected {
                buf.set_style(Rect::new(area.x, y, list_w, 1), style::selected());
            }
            line(buf, area.x, y, list_w, row);
        }
        if let (Some(pane), Some(hit)) = (preview, s.selected()) {
            self.render_preview(pane, hit, buf);
        }
    }

    /// The highlighted session's details: title, id, directory, activity, size, first prompt.
    fn render_preview(&self, pane: Rect, hit: &Hit, buf: &mut Buffer) {
        if pane.is_empty() {
            return;
        }
        let block = Block::default()
            .borders(Borders::LEFT)
            .border_style(style::dim());
        let inner = block.inner(pane);
        block.render(pane, buf);
        let w = usize::from(inner.width);
        let mut lines: Vec<StyledText> = Vec::new();
        let mut title = StyledText::new();
        let name = hit.title.as_deref().unwrap_or("(untitled)");
        title.push_untrusted(
            name,
            EscapeMode::SingleLine,
            Style::new().add_modifier(Modifier::BOLD),
        );
        lines.push(title);
        let mut id = StyledText::new();
        id.push_untrusted(&hit.id, EscapeMode::SingleLine, style::dim());
        lines.push(id);
        let mut cwd = StyledText::new();
        match &hit.cwd {
            Some(dir) => cwd.push_untrusted(dir, EscapeMode::SingleLine, style::dim()),
            None => cwd.push("(no cwd)", style::dim()),
        };
        lines.push(cwd);
        let mut stats = StyledText::new();
        stats.push(
            &format!(
                "last active {} · {} msgs · {}",
                format_age(hit.last_activity, self.now_ms),
                hit.messages,
                format_size(hit.conversation_bytes)
            ),
            style::dim(),
        );
        lines.push(stats);
        // The session's last messages, as the `@` popup previews them, under the details;
        // without one (no reference service), its first prompt.
        let preview = self.state.shown_preview();
        if preview.is_none() {
            lines.push(StyledText::new());
            if let Some(prompt) = &hit.first_prompt {
                lines.extend(wrap_words(prompt, w));
            }
        }
        let lines_len = lines.len().min(usize::from(inner.height));
        for (i, text) in lines
            .into_iter()
            .take(usize::from(inner.height))
            .enumerate()
        {
            buf.set_line(
                inner.x,
                inner.y + i as u16,
                &text.truncate(w).to_line(),
                inner.width,
            );
        }
        if let Some(result) = preview {
            let top = inner
                .y
                .saturating_add(u16::try_from(lines_len).unwrap_or(u16::MAX));
            let room = Rect {
                y: top.min(inner.bottom()),
                height: inner.bottom().saturating_sub(top),
                ..inner
            };
            let pane = PreviewPane::new(label_of(hit), result);
            let height = pane.desired_height(room.width).min(room.height);
            pane.render(Rect { height, ..room }, buf);
        }
    }
}

/// `text`'s words wrapped to `w` columns, one escaped row each.
fn wrap_words(text: &str, w: usize) -> Vec<StyledText> {
    let mut lines = Vec::new();
    let mut row = String::new();
    for word in text.split_whitespace() {
        let need = row.chars().count() + usize::from(!row.is_empty()) + word.chars().count();
        if need > w && !row.is_empty() {
            let mut t = StyledText::new();
            t.push_untrusted(&row, EscapeMode::SingleLine, Style::new());
            lines.push(t);
            row.clear();
        }
        if !row.is_empty() {
            row.push(' ');
        }
        row.push_str(word);
    }
    if !row.is_empty() {
        let mut t = StyledText::new();
        t.push_untrusted(&row, EscapeMode::SingleLine, Style::new());
        lines.push(t);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::rank::Field;
    use crate::discovery::SessionMeta;
    use crossterm::event::{KeyCode, KeyModifiers};

    fn hit(id: &str) -> Hit {
        Hit {
            meta: SessionMeta {
                id: id.into(),
                title: Some(format!("title {id}")),
                first_prompt: None,
                cwd: None,
                created_at: 0,
                last_activity: 0,
                messages: 1,
                conversation_bytes: 1,
                source: None,
            },
            score: 0.0,
            matched: vec![Field::Title],
            snippet: None,
        }
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn typing_searches_and_stale_answers_are_dropped() {
        let mut s = PickerState::new();
        assert_eq!(
            s.start(),
            Handled::Emit(Command::Search {
                generation: 0,
                query: String::new()
            })
        );
        assert_eq!(
            s.handle_key(key(KeyCode::Char('t'))),
            Handled::Emit(Command::Search {
                generation: 1,
                query: "t".into()
            })
        );
        assert!(!s.apply(0, Ok((vec![hit("old")], 1))));
        assert!(s.apply(1, Ok((vec![hit("a"), hit("b")], 2))));
        assert_eq!(s.handle_key(key(KeyCode::Up)), Handled::Consumed);
        assert_eq!(s.selected().unwrap().id, "b", "wraps");
        assert_eq!(
            s.handle_key(key(KeyCode::Enter)),
            Handled::Emit(Command::Resume("b".into()))
        );
        assert_eq!(
            s.handle_key(key(KeyCode::Backspace)),
            Handled::Emit(Command::Search {
                generation: 2,
                query: String::new()
            })
        );
        assert_eq!(
            s.handle_key(key(KeyCode::Esc)),
            Handled::Emit(Command::ClosePicker)
        );
    }

    #[test]
    fn nothing_to_pick_is_not_a_pick() {
        let mut s = PickerState::new();
        s.start();
        assert!(s.apply(0, Ok((vec![], 0))));
        assert_eq!(s.handle_key(key(KeyCode::Enter)), Handled::Ignored);
        assert_eq!(s.handle_key(key(KeyCode::Down)), Handled::Ignored);
    }
}
