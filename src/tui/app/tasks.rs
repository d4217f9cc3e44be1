//! The app's background work and the one helper behind it: every task is started through a
//! [`TaskSlot`] (a cancel token and a serial), so starting a new one cancels the old one and an
//! answer that arrives for an older serial is dropped.

use super::{App, AppEvent, BadgeSlot, PopupPreview, BARE_FILE_ROWS, FILE_ROWS};
use crate::session::writer::now_ms;
use crate::tui::composer::ComposerSnapshot;
use crate::tui::file_index::FileFinder;
use crate::tui::mount::Preview;
use crate::tui::popup::{LookupRequest, PopupItem};
use crate::tui::prompt_history;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl App {
    /// Starts walking and matching the files of `cwd` for the popup, off the loop.
    pub fn start_file_finder(&mut self, cwd: PathBuf) {
        let tx = self.tx.clone();
        let pending = self.files_pending.clone();
        let notify: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if !pending.swap(true, Ordering::SeqCst) {
                let _ = tx.send(AppEvent::FilesChanged);
            }
        });
        self.files = Some(FileFinder::start(cwd, notify));
    }

    /// Gives the popup the finder's rows for its query (never waits for the workers).
    pub(super) fn refresh_file_rows(&mut self) {
        let Some(files) = &mut self.files else {
            return;
        };
        if !self.popup.is_open() {
            return;
        }
        let query = self.popup.query().to_string();
        let limit = if query.is_empty() {
            BARE_FILE_ROWS
        } else {
            FILE_ROWS
        };
        files.set_query(&query, limit);
        // The last rows the matcher published; the popup takes them only for its query.
        let published = files.rows();
        self.popup.set_file_rows(&published.query, published.rows);
    }

    /// Keeps prompt history in `<home>/history.jsonl` from now on, and loads what is there.
    pub fn keep_history_in(&mut self, home: &std::path::Path) {
        for entry in prompt_history::load(home) {
            self.composer.push_history(entry);
        }
        self.history_home = Some(home.to_path_buf());
    }

    /// Appends a sent message to the home's history, off the UI loop.
    pub(super) fn persist_history(&self, sent: &ComposerSnapshot) {
        let Some(home) = self.history_home.clone() else {
            return;
        };
        let sent = sent.clone();
        let session_id = self.agent.info().session_id.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = prompt_history::append(&home, &session_id, now_ms(), &sent) {
                tracing::warn!(error = %e, "prompt history not kept");
            }
        });
    }

    /// Starts a preview for each mention that has none, and cancels the previews of mentions
    /// that left the composer (SPEC §5.6). Never waits.
    pub(super) fn sync_badges(&mut self) {
        let mentioned: Vec<(String, String)> = self
            .composer
            .mentions()
            .into_iter()
            .map(|m| (m.session_id.clone(), m.label.clone()))
            .collect();
        let before = self.badges.len();
        self.badges.retain(|id, slot| {
            let keep = mentioned.iter().any(|(m, _)| m == id);
            if !keep {
                slot.cancel.cancel();
            }
            keep
        });
        let mut changed = before != self.badges.len();
        for (id, label) in mentioned {
            if self.badges.contains_key(&id) || !self.mount.has_service() {
                continue;
            }
            self.badge_serial += 1;
            let serial = self.badge_serial;
            let cancel = CancellationToken::new();
            self.badges.insert(
                id.clone(),
                BadgeSlot {
                    serial,
                    cancel: cancel.clone(),
                    preview: None,
                },
            );
            changed = true;
            let mount = self.mount.clone();
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let result = mount
                    .preview(&id, &label, &cancel)
                    .await
                    .map_err(|e| e.to_string());
                if !cancel.is_cancelled() {
                    let _ = tx.send(AppEvent::Badge(id, serial, result));
                }
            });
        }
        if changed {
            self.show_badges();
        }
    }

    pub(super) fn on_badge(&mut self, id: String, serial: u64, result: Result<Preview, String>) {
        let Some(slot) = self.badges.get_mut(&id).filter(|s| s.serial == serial) else {
            return; // The mention left (or came back) since: a stale answer.
        };
        slot.preview = Some(result);
        self.show_badges();
    }

    /// Hands the badge texts to the composer.
    pub(super) fn show_badges(&mut self) {
        let texts = self
            .badges
            .iter()
            .map(|(id, slot)| {
                let text = match &slot.preview {
                    None => "sizing…".to_string(),
                    Some(Ok(preview)) => preview.badge(),
                    Some(Err(_)) => "cannot be read".to_string(),
                };
                (id.clone(), text)
            })
            .collect();
        self.composer.set_badges(texts);
    }

    /// Follows the popup's highlighted session: a new one starts its preview (the previous one
    /// is cancelled); none highlighted drops it.
    pub(super) fn sync_popup_preview(&mut self) {
        let highlighted = match self
            .popup
            .is_open()
            .then(|| self.popup.selected())
            .flatten()
        {
            Some(PopupItem::Session(c)) => Some((c.session_id, c.label)),
            _ => None,
        };
        let Some((id, label)) = highlighted else {
            if let Some(old) = self.popup_preview.take() {
                old.cancel.cancel();
            }
            return;
        };
        if self.popup_preview.as_ref().is_some_and(|p| p.id == id) {
            return;
        }
        if let Some(old) = self.popup_preview.take() {
            old.cancel.cancel();
        }
        if !self.mount.has_service() {
            return;
        }
        self.badge_serial += 1;
        let serial = self.badge_serial;
        let cancel = CancellationToken::new();
        self.popup_preview = Some(PopupPreview {
            id: id.clone(),
            label: label.clone(),
            serial,
            cancel: cancel.clone(),
            result: None,
        });
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = mount
                .preview(&id, &label, &cancel)
                .await
                .map_err(|e| e.to_string());
            if !cancel.is_cancelled() {
                let _ = tx.send(AppEvent::PopupPreview(id, serial, result));
            }
        });
    }

    /// What the mentions in the composer add to the next request, for the status line.
    pub(super) fn next_context(&self) -> Option<String> {
        if self.badges.is_empty() {
            return None;
        }
        let ready: Vec<&Preview> = self
            .badges
            .values()
            .filter_map(|slot| slot.preview.as_ref()?.as_ref().ok())
            .collect();
        let bytes: u64 = ready.iter().map(|p| p.bytes).sum();
        let refs = self.badges.len();
        let mut text = format!(
            "+{refs} ref{} {}",
            if refs == 1 { "" } else { "s" },
            crate::tui::transcript::human_bytes(bytes)
        );
        if ready.len() < refs {
            text.push('…');
        }
        Some(text)
    }

    /// Keeps the popup on the `@` token under the cursor and starts its lookup.
    pub(super) fn sync_popup(&mut self) {
        self.sync_badges();
        self.slash.sync(self.composer.slash_query().as_deref());
        let token = self.composer.active_token();
        if let Some(request) = self.popup.sync(token.as_ref()) {
            self.start_lookup(request);
        }
        self.refresh_file_rows();
    }

    pub(super) fn start_lookup(&mut self, request: LookupRequest) {
        if let Some(previous) = self.lookup_cancel.take() {
            previous.cancel();
        }
        let cancel = CancellationToken::new();
        self.lookup_cancel = Some(cancel.clone());
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        let discovery = self.discovery.clone();
        let info = self.agent.info();
        let agent = (info.session_id.clone(), info.cwd.clone());
        tokio::spawn(async move {
            let (result, details) = crate::tui::discovery::lookup(
                mount,
                discovery.clone(),
                agent,
                request.query,
                now_ms(),
                cancel.clone(),
            )
            .await;
            if let Some(note) = discovery.and_then(|d| d.take_note()) {
                let _ = tx.send(AppEvent::DiscoveryNote(note));
            }
            if !cancel.is_cancelled() {
                let _ = tx.send(AppEvent::Discovered(request.id, details));
                let _ = tx.send(AppEvent::Lookup(request.id, result));
            }
        });
    }
}
