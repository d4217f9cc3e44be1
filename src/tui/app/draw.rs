//! One frame: the layout of the rows, the widgets drawn into them and the layers over the
//! transcript, each anchored to its bottom by [`anchor_bottom`].

use super::focus::{self, anchor_bottom, DrawCx, Focus, Layer, Placement};
use super::App;
use crate::session::clock::now_ms;
use crate::tui::help::KeyHelp;
use crate::tui::keys::Action;
use crate::tui::render::Renderable;
use crate::tui::status::StatusLine;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Position, Rect};

impl App {
    pub(super) fn status_line(&self) -> StatusLine {
        let info = self.agent.info();
        StatusLine {
            session_id: info.session_id.clone(),
            title: self.agent.live().title(),
            cwd: info.cwd.clone(),
            model: self.model.clone(),
            running: self.status.running,
            queued_steering: self.status.staged_steering + self.status.queued_prompts,
            preparing: self.preparing.is_some(),
            context_tokens: self.context_tokens,
            session_tokens: self.session_tokens,
            notice: self
                .provider_notice
                .clone()
                .or_else(|| self.home_note.clone()),
            next_context: self.next_context(),
            elapsed_secs: self.turn_started.map(|t| t.elapsed().as_secs()),
            interrupt_key: self.keymap.label(Action::Interrupt, 1),
        }
    }

    /// The messages sent while the turn runs that it has not taken yet, as typed.
    pub(super) fn queued_panel(&self) -> crate::tui::queued::QueuedPanel {
        use crate::tui::composer::Part;
        if !self.status.running {
            return crate::tui::queued::QueuedPanel::default();
        }
        let messages = self
            .unlogged
            .iter()
            .map(|(_, sent)| {
                sent.parts()
                    .into_iter()
                    .map(|part| match part {
                        Part::Text(text) => text,
                        Part::Mention { label, .. } => format!("@{label}"),
                        Part::Paste(text) => format!("[pasted {} lines]", text.lines().count()),
                    })
                    .collect::<String>()
            })
            .collect();
        crate::tui::queued::QueuedPanel { messages }
    }

    pub(super) fn key_help(&self) -> KeyHelp {
        KeyHelp {
            popup_open: self.popup.is_open() || self.slash.is_open(),
            running: self.status.running,
            preparing: self.preparing.is_some(),
            quit_pending: self.quit_armed.is_some(),
            has_details: self.transcript.items().iter().any(|i| i.is_expandable()),
            composer_empty: self.composer.is_empty(),
            has_draft: !self.composer.is_empty(),
            keymap: Some(self.keymap.clone()),
        }
    }

    /// Where each part goes in `area`: computed once per frame.
    fn areas(&self, area: Rect) -> AppAreas {
        let composer_height = self.composer.desired_height(area.width).max(1);
        let queued_height = self.queued_panel().height();
        let [transcript, queued, composer, status, help] = Layout::vertical([
            Constraint::Min(1),
            Constraint::Length(queued_height),
            Constraint::Length(composer_height),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(area);
        AppAreas {
            transcript,
            queued,
            composer,
            status,
            help,
        }
    }

    /// Draws one frame into `area` of `buf` and says where the terminal cursor belongs, from
    /// one layout.
    pub fn draw(&self, area: Rect, buf: &mut ratatui::buffer::Buffer) -> Option<Position> {
        let areas = self.areas(area);
        if self.inline {
            self.transcript.render_live(areas.transcript, buf);
        } else {
            self.transcript.render(areas.transcript, buf);
        }
        self.queued_panel().render(areas.queued, buf);
        self.composer.render(areas.composer, buf);
        self.status_line().render(areas.status, buf);
        self.key_help().render(areas.help, buf);
        // Bottom first: the layer drawn last, on top, is the one that takes keys first.
        let cx = DrawCx {
            keymap: &self.keymap,
            now_ms: now_ms(),
        };
        let over = areas.transcript;
        let mut cursor = self.composer.cursor_pos(areas.composer);
        for layer in focus::stack(self.open_layers()).into_iter().rev() {
            let focus: &dyn Focus = match layer {
                Layer::Popup => &self.popup,
                Layer::Slash => &self.slash,
                Layer::Overlay => match &self.overlay {
                    Some(overlay) => overlay,
                    None => continue,
                },
                Layer::Picker => match &self.picker {
                    Some(picker) => picker,
                    None => continue,
                },
                Layer::Confirm => {
                    self.render_confirm(over, buf);
                    cursor = None;
                    continue;
                }
                Layer::Guard | Layer::Composer | Layer::Session => continue,
            };
            let view = focus.view(&cx);
            let at = match focus.placement() {
                Placement::Fill => over,
                Placement::Bottom { max_width } => {
                    anchor_bottom(over, view.desired_height(over.width), max_width)
                }
            };
            view.render(at, buf);
            match layer {
                Layer::Popup => self.render_popup_preview(over, at, buf),
                // A modal layer hides the composer's cursor.
                Layer::Picker | Layer::Overlay => cursor = None,
                _ => {}
            }
        }
        cursor
    }

    /// Which layers of the focus stack are up.
    pub(super) fn open_layers(&self) -> focus::Open {
        focus::Open {
            picker: self.picker.is_some(),
            confirm: self.chips.asking().is_some(),
            overlay: self.overlay.is_some(),
            slash: self.slash.is_open(),
            popup: self.popup.is_open(),
        }
    }

    /// The highlighted session's preview, anchored to the bottom of what `popup` leaves of
    /// `over` above it.
    fn render_popup_preview(&self, over: Rect, popup: Rect, buf: &mut Buffer) {
        let Some(preview) = &self.popup_preview else {
            return;
        };
        let above = Rect {
            height: popup.y - over.y,
            ..over
        };
        let view = crate::tui::popup::PreviewPane::new(&preview.label, preview.result.as_ref());
        view.render(
            anchor_bottom(above, view.desired_height(above.width), u16::MAX),
            buf,
        );
    }

    /// Draws one frame into `area` of `buf`.
    pub fn render(&self, area: Rect, buf: &mut ratatui::buffer::Buffer) {
        self.draw(area, buf);
    }

    /// Where the terminal cursor belongs.
    pub fn cursor(&self, area: Rect) -> Option<Position> {
        self.composer.cursor_pos(self.areas(area).composer)
    }
}

/// The rows of one frame.
struct AppAreas {
    transcript: Rect,
    queued: Rect,
    composer: Rect,
    status: Rect,
    help: Rect,
}
