//! File chips in the app loop (SPEC §5.5): how a typed or picked `@path` becomes a chip, and
//! the confirmation a file outside the session's cwd needs.
//!
//! Purpose: a file is read at send time only when it is a chip in the composer, and a chip
//! exists only after the person acted: picked a file row in the `@` popup, or typed `@path`
//! and pressed Space or Tab right after it. Pasted text, mention labels and recalled lines
//! never become chips by themselves.
//!
//! Invariants: the path is inspected off the loop (`spawn_blocking`); the chip shows the size
//! that inspection found; a path that resolves outside the cwd (absolute, `..`, a symlink) opens
//! a prompt whose only yes is `y` (every other key, Enter and Esc included, keeps the token as
//! text; a key within [`CONFIRM_GUARD`] of the prompt appearing is typing, not an answer); Enter while a chip is still being sized sends nothing and says why, so every file
//! that goes was drawn as a chip before the send. Proof: `tests/tui/attach.rs`.

use super::chip_state::{Asked, CONFIRM_GUARD};
use super::{App, AppEvent};
use crate::escape::EscapeMode;
use crate::host::attach::{self, Inspected};
use crate::tui::composer::{FileElement, MentionElement, PlainToken};
use crate::tui::keys::{Action, KeyContext, Keymap};
use crate::tui::render::Renderable;
use crate::tui::style;
use crate::tui::text::StyledText;
use crate::tui::transcript::{human_bytes, NoticeLevel};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::{Block, BorderType, Clear, Widget};
use std::path::PathBuf;
use std::time::Instant;

impl App {
    fn session_cwd(&self) -> Option<PathBuf> {
        self.agent.info().cwd.clone().map(PathBuf::from)
    }

    /// Inspects the path of `token` off the loop; the answer comes back as
    /// [`AppEvent::Inspected`].
    pub(super) fn request_chip(&mut self, token: PlainToken, asked: Asked) {
        self.chips.serial += 1;
        let serial = self.chips.serial;
        let cwd = self.session_cwd();
        let path = token.path.clone();
        let quoted = token.quoted;
        self.chips.pending.push((serial, token, asked));
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = tokio::task::spawn_blocking(move || {
                if quoted {
                    attach::inspect(cwd.as_deref(), &path)
                } else {
                    attach::inspect_token(cwd.as_deref(), &path)
                }
                .map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
            let _ = tx.send(AppEvent::Inspected { serial, result });
        });
    }

    /// After a popup pick: the `@path ` it inserted becomes a chip once sized.
    pub(super) fn chip_after_pick(&mut self) {
        let end = self.composer.cursor().saturating_sub(1);
        if let Some(token) = self.composer.plain_token_ending_at(end) {
            self.request_chip(token, Asked::Picked);
        }
    }

    /// After a key the composer took: a typed space right after `@path` asks for a chip.
    pub(super) fn chip_after_key(&mut self, key: &KeyEvent) {
        let space = key.code == KeyCode::Char(' ')
            && !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        if !space {
            return;
        }
        let end = self.composer.cursor().saturating_sub(1);
        if let Some(token) = self.composer.plain_token_ending_at(end) {
            self.request_chip(token, Asked::Space);
        }
    }

    /// `attach-path` (Tab) with the cursor right after a typed `@path` (and no popup row to
    /// take): true when it asked for a chip.
    pub(super) fn chip_on_tab(&mut self) -> bool {
        match self.composer.plain_token_ending_at(self.composer.cursor()) {
            Some(token) => {
                self.request_chip(token, Asked::Tab);
                true
            }
            None => false,
        }
    }

    pub(super) fn on_inspected(&mut self, serial: u64, result: Result<Inspected, String>) {
        let Some(at) = self.chips.pending.iter().position(|(s, ..)| *s == serial) else {
            return;
        };
        let (_, token, asked) = self.chips.pending.remove(at);
        match result {
            // Tab on a typed `@word` that names no file: perhaps a session's id or prefix.
            Err(_) if asked == Asked::Tab && !token.quoted => self.resolve_typed_id(token),
            // A typed `@word` that names no file is just text.
            Err(_) if asked != Asked::Picked => {}
            Err(why) => self.transcript.push_notice(
                NoticeLevel::Error,
                format!("Not attached: @{}: {why}", token.path),
            ),
            Ok(found) if found.outside => {
                if self.chips.confirm.is_empty() {
                    self.chips.shown_at = Some(Instant::now());
                }
                self.chips.confirm.push_back((token, found));
            }
            Ok(found) => {
                let chip = FileElement {
                    path: found.path,
                    bytes: found.bytes,
                    outside: false,
                };
                if self.composer.make_chip(&token, chip) {
                    self.sync_popup();
                }
            }
        }
    }

    /// Resolves a typed `@ID` / `@PREFIX` taken with Tab off the loop; the answer comes back
    /// as [`AppEvent::TypedId`].
    fn resolve_typed_id(&mut self, token: PlainToken) {
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let prefix = token
                .path
                .trim_end_matches(|c: char| ",.;?!)]}'\"".contains(c))
                .to_string();
            let result = mount
                .resolve_typed(std::slice::from_ref(&prefix))
                .await
                .map(|ids| ids.into_iter().next().flatten());
            let _ = tx.send(AppEvent::TypedId {
                token,
                prefix,
                result,
            });
        });
    }

    pub(super) fn on_typed_id(
        &mut self,
        token: PlainToken,
        prefix: String,
        result: Result<Option<String>, String>,
    ) {
        match result {
            Ok(Some(id)) => {
                let mention = MentionElement {
                    label: crate::escape::escape_line(&prefix).into_owned(),
                    session_id: id,
                };
                if self.composer.make_mention(&token, &prefix, mention) {
                    self.sync_popup();
                }
            }
            Ok(None) => {}
            Err(why) => self.transcript.push_notice(NoticeLevel::Error, why),
        }
    }

    /// A key while the outside-file prompt is open, read through the key table:
    /// `confirm-attach` (`y`) attaches; `confirm-keep-text` (Enter, Esc, `n`, Ctrl-C) keeps the
    /// token as text; any other key keeps it as text too and then goes on as typed. True when
    /// the key was taken here (the caller handles it otherwise: it came within
    /// [`CONFIRM_GUARD`] of the prompt, or it is typing that declined).
    pub(super) fn on_confirm_key(&mut self, key: &KeyEvent) -> bool {
        if self
            .chips
            .shown_at
            .is_some_and(|at| at.elapsed() < CONFIRM_GUARD)
        {
            return false;
        }
        let Some((token, found)) = self.chips.confirm.pop_front() else {
            return false;
        };
        self.chips.shown_at = (!self.chips.confirm.is_empty()).then(Instant::now);
        let action = self.keymap.action(KeyContext::Confirm, key);
        let yes = action == Some(Action::ConfirmAttach);
        let answer = action.is_some();
        if yes {
            let chip = FileElement {
                path: found.path,
                bytes: found.bytes,
                outside: true,
            };
            if self.composer.make_chip(&token, chip) {
                self.sync_popup();
            }
        } else {
            self.transcript.push_notice(
                NoticeLevel::Info,
                format!(
                    "Not attached: @{} is outside this session's directory (kept as text)",
                    token.path
                ),
            );
        }
        answer
    }

    /// The outside-file prompt, over the bottom of `over` (the transcript).
    pub(super) fn render_confirm(&self, over: Rect, buf: &mut Buffer) {
        let Some(found) = self.chips.asking() else {
            return;
        };
        let cwd = self
            .agent
            .info()
            .cwd
            .clone()
            .unwrap_or_else(|| "(none)".into());
        ConfirmOutside {
            path: &found.path,
            resolved: &found.resolved.to_string_lossy(),
            bytes: found.bytes,
            cwd: &cwd,
            keymap: &self.keymap,
        }
        .render(over, buf);
    }
}

/// The prompt for a file outside the session's cwd: what was written, where it resolves, its
/// size, and the keys as `keymap` binds them (`confirm-attach`, `y` by default, attaches; any
/// other key, the default, keeps it as text). Drawn at the bottom of the area it is given, at
/// most 100 columns wide. Every path is escaped.
#[derive(Debug, Clone, Copy)]
pub struct ConfirmOutside<'a> {
    /// The path as written.
    pub path: &'a str,
    /// Where it resolves.
    pub resolved: &'a str,
    /// Its size.
    pub bytes: u64,
    /// The session's cwd it lies outside of.
    pub cwd: &'a str,
    /// The key table the prompt's keys are read from.
    pub keymap: &'a Keymap,
}

impl Renderable for ConfirmOutside<'_> {
    fn render(&self, over: Rect, buf: &mut Buffer) {
        let over = crate::tui::render::clip(over, buf);
        let mut name = StyledText::new();
        name.push_untrusted(
            &format!("@{}", self.path),
            EscapeMode::SingleLine,
            style::mention(),
        );
        name.push(&format!("  {}", human_bytes(self.bytes)), style::dim());
        let mut resolved = StyledText::new();
        resolved.push("resolves to ", style::dim());
        resolved.push_untrusted(self.resolved, EscapeMode::SingleLine, Style::new());
        let mut outside = StyledText::new();
        outside.push("outside     ", style::dim());
        outside.push_untrusted(self.cwd, EscapeMode::SingleLine, style::dim());
        let mut keys = StyledText::new();
        let attach = self.keymap.keys(Action::ConfirmAttach);
        let attach = attach.first().map_or_else(String::new, ToString::to_string);
        keys.push(&attach, style::key());
        keys.push(" send it · ", style::dim());
        keys.push("any other key", style::key());
        keys.push(": keep it as text (default)", style::dim());
        let lines = [name, resolved, outside, StyledText::new(), keys];
        let width = over.width.min(100);
        let height = u16::try_from(lines.len() + 2)
            .unwrap_or(u16::MAX)
            .min(over.height);
        if height < 3 || width < 10 {
            return;
        }
        let area = Rect {
            x: over.x + (over.width - width) / 2,
            y: over.y + over.height - height,
            width,
            height,
        };
        Clear.render(area, buf);
        let block = Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(style::border())
            .title(" Send a file from outside this session's directory? ");
        let inner = block.inner(area);
        block.render(area, buf);
        let text_width = inner.width.saturating_sub(1);
        for (n, line) in lines.iter().enumerate().take(usize::from(inner.height)) {
            let y = inner.y + u16::try_from(n).unwrap_or(0);
            buf.set_line(
                inner.x + 1,
                y,
                &line.truncate(usize::from(text_width)).to_line(),
                text_width,
            );
        }
    }

    fn desired_height(&self, _width: u16) -> u16 {
        7
    }
}
