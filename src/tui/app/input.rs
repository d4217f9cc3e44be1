//! The app's reaction to one event: terminal input goes through the key table, answers go to
//! the state that asked for them.

use super::focus::{self, Command, Focus, Handled, Layer};
use super::{App, AppEvent, NextSession, QUIT_WINDOW, WHEEL_ROWS};
use crate::tui::help::KeyOverlay;
use crate::tui::keys::{Action, KeyContext, Keymap};
use crate::tui::popup::PopupItem;
use crate::tui::transcript::NoticeLevel;
use crossterm::event::{Event as TermEvent, KeyEvent, KeyEventKind, MouseEventKind};
use std::sync::atomic::Ordering;
use std::time::Instant;

impl App {
    /// Reacts to one event: updates the state and starts any background work it asks for.
    pub fn handle(&mut self, event: AppEvent) {
        self.handle_event(event);
        self.sync_popup_preview();
    }

    pub(super) fn handle_event(&mut self, event: AppEvent) {
        match event {
            AppEvent::Input(TermEvent::Key(key)) if key.kind != KeyEventKind::Release => {
                self.on_key(key)
            }
            AppEvent::Input(TermEvent::Paste(text)) => {
                self.composer.handle_paste(&text);
                self.sync_popup();
            }
            AppEvent::Input(TermEvent::Mouse(mouse)) => match mouse.kind {
                MouseEventKind::ScrollUp => self.transcript.scroll_up(WHEEL_ROWS),
                MouseEventKind::ScrollDown => self.transcript.scroll_down(WHEEL_ROWS),
                _ => {}
            },
            AppEvent::Input(_) => {}
            AppEvent::Agent(event) => self.on_agent(event),
            AppEvent::Lookup {
                id,
                result,
                details,
            } => {
                // Details first: the rows are drawn with them (each is dropped when stale).
                self.popup.set_details(id, details);
                self.popup.apply_results(id, result);
            }
            AppEvent::DiscoveryNote(note) => self.transcript.push_notice(NoticeLevel::Info, note),
            AppEvent::Submitted(result) => self.on_submitted(result),
            AppEvent::Listed { serial, result } => {
                if self.listing.is_current(serial) {
                    self.listing.cancel();
                    self.show_sessions(result)
                }
            }
            AppEvent::PopupPreview { id, serial, result } => {
                if let Some(preview) = self
                    .popup_preview
                    .as_mut()
                    .filter(|p| p.id == id && p.task.is_current(serial))
                {
                    if let Some(picker) = self.picker.as_mut() {
                        picker.set_preview(&id, Some(result.clone()));
                    }
                    preview.result = Some(result);
                }
            }
            AppEvent::Resolved { serial, .. } if !self.resolving.is_current(serial) => {}
            AppEvent::Resolved { result, .. } => {
                self.resolving.cancel();
                self.on_resolved(result)
            }
            AppEvent::Picker {
                serial,
                generation,
                result,
            } => {
                if let Some(picker) = self
                    .picker
                    .as_mut()
                    .filter(|_| self.picker_search.is_current(serial))
                {
                    picker.apply(generation, result);
                }
            }
            AppEvent::Badge { id, serial, result } => self.on_badge(id, serial, result),
            AppEvent::FilesChanged => {
                self.files_pending.store(false, Ordering::SeqCst);
                self.refresh_file_rows();
            }
            AppEvent::Inspected { serial, result } => self.on_inspected(serial, result),
            AppEvent::TypedId {
                token,
                prefix,
                result,
            } => self.on_typed_id(token, prefix, result),
            AppEvent::NotSent(why) => {
                self.preparing = None;
                let sent = self.in_flight.take().unwrap_or_default();
                self.composer.restore_before(sent);
                self.sync_popup();
                self.transcript
                    .push_notice(NoticeLevel::Error, format!("Not sent: {why}"));
            }
            AppEvent::Tick => {
                if self.quit_armed.is_some_and(|t| t.elapsed() > QUIT_WINDOW) {
                    self.quit_armed = None;
                }
                if self.esc_armed.is_some_and(|t| t.elapsed() > QUIT_WINDOW) {
                    self.esc_armed = None;
                }
            }
        }
    }

    /// The answer to `/resume PREFIX`: the session to open, the picker with the word typed, or
    /// why not.
    fn on_resolved(&mut self, result: Result<Result<String, String>, String>) {
        match result {
            Ok(Ok(id)) => {
                self.next = Some(NextSession::Resume(id));
                self.should_quit = true;
            }
            // A word that starts no id: find it.
            Ok(Err(word)) if self.discovery.is_some() => self.open_picker(&word),
            Ok(Err(word)) => self.transcript.push_notice(
                NoticeLevel::Error,
                format!(
                    "/resume: no session id is or starts with {}",
                    crate::escape::escape_line(&format!("{word:?}"))
                ),
            ),
            Err(why) => self
                .transcript
                .push_notice(NoticeLevel::Error, format!("/resume: {why}")),
        }
    }

    /// Offers `key` to the focus stack, top first, and carries out what the layer that took it
    /// asks for.
    pub(super) fn on_key(&mut self, key: KeyEvent) {
        if self.way_out(&key) {
            return;
        }
        let layers = focus::stack(self.open_layers());
        let keymap = self.keymap.clone();
        let taken = focus::dispatch(&layers, |layer| self.key_to(layer, &key, &keymap));
        if let Some((_, Handled::Emit(command))) = taken {
            self.carry_out(command, &key);
        }
    }

    /// The ways out that no keymap can take away (issue 32): Ctrl-C acts as `clear-or-quit`
    /// (clear, cancel, interrupt; twice when idle: quit) when the keymap bound that action to
    /// other keys or to none, closing whatever layer is open on the way; Ctrl-D on an empty
    /// composer with nothing open and no turn running quits, as in Codex and Claude Code. Keys
    /// the keymap binds as usual go through the focus stack. Answers whether `key` was taken.
    fn way_out(&mut self, key: &KeyEvent) -> bool {
        use crossterm::event::{KeyCode, KeyModifiers};
        if key.modifiers != KeyModifiers::CONTROL {
            return false;
        }
        match key.code {
            KeyCode::Char('c' | 'C') => {
                let bound = self
                    .keymap
                    .keys(Action::ClearOrQuit)
                    .contains(&crate::tui::keys::KeyBinding::of(key));
                if bound {
                    return false;
                }
                let layered = self.picker.take().is_some() | self.overlay.take().is_some();
                self.popup.close();
                if !layered {
                    self.on_ctrl_c();
                }
                true
            }
            KeyCode::Char('d' | 'D') => {
                let open = self.open_layers();
                let idle = !self.status.running && self.preparing.is_none();
                let nothing_open = !(open.picker || open.confirm || open.overlay || open.slash);
                if idle && nothing_open && self.composer.is_empty() {
                    self.should_quit = true;
                    return true;
                }
                false
            }
            _ => false,
        }
    }

    /// What `layer` does with `key`.
    fn key_to(&mut self, layer: Layer, key: &KeyEvent, keymap: &Keymap) -> Handled {
        let app_action = keymap.action(KeyContext::App, key);
        match layer {
            Layer::Picker => match &mut self.picker {
                Some(picker) => Focus::handle_key(picker, key, keymap),
                None => Handled::Ignored,
            },
            Layer::Confirm if self.on_confirm_key(key) => Handled::Consumed,
            Layer::Confirm => Handled::Ignored,
            Layer::Overlay => match &mut self.overlay {
                Some(overlay) => Focus::handle_key(overlay, key, keymap),
                None => Handled::Ignored,
            },
            Layer::Guard => {
                if app_action == Some(Action::ClearOrQuit) {
                    self.on_ctrl_c();
                    return Handled::Consumed;
                }
                self.quit_armed = None;
                self.esc_before = self.esc_armed.take();
                match &self.preparing {
                    // Typing goes on into the next draft; Esc (outside the popup) cancels the
                    // send.
                    Some(cancel)
                        if app_action == Some(Action::Interrupt) && !self.popup.is_open() =>
                    {
                        cancel.cancel();
                        Handled::Consumed
                    }
                    _ => Handled::Ignored,
                }
            }
            Layer::Slash => Focus::handle_key(&mut self.slash, key, keymap),
            Layer::Popup => Focus::handle_key(&mut self.popup, key, keymap),
            Layer::Composer => {
                if app_action == Some(Action::Help) && self.composer.is_empty() {
                    self.overlay = Some(KeyOverlay::new());
                    return Handled::Consumed;
                }
                if keymap.action(KeyContext::Composer, key) == Some(Action::AttachPath)
                    && self.chip_on_tab()
                {
                    return Handled::Consumed;
                }
                Focus::handle_key(&mut self.composer, key, keymap)
            }
            Layer::Session => {
                let esc_before = self.esc_before.take();
                self.on_app_action(app_action, esc_before);
                Handled::Consumed
            }
        }
    }

    /// Carries out what a layer asked for.
    fn carry_out(&mut self, command: Command, key: &KeyEvent) {
        match command {
            Command::Insert(item) => {
                self.composer.insert_item(&item);
                self.popup.close();
                self.sync_popup();
                if matches!(item, PopupItem::File(_)) {
                    self.chip_after_pick();
                }
            }
            Command::Complete(command) => {
                self.composer.set_text(&format!("/{} ", command.name()));
                self.sync_popup();
            }
            Command::Run(command) => {
                let draft = self.composer.take_draft();
                self.composer.push_history(draft);
                self.sync_popup();
                self.run_command(command, "");
            }
            Command::Search { generation, query } => self.picker_search(generation, query, false),
            Command::Resume(id) => {
                self.picker = None;
                self.next = Some(NextSession::Resume(id));
                self.should_quit = true;
            }
            Command::ClosePicker => {
                self.picker = None;
                self.should_quit |= std::mem::take(&mut self.picker_exits);
            }
            Command::CloseOverlay => self.overlay = None,
            Command::Submit => self.submit(),
            Command::Edited => {
                self.sync_popup();
                self.chip_after_key(key);
            }
            Command::Moved => self.sync_popup(),
        }
    }

    pub(super) fn on_app_action(&mut self, action: Option<Action>, esc_armed: Option<Instant>) {
        match action {
            Some(Action::Interrupt) => {
                if self.status.running {
                    self.agent.cancel();
                } else if self.composer.is_empty() {
                    // Esc Esc on an empty, idle composer: the last message comes back to edit.
                    if esc_armed.is_some_and(|t| t.elapsed() <= QUIT_WINDOW) {
                        if self.composer.move_up() == Handled::Emit(Command::Edited) {
                            self.sync_popup();
                        }
                    } else {
                        self.esc_armed = Some(Instant::now());
                    }
                }
            }
            Some(Action::ScrollUp) => self.transcript.page_up(),
            Some(Action::ScrollDown) => self.transcript.page_down(),
            Some(Action::ScrollTop) => self.transcript.scroll_to_top(),
            Some(Action::ScrollBottom) => self.transcript.scroll_to_bottom(),
            Some(Action::Details) => {
                self.transcript.toggle_selected_card();
            }
            Some(Action::CardPrev) => {
                self.transcript.select_card(true);
            }
            Some(Action::CardNext) => {
                self.transcript.select_card(false);
            }
            _ => {}
        }
    }

    /// Ctrl+C (SPEC §5.5): cancels a send in flight, else clears a draft (Up recalls it), else
    /// interrupts a running turn, and only quits on a second press with an empty, idle
    /// composer.
    pub(super) fn on_ctrl_c(&mut self) {
        self.esc_armed = None;
        if let Some(cancel) = &self.preparing {
            cancel.cancel();
            self.quit_armed = None;
            return;
        }
        if !self.composer.is_empty() {
            let draft = self.composer.take_draft();
            self.composer.push_history(draft);
            self.sync_popup();
            self.quit_armed = None;
            return;
        }
        if self.status.running {
            self.agent.cancel();
            self.quit_armed = None;
            return;
        }
        if self.quit_armed.is_some_and(|t| t.elapsed() <= QUIT_WINDOW) {
            self.should_quit = true;
            return;
        }
        self.quit_armed = Some(Instant::now());
    }
}
