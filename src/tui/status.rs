//! The status line: which session this is and what the agent is doing.
//!
//! The title and cwd come from logs, so they are escaped like any other untrusted text. When
//! space runs out the session name keeps priority over the cwd and model, and the run state on
//! the right is never cut.

use super::render::{clip, Renderable};
use super::style;
use super::text::StyledText;
use crate::escape::EscapeMode;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};

/// What the status line under the composer shows. Text from logs (title, id, cwd) is escaped when
/// drawn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusLine {
    /// The open session's id.
    pub session_id: String,
    /// The latest title; the id is shown when there is none.
    pub title: Option<String>,
    /// The session's cwd, if it has one.
    pub cwd: Option<String>,
    /// The model's label, e.g. `deepseek/deepseek-v4-flash`.
    pub model: String,
    /// A turn is open.
    pub running: bool,
    /// Steering messages staged for the next safe boundary.
    pub queued_steering: usize,
    /// A submit transaction is preparing a snapshot.
    pub preparing: bool,
    /// Context tokens of the last model request (input plus cache reads), when reported.
    pub context_tokens: Option<u64>,
    /// Tokens of every request of this session so far (input, cache reads and output).
    pub session_tokens: u64,
    /// A transient provider state, e.g. `retry 1/3 in 2s (HTTP 429)`.
    pub notice: Option<String>,
    /// What the next request adds for the mentions in the composer, e.g. `+2 refs 96 KiB`.
    pub next_context: Option<String>,
    /// Seconds the running turn has taken so far (shown while `running`).
    pub elapsed_secs: Option<u64>,
    /// The key that interrupts a running turn, as the key table spells it (`esc`); empty when
    /// unbound.
    pub interrupt_key: String,
}

/// A running turn's elapsed time: `0s`, `42s`, `3m 05s`, `1h 02m`.
pub fn elapsed_text(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// `1234` → `1.2k`, `2500000` → `2.5M`.
pub fn compact_count(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1_000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

impl StatusLine {
    fn left(&self) -> StyledText {
        let mut t = StyledText::new();
        let name = self.title.as_deref().unwrap_or(&self.session_id);
        t.push_untrusted(
            name,
            EscapeMode::SingleLine,
            Style::new().add_modifier(Modifier::BOLD),
        );
        if self.title.is_some() {
            t.push(" (", style::dim());
            t.push_untrusted(&self.session_id, EscapeMode::SingleLine, style::dim());
            t.push(")", style::dim());
        }
        t.push(" · ", style::dim());
        match &self.cwd {
            Some(cwd) => t.push_untrusted(cwd, EscapeMode::SingleLine, style::dim()),
            None => t.push("(no cwd)", style::dim()),
        };
        if !self.model.is_empty() {
            t.push(" · ", style::dim());
            t.push_untrusted(&self.model, EscapeMode::SingleLine, style::dim());
        }
        t
    }

    fn right(&self) -> StyledText {
        let mut t = StyledText::new();
        if self.preparing {
            t.push("◌ preparing", Style::new().fg(Color::Yellow));
        } else if self.running {
            t.push("● running", Style::new().fg(Color::Green));
            if let Some(secs) = self.elapsed_secs {
                t.push(
                    &format!(" {}", elapsed_text(secs)),
                    Style::new().fg(Color::Green),
                );
            }
            if !self.interrupt_key.is_empty() {
                t.push(
                    &format!(" · {} to interrupt", self.interrupt_key),
                    style::dim(),
                );
            }
        } else {
            t.push("○ idle", style::dim());
        }
        if let Some(notice) = &self.notice {
            t.push(" · ", style::dim());
            t.push_untrusted(
                notice,
                EscapeMode::SingleLine,
                Style::new().fg(Color::Yellow),
            );
        }
        if let Some(next) = &self.next_context {
            t.push(" · next ", style::dim());
            t.push(next, Style::new().fg(Color::Cyan));
        }
        if let Some(context) = self.context_tokens {
            t.push(
                &format!(
                    " · ctx {} · Σ {}",
                    compact_count(context),
                    compact_count(self.session_tokens)
                ),
                style::dim(),
            );
        }
        if self.queued_steering > 0 {
            t.push(
                &format!(" · {} queued", self.queued_steering),
                Style::new().fg(Color::Magenta),
            );
        }
        t
    }
}

impl Renderable for StatusLine {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        let width = usize::from(area.width);
        let right = self.right().truncate(width);
        let right_w = right.width();
        let left_w = width.saturating_sub(right_w + 1);
        let left = self.left().truncate(left_w);
        buf.set_line(area.x, area.y, &left.to_line(), area.width);
        let x = area.x + u16::try_from(width - right_w).unwrap_or(0);
        buf.set_line(
            x,
            area.y,
            &right.to_line(),
            u16::try_from(right_w).unwrap_or(0),
        );
    }

    fn desired_height(&self, _width: u16) -> u16 {
        1
    }
}
