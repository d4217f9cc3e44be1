//! Claude Code transcripts (`projects/<dir>/<sessionId>.jsonl`): head, title and conversation.
//!
//! Pure line parsers: `external::scan` feeds them complete lines. A line that is not a JSON
//! object, or whose known fields have unexpected types, is skipped like an unknown record type.
//!
//! The conversation is the main chain of the `parentUuid` tree ending at the newest record that
//! is not a sidechain, so text abandoned by a rewind or a branch never appears. A
//! `compact_boundary` ends the chain: the `isCompactSummary` user record after it stands in for
//! everything before, unless the boundary names a `preservedSegment` (2.1.19x+): those records
//! follow the summary, as Claude Code re-links them. Records sharing an assistant `message.id`
//! are one message; replies Claude Code wrote itself (`message.model: "<synthetic>"`) are not.

use super::agent::{AgentFormat, SideNames};
use super::scan::{read_lines, LineSink};
use super::{parse_time, title_line, Conversation, Head, HeadFields, Item, ItemKind};
use crate::session::error::Result;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    uuid: Option<String>,
    parent_uuid: Option<String>,
    session_id: Option<String>,
    cwd: Option<String>,
    timestamp: Option<String>,
    is_sidechain: Option<bool>,
    is_meta: Option<bool>,
    is_compact_summary: Option<bool>,
    subtype: Option<String>,
    custom_title: Option<String>,
    ai_title: Option<String>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    compact_metadata: Option<&'a RawValue>,
}

/// 2.1.19x+: a compaction that kept the newest records verbatim names them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactMetadata {
    preserved_segment: Option<PreservedSegment>,
}

/// The kept records: `headUuid` (oldest) to `tailUuid` (newest) along their parents, placed
/// after `anchorUuid` (the summary).
#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct PreservedSegment {
    head_uuid: String,
    anchor_uuid: String,
    tail_uuid: String,
}

fn preserved_segment(line: &Line<'_>) -> Option<PreservedSegment> {
    line.compact_metadata
        .and_then(|m| serde_json::from_str::<CompactMetadata>(m.get()).ok())
        .and_then(|m| m.preserved_segment)
}

#[derive(Deserialize)]
struct MessageBody<'a> {
    id: Option<String>,
    model: Option<String>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
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

fn parse(bytes: &[u8]) -> Option<Line<'_>> {
    serde_json::from_slice(bytes).ok()
}

/// The `text` of a message's content, and whether it held only tool results.
fn content_text(message: Option<&RawValue>) -> (String, bool) {
    let Some(body) = message.and_then(|m| serde_json::from_str::<MessageBody>(m.get()).ok()) else {
        return (String::new(), false);
    };
    let Some(content) = body
        .content
        .and_then(|c| serde_json::from_str::<Content>(c.get()).ok())
    else {
        return (String::new(), false);
    };
    match content {
        Content::Text(text) => (text, false),
        Content::Blocks(blocks) => {
            let only_tools = !blocks.is_empty()
                && blocks
                    .iter()
                    .all(|b| b.kind.as_deref() == Some("tool_result"));
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.kind.as_deref() == Some("text"))
                .filter_map(|b| b.text.as_deref())
                .collect();
            (texts.join("\n"), only_tools)
        }
    }
}

fn message_id(message: Option<&RawValue>) -> Option<String> {
    message
        .and_then(|m| serde_json::from_str::<MessageBody>(m.get()).ok())
        .and_then(|b| b.id)
}

/// The model Claude Code names for replies it wrote itself ("No response requested.", API
/// error notes), not the model's words.
const SYNTHETIC_MODEL: &str = "<synthetic>";

fn is_synthetic(message: Option<&RawValue>) -> bool {
    message
        .and_then(|m| serde_json::from_str::<MessageBody>(m.get()).ok())
        .and_then(|b| b.model)
        .is_some_and(|m| m == SYNTHETIC_MODEL)
}

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
fn is_prompt(line: &Line<'_>) -> bool {
    line.kind.as_deref() == Some("user")
        && line.is_meta != Some(true)
        && line.is_sidechain != Some(true)
        && line.is_compact_summary != Some(true)
}

/// Claude Code (`~/.claude/projects/<dir>/<sessionId>.jsonl`; ids `claude:<sessionId>`).
pub struct ClaudeCode;

impl AgentFormat for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn product(&self) -> &'static str {
        "Claude Code"
    }

    fn home_env(&self) -> &'static str {
        "CLAUDE_CONFIG_DIR"
    }

    /// `CLAUDE_CONFIG_DIR` may list several directories; the first is the primary one.
    fn home_from_env(&self, value: &str) -> Option<PathBuf> {
        let first = value.split(',').next().unwrap_or_default().trim();
        (!first.is_empty()).then(|| PathBuf::from(first))
    }

    fn default_home(&self, user_home: &Path) -> PathBuf {
        user_home.join(".claude")
    }

    fn sessions_subdir(&self) -> &'static str {
        "projects"
    }

    fn depth(&self) -> usize {
        1
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

    fn title_scan(&self) -> Box<dyn super::agent::TitleScan> {
        Box::new(TitleScan::default())
    }

    fn read_conversation(&self, path: &Path) -> Result<Conversation> {
        let mut scan = ConversationScan::default();
        read_lines(path, 0, 0, &mut scan)?;
        Ok(scan.finish())
    }
}

impl super::agent::TitleScan for TitleScan {
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
            head.id = line.session_id;
        }
        if head.cwd.is_none() {
            head.cwd = line.cwd;
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
#[derive(Default)]
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
        let Some(line) = parse(bytes) else {
            return true;
        };
        match line.kind.as_deref() {
            Some("system") if line.subtype.as_deref() == Some("compact_boundary") => {
                self.compacted = true;
            }
            Some("custom-title") => {
                if let Some(t) = line.custom_title.filter(|t| !t.trim().is_empty()) {
                    self.custom = Some(t);
                }
            }
            Some("ai-title") => {
                if let Some(t) = line.ai_title.filter(|t| !t.trim().is_empty()) {
                    self.ai = Some(t);
                }
            }
            Some("user") if self.first_prompt.is_none() && is_prompt(&line) => {
                let (text, only_tools) = content_text(line.message);
                let prompt = strip_injected(&text);
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

/// A record's `uuid` as a compact key: a canonical (lowercase) UUID as its 128 bits in two
/// words, anything else by its text. Exact either way: no two records share a key unless they
/// share a uuid.
enum Key {
    Uuid((u64, u64)),
    Other(Box<str>),
}

impl Key {
    fn of(text: &str) -> Key {
        let b = text.as_bytes();
        if b.len() == 36 && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-') {
            let mut value: u128 = 0;
            let mut digits = 0;
            for &c in b {
                let d = match c {
                    b'0'..=b'9' => c - b'0',
                    b'a'..=b'f' => c - b'a' + 10,
                    _ => continue,
                };
                value = value << 4 | u128::from(d);
                digits += 1;
            }
            if digits == 32 {
                return Key::Uuid(((value >> 64) as u64, value as u64));
            }
        }
        Key::Other(text.into())
    }
}

/// No node, no item.
const NONE: u32 = u32::MAX;
/// The record was read (not only named as a parent).
const PRESENT: u8 = 1;
/// A compaction boundary: the chain before it is replaced by the summary after it.
const BOUNDARY: u8 = 2;
/// A user or assistant record, or a boundary: one the newest leaf may be.
const CONVERSATIONAL: u8 = 4;
/// Already walked by [`ConversationScan::finish`] (a cycle ends there).
const TAKEN: u8 = 8;

/// One record of the tree: 16 bytes, whatever the record held (its text, if it is part of the
/// conversation, lives in `ConversationScan::items`).
#[derive(Clone, Copy)]
struct Node {
    parent: u32,
    item: u32,
    /// Position in the file (saturating).
    order: u32,
    flags: u8,
}

const EMPTY: Node = Node {
    parent: NONE,
    item: NONE,
    order: 0,
    flags: 0,
};

/// Builds the main-chain conversation.
///
/// Memory: a record costs its node (16 bytes) and its key in the id table (24 bytes, about 30
/// with the table's slack), plus the text of the records the projection keeps; nothing else of a
/// record is kept, so a session of millions of tiny records stays within a small multiple of
/// its file.
#[derive(Default)]
pub struct ConversationScan {
    /// Ids of canonical UUIDs (24 bytes an entry) and of anything else.
    uuids: HashMap<(u64, u64), u32>,
    others: HashMap<Box<str>, u32>,
    nodes: Vec<Node>,
    items: Vec<Option<(Item, Option<String>)>>,
    leaf: Option<u32>,
    /// The newest compaction's preserved segment, if it kept one.
    preserved: Option<PreservedSegment>,
    last_line: Option<u64>,
    last_activity: Option<i64>,
}

impl ConversationScan {
    fn intern(&mut self, uuid: &str) -> u32 {
        let next = self.nodes.len() as u32;
        let at = *match Key::of(uuid) {
            Key::Uuid(key) => self.uuids.entry(key).or_insert(next),
            Key::Other(key) => self.others.entry(key).or_insert(next),
        };
        if at == next {
            self.nodes.push(EMPTY);
        }
        at
    }

    fn lookup(&self, uuid: &str) -> u32 {
        match Key::of(uuid) {
            Key::Uuid(key) => self.uuids.get(&key),
            Key::Other(key) => self.others.get(&key),
        }
        .copied()
        .unwrap_or(NONE)
    }
}

impl LineSink for ConversationScan {
    fn line(&mut self, index: u64, bytes: &[u8]) -> bool {
        self.last_line = Some(index);
        let Some(line) = parse(bytes) else {
            return true;
        };
        let time = line.timestamp.as_deref().and_then(parse_time);
        if let Some(t) = time {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
        let Some(uuid) = line.uuid.as_deref() else {
            return true;
        };
        if line.is_sidechain == Some(true) {
            return true;
        }
        // Past four billion records the table is full: the rest are not part of the tree.
        if self.nodes.len() >= (NONE - 1) as usize {
            return true;
        }
        let boundary = line.kind.as_deref() == Some("system")
            && line.subtype.as_deref() == Some("compact_boundary");
        if boundary {
            // A later compaction without a preserved segment replaces an earlier one with it.
            self.preserved = preserved_segment(&line);
        }
        let conversational = boundary || matches!(line.kind.as_deref(), Some("user" | "assistant"));
        let time = time.unwrap_or(0);
        let item = match line.kind.as_deref() {
            Some("user") if line.is_compact_summary == Some(true) => {
                let (text, _) = content_text(line.message);
                Some((
                    Item {
                        kind: ItemKind::Summary,
                        text: text.trim().to_string(),
                        time,
                    },
                    None,
                ))
            }
            Some("user") if is_prompt(&line) => {
                let (text, only_tools) = content_text(line.message);
                let text = strip_injected(&text);
                (!only_tools && !is_marker(&text)).then_some((
                    Item {
                        kind: ItemKind::User,
                        text,
                        time,
                    },
                    None,
                ))
            }
            Some("assistant") if is_synthetic(line.message) => None,
            Some("assistant") => {
                let (text, _) = content_text(line.message);
                Some((
                    Item {
                        kind: ItemKind::Assistant,
                        text: text.trim().to_string(),
                        time,
                    },
                    message_id(line.message),
                ))
            }
            _ => None,
        };
        let at = self.intern(uuid);
        let parent = line.parent_uuid.as_deref().map_or(NONE, |p| self.intern(p));
        // Only conversation records and boundaries can be the newest leaf; progress, attachments
        // and bookkeeping records hang off the chain without moving it.
        if item.is_some() || boundary {
            self.leaf = Some(at);
        }
        let item = match item {
            Some(item) => {
                self.items.push(Some(item));
                (self.items.len() - 1) as u32
            }
            None => NONE,
        };
        let flags = PRESENT
            | if boundary { BOUNDARY } else { 0 }
            | if conversational { CONVERSATIONAL } else { 0 };
        self.nodes[at as usize] = Node {
            parent,
            item,
            order: u32::try_from(index).unwrap_or(u32::MAX),
            flags,
        };
        true
    }
}

impl ConversationScan {
    /// The newest conversation record at or below `leaf` (by file position), following children.
    fn descend(&self, leaf: u32) -> u32 {
        // Children as one flat array (offsets by parent), built in two passes over the nodes.
        let n = self.nodes.len();
        let mut start = vec![0u32; n + 1];
        for node in &self.nodes {
            if node.flags & PRESENT != 0 && node.parent != NONE {
                start[node.parent as usize + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut children = vec![0u32; start[n] as usize];
        for (i, node) in self.nodes.iter().enumerate() {
            if node.flags & PRESENT != 0 && node.parent != NONE {
                let slot = &mut fill[node.parent as usize];
                children[*slot as usize] = i as u32;
                *slot += 1;
            }
        }
        // Any conversation descendant is newer along the chain than the leaf, whatever its place
        // in the file; among them the one written last wins (the newest branch).
        let mut best: Option<(u32, u32)> = None;
        let mut seen = vec![false; n];
        let mut stack = vec![leaf];
        while let Some(at) = stack.pop() {
            let at = at as usize;
            if std::mem::replace(&mut seen[at], true) {
                continue;
            }
            for &child in &children[start[at] as usize..start[at + 1] as usize] {
                let node = &self.nodes[child as usize];
                let candidate = node.flags & CONVERSATIONAL != 0
                    && (node.item != NONE || node.flags & BOUNDARY != 0)
                    && best.is_none_or(|(order, _)| node.order > order);
                if candidate {
                    best = Some((node.order, child));
                }
                stack.push(child);
            }
        }
        best.map_or(leaf, |(_, child)| child)
    }

    /// Walks the node `at` once: `None` when it was never read or was walked already.
    fn take(&mut self, at: u32) -> Option<Node> {
        let node = self.nodes.get_mut(at as usize)?;
        if node.flags & PRESENT == 0 || node.flags & TAKEN != 0 {
            return None;
        }
        node.flags |= TAKEN;
        Some(*node)
    }

    /// The main chain from the newest leaf back to the latest compaction boundary, in order; an
    /// assistant reply split over records of one message id becomes one item.
    ///
    /// The leaf is the newest conversation record in the file, moved down to its newest
    /// conversation descendant when it has one (an interactive session can write a reply before
    /// its prompt). A preserved segment is re-linked as Claude Code does: its head's parent is the
    /// summary (`anchorUuid`), and when the chain reaches the summary without having passed
    /// through the segment, the segment (tail back to head) is put right after it.
    pub fn finish(mut self) -> Conversation {
        let leaf = self.leaf.take().map(|leaf| self.descend(leaf));
        let preserved = self.preserved.take().map(|seg| {
            (
                self.lookup(&seg.anchor_uuid),
                self.lookup(&seg.head_uuid),
                self.lookup(&seg.tail_uuid),
            )
        });
        let mut chain: Vec<u32> = Vec::new();
        let mut at = leaf;
        let mut spliced = false;
        while let Some(here) = at {
            if let Some((anchor, head, tail)) = preserved {
                if !spliced && here == anchor && anchor != NONE {
                    spliced = true;
                    let mut inner = Some(tail);
                    while let Some(kept) = inner {
                        let Some(node) = self.take(kept) else {
                            break;
                        };
                        if node.item != NONE {
                            chain.push(node.item);
                        }
                        inner = (kept != head && node.parent != NONE).then_some(node.parent);
                    }
                }
            }
            let Some(node) = self.take(here) else {
                break;
            };
            if node.flags & BOUNDARY != 0 {
                break;
            }
            at = match preserved {
                Some((anchor, head, _)) if here == head && head != NONE => {
                    spliced = true;
                    Some(anchor)
                }
                _ => (node.parent != NONE).then_some(node.parent),
            };
            if node.item != NONE {
                chain.push(node.item);
            }
        }
        let mut items_by_index = std::mem::take(&mut self.items);
        let chain: Vec<(Item, Option<String>)> = chain
            .into_iter()
            .filter_map(|i| items_by_index[i as usize].take())
            .collect();
        drop(items_by_index);
        let mut chain = chain;
        chain.reverse();
        let mut items: Vec<Item> = Vec::new();
        let mut last_id: Option<String> = None;
        // The pieces already in the reply being merged (by hash, then compared whole): a
        // record that repeats one adds nothing, and the check costs its own length, not the
        // reply's (a reply split over thousands of records stays linear).
        let mut pieces: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
        for (item, id) in chain {
            if item.kind == ItemKind::Assistant {
                if let (Some(id), Some(prev)) = (&id, items.last_mut()) {
                    if last_id.as_ref() == Some(id) && prev.kind == ItemKind::Assistant {
                        if !item.text.is_empty() && !has_piece(&pieces, &prev.text, &item.text) {
                            if !prev.text.is_empty() {
                                prev.text.push('\n');
                            }
                            let start = prev.text.len();
                            prev.text.push_str(&item.text);
                            add_piece(&mut pieces, &prev.text, start);
                        }
                        continue;
                    }
                }
                last_id = id;
                pieces.clear();
                if !item.text.is_empty() {
                    add_piece(&mut pieces, &item.text, 0);
                }
            } else if !item.text.is_empty() {
                last_id = None;
            }
            if !item.text.is_empty() {
                items.push(item);
            }
        }
        Conversation {
            items,
            last_line: self.last_line,
            last_activity: self.last_activity,
        }
    }
}

fn piece_hash(text: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(text)
}

/// Whether `piece` is already one of the pieces of `reply`.
fn has_piece(pieces: &HashMap<u64, Vec<(usize, usize)>>, reply: &str, piece: &str) -> bool {
    pieces
        .get(&piece_hash(piece))
        .is_some_and(|spans| spans.iter().any(|&(a, b)| &reply[a..b] == piece))
}

/// Records `reply[start..]` as a piece of the reply.
fn add_piece(pieces: &mut HashMap<u64, Vec<(usize, usize)>>, reply: &str, start: usize) {
    pieces
        .entry(piece_hash(&reply[start..]))
        .or_default()
        .push((start, reply.len()));
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
