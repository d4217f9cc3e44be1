//! Claude Code transcripts (`projects/<dir>/<sessionId>.jsonl`): head, title and conversation.
//!
//! Pure line parsers: `external::scan` feeds them complete lines. A line that is not a JSON
//! object, or whose known fields have unexpected types, is skipped like an unknown record type.
//! Each record is read by `record.rs`: walked key by key, tool results, images and thinking
//! passed over unread, serde taking whatever the walk does not vouch for.
//!
//! The conversation is the main chain of the `parentUuid` tree ending at the newest record that
//! is not a sidechain, so text abandoned by a rewind or a branch never appears. A
//! `compact_boundary` ends the chain: the `isCompactSummary` user record after it stands in for
//! everything before, unless the boundary names a `preservedSegment` (2.1.19x+): those records
//! follow the summary, as Claude Code re-links them. Records sharing an assistant `message.id`
//! are one message; replies Claude Code wrote itself (`message.model: "<synthetic>"`) are not.

use super::agent::{AgentFormat, Layout, SideNames};
use super::scan::{read_lines, LineSink};
use super::{parse_time, title_line, Conversation, Head, HeadFields, ItemKind};
use crate::session::error::Result;
use record::{parse, parse_line_in, parse_serde, parse_with_message, Message, Record};
use serde::Deserialize;
use std::path::{Path, PathBuf};

mod conversation;
pub mod record;
pub use conversation::ConversationScan;

/// 2.1.19x+: a compaction that kept the newest records verbatim names them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactMetadata {
    preserved_segment: Option<PreservedSegment>,
}

/// The kept records: `headUuid` (oldest) to `tailUuid` (newest) along their parents, placed
/// after `anchorUuid` (the summary).
#[derive(Deserialize, serde::Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct PreservedSegment {
    head_uuid: String,
    anchor_uuid: String,
    tail_uuid: String,
}

fn preserved_segment(line: &Record<'_>) -> Option<PreservedSegment> {
    line.compact_metadata
        .and_then(|m| serde_json::from_slice::<CompactMetadata>(m).ok())
        .and_then(|m| m.preserved_segment)
}

/// Record `type`s the reader uses (the drift guard in `tests/session/real_agents.rs` checks that
/// every fixture's record is in this list or in [`IGNORED_RECORD_TYPES`]).
pub const USED_RECORD_TYPES: &[&str] = &["user", "assistant", "system", "custom-title", "ai-title"];

/// Record `type`s seen in real files and deliberately left out: bookkeeping, attachments,
/// request logs, names the person gave an agent (`agent-name` repeats `custom-title`).
pub const IGNORED_RECORD_TYPES: &[&str] = &[
    "agent-name",
    "api-request",
    "api-request-blob",
    "api-request-shape",
    "atis-latch",
    "attachment",
    "bridge-session",
    "cost-state",
    "file-history-snapshot",
    "frame-link",
    "last-prompt",
    "mode",
    "permission-mode",
    "pr-link",
    "progress",
    "queue-operation",
    "relocated",
    "result",
    "started",
    "summary",
    "tools-used",
    "worktree-state",
];

/// The model Claude Code names for replies it wrote itself ("No response requested.", API
/// error notes), not the model's words.
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// Tags whose whole element is injected context or command plumbing, not what a person typed.
const INJECTED_TAGS: &[&str] = &[
    "system-reminder",
    "command-name",
    "command-message",
    "command-args",
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",
    "ide_opened_file",
    "ide_selection",
    "user-prompt-submit-hook",
];

/// The text of element `tag` in `text`, if present.
fn element<'t>(text: &'t str, tag: &str) -> Option<&'t str> {
    let open = format!("<{tag}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&format!("</{tag}>"))? + start;
    Some(text[start..end].trim())
}

/// A user prompt without injected elements (system reminders, slash-command plumbing). A slash
/// command keeps what the person typed: its name and arguments (`/review src/`).
///
/// One pass, linear in the text whatever it holds: at each `<` that opens an injected element,
/// the element (to its closing tag, or to the end when it is never closed) is skipped; every
/// other byte is copied once.
pub fn strip_injected(text: &str) -> String {
    let typed = element(text, "command-name").map(|name| {
        let args = element(text, "command-args").unwrap_or_default();
        format!("{name} {args}").trim().to_string()
    });
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'<', &text.as_bytes()[at..]) {
        let start = at + found;
        let opened = INJECTED_TAGS.iter().find(|tag| {
            let rest = &text.as_bytes()[start + 1..];
            rest.starts_with(tag.as_bytes()) && rest.get(tag.len()) == Some(&b'>')
        });
        let Some(tag) = opened else {
            out.push_str(&text[at..=start]);
            at = start + 1;
            continue;
        };
        out.push_str(&text[at..start]);
        let body = start + tag.len() + 2;
        let close = format!("</{tag}>");
        at = match memchr::memmem::find(&text.as_bytes()[body..], close.as_bytes()) {
            Some(end) => body + end + close.len(),
            None => text.len(),
        };
    }
    out.push_str(&text[at..]);
    match typed {
        Some(typed) if out.trim().is_empty() => typed,
        Some(typed) => format!("{typed}\n{}", out.trim()),
        None => out.trim().to_string(),
    }
}

/// Whether a user record is a prompt a person typed.
fn is_prompt(line: &Record<'_>) -> bool {
    line.kind.as_deref() == Some("user")
        && line.is_meta != Some(true)
        && line.is_sidechain != Some(true)
        && line.is_compact_summary != Some(true)
}

/// Claude Code (`~/.claude/projects/<dir>/<sessionId>.jsonl`; ids `claude:<sessionId>`).
pub struct ClaudeCode;

impl AgentFormat for ClaudeCode {
    fn layout(&self) -> &'static Layout {
        const LAYOUT: Layout = Layout {
            name: "claude",
            product: "Claude Code",
            home_env: "CLAUDE_CONFIG_DIR",
            default_home: ".claude",
            sessions_subdir: "projects",
            depth: 1,
        };
        &LAYOUT
    }

    /// `CLAUDE_CONFIG_DIR` may list several directories; the first is the primary one.
    fn home_from_env(&self, value: &str) -> Option<PathBuf> {
        let first = value.split(',').next().unwrap_or_default().trim();
        (!first.is_empty()).then(|| PathBuf::from(first))
    }

    /// `agent-*` files are subagents, the compaction helper or warm-ups: not sessions.
    fn is_session_file(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        name.ends_with(".jsonl") && !name.starts_with("agent-")
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
        let scan: ConversationScan = match saved {
            Some(saved) => super::agent::load_state(saved)?,
            None => ConversationScan::default(),
        };
        scan.consistent().then(|| Box::new(scan) as _)
    }
}

impl super::agent::TitleScan for TitleScan {
    fn save(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The file's own first prompt even after a compaction: the records before a boundary stay
    /// in the file, so its first typed prompt is the session's first prompt (the projected
    /// conversation would give the first prompt after the compaction).
    fn choose(&self, _side: Option<&dyn SideNames>, _own_id: &str) -> Option<String> {
        self.title()
    }
}

/// Reads until the session id, cwd and a time are known.
#[derive(Default)]
pub struct HeadScan(HeadFields);

impl LineSink for HeadScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        let head = &mut self.0;
        head.lines += 1;
        let Some(line) = parse(bytes) else {
            return true;
        };
        head.objects += 1;
        if head.id.is_none() {
            head.id = line.session_id.map(|s| s.into_owned());
        }
        if head.cwd.is_none() {
            head.cwd = line.cwd.map(|s| s.into_owned());
        }
        if let Some(time) = line.timestamp.as_deref().and_then(parse_time) {
            head.created = Some(head.created.map_or(time, |c| c.min(time)));
        }
        !(head.id.is_some() && head.cwd.is_some() && head.created.is_some())
    }
}

impl HeadScan {
    /// The head, `None` while incomplete; an error when the file is not a Claude transcript.
    pub fn finish(self, path: &Path) -> Result<Option<Head>> {
        self.0.finish(path, "a Claude Code transcript")
    }
}

/// The title state: last `custom-title`, last `ai-title`, first typed prompt.
#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TitleScan {
    custom: Option<String>,
    ai: Option<String>,
    first_prompt: Option<String>,
    /// A bare slash command, the title only when nothing else is.
    first_command: Option<String>,
    /// A compaction boundary was seen: the first prompt in the file may be gone from the
    /// conversation.
    compacted: bool,
}

impl LineSink for TitleScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        // Once the first prompt is known only titles and compactions matter, and a record of
        // either kind names it literally: every other line (tool results, images, thinking,
        // megabytes each) is passed over by a substring search instead of being parsed.
        if self.first_prompt.is_some()
            && memchr::memmem::find(bytes, b"-title\"").is_none()
            && memchr::memmem::find(bytes, b"compact_boundary").is_none()
        {
            return true;
        }
        let Some(line) = parse(bytes) else {
            return true;
        };
        match line.kind.as_deref() {
            Some("system") if line.subtype.as_deref() == Some("compact_boundary") => {
                self.compacted = true;
            }
            Some("custom-title") => {
                if let Some(t) = line.custom_title.filter(|t| !t.trim().is_empty()) {
                    self.custom = Some(t.into_owned());
                }
            }
            Some("ai-title") => {
                if let Some(t) = line.ai_title.filter(|t| !t.trim().is_empty()) {
                    self.ai = Some(t.into_owned());
                }
            }
            Some("user") if self.first_prompt.is_none() && is_prompt(&line) => {
                let message = Message::of(line.message);
                let only_tools = message.only_tools;
                let prompt = strip_injected(&message.text);
                // A bare slash command (`/clear`) says nothing about the session.
                let bare_command = prompt.starts_with('/') && !prompt.contains(char::is_whitespace);
                if only_tools || is_marker(&prompt) {
                } else if bare_command {
                    self.first_command.get_or_insert(prompt);
                } else {
                    self.first_prompt = title_line(&prompt);
                }
            }
            _ => {}
        }
        true
    }
}

impl TitleScan {
    /// The title: the last `custom-title`, else the last `ai-title` (first non-empty line, at most
    /// 120 characters), else the first typed prompt; `None` when there is none of them.
    pub fn title(&self) -> Option<String> {
        self.named()
            .or_else(|| self.first_prompt.clone())
            .or_else(|| self.first_command.clone())
    }

    /// The last `custom-title`, else the last `ai-title`.
    pub fn named(&self) -> Option<String> {
        self.custom
            .as_deref()
            .or(self.ai.as_deref())
            .and_then(title_line)
    }

    /// Whether the file holds a compaction: the first prompt then comes from the conversation
    /// ([`conversation_title`]), since the one in the file may have been compacted away.
    pub fn compacted(&self) -> bool {
        self.compacted
    }
}

/// The first prompt still in a projected conversation, as a title (a bare slash command only
/// when there is nothing else).
#[allow(dead_code)] // Kept for hosts that title a conversation they already projected.
pub fn conversation_title(conversation: &Conversation) -> Option<String> {
    let prompts = || {
        conversation
            .items
            .iter()
            .filter(|i| i.kind == ItemKind::User)
            .map(|i| i.text.as_str())
    };
    let bare = |p: &str| p.starts_with('/') && !p.contains(char::is_whitespace);
    prompts()
        .find(|p| !bare(p))
        .or_else(|| prompts().next())
        .and_then(title_line)
}

/// Claude Code's own notes in the user's place (`[Request interrupted by user]`).
fn is_marker(text: &str) -> bool {
    text.starts_with("[Request interrupted by user")
}

#[cfg(test)]
mod tests {
    use super::super::scan::LineSink;
    use super::*;

    fn conversation(lines: &[&str]) -> Vec<(ItemKind, String)> {
        let mut scan = ConversationScan::default();
        for (i, line) in lines.iter().enumerate() {
            scan.line(i as u64, line.as_bytes());
        }
        scan.finish()
            .items
            .into_iter()
            .map(|i| (i.kind, i.text))
            .collect()
    }

    /// A saved scan comes back packed and whole; one whose tables are cut, or whose nodes name
    /// a node or item it does not have, is refused (the session is then read whole).
    #[test]
    fn a_saved_scan_is_resumed_only_when_it_holds_together() {
        let lines = [
            r#"{"type":"user","uuid":"0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9","parentUuid":null,"message":{"role":"user","content":"first"}}"#,
            r#"{"type":"assistant","uuid":"b","parentUuid":"0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9","message":{"id":"m1","content":[{"type":"text","text":"answer"}]}}"#,
        ];
        let mut scan = ConversationScan::default();
        for (i, line) in lines.iter().enumerate() {
            scan.line(i as u64, line.as_bytes());
        }
        let saved = crate::session::external::agent::ConversationScan::save(&scan);
        let resumed = ClaudeCode.conversation_scan(Some(&saved)).unwrap();
        assert_eq!(resumed.conversation(), scan.clone().finish());
        // A state cut short, or with a byte after it, is not one state.
        assert!(ClaudeCode
            .conversation_scan(Some(&saved[..saved.len() - 1]))
            .is_none());
        assert!(ClaudeCode
            .conversation_scan(Some(&[saved.as_slice(), &[0]].concat()))
            .is_none());
        let with = |field: &str, bytes: &[u8]| conversation::with_packed(&saved, field, bytes);
        let node = |parent: u32, item: u32| {
            let mut bytes = Vec::new();
            for word in [parent, item, 0] {
                bytes.extend_from_slice(&word.to_le_bytes());
            }
            bytes.push(1);
            bytes
        };
        // Two nodes (the user's and the assistant's), two items: in range, then not.
        let good = [node(u32::MAX, 0), node(0, 1)].concat();
        assert!(ClaudeCode
            .conversation_scan(Some(&with("nodes", &good)))
            .is_some());
        for bad in [
            [node(u32::MAX, 0), node(2, 1)].concat(),
            [node(u32::MAX, 0), node(0, 2)].concat(),
            [node(u32::MAX, 0)].concat(),
            good[..20].to_vec(),
        ] {
            assert!(ClaudeCode
                .conversation_scan(Some(&with("nodes", &bad)))
                .is_none());
        }
        assert!(ClaudeCode
            .conversation_scan(Some(&with("uuids", &[0; 19])))
            .is_none());
        assert!(ClaudeCode
            .conversation_scan(Some(&with("uuids", &[0xff; 20])))
            .is_none());
    }

    #[test]
    fn rewinds_follow_the_newest_leaf() {
        let lines = [
            r#"{"type":"user","uuid":"a","parentUuid":null,"message":{"role":"user","content":"first"}}"#,
            r#"{"type":"assistant","uuid":"b","parentUuid":"a","message":{"id":"m1","content":[{"type":"text","text":"abandoned"}]}}"#,
            r#"{"type":"user","uuid":"c","parentUuid":"a","message":{"role":"user","content":"again"}}"#,
            r#"{"type":"assistant","uuid":"d","parentUuid":"c","message":{"id":"m2","content":[{"type":"text","text":"kept"}]}}"#,
            r#"{"type":"assistant","uuid":"e","parentUuid":"d","message":{"id":"m2","content":[{"type":"tool_use","name":"x"}]}}"#,
            r#"{"type":"assistant","uuid":"f","parentUuid":"e","message":{"id":"m2","content":[{"type":"text","text":"more"}]}}"#,
        ];
        assert_eq!(
            conversation(&lines),
            vec![
                (ItemKind::User, "first".into()),
                (ItemKind::User, "again".into()),
                (ItemKind::Assistant, "kept\nmore".into()),
            ]
        );
    }

    #[test]
    fn compaction_summary_replaces_the_history_before_it() {
        let lines = [
            r#"{"type":"user","uuid":"a","parentUuid":null,"message":{"content":"old prompt"}}"#,
            r#"{"type":"system","subtype":"compact_boundary","uuid":"b","parentUuid":null,"logicalParentUuid":"a"}"#,
            r#"{"type":"user","uuid":"c","parentUuid":"b","isCompactSummary":true,"message":{"content":"This session is being continued"}}"#,
            r#"{"type":"user","uuid":"d","parentUuid":"c","isMeta":true,"message":{"content":"<local-command-caveat>x</local-command-caveat>"}}"#,
            r#"{"type":"user","uuid":"e","parentUuid":"d","message":{"content":"<system-reminder>ignore</system-reminder>new prompt"}}"#,
            r#"{"type":"user","uuid":"f","parentUuid":"e","isSidechain":true,"message":{"content":"side"}}"#,
        ];
        assert_eq!(
            conversation(&lines),
            vec![
                (ItemKind::Summary, "This session is being continued".into()),
                (ItemKind::User, "new prompt".into()),
            ]
        );
    }

    #[test]
    fn the_chain_wins_over_file_order_and_synthetic_replies_are_left_out() {
        // An interactive file can hold the reply before its prompt; the prompt is newest in the
        // file, the reply newest along the chain.
        let lines = [
            r#"{"type":"assistant","uuid":"b","parentUuid":"x","message":{"id":"m1","model":"claude-opus-4-8","content":[{"type":"text","text":"the reply"}]}}"#,
            r#"{"type":"attachment","uuid":"x","parentUuid":"a"}"#,
            r#"{"type":"user","uuid":"a","parentUuid":null,"message":{"content":"the prompt"}}"#,
        ];
        assert_eq!(
            conversation(&lines),
            vec![
                (ItemKind::User, "the prompt".into()),
                (ItemKind::Assistant, "the reply".into()),
            ]
        );
        let lines = [
            r#"{"type":"user","uuid":"a","parentUuid":null,"message":{"content":"hi"}}"#,
            r#"{"type":"assistant","uuid":"b","parentUuid":"a","message":{"id":"m1","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}"#,
            r#"{"type":"user","uuid":"c","parentUuid":"b","message":{"content":"again"}}"#,
        ];
        assert_eq!(
            conversation(&lines),
            vec![
                (ItemKind::User, "hi".into()),
                (ItemKind::User, "again".into()),
            ]
        );
    }

    #[test]
    fn a_preserved_segment_follows_the_summary_however_the_chain_reaches_it() {
        // 2.1.19x `-p /compact --resume`: later records chain to the segment's tail, whose head
        // points back into the replaced history.
        let boundary = r#"{"type":"system","subtype":"compact_boundary","uuid":"k","parentUuid":null,"compactMetadata":{"preservedSegment":{"headUuid":"r2","anchorUuid":"s","tailUuid":"r2"}}}"#;
        let summary = r#"{"type":"user","uuid":"s","parentUuid":"k","isCompactSummary":true,"message":{"content":"summary"}}"#;
        let old = [
            r#"{"type":"user","uuid":"p1","parentUuid":null,"message":{"content":"gone"}}"#,
            r#"{"type":"assistant","uuid":"r1","parentUuid":"p1","message":{"id":"m1","content":[{"type":"text","text":"gone too"}]}}"#,
            r#"{"type":"user","uuid":"p2","parentUuid":"r1","message":{"content":"summarised"}}"#,
            r#"{"type":"assistant","uuid":"r2","parentUuid":"p2","message":{"id":"m2","content":[{"type":"text","text":"kept"}]}}"#,
        ];
        let via_tail =
            r#"{"type":"user","uuid":"n","parentUuid":"r2","message":{"content":"after"}}"#;
        let via_summary =
            r#"{"type":"user","uuid":"n","parentUuid":"s","message":{"content":"after"}}"#;
        for next in [via_tail, via_summary] {
            let mut lines = old.to_vec();
            lines.extend([boundary, summary, next]);
            assert_eq!(
                conversation(&lines),
                vec![
                    (ItemKind::Summary, "summary".into()),
                    (ItemKind::Assistant, "kept".into()),
                    (ItemKind::User, "after".into()),
                ]
            );
        }
    }

    #[test]
    fn slash_commands_keep_what_was_typed() {
        assert_eq!(
            strip_injected("<command-message>o is running…</command-message>\n<command-name>/o</command-name>\n<command-args>make it</command-args>"),
            "/o make it"
        );
        assert_eq!(
            strip_injected("<local-command-stdout>out</local-command-stdout>"),
            ""
        );
    }

    #[test]
    fn titles_prefer_custom_then_ai_then_prompt() {
        let mut scan = TitleScan::default();
        scan.line(0, br#"{"type":"user","uuid":"a","message":{"content":"<command-name>/clear</command-name>"}}"#);
        scan.line(
            1,
            br#"{"type":"user","uuid":"b","message":{"content":"  fix the parser\nplease"}}"#,
        );
        assert_eq!(scan.title().as_deref(), Some("fix the parser"));
        scan.line(2, br#"{"type":"ai-title","aiTitle":"Parser fix"}"#);
        assert_eq!(scan.title().as_deref(), Some("Parser fix"));
        scan.line(3, br#"{"type":"custom-title","customTitle":"Mine"}"#);
        scan.line(4, br#"{"type":"ai-title","aiTitle":"Later AI"}"#);
        assert_eq!(scan.title().as_deref(), Some("Mine"));
    }
}
