//! Key help, drawn from the keymap the handlers use (so it cannot drift from behaviour): one
//! line that follows the context, so the keys that matter right now are the ones on screen
//! (Enter means "insert" in the popup, "steer" while a turn runs), and the `?` overlay that
//! lists every binding in effect.
//!
//! Invariant: every key shown is a key of the named action in the keymap, and the overlay shows
//! every binding of the keymap. Proof: `tests/tui/keys.rs`.

use super::focus::{Command, Handled};
use super::keys::{Action, KeyContext, Keymap};
use super::render::{clip, Renderable};
use super::scroll::ScrollState;
use super::style;
use super::text::StyledText;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::{Block, BorderType, Clear, Widget};
use std::sync::Arc;

/// What the one-line key help at the bottom of the screen depends on: the app's state and the
/// keys in effect. It shows the keys that do something now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyHelp {
    /// The `@` popup or the `/` menu is open.
    pub popup_open: bool,
    /// A turn is open (Esc and Ctrl+C interrupt it).
    pub running: bool,
    /// A submit transaction is preparing a snapshot.
    pub preparing: bool,
    /// Ctrl+C was pressed once; a second press quits.
    pub quit_pending: bool,
    /// The transcript has a card that can be expanded.
    pub has_details: bool,
    /// Nothing typed: `?` opens the help, Ctrl+C would quit.
    pub composer_empty: bool,
    /// There is a draft: Ctrl+C clears it.
    pub has_draft: bool,
    /// The keys in effect (the standard ones when `None`).
    pub keymap: Option<Arc<Keymap>>,
}

/// One entry of the help line: the first `keys` keys of each action, then what they do.
struct Entry {
    actions: &'static [Action],
    keys: usize,
    label: &'static str,
}

const fn entry(actions: &'static [Action], keys: usize, label: &'static str) -> Entry {
    Entry {
        actions,
        keys,
        label,
    }
}

impl KeyHelp {
    fn keymap(&self) -> &Keymap {
        self.keymap
            .as_deref()
            .unwrap_or_else(|| Keymap::shared_standard())
    }

    fn entries_table(&self) -> Vec<Entry> {
        use Action::*;
        if self.quit_pending {
            return vec![entry(&[ClearOrQuit], 1, "again to quit")];
        }
        // Over the popup, Esc closes it; the send in flight is cancelled by the next one.
        if self.preparing && !self.popup_open {
            return vec![
                entry(&[Interrupt], 1, "cancel"),
                entry(&[ClearOrQuit], 1, "cancel"),
            ];
        }
        if self.popup_open {
            return vec![
                entry(&[PopupUp, PopupDown], 1, "select"),
                entry(&[PopupAccept], 2, "insert"),
                entry(&[PopupPageUp, PopupPageDown], 1, "page"),
                entry(&[PopupClose], 1, "close"),
            ];
        }
        let mut entries = if self.running {
            vec![
                entry(&[Submit], 1, "steer"),
                entry(&[Interrupt], 1, "interrupt"),
            ]
        } else {
            vec![entry(&[Submit], 1, "send")]
        };
        entries.push(entry(&[Newline], 1, "newline"));
        entries.push(entry(&[], 0, "mention"));
        if self.has_details {
            entries.push(entry(&[Details], 1, "details"));
        }
        if self.composer_empty && !self.running {
            entries.push(entry(&[Help], 1, "keys"));
        }
        entries.push(if self.has_draft {
            entry(&[ClearOrQuit], 1, "clear")
        } else if self.running {
            entry(&[ClearOrQuit], 1, "interrupt")
        } else {
            entry(&[ClearOrQuit], 1, "quit")
        });
        entries
    }

    /// `(keys, what they do)` for the current context, most important first. Actions the user
    /// unbound are left out.
    pub fn entries(&self) -> Vec<(String, &'static str)> {
        let keymap = self.keymap();
        self.entries_table()
            .into_iter()
            .filter_map(|e| {
                if e.actions.is_empty() {
                    // `@` is typed text, not a binding.
                    return Some(("@".to_string(), e.label));
                }
                let keys: Vec<String> = e
                    .actions
                    .iter()
                    .map(|a| keymap.label(*a, e.keys))
                    .filter(|k| !k.is_empty())
                    .collect();
                (!keys.is_empty()).then(|| (keys.join("/"), e.label))
            })
            .collect()
    }
}

impl Renderable for KeyHelp {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        let mut t = StyledText::new();
        for (i, (key, action)) in self.entries().into_iter().enumerate() {
            if i > 0 {
                t.push(" · ", style::dim());
            }
            t.push(&key, style::key());
            t.push(" ", style::dim());
            t.push(action, style::dim());
        }
        let line = t.truncate(usize::from(area.width)).to_line();
        buf.set_line(area.x, area.y, &line, area.width);
    }

    fn desired_height(&self, _width: u16) -> u16 {
        1
    }
}

/// One row of the overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverlayRow {
    /// A context heading.
    Heading(&'static str),
    /// An action with every key bound to it.
    Binding {
        /// The action.
        action: Action,
        /// Its keys as written in `[keys]` (e.g. `ctrl+j`), in the keymap's order.
        keys: Vec<String>,
    },
    /// A `/` command and what it does.
    Command {
        /// `/name`, with its argument hint when it takes one.
        name: String,
        /// What the command does.
        what: &'static str,
    },
    /// An empty separator row.
    Blank,
}

/// Every binding of `keymap`, grouped by context, in the order the keymap lists actions, then
/// the `/` commands. Unbound actions are left out: the overlay shows what the keys do.
pub fn overlay_rows(keymap: &Keymap) -> Vec<OverlayRow> {
    let mut rows = Vec::new();
    for context in KeyContext::ALL {
        let actions: Vec<Action> = Action::ALL
            .iter()
            .copied()
            .filter(|a| a.context() == context && !keymap.keys(*a).is_empty())
            .collect();
        if actions.is_empty() {
            continue;
        }
        if !rows.is_empty() {
            rows.push(OverlayRow::Blank);
        }
        rows.push(OverlayRow::Heading(context.title()));
        for action in actions {
            rows.push(OverlayRow::Binding {
                action,
                keys: keymap
                    .keys(action)
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            });
        }
    }
    rows.push(OverlayRow::Blank);
    rows.push(OverlayRow::Heading("Commands (type / at the start)"));
    for (command, name, arg, what) in super::slash::COMMANDS {
        let mut name = if arg.is_empty() {
            format!("/{name}")
        } else {
            format!("/{name} {arg}")
        };
        for alias in command.aliases() {
            name.push_str(&format!(", /{alias}"));
        }
        rows.push(OverlayRow::Command { name, what });
    }
    rows
}

/// The `?` overlay: its scroll position over [`overlay_rows`].
#[derive(Debug, Clone, Default)]
pub struct KeyOverlay {
    scroll: ScrollState,
    /// Rows visible at the last draw (the scroll step's bound).
    visible: std::cell::Cell<usize>,
}

impl KeyOverlay {
    /// An overlay scrolled to its first row.
    pub fn new() -> KeyOverlay {
        KeyOverlay::default()
    }

    /// The first row shown.
    pub fn top(&self) -> usize {
        self.scroll.top
    }

    /// Any key is taken while the overlay is open: its own keys scroll or close it
    /// (`overlay-close`, named in its title, asks the host to close it:
    /// [`Command::CloseOverlay`]); a key not in the table does nothing. Never
    /// [`Handled::Ignored`]: the overlay is modal.
    pub fn handle_action(&mut self, action: Option<Action>, keymap: &Keymap) -> Handled {
        let len = overlay_rows(keymap).len();
        let cap = self.visible.get().max(1);
        let max_top = len.saturating_sub(cap);
        match action {
            Some(Action::OverlayUp) => {
                self.scroll.top = self.scroll.top.saturating_sub(1);
                Handled::Consumed
            }
            Some(Action::OverlayDown) => {
                self.scroll.top = (self.scroll.top + 1).min(max_top);
                Handled::Consumed
            }
            Some(Action::OverlayPageUp) => {
                self.scroll.top = self.scroll.top.saturating_sub(cap);
                Handled::Consumed
            }
            Some(Action::OverlayPageDown) => {
                self.scroll.top = (self.scroll.top + cap).min(max_top);
                Handled::Consumed
            }
            Some(Action::OverlayClose) => Handled::Emit(Command::CloseOverlay),
            _ => Handled::Consumed,
        }
    }

    /// The widget that draws the overlay with `keymap`'s bindings.
    pub fn view<'a>(&'a self, keymap: &'a Keymap) -> KeyOverlayView<'a> {
        KeyOverlayView {
            state: self,
            keymap,
        }
    }
}

/// Draws the overlay: a bordered box listing [`overlay_rows`].
pub struct KeyOverlayView<'a> {
    state: &'a KeyOverlay,
    keymap: &'a Keymap,
}

impl Renderable for KeyOverlayView<'_> {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        Clear.render(area, buf);
        let close = self.keymap.label(Action::OverlayClose, 1);
        let title = if close.is_empty() {
            " Keys ".to_string()
        } else {
            format!(" Keys · {close} to close ")
        };
        let mut block = Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(style::border())
            .title(title);
        let rows = overlay_rows(self.keymap);
        let height = usize::from(area.height.saturating_sub(2));
        let top = self.state.top().min(rows.len().saturating_sub(height));
        // What is out of view, said on the bottom border.
        let below = rows.len().saturating_sub(top + height);
        if below > 0 || top > 0 {
            let mut more = Vec::new();
            if top > 0 {
                more.push(format!("↑ {top} above"));
            }
            if below > 0 {
                more.push(format!("↓ {below} more below"));
            }
            block = block.title_bottom(
                ratatui::text::Line::styled(format!(" {} ", more.join(" · ")), style::dim())
                    .alignment(ratatui::layout::Alignment::Right),
            );
        }
        let inner = block.inner(area);
        block.render(area, buf);
        if inner.is_empty() {
            return;
        }
        self.state.visible.set(height);
        let key_w = rows
            .iter()
            .map(|r| match r {
                OverlayRow::Binding { keys, .. } => super::text::str_width(&keys.join(", ")),
                OverlayRow::Command { name, .. } => super::text::str_width(name),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
            .min(usize::from(inner.width) / 2);
        for (n, row) in rows.iter().skip(top).take(height).enumerate() {
            let mut t = StyledText::new();
            match row {
                OverlayRow::Heading(title) => {
                    t.push(title, style::key());
                }
                OverlayRow::Binding { action, keys } => {
                    let keys = keys.join(", ");
                    let pad = key_w.saturating_sub(super::text::str_width(&keys));
                    t.push("  ", style::dim());
                    t.push(&keys, style::key());
                    t.push(&" ".repeat(pad + 2), style::dim());
                    t.push(action.description(), style::dim());
                    // The name `[keys]` in config.toml rebinds it by.
                    t.push(&format!("  ({})", action.name()), style::dim());
                }
                OverlayRow::Command { name, what } => {
                    let pad = key_w.saturating_sub(super::text::str_width(name));
                    t.push("  ", style::dim());
                    t.push(name, style::key());
                    t.push(&" ".repeat(pad + 2), style::dim());
                    t.push(what, style::dim());
                }
                OverlayRow::Blank => {}
            }
            let y = inner.y + u16::try_from(n).unwrap_or(0);
            let line = t.truncate(usize::from(inner.width)).to_line();
            buf.set_line(inner.x, y, &line, inner.width);
        }
    }

    fn desired_height(&self, _width: u16) -> u16 {
        u16::try_from(overlay_rows(self.keymap).len() + 2).unwrap_or(u16::MAX)
    }
}
