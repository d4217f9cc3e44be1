//! Claude Code and Codex sessions as read-only sources (SPEC §9), against every fixture.
//!
//! Every test compares the whole tree of each home byte for byte before and after what it does:
//! reading another agent's sessions never writes, creates or removes anything there.

use crate::support::{agent_fixtures, copy_tree};
use dsh_session_references::reference::{project, Role};
use dsh_session_references::reference::{
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions, WithExternal};
use dsh_session_references::session::{ContentBlock, DiskStore, MessageSource, SessionQuery};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Every path under `root` (directories too) with the bytes of each file.
fn tree(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.insert(path.clone(), None);
                stack.push(path);
            } else {
                out.insert(path.clone(), Some(fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

/// A readable dump of one session: header, title and projected conversation.
async fn dump(query: &dyn SessionQuery, id: &str) -> String {
    let list = query.list_sessions().await.unwrap();
    let summary = list.iter().find(|s| s.id() == id).expect("listed");
    let title = query.read_title(id).await.unwrap();
    let snapshot = query.read_conversation_surface(id).await.unwrap();
    let mut out = format!(
        "== {id}\ntitle: {title:?}\ncwd: {:?}\ncreatedAt: {}\ncapturedThroughSeq: {:?}\n",
        summary.cwd(),
        summary.created_at(),
        snapshot.captured_through_seq
    );
    for item in project(&snapshot) {
        let role = match (item.role, item.checkpoint) {
            (_, true) => "summary",
            (Role::User, _) => "user",
            (Role::Assistant, _) => "assistant",
        };
        let text: String = item.text.chars().take(160).collect();
        let more = if item.text.chars().count() > 160 {
            "…"
        } else {
            ""
        };
        out.push_str(&format!("{role}: {}{more}\n", text.replace('\n', "⏎")));
    }
    out
}

fn service(query: Arc<dyn SessionQuery>) -> SessionReferences {
    SessionReferences::new(query, SessionReferenceConfig::default()).unwrap()
}

fn entries(prepared: &dsh_session_references::reference::Prepared) -> Vec<Value> {
    let context = prepared.additional_context.as_ref().expect("context");
    match &context.source {
        MessageSource::SessionReference { references, .. } => {
            references.as_array().expect("array").clone()
        }
        other => panic!("unexpected source {other:?}"),
    }
}

const CLAUDE_IDS: [&str; 8] = [
    "claude:e9fb405b-169f-40eb-9396-7e75076f045d",
    "claude:4d5611e5-241a-462a-8d15-5122611a9569",
    "claude:55604662-cf2a-4331-851a-ec234028f8ca",
    "claude:d6e0bada-1959-4eec-a9d2-0bfade768d8f",
    "claude:1af7fc5e-8455-4414-9ccd-011d40f70b2a",
    "claude:5c0375b4-57a5-4f26-b12d-d022ee4e51b7",
    "claude:fe5e1c67-53e7-4862-81ae-d0e013e3270b",
    "claude:4c2ddfdc-b619-4525-8d03-1950fb1b0257",
];

const CODEX_IDS: [&str; 7] = [
    "codex:019b7f94-51b4-7593-922e-ba12b5b73b52",
    "codex:019c8a4c-ed82-79a1-aa28-7738fc5ab61a",
    "codex:019c8a59-e9dd-71f0-9ae3-4079fe9726a9",
    "codex:019c8a70-dda7-7f33-98ea-f30553347322",
    "codex:019c8bfe-ec25-79e0-97d7-bda6a9c575ff",
    "codex:019e1625-789d-76c0-80ab-3724b5ddb799",
    "codex:019e1695-0522-7c83-8b39-0dd379793f80",
];

/// Titles asked together come back in the order asked, each what asking for it alone gives:
/// ids of both agents interleaved, a dsh id (the host's), an unknown one and one asked twice.
#[test]
fn titles_asked_together_are_each_the_title_asked_alone() {
    let claude_home = agent_fixtures().join("claude-code");
    let codex_home = agent_fixtures().join("codex");
    let dsh_home = tempfile::tempdir().unwrap();
    let query = WithExternal::new(
        Arc::new(DiskStore::new(dsh_home.path())),
        true,
        vec![
            ExternalSessions::new(ExternalAgent::Claude, &claude_home),
            ExternalSessions::new(ExternalAgent::Codex, &codex_home),
        ],
    );
    let mut ids: Vec<String> = Vec::new();
    for (claude, codex) in CLAUDE_IDS.iter().zip(&CODEX_IDS) {
        ids.push(claude.to_string());
        ids.push(codex.to_string());
    }
    ids.insert(3, "session-00000000-0000-4000-8000-000000000000".into());
    ids.push("claude:not-a-session".into());
    ids.push(CLAUDE_IDS[0].into());
    runtime().block_on(async {
        query.list_sessions().await.unwrap();
        let together = query.read_titles(&ids).await;
        assert_eq!(together.len(), ids.len());
        let mut titled = 0;
        for (id, title) in ids.iter().zip(&together) {
            let alone = query.read_title(id).await;
            match (title, &alone) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{id}"),
                (Err(_), Err(_)) => {}
                _ => panic!("{id}: together {title:?}, alone {alone:?}"),
            }
            titled += usize::from(matches!(title, Ok(Some(_))));
        }
        assert!(titled >= 10, "{titled} titled");
        assert!(together[3].is_err() && together[ids.len() - 2].is_err());
    });
    assert!(runtime().block_on(query.read_titles(&[])).is_empty());
}

#[test]
fn every_fixture_lists_projects_and_prepares_without_writing() {
    let claude_home = agent_fixtures().join("claude-code");
    let codex_home = agent_fixtures().join("codex");
    let before = (tree(&claude_home), tree(&codex_home));
    let dsh_home = tempfile::tempdir().unwrap();
    let query = Arc::new(WithExternal::new(
        Arc::new(DiskStore::new(dsh_home.path())),
        true,
        vec![
            ExternalSessions::new(ExternalAgent::Claude, &claude_home),
            ExternalSessions::new(ExternalAgent::Codex, &codex_home),
        ],
    ));
    runtime().block_on(async {
        let list = query.list_sessions().await.unwrap();
        let mut ids: Vec<&str> = list.iter().map(|s| s.id()).collect();
        ids.sort();
        let mut expected: Vec<&str> = CLAUDE_IDS.iter().chain(&CODEX_IDS).copied().collect();
        expected.sort();
        // Subagent files, the compaction helper and warm-ups are not sessions.
        assert_eq!(ids, expected);
        // Newest first, and each row names its source.
        assert!(list
            .windows(2)
            .all(|w| w[0].created_at() >= w[1].created_at()));
        for summary in list.iter() {
            let source = summary.header.extra.get("source").and_then(Value::as_str);
            assert_eq!(source, Some(summary.id().split(':').next().unwrap()));
        }
        // The same Arc while nothing changed (callers cache on it).
        assert!(Arc::ptr_eq(&list, &query.list_sessions().await.unwrap()));

        let mut all = String::new();
        for id in CLAUDE_IDS.iter().chain(&CODEX_IDS) {
            all.push_str(&dump(query.as_ref(), id).await);
        }
        insta::assert_snapshot!("external_fixture_conversations", all);

        // `prepare` works on them unchanged: one message mentioning a session of each agent.
        let service = service(query.clone());
        let me = AgentIdentity::new("me", Some("/w".into()));
        let prepared = service
            .prepare(
                &me,
                vec![ContentBlock::text("compare these")],
                vec![
                    ReferenceInput::new(CLAUDE_IDS[4], None),
                    ReferenceInput::new(CODEX_IDS[5], None),
                ],
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        let entries = entries(&prepared);
        assert_eq!(entries[0]["sessionId"], CLAUDE_IDS[4]);
        assert_eq!(entries[0]["source"], "claude");
        assert_eq!(entries[1]["source"], "codex");
        let keys: Vec<&str> = entries[1]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "sessionId",
                "label",
                "capturedThroughSeq",
                "compacted",
                "originalMessages",
                "retainedMessages",
                "omittedMessages",
                "omittedBytes",
                "truncated",
                "inputIndex",
                "source"
            ]
        );
        let text = prepared.additional_context.unwrap().content[0]
            .as_text()
            .unwrap()
            .to_string();
        assert!(text.contains(&format!("\"sessionId\":\"{}\"", CLAUDE_IDS[4])));
        assert!(text.contains(&format!("\"sessionId\":\"{}\"", CODEX_IDS[5])));

        // Every fixture prepares on its own.
        for id in CLAUDE_IDS.iter().chain(&CODEX_IDS) {
            service
                .prepare(
                    &me,
                    vec![ContentBlock::text("q")],
                    vec![ReferenceInput::new(*id, None)],
                    &CancellationToken::new(),
                )
                .await
                .unwrap_or_else(|e| panic!("{id}: {e}"));
        }
        // And they are candidates, with their titles as labels.
        let candidates = service
            .list_candidates(&me, "", Some(100), &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(candidates.len(), CLAUDE_IDS.len() + CODEX_IDS.len());
    });
    assert!(
        before == (tree(&claude_home), tree(&codex_home)),
        "a home changed"
    );
}

#[test]
fn synthetic_claude_shapes_compaction_titles_and_subagents() {
    let home = tempfile::tempdir().unwrap();
    let synthetic = agent_fixtures().join("claude-code/synthetic");
    let project = home.path().join("projects/-tmp");
    fs::create_dir_all(&project).unwrap();
    fs::copy(
        synthetic.join("agent-sessions-stage0-small.jsonl"),
        project.join("ses_stage0_small.jsonl"),
    )
    .unwrap();
    copy_tree(
        &synthetic.join("subagent-layout"),
        &home.path().join("projects/-layout"),
    );
    let before = tree(home.path());
    let source = ExternalSessions::new(ExternalAgent::Claude, home.path());
    runtime().block_on(async {
        let list = source.list_sessions().await.unwrap();
        let ids: Vec<&str> = list.iter().map(|s| s.id()).collect();
        assert_eq!(ids.len(), 2, "{ids:?}");
        let mut all = String::new();
        for id in ids {
            all.push_str(&dump(&source, id).await);
        }
        insta::assert_snapshot!("external_synthetic_claude", all);
    });
    assert!(before == tree(home.path()));
}

#[test]
fn a_grown_claude_file_is_read_again_past_its_end() {
    let home = tempfile::tempdir().unwrap();
    let growth = agent_fixtures().join("claude-code/growth");
    let turn1 = fs::read(growth.join("3fb74381-1bf4-475e-8c6f-442d872b1bcf.turn-1.jsonl")).unwrap();
    let turn2 = fs::read(growth.join("3fb74381-1bf4-475e-8c6f-442d872b1bcf.turn-2.jsonl")).unwrap();
    assert!(turn2.starts_with(&turn1));
    let project = home.path().join("projects/-p");
    fs::create_dir_all(&project).unwrap();
    let file = project.join("3fb74381-1bf4-475e-8c6f-442d872b1bcf.jsonl");
    fs::write(&file, &turn1).unwrap();
    let id = "claude:3fb74381-1bf4-475e-8c6f-442d872b1bcf";
    let source = ExternalSessions::new(ExternalAgent::Claude, home.path());
    runtime().block_on(async {
        let first = dump(&source, id).await;
        fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(&turn2[turn1.len()..])
            .unwrap();
        let second = dump(&source, id).await;
        // A fresh reader of the whole grown file agrees with the incremental one.
        let fresh = dump(
            &ExternalSessions::new(ExternalAgent::Claude, home.path()),
            id,
        )
        .await;
        assert_eq!(second, fresh);
        assert_ne!(first, second);
        insta::assert_snapshot!("external_growth", format!("{first}\n{second}"));
    });
}

#[test]
fn a_torn_last_line_is_skipped_until_it_is_complete() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("projects/-p");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s1.jsonl");
    let complete = r#"{"type":"user","uuid":"a","parentUuid":null,"sessionId":"s1","cwd":"/w","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hello"}}"#;
    let torn = r#"{"type":"assistant","uuid":"b","parentUuid":"a","sessionId":"s1","timestamp":"2026-01-01T00:00:01Z","message":{"id":"m","content":[{"type":"text","text":"world"}]}}"#;
    fs::write(&file, format!("{complete}\n{}", &torn[..40])).unwrap();
    let source = ExternalSessions::new(ExternalAgent::Claude, home.path());
    runtime().block_on(async {
        let snapshot = source.read_conversation_surface("claude:s1").await.unwrap();
        let texts: Vec<String> = project(&snapshot).into_iter().map(|i| i.text).collect();
        assert_eq!(texts, ["hello"]);
        assert_eq!(snapshot.captured_through_seq, Some(0));
        fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(format!("{}\n", &torn[40..]).as_bytes())
            .unwrap();
        let snapshot = source.read_conversation_surface("claude:s1").await.unwrap();
        let texts: Vec<String> = project(&snapshot).into_iter().map(|i| i.text).collect();
        assert_eq!(texts, ["hello", "world"]);
    });
}

#[test]
fn codex_synthetic_shapes_legacy_index_names_and_wrong_files() {
    let home = tempfile::tempdir().unwrap();
    let synthetic = agent_fixtures().join("codex/synthetic");
    let day = home.path().join("sessions/2026/01/02");
    fs::create_dir_all(&day).unwrap();
    for (from, to) in [
        (
            "legacy-rollout-44444444-4444-4444-8444-444444444444.jsonl",
            "rollout-2025-06-01T00-00-00-44444444-4444-4444-8444-444444444444.jsonl",
        ),
        (
            "malformed-tail-rollout-66666666-6666-4666-8666-666666666666.jsonl",
            "rollout-2026-02-01T00-00-00-66666666-6666-4666-8666-666666666666.jsonl",
        ),
        (
            "unknown-record-rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
            "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
        ),
        (
            "agent-sessions-stage0-codex-small.jsonl",
            "rollout-2026-08-03T10-48-56-019fc8be-3658-7ca3-9e29-000000000000.jsonl",
        ),
    ] {
        fs::copy(synthetic.join(from), day.join(to)).unwrap();
    }
    // A file of another shape altogether.
    fs::write(day.join("rollout-garbage.jsonl"), "not json at all\n").unwrap();
    fs::write(
        home.path().join("session_index.jsonl"),
        concat!(
            r#"{"id":"11111111-1111-4111-8111-111111111111","thread_name":"first name","updated_at":"2026-01-02T03:05:00Z"}"#,
            "\n",
            r#"{"id":"11111111-1111-4111-8111-111111111111","thread_name":"renamed","updated_at":"2026-01-02T03:06:00Z"}"#,
            "\n",
            r#"{"id":"11111111-1111-4111-8111-111111111111","thread_name":"","updated_at":"2026-01-02T03:07:00Z"}"#,
            "\n",
        ),
    )
    .unwrap();
    let before = tree(home.path());
    let source = ExternalSessions::new(ExternalAgent::Codex, home.path());
    runtime().block_on(async {
        let list = source.list_sessions().await.unwrap();
        let mut ids: Vec<&str> = list.iter().map(|s| s.id()).collect();
        ids.sort();
        // The legacy (pre-envelope) rollout and the garbage file are skipped, not fatal.
        assert_eq!(
            ids,
            [
                "codex:019fc8be-3658-7ca3-9e29-000000000000",
                "codex:11111111-1111-4111-8111-111111111111",
                "codex:66666666-6666-4666-8666-666666666666",
            ]
        );
        assert_eq!(
            source
                .read_title("codex:11111111-1111-4111-8111-111111111111")
                .await
                .unwrap()
                .as_deref(),
            Some("renamed")
        );
        let mut all = String::new();
        for id in ids {
            all.push_str(&dump(&source, id).await);
        }
        insta::assert_snapshot!("external_synthetic_codex", all);
        let err = source
            .read_conversation_surface("codex:44444444-4444-4444-8444-444444444444")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not found"), "{err}");
    });
    assert!(before == tree(home.path()));
}

#[test]
fn a_hostile_title_is_kept_raw_and_escaped_on_screen() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("projects/-p");
    fs::create_dir_all(&project).unwrap();
    let lines = [
        r#"{"type":"user","uuid":"a","parentUuid":null,"sessionId":"evil","cwd":"/w","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}"#,
        r#"{"type":"custom-title","customTitle":"\u001b[2J\u001b]0;owned\u0007Title\u202e","sessionId":"evil"}"#,
    ];
    fs::write(project.join("evil.jsonl"), lines.join("\n") + "\n").unwrap();
    let source = ExternalSessions::new(ExternalAgent::Claude, home.path());
    runtime().block_on(async {
        let title = source.read_title("claude:evil").await.unwrap().unwrap();
        assert!(title.contains('\u{1b}'));
        let shown = dsh_session_references::escape::escape_line(&title);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}') && !shown.contains('\u{202e}')
        );
    });
}

#[test]
fn the_cli_lists_and_prepares_other_agents_sessions_without_writing() {
    let claude_home = agent_fixtures().join("claude-code");
    let codex_home = agent_fixtures().join("codex");
    let before = (tree(&claude_home), tree(&codex_home));
    let dsh_home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
            .arg("--home")
            .arg(dsh_home.path())
            .arg("--claude-home")
            .arg(&claude_home)
            .arg("--codex-home")
            .arg(&codex_home)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, stdout, _) = run(&["sessions", "--json"]);
    assert_eq!(code, Some(0));
    let rows: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(rows.len(), CLAUDE_IDS.len() + CODEX_IDS.len());
    assert!(rows
        .iter()
        .all(|r| r["source"] == r["sessionId"].as_str().unwrap().split(':').next().unwrap()));
    let (_, stdout, _) = run(&["--sources", "codex", "sessions", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(rows.len(), CODEX_IDS.len());
    let (code, _, stderr) = run(&["--sources", "dsh,crush", "sessions"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown source \"crush\""), "{stderr}");
    let claude = dsh_session_references::reference::encode_session_reference_uri(CLAUDE_IDS[7]);
    let codex = dsh_session_references::reference::encode_session_reference_uri(CODEX_IDS[5]);
    let message = format!("compare @[a]({claude}) with @[b]({codex})");
    let (code, stdout, stderr) = run(&["prepare", "--as", "me", &message]);
    assert_eq!(code, Some(0), "{stderr}");
    let prepared: Value = serde_json::from_str(&stdout).unwrap();
    let refs = &prepared["additionalContext"]["source"]["references"];
    assert_eq!(refs[0]["source"], "claude");
    assert_eq!(refs[1]["source"], "codex");
    assert!(
        before == (tree(&claude_home), tree(&codex_home)),
        "a home changed"
    );
}

mod tui {
    use super::*;
    use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
    use dsh_session_references::agent::config::ModelChoice;
    use dsh_session_references::reference::format_session_reference_mention;
    use dsh_session_references::session::external::SourceSet;
    use dsh_session_references::session::Encoding;
    use dsh_session_references::tui::app::{build, App, AppEvent, AppOptions, Wiring};
    use std::time::Duration;

    async fn pump(
        app: &mut App,
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<AppEvent>,
        done: impl Fn(&App) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !done(app) {
            let event = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .expect("the app got what it waited for in time")
                .expect("channel open");
            app.handle(event);
        }
    }

    /// One message referencing a Claude Code session and a Codex session: the log carries
    /// both snapshots, named by source, and neither home changed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_tui_references_a_claude_and_a_codex_session_in_one_message() {
        let claude_home = agent_fixtures().join("claude-code");
        let codex_home = agent_fixtures().join("codex");
        let before = (tree(&claude_home), tree(&codex_home));
        let home = tempfile::tempdir().unwrap();
        let options = AppOptions {
            home: home.path().to_path_buf(),
            resume: None,
            offline_delay: Duration::ZERO,
            encoding: Some(Encoding::Plain),
            cwd: Some("/work".into()),
            sources: SourceSet::from_flags(None, Some(&claude_home), Some(&codex_home)),
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (mut app, _) = build(
            &options,
            Wiring::for_choice(&options, &ModelChoice::Offline).unwrap(),
            tx,
        )
        .unwrap();
        let text = format!(
            "compare {} with {}",
            format_session_reference_mention(CLAUDE_IDS[7], Some("hello files")),
            format_session_reference_mention(CODEX_IDS[5], Some("show tools")),
        );
        app.composer.set_text(&text);
        app.handle(AppEvent::Input(TermEvent::Key(KeyEvent::new(
            KeyCode::Enter,
            KeyModifiers::NONE,
        ))));
        pump(&mut app, &mut rx, |app| app.composer.is_empty()).await;
        let log = home
            .path()
            .join("sessions/--work--")
            .join(&app.agent.info().session_id)
            .join("session.jsonl");
        let mut written = String::new();
        for _ in 0..500 {
            written = fs::read_to_string(&log).unwrap_or_default();
            if written.contains("turn/end") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for needle in [
            format!("\"sessionId\":\"{}\"", CLAUDE_IDS[7]),
            format!("\"sessionId\":\"{}\"", CODEX_IDS[5]),
            "\"source\":\"claude\"".to_string(),
            "\"source\":\"codex\"".to_string(),
            // Text from each source's conversation.
            "delete js".to_string(),
        ] {
            assert!(written.contains(&needle), "{needle} not in the log");
        }
        assert!(
            before == (tree(&claude_home), tree(&codex_home)),
            "a home changed"
        );
    }
}

/// Directories whose stamps settled are looked at with one `stat` each; a listed file whose head
/// was incomplete is still watched, and a new file shows because its directory changed.
#[test]
fn a_warm_listing_still_sees_a_head_complete_and_a_new_file() {
    let home = tempfile::tempdir().unwrap();
    let growth = agent_fixtures().join("claude-code/growth");
    let turn1 = fs::read(growth.join("3fb74381-1bf4-475e-8c6f-442d872b1bcf.turn-1.jsonl")).unwrap();
    let project = home.path().join("projects/-p");
    fs::create_dir_all(&project).unwrap();
    let file = project.join("3fb74381-1bf4-475e-8c6f-442d872b1bcf.jsonl");
    // Only the start of the first line: no head yet.
    fs::write(&file, &turn1[..20]).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let age = |path: &Path| fs::File::open(path).unwrap().set_modified(old).unwrap();
    age(&file);
    age(&project);
    age(&home.path().join("projects"));
    let source = ExternalSessions::new(ExternalAgent::Claude, home.path());
    let ids = |source: &ExternalSessions| -> Vec<String> {
        let list = source.list_sessions_blocking().unwrap();
        list.iter().map(|s| s.header.id.clone()).collect()
    };
    assert!(ids(&source).is_empty());
    let warm = source.list_sessions_blocking().unwrap();
    assert!(Arc::ptr_eq(
        &warm,
        &source.list_sessions_blocking().unwrap()
    ));
    // The head completes: no directory changes, the file is listed.
    fs::write(&file, &turn1).unwrap();
    age(&file);
    age(&project);
    assert_eq!(
        ids(&source),
        ["claude:3fb74381-1bf4-475e-8c6f-442d872b1bcf"]
    );
    // A new session file: its directory changed.
    let other = project.join("aaaaaaaa-1bf4-475e-8c6f-442d872b1bcf.jsonl");
    let text = String::from_utf8(turn1.clone())
        .unwrap()
        .replace("3fb74381-1bf4", "aaaaaaaa-1bf4");
    fs::write(&other, text).unwrap();
    assert_eq!(ids(&source).len(), 2);
}
