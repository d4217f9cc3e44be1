//! Sessions of other agents (Claude Code, Codex) as read-only sources (SPEC §9).
//!
//! Purpose: `@` can reference a Claude Code or Codex session exactly like a dsh one. Each agent's
//! home is exposed as a [`SessionQuery`] ([`ExternalSessions`]) whose sessions carry namespaced
//! ids (`claude:<sessionId>`, `codex:<thread id>`) and whose surface is synthesized from the
//! agent's records: one `user/message` per typed prompt (source `user`), one `assistant/message`
//! per assistant reply (source `model`), and a `user/message` from the `compact` plugin for the
//! latest compaction summary. The projection above (SPEC §3.5) therefore needs no change.
//! [`WithExternal`] merges those sources with the host's own sessions.
//!
//! Invariant: nothing under an agent's home is ever written, created, locked or renamed: every
//! file is opened read-only through `crate::session::files::open_read` (regular files only,
//! never blocking on a FIFO or device), Codex's state database as `codex_state` describes (read
//! only with the `discovery` feature, which brings SQLite), and no directory is created. Every line is read through a bound (`lines::MAX_LINE_BYTES`, 64 MiB; a
//! longer one is skipped with a warning). A torn last line (no trailing newline, or not JSON) is
//! never consumed, so it is read again once complete; a file of the wrong shape is left out of
//! the listing with a warning, never failing the listing.
//!
//! Proof: `tests/session/external_sessions.rs` lists, projects and prepares every fixture and compares
//! whole trees byte for byte before and after every operation; `tests/session/real_agents.rs`
//! does the same over sessions written by the real CLIs (and guards against format drift);
//! `tests/reliability_external_lines.rs` measures huge lines and FIFOs; the parsers are
//! unit-tested here.

pub mod agent;
pub mod claude;
pub mod codex;
mod codex_index;
pub mod codex_record;
mod codex_side;
#[cfg(feature = "discovery")]
pub(crate) mod codex_state;
#[cfg(feature = "discovery")]
mod codex_state_keep;
mod conversation_cache;
pub mod copilot;
mod copilot_workspace;
mod dirs;
pub mod gemini;
mod gemini_projects;
// opencode keeps its sessions in SQLite: read only with the `discovery` feature (which brings
// rusqlite); without it the source is absent from the registry (the `cli` and `mcp` features
// always bring it).
mod lines;
mod mapped;
pub use mapped::bytes_mapped_on_this_thread;
#[cfg(feature = "discovery")]
pub mod opencode;
mod parts;
mod persist;
pub mod qwen;
pub mod registry;
mod scan;
mod source_query;
#[cfg(feature = "discovery")]
mod sqlite_snapshot;
mod time;
mod with_external;

use super::error::{Result, SessionError};
use super::format::{ContentBlock, Event, EventData, Message, MessageSource, SessionHeader};
use super::query::{PlainConversation, PlainMessage, PlainRole, SessionQuery, SurfaceSnapshot};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use scan::ExternalSessions;
pub use time::parse_time;
pub use with_external::WithExternal;

/// Which other agent wrote a session (named apart from [`crate::agent::Agent`], the runtime
/// this crate runs): a handle on its entry in the registry ([`registry::AGENTS`]), compared and
/// serialized by name.
#[derive(Clone, Copy)]
pub struct ExternalAgent(&'static dyn agent::AgentFormat);

#[allow(non_upper_case_globals)]
impl ExternalAgent {
    /// Claude Code (`~/.claude/projects/**/<uuid>.jsonl`; ids `claude:<uuid>`).
    pub const Claude: ExternalAgent = ExternalAgent(&claude::ClaudeCode);
    /// Codex (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`; ids `codex:<uuid>`).
    pub const Codex: ExternalAgent = ExternalAgent(&codex::Codex);
    /// Qwen Code (`~/.qwen/projects/<dir>/chats/<id>.jsonl`; ids `qwen:<id>`).
    pub const Qwen: ExternalAgent = ExternalAgent(&qwen::QwenCode);
    /// Gemini CLI (`~/.gemini/tmp/<project>/chats/*.jsonl`; ids `gemini:<sessionId>`).
    pub const Gemini: ExternalAgent = ExternalAgent(&gemini::GeminiCli);
    /// opencode (`$XDG_DATA_HOME/opencode/opencode.db`; ids `opencode:<ses_…>`).
    #[cfg(feature = "discovery")]
    pub const Opencode: ExternalAgent = ExternalAgent(&opencode::Opencode);
    /// GitHub Copilot CLI (`~/.copilot/session-state/<id>/events.jsonl`; ids `copilot:<id>`).
    pub const Copilot: ExternalAgent = ExternalAgent(&copilot::CopilotCli);
}

impl ExternalAgent {
    /// The id namespace and badge: `claude`, `codex`, …
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// A human name for cards: where the session came from.
    pub fn product(self) -> &'static str {
        self.0.product()
    }

    /// The agent's format.
    pub fn format(self) -> &'static dyn agent::AgentFormat {
        self.0
    }

    /// Every registered agent, in registry order.
    pub fn all() -> impl Iterator<Item = ExternalAgent> {
        registry::AGENTS.iter().map(|a| ExternalAgent(*a))
    }

    /// The agent whose namespace `id` is in, if any.
    pub fn of_id(id: &str) -> Option<ExternalAgent> {
        let (prefix, _) = id.split_once(':')?;
        ExternalAgent::parse(prefix)
    }

    /// The agent named `name` as `--sources` and the header's `source` key spell it (`claude`,
    /// `codex`, …); `None` for anything else (`dsh` included).
    pub fn parse(name: &str) -> Option<ExternalAgent> {
        registry::find(name).map(ExternalAgent)
    }
}

impl PartialEq for ExternalAgent {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ExternalAgent {}

impl std::hash::Hash for ExternalAgent {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl std::fmt::Debug for ExternalAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for ExternalAgent {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for ExternalAgent {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        ExternalAgent::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown agent {name:?} (expected one of {})",
                registry::names()
            ))
        })
    }
}

/// The header key naming a session's source (absent for dsh sessions).
pub const SOURCE_KEY: &str = "source";

/// The agent a header says its session came from (`None` for dsh sessions).
pub fn source_of(header: &SessionHeader) -> Option<ExternalAgent> {
    header
        .extra
        .get(SOURCE_KEY)
        .and_then(Value::as_str)
        .and_then(ExternalAgent::parse)
}

/// What a head scan learns about one session file: enough to list it.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// The agent's own id (without the namespace).
    pub id: String,
    /// When the session started, in epoch milliseconds (Claude: the earliest record time read
    /// for the head; Codex: the `session_meta` timestamp).
    pub created_at: i64,
    /// The working directory the session ran in; `None` when the file never names one.
    pub cwd: Option<String>,
}

/// What a head scan of a JSON-lines transcript found: how many lines it read, how many were
/// JSON records, and the session's id, start and cwd as far as it got.
#[derive(Debug, Default)]
pub struct HeadFields {
    /// Complete lines read.
    pub lines: u64,
    /// Lines that were JSON records of the format.
    pub objects: u64,
    /// The agent's own session id.
    pub id: Option<String>,
    /// When the session started (epoch ms).
    pub created: Option<i64>,
    /// Its working directory.
    pub cwd: Option<String>,
}

impl HeadFields {
    /// The head, `None` while the id or the start is not known yet; an error naming the file
    /// when no line was a record (`what`: "a Claude Code transcript") or the id cannot be one.
    pub fn finish(self, path: &Path, what: &str) -> Result<Option<Head>> {
        let corrupt = |reason: String| SessionError::Corrupt {
            path: path.to_path_buf(),
            line: 1,
            reason,
        };
        if self.lines > 0 && self.objects == 0 {
            return Err(corrupt(format!("not {what} (no line is a JSON record)")));
        }
        let (Some(id), Some(created)) = (self.id, self.created) else {
            return Ok(None);
        };
        if id.is_empty() || id.contains(['/', '\\']) {
            return Err(corrupt(format!("sessionId {id:?} is not a session id")));
        }
        Ok(Some(Head {
            id,
            created_at: created,
            cwd: self.cwd,
        }))
    }
}

/// One projected message of an external session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Item {
    /// Who said it.
    pub kind: ItemKind,
    /// The text, as the projection keeps it (text parts joined; tool calls and thinking left out).
    pub text: String,
    /// Epoch milliseconds of the record (0 when it had none).
    pub time: i64,
}

/// The role of a projected external message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ItemKind {
    /// A prompt the person typed.
    User,
    /// The assistant's text.
    Assistant,
    /// A compaction summary standing in for the history it replaced.
    Summary,
}

/// A session's projected conversation, as parsed from its file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversation {
    /// The projected messages, oldest first (Claude: along the main chain).
    pub items: Vec<Item>,
    /// 0-based index of the last complete line read (`None` for an empty file).
    pub last_line: Option<u64>,
    /// The newest record time seen (epoch ms), for "last activity".
    pub last_activity: Option<i64>,
}

/// The header a listing shows for an external session.
pub fn header(agent: ExternalAgent, head: &Head) -> SessionHeader {
    let mut header = SessionHeader::new(
        format!("{}:{}", agent.name(), head.id),
        head.created_at,
        head.cwd.clone(),
    );
    header
        .extra
        .insert(SOURCE_KEY.into(), Value::String(agent.name().into()));
    header
}

/// The synthesized surface of a projected conversation.
pub fn surface(header: SessionHeader, conversation: &Conversation) -> SurfaceSnapshot {
    let mut events = Vec::with_capacity(conversation.items.len());
    for (seq, item) in conversation.items.iter().enumerate() {
        let seq = seq as u64;
        let block = vec![ContentBlock::text(item.text.clone())];
        let id = format!("{}:{seq}", header.id);
        let data = match item.kind {
            ItemKind::User => {
                EventData::UserMessage(Message::new("user", block, MessageSource::user(), id))
            }
            ItemKind::Summary => EventData::UserMessage(Message::new(
                "user",
                block,
                MessageSource::plugin(super::format::COMPACT_PLUGIN),
                id,
            )),
            ItemKind::Assistant => EventData::AssistantMessage {
                turn: Value::Null,
                step: Value::Null,
                message: Message::new("assistant", block, external_model(&header), id),
                extra: Map::new(),
            },
        };
        events.push(Event::new(seq, item.time, &data));
    }
    SurfaceSnapshot {
        session: header,
        captured_through_seq: conversation.last_line,
        events,
    }
}

/// The plain messages of a projected conversation: what projecting its [`surface`] gives
/// (a prompt, a reply, a compaction summary as a checkpoint), without building it.
pub fn plain(header: SessionHeader, conversation: Conversation) -> PlainConversation {
    let messages = conversation
        .items
        .into_iter()
        .map(|item| PlainMessage {
            role: match item.kind {
                ItemKind::User => PlainRole::Prompt,
                ItemKind::Assistant => PlainRole::Reply,
                ItemKind::Summary => PlainRole::Checkpoint,
            },
            text: item.text,
        })
        .collect();
    PlainConversation {
        session: header,
        captured_through_seq: conversation.last_line,
        messages,
    }
}

fn external_model(header: &SessionHeader) -> MessageSource {
    let agent = source_of(header).map_or("external", ExternalAgent::name);
    MessageSource::model(agent, "unknown")
}

/// Cuts a title candidate to its first non-empty line, at most 120 characters.
pub fn title_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(120).collect())
}

/// Where each agent keeps its sessions, resolved from a flag, else the agent's environment
/// variable, else its default under the user's home directory.
pub fn resolve_agent_home(agent: ExternalAgent, flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = flag {
        return Some(dir.to_path_buf());
    }
    let format = agent.format();
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(|v| v.to_string_lossy().into_owned())
    };
    if let Some(home) = format.home_from_environment(&var) {
        return Some(home);
    }
    let home = std::env::var_os("HOME").filter(|v| !v.is_empty())?;
    Some(format.default_home(Path::new(&home)))
}

/// Which sources `--sources` selected; `None` means every one that exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceChoice {
    /// `dsh`: list this host's own sessions.
    pub dsh: bool,
    /// The other agents named, in registry order.
    pub agents: Vec<ExternalAgent>,
}

/// Why a `--sources` value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceChoiceError {
    /// Two commas with nothing between them (or an empty value).
    #[error("--sources {text:?}: empty source name")]
    Empty {
        /// The whole value.
        text: String,
    },
    /// A name other than dsh and the registered agents.
    #[error(
        "--sources {text:?}: unknown source {name:?} (expected dsh, {})",
        registry::names()
    )]
    Unknown {
        /// The whole value.
        text: String,
        /// The name not known.
        name: String,
    },
}

impl SourceChoice {
    /// Parses `dsh,claude,codex,…` (any subset, any order, no duplicates needed).
    pub fn parse(text: &str) -> std::result::Result<SourceChoice, SourceChoiceError> {
        let mut choice = SourceChoice {
            dsh: false,
            agents: Vec::new(),
        };
        for name in text.split(',').map(str::trim) {
            if name == "dsh" {
                choice.dsh = true;
            } else if let Some(agent) = ExternalAgent::parse(name) {
                if !choice.agents.contains(&agent) {
                    choice.agents.push(agent);
                }
            } else if name.is_empty() {
                return Err(SourceChoiceError::Empty {
                    text: text.to_string(),
                });
            } else {
                return Err(SourceChoiceError::Unknown {
                    text: text.to_string(),
                    name: name.to_string(),
                });
            }
        }
        choice
            .agents
            .sort_by_key(|a| ExternalAgent::all().position(|b| b == *a));
        Ok(choice)
    }

    /// Whether `agent` was named.
    pub fn includes(&self, agent: ExternalAgent) -> bool {
        self.agents.contains(&agent)
    }
}

/// The external sources to serve: those chosen (or, by default, those whose home exists), each
/// at the home its flag in `homes` names (by agent name), else its environment's, else its
/// default.
pub fn external_sources(
    choice: Option<&SourceChoice>,
    homes: &[(&str, Option<&Path>)],
) -> Vec<ExternalSessions> {
    let mut sources = Vec::new();
    for agent in ExternalAgent::all() {
        let chosen = choice.map(|c| c.includes(agent));
        if chosen == Some(false) {
            continue;
        }
        let flag = homes
            .iter()
            .find(|(name, _)| *name == agent.name())
            .and_then(|(_, dir)| *dir);
        let Some(home) = resolve_agent_home(agent, flag) else {
            continue;
        };
        let exists = agent.format().present(&home);
        if exists || chosen == Some(true) {
            sources.push(ExternalSessions::new(agent, home));
        }
    }
    sources
}

/// What a host serves besides its own sessions: the external sources, and whether its own
/// (dsh) sessions are listed at all. The default is the host alone, unchanged.
#[derive(Clone, Default)]
pub struct SourceSet {
    /// The host's own sessions are left out of the listing (`--sources` without `dsh`).
    pub hide_dsh: bool,
    /// The external sources to serve beside (or instead of) the host's sessions.
    pub external: Vec<ExternalSessions>,
}

impl std::fmt::Debug for SourceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let homes: Vec<String> = self
            .external
            .iter()
            .map(|s| format!("{}={}", s.agent().name(), s.home().display()))
            .collect();
        f.debug_struct("SourceSet")
            .field("hide_dsh", &self.hide_dsh)
            .field("external", &homes)
            .finish()
    }
}

impl SourceSet {
    /// From `--sources` and the agents' home flags (`(name, --<name>-home)`, each optional).
    pub fn from_homes(choice: Option<&SourceChoice>, homes: &[(&str, Option<&Path>)]) -> SourceSet {
        SourceSet {
            hide_dsh: choice.is_some_and(|c| !c.dsh),
            external: external_sources(choice, homes),
        }
    }

    /// From `--sources`, `--claude-home` and `--codex-home` (each optional).
    pub fn from_flags(
        choice: Option<&SourceChoice>,
        claude_home: Option<&Path>,
        codex_home: Option<&Path>,
    ) -> SourceSet {
        SourceSet::from_homes(choice, &[("claude", claude_home), ("codex", codex_home)])
    }

    /// The same sources, each keeping its listing between processes under the dsh home
    /// `dsh_home` ([`ExternalSessions::with_listing_cache`]).
    pub fn cached_in(self, dsh_home: &Path) -> SourceSet {
        SourceSet {
            hide_dsh: self.hide_dsh,
            external: self
                .external
                .into_iter()
                .map(|s| s.cached_in(dsh_home))
                .collect(),
        }
    }

    /// Writes every source's persistent listing that has news (before the process exits).
    pub fn flush(&self) {
        for source in &self.external {
            source.flush();
        }
    }

    /// `host` alone when there is nothing to add, else merged with the external sources.
    pub fn serve(&self, host: Arc<dyn SessionQuery>) -> Arc<dyn SessionQuery> {
        if self.external.is_empty() && !self.hide_dsh {
            host
        } else {
            Arc::new(WithExternal::new(
                host,
                !self.hide_dsh,
                self.external.clone(),
            ))
        }
    }
}

/// Errors for an id this source does not hold.
fn not_found(id: &str) -> SessionError {
    SessionError::NotFound { id: id.to_string() }
}

/// Remembers what one file's scan found, keyed by its stamp.
type Stamped<T> = rustc_hash::FxHashMap<std::ffi::OsString, (scan::FileStamp, T)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_like_rfc3339() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(
            parse_time("2026-01-02T16:39:45.349Z"),
            Some(1_767_371_985_349)
        );
        assert_eq!(parse_time("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_time("not a time"), None);
        assert_eq!(parse_time("2026-13-02T16:39:45Z"), None);
    }

    #[test]
    fn sources_parse_and_name_what_is_wrong() {
        assert_eq!(
            SourceChoice::parse("codex,dsh").unwrap(),
            SourceChoice {
                dsh: true,
                agents: vec![ExternalAgent::Codex],
            }
        );
        let err = SourceChoice::parse("dsh,crush").unwrap_err().to_string();
        assert!(err.contains("crush") && err.contains("qwen"), "{err}");
    }

    #[test]
    fn ids_name_their_agent() {
        assert_eq!(
            ExternalAgent::of_id("claude:abc"),
            Some(ExternalAgent::Claude)
        );
        assert_eq!(
            ExternalAgent::of_id("codex:abc"),
            Some(ExternalAgent::Codex)
        );
        assert_eq!(ExternalAgent::of_id("0190-abc"), None);
    }
}
