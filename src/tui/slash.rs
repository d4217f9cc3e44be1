//! The `/` command menu (SPEC §5.5): the commands as data, the menu that completes them like
//! the `@` popup, and the parse of a submitted `/` line.
//!
//! Invariants: a line that starts with `/` is never sent to the model unless the user confirms
//! it names no command (a known command runs locally; an unknown one asks first), and the menu
//! only lists commands of [`COMMANDS`]. A row shows the command's whole name, its aliases and
//! its argument hint in one column as wide as the widest; only the description after it is cut
//! (with `…`). Pure: no I/O. Proof: the unit tests below, the `slash_*` tests of
//! `tests/tui/app.rs` and `tests/tui/menus.rs` (every width 60..=200).

use super::focus::{self, Handled};
use super::render::{clip, Renderable};
use super::scroll::ScrollState;
use super::style;
use super::text::StyledText;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, BorderType, Clear, Widget};

pub use super::slash_command::{parse_line, Command, SlashLine, ALIASES, COMMANDS};

/// The menu's state: open while the composer holds `/` plus a partial command name.
#[derive(Debug, Clone, Default)]
pub struct SlashMenu {
    open: bool,
    query: String,
    rows: Vec<Command>,
    scroll: ScrollState,
    /// The query Esc dismissed: the menu stays closed for it.
    dismissed: Option<String>,
}

const PAGE: usize = 8;

impl SlashMenu {
    /// Whether the menu is showing.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// The commands shown, best first.
    pub fn rows(&self) -> &[Command] {
        &self.rows
    }

    /// The highlighted command, if any row is shown.
    pub fn selected(&self) -> Option<Command> {
        self.rows.get(self.scroll.selected).copied()
    }

    /// Follows the composer: `query` is the text after `/` when the whole draft is `/word`,
    /// `None` otherwise.
    pub fn sync(&mut self, query: Option<&str>) {
        let Some(query) = query else {
            self.open = false;
            self.dismissed = None;
            return;
        };
        if self.dismissed.as_deref() == Some(query) {
            return;
        }
        self.dismissed = None;
        if self.open && self.query == query {
            return;
        }
        self.query = query.to_string();
        let lower = query.to_lowercase();
        // Prefix matches first, then names that contain the query.
        let mut rows: Vec<Command> = COMMANDS
            .iter()
            .filter(|(_, name, ..)| name.starts_with(&lower))
            .map(|(c, ..)| *c)
            .collect();
        // An alias typed (`/ex`) finds its command.
        for (alias, command) in ALIASES {
            if alias.starts_with(&lower) && !rows.contains(command) {
                rows.push(*command);
            }
        }
        rows.extend(
            COMMANDS
                .iter()
                .filter(|(_, name, ..)| !name.starts_with(&lower) && name.contains(&lower))
                .map(|(c, ..)| *c)
                .filter(|c| !rows.contains(c))
                .collect::<Vec<_>>(),
        );
        self.rows = rows;
        self.scroll.reset();
        self.open = true;
    }

    /// Esc: closed until the query changes.
    pub fn dismiss(&mut self) {
        self.dismissed = Some(self.query.clone());
        self.open = false;
    }

    /// Closes the menu; it reopens as soon as the composer holds a `/word` again.
    pub fn close(&mut self) {
        self.open = false;
    }

    /// Keys by popup action (the same keys as the `@` popup). With no row, Enter and the
    /// arrows are left to the composer ([`Handled::Ignored`]). Moving and closing (Esc: the
    /// menu stays closed until the query changes) are [`Handled::Consumed`]; accepting closes
    /// the menu and runs the command ([`focus::Command::Run`]) when `enter`, else completes
    /// the composer to it ([`focus::Command::Complete`]).
    pub fn handle_action(&mut self, action: super::keys::Action, enter: bool) -> Handled {
        use super::keys::Action;
        let len = self.rows.len();
        if len == 0 {
            return match action {
                Action::PopupClose => {
                    self.dismiss();
                    Handled::Consumed
                }
                _ => Handled::Ignored,
            };
        }
        match action {
            Action::PopupUp => self.scroll.move_up_wrap(len, PAGE),
            Action::PopupDown => self.scroll.move_down_wrap(len, PAGE),
            Action::PopupPageUp => self.scroll.page_up(len, PAGE),
            Action::PopupPageDown => self.scroll.page_down(len, PAGE),
            Action::PopupAccept => {
                let command = self.rows[self.scroll.selected.min(len - 1)];
                self.open = false;
                return Handled::Emit(if enter {
                    focus::Command::Run(command)
                } else {
                    focus::Command::Complete(command)
                });
            }
            Action::PopupClose => {
                self.dismiss();
            }
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    /// The widget that draws the menu.
    pub fn view(&self) -> SlashMenuView<'_> {
        SlashMenuView { state: self }
    }
}

/// Draws the menu: one row per command, the selected one highlighted.
pub struct SlashMenuView<'a> {
    state: &'a SlashMenu,
}

impl Renderable for SlashMenuView<'_> {
    fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = clip(area, buf);
        if area.is_empty() {
            return;
        }
        Clear.render(area, buf);
        let block = Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(style::border())
            .title(" commands ");
        let inner = block.inner(area);
        block.render(area, buf);
        if inner.is_empty() {
            return;
        }
        let width = usize::from(inner.width);
        if self.state.rows.is_empty() {
            let mut t = StyledText::new();
            t.push(
                "No command matches; Enter asks before sending it",
                style::dim(),
            );
            buf.set_line(inner.x, inner.y, &t.truncate(width).to_line(), inner.width);
            return;
        }
        let height = usize::from(inner.height);
        let top = super::scroll::visible_top(
            self.state.scroll.top,
            self.state.scroll.selected,
            height,
            self.state.rows.len(),
        );
        // The name column: wide enough for every command's name, aliases and argument hint,
        // so the names line up and only a description is ever cut (with `…`).
        let name_w = COMMANDS
            .iter()
            .map(|(c, ..)| name_part(*c, Style::new()).width())
            .max()
            .unwrap_or(0);
        for (n, command) in self.state.rows.iter().enumerate().skip(top).take(height) {
            let Some((_, _, _, what)) = COMMANDS.iter().find(|(c, ..)| c == command) else {
                continue;
            };
            let selected = n == self.state.scroll.selected;
            let base = if selected {
                Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
            } else {
                Style::new()
            };
            let mut t = StyledText::new();
            t.push(if selected { "› " } else { "  " }, base);
            let name = name_part(*command, base);
            let pad = name_w.saturating_sub(name.width()) + 2;
            t.append(name);
            // The description gets what the name column leaves, and is the only part cut.
            let room = width.saturating_sub(t.width() + pad);
            if room > 1 {
                t.push(&" ".repeat(pad), base);
                let mut desc = StyledText::new();
                desc.push(what, base.patch(style::dim()));
                t.append(desc.truncate(room));
            }
            let y = inner.y + u16::try_from(n - top).unwrap_or(0);
            buf.set_line(inner.x, y, &t.truncate(width).to_line(), inner.width);
        }
    }

    fn desired_height(&self, _width: u16) -> u16 {
        let rows = self.state.rows.len().clamp(1, PAGE);
        u16::try_from(rows + 2).unwrap_or(u16::MAX)
    }
}

/// A command's row head: `/name`, its aliases (`/new (/clear)`: an alias typed finds the row,
/// so it is shown) and its argument hint.
fn name_part(command: Command, base: Style) -> StyledText {
    let mut t = StyledText::new();
    t.push("/", base);
    t.push(command.name(), base);
    let aliases: Vec<&str> = command.aliases().collect();
    if !aliases.is_empty() {
        let dim = base.patch(style::dim());
        t.push(" (", dim);
        for (i, alias) in aliases.iter().enumerate() {
            if i > 0 {
                t.push(", ", dim);
            }
            t.push("/", dim);
            t.push(alias, dim);
        }
        t.push(")", dim);
    }
    let arg = COMMANDS
        .iter()
        .find(|(c, ..)| *c == command)
        .map_or("", |(_, _, arg, _)| arg);
    if !arg.is_empty() {
        t.push(" ", base);
        t.push(arg, base.patch(style::dim()));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keys::Action;

    #[test]
    fn lines_that_start_with_a_slash() {
        assert_eq!(
            parse_line("/help"),
            Some(SlashLine::Run(Command::Help, "".into()))
        );
        assert_eq!(
            parse_line("  /resume  abc "),
            Some(SlashLine::Run(Command::Resume, "abc".into()))
        );
        assert_eq!(
            parse_line("/hlep me"),
            Some(SlashLine::Unknown("hlep".into()))
        );
        assert_eq!(parse_line("hello /help"), None);
        assert_eq!(parse_line("//not a command"), None);
        assert_eq!(parse_line("/ spaced"), None);
        assert_eq!(
            parse_line("/usr/bin is a path"),
            Some(SlashLine::Unknown("usr/bin".into()))
        );
    }

    #[test]
    fn the_menu_completes_by_prefix_then_substring() {
        let mut menu = SlashMenu::default();
        menu.sync(Some(""));
        assert_eq!(menu.rows().len(), COMMANDS.len());
        menu.sync(Some("s"));
        assert_eq!(menu.rows(), [Command::Sessions, Command::Resume]);
        assert_eq!(
            menu.handle_action(Action::PopupDown, false),
            Handled::Consumed
        );
        assert_eq!(
            menu.handle_action(Action::PopupAccept, true),
            Handled::Emit(focus::Command::Run(Command::Resume))
        );
        menu.sync(Some("qu"));
        assert_eq!(
            menu.handle_action(Action::PopupAccept, false),
            Handled::Emit(focus::Command::Complete(Command::Quit))
        );
        menu.sync(Some("zz"));
        assert!(menu.rows().is_empty());
        assert_eq!(
            menu.handle_action(Action::PopupAccept, true),
            Handled::Ignored,
            "Enter with nothing to offer goes to the composer"
        );
        assert_eq!(
            menu.handle_action(Action::PopupClose, false),
            Handled::Consumed
        );
        menu.sync(Some("zz"));
        assert!(!menu.is_open(), "stays dismissed for the same query");
        menu.sync(None);
        menu.sync(Some("zz"));
        assert!(menu.is_open());
    }
}
