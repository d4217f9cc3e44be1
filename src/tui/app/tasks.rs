//! The app's background work: lookups, badges, the popup's preview, the picker's searches,
//! `/resume PREFIX` and `/sessions` all run off the loop and answer through the channel, each
//! started through its [`TaskSlot`] (`task_slot.rs`).
//!
//! Invariant: an answer is used only when its serial is the slot's current one
//! ([`TaskSlot::is_current`]), so a slot made again for the same key (a mention that left and
//! came back) never takes an older answer. Proof: the unit tests below (a stale answer is
//! dropped, a cancelled task sends nothing).

use super::task_slot::TaskSlot;
use super::{App, AppEvent, BadgeSlot, PopupPreview, BARE_FILE_ROWS, FILE_ROWS};
use crate::host::Preview;
use crate::session::clock::now_ms;
use crate::tui::composer::ComposerSnapshot;
use crate::tui::file_index::FileFinder;
use crate::tui::popup::{LookupRequest, PopupItem};
use crate::tui::prompt_history;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Drop for TaskSlot {
    /// A slot that goes (a mention removed, the popup closed) cancels its task.
    fn drop(&mut self) {
        self.cancel();
    }
}

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
        // A slot that goes cancels its preview.
        self.badges
            .retain(|id, _| mentioned.iter().any(|(m, _)| m == id));
        let mut changed = before != self.badges.len();
        for (id, label) in mentioned {
            if self.badges.contains_key(&id) || !self.mount.has_service() {
                continue;
            }
            let id_key = id.clone();
            changed = true;
            let mount = self.mount.clone();
            let mut task = TaskSlot::default();
            task.spawn(&mut self.serials, &self.tx, |serial, cancel| async move {
                let result = mount
                    .preview(&id, &label, &cancel)
                    .await
                    .map_err(|e| e.to_string());
                AppEvent::Badge { id, serial, result }
            });
            self.badges.insert(
                id_key,
                BadgeSlot {
                    task,
                    preview: None,
                },
            );
        }
        if changed {
            self.show_badges();
        }
    }

    pub(super) fn on_badge(&mut self, id: String, serial: u64, result: Result<Preview, String>) {
        let Some(slot) = self
            .badges
            .get_mut(&id)
            .filter(|s| s.task.is_current(serial))
        else {
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

    /// Follows the popup's highlighted session (the picker's while it is up): a new one starts
    /// its preview (the previous one is cancelled); none highlighted drops it.
    pub(super) fn sync_popup_preview(&mut self) {
        if self.picker.is_some() {
            return self.sync_picker_preview();
        }
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
            self.popup_preview = None;
            return;
        };
        if self.popup_preview.as_ref().is_some_and(|p| p.id == id) {
            return;
        }
        self.start_preview(id, label);
    }

    /// The `/resume` picker's preview pane (issue 38 item 5): its highlighted session's last
    /// messages, read off the loop in the popup preview's slot, so typing never waits for it
    /// and an answer for a session no longer highlighted is dropped.
    fn sync_picker_preview(&mut self) {
        let Some((id, label)) = self.picker.as_ref().and_then(|p| p.preview_wanted()) else {
            return;
        };
        self.start_preview(id.clone(), label);
        if self.popup_preview.is_some() {
            if let Some(picker) = self.picker.as_mut() {
                picker.set_preview(&id, None);
            }
        }
    }

    /// Starts reading session `id`'s preview into the preview slot (the one before is
    /// cancelled); nothing without a reference service.
    fn start_preview(&mut self, id: String, label: String) {
        self.popup_preview = None;
        if !self.mount.has_service() {
            return;
        }
        let mount = self.mount.clone();
        let mut task = TaskSlot::default();
        let (for_id, for_label) = (id.clone(), label.clone());
        task.spawn(&mut self.serials, &self.tx, |serial, cancel| async move {
            let result = mount
                .preview(&for_id, &for_label, &cancel)
                .await
                .map_err(|e| e.to_string());
            AppEvent::PopupPreview {
                id: for_id,
                serial,
                result,
            }
        });
        self.popup_preview = Some(PopupPreview {
            id,
            label,
            task,
            result: None,
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

    /// Starts the popup's lookup for `request` (the one before is cancelled): the contract's
    /// candidates and discovery's details come back as one answer. The app's first lookup may
    /// be answered twice: first from what the last process listed, when that comes before the
    /// checked answer, then by the checked answer, whose rows replace it (the pick is kept).
    pub(super) fn start_lookup(&mut self, request: LookupRequest) {
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        let discovery = self.discovery.clone();
        let info = self.agent.info();
        let agent = (info.session_id.clone(), info.cwd.clone());
        let first = std::mem::take(&mut self.first_lookup)
            .then(|| discovery.clone())
            .flatten();
        self.lookup
            .spawn(&mut self.serials, &self.tx, |_, cancel| async move {
                let now = now_ms();
                let checked = crate::tui::lookup::lookup(
                    mount,
                    discovery.clone(),
                    agent.clone(),
                    request.query.clone(),
                    now,
                    cancel.clone(),
                );
                // The remembered answer first, alone: on a small machine the checked listing's
                // `stat` of every file would take the cores it needs.
                if let Some(index) = first {
                    let remembered =
                        crate::tui::lookup::remembered(index, agent, request.query, now).await;
                    if let (Some((rows, details)), false) = (remembered, cancel.is_cancelled()) {
                        let _ = tx.send(AppEvent::Lookup {
                            id: request.id,
                            result: Ok(rows),
                            details: Some(details),
                        });
                    }
                }
                let (result, details) = checked.await;
                // Said even when the lookup is stale: the note is taken once.
                if let Some(note) = discovery.and_then(|d| d.take_note()) {
                    let _ = tx.send(AppEvent::DiscoveryNote(note));
                }
                AppEvent::Lookup {
                    id: request.id,
                    result,
                    details,
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::super::task_slot::Serials;
    use super::*;
    use std::time::Duration;

    fn note(text: &str) -> AppEvent {
        AppEvent::DiscoveryNote(text.to_string())
    }

    #[tokio::test]
    async fn a_new_task_cancels_the_old_one_and_only_the_current_serial_counts() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut serials = Serials::default();
        let mut slot = TaskSlot::default();
        let (gate_tx, gate) = tokio::sync::oneshot::channel::<()>();
        let first = slot.spawn(&mut serials, &tx, |_, _| async move {
            let _ = gate.await;
            note("first")
        });
        let second = slot.spawn(&mut serials, &tx, |_, _| async { note("second") });
        assert!(second > first);
        assert!(!slot.is_current(first), "the older serial is stale");
        assert!(slot.is_current(second));
        let _ = gate_tx.send(());
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert!(matches!(got, Ok(Some(AppEvent::DiscoveryNote(t))) if t == "second"));
        // The first (cancelled) task answered nothing.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn a_dropped_or_cancelled_slot_sends_nothing_and_serials_never_repeat() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut serials = Serials::default();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..3 {
            let mut slot = TaskSlot::default();
            let (gate_tx, gate) = tokio::sync::oneshot::channel::<()>();
            let serial = slot.spawn(&mut serials, &tx, |_, cancel| async move {
                let _ = gate.await;
                assert!(cancel.is_cancelled());
                note("late")
            });
            assert!(seen.insert(serial), "a slot made again gets a new serial");
            drop(slot);
            let _ = gate_tx.send(());
        }
        let mut slot = TaskSlot::default();
        let serial = slot.spawn(&mut serials, &tx, |_, _| async { note("x") });
        slot.cancel();
        assert!(!slot.is_current(serial));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err());
    }
}
