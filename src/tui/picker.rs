//! The session picker of `dsh-refs --resume` with no id (SPEC §8): the finder as a full-screen
//! list to choose the session to continue.
//!
//! [`PickerState`] is pure (a query line, hits, a selection) and drawn by [`PickerView`]; the loop
//! [`pick_session`] runs searches on a thread of their own, tagged with a generation number, so
//! typing never waits for the index and an answer to an older query is dropped.
//!
//! Proof: unit tests below (keys, stale answers); `tests/tui/picker.rs` snapshots the view;
//! `tests/e2e/cli_lifecycle.rs` picks a session through the real binary in tmux.

use super::escape::EscapeMode;
use super::render::clip;
use super::style;
use super::text::{format_age, StyledText};
use crate::discovery::{listed_ids, Discovery, Hit, SearchQuery};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};

/// What a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickerOutcome {
    /// The query changed: search for it (with this generation).
    Search(u64, String),
    /// Redraw only.
    Moved,
    /// Enter on a row: resume this id.
    Picked(String),
    /// Esc or Ctrl-C: start nothing.
    Cancelled,
    /// Not a picker key (e.g. a key release).
    Ignored,
}

/// The picker's state: the query line, the hits of the latest search, the selection. Pure: the
/// caller runs the searches it asks for.
#[derive(Debug, Clone, Default)]
pub struct PickerState {
    query: String,
    generation: u64,
    hits: Vec<Hit>,
    total: usize,
    selected: usize,
    loading: bool,
    error: Option<String>,
}

impl PickerState {
    /// An empty picker; call [`PickerState::start`] for the first search.
    pub fn new() -> PickerState {
        PickerState::default()
    }

    /// The first search (empty query: recent sessions, this directory's first).
    pub fn start(&mut self) -> PickerOutcome {
        self.loading = true;
        PickerOutcome::Search(self.generation, String::new())
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
        self.hits.get(self.selected)
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
        self.selected = self.selected.min(self.hits.len().saturating_sub(1));
        true
    }

    /// Reacts to one key: edits the query, moves the selection, picks or cancels.
    pub fn handle_key(&mut self, key: KeyEvent) -> PickerOutcome {
        if key.kind == KeyEventKind::Release {
            return PickerOutcome::Ignored;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => PickerOutcome::Cancelled,
            KeyCode::Char('c') if ctrl => PickerOutcome::Cancelled,
            KeyCode::Enter => match self.selected() {
                Some(hit) => PickerOutcome::Picked(hit.session_id.clone()),
                None => PickerOutcome::Ignored,
            },
            KeyCode::Up => self.step(-1),
            KeyCode::Char('p') if ctrl => self.step(-1),
            KeyCode::Down => self.step(1),
            KeyCode::Char('n') if ctrl => self.step(1),
            KeyCode::Backspace => {
                if self.query.pop().is_some() {
                    self.changed()
                } else {
                    PickerOutcome::Ignored
                }
            }
            KeyCode::Char(c) if !ctrl && !c.is_control() => {
                self.query.push(c);
                self.changed()
            }
            _ => PickerOutcome::Ignored,
        }
    }

    fn step(&mut self, by: isize) -> PickerOutcome {
        if self.hits.is_empty() {
            return PickerOutcome::Ignored;
        }
        let n = self.hits.len() as isize;
        self.selected = ((self.selected as isize + by).rem_euclid(n)) as usize;
        PickerOutcome::Moved
    }

    fn changed(&mut self) -> PickerOutcome {
        self.generation += 1;
        self.selected = 0;
        self.loading = true;
        PickerOutcome::Search(self.generation, self.query.clone())
    }

    /// The widget that draws the picker, with ages measured from `now_ms` (Unix milliseconds).
    pub fn view(&self, now_ms: i64) -> PickerView<'_> {
        PickerView {
            state: self,
            now_ms,
        }
    }
}

/// Draws a [`PickerState`]; pure (the clock comes in as `now_ms`).
pub struct PickerView<'a> {
    state: &'a PickerState,
    now_ms: i64,
}

impl PickerView<'_> {
    /// Draws the query line, the hits and the selection into `area` (clipped to `buf`).
    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        let s = self.state;
        let width = usize::from(area.width);
        let line = |buf: &mut Buffer, y: u16, text: StyledText| {
            if y < area.bottom() {
                buf.set_line(area.x, y, &text.truncate(width).to_line(), area.width);
            }
        };
        let mut head = StyledText::new();
        head.push(
            "Resume a session › ",
            Style::new().add_modifier(Modifier::BOLD),
        );
        head.push_untrusted(&s.query, EscapeMode::SingleLine, Style::new());
        head.push("▏", style::dim());
        line(buf, area.y, head);
        let mut info = StyledText::new();
        let status = if let Some(e) = &s.error {
            format!("search failed: {e}")
        } else if s.loading && s.hits.is_empty() {
            "searching…".into()
        } else if s.hits.is_empty() {
            "no sessions match".into()
        } else if s.total > s.hits.len() {
            format!("{} of {} · type to narrow", s.hits.len(), s.total)
        } else {
            format!("{} sessions", s.hits.len())
        };
        info.push_untrusted(&status, EscapeMode::SingleLine, style::dim());
        info.push("  ↑↓ move · Enter resume · Esc cancel", style::dim());
        line(buf, area.y + 1, info);
        let rows = usize::from(area.height.saturating_sub(2));
        let scroll = s.selected.saturating_sub(rows.saturating_sub(1));
        for (i, hit) in s.hits.iter().enumerate().skip(scroll).take(rows) {
            let selected = i == s.selected;
            let base = if selected {
                Style::new().add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            };
            let mut row = StyledText::new();
            row.push(if selected { "› " } else { "  " }, style::session_tag());
            let name = hit
                .title
                .as_deref()
                .or(hit.first_prompt.as_deref())
                .unwrap_or(&hit.session_id);
            row.push_untrusted(name, EscapeMode::SingleLine, base);
            row.push("  ", Style::new());
            row.push_untrusted(&hit.session_id, EscapeMode::SingleLine, style::dim());
            row.push("  ", Style::new());
            match &hit.cwd {
                Some(cwd) => row.push_untrusted(cwd, EscapeMode::SingleLine, style::dim()),
                None => row.push("(no cwd)", style::dim()),
            };
            row.push(
                &format!(
                    "  {} msgs · {}",
                    hit.messages,
                    format_age(hit.last_activity, self.now_ms)
                ),
                style::dim(),
            );
            let mut row = row.truncate(width);
            if selected {
                row.patch_style(style::selected());
            }
            let y = area.y + 2 + (i - scroll) as u16;
            if selected {
                buf.set_style(Rect::new(area.x, y, area.width, 1), style::selected());
            }
            line(buf, y, row);
        }
    }
}

/// Runs the picker on the terminal until the user picks (`Some(id)`) or cancels (`None`). Only
/// sessions `discovery` lists are offered; its index is brought up to date first.
pub fn pick_session(
    discovery: Discovery,
    cwd: Option<String>,
    now_ms: impl Fn() -> i64,
) -> std::io::Result<Option<String>> {
    use crossterm::{event, execute, terminal};
    use std::sync::mpsc;
    if let Err(e) = discovery.refresh_blocking() {
        tracing::warn!(error = %e, "picker: index not refreshed");
    }
    let listing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(discovery.query().list_sessions())
        .map_err(std::io::Error::other)?;
    let listed = listed_ids(&listing);
    let (ask, questions) = mpsc::channel::<(u64, String)>();
    let (tell, answers) = mpsc::channel::<(u64, Result<(Vec<Hit>, usize), String>)>();
    let searcher = discovery.clone();
    std::thread::spawn(move || {
        while let Ok(mut question) = questions.recv() {
            // Only the newest question waiting is worth answering.
            while let Ok(newer) = questions.try_recv() {
                question = newer;
            }
            let result = searcher
                .search_blocking(
                    &SearchQuery {
                        text: question.1,
                        agent: None,
                        cwd: cwd.clone(),
                        limit: 200,
                        now_ms: crate::session::writer::now_ms(),
                        snippets: false,
                    },
                    Some(&listed),
                )
                .map(|r| (r.hits, r.total))
                .map_err(|e| e.to_string());
            if tell.send((question.0, result)).is_err() {
                break;
            }
        }
    });
    let mut state = PickerState::new();
    if let PickerOutcome::Search(g, q) = state.start() {
        let _ = ask.send((g, q));
    }
    terminal::enable_raw_mode()?;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
    let restore = || {
        let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    };
    let result = (|| {
        let backend = ratatui::backend::CrosstermBackend::new(std::io::stdout());
        let mut term = ratatui::Terminal::new(backend)?;
        loop {
            while let Ok((g, result)) = answers.try_recv() {
                state.apply(g, result);
            }
            term.draw(|frame| {
                let area = frame.area();
                state.view(now_ms()).render(area, frame.buffer_mut());
            })?;
            if !event::poll(std::time::Duration::from_millis(50))? {
                continue;
            }
            if let event::Event::Key(key) = event::read()? {
                match state.handle_key(key) {
                    PickerOutcome::Search(g, q) => {
                        let _ = ask.send((g, q));
                    }
                    PickerOutcome::Picked(id) => return Ok(Some(id)),
                    PickerOutcome::Cancelled => return Ok(None),
                    PickerOutcome::Moved | PickerOutcome::Ignored => {}
                }
            }
        }
    })();
    restore();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::rank::Field;

    fn hit(id: &str) -> Hit {
        Hit {
            session_id: id.into(),
            title: Some(format!("title {id}")),
            first_prompt: None,
            cwd: None,
            created_at: 0,
            last_activity: 0,
            messages: 1,
            conversation_bytes: 1,
            source: None,
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
        assert_eq!(s.start(), PickerOutcome::Search(0, String::new()));
        assert_eq!(
            s.handle_key(key(KeyCode::Char('t'))),
            PickerOutcome::Search(1, "t".into())
        );
        assert!(!s.apply(0, Ok((vec![hit("old")], 1))));
        assert!(s.apply(1, Ok((vec![hit("a"), hit("b")], 2))));
        assert_eq!(s.handle_key(key(KeyCode::Up)), PickerOutcome::Moved);
        assert_eq!(s.selected().unwrap().session_id, "b", "wraps");
        assert_eq!(
            s.handle_key(key(KeyCode::Enter)),
            PickerOutcome::Picked("b".into())
        );
        assert_eq!(
            s.handle_key(key(KeyCode::Backspace)),
            PickerOutcome::Search(2, String::new())
        );
        assert_eq!(s.handle_key(key(KeyCode::Esc)), PickerOutcome::Cancelled);
    }

    #[test]
    fn nothing_to_pick_is_not_a_pick() {
        let mut s = PickerState::new();
        s.start();
        assert!(s.apply(0, Ok((vec![], 0))));
        assert_eq!(s.handle_key(key(KeyCode::Enter)), PickerOutcome::Ignored);
        assert_eq!(s.handle_key(key(KeyCode::Down)), PickerOutcome::Ignored);
    }
}
