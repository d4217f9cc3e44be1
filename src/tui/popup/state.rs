//! The `@` popup's state: the token it follows, the lookups it asks for, its rows and the
//! selection.
//!
//! Pure: no I/O and no drawing ([`super::rendering`] draws it). Invariant: only the answer to
//! the latest [`QueryId`] is applied, and a pick made by the user is kept by identity across
//! answers. Proof: `tui::popup::tests` and `tests/tui/popup.rs`.

use super::PopupView;
use crate::escape::EscapeMode;
use crate::reference::{Candidate, CandidateFilter};
use crate::tui::file_match::{FileIndex, FileMatcher, FileRow};
use crate::tui::focus::{Command, Handled};
use crate::tui::keys::{Action, KeyContext, Keymap};
use crate::tui::lookup::SessionDetails;
use crate::tui::scroll::ScrollState;
use crate::tui::style;
use crate::tui::text::StyledText;
use crate::tui::token::{ActiveToken, PopupItem};
use crossterm::event::{KeyEvent, KeyEventKind};
use ratatui::style::Style;
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

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Lookup {
    Idle,
    Loading,
    Ready,
    Failed(String),
}

/// What the user picked, by identity, so it survives a new answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pick {
    Session(String),
    File(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Row {
    Session(usize),
    File(usize),
}

/// Rows shown at once unless the caller picks another size.
pub const DEFAULT_PAGE_ROWS: usize = 8;
pub(super) const FILE_LIMIT: usize = 50;
/// Below this inner width the row tags shrink to one letter.
pub(super) const NARROW: usize = 48;

/// The `@` popup's state: the token it follows, the session and file rows and the selection. Pure:
/// the caller runs the lookups it asks for.
#[derive(Debug, Clone)]
pub struct PopupState {
    pub(super) open: bool,
    pub(super) query: String,
    pub(super) paths_only: bool,
    /// Start of the token being completed, and of the one Esc dismissed.
    pub(super) token_start: Option<usize>,
    pub(super) dismissed_at: Option<usize>,
    pub(super) next_id: u64,
    pub(super) latest: Option<QueryId>,
    pub(super) lookup: Lookup,
    /// The last applied answer, and what of it is shown for the current query.
    pub(super) answer: Vec<Candidate>,
    pub(super) sessions: Vec<Candidate>,
    pub(super) files: Vec<FileRow>,
    pub(super) file_index: Arc<FileIndex>,
    pub(super) matcher: FileMatcher,
    pub(super) rows: Vec<Row>,
    pub(super) scroll: ScrollState,
    /// Set when the user moved the selection for the current query.
    pub(super) pick: Option<Pick>,
    pub(super) page_rows: usize,
    /// What discovery adds to the session rows of the last answer (SPEC §8), if anything.
    pub(super) details: Option<Arc<SessionDetails>>,
    /// File rows are supplied by [`set_file_rows`](Self::set_file_rows).
    pub(super) external_files: bool,
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

    /// File rows matched elsewhere (a [`crate::tui::file_index::FileFinder`] off the UI loop) for
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
    pub fn handle_key(&mut self, key: KeyEvent) -> Handled {
        self.handle_key_with(Keymap::shared_standard(), key)
    }

    /// Routes a key while the popup is open, by `keymap`: a popup action
    /// ([`PopupState::handle_action`]), except accepting with nothing to insert by the key that
    /// is also the composer's `submit` (Enter): that key is the composer's (it sends), while
    /// the other accept key (Tab) just closes the popup. A closed popup, a key release and a key
    /// the popup does not bind are [`Handled::Ignored`].
    pub fn handle_key_with(&mut self, keymap: &Keymap, key: KeyEvent) -> Handled {
        if key.kind == KeyEventKind::Release || !self.open {
            return Handled::Ignored;
        }
        match keymap.action(KeyContext::Popup, &key) {
            Some(Action::PopupAccept)
                if self.rows.is_empty()
                    && !self.is_loading()
                    && keymap.action(KeyContext::Composer, &key) == Some(Action::Submit) =>
            {
                Handled::Ignored
            }
            Some(action) => self.handle_action(action),
            None => Handled::Ignored,
        }
    }

    /// Does a popup action: moving the selection is [`Handled::Consumed`], accepting a row
    /// asks the host to insert it ([`Command::Insert`]), and closing (Esc, or accepting with
    /// nothing to insert) dismisses the popup and is consumed; any other action is
    /// [`Handled::Ignored`].
    ///
    /// With nothing to offer (no rows, not loading), Up, Down and paging are not the popup's:
    /// they go on to the composer (history), so the popup never traps them.
    pub fn handle_action(&mut self, action: Action) -> Handled {
        if self.rows.is_empty() {
            match action {
                Action::PopupUp | Action::PopupDown => return Handled::Ignored,
                Action::PopupPageUp | Action::PopupPageDown => return Handled::Ignored,
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
                    Some(item) => Handled::Emit(Command::Insert(item)),
                    None => {
                        self.dismiss();
                        Handled::Consumed
                    }
                };
            }
            Action::PopupClose => self.dismiss(),
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    /// The widget for this state; ages are measured against `now_ms` (epoch ms).
    pub fn view(&self, now_ms: i64) -> PopupView<'_> {
        PopupView::new(self, now_ms)
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
    pub(super) fn status(&self) -> Option<(StyledText, Style)> {
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
