//! Qwen Code transcripts (`~/.qwen/projects/<sanitized cwd>/chats/<sessionId>.jsonl`): head,
//! title and conversation.
//!
//! Purpose: Qwen Code's recorder writes Claude-like records (`uuid`, `parentUuid`, `sessionId`,
//! `timestamp`, `type`, the exact `cwd` on each) whose `message` is a Gemini `Content`
//! (`{"role","parts":[…]}`). The conversation is the chain of `parentUuid` links back from the
//! newest record (a `/rewind` leaves the rewound records on a dead branch); along it, the
//! person's prompts (`type:"user"`) and the model's text (`type:"assistant"`, parts without
//! `thought`) in order. A `system/chat_compression` record's `compressedHistory` replaces the
//! whole history before it: its first user content (the `<state_snapshot>`) is the summary, the
//! model's fixed acknowledgement is left out, and whatever it kept after them follows. Tool
//! calls and results, thinking, slash-command records, telemetry and every other `system`
//! subtype are not conversation. Title: the last `system/custom_title` the person gave
//! (`titleSource` `manual` or absent), else the last generated one (`auto`), else the first
//! prompt.
//!
//! Invariant: pure line parsers over complete lines (`scan::read_lines` bounds each), linear in
//! the input: a record costs a map entry and a small node, plus the text the projection keeps; a
//! line that is not a JSON record is skipped like an unknown record type; nothing is written.
//! Proof: the unit tests below over records trimmed from Qwen Code 0.24.4's files, and
//! `tests/session/qwen_sessions.rs` over a home it wrote.

use super::agent::{AgentFormat, Layout, SideNames};
use super::scan::{read_lines, LineSink};
use super::{parse_time, title_line, Conversation, Head, HeadFields, Item, ItemKind};
use crate::session::error::Result;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Qwen Code (`~/.qwen/projects/<dir>/chats/<sessionId>.jsonl`; ids `qwen:<sessionId>`).
pub struct QwenCode;

impl AgentFormat for QwenCode {
    fn layout(&self) -> &'static Layout {
        const LAYOUT: Layout = Layout {
            name: "qwen",
            product: "Qwen Code",
            // `QWEN_HOME` names the `.qwen` directory itself.
            home_env: "QWEN_HOME",
            default_home: ".qwen",
            sessions_subdir: "projects",
            // `projects/<sanitized cwd>/chats/`.
            depth: 2,
        };
        &LAYOUT
    }

    /// Qwen Code writes `projects/` under its runtime directory: `QWEN_RUNTIME_DIR` when set,
    /// else `QWEN_HOME` (each with a leading `~` expanded, as the CLI's `Storage` resolves
    /// them; a relative path is taken from the current directory as it does).
    fn home_from_environment(&self, var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
        ["QWEN_RUNTIME_DIR", self.home_env()]
            .into_iter()
            .find_map(|name| {
                let value = var(name)?;
                let value = value.trim();
                (!value.is_empty()).then(|| expand_tilde(value, var("HOME").as_deref()))
            })
    }

    /// A `.jsonl` directly in a project's `chats/` (not `*.runtime.json`, not sub-agents).
    fn is_session_file(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let parent = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str());
        name.ends_with(".jsonl") && parent == Some("chats")
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
        let mut scan = ConversationScan::default();
        read_lines(path, 0, 0, &mut scan)?;
        Ok(scan.finish())
    }
}

/// `~` and `~/…` under the user's home directory (left as they are without one).
fn expand_tilde(value: &str, user_home: Option<&str>) -> PathBuf {
    let rest = match value {
        "~" => Some(""),
        _ => value.strip_prefix("~/"),
    };
    match (rest, user_home) {
        (Some(rest), Some(home)) => Path::new(home).join(rest),
        _ => PathBuf::from(value),
    }
}

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
    subtype: Option<String>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    system_payload: Option<&'a RawValue>,
}

/// A Gemini `Content`: a role and its parts.
#[derive(Deserialize)]
struct Content {
    role: Option<String>,
    #[serde(default)]
    parts: Vec<Part>,
}

/// One part: only text parts matter (`thought` marks thinking); function calls and responses,
/// inline data and the rest read as parts without text.
#[derive(Deserialize)]
struct Part {
    text: Option<String>,
    #[serde(default)]
    thought: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TitlePayload {
    custom_title: Option<String>,
    title_source: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompressionPayload {
    #[serde(default)]
    compressed_history: Vec<Content>,
}

/// Record `type`s the reader uses (the drift guard checks every fixture record against these and
/// [`IGNORED_RECORD_TYPES`]).
pub const USED_RECORD_TYPES: &[&str] = &["user", "assistant", "system"];
/// Record `type`s seen in real files and deliberately left out.
pub const IGNORED_RECORD_TYPES: &[&str] = &["tool_result"];
/// `system` subtypes the reader uses.
pub const USED_SYSTEM_SUBTYPES: &[&str] = &["custom_title", "chat_compression"];

/// The model's fixed answer to a compression summary: Qwen Code's text, not the model's words.
const ACKNOWLEDGEMENT: &str = "Got it. Thanks for the additional context!";

fn parse(bytes: &[u8]) -> Option<Line<'_>> {
    serde_json::from_slice(bytes).ok()
}

/// The text parts of a content that are not thinking, joined with newlines.
fn text_of(content: &Content) -> String {
    let texts: Vec<&str> = content
        .parts
        .iter()
        .filter(|p| !p.thought)
        .filter_map(|p| p.text.as_deref())
        .collect();
    texts.join("\n")
}

fn content(message: Option<&RawValue>) -> Option<Content> {
    message.and_then(|m| serde_json::from_str::<Content>(m.get()).ok())
}

/// The summary a compression's first user content carries: the `<state_snapshot>` element
/// (Qwen Code appends a fixed "Resume the prior task…" instruction after it), else the text.
fn summary_of(text: &str) -> String {
    const CLOSE: &str = "</state_snapshot>";
    match text.find(CLOSE) {
        Some(end) => text[..end + CLOSE.len()].trim().to_string(),
        None => text.trim().to_string(),
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
        if head.created.is_none() {
            head.created = line.timestamp.as_deref().and_then(parse_time);
        }
        !(head.id.is_some() && head.cwd.is_some() && head.created.is_some())
    }
}

impl HeadScan {
    /// The head, `None` while incomplete; an error when the file is not a Qwen Code transcript.
    pub fn finish(self, path: &Path) -> Result<Option<Head>> {
        self.0.finish(path, "a Qwen Code transcript")
    }
}

/// The title state: last manual title, last generated one, first prompt.
#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TitleScan {
    manual: Option<String>,
    auto: Option<String>,
    first_prompt: Option<String>,
}

impl LineSink for TitleScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        // Once the first prompt is known only a title record matters, and it names its kind
        // literally: every other line is passed over unparsed.
        if self.first_prompt.is_some() && memchr::memmem::find(bytes, b"custom_title").is_none() {
            return true;
        }
        let Some(line) = parse(bytes) else {
            return true;
        };
        match (line.kind.as_deref(), line.subtype.as_deref()) {
            (Some("system"), Some("custom_title")) => {
                let payload = line
                    .system_payload
                    .and_then(|p| serde_json::from_str::<TitlePayload>(p.get()).ok());
                if let Some(payload) = payload {
                    let title = payload.custom_title.filter(|t| !t.trim().is_empty());
                    match payload.title_source.as_deref() {
                        Some("auto") => self.auto = title.or(self.auto.take()),
                        _ => self.manual = title.or(self.manual.take()),
                    }
                }
            }
            (Some("user"), _) if self.first_prompt.is_none() => {
                if let Some(content) = content(line.message) {
                    self.first_prompt = title_line(&text_of(&content));
                }
            }
            _ => {}
        }
        true
    }
}

impl super::agent::TitleScan for TitleScan {
    fn save(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn choose(&self, _side: Option<&dyn SideNames>, _own_id: &str) -> Option<String> {
        self.manual
            .as_deref()
            .or(self.auto.as_deref())
            .and_then(title_line)
            .or_else(|| self.first_prompt.clone())
    }
}

/// What a record on the chain contributes.
enum Payload {
    Item(Item),
    /// A compression: the history before it is replaced by these items.
    Replace(Vec<Item>),
}

/// One record of the tree.
struct Node {
    parent: Option<u32>,
    payload: Option<Payload>,
    present: bool,
}

/// Builds the conversation along the chain that ends at the newest record.
#[derive(Default)]
pub struct ConversationScan {
    ids: HashMap<Box<str>, u32>,
    nodes: Vec<Node>,
    leaf: Option<u32>,
    last_line: Option<u64>,
    last_activity: Option<i64>,
}

impl ConversationScan {
    fn intern(&mut self, uuid: &str) -> u32 {
        if let Some(&at) = self.ids.get(uuid) {
            return at;
        }
        let at = self.nodes.len() as u32;
        self.ids.insert(uuid.into(), at);
        self.nodes.push(Node {
            parent: None,
            payload: None,
            present: false,
        });
        at
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
        if self.nodes.len() >= u32::MAX as usize - 1 {
            return true;
        }
        let time = time.unwrap_or(0);
        let item = |kind, text: String| Item { kind, text, time };
        let payload = match (line.kind.as_deref(), line.subtype.as_deref()) {
            (Some("user"), _) => content(line.message)
                .map(|c| text_of(&c))
                .filter(|t| !t.trim().is_empty())
                .map(|t| Payload::Item(item(ItemKind::User, t))),
            (Some("assistant"), _) => content(line.message)
                .map(|c| text_of(&c).trim().to_string())
                .filter(|t| !t.is_empty())
                .map(|t| Payload::Item(item(ItemKind::Assistant, t))),
            (Some("system"), Some("chat_compression")) => line
                .system_payload
                .and_then(|p| serde_json::from_str::<CompressionPayload>(p.get()).ok())
                .map(|p| Payload::Replace(compressed(&p.compressed_history, time))),
            _ => None,
        };
        let at = self.intern(uuid);
        let parent = line.parent_uuid.as_deref().map(|p| self.intern(p));
        self.nodes[at as usize] = Node {
            parent,
            payload,
            present: true,
        };
        self.leaf = Some(at);
        true
    }
}

/// The items a compression keeps: the summary, then what it kept after the acknowledgement.
fn compressed(history: &[Content], time: i64) -> Vec<Item> {
    let mut items = Vec::new();
    let mut summarized = false;
    for content in history {
        let text = text_of(content);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let user = content.role.as_deref() != Some("model");
        if !summarized && user {
            summarized = true;
            items.push(Item {
                kind: ItemKind::Summary,
                text: summary_of(text),
                time,
            });
        } else if !user && text == ACKNOWLEDGEMENT {
            continue;
        } else {
            items.push(Item {
                kind: if user {
                    ItemKind::User
                } else {
                    ItemKind::Assistant
                },
                text: text.to_string(),
                time,
            });
        }
    }
    items
}

impl ConversationScan {
    /// The chain from the newest record back to the first, in order, with the latest
    /// compression standing in for everything before it.
    pub fn finish(mut self) -> Conversation {
        let mut chain = Vec::new();
        let mut seen = vec![false; self.nodes.len()];
        let mut at = self.leaf;
        while let Some(here) = at {
            let here = here as usize;
            if std::mem::replace(&mut seen[here], true) || !self.nodes[here].present {
                break;
            }
            let node = &mut self.nodes[here];
            at = node.parent;
            match node.payload.take() {
                Some(Payload::Replace(items)) => {
                    chain.extend(items.into_iter().rev());
                    break;
                }
                Some(Payload::Item(item)) => chain.push(item),
                None => {}
            }
        }
        chain.reverse();
        Conversation {
            items: chain,
            last_line: self.last_line,
            last_activity: self.last_activity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::agent::TitleScan as _;
    use super::*;

    fn record(uuid: &str, parent: Option<&str>, kind: &str, rest: &str) -> String {
        let parent = parent.map_or("null".to_string(), |p| format!("\"{p}\""));
        format!(
            r#"{{"uuid":"{uuid}","parentUuid":{parent},"sessionId":"s-1","timestamp":"2026-12-04T00:51:50.673Z","type":"{kind}","cwd":"/home/dev/work/beta","version":"0.24.4"{rest}}}"#
        )
    }

    fn user(uuid: &str, parent: Option<&str>, text: &str) -> String {
        record(
            uuid,
            parent,
            "user",
            &format!(
                r#","provenance":"real_user","message":{{"role":"user","parts":[{{"text":"{text}"}}]}}"#
            ),
        )
    }

    fn model(uuid: &str, parent: &str, text: &str) -> String {
        record(
            uuid,
            Some(parent),
            "assistant",
            &format!(
                r#","message":{{"role":"model","parts":[{{"text":"THINK","thought":true}},{{"text":"{text}"}},{{"functionCall":{{"id":"c1","name":"read_file","args":{{}}}}}}]}}"#
            ),
        )
    }

    fn conversation(lines: &[String]) -> Vec<(ItemKind, String)> {
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
    fn prompts_and_answers_along_the_chain_without_thinking_or_tools() {
        let tool = record(
            "t1",
            Some("a1"),
            "tool_result",
            r#","message":{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"FILE"}}}]}"#,
        );
        let lines = [
            user("u1", None, "QA-T1 read notes"),
            model("a1", "u1", "QA-T1-PRE reading"),
            tool,
            model("a2", "t1", "QA-T1 the notes say hi"),
            record(
                "s1",
                Some("a2"),
                "system",
                r#","subtype":"ui_telemetry","systemPayload":{"response_text":"QA-T1 the notes say hi"}"#,
            ),
            user("u2", Some("s1"), "QA-T2 thanks ✓"),
        ];
        assert_eq!(
            conversation(&lines),
            [
                (ItemKind::User, "QA-T1 read notes".to_string()),
                (ItemKind::Assistant, "QA-T1-PRE reading".to_string()),
                (ItemKind::Assistant, "QA-T1 the notes say hi".to_string()),
                (ItemKind::User, "QA-T2 thanks ✓".to_string()),
            ]
        );
    }

    #[test]
    fn a_rewind_leaves_its_branch_and_a_compression_replaces_what_came_before() {
        let lines = [
            user("u1", None, "first"),
            model("a1", "u1", "answer one"),
            user("u2", Some("a1"), "abandoned"),
            // The rewind re-roots the chain at a1.
            user("u3", Some("a1"), "second"),
            model("a3", "u3", "answer two"),
        ];
        let got = conversation(&lines);
        assert!(!got.iter().any(|(_, t)| t == "abandoned"), "{got:?}");
        let compression = record(
            "c1",
            Some("a3"),
            "system",
            r#","subtype":"chat_compression","systemPayload":{"info":{"compressionStatus":1},"compressedHistory":[{"role":"user","parts":[{"text":"<state_snapshot>QC-SUMMARY two questions.</state_snapshot>\n\nResume the prior task using the summary above."}]},{"role":"model","parts":[{"text":"Got it. Thanks for the additional context!"}]}]}"#,
        );
        let mut lines = lines.to_vec();
        lines.push(compression);
        lines.push(user("u4", Some("c1"), "after"));
        assert_eq!(
            conversation(&lines),
            [
                (
                    ItemKind::Summary,
                    "<state_snapshot>QC-SUMMARY two questions.</state_snapshot>".to_string()
                ),
                (ItemKind::User, "after".to_string()),
            ]
        );
    }

    #[test]
    fn a_manual_title_beats_a_generated_one_and_the_first_prompt() {
        let title = |source: Option<&str>, text: &str| {
            let source = source.map_or(String::new(), |s| format!(r#","titleSource":"{s}""#));
            record(
                "t",
                None,
                "system",
                &format!(
                    r#","subtype":"custom_title","systemPayload":{{"customTitle":"{text}"{source}}}"#
                ),
            )
        };
        let choose = |lines: &[String]| {
            let mut scan = TitleScan::default();
            for (i, line) in lines.iter().enumerate() {
                scan.line(i as u64, line.as_bytes());
            }
            scan.choose(None, "s-1")
        };
        let prompt = user("u1", None, "QN-T1 what is up");
        assert_eq!(
            choose(std::slice::from_ref(&prompt)).as_deref(),
            Some("QN-T1 what is up")
        );
        assert_eq!(
            choose(&[prompt.clone(), title(Some("auto"), "Qn generated")]).as_deref(),
            Some("Qn generated")
        );
        assert_eq!(
            choose(&[
                prompt.clone(),
                title(Some("manual"), "QN Renamed ✓"),
                title(Some("auto"), "Qn generated later"),
            ])
            .as_deref(),
            Some("QN Renamed ✓")
        );
        assert_eq!(
            choose(&[prompt, title(None, "No source is manual")]).as_deref(),
            Some("No source is manual")
        );
    }

    #[test]
    fn the_runtime_directory_beats_qwen_home_as_the_cli_resolves_them() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let home = |pairs| QwenCode.home_from_environment(&env(pairs));
        assert_eq!(home(&[]), None);
        assert_eq!(home(&[("QWEN_HOME", "/q/home")]), Some("/q/home".into()));
        assert_eq!(
            home(&[("QWEN_HOME", "/q/home"), ("QWEN_RUNTIME_DIR", "/q/run")]),
            Some("/q/run".into())
        );
        assert_eq!(
            home(&[("QWEN_RUNTIME_DIR", "~/run"), ("HOME", "/home/dev")]),
            Some("/home/dev/run".into())
        );
        assert_eq!(
            home(&[("QWEN_RUNTIME_DIR", "  "), ("QWEN_HOME", "~")]),
            Some("~".into()),
            "no HOME: the tilde stays"
        );
        assert_eq!(
            home(&[("QWEN_RUNTIME_DIR", "relative/run")]),
            Some("relative/run".into())
        );
    }

    #[test]
    fn heads_need_an_id_a_time_and_name_a_wrong_file() {
        let mut scan = HeadScan::default();
        scan.line(0, user("u1", None, "x").as_bytes());
        let head = scan.finish(Path::new("x.jsonl")).unwrap().unwrap();
        assert_eq!(head.id, "s-1");
        assert_eq!(head.cwd.as_deref(), Some("/home/dev/work/beta"));
        let mut scan = HeadScan::default();
        scan.line(0, b"not json");
        let err = scan.finish(Path::new("x.jsonl")).unwrap_err().to_string();
        assert!(err.contains("Qwen Code"), "{err}");
        assert!(QwenCode.is_session_file(Path::new("/q/projects/-w/chats/s.jsonl")));
        assert!(!QwenCode.is_session_file(Path::new("/q/projects/-w/subagents/s.jsonl")));
        assert!(!QwenCode.is_session_file(Path::new("/q/projects/-w/chats/s.runtime.json")));
    }
}
