//! Hostile sessions: logs written by someone else, with terminal escapes, bidi controls, 1 MB
//! lines, invalid UTF-8 and deep JSON nesting in ids, cwds, titles and texts.
//!
//! What must hold: nothing panics or overflows the stack; nothing reaches the screen raw (every
//! cell the popup and composer draw is free of C0/C1 controls and bidi controls); and where the
//! contract rejects input, the error is a clear one naming what and where.

use crate::support;

use dsh_session_references::escape::{is_bidi_or_separator, is_control};
use dsh_session_references::reference::{
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::reader::read_log;
use dsh_session_references::session::store::{read_conversation_surface_file, read_surface_file};
use dsh_session_references::session::{
    ContentBlock, DiskStore, Encoding, EventData, Message, MessageSource, SessionError,
    SessionHeader, SessionWriter,
};
use dsh_session_references::tui::composer::Composer;
use dsh_session_references::tui::popup::PopupState;
use dsh_session_references::tui::Renderable;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

use crate::support::place_log;
use tokio_util::sync::CancellationToken;

/// Strings that try to drive the terminal or reorder text.
const HOSTILE: &[&str] = &[
    "\u{1b}[31mred\u{1b}[0m",
    "\u{1b}]0;pwned title\u{7}",
    "\u{1b}]52;c;Y29weQ==\u{7}",
    "bell\u{7}\u{7}",
    "csi\u{9b}2J",
    "nul\u{0}byte",
    "line\nbreak\r\nand\ttab",
    "\u{202e}txt.exe",
    "iso\u{2066}late\u{2069}",
    "del\u{7f}c1\u{85}",
    "sep\u{2028}para\u{2029}",
];

fn hostile(i: usize) -> &'static str {
    HOSTILE[i % HOSTILE.len()]
}

/// Every drawn cell is free of characters that could act on the terminal.
fn assert_inert(buf: &Buffer, what: &str) {
    for y in buf.area.top()..buf.area.bottom() {
        for x in buf.area.left()..buf.area.right() {
            let symbol = buf[(x, y)].symbol();
            for c in symbol.chars() {
                assert!(
                    !is_control(c) && !is_bidi_or_separator(c),
                    "{what}: raw {c:?} drawn at ({x}, {y})"
                );
            }
        }
    }
}

fn text(buf: &Buffer) -> String {
    let mut out = String::new();
    for y in buf.area.top()..buf.area.bottom() {
        for x in buf.area.left()..buf.area.right() {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

fn user(text: &str) -> EventData {
    EventData::UserMessage(Message::new(
        "user",
        vec![ContentBlock::text(text)],
        MessageSource::user(),
        "u".into(),
    ))
}

fn title(text: &str) -> EventData {
    EventData::SessionTitle {
        title: text.into(),
        message_seqs: vec![],
        source: Value::Null,
        extra: Default::default(),
    }
}

/// A home whose sessions have hostile ids, cwds, titles and texts.
fn hostile_home(home: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..HOSTILE.len() {
        let id = format!("evil-{i}-{}", hostile(i));
        let cwd = Some(format!("/home/{}", hostile(i + 3)));
        let mut writer = SessionWriter::create(
            home,
            SessionHeader::new(id.clone(), 1_000 + i as i64, cwd),
            if i % 2 == 0 {
                Encoding::Plain
            } else {
                Encoding::Zstd
            },
        )
        .unwrap();
        writer
            .append(vec![
                user(&format!("prompt {}", hostile(i + 1))).into(),
                title(&format!("title {}", hostile(i + 2))).into(),
            ])
            .unwrap();
        ids.push(id);
    }
    ids
}

fn service(home: &Path) -> SessionReferences {
    SessionReferences::new(
        Arc::new(DiskStore::new(home)),
        SessionReferenceConfig::default(),
    )
    .unwrap()
}

#[tokio::test]
async fn hostile_ids_cwds_and_titles_are_escaped_on_screen() {
    let home = tempfile::tempdir().unwrap();
    let ids = hostile_home(home.path());
    let service = service(home.path());
    let agent = AgentIdentity::new("me", None);
    let cancel = CancellationToken::new();
    let candidates = service
        .list_candidates(&agent, "", None, &cancel)
        .await
        .unwrap();
    assert_eq!(candidates.len(), ids.len());
    // The raw strings come back from the store untouched: escaping is the screen's business.
    assert!(candidates.iter().any(|c| c.session_id == ids[0]));
    assert!(candidates.iter().all(|c| c.label.starts_with("title ")));

    let mut popup = PopupState::new();
    popup.set_page_rows(HOSTILE.len() + 2);
    let request = popup.open("", false).unwrap();
    popup.apply_results(request.id, Ok(candidates.clone()));
    for width in [20u16, 60, 120] {
        let view = popup.view(10_000);
        let area = Rect::new(0, 0, width, view.desired_height(width));
        let mut buf = Buffer::empty(area);
        view.render(area, &mut buf);
        assert_inert(&buf, &format!("popup at width {width}"));
        if width == 120 {
            let shown = text(&buf);
            assert!(
                shown.contains("\\x1B"),
                "escapes are shown visibly:\n{shown}"
            );
        }
    }

    // Inserting every hostile candidate as a mention: the composer draws it inert, and the
    // submitted Markdown keeps the raw id in its URI.
    for candidate in &candidates {
        let mut composer = Composer::new();
        composer.insert_mention(candidate);
        let area = Rect::new(0, 0, 50, composer.desired_height(50));
        let mut buf = Buffer::empty(area);
        composer.render(area, &mut buf);
        assert_inert(&buf, "composer");
        let submitted = composer.submission_text();
        let parsed =
            dsh_session_references::reference::parse_session_reference_text(&submitted).unwrap();
        assert_eq!(parsed.references[0].session_id, candidate.session_id);
    }

    // And the snapshot of a hostile source is built, its text intact (JSON-escaped for the
    // model, never interpreted).
    let prepared = service
        .prepare(
            &agent,
            vec![ContentBlock::text("look")],
            vec![ReferenceInput::new(ids[0].clone(), None)],
            &cancel,
        )
        .await
        .unwrap();
    let context = prepared.additional_context.unwrap().text();
    assert!(context.contains("\\u001b[31m") || context.contains("prompt"));
    assert!(!context.contains('\u{1b}'));
}

#[tokio::test]
async fn one_megabyte_lines_are_read_bounded_and_drawn() {
    let home = tempfile::tempdir().unwrap();
    let big = "é".repeat(512 * 1024); // 1 MiB of UTF-8
    for (n, encoding) in [Encoding::Plain, Encoding::Zstd].into_iter().enumerate() {
        let mut writer = SessionWriter::create(
            home.path(),
            SessionHeader::new(format!("big-{n}"), n as i64, Some("/w".into())),
            encoding,
        )
        .unwrap();
        let tool = Message::new(
            "user",
            vec![ContentBlock::ToolResult {
                tool_call_id: "c".into(),
                content: vec![ContentBlock::text(big.clone())],
                is_error: None,
                extra: Default::default(),
            }],
            MessageSource::Tool {
                call_id: "c".into(),
                extra: Default::default(),
            },
            "t".into(),
        );
        writer
            .append(vec![
                user(&big).into(),
                EventData::ToolResult {
                    turn: 1.into(),
                    step: 1.into(),
                    message: tool,
                    extra: Default::default(),
                }
                .into(),
                title(&format!("{big}\u{1b}[2J")).into(),
            ])
            .unwrap();
        let path = writer.path().to_path_buf();
        assert_eq!(read_surface_file(&path).unwrap().events.len(), 2);
        let lean = read_conversation_surface_file(&path).unwrap();
        assert_eq!(lean.events.len(), 2);
        assert_eq!(lean.events[1].data.get(), "null", "tool output is not kept");
    }
    let service = service(home.path());
    let agent = AgentIdentity::new("me", None);
    let cancel = CancellationToken::new();
    let prepared = service
        .prepare(
            &agent,
            vec![ContentBlock::text("look")],
            vec![
                ReferenceInput::new("big-0", None),
                ReferenceInput::new("big-1", None),
            ],
            &cancel,
        )
        .await
        .unwrap();
    let context = prepared.additional_context.unwrap();
    // Each source is cut to the budget (64 KiB of JSON), not carried whole.
    assert!(context.text().len() < 3 * 65_536);
    let stats = serde_json::to_value(&context.source).unwrap();
    assert_eq!(stats["references"][0]["truncated"], true);

    // A 1 MiB cwd cannot be cut (only conversation text is): the contract's clear refusal.
    SessionWriter::create(
        home.path(),
        SessionHeader::new("big-cwd", 9, Some(big.clone())),
        Encoding::Plain,
    )
    .unwrap()
    .append(vec![user("hi").into()])
    .unwrap();
    let err = service
        .prepare(
            &agent,
            vec![ContentBlock::text("look")],
            vec![ReferenceInput::new("big-cwd", None)],
            &cancel,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "SESSION_REFERENCE_BUDGET_EXCEEDED");
    assert!(err.message().contains("big-cwd"), "{}", err.message());

    let candidates = service
        .list_candidates(&agent, "big-", None, &cancel)
        .await
        .unwrap();
    assert_eq!(candidates.len(), 3);
    assert_eq!(candidates[0].cwd.as_ref().map(String::len), Some(big.len()));
    assert_eq!(candidates[1].label.len(), big.len() + 4);
    let mut popup = PopupState::new();
    let request = popup.open("", false).unwrap();
    popup.apply_results(request.id, Ok(candidates));
    let view = popup.view(0);
    let area = Rect::new(0, 0, 100, view.desired_height(100));
    let mut buf = Buffer::empty(area);
    view.render(area, &mut buf);
    assert_inert(&buf, "popup with 1 MiB labels");
}

fn header_line(id: &str) -> String {
    format!("{{\"type\":\"session\",\"version\":0,\"id\":\"{id}\",\"createdAt\":1,\"delegationDepth\":0}}\n")
}

fn event_line(seq: u64, kind: &str, data: &str) -> String {
    let op = if kind.contains("message") || kind == "tool/result" {
        ",\"surfaceOp\":\"append\""
    } else {
        ""
    };
    format!("{{\"type\":\"{kind}\",\"seq\":{seq},\"time\":1,\"data\":{data}{op}}}\n")
}

const USER_DATA: &str =
    r#"{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u"}"#;

#[test]
fn invalid_utf8_is_a_torn_tail_or_a_clear_corruption_error() {
    let home = tempfile::tempdir().unwrap();
    let mut bytes = header_line("bad-utf8").into_bytes();
    bytes.extend(event_line(0, "user/message", USER_DATA).as_bytes());
    let mut broken = event_line(1, "user/message", USER_DATA).into_bytes();
    let at = broken.windows(2).position(|w| w == b"hi").unwrap();
    broken[at] = 0xFF;
    // At the end: a torn tail, the valid prefix kept.
    let mut tail = bytes.clone();
    tail.extend(&broken);
    let path = place_log(home.path(), "--p--", "tail", "session.jsonl", &tail);
    let (scan, records) = read_log(&path).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(scan.torn_tail.unwrap().line, 3);
    assert_eq!(
        read_conversation_surface_file(&path).unwrap().events.len(),
        1
    );
    // In the middle (a turn/end follows): corruption, naming file and line.
    let mut middle = tail.clone();
    middle.extend(event_line(2, "turn/end", r#"{"turn":1,"reason":"stop"}"#).as_bytes());
    let path = place_log(home.path(), "--p--", "middle", "session.jsonl", &middle);
    for result in [
        read_log(&path).map(|_| ()),
        read_conversation_surface_file(&path).map(|_| ()),
    ] {
        match result {
            Err(SessionError::Corrupt { line, reason, .. }) => {
                assert_eq!(line, 3);
                assert!(reason.contains("unparsable"), "{reason}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }
    // A header that is not UTF-8: the session is left out of listings, not a crash.
    let mut header = header_line("bad-header").into_bytes();
    let at = header.windows(3).position(|w| w == b"bad").unwrap();
    header[at] = 0xC3;
    place_log(home.path(), "--p--", "hdr", "session.jsonl", &header);
    let listed = DiskStore::new(home.path())
        .list_sessions_blocking()
        .unwrap();
    assert!(listed.iter().all(|s| s.id() != "bad-header"));
}

/// Runs `f` on a thread with a 2 MiB stack: 100,000 levels would overflow it many times over if
/// any reader recursed per level (serde stops at 128).
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .expect("no stack overflow or panic")
}

#[test]
fn deep_nesting_never_recurses_deeply() {
    let depth = 100_000;
    let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let deep_object = format!("{{\"content\":{deep}}}");
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_path_buf();

    // (a) Deep `data` of a message: the record is well-formed JSON and the log reads (raw values
    // are checked without recursion); decoding the message hits serde's recursion limit, so the
    // projection leaves it out.
    let mut log = header_line("deep-data");
    log.push_str(&event_line(0, "user/message", USER_DATA));
    log.push_str(&event_line(1, "user/message", &deep_object));
    log.push_str(&event_line(2, "tool/result", &deep));
    for (name, bytes) in [
        ("session.jsonl", log.clone().into_bytes()),
        (
            "session.jsonl.zstd",
            support::to_zstd_frames(log.as_bytes(), 1),
        ),
    ] {
        let path = place_log(
            &home_path,
            "--deep--",
            &format!("d{}", name.len()),
            name,
            &bytes,
        );
        let events = on_small_stack(move || {
            let full = read_surface_file(&path).unwrap();
            let lean = read_conversation_surface_file(&path).unwrap();
            assert_eq!(full.events.len(), lean.events.len());
            let err = full.events[1].message("deep-data").unwrap_err();
            assert!(err.to_string().contains("recursion limit"), "{err}");
            full.events.len()
        });
        assert_eq!(events, 3);
    }

    // (b) Deep nesting in an unknown top-level field: serde decodes those, hits its limit, and
    // the line is unparsable: a clear corruption error when a turn/end follows.
    let mut log = header_line("deep-extra");
    log.push_str(&format!(
        "{{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{{}},\"x\":{deep}}}\n"
    ));
    log.push_str(&event_line(1, "turn/end", r#"{"turn":1,"reason":"stop"}"#));
    let path = place_log(
        &home_path,
        "--deep--",
        "extra",
        "session.jsonl",
        log.as_bytes(),
    );
    let message = on_small_stack(move || read_log(&path).unwrap_err().to_string());
    assert!(
        message.contains("line 2") && message.contains("recursion limit"),
        "{message}"
    );

    // (c) An unclosed deep line at the end: a torn tail.
    let mut log = header_line("deep-torn");
    log.push_str(&event_line(0, "user/message", USER_DATA));
    log.push_str(&"[".repeat(depth));
    let path = place_log(
        &home_path,
        "--deep--",
        "torn",
        "session.jsonl",
        log.as_bytes(),
    );
    let torn = on_small_stack(move || read_conversation_surface_file(&path).unwrap());
    assert_eq!(torn.events.len(), 1);

    // (d) A header nested deeply: an invalid header, named as such.
    let header = format!(
        "{{\"type\":\"session\",\"version\":0,\"id\":\"h\",\"createdAt\":1,\"x\":{deep}}}\n"
    );
    let path = place_log(
        &home_path,
        "--deep--",
        "hdr",
        "session.jsonl",
        header.as_bytes(),
    );
    let message = on_small_stack(move || read_log(&path).unwrap_err().to_string());
    assert!(message.contains("invalid session header"), "{message}");

    // (e) The service over all of it: candidates list, and prepare of the deep source works.
    let service = service(&home_path);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let agent = AgentIdentity::new("me", None);
    let cancel = CancellationToken::new();
    let prepared = rt
        .block_on(service.prepare(
            &agent,
            vec![ContentBlock::text("x")],
            vec![ReferenceInput::new("deep-data", None)],
            &cancel,
        ))
        .unwrap();
    assert!(prepared.additional_context.unwrap().text().contains("hi"));
}
