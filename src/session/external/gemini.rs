//! Gemini CLI sessions (`~/.gemini/tmp/<project>/chats/session-*.jsonl`): head, title and
//! conversation.
//!
//! Purpose: Gemini CLI 0.6x records a session as an append-only *upsert* log: a metadata line
//! (`sessionId`, `projectHash`, `startTime`), message lines (a later line with the same `id`
//! replaces the message in its first place), `{"$set": {...}}` updates (`summary`,
//! `lastUpdated`; `$set.messages` replaces the whole list: a resume, a compression) and
//! `{"$rewindTo": id}` (that message and everything after it are dropped). Replaying the log
//! gives what the CLI itself resumes with; the projection keeps, in order, what the person typed
//! (`type:"user"` text parts, its `displayContent` when it has one) and the model's text
//! (`type:"gemini"`, parts without `thought`); the `<state_snapshot>` message a compression
//! writes is the summary. Left out: the `<session_context>`/`<hook_context>` the CLI injects,
//! function calls and responses, thoughts, `info`/`error`/`warning` notes and the model's fixed
//! "Got it. Thanks for the additional context!" after a summary. The cwd is the project's
//! `.project_root` (the file beside `chats/`), else what `projects.json` says of the folder
//! (`gemini_projects.rs`). Title: the generated `summary` (a later run of the
//! CLI appends it), else the first prompt that is not ignored (empty, a `/` or `?` command,
//! injected context). A file with no message worth resuming (the stub a resume leaves in a
//! second file with the same id) has no head, so the file that holds the conversation is the
//! one listed. The legacy one-object `.json` files are read whole (bounded).
//!
//! Invariant: linear in the file: the replay keeps one small entry per live message (its kind
//! and projected text, never tool payloads) and a map from id to place; a rewind drops what it
//! cuts once. Nothing is written; every read is bounded (`scan::read_lines`, and
//! [`MAX_SIDE_FILE`] for `.project_root` and legacy files).
//! Proof: the unit tests below over records trimmed from Gemini CLI 0.61.0's files (upserts,
//! `$set.messages`, `$rewindTo`, compression, stub files, titles).

use super::agent::{AgentFormat, Layout, SideNames};
use super::scan::{read_lines, LineSink};
use super::{parse_time, title_line, Conversation, Head, HeadFields, Item, ItemKind};
use crate::session::error::{Result, SessionError};
use crate::session::files;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most bytes read of a side file (`.project_root`) or a legacy one-object session.
pub const MAX_SIDE_FILE: u64 = 64 << 20;

/// Gemini CLI (`~/.gemini/tmp/<project>/chats/*.jsonl`; ids `gemini:<sessionId>`).
pub struct GeminiCli;

impl AgentFormat for GeminiCli {
    fn layout(&self) -> &'static Layout {
        const LAYOUT: Layout = Layout {
            name: "gemini",
            product: "Gemini CLI",
            // `GEMINI_CLI_HOME` replaces the user's home; `.gemini` is still appended.
            home_env: "GEMINI_CLI_HOME",
            default_home: ".gemini",
            sessions_subdir: "tmp",
            // `tmp/<project>/chats/`.
            depth: 2,
        };
        &LAYOUT
    }

    fn home_from_env(&self, value: &str) -> Option<PathBuf> {
        let value = value.trim();
        (!value.is_empty()).then(|| Path::new(value).join(".gemini"))
    }

    /// A `.jsonl` (or legacy `.json`) directly in a project's `chats/` (sub-agents live one
    /// level deeper, under their parent's id).
    fn is_session_file(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let parent = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str());
        parent == Some("chats") && (name.ends_with(".jsonl") || name.ends_with(".json"))
    }

    fn read_head(&self, path: &Path) -> Result<Option<Head>> {
        let mut scan = HeadScan::default();
        if is_legacy(path) {
            scan.legacy(&read_bounded(path)?);
        } else {
            read_lines(path, 0, 0, &mut scan)?;
        }
        // The folder's marker, else the project registry (by folder name or `projectHash`).
        let cwd = project_root(path).or_else(|| {
            super::gemini_projects::registered_root(path, scan.project_hash.as_deref())
        });
        scan.finish(path, cwd)
    }

    fn title_scan(
        &self,
        saved: Option<&serde_json::Value>,
    ) -> Option<Box<dyn super::agent::TitleScan>> {
        super::agent::title_scan_of::<TitleScan>(saved)
    }

    fn read_conversation(&self, path: &Path) -> Result<Conversation> {
        let mut scan = ConversationScan::default();
        if is_legacy(path) {
            scan.legacy(&read_bounded(path)?);
        } else {
            read_lines(path, 0, 0, &mut scan)?;
        }
        Ok(scan.finish())
    }
}

fn is_legacy(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// A small file read whole, at most [`MAX_SIDE_FILE`] bytes, opened read-only and never
/// blocking (a FIFO is an error).
fn read_bounded(path: &Path) -> Result<Vec<u8>> {
    let file = files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    let mut bytes = Vec::new();
    file.take(MAX_SIDE_FILE)
        .read_to_end(&mut bytes)
        .map_err(|e| SessionError::io(path, e))?;
    Ok(bytes)
}

/// The project root Gemini CLI wrote beside `chats/` (`.project_root`, no newline).
fn project_root(session: &Path) -> Option<String> {
    let marker = session.parent()?.parent()?.join(".project_root");
    let bytes = read_bounded(&marker).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let text = text.trim();
    (!text.is_empty() && text.len() < 4096).then(|| text.to_string())
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    session_id: Option<String>,
    project_hash: Option<String>,
    start_time: Option<String>,
    last_updated: Option<String>,
    summary: Option<String>,
    kind: Option<String>,
    id: Option<String>,
    #[serde(rename = "type")]
    message_type: Option<String>,
    timestamp: Option<String>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    display_content: Option<&'a RawValue>,
    #[serde(rename = "$set", borrow)]
    set: Option<&'a RawValue>,
    #[serde(rename = "$rewindTo")]
    rewind_to: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetPayload<'a> {
    summary: Option<String>,
    last_updated: Option<String>,
    #[serde(borrow)]
    messages: Option<Vec<&'a RawValue>>,
}

/// A legacy one-object session file.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Legacy<'a> {
    session_id: Option<String>,
    project_hash: Option<String>,
    start_time: Option<String>,
    last_updated: Option<String>,
    summary: Option<String>,
    #[serde(borrow, default)]
    messages: Vec<&'a RawValue>,
}

/// A content: a string, or Gemini `Part`s (text parts, maybe `thought`; calls and responses
/// read as parts without text).
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    function_response: Option<serde::de::IgnoredAny>,
}

/// The text of a content without thoughts, and whether it held a function response.
fn text_of(content: Option<&RawValue>) -> (String, bool) {
    let Some(raw) = content else {
        return (String::new(), false);
    };
    match serde_json::from_str::<Content>(raw.get()) {
        Ok(Content::Text(text)) => (text, false),
        Ok(Content::Parts(parts)) => {
            let response = parts.iter().any(|p| p.function_response.is_some());
            let texts: Vec<&str> = parts
                .iter()
                .filter(|p| !p.thought)
                .filter_map(|p| p.text.as_deref())
                .collect();
            (texts.join("\n"), response)
        }
        Err(_) => (String::new(), false),
    }
}

/// Text the CLI put in the person's place: injected context, or nothing.
fn is_injected(text: &str) -> bool {
    let text = text.trim_start();
    text.is_empty() || text.starts_with("<session_context>") || text.starts_with("<hook_context>")
}

/// What the CLI ignores for a title: injected context, empty, or a `/` or `?` command.
fn is_ignored_for_title(text: &str) -> bool {
    let trimmed = text.trim_start();
    is_injected(text) || trimmed.starts_with('/') || trimmed.starts_with('?')
}

/// The summary a compression's user message carries.
fn is_state_snapshot(text: &str) -> bool {
    text.trim_start().starts_with("<state_snapshot>")
}

/// The model's fixed answer to a compression summary.
const ACKNOWLEDGEMENT: &str = "Got it. Thanks for the additional context!";

/// One message, projected: its role and text (`None`: not conversation).
fn project(line: &Line<'_>) -> Option<(ItemKind, String)> {
    match line.message_type.as_deref() {
        Some("user") => {
            let (text, response) = text_of(line.display_content.or(line.content));
            if response || is_injected(&text) {
                None
            } else if is_state_snapshot(&text) {
                Some((ItemKind::Summary, text.trim().to_string()))
            } else {
                Some((ItemKind::User, text))
            }
        }
        Some("gemini") => {
            let (text, _) = text_of(line.content);
            let text = text.trim();
            (!text.is_empty() && text != ACKNOWLEDGEMENT)
                .then(|| (ItemKind::Assistant, text.to_string()))
        }
        _ => None,
    }
}

fn parse(bytes: &[u8]) -> Option<Line<'_>> {
    serde_json::from_slice(bytes).ok()
}

/// Reads until the session id, a start time and a message worth resuming are known.
#[derive(Default)]
pub struct HeadScan {
    fields: HeadFields,
    resumable: bool,
    /// The metadata's `projectHash` (SHA-256 of the project root).
    project_hash: Option<String>,
}

impl LineSink for HeadScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        self.fields.lines += 1;
        let Some(line) = parse(bytes) else {
            return true;
        };
        self.fields.objects += 1;
        self.note(&line);
        if let Some(set) = line.set {
            if let Ok(set) = serde_json::from_str::<SetPayload>(set.get()) {
                for message in set.messages.into_iter().flatten() {
                    if let Ok(message) = serde_json::from_str::<Line>(message.get()) {
                        self.note(&message);
                    }
                }
            }
        }
        !(self.fields.id.is_some() && self.fields.created.is_some() && self.resumable)
    }
}

impl HeadScan {
    fn note(&mut self, line: &Line<'_>) {
        if line.kind.as_deref() != Some("subagent") && self.fields.id.is_none() {
            self.fields.id.clone_from(&line.session_id);
        }
        if self.project_hash.is_none() {
            self.project_hash.clone_from(&line.project_hash);
        }
        if self.fields.created.is_none() {
            self.fields.created = line
                .start_time
                .as_deref()
                .or(line.timestamp.as_deref())
                .and_then(parse_time);
        }
        if line.id.is_some() && !self.resumable {
            self.resumable = matches!(project(line), Some((ItemKind::User | ItemKind::Summary, _)));
        }
    }

    fn legacy(&mut self, bytes: &[u8]) {
        self.fields.lines += 1;
        let Ok(legacy) = serde_json::from_slice::<Legacy>(bytes) else {
            return;
        };
        self.fields.objects += 1;
        self.fields.id = legacy.session_id;
        self.project_hash = legacy.project_hash;
        self.fields.created = legacy.start_time.as_deref().and_then(parse_time);
        for message in legacy.messages {
            if let Ok(line) = serde_json::from_str::<Line>(message.get()) {
                self.note(&line);
            }
        }
    }

    /// The head (cwd from the project's marker), `None` while the file holds no message worth
    /// resuming; an error when the file is not a Gemini CLI session.
    pub fn finish(self, path: &Path, cwd: Option<String>) -> Result<Option<Head>> {
        let fields = HeadFields { cwd, ..self.fields };
        let head = fields.finish(path, "a Gemini CLI session")?;
        Ok(head.filter(|_| self.resumable))
    }
}

/// The title state: the latest generated summary, the first prompt.
#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TitleScan {
    summary: Option<String>,
    first_prompt: Option<String>,
}

impl TitleScan {
    fn note(&mut self, line: &Line<'_>) {
        if let Some(summary) = line.summary.as_deref().filter(|s| !s.trim().is_empty()) {
            self.summary = Some(summary.to_string());
        }
        if self.first_prompt.is_none() && line.message_type.as_deref() == Some("user") {
            let (text, response) = text_of(line.display_content.or(line.content));
            if !response && !is_ignored_for_title(&text) && !is_state_snapshot(&text) {
                self.first_prompt = title_line(&text);
            }
        }
    }
}

impl LineSink for TitleScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        let Some(line) = parse(bytes) else {
            return true;
        };
        self.note(&line);
        if let Some(set) = line.set {
            if let Ok(set) = serde_json::from_str::<SetPayload>(set.get()) {
                if let Some(summary) = set.summary.filter(|s| !s.trim().is_empty()) {
                    self.summary = Some(summary);
                }
                for message in set.messages.into_iter().flatten() {
                    if let Ok(message) = serde_json::from_str::<Line>(message.get()) {
                        self.note(&message);
                    }
                }
            }
        }
        true
    }
}

impl super::agent::TitleScan for TitleScan {
    fn save(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn choose(&self, _side: Option<&dyn SideNames>, _own_id: &str) -> Option<String> {
        self.summary
            .as_deref()
            .and_then(title_line)
            .or_else(|| self.first_prompt.clone())
    }
}

/// One live message of the replay.
struct Live {
    id: Box<str>,
    item: Option<Item>,
}

/// Replays the upsert log into the current message list.
#[derive(Default)]
pub struct ConversationScan {
    messages: Vec<Live>,
    at: HashMap<Box<str>, usize>,
    last_line: Option<u64>,
    last_activity: Option<i64>,
}

impl ConversationScan {
    fn upsert(&mut self, line: &Line<'_>) {
        let Some(id) = line.id.as_deref() else {
            return;
        };
        let time = line.timestamp.as_deref().and_then(parse_time);
        if let Some(t) = time {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
        let item = project(line).map(|(kind, text)| Item {
            kind,
            text,
            time: time.unwrap_or(0),
        });
        match self.at.get(id) {
            Some(&place) => self.messages[place].item = item,
            None => {
                self.at.insert(id.into(), self.messages.len());
                self.messages.push(Live {
                    id: id.into(),
                    item,
                });
            }
        }
    }

    fn clear(&mut self) {
        self.messages.clear();
        self.at.clear();
    }

    /// Drops message `id` and everything after it (everything when it is unknown).
    fn rewind(&mut self, id: &str) {
        let Some(&place) = self.at.get(id) else {
            self.clear();
            return;
        };
        for live in self.messages.drain(place..) {
            self.at.remove(&live.id);
        }
    }

    fn apply_set(&mut self, set: &RawValue) {
        let Ok(set) = serde_json::from_str::<SetPayload>(set.get()) else {
            return;
        };
        if let Some(t) = set.last_updated.as_deref().and_then(parse_time) {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
        if let Some(messages) = set.messages {
            self.clear();
            for message in messages {
                if let Ok(line) = serde_json::from_str::<Line>(message.get()) {
                    self.upsert(&line);
                }
            }
        }
    }

    fn legacy(&mut self, bytes: &[u8]) {
        let Ok(legacy) = serde_json::from_slice::<Legacy>(bytes) else {
            return;
        };
        self.last_line = Some(0);
        if let Some(t) = legacy.last_updated.as_deref().and_then(parse_time) {
            self.last_activity = Some(t);
        }
        let _ = legacy.summary;
        for message in legacy.messages {
            if let Ok(line) = serde_json::from_str::<Line>(message.get()) {
                self.upsert(&line);
            }
        }
    }

    /// The replayed list, projected: the latest summary (if any) and what follows it.
    pub fn finish(self) -> Conversation {
        let items: Vec<Item> = self.messages.into_iter().filter_map(|l| l.item).collect();
        let start = items
            .iter()
            .rposition(|i| i.kind == ItemKind::Summary)
            .unwrap_or(0);
        Conversation {
            items: items.into_iter().skip(start).collect(),
            last_line: self.last_line,
            last_activity: self.last_activity,
        }
    }
}

impl LineSink for ConversationScan {
    fn line(&mut self, index: u64, bytes: &[u8]) -> bool {
        self.last_line = Some(index);
        let Some(line) = parse(bytes) else {
            return true;
        };
        if let Some(t) = line.last_updated.as_deref().and_then(parse_time) {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
        if let Some(set) = line.set {
            self.apply_set(set);
        } else if let Some(id) = line.rewind_to.as_deref() {
            self.rewind(id);
        } else {
            self.upsert(&line);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::agent::TitleScan as _;
    use super::*;

    const META: &str = r#"{"sessionId":"7529f12c-576e-43e5-8665-3199bdfaf3a0","projectHash":"c4","startTime":"2026-12-04T00:55:02.600Z","lastUpdated":"2026-12-04T00:55:02.600Z","kind":"main"}"#;
    const CONTEXT: &str = r#"{"$set":{"messages":[{"id":"ctx","timestamp":"2026-12-04T00:55:02.700Z","type":"user","content":[{"text":"<session_context>date, OS, files</session_context>"}]}]}}"#;

    fn user(id: &str, text: &str) -> String {
        format!(
            r#"{{"id":"{id}","timestamp":"2026-12-04T00:55:03.000Z","type":"user","content":[{{"text":"{text}"}}]}}"#
        )
    }

    fn gemini(id: &str, text: &str) -> String {
        format!(
            r#"{{"id":"{id}","timestamp":"2026-12-04T00:55:04.000Z","type":"gemini","content":"{text}","thoughts":[{{"subject":"s","description":"GA-THINK"}}],"model":"gemini-2.5-flash"}}"#
        )
    }

    fn replay(lines: &[String]) -> Vec<(ItemKind, String)> {
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
    fn an_upsert_replaces_in_place_and_tools_thoughts_and_context_are_left_out() {
        let lines = [
            META.to_string(),
            CONTEXT.to_string(),
            user("u1", "GA-T1 read notes"),
            gemini("g1", "GA-T1-PRE I will read"),
            // The same message again, now with its tool call.
            r#"{"id":"g1","timestamp":"2026-12-04T00:55:04.000Z","type":"gemini","content":"GA-T1-PRE I will read the file first.","toolCalls":[{"id":"t","name":"read_file","args":{},"result":[{"functionResponse":{"id":"t","name":"read_file","response":{"output":"NOTES"}}}]}]}"#.to_string(),
            r#"{"id":"r1","timestamp":"2026-12-04T00:55:05.000Z","type":"user","content":[{"functionResponse":{"id":"t","name":"read_file","response":{"output":"NOTES"}}}]}"#.to_string(),
            gemini("g2", "GA-T1 it says hi"),
            r#"{"id":"i1","type":"info","content":"Conversation checkpoint saved with tag: x."}"#.to_string(),
            r#"{"$set":{"lastUpdated":"2026-12-04T00:56:00.000Z"}}"#.to_string(),
        ];
        assert_eq!(
            replay(&lines),
            [
                (ItemKind::User, "GA-T1 read notes".to_string()),
                (
                    ItemKind::Assistant,
                    "GA-T1-PRE I will read the file first.".to_string()
                ),
                (ItemKind::Assistant, "GA-T1 it says hi".to_string()),
            ]
        );
    }

    #[test]
    fn rewinds_cut_and_a_compression_replaces_the_list() {
        let mut lines = vec![
            META.to_string(),
            user("u1", "first"),
            gemini("g1", "one"),
            user("u2", "abandoned"),
            gemini("g2", "gone"),
            r#"{"$rewindTo":"u2"}"#.to_string(),
            user("u3", "second"),
        ];
        assert_eq!(
            replay(&lines),
            [
                (ItemKind::User, "first".to_string()),
                (ItemKind::Assistant, "one".to_string()),
                (ItemKind::User, "second".to_string()),
            ]
        );
        lines.push(r#"{"$set":{"messages":[{"id":"c0","type":"user","content":[{"text":"<session_context>ctx</session_context>"}]},{"id":"c1","type":"user","content":[{"text":"<state_snapshot>GC-SUMMARY two questions</state_snapshot>"}]},{"id":"c2","type":"gemini","content":[{"text":"Got it. Thanks for the additional context!"}]},{"id":"c3","type":"user","content":[{"text":"kept tail"}]}]}}"#.to_string());
        lines.push(user("u4", "after"));
        assert_eq!(
            replay(&lines),
            [
                (
                    ItemKind::Summary,
                    "<state_snapshot>GC-SUMMARY two questions</state_snapshot>".to_string()
                ),
                (ItemKind::User, "kept tail".to_string()),
                (ItemKind::User, "after".to_string()),
            ]
        );
        // An unknown id clears everything.
        lines.push(r#"{"$rewindTo":"nope"}"#.to_string());
        assert!(replay(&lines).is_empty());
    }

    #[test]
    fn a_stub_file_has_no_head_and_a_real_one_does() {
        let head = |lines: &[&str]| {
            let mut scan = HeadScan::default();
            for (i, line) in lines.iter().enumerate() {
                if !scan.line(i as u64, line.as_bytes()) {
                    break;
                }
            }
            scan.finish(Path::new("s.jsonl"), Some("/work".into()))
                .unwrap()
        };
        assert_eq!(head(&[META, CONTEXT]), None, "metadata and context only");
        let real = head(&[META, CONTEXT, &user("u1", "GA-T1 hi")]).unwrap();
        assert_eq!(real.id, "7529f12c-576e-43e5-8665-3199bdfaf3a0");
        assert_eq!(real.cwd.as_deref(), Some("/work"));
        let mut scan = HeadScan::default();
        scan.line(0, b"garbage");
        assert!(scan.finish(Path::new("s.jsonl"), None).is_err());
    }

    #[test]
    fn titles_prefer_the_latest_summary_then_the_first_prompt_that_counts() {
        let title = |lines: &[String]| {
            let mut scan = TitleScan::default();
            for (i, line) in lines.iter().enumerate() {
                scan.line(i as u64, line.as_bytes());
            }
            scan.choose(None, "x")
        };
        let mut lines = vec![
            META.to_string(),
            CONTEXT.to_string(),
            user("u0", "/chat save tag"),
            user("u1", "GC-T1 first question ✓"),
            user("u2", "GC-T2 second"),
        ];
        assert_eq!(title(&lines).as_deref(), Some("GC-T1 first question ✓"));
        lines.push(
            r#"{"$set":{"summary":"GA generated summary","memoryScratchpad":{}}}"#.to_string(),
        );
        assert_eq!(title(&lines).as_deref(), Some("GA generated summary"));
    }

    #[test]
    fn legacy_files_are_read_whole() {
        let legacy = br#"{
  "sessionId": "legacy-1",
  "startTime": "2025-06-01T10:00:00.000Z",
  "lastUpdated": "2025-06-01T10:05:00.000Z",
  "messages": [
    {"id": "a", "timestamp": "2025-06-01T10:00:01.000Z", "type": "user", "content": "old prompt"},
    {"id": "b", "timestamp": "2025-06-01T10:00:02.000Z", "type": "gemini", "content": "old answer"}
  ]
}"#;
        let mut head = HeadScan::default();
        head.legacy(legacy);
        assert_eq!(
            head.finish(Path::new("x.json"), None).unwrap().unwrap().id,
            "legacy-1"
        );
        let mut scan = ConversationScan::default();
        scan.legacy(legacy);
        let items: Vec<String> = scan.finish().items.into_iter().map(|i| i.text).collect();
        assert_eq!(items, ["old prompt", "old answer"]);
        assert!(GeminiCli.is_session_file(Path::new("/g/tmp/p/chats/session-1.jsonl")));
        assert!(!GeminiCli.is_session_file(Path::new("/g/tmp/p/chats/parent/sub.jsonl")));
        assert!(!GeminiCli.is_session_file(Path::new("/g/tmp/p/logs.json")));
    }
}
