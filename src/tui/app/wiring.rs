//! What the binary wires into the app (store, live sessions, model, keys) and [`build`], which
//! opens or resumes the session over it.

use super::{App, AppError, AppEvent, AppOptions};
use crate::agent::config::ModelChoice;
use crate::agent::{Agent, AgentConfig, ModelProvider};
use crate::host::{SessionReferenceMount, Workspace};
use crate::reference::SessionReferenceConfig;
use crate::session::clock::now_ms;
use crate::session::{LiveSessions, Record, SessionHeader};
use crate::tui::keys::Keymap;
use crate::tui::transcript::NoticeLevel;
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the binary wires into the app: the workspace (the home, its store and the sources
/// served, [`Workspace`]), the live sessions of this process, and the model that answers (with
/// its status-line label).
#[derive(Clone)]
pub struct Wiring {
    /// The composition root: the home's store, the sources, discovery.
    pub workspace: Workspace,
    /// The sessions held by agents in this process.
    pub live: LiveSessions,
    /// The model that answers turns.
    pub model: Arc<dyn ModelProvider>,
    /// The model's status-line label, e.g. `deepseek/deepseek-v4-flash`.
    pub model_label: String,
    /// The keys (the standard ones, or with the user's `[keys]` overrides).
    pub keymap: Arc<Keymap>,
    /// The configuration the model came from, when known (`/model` derives another from it).
    pub choice: Option<ModelChoice>,
}

impl Wiring {
    /// The workspace, no live sessions yet, and `model`.
    pub fn new(workspace: Workspace, model: Arc<dyn ModelProvider>, label: String) -> Wiring {
        Wiring {
            workspace,
            live: LiveSessions::default(),
            model,
            model_label: label,
            keymap: Arc::new(Keymap::standard()),
            choice: None,
        }
    }

    /// A workspace on `options.home` serving `options.sources`, and the model a resolved
    /// configuration names (SPEC §7).
    pub fn for_choice(options: &AppOptions, choice: &ModelChoice) -> Result<Wiring, AppError> {
        let workspace = Workspace::with_sources(&options.home, options.sources.clone(), false);
        Wiring::for_workspace(workspace, options, choice)
    }

    /// `workspace` (the one the binary resolved) and the model a resolved configuration names.
    pub fn for_workspace(
        workspace: Workspace,
        options: &AppOptions,
        choice: &ModelChoice,
    ) -> Result<Wiring, AppError> {
        let (model, label) = crate::agent::model_for(choice, options.offline_delay)?;
        let mut wiring = Wiring::new(workspace, model, label);
        wiring.choice = Some(choice.clone());
        Ok(wiring)
    }
}

/// Builds the agent, the service and the mount for `options` over what `wiring` provides.
pub fn build(
    options: &AppOptions,
    wiring: Wiring,
    tx: mpsc::UnboundedSender<AppEvent>,
) -> Result<(App, Vec<Record>), AppError> {
    let Wiring {
        workspace,
        live,
        model,
        model_label,
        keymap,
        choice,
    } = wiring;
    let mut resumed_log = None;
    let (agent, history) = match &options.resume {
        Some(id) => {
            let path = workspace.store().log_path(id)?;
            let resumed = Agent::resume_with_history(&path, model, live.clone())?;
            resumed_log = Some(path);
            resumed
        }
        None => {
            let encoding = crate::session::writer::home_encoding(&options.home, options.encoding)?;
            let header = SessionHeader::new(
                format!("session-{}", uuid::Uuid::new_v4()),
                now_ms(),
                options.cwd.clone(),
            );
            let agent = Agent::start(AgentConfig {
                home: options.home.clone(),
                header,
                encoding,
                model,
                live: live.clone(),
            });
            (agent, Vec::new())
        }
    };
    let service = workspace.references(Some(live), SessionReferenceConfig::default())?;
    let mount = SessionReferenceMount::new(Some(service), Arc::new(agent.clone()));
    let mut app = App::new(agent, mount, model_label.clone(), tx);
    app.model_choice = choice;
    app.set_keymap(keymap);
    app.keep_history_in(&options.home);
    app.home_store = Some(workspace.store().clone());
    if options.resume.is_none() {
        app.transcript.push_welcome(
            env!("CARGO_PKG_VERSION"),
            &model_label,
            options.cwd.as_deref(),
            &options.home.display().to_string(),
        );
    }
    app.show_history(&history);
    if let Some(reason) = app.agent.write_blocker() {
        app.transcript.push_notice(
            NoticeLevel::Error,
            format!("Read-only: {reason}. What you type stays in the composer until then"),
        );
    } else if let Some(age) = resumed_log
        .as_deref()
        .and_then(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
        .and_then(|modified| modified.elapsed().ok())
        .filter(|age| *age < crate::session::writer::SETTLE)
    {
        // dsh takes no lock: a log that just changed may be one it is writing right now.
        app.transcript.push_notice(
            NoticeLevel::Info,
            format!(
                "This log changed {:.1} s ago: another program may be writing this session. \
                 Nothing of it is cut while it may be, and what it appends is read in before \
                 each message is written",
                age.as_secs_f64()
            ),
        );
    } else if let Some(tail) = app.agent.log_tail() {
        app.transcript.push_notice(
            NoticeLevel::Info,
            format!(
                "The log ends in {} bytes that are not a complete batch ({}); they are left as \
                 they are unless the next message finds them unchanged and settled",
                tail.len - tail.at,
                tail.reason
            ),
        );
    }
    Ok((app, history))
}
