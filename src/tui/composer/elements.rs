//! The composer's content elements and what leaves it: a mention, a collapsed paste, a file
//! chip, the typed `@path` tokens that may become one, and [`ComposerSnapshot`], the content as
//! it is sent, kept in history or given back. Pure.

use super::{escape, normalize_newlines};
use crate::reference::Candidate;

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
    pub fn chosen(&self) -> crate::host::ChosenFile {
        crate::host::ChosenFile {
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
/// shown collapsed: a block of four lines or more is a chip, in the composer and in the
/// transcript (issue 38 item 4).
pub const PASTE_COLLAPSE_LINES: usize = 3;
/// A paste with more characters than this (or more lines than [`PASTE_COLLAPSE_LINES`]) is shown
/// collapsed.
pub const PASTE_COLLAPSE_CHARS: usize = 2000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Elem {
    Char(char),
    Mention(Box<MentionElement>),
    Paste(Box<PastedText>),
    File(Box<FileElement>),
}

impl Elem {
    /// A mention, a collapsed paste or a file chip: one element, edited and drawn as a unit.
    pub(super) fn is_atom(&self) -> bool {
        !matches!(self, Elem::Char(_))
    }
    pub(super) fn is_whitespace(&self) -> bool {
        matches!(self, Elem::Char(c) if c.is_whitespace())
    }
    pub(super) fn is(&self, want: char) -> bool {
        matches!(self, Elem::Char(c) if *c == want)
    }
}

/// A saved composer content (text, mentions and cursor), for history and for restoring the
/// input after a failed send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComposerSnapshot {
    pub(super) elems: Vec<Elem>,
    pub(super) cursor: usize,
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
