//! The `/` commands: run on the loop, nothing of them reaches the model. Slow ones (`/resume
//! PREFIX`, `/sessions`, the picker's searches) are tasks that answer through the channel.

use super::{App, AppEvent, NextSession, SESSIONS_SHOWN};
use crate::agent::config::ModelChoice;
use crate::host::Workspace;
use crate::reference::Candidate;
use crate::session::clock::now_ms;
use crate::session::external::SourceSet;
use crate::tui::focus::{self, Handled};
use crate::tui::help::KeyOverlay;
use crate::tui::picker::PickerState;
use crate::tui::slash::Command;
use crate::tui::transcript::NoticeLevel;
use std::time::Duration;

impl App {
    /// Runs a `/` command locally: nothing of it reaches the model.
    pub(super) fn run_command(&mut self, command: Command, arg: &str) {
        self.confirm_unknown = None;
        match command {
            Command::Help => {
                self.overlay = Some(KeyOverlay::new());
            }
            Command::New => {
                self.next = Some(NextSession::New);
                self.should_quit = true;
            }
            Command::Resume if arg.is_empty() && self.discovery.is_some() => self.open_picker(""),
            Command::Resume if arg.is_empty() => self.transcript.push_notice(
                NoticeLevel::Info,
                "Usage: /resume ID (/sessions lists them; @ finds one by id or cwd)",
            ),
            Command::Resume => self.resolve_resume(arg),
            Command::Model if arg.is_empty() => self.transcript.push_notice(
                NoticeLevel::Info,
                format!(
                    "Model: {}. /model NAME switches this session to another model of the \
                     provider; the [provider] table of config.toml in the home or --provider \
                     NAME changes the provider",
                    self.model
                ),
            ),
            Command::Model => self.switch_model(arg),
            Command::Sessions => {
                let mount = self.mount.clone();
                self.listing
                    .spawn(&mut self.serials, &self.tx, |serial, cancel| async move {
                        let result = mount
                            .candidates("", &cancel)
                            .await
                            .map_err(|e| e.message().to_string());
                        AppEvent::Listed { serial, result }
                    });
            }
            Command::Quit => self.should_quit = true,
            Command::Copy => self.copy_last_answer(),
        }
    }

    /// `/model NAME`: the configured provider's model `NAME` answers from the next request on,
    /// in this session as it is (nothing rebuilt from the log, every notice kept; the next
    /// request logs a `request/header` with reason `change`).
    pub(super) fn switch_model(&mut self, name: &str) {
        let settings = match &self.model_choice {
            Some(ModelChoice::Remote(settings)) => settings,
            _ => {
                return self.transcript.push_notice(
                    NoticeLevel::Error,
                    format!(
                        "Could not switch to {name}: the offline model has no other models: \
                         configure a provider (--provider NAME, or the [provider] table of \
                         config.toml)"
                    ),
                )
            }
        };
        let mut settings = settings.clone();
        settings.model = name.to_string();
        let choice = ModelChoice::Remote(settings);
        match crate::agent::model_for(&choice, Duration::ZERO) {
            Ok((model, label)) => {
                self.agent.set_model(model);
                self.model = label;
                self.model_choice = Some(choice);
                self.transcript
                    .push_notice(NoticeLevel::Info, format!("Model: {}", self.model));
            }
            Err(e) => self.transcript.push_notice(
                NoticeLevel::Error,
                format!("Could not switch to {name}: {e}"),
            ),
        }
    }

    /// `/copy`: the last answer goes to the clipboard through OSC 52, written by the terminal
    /// loop after this key (never on its own: only a command the person ran sets it).
    pub(super) fn copy_last_answer(&mut self) {
        let last = self
            .transcript
            .items()
            .iter()
            .rev()
            .find_map(|item| match item {
                crate::tui::transcript::TranscriptItem::Assistant { text, .. }
                    if !text.is_empty() =>
                {
                    Some(text.clone())
                }
                _ => None,
            });
        match last {
            Some(text) => {
                self.transcript.push_notice(
                    NoticeLevel::Info,
                    format!(
                        "Copied the last answer ({}) to the clipboard (OSC 52; a terminal that \
                         does not allow it ignores it)",
                        crate::tui::transcript::human_bytes(text.len() as u64)
                    ),
                );
                self.clipboard = Some(text);
            }
            None => self.transcript.push_notice(
                NoticeLevel::Info,
                "Nothing to copy yet: no answer in this session",
            ),
        }
    }

    /// The finder as a picker over this home's own sessions, `query` already typed.
    pub(super) fn open_picker(&mut self, query: &str) {
        self.show_picker(query, false);
    }

    /// Opens the picker over a session that was just started (`dsh-refs --resume` with no id,
    /// or a word that starts none), `query` typed: the index is brought up to date before its
    /// first answer, and closing it without a pick ends the app (nothing was written).
    pub fn open_start_picker(&mut self, query: &str) {
        self.show_picker(query, true);
    }

    /// Opens the picker with `query` typed and starts its first search; `at_start`: the
    /// picker `--resume` opens with (see [`App::open_start_picker`]).
    fn show_picker(&mut self, query: &str, at_start: bool) {
        let mut picker = PickerState::with_query(query, self.agent.info().cwd.clone());
        let first = picker.start();
        self.picker = Some(picker);
        self.picker_exits = at_start;
        if let Handled::Emit(focus::Command::Search { generation, query }) = first {
            self.picker_search(generation, query, at_start);
        }
    }

    /// `/resume ID`: an id or a unique prefix of one of this home's own sessions (SPEC §8),
    /// resolved off the loop; a word that is no id's start opens the picker with it typed
    /// (with discovery on), else the session stays open.
    pub(super) fn resolve_resume(&mut self, prefix: &str) {
        if let Some(agent) = crate::session::external::ExternalAgent::of_id(prefix) {
            return self.transcript.push_notice(
                NoticeLevel::Error,
                format!(
                    "{} sessions are read-only: reference them with @ instead",
                    agent.product()
                ),
            );
        }
        let store = self.home_store.clone().or_else(|| {
            // A host's app that keeps history but was not built over a workspace.
            let home = self.history_home.as_ref()?;
            Some(
                Workspace::with_sources(home, SourceSet::default(), false)
                    .store()
                    .clone(),
            )
        });
        let Some(store) = store else {
            // No home known (a host's app): take the id as given.
            self.next = Some(NextSession::Resume(prefix.to_string()));
            self.should_quit = true;
            return;
        };
        let prefix = prefix.to_string();
        let resolve = move || {
            store
                .list_sessions_blocking()
                .map_err(|e| e.to_string())
                .and_then(|listing| {
                    match crate::discovery::lifecycle::resolve_prefix(&listing, &prefix) {
                        Err(crate::discovery::lifecycle::ResolveError::NotFound { .. }) => {
                            Ok(Err(prefix.clone()))
                        }
                        other => other.map(Ok).map_err(|e| e.to_string()),
                    }
                })
        };
        self.resolving
            .spawn(&mut self.serials, &self.tx, |serial, _| async move {
                let result = tokio::task::spawn_blocking(resolve)
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()));
                AppEvent::Resolved { serial, result }
            });
    }

    /// The answer to `/sessions`: the newest few, one line each.
    pub(super) fn show_sessions(&mut self, result: Result<Vec<Candidate>, String>) {
        match result {
            Ok(candidates) if candidates.is_empty() => self
                .transcript
                .push_notice(NoticeLevel::Info, "No other sessions yet"),
            Ok(candidates) => {
                let now = now_ms();
                let mut text = format!(
                    "{} session{} (newest first; /resume ID opens one):",
                    candidates.len(),
                    if candidates.len() == 1 { "" } else { "s" }
                );
                for c in candidates.iter().take(SESSIONS_SHOWN) {
                    text.push_str(&format!(
                        "\n{} · {} · {} · {}",
                        c.label,
                        c.session_id,
                        c.cwd.as_deref().unwrap_or("(no cwd)"),
                        crate::tui::text::format_age(c.created_at, now)
                    ));
                }
                if candidates.len() > SESSIONS_SHOWN {
                    text.push_str(&format!(
                        "\n… and {} more: type @ to search",
                        candidates.len() - SESSIONS_SHOWN
                    ));
                }
                self.transcript.push_notice(NoticeLevel::Info, text);
            }
            Err(e) => self
                .transcript
                .push_notice(NoticeLevel::Error, format!("Could not list sessions: {e}")),
        }
    }

    /// Runs one `/resume` picker query through discovery, off the loop: only this home's own
    /// sessions (another agent's cannot be resumed), never the open one. With `refresh_first`
    /// (the picker `--resume` opens with) the index is brought up to date before it answers.
    pub(super) fn picker_search(&mut self, generation: u64, text: String, refresh_first: bool) {
        let Some(discovery) = self.discovery.clone() else {
            return;
        };
        let info = self.agent.info();
        let query = crate::discovery::SearchQuery {
            text,
            agent: Some(info.session_id.clone()),
            cwd: info.cwd.clone(),
            limit: 200,
            now_ms: now_ms(),
            snippets: false,
        };
        self.picker_search
            .spawn(&mut self.serials, &self.tx, |serial, _| async move {
                if refresh_first {
                    let index = discovery.clone();
                    if let Ok(Err(e)) =
                        tokio::task::spawn_blocking(move || index.refresh_blocking()).await
                    {
                        tracing::warn!(error = %e, "picker: index not refreshed");
                    }
                }
                let result = discovery
                    .search(query)
                    .await
                    .map(|found| {
                        let own = |hit: &crate::discovery::Hit| {
                            crate::session::external::ExternalAgent::of_id(&hit.id).is_none()
                        };
                        let others = found.hits.iter().filter(|h| !own(h)).count();
                        let hits: Vec<_> = found.hits.into_iter().filter(own).collect();
                        (hits, found.total.saturating_sub(others))
                    })
                    .map_err(|e| e.to_string());
                AppEvent::Picker {
                    serial,
                    generation,
                    result,
                }
            });
    }
}
