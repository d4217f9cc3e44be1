//! GitHub Copilot CLI sessions (`~/.copilot/session-state/<sessionId>/events.jsonl`): head,
//! title and conversation.
//!
//! Purpose: Copilot CLI writes one directory per session, holding an append-only event log
//! (`events.jsonl`, one `{type, data, id, timestamp, parentId}` record a line, `agentId` on a
//! sub-agent's records) and a small `workspace.yaml` (read by `copilot_workspace.rs`). The head
//! is the `session.start` record (`sessionId`, `startTime`, `context.cwd`; the cwd from
//! `workspace.yaml` when the record names none). The conversation is,
//! in order, the person's prompts (`user.message` `content`, never the `transformedContent`
//! with its injected `<current_datetime>`; a message with a `source`, an autopilot
//! continuation or a sub-agent's is not typed) and the assistant's text (`assistant.message`
//! `content`, not a sub-agent's); a successful `session.compaction_complete` replaces everything
//! before it with its `summaryContent`. Tool requests and executions, system messages, usage,
//! model telemetry and the rest are not conversation. A rewind (`/undo`, `/rewind`) rewrites the
//! log as a new file without the withdrawn turns, so it is simply read again. Title: the name
//! the person gave (`-n`, `/rename`: `workspace.yaml` `name` with `user_named: true`), else the
//! last `session.title_changed` in the log (1.0.102's schema marks it ephemeral, never written,
//! but a later version may keep it), else the name Copilot derived itself (`workspace.yaml`
//! `name`: its first prompt when offline), else the first prompt.
//!
//! Invariant: pure line parsers over complete lines (`scan::read_lines` bounds each), linear in
//! the input (a compaction drops what the scan kept so far, each item once); a line that is not
//! a JSON record is skipped like an unknown record type; nothing is written. A log whose
//! `sessionId` is not the name of its directory is refused (the id is how the side file and
//! the session are found again).
//! Proof: the unit tests below over records trimmed from Copilot CLI 1.0.102's files, and
//! `tests/session/copilot_sessions.rs` over a home it wrote.

use super::agent::{AgentFormat, Layout, SideNames};
use super::scan::{read_lines, LineSink};
use super::{parse_time, title_line, Conversation, Head, HeadFields, Item, ItemKind};
use crate::session::error::{Result, SessionError};
use serde::Deserialize;
use std::path::Path;

/// GitHub Copilot CLI (`~/.copilot/session-state/<id>/events.jsonl`; ids `copilot:<id>`).
pub struct CopilotCli;

/// The name of a session's event log inside its directory.
const EVENTS: &str = "events.jsonl";

impl AgentFormat for CopilotCli {
    fn layout(&self) -> &'static Layout {
        const LAYOUT: Layout = Layout {
            name: "copilot",
            product: "GitHub Copilot CLI",
            // `COPILOT_HOME` names the `.copilot` directory itself.
            home_env: "COPILOT_HOME",
            default_home: ".copilot",
            sessions_subdir: "session-state",
            // `session-state/<id>/`.
            depth: 1,
        };
        &LAYOUT
    }

    /// `events.jsonl` in a session's directory (not in `.session-operation-locks` and the
    /// like).
    fn is_session_file(&self, path: &Path) -> bool {
        let dir = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        path.file_name().and_then(|n| n.to_str()) == Some(EVENTS)
            && !dir.is_empty()
            && !dir.starts_with('.')
    }

    fn read_head(&self, path: &Path) -> Result<Option<Head>> {
        let mut scan = HeadScan::default();
        read_lines(path, 0, 0, &mut scan)?;
        let mut head = scan.finish(path)?;
        if let Some(head) = head.as_mut().filter(|h| h.cwd.is_none()) {
            let workspace = path.with_file_name("workspace.yaml");
            head.cwd = super::copilot_workspace::read(&workspace).cwd;
        }
        let dir = path.parent().and_then(Path::file_name);
        match head {
            Some(head) if dir != Some(std::ffi::OsStr::new(&head.id)) => {
                Err(SessionError::Corrupt {
                    path: path.to_path_buf(),
                    line: 1,
                    reason: format!(
                        "sessionId {:?} is not the name of its directory {:?}",
                        head.id,
                        dir.unwrap_or_default()
                    ),
                })
            }
            head => Ok(head),
        }
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

    fn side_names(&self, home: &Path, _listing: Option<&Path>) -> Option<Box<dyn SideNames>> {
        Some(Box::new(super::copilot_workspace::Workspaces::new(
            home.join(self.sessions_subdir()),
        )))
    }
}

/// One record of the event log, as far as the reader looks.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Record {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    timestamp: Option<String>,
    /// Set on a sub-agent's records.
    agent_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    data: Data,
}

/// The `data` keys the reader uses, across record types.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Data {
    session_id: Option<String>,
    start_time: Option<String>,
    context: Option<Context>,
    /// The text of a `user.message` or an `assistant.message`.
    content: Option<String>,
    /// Where a `user.message` came from when the person did not type it (`skill-…`,
    /// `agent-…`).
    source: Option<String>,
    #[serde(default)]
    is_autopilot_continuation: bool,
    /// Set on a sub-agent's assistant messages (older logs).
    parent_tool_call_id: Option<serde::de::IgnoredAny>,
    /// `session.title_changed`.
    title: Option<String>,
    /// `session.compaction_complete`.
    success: Option<bool>,
    summary_content: Option<String>,
}

#[derive(Deserialize, Default)]
struct Context {
    cwd: Option<String>,
}

/// Record `type`s the reader uses (the drift guard checks that the fixture still carries each,
/// and that every record's type is one of these or [`IGNORED_RECORD_TYPES`]).
pub const USED_RECORD_TYPES: &[&str] = &[
    "session.start",
    "user.message",
    "assistant.message",
    "session.compaction_complete",
];
/// Record `type`s seen in real logs and deliberately left out.
pub const IGNORED_RECORD_TYPES: &[&str] = &[
    "system.message",
    "assistant.turn_start",
    "assistant.turn_end",
    "tool.execution_start",
    "tool.execution_complete",
    "session.usage_record",
    "session.usage_checkpoint",
    "session.shutdown",
    "session.resume",
    "session.model_change",
    "session.compaction_start",
    "session.info",
    "model.turn_started",
    "model.model_call_started",
    "model.model_call_success",
    "model.message",
    "model.response",
    "model.turn_ended",
    "model.messages_snapshot",
];

fn parse(bytes: &[u8]) -> Option<Record> {
    serde_json::from_slice(bytes).ok()
}

impl Record {
    /// The prompt the person typed, if this record is one.
    fn typed_prompt(&self) -> Option<&str> {
        let data = &self.data;
        let typed = self.kind.as_deref() == Some("user.message")
            && self.agent_id.is_none()
            && data
                .source
                .as_deref()
                .is_none_or(|s| s.is_empty() || s == "user")
            && !data.is_autopilot_continuation;
        typed
            .then_some(data.content.as_deref())
            .flatten()
            .filter(|t| !t.trim().is_empty())
    }

    /// The main agent's text, if this record is an assistant message that has some.
    fn assistant_text(&self) -> Option<&str> {
        let main = self.kind.as_deref() == Some("assistant.message")
            && self.agent_id.is_none()
            && self.data.parent_tool_call_id.is_none();
        main.then_some(self.data.content.as_deref())
            .flatten()
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }

    /// The summary of a compaction that was applied.
    fn compaction_summary(&self) -> Option<&str> {
        (self.kind.as_deref() == Some("session.compaction_complete")
            && self.data.success == Some(true))
        .then_some(self.data.summary_content.as_deref())
        .flatten()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    }
}

/// Reads until the `session.start` record.
#[derive(Default)]
pub struct HeadScan(HeadFields);

impl LineSink for HeadScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        let head = &mut self.0;
        head.lines += 1;
        let Some(record) = parse(bytes) else {
            return true;
        };
        if record.kind.is_none() {
            return true;
        }
        head.objects += 1;
        if record.kind.as_deref() != Some("session.start") {
            return true;
        }
        let data = record.data;
        head.id = data.session_id;
        head.cwd = data.context.and_then(|c| c.cwd).filter(|c| !c.is_empty());
        head.created = data
            .start_time
            .as_deref()
            .or(record.timestamp.as_deref())
            .and_then(parse_time);
        false
    }
}

impl HeadScan {
    /// The head, `None` while incomplete; an error when the file is not a Copilot CLI log.
    pub fn finish(self, path: &Path) -> Result<Option<Head>> {
        self.0.finish(path, "a GitHub Copilot CLI event log")
    }
}

/// The title state the log itself holds: the last title change and the first prompt.
#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TitleScan {
    changed: Option<String>,
    first_prompt: Option<String>,
}

impl LineSink for TitleScan {
    fn line(&mut self, _: u64, bytes: &[u8]) -> bool {
        // Once the first prompt is known only a title change matters, and it names its type
        // literally: every other line is passed over unparsed.
        if self.first_prompt.is_some()
            && memchr::memmem::find(bytes, b"session.title_changed").is_none()
        {
            return true;
        }
        let Some(record) = parse(bytes) else {
            return true;
        };
        if record.kind.as_deref() == Some("session.title_changed") {
            if let Some(title) = record.data.title.as_deref().and_then(title_line) {
                self.changed = Some(title);
            }
        } else if self.first_prompt.is_none() {
            self.first_prompt = record.typed_prompt().and_then(title_line);
        }
        true
    }
}

impl super::agent::TitleScan for TitleScan {
    fn save(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The person's name for the session, then the last title change, then Copilot's own
    /// derived name, then the first prompt.
    fn choose(&self, side: Option<&dyn SideNames>, own_id: &str) -> Option<String> {
        side.and_then(|s| s.given_name(own_id))
            .or_else(|| self.changed.clone())
            .or_else(|| side.and_then(|s| s.generated_title(own_id)))
            .or_else(|| self.first_prompt.clone())
    }
}

/// Builds the conversation in log order.
#[derive(Default)]
pub struct ConversationScan {
    items: Vec<Item>,
    last_line: Option<u64>,
    last_activity: Option<i64>,
}

impl LineSink for ConversationScan {
    fn line(&mut self, index: u64, bytes: &[u8]) -> bool {
        self.last_line = Some(index);
        let Some(record) = parse(bytes) else {
            return true;
        };
        let time = record.timestamp.as_deref().and_then(parse_time);
        if let Some(t) = time {
            self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
        }
        let time = time.unwrap_or(0);
        let item = |kind, text: &str| Item {
            kind,
            text: text.to_string(),
            time,
        };
        if let Some(text) = record.typed_prompt() {
            self.items.push(item(ItemKind::User, text));
        } else if let Some(text) = record.assistant_text() {
            self.items.push(item(ItemKind::Assistant, text));
        } else if let Some(summary) = record.compaction_summary() {
            self.items.clear();
            self.items.push(item(ItemKind::Summary, summary));
        }
        true
    }
}

impl ConversationScan {
    /// The conversation read so far.
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
    use super::super::agent::TitleScan as _;
    use super::*;

    const ID: &str = "6c477e3e-8f0c-454b-9b5e-8762c22091cf";

    fn record(kind: &str, data: &str, extra: &str) -> String {
        format!(
            r#"{{"type":"{kind}","data":{data},"id":"e1","timestamp":"2026-12-04T08:03:16.230Z","parentId":null{extra}}}"#
        )
    }

    fn start() -> String {
        record(
            "session.start",
            &format!(
                r#"{{"sessionId":"{ID}","version":1,"producer":"copilot-agent","copilotVersion":"1.0.102","startTime":"2026-12-04T08:03:15.839Z","context":{{"cwd":"/home/dev/work/alpha"}}}}"#
            ),
            "",
        )
    }

    fn user(text: &str) -> String {
        record(
            "user.message",
            &format!(
                r#"{{"content":"{text}","transformedContent":"<current_datetime>2026-12-04T08:03:16.230+00:00</current_datetime>\n\n{text}","messageId":"m1"}}"#
            ),
            "",
        )
    }

    fn assistant(text: &str, extra: &str) -> String {
        record(
            "assistant.message",
            &format!(
                r#"{{"messageId":"a1","content":"{text}","toolRequests":[{{"toolCallId":"c1","name":"bash","arguments":{{"command":"echo hi"}}}}]}}"#
            ),
            extra,
        )
    }

    fn compaction(summary: &str, success: bool) -> String {
        record(
            "session.compaction_complete",
            &format!(r#"{{"success":{success},"trigger":"manual","summaryContent":"{summary}"}}"#),
            "",
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
    fn typed_prompts_and_main_answers_without_injected_context_tools_or_sub_agents() {
        let lines = [
            start(),
            user("CA-T1 run a TOOL"),
            record(
                "system.message",
                r#"{"role":"system","content":"You are the GitHub Copilot CLI"}"#,
                "",
            ),
            assistant("", ""),
            record(
                "tool.execution_complete",
                r#"{"toolCallId":"c1","success":true,"result":{"content":"CP-TOOL-OUT-7"}}"#,
                "",
            ),
            assistant("CA-T1-ANSWER é ✓", ""),
            assistant("SUB-AGENT words", r#","agentId":"agent-1""#),
            record(
                "user.message",
                r#"{"content":"SKILL injected","source":"skill-pdf"}"#,
                "",
            ),
            record(
                "user.message",
                r#"{"content":"continue","isAutopilotContinuation":true}"#,
                "",
            ),
            user("CA-T2 日本語"),
            "not json".to_string(),
        ];
        assert_eq!(
            conversation(&lines),
            [
                (ItemKind::User, "CA-T1 run a TOOL".to_string()),
                (ItemKind::Assistant, "CA-T1-ANSWER é ✓".to_string()),
                (ItemKind::User, "CA-T2 日本語".to_string()),
            ]
        );
    }

    #[test]
    fn the_latest_applied_compaction_replaces_what_came_before() {
        let lines = [
            start(),
            user("CC-T1 one"),
            assistant("answer one", ""),
            compaction("CP-SUMMARY first", true),
            user("CC-T2 two"),
            compaction("FAILED summary", false),
            compaction("CP-SUMMARY second", true),
            user("CC-T3 three"),
            assistant("answer three", ""),
        ];
        assert_eq!(
            conversation(&lines),
            [
                (ItemKind::Summary, "CP-SUMMARY second".to_string()),
                (ItemKind::User, "CC-T3 three".to_string()),
                (ItemKind::Assistant, "answer three".to_string()),
            ]
        );
    }

    struct Side(Option<&'static str>, Option<&'static str>);

    impl SideNames for Side {
        fn given_name(&self, _: &str) -> Option<String> {
            self.0.map(str::to_string)
        }
        fn generated_title(&self, _: &str) -> Option<String> {
            self.1.map(str::to_string)
        }
    }

    #[test]
    fn a_given_name_beats_a_title_change_which_beats_the_derived_name_and_the_first_prompt() {
        let mut scan = TitleScan::default();
        for (i, line) in [start(), user(r"CA-T1 first\nsecond line"), user("CA-T2")]
            .iter()
            .enumerate()
        {
            scan.line(i as u64, line.as_bytes());
        }
        assert_eq!(scan.choose(None, ID).as_deref(), Some("CA-T1 first"));
        let derived = Side(None, Some("Derived"));
        assert_eq!(scan.choose(Some(&derived), ID).as_deref(), Some("Derived"));
        scan.line(
            3,
            record("session.title_changed", r#"{"title":"Changed ✓"}"#, "").as_bytes(),
        );
        assert_eq!(
            scan.choose(Some(&derived), ID).as_deref(),
            Some("Changed ✓")
        );
        let named = Side(Some("Named"), Some("Derived"));
        assert_eq!(scan.choose(Some(&named), ID).as_deref(), Some("Named"));
        // The state survives a save and a restore.
        let saved = scan.save();
        let restored = CopilotCli.title_scan(Some(&saved)).unwrap();
        assert_eq!(restored.choose(None, ID).as_deref(), Some("Changed ✓"));
    }

    #[test]
    fn heads_come_from_session_start_and_name_a_wrong_file() {
        let mut scan = HeadScan::default();
        scan.line(0, start().as_bytes());
        let head = scan.finish(Path::new("events.jsonl")).unwrap().unwrap();
        assert_eq!(head.id, ID);
        assert_eq!(head.cwd.as_deref(), Some("/home/dev/work/alpha"));
        assert_eq!(
            head.created_at,
            parse_time("2026-12-04T08:03:15.839Z").unwrap()
        );
        let mut scan = HeadScan::default();
        scan.line(0, b"not json");
        let err = scan.finish(Path::new("x")).unwrap_err().to_string();
        assert!(err.contains("Copilot"), "{err}");
        let mut scan = HeadScan::default();
        scan.line(0, user("before start").as_bytes());
        assert!(scan.finish(Path::new("x")).unwrap().is_none());
        assert!(CopilotCli.is_session_file(Path::new("/c/session-state/abc/events.jsonl")));
        assert!(!CopilotCli.is_session_file(Path::new("/c/session-state/abc/workspace.yaml")));
        assert!(!CopilotCli.is_session_file(Path::new(
            "/c/session-state/.session-operation-locks/events.jsonl"
        )));
    }

    #[test]
    fn a_log_whose_id_is_not_its_directory_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("session-state").join("other-id");
        std::fs::create_dir_all(&session).unwrap();
        let file = session.join(EVENTS);
        std::fs::write(&file, format!("{}\n", start())).unwrap();
        let err = CopilotCli.read_head(&file).unwrap_err().to_string();
        assert!(err.contains("not the name of its directory"), "{err}");
        // A start without a cwd takes the workspace file's.
        let bare = dir.path().join("session-state").join("bare");
        std::fs::create_dir_all(&bare).unwrap();
        let bare_start = start()
            .replace(ID, "bare")
            .replace(r#","context":{"cwd":"/home/dev/work/alpha"}"#, "");
        std::fs::write(bare.join(EVENTS), format!("{bare_start}\n")).unwrap();
        assert_eq!(
            CopilotCli
                .read_head(&bare.join(EVENTS))
                .unwrap()
                .unwrap()
                .cwd,
            None
        );
        std::fs::write(bare.join("workspace.yaml"), "id: bare\ncwd: /from/yaml\n").unwrap();
        let head = CopilotCli.read_head(&bare.join(EVENTS)).unwrap().unwrap();
        assert_eq!(head.cwd.as_deref(), Some("/from/yaml"));
        let good = dir.path().join("session-state").join(ID);
        std::fs::create_dir_all(&good).unwrap();
        std::fs::write(good.join(EVENTS), format!("{}\n", start())).unwrap();
        assert_eq!(
            CopilotCli
                .read_head(&good.join(EVENTS))
                .unwrap()
                .unwrap()
                .id,
            ID
        );
    }
}
