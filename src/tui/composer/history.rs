//! Recall of sent messages with Up/Down, as shells and chat agents do.
//!
//! Invariant: no typed text is dropped by browsing. The draft that was in the composer when
//! browsing started comes back past the newest entry; editing a recalled entry makes it the
//! draft and files the draft it replaced as an entry. Proof: the composer's unit tests
//! `editing_a_recalled_message_keeps_the_draft_it_replaced` and
//! `filing_a_sent_message_keeps_history_browsing_and_its_draft`.

use super::{Composer, ComposerSnapshot};

/// Sent messages, oldest first, and where browsing stands.
#[derive(Debug, Clone, Default)]
pub(super) struct History {
    entries: Vec<ComposerSnapshot>,
    /// Index into `entries` while browsing them; `draft` is what was there before.
    pos: Option<usize>,
    draft: Option<ComposerSnapshot>,
}

impl History {
    /// Files a message (consecutive duplicates collapse; blank ones are not kept).
    pub(super) fn push(&mut self, mut snapshot: ComposerSnapshot) {
        if snapshot.is_blank() {
            return;
        }
        snapshot.cursor = snapshot.elems.len();
        if self.entries.last() != Some(&snapshot) {
            self.entries.push(snapshot);
        }
        // Browsing (if any) goes on: the entries shown keep their indices, and the draft saved
        // when browsing started (text typed while the message was being sent) is kept.
    }

    /// The entry before the one shown (the newest when not browsing yet, saving `current` as
    /// the draft); none at the oldest.
    fn prev(&mut self, current: ComposerSnapshot) -> Option<ComposerSnapshot> {
        let pos = match self.pos {
            None if self.entries.is_empty() => return None,
            None => {
                self.draft = Some(current);
                self.entries.len() - 1
            }
            Some(0) => return None,
            Some(i) => i - 1,
        };
        self.pos = Some(pos);
        Some(self.entries[pos].clone())
    }

    /// The entry after the one shown, or past the newest the saved draft; none when not
    /// browsing.
    fn next(&mut self) -> Option<ComposerSnapshot> {
        match self.pos {
            None => None,
            Some(i) if i + 1 < self.entries.len() => {
                self.pos = Some(i + 1);
                Some(self.entries[i + 1].clone())
            }
            Some(_) => {
                self.pos = None;
                Some(self.draft.take().unwrap_or_default())
            }
        }
    }

    /// The shown content was edited: a recalled entry becomes the draft, and the draft it stood
    /// in for (typed, never sent) is filed rather than dropped.
    pub(super) fn edited(&mut self) {
        if self.pos.take().is_some() {
            if let Some(draft) = self.draft.take() {
                self.push(draft);
            }
        }
        self.draft = None;
    }
}

impl Composer {
    pub(super) fn history_prev(&mut self) -> bool {
        let current = self.snapshot();
        match self.history.prev(current) {
            Some(entry) => {
                self.load(entry);
                true
            }
            None => false,
        }
    }

    pub(super) fn history_next(&mut self) -> bool {
        match self.history.next() {
            Some(entry) => {
                self.load(entry);
                true
            }
            None => false,
        }
    }

    /// Shows `snapshot` with the cursor at its end, without counting as an edit.
    fn load(&mut self, snapshot: ComposerSnapshot) {
        self.elems = snapshot.elems;
        self.cursor = self.elems.len();
        self.preferred_x = None;
        self.generation += 1;
    }
}
