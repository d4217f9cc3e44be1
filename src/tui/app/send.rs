//! Sending a message (SPEC §5.3, §5.5): the draft leaves the composer at once, the submit
//! transaction runs off the loop, and a send that fails or is not logged gives its text back.

use super::{App, AppEvent};
use crate::host::attach;
use crate::host::{SubmitError, Submitted};
use crate::tui::composer::{Composer, ComposerSnapshot};
use crate::tui::slash::{self, SlashLine};
use crate::tui::transcript::NoticeLevel;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// The typed `@word` tokens of the composer that may name a session by id or id prefix (issue
/// 24 item 2): unquoted, no `/`, trailing punctuation off; each with the element range its
/// mention would take.
fn typed_session_ids(composer: &Composer) -> Vec<(std::ops::Range<usize>, String)> {
    composer
        .plain_tokens()
        .into_iter()
        .filter(|t| !t.quoted && !t.path.contains('/'))
        .filter_map(|t| {
            let id = t.path.trim_end_matches(|c: char| ",.;?!)]}'\"".contains(c));
            (!id.is_empty()).then(|| (t.start..t.start + 1 + id.chars().count(), id.to_string()))
        })
        .collect()
}

/// The files a draft's chips choose.
fn draft_files(draft: Option<&ComposerSnapshot>) -> Vec<attach::ChosenFile> {
    draft.map_or_else(Vec::new, |d| d.files().iter().map(|f| f.chosen()).collect())
}

/// At most this many sent messages wait for their log record (older ones were long logged).
const MAX_UNLOGGED: usize = 64;

impl App {
    pub(super) fn submit(&mut self) {
        if self.composer.is_blank() || self.preparing.is_some() {
            // One send at a time: the draft stays for when this one settles.
            return;
        }
        if let Some(reason) = self.agent.write_blocker() {
            // Read-only: the text stays where it is.
            self.transcript.push_notice(
                NoticeLevel::Error,
                format!("Not sent (this session cannot be written): {reason}"),
            );
            return;
        }
        if self.chips.busy() {
            // Every file that goes is drawn as a chip, with its size, before the send.
            self.transcript.push_notice(
                NoticeLevel::Info,
                "Not sent yet: an attached file is still being sized; press Enter again",
            );
            return;
        }
        let typed = self.composer.submission_text();
        match slash::parse_line(&typed) {
            Some(SlashLine::Run(command, arg)) => {
                let draft = self.composer.take_draft();
                self.composer.push_history(draft);
                self.sync_popup();
                return self.run_command(command, &arg);
            }
            Some(SlashLine::Unknown(name)) if self.confirm_unknown.as_deref() != Some(&typed) => {
                self.transcript.push_notice(
                    NoticeLevel::Info,
                    format!(
                        "/{name} is not a command (/help lists them). Press Enter again to \
                         send the line to the model as it is"
                    ),
                );
                self.confirm_unknown = Some(typed);
                return;
            }
            _ => self.confirm_unknown = None,
        }
        self.popup.close();
        self.slash.close();
        // A send shows where it went: the transcript follows to the bottom again.
        self.transcript.scroll_to_bottom();
        let typed_ids = typed_session_ids(&self.composer);
        let draft = self.composer.take_draft();
        // Trailing whitespace (such as the space after an inserted mention) is not content.
        let text = draft.submission_text().trim_end().to_string();
        let typed_draft = (!typed_ids.is_empty()).then(|| draft.clone());
        self.in_flight = Some(draft);
        let cancel = CancellationToken::new();
        self.preparing = Some(cancel.clone());
        let mount = self.mount.clone();
        let tx = self.tx.clone();
        let cwd = self.agent.info().cwd.clone().map(PathBuf::from);
        // Exactly the draft's file chips are read (never paths found in its text), off the
        // loop, bounded, and go with the message.
        let chosen: Vec<attach::ChosenFile> = draft_files(self.in_flight.as_ref());
        tokio::spawn(async move {
            // Typed `@ID` / `@PREFIX` tokens that name one session go as its mention.
            let text = match typed_draft {
                None => text,
                Some(draft) => {
                    let prefixes: Vec<String> = typed_ids.iter().map(|(_, p)| p.clone()).collect();
                    match mount.resolve_typed(&prefixes).await {
                        Ok(ids) => {
                            let replacements = typed_ids
                                .into_iter()
                                .zip(ids)
                                .filter_map(|((range, prefix), id)| {
                                    let mention = crate::tui::composer::MentionElement {
                                        label: crate::escape::escape_line(&prefix).into_owned(),
                                        session_id: id?,
                                    };
                                    Some((range, mention))
                                })
                                .collect();
                            draft
                                .with_mentions(replacements)
                                .submission_text()
                                .trim_end()
                                .to_string()
                        }
                        Err(why) => {
                            let _ = tx.send(AppEvent::NotSent(why));
                            return;
                        }
                    }
                }
            };
            // The chips' files are read inside the transaction (host room).
            let result = mount.submit_files(&text, cwd, chosen, &cancel).await;
            let _ = tx.send(AppEvent::Submitted(result));
        });
    }

    pub(super) fn on_submitted(&mut self, result: Result<Submitted, SubmitError>) {
        self.preparing = None;
        let sent = self.in_flight.take().unwrap_or_default();
        if result.is_ok() {
            self.composer.push_history(sent.clone());
            self.persist_history(&sent);
        } else {
            self.composer.restore_before(sent.clone());
        }
        self.sync_popup();
        match result {
            Ok(submitted) => {
                if self.unlogged.len() >= MAX_UNLOGGED {
                    self.unlogged.remove(0);
                }
                let id = submitted.message_id;
                self.unlogged.push((id.clone(), sent));
                if let Some(at) = self
                    .unsent_early
                    .iter()
                    .position(|(early, ..)| *early == id)
                {
                    let (_, why, reason) = self.unsent_early.remove(at);
                    self.give_back(&[id], &why, &reason);
                }
            }
            Err(e) if e.was_cancelled() => {
                self.transcript
                    .push_notice(NoticeLevel::Info, "Session reference preparation cancelled");
            }
            Err(e) => {
                tracing::info!(error = %e, "submit refused");
                self.transcript
                    .push_notice(NoticeLevel::Error, e.to_string());
            }
        }
    }

    /// Puts the text of messages that were not written back into the composer. A draft typed
    /// since goes to the history (Up brings it back): no text is dropped.
    pub(super) fn give_back(&mut self, message_ids: &[String], why: &str, reason: &str) {
        let mut returned: Vec<ComposerSnapshot> = Vec::new();
        for id in message_ids {
            match self.unlogged.iter().position(|(sent, _)| sent == id) {
                Some(at) => returned.push(self.unlogged.remove(at).1),
                // Its submission's result is still on the way: given back when it arrives.
                None if self.preparing.is_some() => {
                    if self.unsent_early.len() >= MAX_UNLOGGED {
                        self.unsent_early.remove(0);
                    }
                    self.unsent_early
                        .push((id.clone(), why.to_string(), reason.to_string()));
                }
                None => {}
            }
        }
        let Some(snapshot) = returned.pop() else {
            return;
        };
        // Older unsent messages than the last one stay reachable with Up.
        for older in returned {
            self.composer.push_history(older);
        }
        let mut notice = format!("{why}: {reason}. Its text is back in the composer");
        if !self.composer.is_blank() {
            notice.push_str(", before your newer draft");
        }
        self.composer.restore_before(snapshot);
        self.sync_popup();
        self.transcript.push_notice(NoticeLevel::Error, notice);
    }
}
