//! The `@` completion popup (SPEC §5.1): its state and its view.
//!
//! Session lookups are slow (they walk the store) and asynchronous, so the state never waits:
//! every query change issues a fresh [`QueryId`], the caller runs the lookup wherever it likes,
//! and only the answer to the latest id is applied, so a slow answer to an old query can never
//! overwrite a newer one. Until the answer arrives, the previous answer stays on screen, filtered
//! locally with the service's own rule, so rows don't flicker while typing. File rows are
//! matched synchronously from a prebuilt [`FileIndex`].

use super::discovery::{size_text, truncation_text, RowDetail, SessionDetails};
use super::escape::EscapeMode;
use super::file_match::{FileIndex, FileMatcher, FileRow};
use super::keys::{Action, KeyContext, Keymap};
use super::render::{clip, Renderable};
use super::scroll::{visible_top, ScrollState};
use super::style;
use super::text::{ci_matches, format_age, StyledText};
use super::token::ActiveToken;
pub use super::token::PopupItem;
use crate::reference::{Candidate, CandidateFilter};
use crate::session::external::ExternalAgent;
use crossterm::event::{KeyEvent, KeyEventKind};
use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Clear, Widget};
use std::sync::Arc;

/// Identifies one session lookup. Later lookups have larger ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueryId(u64);

/// A lookup the caller should run: `list_candidates(agent, query)`, answered with
/// [`PopupState::apply_results`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupRequest {
    /// Matches the answer to this request; older ids are stale and dropped.
    pub id: QueryId,
    /// The text after `@` (or `@"`) that the lookup is for.
    pub query: String,
}

/// What a key did to the popup.
#[derive(Debug, Clone, PartialEq)]
pub enum PopupOutcome {
    /// Consumed (selection moved); redraw.
    Handled,
    /// Tab or Enter on a row: insert this item (Enter here never sends).
    Accept(PopupItem),
    /// The popup closed (Esc, or Tab/Enter with nothing to insert); the text is untouched.
    Close,
    /// Not a popup key: give it to the composer.
    Ignored,
}

#[derive(Debug, Clone, PartialEq)]
enum Lookup {
    Idle,
    Loading,
    Ready,
    Failed(String),
}

/// What the user picked, by identity, so it survives a new answer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pick {
    Session(String),
    File(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    Session(usize),
    File(usize),
}

/// Rows shown at once unless the caller picks another size.
pub const DEFAULT_PAGE_ROWS: usize = 8;
const FILE_LIMIT: usize = 50;
/// Below this inner width the row tags shrink to one letter.
const NARROW: usize = 48;

/// The `@` popup's state: the token it follows, the session and file rows and the selection. Pure:
/// the caller runs the lookups it asks for.
#[derive(Debug, Clone)]
pub struct PopupState {
    open: bool,
    query: String,
    paths_only: bool,
    /// Start of the token being completed, and of the one Esc dismissed.
    token_start: Option<usize>,
    dismissed_at: Option<usize>,
    next_id: u64,
    latest: Option<QueryId>,
    lookup: Lookup,
    /// The last applied answer, and what of it is shown for the current query.
    answer: Vec<Candidate>,
    sessions: Vec<Candidate>,
    files: Vec<FileRow>,
    file_index: Arc<FileIndex>,
    matcher: FileMatcher,
    rows: Vec<Row>,
    scroll: ScrollState,
    /// Set when the user moved the selection for the current query.
    pick: Option<Pick>,
    page_rows: usize,
    /// What discovery adds to the session rows of the last answer (SPEC §8), if anything.
    details: Option<Arc<SessionDetails>>,
    /// File rows are supplied by [`set_file_rows`](Self::set_file_rows).
    external_files: bool,
}

impl Default for PopupState {
    fn default() -> Self {
        PopupState::new()
    }
}

impl PopupState {
    /// A closed popup with no rows and an empty file index.
    pub fn new() -> PopupState {
        PopupState {
            open: false,
            query: String::new(),
            paths_only: false,
            token_start: None,
            dismissed_at: None,
            next_id: 0,
            latest: None,
            lookup: Lookup::Idle,
            answer: Vec::new(),
            sessions: Vec::new(),
            files: Vec::new(),
            file_index: Arc::new(FileIndex::default()),
            matcher: FileMatcher::default(),
            rows: Vec::new(),
            scroll: ScrollState::default(),
            pick: None,
            page_rows: DEFAULT_PAGE_ROWS,
            details: None,
            external_files: false,
        }
    }

    /// Rows visible at once (at least 1); also the PgUp/PgDn step.
    pub fn set_page_rows(&mut self, rows: usize) {
        self.page_rows = rows.max(1);
        self.ensure_visible();
    }

    /// File rows matched elsewhere (a [`super::file_index::FileFinder`] off the UI loop) for
    /// `query`; ignored unless it is still the popup's query. From then on the popup shows
    /// these rows instead of matching its own index.
    pub fn set_file_rows(&mut self, query: &str, rows: Vec<FileRow>) {
        self.external_files = true;
        if !self.open || self.query != query {
            return;
        }
        self.files = rows;
        self.rebuild_rows();
    }

    /// Replaces the file index `@path` rows are matched against (relative paths under the
    /// session cwd), and rematches them.
    pub fn set_file_index(&mut self, index: Arc<FileIndex>) {
        self.file_index = index;
        self.refresh_files();
        self.rebuild_rows();
    }

    /// Whether the popup is showing.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// The query: the token's text after `@` (or `@"`).
    pub fn query(&self) -> &str {
        &self.query
    }

    /// A quoted `@"…` token: files only.
    pub fn paths_only(&self) -> bool {
        self.paths_only
    }

    /// Whether the lookup for the current query is still running.
    pub fn is_loading(&self) -> bool {
        self.lookup == Lookup::Loading
    }

    /// The last lookup's error message, raw (escaped when drawn), if it failed.
    pub fn error(&self) -> Option<&str> {
        match &self.lookup {
            Lookup::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Number of selectable rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is no row to select.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The selected row's position in [`Self::items`], if there is a row.
    pub fn selected_index(&self) -> Option<usize> {
        (!self.rows.is_empty()).then_some(self.scroll.selected)
    }

    /// The first visible row (kept so the selection stays on screen).
    pub fn scroll(&self) -> usize {
        self.scroll.top
    }

    /// The row Tab/Enter would insert.
    pub fn selected(&self) -> Option<PopupItem> {
        self.rows
            .get(self.scroll.selected)
            .map(|row| self.item(*row))
    }

    /// All rows, in display order.
    pub fn items(&self) -> Vec<PopupItem> {
        self.rows.iter().map(|row| self.item(*row)).collect()
    }

    fn item(&self, row: Row) -> PopupItem {
        match row {
            Row::Session(i) => PopupItem::Session(self.sessions[i].clone()),
            Row::File(i) => PopupItem::File(self.files[i].clone()),
        }
    }

    /// Follows the composer: opens on an `@` token, tracks its query, closes when there is no
    /// token, and stays closed on the token Esc dismissed. Returns the lookup to run, if any.
    pub fn sync(&mut self, token: Option<&ActiveToken>) -> Option<LookupRequest> {
        let Some(token) = token else {
            self.dismissed_at = None;
            if self.open {
                self.close();
            }
            return None;
        };
        if self.dismissed_at == Some(token.start) {
            return None;
        }
        self.dismissed_at = None;
        if self.open && self.token_start != Some(token.start) {
            // A different token: start fresh rather than carry the old selection over.
            self.close();
        }
        self.token_start = Some(token.start);
        self.open(&token.query, token.quoted)
    }

    /// Shows the popup for `query`. Returns the session lookup to run when the query (or mode)
    /// changed; `paths_only` popups never look sessions up.
    pub fn open(&mut self, query: &str, paths_only: bool) -> Option<LookupRequest> {
        let unchanged = self.open && self.query == query && self.paths_only == paths_only;
        self.open = true;
        if unchanged {
            return None;
        }
        self.paths_only = paths_only;
        if paths_only {
            self.set_query(query);
            self.latest = None;
            self.lookup = Lookup::Idle;
            self.sessions.clear();
            self.rebuild_rows();
            None
        } else {
            let id = self.begin_lookup(query);
            Some(LookupRequest {
                id,
                query: query.to_string(),
            })
        }
    }

    /// Starts a session lookup for `query` and marks the popup loading. Any answer to an earlier
    /// id will be dropped.
    pub fn begin_lookup(&mut self, query: &str) -> QueryId {
        self.next_id += 1;
        let id = QueryId(self.next_id);
        self.latest = Some(id);
        self.lookup = Lookup::Loading;
        self.set_query(query);
        // Until the answer comes, keep what still matches (id or cwd contains the query).
        let filter = CandidateFilter::new(query);
        // With discovery on, labels match too (the finder's rows are found by title).
        let needle = query.to_lowercase();
        self.sessions = self
            .answer
            .iter()
            .filter(|c| {
                filter.matches(&c.session_id, c.cwd.as_deref())
                    || (self.details.is_some()
                        && !needle.is_empty()
                        && c.label.to_lowercase().contains(&needle))
            })
            .cloned()
            .collect();
        self.rebuild_rows();
        id
    }

    /// Applies the answer to lookup `id`. Returns false (and changes nothing) when `id` is not
    /// the latest lookup or the popup closed since.
    pub fn apply_results(&mut self, id: QueryId, result: Result<Vec<Candidate>, String>) -> bool {
        if self.latest != Some(id) {
            return false;
        }
        match result {
            Ok(candidates) => {
                self.lookup = Lookup::Ready;
                self.answer = candidates;
                self.sessions = self.answer.clone();
            }
            Err(message) => {
                self.lookup = Lookup::Failed(message);
                self.sessions.clear();
            }
        }
        self.rebuild_rows();
        true
    }

    /// Attaches discovery's row details to the answer of lookup `id` (dropped when stale).
    pub fn set_details(&mut self, id: QueryId, details: Option<Arc<SessionDetails>>) -> bool {
        if self.latest != Some(id) {
            return false;
        }
        self.details = details;
        true
    }

    /// Hides the popup; pending lookups are forgotten.
    pub fn close(&mut self) {
        self.details = None;
        self.open = false;
        self.latest = None;
        self.lookup = Lookup::Idle;
        self.query.clear();
        self.token_start = None;
        self.sessions.clear();
        self.files.clear();
        self.rows.clear();
        self.scroll.reset();
        self.pick = None;
    }

    /// Esc: close and stay closed while the cursor remains in the same token.
    pub fn dismiss(&mut self) {
        self.dismissed_at = self.token_start;
        self.close();
    }

    /// Moves the selection up one row, from the first to the last.
    pub fn move_up(&mut self) {
        let (len, cap) = (self.rows.len(), self.list_capacity());
        self.scroll.move_up_wrap(len, cap);
        self.moved();
    }

    /// Moves the selection down one row, from the last to the first.
    pub fn move_down(&mut self) {
        let (len, cap) = (self.rows.len(), self.list_capacity());
        self.scroll.move_down_wrap(len, cap);
        self.moved();
    }

    /// Moves the selection up one page, stopping at the first row.
    pub fn page_up(&mut self) {
        let (len, cap) = (self.rows.len(), self.list_capacity());
        self.scroll.page_up(len, cap);
        self.moved();
    }

    /// Moves the selection down one page, stopping at the last row.
    pub fn page_down(&mut self) {
        let (len, cap) = (self.rows.len(), self.list_capacity());
        self.scroll.page_down(len, cap);
        self.moved();
    }

    /// Selects row `index` (clamped).
    pub fn select(&mut self, index: usize) {
        let (len, cap) = (self.rows.len(), self.list_capacity());
        self.scroll.select(index, len, cap);
        self.moved();
    }

    fn moved(&mut self) {
        if self.rows.is_empty() {
            return;
        }
        self.pick = self.rows.get(self.scroll.selected).map(|row| match *row {
            Row::Session(i) => Pick::Session(self.sessions[i].session_id.clone()),
            Row::File(i) => Pick::File(self.files[i].path.clone()),
        });
        self.ensure_visible();
    }

    /// Routes a key while the popup is open, by the standard keymap.
    pub fn handle_key(&mut self, key: KeyEvent) -> PopupOutcome {
        self.handle_key_with(Keymap::shared_standard(), key)
    }

    /// Routes a key while the popup is open, by `keymap`.
    pub fn handle_key_with(&mut self, keymap: &Keymap, key: KeyEvent) -> PopupOutcome {
        if key.kind == KeyEventKind::Release || !self.open {
            return PopupOutcome::Ignored;
        }
        match keymap.action(KeyContext::Popup, &key) {
            // Enter with nothing to insert is the composer's (it sends); Tab just closes.
            Some(Action::PopupAccept)
                if key.code == crossterm::event::KeyCode::Enter
                    && self.rows.is_empty()
                    && !self.is_loading() =>
            {
                PopupOutcome::Ignored
            }
            Some(action) => self.handle_action(action),
            None => PopupOutcome::Ignored,
        }
    }

    /// Does a popup action; any other action is [`PopupOutcome::Ignored`].
    ///
    /// With nothing to offer (no rows, not loading), Up, Down, paging and Enter are not the
    /// popup's: they go on to the composer (history, send), so the popup never traps them.
    pub fn handle_action(&mut self, action: Action) -> PopupOutcome {
        if self.rows.is_empty() {
            match action {
                Action::PopupUp | Action::PopupDown => return PopupOutcome::Ignored,
                Action::PopupPageUp | Action::PopupPageDown => return PopupOutcome::Ignored,
                _ => {}
            }
        }
        match action {
            Action::PopupUp => self.move_up(),
            Action::PopupDown => self.move_down(),
            Action::PopupPageUp => self.page_up(),
            Action::PopupPageDown => self.page_down(),
            Action::PopupAccept => {
                return match self.selected() {
                    Some(item) => PopupOutcome::Accept(item),
                    None => {
                        self.dismiss();
                        PopupOutcome::Close
                    }
                };
            }
            Action::PopupClose => {
                self.dismiss();
                return PopupOutcome::Close;
            }
            _ => return PopupOutcome::Ignored,
        }
        PopupOutcome::Handled
    }

    /// The widget for this state; ages are measured against `now_ms` (epoch ms).
    pub fn view(&self, now_ms: i64) -> PopupView<'_> {
        PopupView {
            state: self,
            now_ms,
        }
    }

    fn set_query(&mut self, query: &str) {
        if self.query != query {
            self.query = query.to_string();
            self.scroll.reset();
            self.pick = None;
        }
        self.refresh_files();
    }

    fn refresh_files(&mut self) {
        if self.external_files {
            // Rows come from `set_file_rows`; until the new query's arrive, the last ones stay
            // (as session rows do while loading).
            if !self.open {
                self.files.clear();
            }
            return;
        }
        self.files = if self.open {
            self.matcher.best(&self.file_index, &self.query, FILE_LIMIT)
        } else {
            Vec::new()
        };
    }

    /// Recomputes the rows after sessions or files changed; keeps the user's pick if it is
    /// still there, else selects the best row.
    fn rebuild_rows(&mut self) {
        self.rows.clear();
        // A file whose name is or starts with the query (`@READ` → README.md) outranks the
        // sessions that match it only weakly (fuzzy, or through the conversation): strong
        // sessions first, then such files, then the other sessions, then the other files.
        let needle = self.query.to_lowercase();
        let strong_file = |path: &str| {
            let name = path.rsplit('/').next().unwrap_or(path).to_lowercase();
            needle.chars().count() >= 2 && name.starts_with(&needle)
        };
        let strong_session = |c: &Candidate| {
            needle.is_empty()
                || c.label.to_lowercase().contains(&needle)
                || c.session_id.to_lowercase().starts_with(&needle)
        };
        let files_first: Vec<usize> = (0..self.files.len())
            .filter(|&i| strong_file(&self.files[i].path))
            .collect();
        if !self.paths_only {
            let (strong, weak): (Vec<usize>, Vec<usize>) = (0..self.sessions.len())
                .partition(|&i| files_first.is_empty() || strong_session(&self.sessions[i]));
            self.rows.extend(strong.into_iter().map(Row::Session));
            self.rows.extend(files_first.iter().copied().map(Row::File));
            self.rows.extend(weak.into_iter().map(Row::Session));
        } else {
            self.rows.extend(files_first.iter().copied().map(Row::File));
        }
        self.rows.extend(
            (0..self.files.len())
                .filter(|i| !files_first.contains(i))
                .map(Row::File),
        );
        let found = self.pick.as_ref().and_then(|pick| {
            self.rows.iter().position(|row| match (*row, pick) {
                (Row::Session(i), Pick::Session(id)) => self.sessions[i].session_id == *id,
                (Row::File(i), Pick::File(path)) => self.files[i].path == *path,
                _ => false,
            })
        });
        match found {
            Some(i) => self.scroll.selected = i,
            None => {
                self.scroll.selected = 0;
                self.pick = None;
            }
        }
        self.ensure_visible();
    }

    /// Rows left for the list once the status line (if any) is drawn.
    fn list_capacity(&self) -> usize {
        let status = usize::from(self.status().is_some());
        self.page_rows.saturating_sub(status).max(1)
    }

    fn ensure_visible(&mut self) {
        let cap = self.list_capacity();
        self.scroll.ensure_visible(self.rows.len(), cap);
    }

    /// The one line of text shown above (or instead of) the rows.
    fn status(&self) -> Option<(StyledText, Style)> {
        let mut text = StyledText::new();
        let quoted = |text: &mut StyledText, prefix: &str, style: Style| {
            text.push(prefix, style);
            text.push("\"", style);
            text.push_untrusted(&self.query, EscapeMode::SingleLine, style);
            text.push("\"", style);
        };
        if self.paths_only {
            if self.query.is_empty() {
                text.push("Type to search files", style::dim());
                return Some((text, style::dim()));
            }
            if self.files.is_empty() {
                quoted(&mut text, "No files match ", style::dim());
                return Some((text, style::dim()));
            }
            return None;
        }
        match &self.lookup {
            Lookup::Failed(message) => {
                text.push("Session lookup failed: ", style::error());
                text.push_untrusted(message, EscapeMode::SingleLine, style::error());
                Some((text, style::error()))
            }
            Lookup::Loading if self.sessions.is_empty() => {
                text.push("Loading sessions…", style::dim());
                Some((text, style::dim()))
            }
            Lookup::Loading => None,
            Lookup::Ready | Lookup::Idle if self.sessions.is_empty() => {
                if self.query.is_empty() {
                    text.push("No other sessions yet", style::dim());
                } else {
                    quoted(&mut text, "No sessions match ", style::dim());
                }
                Some((text, style::dim()))
            }
            Lookup::Ready | Lookup::Idle => None,
        }
    }
}

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

impl PopupView<'_> {
    fn session_line(&self, c: &Candidate, width: usize, selected: bool) -> StyledText {
        let query = &self.state.query;
        let narrow = width < NARROW;
        let mut line = prefix(selected, narrow, true);
        // Another agent's session wears its source as a badge (SPEC §9).
        if let Some(agent) = ExternalAgent::of_id(&c.session_id) {
            line.push(agent.name(), style::session_tag());
            line.push(" ", Style::new());
        }
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
        let age_w = super::text::str_width(&age) + 1;
        // The age goes first when space runs out: the label is what identifies the row.
        let show_age = width >= line.width() + age_w + 8;
        let body_w = width.saturating_sub(line.width() + if show_age { age_w } else { 0 });

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
        let mut fields = vec![Field {
            text: match first_prompt {
                Some(prompt) => field(&one_line(prompt), base, hl),
                None => field(&c.label, base, hl),
            },
            weight: 3,
            keep_tail: false,
        }];
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
        let body = fit_fields(fields, body_w);
        let pad = body_w.saturating_sub(body.width());
        line.append(body);
        if show_age {
            line.push(&" ".repeat(pad + 1), Style::new());
            line.push(&age, style::dim());
        }
        line.truncate(width)
    }

    fn detail(&self, id: &str) -> Option<&RowDetail> {
        self.state.details.as_ref()?.rows.get(id)
    }

    fn file_line(&self, f: &FileRow, width: usize, selected: bool) -> StyledText {
        let mut line = prefix(selected, width < NARROW, false);
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

/// Narrowest useful width of a secondary field; below it the field is left out.
const MIN_FIELD: usize = 6;

/// Lays `fields` out in `width` cells, two spaces apart. When they don't fit, space is shared
/// by weight (a field that needs less than its share gives the rest back) and secondary fields
/// that would be squeezed below [`MIN_FIELD`] are dropped (the id first), so that at 40 columns a
/// row still shows the label and the end of the cwd rather than one field cut to nothing.
fn fit_fields(mut fields: Vec<Field>, width: usize) -> StyledText {
    const SEP: usize = 2;
    loop {
        let avail = width.saturating_sub(SEP * fields.len().saturating_sub(1));
        let needs: Vec<usize> = fields.iter().map(|f| f.text.width()).collect();
        let alloc = share(
            &needs,
            &fields.iter().map(|f| f.weight).collect::<Vec<_>>(),
            avail,
        );
        let squeezed = (1..fields.len()).any(|i| alloc[i] < needs[i] && alloc[i] < MIN_FIELD);
        if squeezed {
            // Field 1 is the id when there is one (the least readable), else the cwd.
            fields.remove(1);
            continue;
        }
        let mut out = StyledText::new();
        for (i, (f, w)) in fields.iter().zip(alloc).enumerate() {
            if i > 0 {
                out.push("  ", style::dim());
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
        for (i, row) in state.rows.iter().enumerate().skip(scroll).take(cap) {
            let selected = i == state.scroll.selected;
            let mut line = match *row {
                Row::Session(s) => self.session_line(&state.sessions[s], width, selected),
                Row::File(f) => self.file_line(&state.files[f], width, selected),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::snapshot::render_snapshot;
    use crossterm::event::{KeyCode, KeyModifiers};
    use proptest::prelude::*;

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
        assert_eq!(state.handle_key(key(KeyCode::Up)), PopupOutcome::Handled);
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
            PopupOutcome::Accept(PopupItem::Session(c)) => assert_eq!(c.session_id, "s1"),
            other => panic!("unexpected {other:?}"),
        }
        match state.handle_key(key(KeyCode::Tab)) {
            PopupOutcome::Accept(PopupItem::Session(c)) => assert_eq!(c.session_id, "s1"),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            state.handle_key(key(KeyCode::Char('x'))),
            PopupOutcome::Ignored
        );
        assert_eq!(state.handle_key(key(KeyCode::Esc)), PopupOutcome::Close);
        assert!(!state.is_open());
        assert_eq!(state.handle_key(key(KeyCode::Down)), PopupOutcome::Ignored);
    }

    #[test]
    fn with_nothing_to_offer_the_popup_traps_no_key() {
        let mut state = PopupState::new();
        let request = state.open("zzz", false).unwrap();
        // Still loading: Enter waits for the answer rather than sending.
        assert_eq!(state.handle_key(key(KeyCode::Enter)), PopupOutcome::Close);
        let request2 = state.open("zzzz", false).unwrap();
        assert!(!state.apply_results(request.id, Ok(Vec::new())));
        state.apply_results(request2.id, Ok(Vec::new()));
        // Answered with nothing: Enter (send), Up and Down (history) go to the composer.
        for code in [KeyCode::Enter, KeyCode::Up, KeyCode::Down, KeyCode::PageUp] {
            assert_eq!(
                state.handle_key(key(code)),
                PopupOutcome::Ignored,
                "{code:?}"
            );
        }
        assert!(state.is_open());
        assert_eq!(state.handle_key(key(KeyCode::Tab)), PopupOutcome::Close);
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
}
