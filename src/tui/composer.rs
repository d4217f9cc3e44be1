//! The multi-line composer, with mentions as atomic elements (SPEC §5.1).
//!
//! A mention is stored as one element rather than as its Markdown: the user sees a compact
//! `@label`, and cursor movement and deletion can't leave half a `@[label](dsh-session:…)`
//! behind, which would either fail the whole parse at submit or silently point at another
//! session. The canonical Markdown exists only in [`Composer::submission_text`].
//!
//! Text is a vector of elements (characters and mentions) with the cursor as an element index.
//! Layout is recomputed on demand for the width being drawn; the width of the last draw is
//! remembered only so Up/Down can move over wrapped rows.
//!
//! Editing is per extended grapheme cluster (SPEC §5.5): Backspace, Delete, Left/Right and the
//! word motions never stop inside a cluster, so a ZWJ family, a flag, a skin-toned emoji or a
//! letter with its combining marks goes as a whole, and a cluster is as wide as the buffer draws
//! it. Clusters are found with `unicode-segmentation` on the stretch of characters between two
//! boundaries that no context can move (the text's ends, a mention's edges, either side of a
//! line feed, and between two characters that never combine, such as two ASCII letters), so an
//! edit costs the cluster around it, not the whole text.

use super::escape::{self, EscapeMode, Shown};
use super::popup::PopupItem;
use super::render::{clip, Renderable};
use super::style;
use super::text::{
    certain_boundary, char_width, cluster_cells, inert_boundary, str_width, StyledText,
};
use crate::reference::Candidate;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;
use ratatui::widgets::{Block, BorderType, Widget};
use std::borrow::Cow;
use std::cell::Cell;
use std::ops::Range;
use unicode_segmentation::UnicodeSegmentation;

/// A session mention: drawn as `@label`, submitted as `@[label](dsh-session:…)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MentionElement {
    /// Already safe to draw (escaped per SPEC §5.2); this exact text is what gets submitted.
    pub label: String,
    /// The raw session id; the URI is built from it untouched.
    pub session_id: String,
}

impl MentionElement {
    /// The mention for a popup candidate: its label escaped for a single line, its id raw.
    pub fn from_candidate(candidate: &Candidate) -> MentionElement {
        MentionElement {
            label: escape::escape_line(&candidate.label).into_owned(),
            session_id: candidate.session_id.clone(),
        }
    }

    /// `@[label](dsh-session:…)`.
    pub fn markdown(&self) -> String {
        crate::reference::format_session_reference_mention(&self.session_id, Some(&self.label))
    }

    /// `@label`, as drawn.
    pub fn display(&self) -> String {
        format!("@{}", self.label)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Elem {
    Char(char),
    Mention(Box<MentionElement>),
}

impl Elem {
    fn is_whitespace(&self) -> bool {
        matches!(self, Elem::Char(c) if c.is_whitespace())
    }
    fn is(&self, want: char) -> bool {
        matches!(self, Elem::Char(c) if *c == want)
    }
}

/// The `@` token under the cursor (SPEC §5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveToken {
    /// Element index of the `@`; identifies the token while it is being typed.
    pub start: usize,
    /// Element index just past the token.
    pub end: usize,
    /// The text after `@` (inside the quotes for a quoted token).
    pub query: String,
    /// `@"…`: paths only.
    pub quoted: bool,
}

/// A saved composer content (text, mentions and cursor), for history and for restoring the
/// input after a failed send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComposerSnapshot {
    elems: Vec<Elem>,
    cursor: usize,
}

impl ComposerSnapshot {
    /// The canonical text to submit (mentions as Markdown).
    pub fn submission_text(&self) -> String {
        let mut out = String::new();
        for elem in &self.elems {
            match elem {
                Elem::Char(c) => out.push(*c),
                Elem::Mention(m) => out.push_str(&m.markdown()),
            }
        }
        out
    }

    /// Only whitespace (or nothing).
    pub fn is_blank(&self) -> bool {
        self.elems.iter().all(Elem::is_whitespace)
    }
}

/// What a key did to the composer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComposerOutcome {
    /// Plain Enter: the caller runs the submit transaction.
    Submit,
    /// The text changed (re-sync the popup).
    Edited,
    /// Only the cursor moved (re-sync the popup).
    Moved,
    /// Not a composer key.
    Ignored,
}

const TAB_WIDTH: usize = 4;
const GUTTER: u16 = 2;
pub const DEFAULT_MAX_ROWS: u16 = 8;

#[derive(Debug, Clone)]
pub struct Composer {
    elems: Vec<Elem>,
    cursor: usize,
    /// Column kept across consecutive Up/Down moves.
    preferred_x: Option<usize>,
    history: Vec<ComposerSnapshot>,
    /// Index into `history` while browsing it; `draft` is what was there before.
    history_pos: Option<usize>,
    draft: Option<ComposerSnapshot>,
    placeholder: String,
    max_rows: u16,
    /// Text width of the last draw, for Up/Down over wrapped rows (0: not drawn yet).
    last_width: Cell<u16>,
}

impl Default for Composer {
    fn default() -> Self {
        Composer::new()
    }
}

impl Composer {
    pub fn new() -> Composer {
        Composer {
            elems: Vec::new(),
            cursor: 0,
            preferred_x: None,
            history: Vec::new(),
            history_pos: None,
            draft: None,
            placeholder: "Ask anything · @ to mention a session".into(),
            max_rows: DEFAULT_MAX_ROWS,
            last_width: Cell::new(0),
        }
    }

    pub fn set_placeholder(&mut self, placeholder: impl Into<String>) {
        self.placeholder = placeholder.into();
    }

    /// Text rows shown before the composer scrolls.
    pub fn set_max_rows(&mut self, rows: u16) {
        self.max_rows = rows.max(1);
    }

    // ----- content -----

    /// The canonical text to submit: mentions as `@[label](dsh-session:…)`.
    pub fn submission_text(&self) -> String {
        self.snapshot().submission_text()
    }

    /// The text as drawn: mentions as `@label`.
    pub fn display_text(&self) -> String {
        let mut out = String::new();
        for elem in &self.elems {
            match elem {
                Elem::Char(c) => out.push(*c),
                Elem::Mention(m) => out.push_str(&m.display()),
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }

    /// Only whitespace (or nothing): nothing worth sending.
    pub fn is_blank(&self) -> bool {
        self.elems.iter().all(Elem::is_whitespace)
    }

    /// The mentions in order of appearance.
    pub fn mentions(&self) -> Vec<&MentionElement> {
        self.elems
            .iter()
            .filter_map(|e| match e {
                Elem::Mention(m) => Some(&**m),
                Elem::Char(_) => None,
            })
            .collect()
    }

    /// Cursor as an element index (a mention counts as one element).
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn snapshot(&self) -> ComposerSnapshot {
        ComposerSnapshot {
            elems: self.elems.clone(),
            cursor: self.cursor,
        }
    }

    /// Puts a snapshot back (e.g. after `prepare` failed), mentions and cursor included.
    pub fn restore(&mut self, snapshot: ComposerSnapshot) {
        self.cursor = snapshot.cursor.min(snapshot.elems.len());
        self.elems = snapshot.elems;
        self.after_edit();
    }

    /// Replaces everything with plain text; the cursor goes to the end.
    pub fn set_text(&mut self, text: &str) {
        self.elems = normalize_newlines(text).chars().map(Elem::Char).collect();
        self.cursor = self.elems.len();
        self.after_edit();
    }

    pub fn clear(&mut self) {
        self.elems.clear();
        self.cursor = 0;
        self.after_edit();
    }

    /// Remembers a sent message for Up/Down recall (consecutive duplicates collapse).
    pub fn push_history(&mut self, mut snapshot: ComposerSnapshot) {
        if snapshot.is_blank() {
            return;
        }
        snapshot.cursor = snapshot.elems.len();
        if self.history.last() != Some(&snapshot) {
            self.history.push(snapshot);
        }
        // Browsing (if any) goes on: the entries shown keep their indices, and the draft saved
        // when browsing started (text typed while the message was being sent) is kept.
    }

    /// Submit helper: returns the canonical text and a snapshot (to restore on failure),
    /// records the snapshot in history and clears the input.
    pub fn take_submission(&mut self) -> (String, ComposerSnapshot) {
        let snapshot = self.snapshot();
        let text = snapshot.submission_text();
        self.push_history(snapshot.clone());
        self.clear();
        (text, snapshot)
    }

    /// Takes the whole content out for sending, leaving an empty draft to type the next
    /// message into; nothing goes to history yet (see [`push_history`](Self::push_history)).
    pub fn take_draft(&mut self) -> ComposerSnapshot {
        let snapshot = self.snapshot();
        self.clear();
        snapshot
    }

    /// Puts a message that failed to send back in front of whatever was typed since it was
    /// taken, on a line of its own; the cursor stays where the typing was. Nothing typed is
    /// lost and nothing is added but the one line break that keeps the two apart.
    pub fn restore_before(&mut self, snapshot: ComposerSnapshot) {
        if self.elems.is_empty() {
            return self.restore(snapshot);
        }
        let mut elems = snapshot.elems;
        if !elems.is_empty() && !elems.last().is_some_and(|e| e.is('\n')) && !self.elems[0].is('\n')
        {
            elems.push(Elem::Char('\n'));
        }
        self.cursor += elems.len();
        elems.append(&mut self.elems);
        self.elems = elems;
        self.after_edit();
    }

    // ----- editing -----

    pub fn insert_char(&mut self, c: char) {
        self.splice(self.cursor..self.cursor, vec![Elem::Char(c)]);
    }

    /// Inserts text (typed or pasted); `\r\n` and `\r` become `\n`.
    pub fn insert_str(&mut self, text: &str) {
        let elems = normalize_newlines(text).chars().map(Elem::Char).collect();
        self.splice(self.cursor..self.cursor, elems);
    }

    pub fn insert_newline(&mut self) {
        self.insert_char('\n');
    }

    /// Replaces the active `@` token (or inserts at the cursor when there is none) with a
    /// mention of `candidate` and one space.
    pub fn insert_mention(&mut self, candidate: &Candidate) {
        self.insert_mention_element(MentionElement::from_candidate(candidate));
    }

    pub fn insert_mention_element(&mut self, mention: MentionElement) {
        let range = self.token_range();
        self.splice(
            range,
            vec![Elem::Mention(Box::new(mention)), Elem::Char(' ')],
        );
    }

    /// Replaces the active token with `@path ` (quoted when the path has whitespace).
    pub fn insert_file(&mut self, path: &str) {
        let text = if path.chars().any(char::is_whitespace) {
            format!("@\"{path}\" ")
        } else {
            format!("@{path} ")
        };
        let range = self.token_range();
        self.splice(range, text.chars().map(Elem::Char).collect());
    }

    /// Inserts what the popup accepted.
    pub fn insert_item(&mut self, item: &PopupItem) {
        match item {
            PopupItem::Session(candidate) => self.insert_mention(candidate),
            PopupItem::File(row) => self.insert_file(&row.path),
        }
    }

    fn token_range(&self) -> Range<usize> {
        match self.active_token() {
            Some(token) => token.start..token.end,
            None => self.cursor..self.cursor,
        }
    }

    fn splice(&mut self, range: Range<usize>, with: Vec<Elem>) {
        let end = range.start + with.len();
        self.elems.splice(range, with);
        self.cursor = end;
        self.after_edit();
    }

    fn after_edit(&mut self) {
        self.preferred_x = None;
        // Editing a recalled message makes it the draft. The draft it stood in for was typed
        // and never sent: it is filed in history (Up recalls it) rather than dropped.
        if self.history_pos.take().is_some() {
            if let Some(draft) = self.draft.take() {
                self.push_history(draft);
            }
        }
        self.draft = None;
    }

    /// Deletes the element (or character cluster) before the cursor; a mention goes whole.
    pub fn backspace(&mut self) -> bool {
        if self.cursor == 0 {
            return false;
        }
        let start = self.cluster_at(self.cursor - 1).start;
        self.splice(start..self.cursor, Vec::new());
        true
    }

    /// Deletes the element (or character cluster) after the cursor; a mention goes whole.
    pub fn delete(&mut self) -> bool {
        if self.cursor >= self.elems.len() {
            return false;
        }
        let end = self.cluster_at(self.cursor).end;
        let at = self.cursor;
        self.splice(at..end, Vec::new());
        self.cursor = at;
        true
    }

    /// Deletes back to the start of the previous word.
    pub fn delete_word_back(&mut self) -> bool {
        let start = self.word_start(self.cursor);
        if start == self.cursor {
            return false;
        }
        self.splice(start..self.cursor, Vec::new());
        true
    }

    /// Deletes back to the start of the line (or the previous line break, when already there).
    pub fn delete_to_line_start(&mut self) -> bool {
        let start = self.line_range(self.cursor).start;
        let start = if start == self.cursor {
            self.cursor.saturating_sub(1)
        } else {
            start
        };
        if start == self.cursor {
            return false;
        }
        self.splice(start..self.cursor, Vec::new());
        true
    }

    /// Deletes to the end of the line (or the line break, when already there).
    pub fn delete_to_line_end(&mut self) -> bool {
        let end = self.line_range(self.cursor).end;
        let end = if end == self.cursor {
            (self.cursor + 1).min(self.elems.len())
        } else {
            end
        };
        if end == self.cursor {
            return false;
        }
        let at = self.cursor;
        self.splice(at..end, Vec::new());
        self.cursor = at;
        true
    }

    // ----- movement -----

    pub fn move_left(&mut self) -> bool {
        self.preferred_x = None;
        if self.cursor == 0 {
            return false;
        }
        self.cursor = self.cluster_at(self.cursor - 1).start;
        true
    }

    pub fn move_right(&mut self) -> bool {
        self.preferred_x = None;
        if self.cursor >= self.elems.len() {
            return false;
        }
        self.cursor = self.cluster_at(self.cursor).end;
        true
    }

    pub fn move_word_left(&mut self) -> bool {
        self.preferred_x = None;
        let to = self.word_start(self.cursor);
        std::mem::replace(&mut self.cursor, to) != to
    }

    pub fn move_word_right(&mut self) -> bool {
        self.preferred_x = None;
        let mut i = self.cursor;
        while i < self.elems.len() && self.elems[i].is_whitespace() {
            i += 1;
        }
        while i < self.elems.len() && !self.elems[i].is_whitespace() {
            i += 1;
        }
        let i = self.cluster_end_from(i);
        std::mem::replace(&mut self.cursor, i) != i
    }

    /// Start of the current line (Home, Ctrl-A).
    pub fn move_home(&mut self) -> bool {
        self.preferred_x = None;
        let to = self.line_range(self.cursor).start;
        std::mem::replace(&mut self.cursor, to) != to
    }

    /// End of the current line (End, Ctrl-E).
    pub fn move_end(&mut self) -> bool {
        self.preferred_x = None;
        let to = self.line_range(self.cursor).end;
        std::mem::replace(&mut self.cursor, to) != to
    }

    /// Up one (wrapped) row; on the first row, recall the previous submission.
    pub fn move_up(&mut self) -> ComposerOutcome {
        if self.move_vertical(false) {
            ComposerOutcome::Moved
        } else if self.history_prev() {
            ComposerOutcome::Edited
        } else {
            ComposerOutcome::Ignored
        }
    }

    /// Down one (wrapped) row; on the last row while browsing history, the next submission
    /// (past the newest: the draft that was there before browsing).
    pub fn move_down(&mut self) -> ComposerOutcome {
        if self.move_vertical(true) {
            ComposerOutcome::Moved
        } else if self.history_next() {
            ComposerOutcome::Edited
        } else {
            ComposerOutcome::Ignored
        }
    }

    fn move_vertical(&mut self, down: bool) -> bool {
        let width = match self.last_width.get() {
            0 => usize::MAX,
            w => usize::from(w),
        };
        let widths = self.cell_widths();
        let rows = self.layout_with(width, &widths);
        let (row, x) = self.cursor_row_x(&rows, &widths);
        let target = if down {
            row + 1
        } else {
            match row.checked_sub(1) {
                Some(t) => t,
                None => return false,
            }
        };
        let Some(target_row) = rows.get(target).cloned() else {
            return false;
        };
        let goal = self.preferred_x.unwrap_or(x);
        let mut pos = target_row.start;
        let mut acc = 0;
        for (i, &w) in widths
            .iter()
            .enumerate()
            .take(target_row.end)
            .skip(target_row.start)
        {
            if w > 0 && acc + w > goal {
                break;
            }
            acc += w;
            pos = i + 1;
        }
        // The end of a wrapped row is drawn at the start of the next one; stay on this row.
        let wrapped = rows
            .get(target + 1)
            .is_some_and(|next| next.start == target_row.end);
        if pos == target_row.end && wrapped && pos > target_row.start {
            pos = self.cluster_at(pos - 1).start;
        }
        self.cursor = pos;
        self.preferred_x = Some(goal);
        true
    }

    fn history_prev(&mut self) -> bool {
        let pos = match self.history_pos {
            None if self.history.is_empty() => return false,
            None => {
                self.draft = Some(self.snapshot());
                self.history.len() - 1
            }
            Some(0) => return false,
            Some(i) => i - 1,
        };
        self.load_history(Some(pos));
        true
    }

    fn history_next(&mut self) -> bool {
        match self.history_pos {
            None => false,
            Some(i) if i + 1 < self.history.len() => {
                self.load_history(Some(i + 1));
                true
            }
            Some(_) => {
                self.load_history(None);
                true
            }
        }
    }

    fn load_history(&mut self, pos: Option<usize>) {
        let draft = self.draft.take();
        let snapshot = match pos {
            Some(i) => self.history[i].clone(),
            None => draft.clone().unwrap_or_default(),
        };
        self.elems = snapshot.elems;
        self.cursor = self.elems.len();
        self.preferred_x = None;
        self.history_pos = pos;
        self.draft = if pos.is_some() { draft } else { None };
    }

    // ----- keys -----

    pub fn handle_key(&mut self, key: KeyEvent) -> ComposerOutcome {
        use ComposerOutcome::*;
        if key.kind == KeyEventKind::Release {
            return Ignored;
        }
        let mods = key.modifiers;
        let ctrl = mods.contains(KeyModifiers::CONTROL);
        let alt = mods.contains(KeyModifiers::ALT);
        let edited = |changed: bool| if changed { Edited } else { Ignored };
        let moved = |changed: bool| if changed { Moved } else { Ignored };
        match key.code {
            KeyCode::Enter if alt || mods.contains(KeyModifiers::SHIFT) => {
                self.insert_newline();
                Edited
            }
            KeyCode::Enter if mods.is_empty() => Submit,
            KeyCode::Char('j') if ctrl && !alt => {
                self.insert_newline();
                Edited
            }
            KeyCode::Char('a') if ctrl && !alt => moved(self.move_home()),
            KeyCode::Char('e') if ctrl && !alt => moved(self.move_end()),
            KeyCode::Char('b') if ctrl && !alt => moved(self.move_left()),
            KeyCode::Char('f') if ctrl && !alt => moved(self.move_right()),
            KeyCode::Char('p') if ctrl && !alt => self.move_up(),
            KeyCode::Char('n') if ctrl && !alt => self.move_down(),
            KeyCode::Char('h') if ctrl && !alt => edited(self.backspace()),
            KeyCode::Char('w') if ctrl && !alt => edited(self.delete_word_back()),
            KeyCode::Char('u') if ctrl && !alt => edited(self.delete_to_line_start()),
            KeyCode::Char('k') if ctrl && !alt => edited(self.delete_to_line_end()),
            KeyCode::Char('d') if ctrl && !alt => edited(self.delete()),
            KeyCode::Char('b') if alt && !ctrl => moved(self.move_word_left()),
            KeyCode::Char('f') if alt && !ctrl => moved(self.move_word_right()),
            // Ctrl+Alt is AltGr on some platforms: a typed character.
            KeyCode::Char(c) if ctrl == alt => {
                self.insert_char(c);
                Edited
            }
            KeyCode::Backspace if ctrl || alt => edited(self.delete_word_back()),
            KeyCode::Backspace => edited(self.backspace()),
            KeyCode::Delete => edited(self.delete()),
            KeyCode::Left if ctrl || alt => moved(self.move_word_left()),
            KeyCode::Right if ctrl || alt => moved(self.move_word_right()),
            KeyCode::Left => moved(self.move_left()),
            KeyCode::Right => moved(self.move_right()),
            KeyCode::Home => moved(self.move_home()),
            KeyCode::End => moved(self.move_end()),
            KeyCode::Up => self.move_up(),
            KeyCode::Down => self.move_down(),
            _ => Ignored,
        }
    }

    /// A bracketed paste: inserted as text (newlines kept, never a submit).
    pub fn handle_paste(&mut self, text: &str) -> ComposerOutcome {
        if text.is_empty() {
            return ComposerOutcome::Ignored;
        }
        self.insert_str(text);
        ComposerOutcome::Edited
    }

    // ----- the @ token -----

    /// The `@` token the cursor is in, if any: it starts at a token boundary (line start or
    /// after whitespace) and the cursor is after its `@`. `@"…` runs to the closing quote (or
    /// the line end) and may contain spaces; any other token runs to whitespace or a mention.
    pub fn active_token(&self) -> Option<ActiveToken> {
        let line = self.line_range(self.cursor);
        let mut i = line.start;
        while i < line.end {
            if self.elems[i].is_whitespace() {
                i += 1;
                continue;
            }
            let start = i;
            let at = self.elems[start].is('@');
            let quoted = at && self.elems.get(start + 1).is_some_and(|e| e.is('"'));
            let end = if quoted {
                (start + 2..line.end)
                    .find(|&j| self.elems[j].is('"'))
                    .map_or(line.end, |j| j + 1)
            } else {
                let mut j = start + 1;
                while j < line.end
                    && !self.elems[j].is_whitespace()
                    && !matches!(self.elems[j], Elem::Mention(_))
                {
                    j += 1;
                }
                j
            };
            if at && start < self.cursor && self.cursor <= end {
                let inner_start = if quoted { start + 2 } else { start + 1 };
                let inner_end = if quoted && end > inner_start && self.elems[end - 1].is('"') {
                    end - 1
                } else {
                    end
                };
                let mut query = String::new();
                for elem in &self.elems[inner_start.min(inner_end)..inner_end] {
                    match elem {
                        Elem::Char(c) => query.push(*c),
                        Elem::Mention(m) => query.push_str(&m.display()),
                    }
                }
                return Some(ActiveToken {
                    start,
                    end,
                    query,
                    quoted,
                });
            }
            // Skip the rest of this whitespace-delimited run.
            i = end.max(start + 1);
            while i < line.end && !self.elems[i].is_whitespace() {
                i += 1;
            }
        }
        None
    }

    // ----- geometry -----

    /// The logical line (between `\n`s) holding element index `at`.
    fn line_range(&self, at: usize) -> Range<usize> {
        let start = self.elems[..at]
            .iter()
            .rposition(|e| e.is('\n'))
            .map_or(0, |i| i + 1);
        let end = self.elems[at..]
            .iter()
            .position(|e| e.is('\n'))
            .map_or(self.elems.len(), |i| at + i);
        start..end
    }

    /// Whether a grapheme cluster boundary falls before element `i` whatever the text around:
    /// the text's ends, a mention's edges, either side of a line feed (but not inside CR LF),
    /// and a [`certain_boundary`] (such as between two ASCII characters).
    fn is_fixed_boundary(&self, i: usize) -> bool {
        self.fixed_boundary_by(i, certain_boundary)
    }

    /// [`is_fixed_boundary`](Self::is_fixed_boundary) by the cheaper [`inert_boundary`], for
    /// passes over the whole text.
    fn is_inert_boundary(&self, i: usize) -> bool {
        self.fixed_boundary_by(i, inert_boundary)
    }

    fn fixed_boundary_by(&self, i: usize, between: fn(char, char) -> bool) -> bool {
        if i == 0 || i >= self.elems.len() {
            return true;
        }
        match (&self.elems[i - 1], &self.elems[i]) {
            (Elem::Char('\r'), Elem::Char('\n')) => false,
            (Elem::Char(a), Elem::Char(b)) => *a == '\n' || *b == '\n' || between(*a, *b),
            _ => true,
        }
    }

    /// Element range of the grapheme cluster holding element `i` (a mention is one cluster).
    fn cluster_at(&self, i: usize) -> Range<usize> {
        if i >= self.elems.len() {
            return self.elems.len()..self.elems.len();
        }
        if matches!(self.elems[i], Elem::Mention(_)) {
            return i..i + 1;
        }
        let mut lo = i;
        while !self.is_fixed_boundary(lo) {
            lo -= 1;
        }
        let mut hi = i + 1;
        while !self.is_fixed_boundary(hi) {
            hi += 1;
        }
        if hi - lo == 1 {
            return lo..hi;
        }
        // No mention lies strictly inside: its edges would be fixed boundaries.
        let text: String = self.elems[lo..hi]
            .iter()
            .map(|e| match e {
                Elem::Char(c) => *c,
                Elem::Mention(_) => unreachable!("a mention's edges are fixed boundaries"),
            })
            .collect();
        let mut start = lo;
        for cluster in text.graphemes(true) {
            let end = start + cluster.chars().count();
            if i < end {
                return start..end;
            }
            start = end;
        }
        lo..hi
    }

    /// `i`, or the end of the cluster it falls inside.
    fn cluster_end_from(&self, i: usize) -> usize {
        if i == 0 || i >= self.elems.len() {
            return i;
        }
        let cluster = self.cluster_at(i);
        if cluster.start < i {
            cluster.end
        } else {
            i
        }
    }

    /// `i`, or the start of the cluster it falls inside.
    fn cluster_start_from(&self, i: usize) -> usize {
        if i >= self.elems.len() {
            return i;
        }
        self.cluster_at(i).start
    }

    fn word_start(&self, from: usize) -> usize {
        let mut i = from;
        while i > 0 && self.elems[i - 1].is_whitespace() {
            i -= 1;
        }
        while i > 0 && !self.elems[i - 1].is_whitespace() {
            i -= 1;
        }
        self.cluster_start_from(i)
    }

    /// Cells each element takes when drawn: a grapheme cluster's width (as the buffer draws
    /// it) on its first element and 0 on the rest; a tab [`TAB_WIDTH`]; a control its visible
    /// escape; a mention its `@label`. `\n` gets 0 (rows never include it).
    fn cell_widths(&self) -> Vec<usize> {
        let mut widths = vec![0; self.elems.len()];
        let mut i = 0;
        while i < self.elems.len() {
            if let Elem::Mention(m) = &self.elems[i] {
                widths[i] = 1 + cluster_cells(&escape::escape_line(&m.label));
                i += 1;
                continue;
            }
            // From one fixed boundary to the next: mostly a single character, measured alone;
            // otherwise the stretch is segmented (linear overall, however long the text).
            let mut end = i + 1;
            while !self.is_inert_boundary(end) {
                end += 1;
            }
            if end == i + 1 {
                widths[i] = match self.elems[i] {
                    Elem::Char('\n') => 0,
                    Elem::Char(c) => char_cells(c),
                    Elem::Mention(_) => unreachable!("handled above"),
                };
                i = end;
                continue;
            }
            let run: String = self.elems[i..end]
                .iter()
                .map(|e| match e {
                    Elem::Char(c) => *c,
                    Elem::Mention(_) => unreachable!("a mention's edges are fixed boundaries"),
                })
                .collect();
            let mut at = i;
            for cluster in run.graphemes(true) {
                widths[at] = if cluster == "\n" {
                    0
                } else {
                    cluster_width(cluster)
                };
                at += cluster.chars().count();
            }
            i = end;
        }
        widths
    }

    /// Visual rows at `width` text columns. Rows cover element ranges without the `\n`s.
    /// Lines break after whitespace when they can, else mid-word; a full last row with the
    /// cursor at its end gets an empty row after it so the cursor has a cell to sit in.
    fn layout(&self, width: usize) -> Vec<Range<usize>> {
        self.layout_with(width, &self.cell_widths())
    }

    /// [`layout`](Self::layout) with the [`cell_widths`](Self::cell_widths) already known. A
    /// row only ever breaks before an element with a width, so never inside a cluster.
    fn layout_with(&self, width: usize, widths: &[usize]) -> Vec<Range<usize>> {
        let width = width.max(1);
        let mut rows = Vec::new();
        let mut line_start = 0;
        loop {
            let line_end = self.elems[line_start..]
                .iter()
                .position(|e| e.is('\n'))
                .map_or(self.elems.len(), |i| line_start + i);
            let mut row_start = line_start;
            let mut used = 0;
            let mut after_space = None;
            let mut i = line_start;
            while i < line_end {
                let w = widths[i];
                // Whitespace may hang past the edge; the next word then starts the new row.
                if w > 0 && used + w > width && i > row_start && !self.elems[i].is_whitespace() {
                    let brk = match after_space {
                        Some(b) if b > row_start => b,
                        _ => i,
                    };
                    rows.push(row_start..brk);
                    row_start = brk;
                    used = widths[brk..i].iter().sum();
                    after_space = None;
                }
                used += w;
                // A break after whitespace must not split it from a mark that extends it.
                if self.elems[i].is_whitespace() && widths.get(i + 1).is_none_or(|w| *w > 0) {
                    after_space = Some(i + 1);
                }
                i += 1;
            }
            rows.push(row_start..line_end);
            if used >= width && self.cursor == line_end && line_end > row_start {
                rows.push(line_end..line_end);
            }
            if line_end >= self.elems.len() {
                break;
            }
            line_start = line_end + 1;
        }
        rows
    }

    /// The row holding the cursor (the later one at a wrap boundary) and its column.
    fn cursor_row_x(&self, rows: &[Range<usize>], widths: &[usize]) -> (usize, usize) {
        let row = rows
            .iter()
            .rposition(|r| r.start <= self.cursor && self.cursor <= r.end)
            .unwrap_or(0);
        let x = rows.get(row).map_or(0, |r| {
            widths[r.start..self.cursor.max(r.start)].iter().sum()
        });
        (row, x)
    }

    fn block() -> Block<'static> {
        Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(style::border())
    }

    /// Text area inside the border and the gutter.
    fn text_area(area: Rect) -> Rect {
        let inner = Self::block().inner(area);
        Rect {
            x: inner.x.saturating_add(GUTTER),
            width: inner.width.saturating_sub(GUTTER),
            ..inner
        }
    }

    /// First visible row: the cursor row stays on screen.
    fn top_row(cursor_row: usize, height: u16) -> usize {
        cursor_row.saturating_sub(usize::from(height.max(1)) - 1)
    }

    /// Where the terminal cursor goes when the composer is drawn in `area`.
    pub fn cursor_position(&self, area: Rect) -> Option<Position> {
        let text = Self::text_area(area);
        if text.is_empty() {
            return None;
        }
        let widths = self.cell_widths();
        let rows = self.layout_with(usize::from(text.width), &widths);
        let (row, x) = self.cursor_row_x(&rows, &widths);
        let top = Self::top_row(row, text.height);
        let x = u16::try_from(x).unwrap_or(u16::MAX).min(text.width - 1);
        let y = u16::try_from(row - top).unwrap_or(0);
        Some(Position::new(text.x + x, text.y + y))
    }

    fn row_text(&self, row: Range<usize>) -> StyledText {
        let mut out = StyledText::new();
        for elem in &self.elems[row] {
            match elem {
                Elem::Char('\t') => {
                    out.push(&" ".repeat(TAB_WIDTH), Style::new());
                }
                Elem::Char(c) => {
                    let mut buf = [0u8; 4];
                    out.push_untrusted(
                        c.encode_utf8(&mut buf),
                        EscapeMode::SingleLine,
                        Style::new(),
                    );
                }
                Elem::Mention(m) => {
                    // Labels from `from_candidate` are already safe; one built elsewhere may not be.
                    out.push_untrusted(&m.display(), EscapeMode::SingleLine, style::mention());
                }
            }
        }
        out
    }
}

/// Cells one grapheme cluster takes on screen: a tab or a control is spelled out (each is a
/// cluster of its own, CR LF aside), anything else is as wide as the buffer draws it.
fn cluster_width(cluster: &str) -> usize {
    let mut chars = cluster.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return char_cells(c);
    }
    if !cluster
        .chars()
        .any(|c| c == '\t' || escape::needs_escape(c, EscapeMode::SingleLine))
    {
        // One cluster: as wide as the buffer draws it.
        return str_width(cluster);
    }
    cluster.chars().map(char_cells).sum()
}

/// Cells one character takes drawn alone: a tab [`TAB_WIDTH`], a control its visible escape.
fn char_cells(c: char) -> usize {
    if c == '\t' {
        return TAB_WIDTH;
    }
    match escape::shown(c, None, EscapeMode::SingleLine) {
        Shown::Plain(c) => char_width(c),
        shown => {
            let mut s = String::new();
            shown.push_to(&mut s);
            s.len()
        }
    }
}

fn normalize_newlines(text: &str) -> Cow<'_, str> {
    if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

impl Renderable for Composer {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        Self::block().render(area, buf);
        let text = Self::text_area(area);
        self.last_width.set(text.width);
        if text.is_empty() {
            return;
        }
        let gutter_x = text.x - GUTTER;
        if self.elems.is_empty() {
            buf.set_string(gutter_x, text.y, "›", style::user_prefix());
            let mut placeholder = StyledText::new();
            placeholder.push_untrusted(&self.placeholder, EscapeMode::SingleLine, style::dim());
            let line = placeholder.truncate(usize::from(text.width)).to_line();
            buf.set_line(text.x, text.y, &line, text.width);
            return;
        }
        let widths = self.cell_widths();
        let rows = self.layout_with(usize::from(text.width), &widths);
        let (cursor_row, _) = self.cursor_row_x(&rows, &widths);
        let top = Self::top_row(cursor_row, text.height);
        for (n, row) in rows
            .into_iter()
            .enumerate()
            .skip(top)
            .take(usize::from(text.height))
        {
            let y = text.y + u16::try_from(n - top).unwrap_or(0);
            if n == 0 {
                buf.set_string(gutter_x, y, "›", style::user_prefix());
            }
            buf.set_line(text.x, y, &self.row_text(row).to_line(), text.width);
        }
    }

    fn desired_height(&self, width: u16) -> u16 {
        let text_width = width.saturating_sub(2 + GUTTER);
        let rows = self.layout(usize::from(text_width)).len();
        let rows = u16::try_from(rows)
            .unwrap_or(u16::MAX)
            .clamp(1, self.max_rows);
        rows + 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::snapshot::render_snapshot;
    use proptest::prelude::*;

    fn typed(text: &str) -> Composer {
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

    fn candidate(id: &str, label: &str) -> Candidate {
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
        assert_eq!(c.move_up(), ComposerOutcome::Edited);
        assert_eq!(c.display_text(), "old");
        c.push_history(sent);
        assert_eq!(c.move_down(), ComposerOutcome::Edited);
        assert_eq!(c.display_text(), "sent");
        assert_eq!(c.move_down(), ComposerOutcome::Edited);
        assert_eq!(c.display_text(), "typed meanwhile");
    }

    #[test]
    fn editing_a_recalled_message_keeps_the_draft_it_replaced() {
        let mut c = typed("old");
        let old = c.take_draft();
        c.push_history(old);
        c.insert_str("half typed");
        assert_eq!(c.move_up(), ComposerOutcome::Edited);
        assert_eq!(c.display_text(), "old");
        c.insert_char('!');
        assert_eq!(c.display_text(), "old!");
        assert_eq!(c.move_up(), ComposerOutcome::Edited);
        assert_eq!(
            c.display_text(),
            "half typed",
            "the replaced draft is recalled"
        );
        assert_eq!(c.move_down(), ComposerOutcome::Edited);
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
            ComposerOutcome::Submit
        );
        c.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT));
        c.handle_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::CONTROL));
        assert_eq!(c.display_text(), "one\n\n");
    }

    #[test]
    fn paste_normalizes_line_endings_and_never_submits() {
        let mut c = Composer::new();
        assert_eq!(c.handle_paste("a\r\nb\rc"), ComposerOutcome::Edited);
        assert_eq!(c.display_text(), "a\nb\nc");
    }

    #[test]
    fn up_and_down_follow_wrapped_rows() {
        let mut c = typed("abcdefghij");
        c.last_width.set(4);
        assert_eq!(c.layout(4), vec![0..4, 4..8, 8..10]);
        assert_eq!(c.move_up(), ComposerOutcome::Moved);
        assert_eq!(c.cursor(), 6);
        assert_eq!(c.move_up(), ComposerOutcome::Moved);
        assert_eq!(c.cursor(), 2);
        assert_eq!(c.move_up(), ComposerOutcome::Ignored, "no history");
        assert_eq!(c.move_down(), ComposerOutcome::Moved);
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
                if matches!(c.elems[i], Elem::Mention(_)) {
                    prop_assert_eq!(c.cluster_at(i), i..i + 1);
                    prop_assert_eq!(widths[i], 4);
                    i += 1;
                    continue;
                }
                let run: String = c.elems[i..]
                    .iter()
                    .map_while(|e| match e {
                        Elem::Char(ch) => Some(*ch),
                        Elem::Mention(_) => None,
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
}
