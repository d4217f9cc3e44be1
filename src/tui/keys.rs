//! The one key table: every action the TUI takes on a key, its default keys as data, and the
//! user's overrides from the `[keys]` table of `config.toml`.
//!
//! Every handler (composer, popup, app, help overlay) asks a [`Keymap`] which action a key
//! means, and the help line and the `?` overlay are drawn from the same keymap, so help cannot
//! drift from behaviour: a key that is not in the table does nothing, and every key in it is
//! shown. Pure: parsing and lookup, no I/O.
//!
//! Invariants: a context never binds one key to two actions (overrides that would are refused
//! with an error naming both); every action has a description and at least one default key.
//! Proof: the unit tests below and `tests/tui/keys.rs` (the overlay lists exactly the bindings
//! in effect, overrides included, and an overridden key changes what the handlers do).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::BTreeMap;
use std::fmt;

/// Where a key is read: actions of different contexts may share keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyContext {
    /// Typing a message.
    Composer,
    /// The `@` popup or the `/` menu is open.
    Popup,
    /// Anywhere outside the popup and the overlay (after the composer declined the key).
    App,
    /// The `?` key-help overlay is open.
    Overlay,
    /// The session picker of `/resume` and `--resume` is open.
    Picker,
    /// The prompt for a file outside the session's directory is up.
    Confirm,
}

impl KeyContext {
    /// Every context, in the overlay's order.
    pub const ALL: [KeyContext; 6] = [
        KeyContext::Composer,
        KeyContext::Popup,
        KeyContext::App,
        KeyContext::Overlay,
        KeyContext::Picker,
        KeyContext::Confirm,
    ];

    /// The heading of this context in the overlay.
    pub fn title(self) -> &'static str {
        match self {
            KeyContext::Composer => "Composer",
            KeyContext::Popup => "Popup and menu",
            KeyContext::App => "Session",
            KeyContext::Overlay => "This help",
            KeyContext::Picker => "Resume picker",
            KeyContext::Confirm => "File outside the session's directory",
        }
    }
}

macro_rules! actions {
    ($($variant:ident => $name:literal, $context:ident, $description:literal, [$($key:literal),+];)+) => {
        /// Everything a key can do.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Action {
            $(#[doc = $description] $variant,)+
        }

        impl Action {
            /// Every action, in the order the overlay lists them.
            pub const ALL: &'static [Action] = &[$(Action::$variant,)+];

            /// The name used in `config.toml`'s `[keys]` table.
            pub fn name(self) -> &'static str {
                match self {
                    $(Action::$variant => $name,)+
                }
            }

            /// Where the action applies: the handler that reads it and the overlay heading it is
            /// listed under.
            pub fn context(self) -> KeyContext {
                match self {
                    $(Action::$variant => KeyContext::$context,)+
                }
            }

            /// What it does, as the overlay says it.
            pub fn description(self) -> &'static str {
                match self {
                    $(Action::$variant => $description,)+
                }
            }

            /// The default keys, spelled as in `config.toml`.
            pub fn default_keys(self) -> &'static [&'static str] {
                match self {
                    $(Action::$variant => &[$($key),+],)+
                }
            }
        }
    };
}

actions! {
    Submit => "submit", Composer, "send (steer while a turn runs)", ["enter"];
    Newline => "newline", Composer, "new line", ["alt+enter", "shift+enter", "ctrl+j"];
    Left => "left", Composer, "cursor left", ["left", "ctrl+b"];
    Right => "right", Composer, "cursor right", ["right", "ctrl+f"];
    WordLeft => "word-left", Composer, "word left", ["ctrl+left", "alt+left", "alt+b"];
    WordRight => "word-right", Composer, "word right", ["ctrl+right", "alt+right", "alt+f"];
    LineStart => "line-start", Composer, "start of line", ["home", "ctrl+a"];
    LineEnd => "line-end", Composer, "end of line", ["end", "ctrl+e"];
    Up => "up", Composer, "row up, then earlier messages", ["up", "ctrl+p"];
    Down => "down", Composer, "row down, then later messages", ["down", "ctrl+n"];
    Backspace => "backspace", Composer, "delete back", ["backspace", "ctrl+h"];
    Delete => "delete", Composer, "delete forward", ["delete", "ctrl+d"];
    DeleteWordBack => "delete-word-back", Composer, "delete word back", ["ctrl+w", "alt+backspace", "ctrl+backspace"];
    DeleteToLineStart => "delete-to-line-start", Composer, "delete to start of line", ["ctrl+u"];
    DeleteToLineEnd => "delete-to-line-end", Composer, "delete to end of line", ["ctrl+k"];
    AttachPath => "attach-path", Composer, "attach the @path just typed", ["tab"];
    PopupUp => "popup-up", Popup, "select previous", ["up", "ctrl+p"];
    PopupDown => "popup-down", Popup, "select next", ["down", "ctrl+n"];
    PopupPageUp => "popup-page-up", Popup, "page up", ["pgup"];
    PopupPageDown => "popup-page-down", Popup, "page down", ["pgdn"];
    PopupAccept => "popup-accept", Popup, "insert (never sends)", ["tab", "enter"];
    PopupClose => "popup-close", Popup, "close, text untouched", ["esc"];
    Interrupt => "interrupt", App, "interrupt or cancel a send; twice when idle: edit last message", ["esc"];
    ClearOrQuit => "clear-or-quit", App, "clear the draft (↑ recalls it), interrupt; twice when idle: quit", ["ctrl+c"];
    ScrollUp => "scroll-up", App, "transcript one screen up", ["pgup"];
    ScrollDown => "scroll-down", App, "transcript one screen down", ["pgdn"];
    ScrollTop => "scroll-top", App, "transcript top", ["ctrl+home", "home"];
    ScrollBottom => "scroll-bottom", App, "transcript bottom", ["ctrl+end", "end"];
    Details => "details", App, "open the selected (else last) card or paste: readable, exact text, closed", ["ctrl+o"];
    CardPrev => "card-prev", App, "select the previous card", ["alt+up"];
    CardNext => "card-next", App, "select the next card (past the last: none)", ["alt+down"];
    Help => "help", App, "this help (on an empty composer)", ["?"];
    OverlayUp => "overlay-up", Overlay, "scroll up", ["up", "k"];
    OverlayDown => "overlay-down", Overlay, "scroll down", ["down", "j"];
    OverlayPageUp => "overlay-page-up", Overlay, "page up", ["pgup"];
    OverlayPageDown => "overlay-page-down", Overlay, "page down", ["pgdn", "space"];
    OverlayClose => "overlay-close", Overlay, "close", ["esc", "?", "q"];
    PickerThisDir => "picker-this-dir", Picker, "this directory only, or all", ["tab"];
    ConfirmAttach => "confirm-attach", Confirm, "send the file", ["y", "Y"];
    ConfirmKeepText => "confirm-keep-text", Confirm, "keep it as text (any other key too, then types)", ["n", "N", "enter", "esc", "ctrl+c"];
}

/// One key with its modifiers, as a keymap compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyBinding {
    /// The key; Shift+Tab (BackTab) is stored as Tab with Shift.
    pub code: KeyCode,
    /// Only Ctrl, Alt and Shift are kept, and Shift is dropped for character keys (it is part of
    /// the character).
    pub modifiers: KeyModifiers,
}

impl KeyBinding {
    /// A binding for `code` with `modifiers`, normalized as the fields say.
    pub fn new(code: KeyCode, modifiers: KeyModifiers) -> KeyBinding {
        KeyBinding { code, modifiers }.normalized()
    }

    /// A character key's Shift is part of the character (`?` is Shift+/ on most layouts), so
    /// it is not compared; upper-case letters stay distinct from lower-case ones.
    fn normalized(self) -> KeyBinding {
        let mut modifiers =
            self.modifiers & (KeyModifiers::CONTROL | KeyModifiers::ALT | KeyModifiers::SHIFT);
        if matches!(self.code, KeyCode::Char(_)) {
            modifiers.remove(KeyModifiers::SHIFT);
        }
        let code = match self.code {
            KeyCode::BackTab => KeyCode::Tab,
            other => other,
        };
        if self.code == KeyCode::BackTab {
            modifiers.insert(KeyModifiers::SHIFT);
        }
        KeyBinding { code, modifiers }
    }

    /// Whether this key types a character into the composer (a printable character, Shift
    /// allowed, without Ctrl or Alt): such a key is text there, never an action.
    pub fn is_typed_text(&self) -> bool {
        matches!(self.code, KeyCode::Char(c) if !c.is_control())
            && !self
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
    }

    /// The binding a terminal key event presses.
    pub fn of(key: &KeyEvent) -> KeyBinding {
        KeyBinding::new(key.code, key.modifiers)
    }

    /// Parses `ctrl+a`, `alt+enter`, `shift+enter`, `pgup`, `esc`, `?`, `f1`…
    pub fn parse(text: &str) -> Result<KeyBinding, KeyParseError> {
        let spec = text.trim();
        if spec.is_empty() {
            return Err(KeyParseError::Empty);
        }
        // The last part is the key itself (which may be `+`).
        let (mods_part, key_part) = match spec.rfind('+') {
            Some(i) if i + 1 == spec.len() && i > 0 && spec[..i].ends_with('+') => {
                (&spec[..i - 1], "+")
            }
            Some(i) if i + 1 < spec.len() => (&spec[..i], &spec[i + 1..]),
            _ => ("", spec),
        };
        let mut modifiers = KeyModifiers::NONE;
        for part in mods_part.split('+').filter(|p| !p.is_empty()) {
            modifiers |= match part.to_ascii_lowercase().as_str() {
                "ctrl" | "control" | "c" => KeyModifiers::CONTROL,
                "alt" | "meta" | "option" | "m" => KeyModifiers::ALT,
                "shift" | "s" => KeyModifiers::SHIFT,
                other => {
                    return Err(KeyParseError::UnknownModifier {
                        modifier: other.to_string(),
                        spec: spec.to_string(),
                    })
                }
            };
        }
        let lower = key_part.to_ascii_lowercase();
        let code = match lower.as_str() {
            "enter" | "return" => KeyCode::Enter,
            "esc" | "escape" => KeyCode::Esc,
            "tab" => KeyCode::Tab,
            "backspace" => KeyCode::Backspace,
            "delete" | "del" => KeyCode::Delete,
            "insert" | "ins" => KeyCode::Insert,
            "up" | "↑" => KeyCode::Up,
            "down" | "↓" => KeyCode::Down,
            "left" | "←" => KeyCode::Left,
            "right" | "→" => KeyCode::Right,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "pgup" | "pageup" => KeyCode::PageUp,
            "pgdn" | "pagedown" => KeyCode::PageDown,
            "space" => KeyCode::Char(' '),
            f if f.len() > 1 && f.starts_with('f') && f[1..].parse::<u8>().is_ok() => {
                KeyCode::F(f[1..].parse().unwrap_or(1))
            }
            _ => {
                let mut chars = key_part.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => KeyCode::Char(c),
                    _ => {
                        return Err(KeyParseError::UnknownKey {
                            key: key_part.to_string(),
                            spec: spec.to_string(),
                        })
                    }
                }
            }
        };
        Ok(KeyBinding::new(code, modifiers))
    }
}

/// Why a key spelling (`ctrl+a`, `f1`, …) could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyParseError {
    /// Nothing was written.
    #[error("an empty key")]
    Empty,
    /// A modifier other than ctrl, alt and shift (and their other spellings).
    #[error("unknown modifier \"{modifier}\" in \"{spec}\"")]
    UnknownModifier {
        /// The modifier as written.
        modifier: String,
        /// The whole spelling.
        spec: String,
    },
    /// The key itself is neither a named key nor one character.
    #[error("unknown key \"{key}\" in \"{spec}\"")]
    UnknownKey {
        /// The key as written.
        key: String,
        /// The whole spelling.
        spec: String,
    },
}

/// Why a `[keys]` table could not become a keymap; each names what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeymapError {
    /// No action has this name.
    #[error("[keys]: unknown action \"{name}\" (known: {})", known_actions())]
    UnknownAction {
        /// The name given.
        name: String,
    },
    /// One of the action's keys cannot be read.
    #[error("[keys] {action}: {source}")]
    Key {
        /// The action's name.
        action: String,
        /// Why the key could not be read.
        #[source]
        source: KeyParseError,
    },
    /// A plain character bound to a composer or popup action (it could never be typed again).
    #[error(
        "[keys] {action}: \"{key}\" is a character you type; bound to \"{action}\" it could \
         never be typed in a message again. Bind it with a modifier (e.g. \"ctrl+{key}\" or \
         \"alt+{key}\")"
    )]
    TypedText {
        /// The action's name.
        action: String,
        /// The key.
        key: KeyBinding,
    },
    /// One key bound to two actions of the same context.
    #[error(
        "[keys]: {key} is bound to both \"{}\" and \"{}\"; unbind one (e.g. {} = [])",
        first.name(),
        second.name(),
        first.name()
    )]
    BoundTwice {
        /// The key.
        key: KeyBinding,
        /// The action it was bound to first.
        first: Action,
        /// The action it was bound to again.
        second: Action,
    },
}

fn known_actions() -> String {
    Action::ALL
        .iter()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for KeyBinding {
    /// The spelling help shows (and [`KeyBinding::parse`] reads back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.modifiers.contains(KeyModifiers::CONTROL) {
            f.write_str("ctrl+")?;
        }
        if self.modifiers.contains(KeyModifiers::ALT) {
            f.write_str("alt+")?;
        }
        if self.modifiers.contains(KeyModifiers::SHIFT) {
            f.write_str("shift+")?;
        }
        match self.code {
            KeyCode::Enter => f.write_str("enter"),
            KeyCode::Esc => f.write_str("esc"),
            KeyCode::Tab => f.write_str("tab"),
            KeyCode::Backspace => f.write_str("backspace"),
            KeyCode::Delete => f.write_str("delete"),
            KeyCode::Insert => f.write_str("insert"),
            KeyCode::Up => f.write_str("↑"),
            KeyCode::Down => f.write_str("↓"),
            KeyCode::Left => f.write_str("←"),
            KeyCode::Right => f.write_str("→"),
            KeyCode::Home => f.write_str("home"),
            KeyCode::End => f.write_str("end"),
            KeyCode::PageUp => f.write_str("pgup"),
            KeyCode::PageDown => f.write_str("pgdn"),
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::F(n) => write!(f, "f{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Keys → actions, per context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keymap {
    /// Each action's keys, in the order they are shown.
    keys: BTreeMap<Action, Vec<KeyBinding>>,
}

impl Default for Keymap {
    fn default() -> Self {
        Keymap::standard()
    }
}

impl Keymap {
    /// The default keys of every action.
    pub fn standard() -> Keymap {
        let keys = Action::ALL
            .iter()
            .map(|&action| {
                let keys = action
                    .default_keys()
                    .iter()
                    .map(|k| KeyBinding::parse(k).expect("default keys parse"))
                    .collect();
                (action, keys)
            })
            .collect();
        Keymap { keys }
    }

    /// A shared standard keymap for handlers used without one (hosts, tests).
    pub fn shared_standard() -> &'static Keymap {
        static STANDARD: std::sync::OnceLock<Keymap> = std::sync::OnceLock::new();
        STANDARD.get_or_init(Keymap::standard)
    }

    /// The standard keymap with `overrides` (action name → its keys, replacing the defaults;
    /// an empty list unbinds it). Unknown actions, unparsable keys and a key bound twice in one
    /// context are errors naming what was wrong.
    pub fn with_overrides(overrides: &[(String, Vec<String>)]) -> Result<Keymap, KeymapError> {
        let mut map = Keymap::standard();
        for (name, keys) in overrides {
            let Some(&action) = Action::ALL.iter().find(|a| a.name() == name) else {
                return Err(KeymapError::UnknownAction { name: name.clone() });
            };
            let parsed = keys
                .iter()
                .map(|k| {
                    KeyBinding::parse(k).map_err(|source| KeymapError::Key {
                        action: name.clone(),
                        source,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if matches!(action.context(), KeyContext::Composer | KeyContext::Popup) {
                if let Some(key) = parsed.iter().find(|k| k.is_typed_text()) {
                    return Err(KeymapError::TypedText {
                        action: name.clone(),
                        key: *key,
                    });
                }
            }
            map.keys.insert(action, parsed);
        }
        map.keep_way_out();
        // Overridden keys may now collide with defaults of the same context.
        for context in KeyContext::ALL {
            let mut seen: Vec<(KeyBinding, Action)> = Vec::new();
            for (&action, keys) in map.keys.iter().filter(|(a, _)| a.context() == context) {
                for key in keys {
                    if let Some((_, other)) = seen.iter().find(|(k, _)| k == key) {
                        return Err(KeymapError::BoundTwice {
                            key: *key,
                            first: *other,
                            second: action,
                        });
                    }
                    seen.push((*key, action));
                }
            }
        }
        Ok(map)
    }

    /// The way out no configuration can close (issue 32): Ctrl-C always means clear-or-quit
    /// in the app's context, whatever the overrides bound or unbound; it is taken off any other
    /// app-level action that claimed it. (Ctrl-D on an empty, idle composer quits outside the
    /// key table, in the app's key dispatch.)
    fn keep_way_out(&mut self) {
        let ctrl_c = KeyBinding::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        for (action, keys) in self.keys.iter_mut() {
            if action.context() == KeyContext::App && *action != Action::ClearOrQuit {
                keys.retain(|k| *k != ctrl_c);
            }
        }
        let quit = self.keys.entry(Action::ClearOrQuit).or_default();
        if !quit.contains(&ctrl_c) {
            quit.push(ctrl_c);
        }
    }

    /// The action `key` means in `context`, if any.
    pub fn action(&self, context: KeyContext, key: &KeyEvent) -> Option<Action> {
        let binding = KeyBinding::of(key);
        self.keys
            .iter()
            .filter(|(a, _)| a.context() == context)
            .find(|(_, keys)| keys.contains(&binding))
            .map(|(a, _)| *a)
    }

    /// The keys bound to `action`, in order.
    pub fn keys(&self, action: Action) -> &[KeyBinding] {
        self.keys.get(&action).map_or(&[], Vec::as_slice)
    }

    /// Every binding in effect: (action, key), in [`Action::ALL`] order.
    pub fn bindings(&self) -> Vec<(Action, KeyBinding)> {
        Action::ALL
            .iter()
            .flat_map(|&a| self.keys(a).iter().map(move |k| (a, *k)))
            .collect()
    }

    /// The first `n` keys of `action`, spelled and joined with `/` (empty when unbound).
    pub fn label(&self, action: Action, n: usize) -> String {
        self.keys(action)
            .iter()
            .take(n)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn every_action_has_words_and_keys_and_names_are_unique() {
        let mut names = std::collections::BTreeSet::new();
        for &a in Action::ALL {
            assert!(!a.description().is_empty());
            assert!(!a.default_keys().is_empty(), "{a:?}");
            assert!(names.insert(a.name()), "duplicate name {}", a.name());
        }
        // The standard map itself has no key bound twice in a context.
        Keymap::with_overrides(&[]).unwrap();
    }

    #[test]
    fn spellings_round_trip() {
        for &a in Action::ALL {
            for k in Keymap::standard().keys(a) {
                assert_eq!(KeyBinding::parse(&k.to_string()).unwrap(), *k, "{k}");
            }
        }
        assert_eq!(
            KeyBinding::parse("Ctrl+Alt+Enter").unwrap(),
            KeyBinding::new(KeyCode::Enter, KeyModifiers::CONTROL | KeyModifiers::ALT)
        );
        assert_eq!(
            KeyBinding::parse("ctrl++").unwrap(),
            KeyBinding::new(KeyCode::Char('+'), KeyModifiers::CONTROL)
        );
        assert!(KeyBinding::parse("hyper+x")
            .unwrap_err()
            .to_string()
            .contains("hyper"));
        assert!(KeyBinding::parse("ctrl+nope")
            .unwrap_err()
            .to_string()
            .contains("nope"));
    }

    #[test]
    fn lookup_is_per_context_and_ignores_shift_on_characters() {
        let map = Keymap::standard();
        let up = key(KeyCode::Up, KeyModifiers::NONE);
        assert_eq!(map.action(KeyContext::Composer, &up), Some(Action::Up));
        assert_eq!(map.action(KeyContext::Popup, &up), Some(Action::PopupUp));
        let question = key(KeyCode::Char('?'), KeyModifiers::SHIFT);
        assert_eq!(map.action(KeyContext::App, &question), Some(Action::Help));
        let shift_enter = key(KeyCode::Enter, KeyModifiers::SHIFT);
        assert_eq!(
            map.action(KeyContext::Composer, &shift_enter),
            Some(Action::Newline)
        );
        let plain_a = key(KeyCode::Char('a'), KeyModifiers::NONE);
        assert_eq!(map.action(KeyContext::Composer, &plain_a), None);
    }

    #[test]
    fn no_keymap_takes_ctrl_c_away_from_quitting() {
        let ctrl_c = key(KeyCode::Char('c'), KeyModifiers::CONTROL);
        for overrides in [
            vec![("clear-or-quit".to_string(), vec![])],
            vec![("clear-or-quit".to_string(), vec!["f9".to_string()])],
            vec![
                ("clear-or-quit".to_string(), vec![]),
                ("details".to_string(), vec!["ctrl+c".to_string()]),
            ],
        ] {
            let map = Keymap::with_overrides(&overrides).unwrap();
            assert_eq!(
                map.action(KeyContext::App, &ctrl_c),
                Some(Action::ClearOrQuit),
                "{overrides:?}"
            );
        }
        let map = Keymap::with_overrides(&[("clear-or-quit".to_string(), vec!["f9".to_string()])])
            .unwrap();
        let f9 = key(KeyCode::F(9), KeyModifiers::NONE);
        assert_eq!(map.action(KeyContext::App, &f9), Some(Action::ClearOrQuit));
    }

    #[test]
    fn overrides_replace_and_collisions_are_named() {
        let map = Keymap::with_overrides(&[
            ("submit".into(), vec!["ctrl+s".into()]),
            ("newline".into(), vec!["enter".into()]),
        ])
        .unwrap();
        let enter = key(KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(
            map.action(KeyContext::Composer, &enter),
            Some(Action::Newline)
        );
        let err = Keymap::with_overrides(&[("newline".into(), vec!["enter".into()])])
            .unwrap_err()
            .to_string();
        assert!(err.contains("enter") && err.contains("submit") && err.contains("newline"));
        let err = Keymap::with_overrides(&[("fly".into(), vec![])])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown action \"fly\""));
        let err = Keymap::with_overrides(&[("help".into(), vec!["ctrl+zz".into()])])
            .unwrap_err()
            .to_string();
        assert!(err.contains("[keys] help") && err.contains("zz"));
        // A character one types cannot be a composer or popup action: typing would be lost.
        for (action, spelled) in [
            ("submit", "e"),
            ("newline", "shift+x"),
            ("up", "space"),
            ("popup-accept", "é"),
        ] {
            let err = Keymap::with_overrides(&[(action.into(), vec![spelled.into()])])
                .unwrap_err()
                .to_string();
            let shown = KeyBinding::parse(spelled).unwrap().to_string();
            assert!(
                err.starts_with(&format!(
                    "[keys] {action}: \"{shown}\" is a character you type"
                )),
                "{err}"
            );
        }
        assert!(Keymap::with_overrides(&[("submit".into(), vec!["ctrl+s".into()])]).is_ok());
        assert!(Keymap::with_overrides(&[("submit".into(), vec!["alt+s".into()])]).is_ok());
        assert!(Keymap::with_overrides(&[("submit".into(), vec!["f2".into()])]).is_ok());
        // Outside the composer a plain character is a fine key (the overlay's `q`).
        assert!(Keymap::with_overrides(&[("overlay-close".into(), vec!["x".into()])]).is_ok());
        // An empty list unbinds.
        let map = Keymap::with_overrides(&[("help".into(), vec![])]).unwrap();
        let question = key(KeyCode::Char('?'), KeyModifiers::NONE);
        assert_eq!(map.action(KeyContext::App, &question), None);
    }
}
