//! One focus model: every layer that can take keys — the resume picker, the outside-file
//! prompt, the `?` overlay, the `/` menu, the `@` popup, the composer — sits on one stack, and a
//! key goes down it from the top until a layer takes it.
//!
//! Purpose: the order in which keys are offered is data ([`stack`], pure), not a hand-written
//! chain; each widget says what a key did through one trait ([`Focus`]): consumed, ignored
//! (offered to the layer below), or a [`Command`] for the app to carry out (insert a row, run
//! a `/` command, resume a session…). Models read: helix's compositor (layers, top first, an
//! event result that says whether to go on) and codex's bottom-pane views.
//!
//! Invariants: the layer drawn on top is the one that takes keys first (the draw order is the
//! stack reversed); a modal layer (picker, prompt, overlay) consumes every key, so nothing
//! below it moves while it is up; every key is read through the key table, so a key bound to
//! nothing in the layers it reaches does nothing (typed characters are text, in the composer
//! and the picker's query). Proof: the unit tests below and `tests/tui/app.rs`,
//! `tests/tui/keys.rs`, `tests/tui/resume_start.rs`.

use crate::tui::composer::Composer;
pub(crate) use crate::tui::focus::{Command, Handled};
use crate::tui::help::KeyOverlay;
use crate::tui::keys::{Action, KeyContext, Keymap};
use crate::tui::picker::PickerState;
use crate::tui::popup::PopupState;
use crate::tui::render::Renderable;
use crate::tui::slash::SlashMenu;
use crossterm::event::KeyEvent;
use ratatui::layout::Rect;

/// One layer of the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layer {
    /// The resume picker (modal, over everything).
    Picker,
    /// The prompt for a file outside the cwd (modal).
    Confirm,
    /// The `?` key overlay (modal).
    Overlay,
    /// The app's own keys before any list: Ctrl-C, and Esc while a send is prepared.
    Guard,
    /// The `/` command menu.
    Slash,
    /// The `@` popup.
    Popup,
    /// The composer (with `?` on an empty one and Tab after a typed `@path`).
    Composer,
    /// The session's keys: interrupt, scrolling, cards.
    Session,
}

/// Which layers are up.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Open {
    pub(crate) picker: bool,
    pub(crate) confirm: bool,
    pub(crate) overlay: bool,
    pub(crate) slash: bool,
    pub(crate) popup: bool,
}

/// The layers that take keys, top first. Pure.
pub(crate) fn stack(open: Open) -> Vec<Layer> {
    let mut layers = Vec::with_capacity(8);
    if open.picker {
        layers.push(Layer::Picker);
    }
    if open.confirm {
        layers.push(Layer::Confirm);
    }
    if open.overlay {
        layers.push(Layer::Overlay);
    }
    layers.push(Layer::Guard);
    if open.slash {
        layers.push(Layer::Slash);
    }
    if open.popup {
        layers.push(Layer::Popup);
    }
    layers.push(Layer::Composer);
    layers.push(Layer::Session);
    layers
}

/// Offers a key to `layers` top first (`handle` answers for each) and returns the layer that
/// took it with what it did; `None` when every layer ignored it.
pub(crate) fn dispatch(
    layers: &[Layer],
    mut handle: impl FnMut(Layer) -> Handled,
) -> Option<(Layer, Handled)> {
    layers.iter().find_map(|&layer| match handle(layer) {
        Handled::Ignored => None,
        handled => Some((layer, handled)),
    })
}

/// Where a layer is drawn over the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// The whole transcript area.
    Fill,
    /// Its bottom rows, as tall as the layer wants, at most `max_width` columns wide
    /// (centred).
    Bottom {
        /// The widest it is drawn (`u16::MAX`: the whole width).
        max_width: u16,
    },
}

/// The rect of `height` rows (at most `over`'s) and at most `max_width` columns, centred,
/// at the bottom of `over`: where the popup, the `/` menu and the overlay are drawn.
pub(crate) fn anchor_bottom(over: Rect, height: u16, max_width: u16) -> Rect {
    let height = height.min(over.height);
    let width = over.width.min(max_width);
    Rect {
        x: over.x + (over.width - width) / 2,
        y: over.y + over.height - height,
        width,
        height,
    }
}

/// What a layer's widget is drawn with.
pub(crate) struct DrawCx<'a> {
    pub(crate) keymap: &'a Keymap,
    pub(crate) now_ms: i64,
}

/// A layer of the stack: it answers keys, read through the key table, and gives the widget that
/// draws it.
pub(crate) trait Focus {
    /// What this layer does with `key`.
    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Handled;

    /// The widget that draws this layer.
    fn view<'a>(&'a self, cx: &DrawCx<'a>) -> Box<dyn Renderable + 'a>;

    /// Where it is drawn over the transcript.
    fn placement(&self) -> Placement {
        Placement::Bottom {
            max_width: u16::MAX,
        }
    }
}

impl Focus for PickerState {
    /// Modal: every key is taken (a key the picker does not bind does nothing).
    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Handled {
        match self.handle_key_with(keymap, *key) {
            Handled::Ignored => Handled::Consumed,
            handled => handled,
        }
    }

    fn view<'a>(&'a self, cx: &DrawCx<'a>) -> Box<dyn Renderable + 'a> {
        Box::new(self.view_with(cx.now_ms, cx.keymap))
    }

    fn placement(&self) -> Placement {
        Placement::Fill
    }
}

impl Focus for KeyOverlay {
    /// Modal: its keys scroll or close it; any other key does nothing.
    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Handled {
        self.handle_action(keymap.action(KeyContext::Overlay, key), keymap)
    }

    fn view<'a>(&'a self, cx: &DrawCx<'a>) -> Box<dyn Renderable + 'a> {
        Box::new(KeyOverlay::view(self, cx.keymap))
    }

    fn placement(&self) -> Placement {
        Placement::Bottom { max_width: 100 }
    }
}

impl Focus for SlashMenu {
    /// The popup's list actions; accepting runs the command when the key is also the
    /// composer's `submit` key, else completes it.
    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Handled {
        let Some(action) = keymap.action(KeyContext::Popup, key) else {
            return Handled::Ignored;
        };
        let run = keymap.action(KeyContext::Composer, key) == Some(Action::Submit);
        self.handle_action(action, run)
    }

    fn view<'a>(&'a self, _cx: &DrawCx<'a>) -> Box<dyn Renderable + 'a> {
        Box::new(SlashMenu::view(self))
    }
}

impl Focus for PopupState {
    /// The popup's list actions; keys it has no use for go on to the composer, and so does
    /// accepting with nothing to insert when the key is also the composer's `submit` (it
    /// sends).
    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Handled {
        self.handle_key_with(keymap, *key)
    }

    fn view<'a>(&'a self, cx: &DrawCx<'a>) -> Box<dyn Renderable + 'a> {
        Box::new(PopupState::view(self, cx.now_ms))
    }
}

impl Focus for Composer {
    /// Its actions and typed characters; other keys go on to the session.
    fn handle_key(&mut self, key: &KeyEvent, _keymap: &Keymap) -> Handled {
        Composer::handle_key(self, *key)
    }

    fn view<'a>(&'a self, _cx: &DrawCx<'a>) -> Box<dyn Renderable + 'a> {
        Box::new(Borrowed(self))
    }
}

/// A widget that is its own view, borrowed.
struct Borrowed<'a, T: Renderable>(&'a T);

impl<T: Renderable> Renderable for Borrowed<'_, T> {
    fn render(&self, area: Rect, buf: &mut ratatui::buffer::Buffer) {
        self.0.render(area, buf)
    }

    fn desired_height(&self, width: u16) -> u16 {
        self.0.desired_height(width)
    }

    fn cursor_pos(&self, area: Rect) -> Option<ratatui::layout::Position> {
        self.0.cursor_pos(area)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{KeyCode, KeyModifiers};

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn the_stack_puts_modal_layers_on_top_and_the_composer_under_the_lists() {
        assert_eq!(
            stack(Open::default()),
            [Layer::Guard, Layer::Composer, Layer::Session]
        );
        let all = Open {
            picker: true,
            confirm: true,
            overlay: true,
            slash: true,
            popup: true,
        };
        assert_eq!(
            stack(all),
            [
                Layer::Picker,
                Layer::Confirm,
                Layer::Overlay,
                Layer::Guard,
                Layer::Slash,
                Layer::Popup,
                Layer::Composer,
                Layer::Session
            ]
        );
    }

    #[test]
    fn a_key_goes_down_until_a_layer_takes_it() {
        let layers = stack(Open {
            popup: true,
            ..Open::default()
        });
        let mut asked = Vec::new();
        let taken = dispatch(&layers, |layer| {
            asked.push(layer);
            if layer == Layer::Composer {
                Handled::Emit(Command::Edited)
            } else {
                Handled::Ignored
            }
        });
        assert_eq!(
            taken,
            Some((Layer::Composer, Handled::Emit(Command::Edited)))
        );
        assert_eq!(asked, [Layer::Guard, Layer::Popup, Layer::Composer]);
        assert_eq!(dispatch(&layers, |_| Handled::Ignored), None);
    }

    #[test]
    fn modal_layers_take_every_key_and_unbound_keys_do_nothing() {
        let keymap = Keymap::standard();
        let mut picker = PickerState::new();
        picker.start();
        assert_eq!(
            Focus::handle_key(&mut picker, &key(KeyCode::F(5)), &keymap),
            Handled::Consumed
        );
        assert_eq!(picker.query(), "", "an unbound key types nothing");
        assert_eq!(
            Focus::handle_key(&mut picker, &key(KeyCode::Esc), &keymap),
            Handled::Emit(Command::ClosePicker)
        );
        let mut overlay = KeyOverlay::new();
        assert_eq!(
            Focus::handle_key(&mut overlay, &key(KeyCode::F(5)), &keymap),
            Handled::Consumed,
            "a key not in the table leaves the overlay open"
        );
        assert_eq!(
            Focus::handle_key(&mut overlay, &key(KeyCode::Esc), &keymap),
            Handled::Emit(Command::CloseOverlay)
        );
        // The popup and the menu leave a key they have no use for to the layers below.
        let mut popup = PopupState::new();
        assert_eq!(
            Focus::handle_key(&mut popup, &key(KeyCode::F(5)), &keymap),
            Handled::Ignored
        );
        let mut menu = SlashMenu::default();
        assert_eq!(
            Focus::handle_key(&mut menu, &key(KeyCode::Char('x')), &keymap),
            Handled::Ignored
        );
        let mut composer = Composer::new();
        assert_eq!(
            Focus::handle_key(&mut composer, &key(KeyCode::F(5)), &keymap),
            Handled::Ignored
        );
        assert_eq!(
            Focus::handle_key(&mut composer, &key(KeyCode::Char('a')), &keymap),
            Handled::Emit(Command::Edited)
        );
    }

    #[test]
    fn anchored_rects_sit_at_the_bottom_centred_and_inside() {
        let over = Rect::new(2, 1, 120, 20);
        assert_eq!(anchor_bottom(over, 5, u16::MAX), Rect::new(2, 16, 120, 5));
        assert_eq!(anchor_bottom(over, 50, 100), Rect::new(12, 1, 100, 20));
        assert_eq!(anchor_bottom(Rect::new(0, 0, 0, 0), 3, 10), Rect::default());
    }
}
