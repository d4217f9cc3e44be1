//! Codex rollouts (`sessions/YYYY/MM/DD/rollout-*.jsonl`): head, title and conversation.
//!
//! Pure line parsers fed by `external::scan`. A rollout opens with a `session_meta` envelope; a
//! file that does not (the mid-2025 pre-envelope format, or anything else) is not listed, and
//! the error says why. Typed prompts come from `event_msg/user_message` (user `response_item`s
//! also carry injected AGENTS.md and environment blocks), replies from assistant `message`
//! items. The newest `compacted` item replaces what came before it: its `replacement_history`
//! when present, else the earlier prompts; its `message`, when not empty, is the checkpoint. A
//! `thread_rolled_back` event drops the last N user turns.

use super::{parse_time, title_line, Conversation, Head, Item, ItemKind};
use crate::session::error::{Result, SessionError};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::path::Path;

#[derive(Deserialize)]
struct Line<'a> {
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(borrow)]
    payload: &'a RawValue,
}

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
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
}

fn envelope(bytes: &[u8]) -> Option<Line<'_>> {
    serde_json::from_slice(bytes).ok()
}

fn payload<'a>(line: &Line<'a>) -> Option<Payload<'a>> {
    serde_json::from_str(line.payload.get()).ok()
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

/// Reads the first record, which must be the file's `session_meta`.
#[derive(Default)]
pub struct HeadScan {
    head: Option<Head>,
    wrong: Option<String>,
}

impl super::scan::LineSink for HeadScan {
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
        match serde_json::from_str::<Meta>(line.payload.get()) {
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
#[derive(Default)]
pub struct TitleScan {
    name: Option<String>,
    first_prompt: Option<String>,
}

impl super::scan::LineSink for TitleScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        let Some(line) = envelope(bytes) else {
            return true;
        };
        if line.kind != "event_msg" {
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
        self.name
            .as_deref()
            .and_then(title_line)
            .or_else(|| self.first_prompt.clone())
    }
}

/// The request itself when the IDE prefixed the prompt with the files it mentions.
fn request(message: &str) -> &str {
    const MARK: &str = "## My request for Codex:";
    match message.find(MARK) {
        Some(at) => &message[at + MARK.len()..],
        None => message,
    }
}

/// `session_index.jsonl`: the last non-empty `thread_name` per id.
#[derive(Default)]
pub struct IndexScan {
    /// Thread id → its last non-empty `thread_name`.
    pub names: HashMap<String, String>,
}

impl super::scan::LineSink for IndexScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        #[derive(Deserialize)]
        struct Entry {
            id: String,
            thread_name: Option<String>,
        }
        if let Ok(entry) = serde_json::from_slice::<Entry>(bytes) {
            if let Some(name) = entry.thread_name.as_deref().and_then(title_line) {
                self.names.insert(entry.id, name);
            }
        }
        true
    }
}

/// Builds the conversation in file order.
#[derive(Default)]
pub struct ConversationScan {
    items: Vec<Item>,
    last_line: Option<u64>,
    last_activity: Option<i64>,
}

impl super::scan::LineSink for ConversationScan {
    fn line(&mut self, index: u64, bytes: &[u8]) -> bool {
        self.last_line = Some(index);
        let Some(line) = envelope(bytes) else {
            return true;
        };
        let time = line.timestamp.as_deref().and_then(parse_time);
        if let Some(t) = time {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
        let time = time.unwrap_or(0);
        let Some(p) = payload(&line) else {
            return true;
        };
        match (line.kind.as_str(), p.kind.as_deref()) {
            ("event_msg", Some("user_message")) => {
                let text = p.message.unwrap_or_default().trim().to_string();
                self.push(ItemKind::User, text, time);
            }
            ("event_msg", Some("thread_rolled_back")) => {
                let turns = p.num_turns.unwrap_or(0);
                let mut seen = 0;
                let mut cut = self.items.len();
                for (at, item) in self.items.iter().enumerate().rev() {
                    if seen == turns {
                        break;
                    }
                    if item.kind == ItemKind::User {
                        seen += 1;
                        cut = at;
                    }
                }
                if turns > 0 {
                    self.items.truncate(cut);
                }
            }
            ("response_item", Some("message")) if p.role.as_deref() == Some("assistant") => {
                self.push(ItemKind::Assistant, blocks_text(p.content), time);
            }
            ("compacted", _) => {
                let mut items = Vec::new();
                match p.replacement_history {
                    Some(history) => {
                        for entry in history {
                            let Ok(e) = serde_json::from_str::<Payload>(entry.get()) else {
                                continue;
                            };
                            if e.kind.as_deref() != Some("message") {
                                continue;
                            }
                            let text = blocks_text(e.content).trim().to_string();
                            let kind = match e.role.as_deref() {
                                Some("user") if !is_injected(&text) => ItemKind::User,
                                Some("assistant") => ItemKind::Assistant,
                                _ => continue,
                            };
                            if !text.is_empty() {
                                items.push(Item { kind, text, time });
                            }
                        }
                    }
                    None => items.extend(self.items.drain(..).filter(|i| i.kind == ItemKind::User)),
                }
                if let Some(summary) = p.message.map(|m| m.trim().to_string()) {
                    if !summary.is_empty() {
                        items.push(Item {
                            kind: ItemKind::Summary,
                            text: summary,
                            time,
                        });
                    }
                }
                self.items = items;
            }
            _ => {}
        }
        true
    }
}

impl ConversationScan {
    fn push(&mut self, kind: ItemKind, text: String, time: i64) {
        if !text.is_empty() {
            self.items.push(Item { kind, text, time });
        }
    }

    /// The conversation read so far, with the last complete line and the newest record time.
    pub fn finish(self) -> Conversation {
        Conversation {
            items: self.items,
            last_line: self.last_line,
            last_activity: self.last_activity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::scan::LineSink;
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
