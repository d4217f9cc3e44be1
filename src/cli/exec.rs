//! `dsh-refs exec`: one turn without the TUI (SPEC §7, headless).
//!
//! It builds the same agent, service and mount as the TUI (the host room, `crate::host`),
//! submits the prompt through the mount's transaction (so the chosen files are read, mentions
//! parsed and referenced sessions prepared exactly as the TUI does, and the log is the one the
//! TUI would write), then streams the answer to stdout:
//! plain text, or with `--json` one JSON object per line (`session` with the provider and the
//! model's name, `references` for what a context attached, `reasoning` and `text` deltas
//! gathered per [`COALESCE`], `usage`, `retry`, `error`, `done`). `@ID`, `@PREFIX` and `--ref`
//! become mentions first (`super::exec_refs`).
//!
//! Invariants: the process exits 0 only when the turn's `turn/end` reason is `completed`; every
//! other ending prints a clear error and exits 1. Ctrl-C cancels the turn (the partial answer is
//! logged, marked interrupted), through one signal stream that never misses one. Nothing raw
//! reaches a terminal (SPEC §5.2): on a terminal the answer is escaped as the TUI's transcript
//! shows it (to a pipe or a file it is the exact text), `--json` lines spell C1 and bidi
//! controls as `\uXXXX` (same value), and every stderr line goes through
//! [`escape::diagnostic`].
//!
//! Proof: `tests/agent/exec_openai.rs`, `exec_hostile.rs` and `exec_refs.rs` run the binary
//! against loopback servers (and in tmux, for the terminal).

use crate::agent::config::{self, ModelChoice, ModelFlags};
use crate::agent::{Agent, AgentConfig, AgentEvent, ModelProvider};
use crate::cli::ExecArgs;
use crate::escape;
use crate::host::Workspace;
use crate::host::{ChosenFile, SessionReferenceMount, SubmitError};
use crate::reference::SessionReferenceConfig;
use crate::session::clock::now_ms;
use crate::session::format::TURN_END;
use crate::session::{DiskStore, Encoding, EventData, LiveSessions, SessionHeader};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs `exec`; returns the process exit code.
/// Mentions resolve over the home's sessions merged with the workspace's sources (SPEC §9), as in
/// every other subcommand.
pub fn run(
    workspace: &Workspace,
    args: &ExecArgs,
    flags: &ModelFlags,
    encoding: Option<Encoding>,
) -> i32 {
    let prompt = if args.prompt == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut text) {
            warn(&format!("could not read the prompt from stdin: {e}"));
            return 1;
        }
        text
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        warn("the prompt is empty");
        return 1;
    }
    let choice = match config::load(workspace.home(), flags) {
        Ok(choice) => choice,
        Err(e) => {
            warn(&e.to_string());
            return 1;
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            warn(&format!("could not start the async runtime: {e}"));
            return 1;
        }
    };
    let code = runtime.block_on(exec(workspace, args, &prompt, &choice, encoding));
    runtime.shutdown_timeout(Duration::from_millis(200));
    code
}

/// A diagnostic on stderr, made inert (SPEC §5.2): every value in it may come from a config
/// file, a flag, a log or a server.
fn warn(message: &str) {
    eprintln!("dsh-refs: {}", escape::diagnostic(message));
}

/// Lines already made inert, on stderr: the first after `dsh-refs: `.
fn warn_lines(lines: &[String]) {
    let mut err = std::io::stderr().lock();
    for (i, line) in lines.iter().enumerate() {
        let _ = if i == 0 {
            writeln!(err, "dsh-refs: {line}")
        } else {
            writeln!(err, "{line}")
        };
    }
}

/// How long `--json` gathers text (and reasoning) deltas into one event: about a frame.
pub const COALESCE: Duration = Duration::from_millis(33);

/// Where the answer goes.
struct Output {
    json: bool,
    /// The plain answer so far ended with a newline (or nothing was printed).
    at_line_start: bool,
    /// Stdout is a terminal: the plain answer is made inert as the TUI shows it; to a pipe or a
    /// file it goes byte for byte.
    terminal: Option<escape::MultiLineStream>,
    /// `--json`: deltas not yet printed, `(type, text)`, and when they must be.
    pending: Option<(&'static str, String)>,
    flush_at: Option<tokio::time::Instant>,
}

impl Output {
    fn event(&mut self, value: Value) {
        if self.json {
            self.flush();
            self.line(value);
        }
    }

    /// One JSON line; C1 and bidi controls spelled `\uXXXX` (same value, inert on a terminal).
    fn line(&mut self, value: Value) {
        let text = escape::json_for_terminal(value.to_string());
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// A text or reasoning delta: printed at once, or with `--json` gathered for about a frame.
    fn delta(&mut self, kind: &'static str, text: &str) {
        if text.is_empty() {
            return;
        }
        if !self.json {
            if kind == "text" {
                self.plain(text);
            }
            return;
        }
        match &mut self.pending {
            Some((pending, buffered)) if *pending == kind => buffered.push_str(text),
            _ => {
                self.flush();
                self.pending = Some((kind, text.to_string()));
                self.flush_at = Some(tokio::time::Instant::now() + COALESCE);
            }
        }
    }

    /// Prints the gathered deltas.
    fn flush(&mut self) {
        self.flush_at = None;
        if let Some((kind, text)) = self.pending.take() {
            self.line(json!({"type": kind, "text": text}));
        }
    }

    fn plain(&mut self, text: &str) {
        let shown = match &mut self.terminal {
            Some(stream) => stream.push(text),
            None => text.to_string(),
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(shown.as_bytes());
        let _ = out.flush();
        if !text.is_empty() {
            self.at_line_start = text.ends_with('\n');
        }
    }

    fn error(&mut self, message: &str) {
        if self.json {
            self.event(json!({"type": "error", "message": message}));
        } else {
            self.end_line();
            warn(message);
        }
    }

    fn end_line(&mut self) {
        if self.json {
            self.flush();
            return;
        }
        if let Some(rest) = self.terminal.as_mut().map(escape::MultiLineStream::finish) {
            if !rest.is_empty() {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(rest.as_bytes());
            }
        }
        if !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }
}

/// The `references` event of `--json`: what a logged context message attached, per source.
fn references_event(message: &crate::session::Message) -> Option<Value> {
    let references = message.source.recorded_references()?;
    let text = message.text();
    // Each source's share of the context: its object in the snapshot JSON, as sent.
    let sources = crate::reference::render::read_context(&text).unwrap_or_default();
    let bytes_of = |id: &str| {
        sources
            .iter()
            .find(|s| s.session_id == id)
            .map(|s| s.sent_bytes)
    };
    let list: Vec<Value> = references
        .iter()
        .map(|r| {
            let id = r.session_id.as_deref().unwrap_or_default();
            json!({
                "sessionId": id,
                "label": r.label,
                "retainedMessages": r.retained_messages,
                "originalMessages": r.original_messages,
                "bytes": bytes_of(id),
                "truncated": r.truncated,
            })
        })
        .collect();
    Some(json!({"type": "references", "contextBytes": text.len(), "references": list}))
}

/// Ctrl-C, as a stream that never misses one: one listener for the whole turn (a listener made
/// anew per loop turn drops a signal that lands between two of them).
struct Interrupts {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Interrupts {
    fn new() -> Interrupts {
        Interrupts {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        }
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = &mut self.signal {
            if signal.recv().await.is_some() {
                return;
            }
            return std::future::pending().await;
        }
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

async fn exec(
    workspace: &Workspace,
    args: &ExecArgs,
    prompt: &str,
    choice: &ModelChoice,
    encoding: Option<Encoding>,
) -> i32 {
    use std::io::IsTerminal;
    let mut out = Output {
        json: args.json,
        at_line_start: true,
        terminal: (!args.json && std::io::stdout().is_terminal())
            .then(escape::MultiLineStream::default),
        pending: None,
        flush_at: None,
    };
    let mut interrupts = Interrupts::new();
    let (model, _label) =
        match crate::agent::model_for(choice, Duration::from_millis(args.offline_delay_ms)) {
            Ok(model) => model,
            Err(e) => {
                out.error(&e.to_string());
                return 1;
            }
        };
    // Opening a log reads the disk: not on an async worker.
    let disk = workspace.store().clone();
    let live = LiveSessions::default();
    let opened = {
        let (disk, live, home) = (disk, live.clone(), workspace.home().to_path_buf());
        let resume = args.resume.clone();
        tokio::task::spawn_blocking(move || open_agent(&disk, live, &home, resume, model, encoding))
            .await
    };
    let agent = match opened {
        Ok(Ok(agent)) => agent,
        Ok(Err(message)) => {
            out.error(&message);
            return 1;
        }
        Err(e) => {
            out.error(&format!("could not open the session: {e}"));
            return 1;
        }
    };
    let session_id = agent.info().session_id.clone();
    let (provider_name, model_name) = agent_identity(choice);
    out.event(json!({"type": "session", "sessionId": session_id, "provider": provider_name, "model": model_name}));
    tracing::info!(session = %session_id, provider = %provider_name, model = %model_name, "exec turn");
    let service = match workspace.references(Some(live), SessionReferenceConfig::default()) {
        Ok(service) => service,
        Err(e) => {
            out.error(&e.to_string());
            return 1;
        }
    };
    let prompt =
        match super::exec_refs::rewrite(prompt, &args.refs, service.query(), workspace).await {
            Ok(prompt) => prompt,
            Err(super::exec_refs::RefError(lines)) => {
                if out.json {
                    out.event(json!({"type": "error", "message": lines.join("\n")}));
                } else {
                    warn_lines(&lines);
                }
                close(&agent).await;
                return 1;
            }
        };
    let mount = SessionReferenceMount::new(Some(service), Arc::new(agent.clone()));
    let (cwd, files) = match attachments(args, &prompt).await {
        Ok(choice) => choice,
        Err(message) => {
            out.error(&message);
            close(&agent).await;
            return 1;
        }
    };
    let mut events = agent.subscribe();
    let cancel = CancellationToken::new();
    let submitted = tokio::select! {
        submitted = mount.submit_files(&prompt, cwd, files, &cancel) => submitted,
        _ = interrupts.next() => {
            cancel.cancel();
            out.error("interrupted before the prompt was sent");
            close(&agent).await;
            return 1;
        }
    };
    if let Err(e) = submitted {
        let mut message = match &e {
            // A file that could not be read as chosen: the reason alone, as `exec` words it.
            SubmitError::Attachment(why) => why.clone(),
            e => e.to_string(),
        };
        if matches!(e, SubmitError::InvalidReference(_)) {
            message.push_str(
                "; write a mention with `dsh-refs mention format ID` (or `--label TITLE`), or \
                 name the session as @ID, @PREFIX or --ref ID|PREFIX|WORD",
            );
        }
        out.error(&message);
        close(&agent).await;
        return 1;
    }
    let mut last_error: Option<String> = None;
    let reason = loop {
        let flush_at = out.flush_at;
        let event = tokio::select! {
            biased;
            _ = interrupts.next() => {
                agent.cancel();
                continue;
            }
            _ = tokio::time::sleep_until(flush_at.unwrap_or_else(tokio::time::Instant::now)), if flush_at.is_some() => {
                out.flush();
                continue;
            }
            event = events.recv() => event,
        };
        let Some(event) = event else {
            break json!({"kind": "error", "failure": {"message": "the agent stopped"}});
        };
        match event {
            AgentEvent::Delta(text) => out.delta("text", &text),
            AgentEvent::Reasoning(text) => out.delta("reasoning", &text),
            AgentEvent::Usage(usage) => {
                out.event(json!({"type": "usage", "usage": usage.to_json()}))
            }
            AgentEvent::Retrying {
                attempt,
                max,
                delay,
                reason,
            } => {
                let message = format!(
                    "retry {attempt}/{max} in {:.1}s ({reason})",
                    delay.as_secs_f64()
                );
                if out.json {
                    out.event(json!({"type": "retry", "attempt": attempt, "max": max, "delayMs": delay.as_millis() as u64, "reason": reason}));
                } else {
                    warn(&message);
                }
            }
            AgentEvent::Error(error) => {
                let message = error.to_string();
                out.error(&message);
                last_error = Some(message);
            }
            AgentEvent::Unsent { reason, .. } => {
                break json!({"kind": "unsent", "failure": {"message": format!("the prompt was not sent: {reason}")}});
            }
            AgentEvent::PromptBlocked { reason, .. } => {
                break json!({"kind": "blocked", "failure": {"message": format!("prompt blocked: {reason}")}});
            }
            AgentEvent::Status(_) => {}
            AgentEvent::Logged(logged) => {
                if out.json {
                    for event in &logged {
                        if let Some(references) = event
                            .message(&session_id)
                            .ok()
                            .flatten()
                            .as_ref()
                            .and_then(references_event)
                        {
                            out.event(references);
                        }
                    }
                }
                let end = logged.iter().find(|e| e.kind == TURN_END).and_then(|e| {
                    match e.decode(&session_id) {
                        Ok(EventData::TurnEnd { reason, .. }) => Some(reason),
                        _ => None,
                    }
                });
                if let Some(reason) = end {
                    break reason;
                }
            }
        }
    };
    close(&agent).await;
    out.end_line();
    let kind = reason["kind"].as_str().unwrap_or("unknown").to_string();
    out.event(json!({"type": "done", "sessionId": session_id, "reason": reason}));
    if kind == "completed" {
        if !args.json {
            warn(&format!("session {session_id}"));
        }
        return 0;
    }
    let message = reason
        .pointer("/failure/message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| (kind == "aborted").then(|| "the turn was cancelled".to_string()))
        .unwrap_or_else(|| format!("the turn ended: {kind}"));
    if last_error.as_deref() != Some(message.as_str()) {
        out.error(&message);
    }
    1
}

/// The files this turn sends, as chosen (the mount's transaction reads them): `--attach`
/// paths, and the prompt argument's `@path` tokens under the working directory (a prompt read
/// from stdin was not typed here: its tokens attach nothing). A token naming a file outside it
/// is noted on stderr, not sent. Sizes the paths off the async workers.
async fn attachments(
    args: &ExecArgs,
    prompt: &str,
) -> Result<(Option<std::path::PathBuf>, Vec<ChosenFile>), String> {
    let typed = (args.prompt != "-").then(|| prompt.to_string());
    if args.attach.is_empty() && typed.as_deref().is_none_or(|p| !p.contains('@')) {
        return Ok((None, Vec::new()));
    }
    let explicit = args.attach.clone();
    tokio::task::spawn_blocking(move || {
        let cwd = std::env::current_dir()
            .map_err(|e| format!("cannot read the working directory: {e}"))?;
        let (chosen, notes) = crate::host::attach::exec_choice(&cwd, typed.as_deref(), &explicit)?;
        for note in notes {
            eprintln!("dsh-refs: {note}");
        }
        Ok((Some(cwd), chosen))
    })
    .await
    .map_err(|e| format!("could not read the attached files: {e}"))?
}

/// `(provider, model)` for the `session` event: the model's own name, no UI hint.
fn agent_identity(choice: &ModelChoice) -> (String, String) {
    match choice {
        ModelChoice::Offline => ("offline".into(), "describe".into()),
        ModelChoice::Remote(settings) => (settings.provider.clone(), settings.model.clone()),
    }
}

/// The agent of a resumed or new session (blocking: reads the disk).
fn open_agent(
    disk: &DiskStore,
    live: LiveSessions,
    home: &Path,
    resume: Option<String>,
    model: Arc<dyn ModelProvider>,
    encoding: Option<Encoding>,
) -> Result<Agent, String> {
    match resume {
        Some(id) => disk
            .log_path(&id)
            .and_then(|path| Agent::resume(&path, model, live))
            .map_err(|e| format!("cannot resume {id}: {e}")),
        None => {
            let cwd = std::env::current_dir()
                .ok()
                .map(|d| d.to_string_lossy().into_owned());
            let header =
                SessionHeader::new(format!("session-{}", uuid::Uuid::new_v4()), now_ms(), cwd);
            Ok(Agent::start(AgentConfig {
                home: home.to_path_buf(),
                header,
                encoding: encoding.unwrap_or_else(|| disk.preferred_encoding()),
                model,
                live,
            }))
        }
    }
}

/// Shuts the agent down and waits (bounded) until what it handed to the log is written.
async fn close(agent: &Agent) {
    agent.shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(5), agent.closed()).await;
}
