//! The pieces a transcript item carries and a cell draws: a reference card's sessions and what
//! each kept, a notice's level, a prompt's pasted blocks, the byte sizes cards show.
//!
//! Purpose: the items (`item.rs`) make these and the cells (`cells.rs`) draw them; living apart
//! from both, each of those two files names this one and never the other back. Invariant: plain
//! data and pure functions, no drawing. Proof: `tests/tui/transcript.rs`, `tests/tui/pastes.rs`
//! and `tests/architecture.rs` (`no_circles_of_files`).

use crate::reference::render::RecordedSource;
use crate::session::external::ExternalAgent;

/// One referenced session named on a reference card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferencedSession {
    /// The referenced session's id, raw (escaped when drawn).
    pub session_id: String,
    /// The label the mention gave it, raw (escaped when drawn).
    pub label: String,
    /// The agent that wrote it, for another agent's session (SPEC §9).
    pub source: Option<ExternalAgent>,
    /// What the snapshot kept of it (SPEC §3.9), when the metadata says.
    pub kept: Option<Kept>,
}

/// What a snapshot kept of one source: `retained` of `original` messages, `omitted_bytes`
/// left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// Messages the source had (`originalMessages`).
    pub original: u64,
    /// Messages the snapshot kept (`retainedMessages`).
    pub retained: u64,
    /// Bytes of the source left out by retention (`omittedBytes`).
    pub omitted_bytes: u64,
}

impl Kept {
    /// `12/12 msgs` or `kept 1 of 104 · 3.0 MiB omitted`.
    pub fn describe(&self) -> String {
        if self.retained == self.original && self.omitted_bytes == 0 {
            format!("{}/{} msgs", self.retained, self.original)
        } else if self.omitted_bytes > 0 {
            format!(
                "kept {} of {} · {} omitted",
                self.retained,
                self.original,
                human_bytes(self.omitted_bytes)
            )
        } else {
            format!("kept {} of {}", self.retained, self.original)
        }
    }
}

/// How a notice is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeLevel {
    /// Plain information, drawn dim.
    Info,
    /// A failure, drawn in the error style.
    Error,
}

/// The pasted blocks of a prompt that the composer showed as `[Pasted N lines]` chips (issue 38
/// item 4): the transcript shows the same chips, and the details key opens them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pastes {
    /// Byte ranges of the prompt's text that were pasted: in order, disjoint, on character
    /// boundaries.
    pub ranges: Vec<std::ops::Range<usize>>,
    /// Shown whole rather than as chips.
    pub expanded: bool,
}

impl Pastes {
    /// The ranges of `text` that hold `pasted`, each looked for after the one before (as sent,
    /// else without the trailing or surrounding whitespace a send trims). A paste not found
    /// (the text was changed on its way to the log) is left out: that part reads as text.
    pub fn locate(text: &str, pasted: &[String]) -> Pastes {
        let mut ranges = Vec::new();
        let mut from = 0;
        for paste in pasted {
            let found = [paste.as_str(), paste.trim_end(), paste.trim()]
                .into_iter()
                .filter(|p| !p.is_empty())
                .find_map(|p| {
                    text[from..]
                        .find(p)
                        .map(|at| from + at..from + at + p.len())
                });
            if let Some(range) = found {
                from = range.end;
                ranges.push(range);
            }
        }
        Pastes {
            ranges,
            expanded: false,
        }
    }

    /// Whether the prompt has a chip to open.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// `512 B`, `48 KiB`, `3.1 MiB`: [`crate::tui::text::format_size`].
pub fn human_bytes(n: u64) -> String {
    crate::tui::text::format_size(n)
}

/// The snapshot inside a session-reference context (SPEC §3.7), or `None` when the text is
/// not of that shape (then the card shows it as it is).
pub fn readable_snapshot(context: &str) -> Option<Vec<RecordedSource>> {
    crate::reference::render::read_context(context)
}
