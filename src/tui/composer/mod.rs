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
//! lines, the `@` token), `history` recalls sent messages, `layout` wraps and draws, and this
//! file holds the content, its snapshots and the key handling. Layout is computed once per
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
mod history;
mod layout;

use super::escape;
use super::keys::{Action, KeyContext, Keymap};
pub use super::token::ActiveToken;
use crate::reference::Candidate;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use history::History;
use layout::Laid;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

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

/// A large paste, shown collapsed (`[Pasted 200 lines]`) and sent whole (SPEC §5.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastedText {
    /// Exactly what was pasted (line endings normalized).
    pub text: String,
}

impl PastedText {
    /// `[Pasted 200 lines]`, or `[Pasted 5000 chars]` for one long line.
    pub fn display(&self) -> String {
        let lines = self.text.lines().count();
        if lines > 1 {
            format!("[Pasted {lines} lines]")
        } else {
            format!("[Pasted {} chars]", self.text.chars().count())
        }
    }
}

/// A file chip (SPEC §5.5): a file the person chose (picked in the popup, or typed as `@path`
/// and made a chip with Space or Tab), drawn `@path ⟨2 KiB⟩` and the only way a file is read
/// at send time. Submitted as `@path` text (so the model sees which file is meant), with the
/// chip itself carried to the send beside the text ([`ComposerSnapshot::files`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileElement {
    /// The path as picked or typed: relative to the session's cwd, or absolute.
    pub path: String,
    /// The file's size when the chip was made.
    pub bytes: u64,
    /// It resolves outside the session's cwd, and the person confirmed sending it.
    pub outside: bool,
}

impl FileElement {
    /// `@path`, or `@"path"` when it holds whitespace: the submitted text and the drawn name.
    pub fn token(&self) -> String {
        if self.path.chars().any(char::is_whitespace) {
            format!("@\"{}\"", self.path)
        } else {
            format!("@{}", self.path)
        }
    }

    /// The size badge: `2 KiB`, or `outside · 2 KiB` for a confirmed file outside the cwd.
    pub fn badge(&self) -> String {
        let size = crate::tui::transcript::human_bytes(self.bytes);
        if self.outside {
            format!("outside · {size}")
        } else {
            size
        }
    }

    /// What the send reads for this chip.
    pub fn chosen(&self) -> crate::tui::attach::ChosenFile {
        crate::tui::attach::ChosenFile {
            path: self.path.clone(),
            allow_outside: self.outside,
        }
    }
}

/// A typed `@path` token: characters only, so a candidate for a file chip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainToken {
    /// Element index of the `@`.
    pub start: usize,
    /// Element index just past the token (past the closing quote of `@"…"`).
    pub end: usize,
    /// The path as typed (inside the quotes for `@"…"`).
    pub path: String,
    /// `@"…"`.
    pub quoted: bool,
}

/// A paste with more lines than this, or more characters than [`PASTE_COLLAPSE_CHARS`], is
/// shown collapsed.
pub const PASTE_COLLAPSE_LINES: usize = 10;
/// A paste with more characters than this (or more lines than [`PASTE_COLLAPSE_LINES`]) is shown
/// collapsed.
pub const PASTE_COLLAPSE_CHARS: usize = 2000;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Elem {
    Char(char),
    Mention(Box<MentionElement>),
    Paste(Box<PastedText>),
    File(Box<FileElement>),
}

impl Elem {
    /// A mention, a collapsed paste or a file chip: one element, edited and drawn as a unit.
    fn is_atom(&self) -> bool {
        !matches!(self, Elem::Char(_))
    }
    fn is_whitespace(&self) -> bool {
        matches!(self, Elem::Char(c) if c.is_whitespace())
    }
    fn is(&self, want: char) -> bool {
        matches!(self, Elem::Char(c) if *c == want)
    }
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
                Elem::Paste(p) => out.push_str(&p.text),
                Elem::File(f) => out.push_str(&f.token()),
            }
        }
        out
    }

    /// This content with each element range of `replacements` (disjoint) replaced by its
    /// mention: how typed `@ID` tokens go out as references.
    pub fn with_mentions(
        &self,
        mut replacements: Vec<(std::ops::Range<usize>, MentionElement)>,
    ) -> ComposerSnapshot {
        replacements.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
        let mut elems = self.elems.clone();
        for (range, mention) in replacements {
            if range.start <= range.end && range.end <= elems.len() {
                elems.splice(range, [Elem::Mention(Box::new(mention))]);
            }
        }
        let cursor = elems.len();
        ComposerSnapshot { elems, cursor }
    }

    /// The file chips, in order: exactly what the send reads (SPEC §5.5).
    pub fn files(&self) -> Vec<FileElement> {
        self.elems
            .iter()
            .filter_map(|e| match e {
                Elem::File(f) => Some((**f).clone()),
                _ => None,
            })
            .collect()
    }

    /// Only whitespace (or nothing).
    pub fn is_blank(&self) -> bool {
        self.elems.iter().all(Elem::is_whitespace)
    }
}

/// One piece of a saved message, as prompt history stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// A run of plain text.
    Text(String),
    /// A mention, by the raw session id and the label it shows.
    Mention {
        /// The mentioned session's id, raw.
        session_id: String,
        /// The label, as inserted (escaped).
        label: String,
    },
    /// A collapsed paste's whole text.
    Paste(String),
}

impl ComposerSnapshot {
    /// The content as pieces: runs of text, mentions and collapsed pastes.
    pub fn parts(&self) -> Vec<Part> {
        let mut parts = Vec::new();
        for elem in &self.elems {
            match elem {
                Elem::Char(c) => match parts.last_mut() {
                    Some(Part::Text(text)) => text.push(*c),
                    _ => parts.push(Part::Text(c.to_string())),
                },
                Elem::Mention(m) => parts.push(Part::Mention {
                    session_id: m.session_id.clone(),
                    label: m.label.clone(),
                }),
                Elem::Paste(p) => parts.push(Part::Paste(p.text.clone())),
                // A chip is kept as its `@path` text: a recalled line attaches nothing until
                // the person makes it a chip again (history is a file anyone could edit).
                Elem::File(f) => match parts.last_mut() {
                    Some(Part::Text(text)) => text.push_str(&f.token()),
                    _ => parts.push(Part::Text(f.token())),
                },
            }
        }
        parts
    }

    /// The content of `parts`, cursor at the end. Labels are escaped again (they may come from
    /// a file anyone could edit); text gets its line endings normalized.
    pub fn from_parts(parts: Vec<Part>) -> ComposerSnapshot {
        let mut elems = Vec::new();
        for part in parts {
            match part {
                Part::Text(text) => elems.extend(normalize_newlines(&text).chars().map(Elem::Char)),
                Part::Mention { session_id, label } => {
                    elems.push(Elem::Mention(Box::new(MentionElement {
                        label: escape::escape_line(&label).into_owned(),
                        session_id,
                    })))
                }
                Part::Paste(text) => elems.push(Elem::Paste(Box::new(PastedText {
                    text: normalize_newlines(&text).into_owned(),
                }))),
            }
        }
        let cursor = elems.len();
        ComposerSnapshot { elems, cursor }
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
    pub fn handle_key(&mut self, key: KeyEvent) -> ComposerOutcome {
        if key.kind == KeyEventKind::Release {
            return ComposerOutcome::Ignored;
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
                ComposerOutcome::Edited
            }
            _ => ComposerOutcome::Ignored,
        }
    }

    /// Does a composer action; any other action is [`ComposerOutcome::Ignored`].
    pub fn handle_action(&mut self, action: Action) -> ComposerOutcome {
        use ComposerOutcome::*;
        let edited = |changed: bool| if changed { Edited } else { Ignored };
        let moved = |changed: bool| if changed { Moved } else { Ignored };
        match action {
            Action::Submit => Submit,
            Action::Newline => {
                self.insert_newline();
                Edited
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
            _ => Ignored,
        }
    }

    /// A bracketed paste: inserted as text (newlines kept, never a submit).
    ///
    /// A large one (more than [`PASTE_COLLAPSE_LINES`] lines or [`PASTE_COLLAPSE_CHARS`]
    /// characters) becomes one collapsed element that is sent whole.
    pub fn handle_paste(&mut self, text: &str) -> ComposerOutcome {
        if text.is_empty() {
            return ComposerOutcome::Ignored;
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
        ComposerOutcome::Edited
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
mod tests {
    use super::layout::cluster_width;
    use super::*;
    use crate::tui::snapshot::render_snapshot;
    use crate::tui::Renderable;
    use proptest::prelude::*;
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::style::Style;
    use unicode_segmentation::UnicodeSegmentation;

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

    fn chip(path: &str) -> FileElement {
        FileElement {
            path: path.into(),
            bytes: 2048,
            outside: false,
        }
    }

    #[test]
    fn long_chip_names_are_cut_never_wrapped() {
        let label = format!("{} tail-of-the-title", "very long title ".repeat(12));
        let mut c = typed("see ");
        c.insert_mention(&candidate("s-1", &label));
        let deep = format!("{}name.rs", "deeply/nested/dir/".repeat(6));
        c.insert_str(&format!(" @{deep}"));
        let token = c.plain_tokens().pop().expect("the typed path is a token");
        assert!(c.make_chip(&token, chip(&deep)));
        let out = render_snapshot(70, 6, |area, buf| c.render(area, buf));
        // Each chip is one short unit: the label keeps its start, the path its file name.
        assert!(
            out.contains("@very long title very long title very l…"),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("@…") && l.contains("nested/dir/name.rs ⟨2 KiB⟩")),
            "the path chip is one row, its start cut: {out}"
        );
        assert!(!out.contains("tail-of-the-title"), "{out}");
        // What is sent is whole.
        let sent = c.snapshot().submission_text();
        assert!(sent.contains("tail-of-the-title"), "{sent}");
        assert!(sent.contains(&deep), "{sent}");
    }

    #[test]
    fn only_plain_typed_tokens_become_chips() {
        let mut c = typed("see @src/main.rs, and @\"my file\" x");
        let paths: Vec<String> = c.plain_tokens().into_iter().map(|t| t.path).collect();
        assert_eq!(paths, ["src/main.rs,", "my file"]);
        let token = c.plain_token_ending_at(17).unwrap();
        assert!(c.make_chip(&token, chip("src/main.rs")));
        assert_eq!(c.display_text(), "see @src/main.rs, and @\"my file\" x");
        assert_eq!(c.files().len(), 1);
        assert_eq!(c.cursor(), c.elems.len(), "the cursor stays at the end");
        assert_eq!(
            c.snapshot().files(),
            [chip("src/main.rs")],
            "the send gets the chip itself"
        );
        // A token inside a collapsed paste or a mention label is no token of the text.
        let mut c = Composer::new();
        c.handle_paste(&format!("{}@/home/me/.ssh/id_rsa", "x\n".repeat(20)));
        c.insert_mention(&candidate("s", "notes @/etc/passwd"));
        assert!(c.plain_tokens().is_empty());
        // A chip goes back to text in history: a recalled line attaches nothing by itself.
        let mut c = typed("@a.md ");
        let token = c.plain_token_ending_at(5).unwrap();
        assert!(c.make_chip(&token, chip("a.md")));
        assert_eq!(
            ComposerSnapshot::from_parts(c.snapshot().parts()).files(),
            []
        );
        // Edited away before the answer: nothing to replace.
        let mut c = typed("@b.md ");
        let token = c.plain_token_ending_at(5).unwrap();
        c.clear();
        assert!(!c.make_chip(&token, chip("b.md")));
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
    fn a_large_paste_is_collapsed_but_sent_whole() {
        let big: String = (1..=200).map(|n| format!("line {n}\r\n")).collect();
        let mut c = typed("see ");
        c.handle_paste(&big);
        c.insert_str(" thanks");
        assert_eq!(c.display_text(), "see [Pasted 200 lines] thanks");
        assert_eq!(
            c.submission_text(),
            format!("see {} thanks", big.replace("\r\n", "\n"))
        );
        assert_eq!(c.desired_height(60), 3, "one row, not two hundred");
        // One unit for the cursor and for deletion.
        for _ in 0.." thanks".len() {
            c.backspace();
        }
        c.backspace();
        assert_eq!(c.display_text(), "see ");
        // One long line collapses by its length; a short paste stays text.
        let mut c = Composer::new();
        c.handle_paste(&"x".repeat(PASTE_COLLAPSE_CHARS + 1));
        assert_eq!(
            c.display_text(),
            format!("[Pasted {} chars]", PASTE_COLLAPSE_CHARS + 1)
        );
        let mut c = Composer::new();
        c.handle_paste("a\nb");
        assert_eq!(c.display_text(), "a\nb");
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
}
