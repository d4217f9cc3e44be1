//! `dsh-refs exec`: one turn without the TUI (SPEC §7, headless).
//!
//! It builds the same agent, service and mount as the TUI, submits the prompt through the
//! mount's transaction (so mentions are parsed and referenced sessions prepared exactly as the
//! TUI does, and the log is the one the TUI would write), then streams the answer to stdout:
//! plain text, or with `--json` one JSON object per line (`session`, `reasoning`, `text`,
//! `usage`, `retry`, `error`, `done`). Invariant: the process exits 0 only when the turn's
//! `turn/end` reason is `completed`; every other ending prints a clear error and exits 1.
//! Ctrl-C cancels the turn (the partial answer is logged, marked interrupted).
//!
//! Proof: `tests/agent/exec_openai.rs` runs the binary against a loopback server.

use crate::agent::config::{self, ModelChoice, ModelFlags};
use crate::agent::{Agent, AgentConfig, AgentEvent, ModelProvider};
use crate::cli::ExecArgs;
use crate::reference::{SessionReferenceConfig, SessionReferences};
use crate::session::external::SourceSet;
use crate::session::format::TURN_END;
use crate::session::writer::now_ms;
use crate::session::{DiskStore, Encoding, EventData, HostSessions, LiveSessions, SessionHeader};
use crate::tui::mount::SessionReferenceMount;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs `exec`; returns the process exit code.
/// Mentions resolve over the home's sessions merged with `sources` (SPEC §9), as in every
/// other subcommand.
pub fn run(
    home: &Path,
    sources: &SourceSet,
    args: &ExecArgs,
    flags: &ModelFlags,
    encoding: Option<Encoding>,
) -> i32 {
    let prompt = if args.prompt == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut text) {
            eprintln!("dsh-refs: could not read the prompt from stdin: {e}");
            return 1;
        }
        text
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        eprintln!("dsh-refs: the prompt is empty");
        return 1;
    }
    let choice = match config::load(home, flags) {
        Ok(choice) => choice,
        Err(e) => {
            eprintln!("dsh-refs: {e}");
            return 1;
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("dsh-refs: could not start the async runtime: {e}");
            return 1;
        }
    };
    let code = runtime.block_on(exec(home, sources, args, &prompt, &choice, encoding));
    runtime.shutdown_timeout(Duration::from_millis(200));
    code
}

/// Where the answer goes.
struct Output {
    json: bool,
    /// The plain answer so far ended with a newline (or nothing was printed).
    at_line_start: bool,
}

impl Output {
    fn event(&mut self, value: Value) {
        if self.json {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{value}");
            let _ = out.flush();
        }
    }

    fn text(&mut self, text: &str) {
        if self.json {
            self.event(json!({"type": "text", "text": text}));
        } else if !text.is_empty() {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            self.at_line_start = text.ends_with('\n');
        }
    }

    fn error(&mut self, message: &str) {
        if self.json {
            self.event(json!({"type": "error", "message": message}));
        } else {
            self.end_line();
            eprintln!("dsh-refs: {message}");
        }
    }

    fn end_line(&mut self) {
        if !self.json && !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }
}

async fn exec(
    home: &Path,
    sources: &SourceSet,
    args: &ExecArgs,
    prompt: &str,
    choice: &ModelChoice,
    encoding: Option<Encoding>,
) -> i32 {
    let mut out = Output {
        json: args.json,
        at_line_start: true,
    };
    let (model, label) =
        match crate::agent::model_for(choice, Duration::from_millis(args.offline_delay_ms)) {
            Ok(model) => model,
            Err(e) => {
                out.error(&e);
                return 1;
            }
        };
    // Opening a log reads the disk: not on an async worker.
    let disk = DiskStore::new(home);
    let live = LiveSessions::default();
    let opened = {
        let (disk, live, home) = (disk.clone(), live.clone(), home.to_path_buf());
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
    out.event(json!({"type": "session", "sessionId": session_id, "model": label}));
    tracing::info!(session = %session_id, model = %label, "exec turn");
    let query = sources.serve(Arc::new(HostSessions::new(disk, live)));
    let service = match SessionReferences::new(query, SessionReferenceConfig::default()) {
        Ok(service) => service,
        Err(e) => {
            out.error(&e.to_string());
            return 1;
        }
    };
    let mount = SessionReferenceMount::new(Some(service), Arc::new(agent.clone()));
    let mut events = agent.subscribe();
    let cancel = CancellationToken::new();
    let submitted = tokio::select! {
        submitted = mount.submit(prompt, &cancel) => submitted,
        _ = tokio::signal::ctrl_c() => {
            cancel.cancel();
            out.error("interrupted before the prompt was sent");
            close(&agent).await;
            return 1;
        }
    };
    if let Err(e) = submitted {
        out.error(&e.to_string());
        close(&agent).await;
        return 1;
    }
    let mut last_error: Option<String> = None;
    let reason = loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = tokio::signal::ctrl_c() => {
                agent.cancel();
                continue;
            }
        };
        let Some(event) = event else {
            break json!({"kind": "error", "failure": {"message": "the agent stopped"}});
        };
        match event {
            AgentEvent::Delta(text) => out.text(&text),
            AgentEvent::Reasoning(text) => out.event(json!({"type": "reasoning", "text": text})),
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
                    eprintln!("dsh-refs: {message}");
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
            eprintln!("dsh-refs: session {session_id}");
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
