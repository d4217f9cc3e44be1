//! Editing and moving over the composer's elements: insertion, deletion, cursor motions by
//! grapheme cluster, word and line, and the scan for the `@` token under the cursor.
//!
//! Invariant: the cursor only ever rests on a cluster boundary, and a mention is one element, so
//! no edit leaves half a cluster or half a mention. Proof: the composer's unit tests
//! (`backspace_removes_whole_grapheme_clusters`, `clusters_match_whole_text_segmentation`,
//! `random_edits_and_sizes_never_panic`).

use super::{normalize_newlines, Composer, Elem, FileElement, MentionElement, PlainToken};
use crate::reference::Candidate;
use crate::tui::focus::{Command, Handled};
use crate::tui::text::{certain_boundary, inert_boundary};
use crate::tui::token::{ActiveToken, PopupItem};
use std::ops::Range;
use unicode_segmentation::UnicodeSegmentation;

impl Composer {
    // ----- editing -----

    /// Inserts one character at the cursor.
    pub fn insert_char(&mut self, c: char) {
        self.splice(self.cursor..self.cursor, vec![Elem::Char(c)]);
    }

    /// Inserts text (typed or pasted); `\r\n` and `\r` become `\n`.
    pub fn insert_str(&mut self, text: &str) {
        let elems = normalize_newlines(text).chars().map(Elem::Char).collect();
        self.splice(self.cursor..self.cursor, elems);
    }

    /// Inserts a line break at the cursor.
    pub fn insert_newline(&mut self) {
        self.insert_char('\n');
    }

    /// Replaces the active `@` token (or inserts at the cursor when there is none) with a
    /// mention of `candidate` and one space.
    pub fn insert_mention(&mut self, candidate: &Candidate) {
        self.insert_mention_element(MentionElement::from_candidate(candidate));
    }

    /// Replaces the active `@` token (or inserts at the cursor when there is none) with `mention`
    /// and one space.
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

    pub(super) fn token_range(&self) -> Range<usize> {
        match self.active_token() {
            Some(token) => token.start..token.end,
            None => self.cursor..self.cursor,
        }
    }

    pub(super) fn splice(&mut self, range: Range<usize>, with: Vec<Elem>) {
        let end = range.start + with.len();
        self.elems.splice(range, with);
        self.cursor = end;
        self.after_edit();
    }

    pub(super) fn after_edit(&mut self) {
        self.preferred_x = None;
        self.generation += 1;
        self.history.edited();
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

    /// Moves one grapheme cluster (or mention) left; false at the start.
    pub fn move_left(&mut self) -> bool {
        self.preferred_x = None;
        if self.cursor == 0 {
            return false;
        }
        self.cursor = self.cluster_at(self.cursor - 1).start;
        true
    }

    /// Moves one grapheme cluster (or mention) right; false at the end.
    pub fn move_right(&mut self) -> bool {
        self.preferred_x = None;
        if self.cursor >= self.elems.len() {
            return false;
        }
        self.cursor = self.cluster_at(self.cursor).end;
        true
    }

    /// Moves to the start of the word before the cursor (whitespace-separated); false when it did
    /// not move.
    pub fn move_word_left(&mut self) -> bool {
        self.preferred_x = None;
        let to = self.word_start(self.cursor);
        std::mem::replace(&mut self.cursor, to) != to
    }

    /// Moves past the end of the word after the cursor (whitespace-separated); false when it did
    /// not move.
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
    pub fn move_up(&mut self) -> Handled {
        if self.move_vertical(false) {
            Handled::Emit(Command::Moved)
        } else {
            Handled::emit_if(self.history_prev(), Command::Edited)
        }
    }

    /// Down one (wrapped) row; on the last row while browsing history, the next submission
    /// (past the newest: the draft that was there before browsing).
    pub fn move_down(&mut self) -> Handled {
        if self.move_vertical(true) {
            Handled::Emit(Command::Moved)
        } else {
            Handled::emit_if(self.history_next(), Command::Edited)
        }
    }

    pub(super) fn move_vertical(&mut self, down: bool) -> bool {
        let width = match self.last_width.get() {
            0 => usize::MAX,
            w => usize::from(w),
        };
        let (widths, rows) = self.laid_out(width);
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
                while j < line.end && !self.elems[j].is_whitespace() && !self.elems[j].is_atom() {
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
                        Elem::Paste(p) => query.push_str(&p.display()),
                        Elem::File(f) => query.push_str(&f.token()),
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

    // ----- typed `@path` tokens and file chips -----

    /// The `@path` tokens made only of characters (no mention, paste or chip inside or glued
    /// to their `@`), at a token boundary: the candidates for a file chip. `@"…"` counts only
    /// once its quote is closed on the same line.
    pub fn plain_tokens(&self) -> Vec<PlainToken> {
        let mut out = Vec::new();
        let n = self.elems.len();
        let mut i = 0;
        while i < n {
            let boundary = i == 0 || self.elems[i - 1].is_whitespace();
            if !(boundary && self.elems[i].is('@')) {
                i += 1;
                continue;
            }
            let quoted = self.elems.get(i + 1).is_some_and(|e| e.is('"'));
            let (inner, end) = if quoted {
                let close = (i + 2..n)
                    .take_while(|&j| !self.elems[j].is('\n'))
                    .find(|&j| self.elems[j].is('"'));
                match close {
                    Some(j) => (i + 2..j, j + 1),
                    None => {
                        i += 1;
                        continue;
                    }
                }
            } else {
                let mut j = i + 1;
                while j < n && !self.elems[j].is_whitespace() {
                    j += 1;
                }
                (i + 1..j, j)
            };
            let mut path = String::new();
            let mut plain = true;
            for elem in &self.elems[inner] {
                match elem {
                    Elem::Char(c) => path.push(*c),
                    _ => plain = false,
                }
            }
            if plain && !path.is_empty() {
                out.push(PlainToken {
                    start: i,
                    end,
                    path,
                    quoted,
                });
            }
            i = end.max(i + 1);
        }
        out
    }

    /// The plain `@path` token that ends exactly at element `end` (such as the one just
    /// finished by a typed space), if any.
    pub fn plain_token_ending_at(&self, end: usize) -> Option<PlainToken> {
        self.plain_tokens().into_iter().find(|t| t.end == end)
    }

    /// Turns the plain token `token` still stands for (the one at its start, else the first
    /// with the same path) into the chip `file`. An unquoted token whose trailing punctuation
    /// is not part of `file.path` keeps it as text after the chip. The cursor stays where it
    /// was in the text. False when no such token is left (the person edited it away).
    pub fn make_chip(&mut self, token: &PlainToken, file: FileElement) -> bool {
        let path = file.path.clone();
        self.replace_token(token, &path, Elem::File(Box::new(file)))
    }

    /// Turns the plain token `token` still stands for into a mention of the session its text
    /// (`@` + `id_text`, trailing punctuation kept as text) names: a typed `@ID` or `@PREFIX`
    /// taken with Tab. False when no such token is left.
    pub fn make_mention(
        &mut self,
        token: &PlainToken,
        id_text: &str,
        mention: MentionElement,
    ) -> bool {
        self.replace_token(token, id_text, Elem::Mention(Box::new(mention)))
    }

    fn replace_token(&mut self, token: &PlainToken, prefix: &str, with: Elem) -> bool {
        let tokens = self.plain_tokens();
        let same = |t: &&PlainToken| t.path == token.path && t.quoted == token.quoted;
        let Some(found) = tokens
            .iter()
            .filter(same)
            .find(|t| t.start == token.start)
            .or_else(|| tokens.iter().find(same))
        else {
            return false;
        };
        let range = if found.quoted {
            if prefix != found.path {
                return false;
            }
            found.start..found.end
        } else {
            if !found.path.starts_with(prefix) {
                return false;
            }
            found.start..found.start + 1 + prefix.chars().count()
        };
        let cursor = self.cursor;
        let len = range.len();
        let start = range.start;
        let end = range.end;
        self.splice(range, vec![with]);
        self.cursor = if cursor >= end {
            cursor - (len - 1)
        } else if cursor > start {
            start + 1
        } else {
            cursor
        };
        true
    }

    // ----- geometry -----

    /// The logical line (between `\n`s) holding element index `at`.
    pub(super) fn line_range(&self, at: usize) -> Range<usize> {
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
    pub(super) fn is_fixed_boundary(&self, i: usize) -> bool {
        self.fixed_boundary_by(i, certain_boundary)
    }

    /// [`is_fixed_boundary`](Self::is_fixed_boundary) by the cheaper [`inert_boundary`], for
    /// passes over the whole text.
    pub(super) fn is_inert_boundary(&self, i: usize) -> bool {
        self.fixed_boundary_by(i, inert_boundary)
    }

    pub(super) fn fixed_boundary_by(&self, i: usize, between: fn(char, char) -> bool) -> bool {
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
    pub(super) fn cluster_at(&self, i: usize) -> Range<usize> {
        if i >= self.elems.len() {
            return self.elems.len()..self.elems.len();
        }
        if self.elems[i].is_atom() {
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
                _ => unreachable!("an atom's edges are fixed boundaries"),
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
    pub(super) fn cluster_end_from(&self, i: usize) -> usize {
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
    pub(super) fn cluster_start_from(&self, i: usize) -> usize {
        if i >= self.elems.len() {
            return i;
        }
        self.cluster_at(i).start
    }

    pub(super) fn word_start(&self, from: usize) -> usize {
        let mut i = from;
        while i > 0 && self.elems[i - 1].is_whitespace() {
            i -= 1;
        }
        while i > 0 && !self.elems[i - 1].is_whitespace() {
            i -= 1;
        }
        self.cluster_start_from(i)
    }
}
