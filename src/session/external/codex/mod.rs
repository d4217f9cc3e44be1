//! Codex rollouts (`sessions/YYYY/MM/DD/rollout-*.jsonl`): head, title and conversation.
//!
//! Pure line parsers fed by `external::scan`. A rollout opens with a `session_meta` envelope; a
//! file that does not (the mid-2025 pre-envelope format, or anything else) is not listed, and
//! the error says why. Typed prompts come from `event_msg/user_message` (up to 0.16x) or, from
//! 0.17x, from user `response_item` messages whose `content_item_kinds` say `user.text` (other
//! user `response_item`s carry injected AGENTS.md and environment blocks; the
//! `item_completed/UserMessage` event repeats the prompt and is ignored); replies from assistant
//! `message` items. The newest `compacted` item replaces what came before it: its `replacement_history`
//! when present, else the earlier prompts; its `message`, when not empty, is the checkpoint (shown
//! once: 0.17x also ends the history with it as a user message). A `thread_rolled_back` event
//! drops the last N user turns.

mod conversation;
pub use conversation::ConversationScan;

use super::agent::{AgentFormat, Layout, SideNames};
use super::codex_record::{envelope, envelope_in, envelope_serde, payload_is_one_of, Line};
use super::scan::{read_lines, LineSink};
use super::{parse_time, title_line, Conversation, Head};
use crate::session::error::{Result, SessionError};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::path::Path;

#[derive(Deserialize)]
struct Meta {
    id: String,
    timestamp: Option<String>,
    cwd: Option<String>,
}

#[derive(Deserialize)]
struct Payload<'a> {
    #[serde(rename = "type")]
    kind: Option<String>,
    role: Option<String>,
    message: Option<String>,
    thread_name: Option<String>,
    num_turns: Option<u64>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    replacement_history: Option<Vec<&'a RawValue>>,
    /// 0.17x: who wrote each content item of a message (`["user.text"]` for a typed prompt).
    #[serde(borrow)]
    internal_chat_message_metadata_passthrough: Option<&'a RawValue>,
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
}

/// The part of a message's metadata that says what each content item is.
#[derive(Deserialize)]
struct ItemMetadata {
    content_item_kinds: Option<Vec<String>>,
}

/// The content item kind Codex gives text a person typed.
const USER_TEXT: &str = "user.text";

impl Payload<'_> {
    /// The kinds of the content items, when this build of Codex wrote them.
    /// (Metadata of another shape is no metadata: the line is still read.)
    fn item_kinds(&self) -> Option<Vec<String>> {
        [
            self.internal_chat_message_metadata_passthrough,
            self.metadata,
        ]
        .into_iter()
        .flatten()
        .filter_map(|raw| serde_json::from_str::<ItemMetadata>(raw.get()).ok())
        .find_map(|m| m.content_item_kinds)
    }

    /// The text a person typed, when this is a user message marked as typed by them (0.17x:
    /// `content_item_kinds` holds `user.text`; the text items of that kind, joined).
    fn typed_prompt(&self) -> Option<String> {
        if self.kind.as_deref() != Some("message") || self.role.as_deref() != Some("user") {
            return None;
        }
        let kinds = self.item_kinds()?;
        if !kinds.iter().any(|k| k == USER_TEXT) {
            return None;
        }
        let blocks = self
            .content
            .and_then(|c| serde_json::from_str::<Vec<Block>>(c.get()).ok())?;
        // Kinds parallel the content items when both have one entry per item.
        let parallel = kinds.len() == blocks.len();
        let texts: Vec<&str> = blocks
            .iter()
            .enumerate()
            .filter(|(i, _)| !parallel || kinds[*i] == USER_TEXT)
            .filter(|(_, b)| matches!(b.kind.as_deref(), Some("input_text" | "text")))
            .filter_map(|(_, b)| b.text.as_deref())
            .collect();
        Some(texts.join("\n").trim().to_string())
    }
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
}

/// Rollout record `type`s the reader uses (the drift guard in `tests/session/real_agents.rs`
/// checks every fixture's records against these lists and the `IGNORED_*` ones).
pub const USED_RECORD_TYPES: &[&str] = &["session_meta", "response_item", "event_msg", "compacted"];

/// Rollout record `type`s deliberately left out (turn settings, usage, workspace state).
pub const IGNORED_RECORD_TYPES: &[&str] = &[
    "turn_context",
    "world_state",
    "token_usage_record",
    "inter_agent_communication",
    "inter_agent_communication_metadata",
    "security_risk_score",
    "retained_context",
    "realtime_item",
];

/// `event_msg` payload types the reader uses.
pub const USED_EVENTS: &[&str] = &["user_message", "thread_name_updated", "thread_rolled_back"];

/// `event_msg` payload types deliberately left out: progress, tool and agent activity, and the
/// pre-0.17x copies of what `response_item`s hold (`agent_message`, `agent_reasoning`).
pub const IGNORED_EVENTS: &[&str] = &[
    "agent_message",
    "agent_reasoning",
    "collab_agent_interaction_end",
    "collab_agent_spawn_end",
    "collab_close_end",
    "collab_waiting_end",
    "context_compacted",
    "dynamic_tool_call_request",
    "dynamic_tool_call_response",
    "entered_review_mode",
    "error",
    "exec_command_end",
    "exited_review_mode",
    "guardian_assessment",
    "image_generation_end",
    "item_completed",
    "mcp_tool_call_end",
    "patch_apply_end",
    "sub_agent_activity",
    "task_complete",
    "task_started",
    "thread_goal_updated",
    "thread_settings_applied",
    "token_count",
    "turn_aborted",
    "undo_completed",
    "view_image_tool_call",
    "web_search_end",
];

/// `response_item` payload types the reader uses.
pub const USED_ITEMS: &[&str] = &["message"];

/// `response_item` payload types deliberately left out: tool calls and their output, reasoning.
pub const IGNORED_ITEMS: &[&str] = &[
    "agent_message",
    "custom_tool_call",
    "custom_tool_call_output",
    "function_call",
    "function_call_output",
    "ghost_snapshot",
    "image_generation_call",
    "reasoning",
    "tool_search_call",
    "tool_search_output",
    "web_search_call",
];

/// `event_msg/item_completed` item types deliberately left out: 0.17x repeats there what the
/// `response_item`s hold (`UserMessage` is the typed prompt the marked user message carries).
pub const IGNORED_COMPLETED_ITEMS: &[&str] = &[
    "AgentMessage",
    "CommandExecution",
    "ContextCompaction",
    "Extension",
    "FileChange",
    "McpToolCall",
    "Plan",
    "Reasoning",
    "UserMessage",
];

fn payload<'a>(line: &Line<'a>) -> Option<Payload<'a>> {
    serde_json::from_str(line.payload_text()).ok()
}

fn blocks_text(content: Option<&RawValue>) -> String {
    let Some(blocks) = content.and_then(|c| serde_json::from_str::<Vec<Block>>(c.get()).ok())
    else {
        return String::new();
    };
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| {
            matches!(
                b.kind.as_deref(),
                Some("input_text" | "output_text" | "text")
            )
        })
        .filter_map(|b| b.text.as_deref())
        .collect();
    texts.join("\n")
}

/// Whether a user item of a replacement history is injected context, not a typed prompt.
fn is_injected(text: &str) -> bool {
    let text = text.trim();
    text.starts_with("# AGENTS.md instructions") || (text.starts_with('<') && text.ends_with('>'))
}

/// Codex (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`; ids `codex:<thread id>`).
pub struct Codex;

impl AgentFormat for Codex {
    fn layout(&self) -> &'static Layout {
        const LAYOUT: Layout = Layout {
            name: "codex",
            product: "Codex",
            home_env: "CODEX_HOME",
            default_home: ".codex",
            sessions_subdir: "sessions",
            // `sessions/YYYY/MM/DD/`.
            depth: 3,
        };
        &LAYOUT
    }

    fn is_session_file(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        name.starts_with("rollout-") && name.ends_with(".jsonl")
    }

    fn read_head(&self, path: &Path) -> Result<Option<Head>> {
        let mut scan = HeadScan::default();
        read_lines(path, 0, 0, &mut scan)?;
        scan.finish(path)
    }

    fn title_scan(
        &self,
        saved: Option<&serde_json::Value>,
    ) -> Option<Box<dyn super::agent::TitleScan>> {
        super::agent::title_scan_of::<TitleScan>(saved)
    }

    fn read_conversation(&self, path: &Path) -> Result<Conversation> {
        super::agent::read_whole::<ConversationScan>(path)
    }

    fn conversation_scan(
        &self,
        saved: Option<&[u8]>,
    ) -> Option<Box<dyn super::agent::ConversationScan>> {
        super::agent::conversation_scan_of::<ConversationScan>(saved)
    }

    fn side_names(&self, home: &Path, listing: Option<&Path>) -> Option<Box<dyn SideNames>> {
        Some(Box::new(super::codex_side::CodexSide::new(
            home.to_path_buf(),
            listing,
        )))
    }
}

impl super::agent::TitleScan for TitleScan {
    fn save(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// A name the person gave wins (state database, the TUI's index, a rollout event), then
    /// Codex's own title, then the first prompt.
    fn choose(&self, side: Option<&dyn SideNames>, own: &str) -> Option<String> {
        side.and_then(|s| s.given_name(own))
            .or_else(|| self.name())
            .or_else(|| side.and_then(|s| s.generated_title(own)))
            .or_else(|| self.first_prompt())
    }
}

/// Reads the first record, which must be the file's `session_meta`.
#[derive(Default)]
pub struct HeadScan {
    head: Option<Head>,
    wrong: Option<String>,
}

impl LineSink for HeadScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        let Some(line) = envelope(bytes) else {
            self.wrong = Some(
                "the first line is not a rollout record {timestamp, type, payload} \
                 (the pre-envelope 2025 format is not read)"
                    .into(),
            );
            return false;
        };
        if line.kind != "session_meta" {
            self.wrong = Some(format!(
                "the first record is {:?}, not \"session_meta\"",
                line.kind
            ));
            return false;
        }
        match serde_json::from_slice::<Meta>(line.payload) {
            Ok(meta) if !meta.id.is_empty() && !meta.id.contains(['/', '\\']) => {
                let created = meta
                    .timestamp
                    .as_deref()
                    .and_then(parse_time)
                    .or_else(|| line.timestamp.as_deref().and_then(parse_time));
                match created {
                    Some(created_at) => {
                        self.head = Some(Head {
                            id: meta.id,
                            created_at,
                            cwd: meta.cwd,
                        })
                    }
                    None => self.wrong = Some("session_meta has no valid timestamp".into()),
                }
            }
            _ => self.wrong = Some("session_meta has no valid thread id".into()),
        }
        false
    }
}

impl HeadScan {
    /// The head the first record gave; `None` for an empty file (or one whose first line is still
    /// being written). A first record that is not a valid `session_meta` is
    /// [`SessionError::Corrupt`] naming line 1 and what was wrong: the file is not a Codex rollout.
    pub fn finish(self, path: &Path) -> Result<Option<Head>> {
        match self.wrong {
            Some(reason) => Err(SessionError::Corrupt {
                path: path.to_path_buf(),
                line: 1,
                reason: format!("not a Codex rollout: {reason}"),
            }),
            None => Ok(self.head),
        }
    }
}

/// The title state from the rollout itself: last `thread_name_updated`, first typed prompt.
#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TitleScan {
    name: Option<String>,
    first_prompt: Option<String>,
}

impl LineSink for TitleScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        // Once the first prompt is known only a thread name matters, and its event names it
        // literally: reasoning, tool output and instructions are passed over unparsed.
        if self.first_prompt.is_some() && memchr::memmem::find(bytes, b"thread_name").is_none() {
            return true;
        }
        let Some(line) = envelope(bytes) else {
            return true;
        };
        if line.kind == "response_item" {
            if self.first_prompt.is_none() && bytes_may_be_user_message(line.payload) {
                if let Some(prompt) = payload(&line).and_then(|p| p.typed_prompt()) {
                    self.first_prompt = title_line(request(&prompt));
                }
            }
            return true;
        }
        if line.kind != "event_msg"
            || !payload_is_one_of(line.payload, &["thread_name_updated", "user_message"])
        {
            return true;
        }
        let Some(p) = payload(&line) else {
            return true;
        };
        match p.kind.as_deref() {
            Some("thread_name_updated") => {
                if let Some(name) = p.thread_name.filter(|n| !n.trim().is_empty()) {
                    self.name = Some(name);
                }
            }
            Some("user_message") if self.first_prompt.is_none() => {
                self.first_prompt = p.message.as_deref().map(request).and_then(title_line);
            }
            _ => {}
        }
        true
    }
}

impl TitleScan {
    /// The title: the last thread name (first non-empty line, at most 120 characters), else the
    /// first typed prompt; `None` when there is neither.
    pub fn title(&self) -> Option<String> {
        self.name().or_else(|| self.first_prompt())
    }

    /// The last `thread_name_updated` name (its first line, at most 120 characters).
    pub fn name(&self) -> Option<String> {
        self.name.as_deref().and_then(title_line)
    }

    /// The first typed prompt's first line (at most 120 characters).
    pub fn first_prompt(&self) -> Option<String> {
        self.first_prompt.clone()
    }
}

/// Whether a `response_item` payload may be a user message (a cheap look before parsing it).
fn bytes_may_be_user_message(payload: &[u8]) -> bool {
    memchr::memmem::find(payload, b"\"user\"").is_some()
        && memchr::memmem::find(payload, USER_TEXT.as_bytes()).is_some()
}

/// The request itself when the IDE prefixed the prompt with the files it mentions.
fn request(message: &str) -> &str {
    const MARK: &str = "## My request for Codex:";
    match message.find(MARK) {
        Some(at) => &message[at + MARK.len()..],
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::super::scan::LineSink;
    use super::super::ItemKind;
    use super::*;
    fn run(lines: &[&str]) -> Vec<(ItemKind, String)> {
        let mut scan = ConversationScan::default();
        for (i, l) in lines.iter().enumerate() {
            scan.line(i as u64, l.as_bytes());
        }
        scan.finish()
            .items
            .into_iter()
            .map(|i| (i.kind, i.text))
            .collect()
    }

    #[test]
    fn prompts_and_replies_only_and_compaction_replaces() {
        let lines = [
            r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"t"}}"#,
            r##"{"timestamp":"2026-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions"}]}}"##,
            r#"{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"old"}}"#,
            r#"{"timestamp":"2026-01-01T00:00:02Z","type":"response_item","payload":{"type":"reasoning","summary":[]}}"#,
            r#"{"timestamp":"2026-01-01T00:00:02Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"old answer"}]}}"#,
            r#"{"timestamp":"2026-01-01T00:00:03Z","type":"compacted","payload":{"message":"summary","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"kept prompt"}]}]}}"#,
            r#"{"timestamp":"2026-01-01T00:00:04Z","type":"event_msg","payload":{"type":"user_message","message":"new"}}"#,
            r#"{"timestamp":"2026-01-01T00:00:05Z","type":"event_msg","payload":{"type":"user_message","message":"rolled back"}}"#,
            r#"{"timestamp":"2026-01-01T00:00:06Z","type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}"#,
        ];
        assert_eq!(
            run(&lines),
            vec![
                (ItemKind::User, "kept prompt".into()),
                (ItemKind::Summary, "summary".into()),
                (ItemKind::User, "new".into()),
            ]
        );
    }

    #[test]
    fn marked_user_items_are_prompts_and_a_summary_copy_is_shown_once() {
        let lines = [
            r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"t"}}"#,
            r#"{"timestamp":"2026-01-01T00:00:01Z","ordinal":1,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}],"internal_chat_message_metadata_passthrough":{"content_item_kinds":["environments.environment_context"]}},"metadata":{"history_sequence":1}}"#,
            r#"{"timestamp":"2026-01-01T00:00:01Z","ordinal":2,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"typed"}],"internal_chat_message_metadata_passthrough":{"content_item_kinds":["user.text"]}}}"#,
            r#"{"timestamp":"2026-01-01T00:00:01Z","ordinal":3,"type":"event_msg","payload":{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":"typed"}]}}}"#,
            r#"{"timestamp":"2026-01-01T00:00:02Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer"}]}}"#,
            r#"{"timestamp":"2026-01-01T00:00:03Z","type":"compacted","payload":{"message":"the summary","retained_context":{},"replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"typed"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"the summary"}]}]}}"#,
            r#"{"timestamp":"2026-01-01T00:00:04Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"after"}],"internal_chat_message_metadata_passthrough":{"content_item_kinds":["user.text"]}}}"#,
        ];
        assert_eq!(
            run(&lines),
            vec![
                (ItemKind::User, "typed".into()),
                (ItemKind::Summary, "the summary".into()),
                (ItemKind::User, "after".into()),
            ]
        );
        let mut scan = TitleScan::default();
        for (i, line) in lines.iter().enumerate() {
            scan.line(i as u64, line.as_bytes());
        }
        assert_eq!(scan.title().as_deref(), Some("typed"));
    }

    #[test]
    fn ide_prompts_are_titled_by_their_request() {
        let mut scan = TitleScan::default();
        scan.line(0, br#"{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{"type":"user_message","message":"\n# Files mentioned by the user:\n\n## a.txt: /a.txt\n\n## My request for Codex:\nsummarize a\n"}}"#);
        assert_eq!(scan.title().as_deref(), Some("summarize a"));
    }

    #[test]
    fn a_legacy_rollout_is_named_as_such() {
        let mut scan = HeadScan::default();
        scan.line(0, br#"{"id":"44444444-4444-4444-8444-444444444444","timestamp":"2026-01-04T05:06:07.000Z"}"#);
        let err = scan.finish(Path::new("r.jsonl")).unwrap_err().to_string();
        assert!(err.contains("pre-envelope"), "{err}");
    }
}
