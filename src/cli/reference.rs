//! The machine-readable reference subcommands of `dsh-refs` (SPEC §6).
//!
//! Every command computes its whole output first and prints it in one write, so a failure never
//! leaves half a document on stdout. Contract errors are JSON on stdout with exit code 1; usage
//! problems (including unreadable input) go to stderr with exit code 2.
//!
//! What is printed may quote a home someone else wrote (labels, cwds, transcript text, a
//! corruption report naming a directory or a record type), so it reaches the terminal inert
//! (SPEC §5.2): the documents of `candidates` and `prepare` and every error document pass
//! through [`escape::json_for_terminal`] (same value; DEL, C1 and bidi controls spelled
//! `\uXXXX`), stderr lines through [`escape::diagnostic`]. `uri` and `mention` print only a
//! function of the caller's own argument, in its exact wire form.
//!
//! Proof: `tests/cli/reference.rs` (documents, exit codes, stdin), `tests/cli/diagnostics.rs`
//! and `tests/cli/reliability_hostile_home.rs` (hostile homes reach the terminal inert).

use super::{Command, MentionCommand, UriCommand};
use crate::escape;
use crate::host::Workspace;
use crate::reference::config::SessionReferenceConfig;
use crate::reference::error::SessionReferenceError;
use crate::reference::json::{string_literal, stringify};
use crate::reference::mention::{format_session_reference_mention, parse_session_reference_text};
use crate::reference::service::{AgentIdentity, ReferenceInput, SessionReferences};
use crate::reference::uri::{decode_session_reference_uri, encode_session_reference_uri};
use crate::session::ContentBlock;
use serde_json::{Map, Value};
use std::io::{Read, Write};
use tokio_util::sync::CancellationToken;

enum Failure {
    Contract(SessionReferenceError),
    Usage(String),
}

impl From<SessionReferenceError> for Failure {
    fn from(err: SessionReferenceError) -> Self {
        Failure::Contract(err)
    }
}

/// Runs `uri`, `mention`, `candidates` or `prepare`; prints the result and returns the exit code.
/// `candidates` and `prepare` work on `workspace` (the dsh store merged with its sources, SPEC
/// §9); `uri` and `mention` read no home and need none.
pub fn run(command: &Command, workspace: Option<&Workspace>) -> i32 {
    let (stdout, stderr, code) = match execute(command, workspace) {
        Ok(output) if reads_the_home(command) => {
            (escape::json_for_terminal(output), String::new(), 0)
        }
        Ok(output) => (output, String::new(), 0),
        Err(Failure::Contract(err)) => (
            escape::json_for_terminal(error_json(&err)),
            String::new(),
            1,
        ),
        Err(Failure::Usage(message)) => (
            String::new(),
            format!("dsh-refs: {}", escape::diagnostic(&message)),
            2,
        ),
    };
    if !stdout.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(stdout.as_bytes());
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }
    if !stderr.is_empty() {
        eprintln!("{stderr}");
    }
    code
}

/// Whether `command`'s output can quote the home (labels, cwds, transcript text). The others
/// print a function of the caller's own argument in its exact wire form (`uri decode` prints
/// the id exactly as `JSON.stringify` spells it), so they are left as they are.
fn reads_the_home(command: &Command) -> bool {
    matches!(
        command,
        Command::Candidates { .. } | Command::Prepare { .. }
    )
}

/// `{"error":{"code":…,"message":…}}`.
pub fn error_json(err: &SessionReferenceError) -> String {
    let mut inner = Map::new();
    inner.insert("code".into(), err.code().into());
    inner.insert("message".into(), err.message().into());
    let mut outer = Map::new();
    outer.insert("error".into(), Value::Object(inner));
    stringify(&outer)
}

fn execute(command: &Command, workspace: Option<&Workspace>) -> Result<String, Failure> {
    match command {
        Command::Uri(UriCommand::Encode { id }) => Ok(encode_session_reference_uri(id)),
        Command::Uri(UriCommand::Decode { uri }) => {
            Ok(string_literal(&decode_session_reference_uri(uri)?))
        }
        Command::Mention(MentionCommand::Format { id, label }) => {
            Ok(format_session_reference_mention(id, label.as_deref()))
        }
        Command::Mention(MentionCommand::Parse { text }) => {
            let text = text_or_stdin(text.as_deref())?;
            Ok(stringify(&parse_session_reference_text(&text)?))
        }
        Command::Candidates {
            agent,
            cwd,
            query,
            limit,
        } => {
            let service = service(workspace, SessionReferenceConfig::default())?;
            block_on(async {
                let agent = agent_identity(&service, agent, cwd.as_deref()).await;
                let candidates = service
                    .list_candidates(&agent, query, *limit, &CancellationToken::new())
                    .await?;
                Ok(stringify(&candidates))
            })
        }
        Command::Prepare {
            agent,
            cwd,
            max_references,
            max_reference_bytes,
            text,
        } => {
            let defaults = SessionReferenceConfig::default();
            let config = SessionReferenceConfig {
                max_references: max_references.unwrap_or(defaults.max_references),
                max_reference_bytes: max_reference_bytes.unwrap_or(defaults.max_reference_bytes),
                ..defaults
            };
            let service = service(workspace, config)?;
            let text = text_or_stdin(text.as_deref())?;
            let parsed = parse_session_reference_text(&text)?;
            block_on(async {
                // `prepare` uses the agent's identity only to refuse a reference to itself: no
                // listing of every source to find its cwd (a heavy home has thousands).
                let agent = AgentIdentity::new(agent, cwd.clone());
                let references = parsed
                    .references
                    .into_iter()
                    .map(ReferenceInput::from)
                    .collect();
                let content = vec![ContentBlock::text(parsed.text)];
                let prepared = service
                    .prepare(&agent, content, references, &CancellationToken::new())
                    .await?;
                let mut out = Map::new();
                out.insert("content".into(), to_value(&prepared.content));
                if let Some(context) = prepared.additional_context {
                    let mut context_out = Map::new();
                    context_out.insert("source".into(), to_value(&context.source));
                    context_out.insert("content".into(), to_value(&context.content));
                    out.insert("additionalContext".into(), Value::Object(context_out));
                }
                Ok(stringify(&out))
            })
        }
        _ => Err(Failure::Usage("not a reference subcommand".into())),
    }
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("model types serialize to JSON")
}

fn service(
    workspace: Option<&Workspace>,
    config: SessionReferenceConfig,
) -> Result<SessionReferences, Failure> {
    let workspace =
        workspace.ok_or_else(|| Failure::Usage("this command needs a dsh home".into()))?;
    Ok(workspace.references(None, config)?)
}

/// `--cwd`, else the header cwd of the agent's session when it is stored, else none.
async fn agent_identity(service: &SessionReferences, id: &str, cwd: Option<&str>) -> AgentIdentity {
    let cwd = match cwd {
        Some(cwd) => Some(cwd.to_string()),
        // A listing failure here is reported by the command itself when it matters
        // (`candidates` lists again); `prepare` does not depend on the agent's cwd.
        None => match service.query().list_sessions().await {
            Ok(sessions) => sessions
                .iter()
                .find(|session| session.id() == id)
                .and_then(|session| session.cwd().map(str::to_string)),
            Err(_) => None,
        },
    };
    AgentIdentity::new(id, cwd)
}

fn text_or_stdin(text: Option<&str>) -> Result<String, Failure> {
    if let Some(text) = text {
        return Ok(text.to_string());
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|err| Failure::Usage(format!("could not read stdin: {err}")))?;
    String::from_utf8(bytes).map_err(|_| Failure::Usage("stdin is not valid UTF-8".into()))
}

fn block_on<F>(future: F) -> Result<String, Failure>
where
    F: std::future::Future<Output = Result<String, Failure>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| Failure::Usage(format!("could not start the async runtime: {err}")))?;
    runtime.block_on(future)
}
