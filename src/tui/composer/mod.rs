//! The multi-line composer, with mentions as atomic elements (SPEC §5.1).
//!
//! A mention is stored as one element rather than as its Markdown: the user sees a compact
//! `@label`, and cursor movement and deletion can't leave half a `@[label](dsh-session:…)`
//! behind, which would either fail the whole parse at submit or silently point at another
//! session. The canonical Markdown exists only in [`Composer::submission_text`]. A large paste
//! is an atom too: drawn `[Pasted 200 lines]`, submitted whole (`a_large_paste_is_collapsed_but_sent_whole`).
//! So is a file chip ([`FileElement`], drawn `@path ⟨3 KiB⟩`): the only thing a send reads a
//! file for, carried to the send as an element ([`ComposerSnapshot::files`]), never found again
//! in the text; only a typed `@path` of plain characters ([`Composer::plain_tokens`]) can become
//! one (`only_plain_typed_tokens_become_chips`).
//!
//! Text is a vector of elements (characters and mentions) with the cursor as an element index.
//! The composer is split by role: `buffer` edits and moves over the elements (clusters, words,
//! lines, the `@` token), `history` recalls sent messages, `layout` wraps and draws,
//! `elements` holds the content's elements and its snapshots, and this file the composer's
//! state and its key handling (`tests` and `properties` are its unit and property tests). Layout is computed once per
//! content, cursor and width and reused by `desired_height`, drawing and the cursor; the width
//! of the last draw is remembered only so Up/Down can move over wrapped rows.
//!
//! Editing is per extended grapheme cluster (SPEC §5.5): Backspace, Delete, Left/Right and the
//! word motions never stop inside a cluster, so a ZWJ family, a flag, a skin-toned emoji or a
//! letter with its combining marks goes as a whole, and a cluster is as wide as the buffer draws
//! it. Clusters are found with `unicode-segmentation` on the stretch of characters between two
//! boundaries that no context can move (the text's ends, a mention's edges, either side of a
//! line feed, and between two characters that never combine, such as two ASCII letters), so an
//! edit costs the cluster around it, not the whole text.

mod buffer;
mod elements;
mod history;
mod layout;

use super::focus::{Command, Handled};
use super::keys::{Action, KeyContext, Keymap};
pub use super::token::ActiveToken;
use crate::escape;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use elements::Elem;
pub use elements::{
    ComposerSnapshot, FileElement, MentionElement, Part, PastedText, PlainToken,
    PASTE_COLLAPSE_CHARS, PASTE_COLLAPSE_LINES,
};
use history::History;
use layout::Laid;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

const TAB_WIDTH: usize = 4;
const GUTTER: u16 = 2;
/// Text rows shown before the composer scrolls, unless [`Composer::set_max_rows`] says otherwise.
pub const DEFAULT_MAX_ROWS: u16 = 8;

/// The message being written: text, mentions (one element each) and collapsed pastes, with the
/// cursor, the prompt history and the layout cache. Edits are by grapheme cluster.
#[derive(Debug, Clone)]
pub struct Composer {
    elems: Vec<Elem>,
    cursor: usize,
    /// Column kept across consecutive Up/Down moves.
    preferred_x: Option<usize>,
    history: History,
    placeholder: String,
    max_rows: u16,
    /// Text width of the last draw, for Up/Down over wrapped rows (0: not drawn yet).
    last_width: Cell<u16>,
    /// Bumped on every change of `elems`: with the cursor and width, the key of `laid`.
    generation: u64,
    /// The last layout computed, reused while content, cursor and width are unchanged.
    laid: RefCell<Option<Laid>>,
    /// Layouts computed so far (a test checks one frame computes one).
    layouts: Cell<u64>,
    keymap: Arc<Keymap>,
    /// Badges drawn after mentions, by session id (e.g. `12 msgs · 48 KiB`).
    badges: Arc<std::collections::BTreeMap<String, String>>,
}

impl Default for Composer {
    fn default() -> Self {
        Composer::new()
    }
}
impl Composer {
    /// An empty composer with the standard keys and the default placeholder.
    pub fn new() -> Composer {
        Composer {
            elems: Vec::new(),
            cursor: 0,
            preferred_x: None,
            history: History::default(),
            placeholder: "Ask anything · @ to mention a session".into(),
            max_rows: DEFAULT_MAX_ROWS,
            last_width: Cell::new(0),
            generation: 0,
            laid: RefCell::new(None),
            layouts: Cell::new(0),
            keymap: standard_keymap(),
            badges: Arc::default(),
        }
    }

    /// The dim text shown while the composer is empty.
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
                Elem::Paste(p) => out.push_str(&p.display()),
                Elem::File(f) => out.push_str(&f.token()),
            }
        }
        out
    }

    /// The file chips in order of appearance.
    pub fn files(&self) -> Vec<&FileElement> {
        self.elems
            .iter()
            .filter_map(|e| match e {
                Elem::File(f) => Some(&**f),
                _ => None,
            })
            .collect()
    }

    /// Nothing typed at all (not even whitespace).
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }

    /// Only whitespace (or nothing): nothing worth sending.
    pub fn is_blank(&self) -> bool {
        self.elems.iter().all(Elem::is_whitespace)
    }

    /// The command name typed so far when the whole draft is `/` plus a word (no space, no
    /// mention): what the `/` menu completes.
    pub fn slash_query(&self) -> Option<String> {
        if !self.elems.first().is_some_and(|e| e.is('/')) {
            return None;
        }
        let mut query = String::new();
        for elem in &self.elems[1..] {
            match elem {
                Elem::Char(c) if !c.is_whitespace() => query.push(*c),
                _ => return None,
            }
        }
        Some(query)
    }

    /// The mentions in order of appearance.
    pub fn mentions(&self) -> Vec<&MentionElement> {
        self.elems
            .iter()
            .filter_map(|e| match e {
                Elem::Mention(m) => Some(&**m),
                _ => None,
            })
            .collect()
    }

    /// Cursor as an element index (a mention counts as one element).
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// The content, mentions and cursor, to restore later or keep in history.
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

    /// Empties the composer; the cursor goes to the start.
    pub fn clear(&mut self) {
        self.elems.clear();
        self.cursor = 0;
        self.after_edit();
    }

    /// Remembers a sent message for Up/Down recall (consecutive duplicates collapse).
    pub fn push_history(&mut self, snapshot: ComposerSnapshot) {
        self.history.push(snapshot);
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
}

impl Composer {
    // ----- keys -----

    /// The badges drawn after mentions, by session id; a mention without one is drawn alone.
    pub fn set_badges(&mut self, badges: std::collections::BTreeMap<String, String>) {
        if *self.badges != badges {
            self.badges = Arc::new(badges);
            // Widths change: the cached layout is stale.
            self.generation += 1;
        }
    }

    /// The badge drawn after a mention of `session_id`.
    pub fn badge(&self, session_id: &str) -> Option<&str> {
        self.badges.get(session_id).map(String::as_str)
    }

    /// Uses `keymap` for every key from now on (the user's `[keys]` overrides).
    pub fn set_keymap(&mut self, keymap: Arc<Keymap>) {
        self.keymap = keymap;
    }

    /// A key: the action the keymap gives it, else a typed character.
    pub fn handle_key(&mut self, key: KeyEvent) -> Handled {
        if key.kind == KeyEventKind::Release {
            return Handled::Ignored;
        }
        if let Some(action) = self.keymap.action(KeyContext::Composer, &key) {
            return self.handle_action(action);
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        match key.code {
            // Ctrl+Alt is AltGr on some platforms: a typed character.
            KeyCode::Char(c) if ctrl == alt => {
                self.insert_char(c);
                Handled::Emit(Command::Edited)
            }
            _ => Handled::Ignored,
        }
    }

    /// Does a composer action: the text changed ([`Command::Edited`]), only the cursor moved
    /// ([`Command::Moved`]), or send ([`Command::Submit`]); an action that changes nothing, and
    /// any other action, is [`Handled::Ignored`].
    pub fn handle_action(&mut self, action: Action) -> Handled {
        let edited = |changed: bool| Handled::emit_if(changed, Command::Edited);
        let moved = |changed: bool| Handled::emit_if(changed, Command::Moved);
        match action {
            Action::Submit => Handled::Emit(Command::Submit),
            Action::Newline => {
                self.insert_newline();
                Handled::Emit(Command::Edited)
            }
            Action::Left => moved(self.move_left()),
            Action::Right => moved(self.move_right()),
            Action::WordLeft => moved(self.move_word_left()),
            Action::WordRight => moved(self.move_word_right()),
            Action::LineStart => moved(self.move_home()),
            Action::LineEnd => moved(self.move_end()),
            Action::Up => self.move_up(),
            Action::Down => self.move_down(),
            Action::Backspace => edited(self.backspace()),
            Action::Delete => edited(self.delete()),
            Action::DeleteWordBack => edited(self.delete_word_back()),
            Action::DeleteToLineStart => edited(self.delete_to_line_start()),
            Action::DeleteToLineEnd => edited(self.delete_to_line_end()),
            _ => Handled::Ignored,
        }
    }

    /// A bracketed paste: inserted as text (newlines kept, never a submit).
    ///
    /// A large one (more than [`PASTE_COLLAPSE_LINES`] lines or [`PASTE_COLLAPSE_CHARS`]
    /// characters) becomes one collapsed element that is sent whole.
    pub fn handle_paste(&mut self, text: &str) -> Handled {
        if text.is_empty() {
            return Handled::Ignored;
        }
        let text = normalize_newlines(text);
        if text.lines().count() > PASTE_COLLAPSE_LINES
            || text.chars().count() > PASTE_COLLAPSE_CHARS
        {
            let paste = Elem::Paste(Box::new(PastedText {
                text: text.into_owned(),
            }));
            self.splice(self.cursor..self.cursor, vec![paste]);
        } else {
            self.insert_str(&text);
        }
        Handled::Emit(Command::Edited)
    }
}

/// One standard keymap shared by every composer that was given none.
fn standard_keymap() -> Arc<Keymap> {
    static STANDARD: std::sync::OnceLock<Arc<Keymap>> = std::sync::OnceLock::new();
    STANDARD
        .get_or_init(|| Arc::new(Keymap::standard()))
        .clone()
}

pub(super) fn normalize_newlines(text: &str) -> Cow<'_, str> {
    if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
