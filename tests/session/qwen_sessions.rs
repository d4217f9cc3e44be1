//! Qwen Code sessions as a read-only source (SPEC §9), over a home the real Qwen Code 0.24.4
//! wrote against a mock model on loopback (`tests/data/gen/qwen/`): a tool call and a resumed
//! turn (QA), one turn with non-ASCII text (QB), and an interactive session with two turns, a
//! `/compress`, a turn after it and a `/rename` (QC/QN).
//!
//! Every test compares the whole home (bytes, modes, mtimes) before and after what it does.

use crate::support::{agent_home, projected_lines, tree_with_stamps, TreeEntry};
use dsh_session_references::reference::{
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::external::{qwen, ExternalAgent, ExternalSessions};
use dsh_session_references::session::{ContentBlock, SessionQuery};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const QA: &str = "qwen:30cbd368-9fc9-44d7-8e8c-67f81cfb5a09";
const QB: &str = "qwen:a43ffa41-25bc-488d-8355-24a08019947b";
const QC: &str = "qwen:5f87aa5d-ccd1-45fc-ab82-ac818597d96f";

fn tree(root: &Path) -> BTreeMap<PathBuf, TreeEntry> {
    tree_with_stamps(root)
}

fn home() -> (tempfile::TempDir, PathBuf) {
    agent_home("qwen-code", ".qwen")
}

fn conversation(source: &ExternalSessions, id: &str) -> Vec<String> {
    projected_lines(source, id)
}

#[test]
fn the_real_clis_sessions_list_title_and_project_without_writing() {
    let (_dir, home) = home();
    let before = tree(&home);
    let source = ExternalSessions::new(ExternalAgent::Qwen, &home);
    let listed = source.list_sessions_blocking().unwrap();
    let mut rows: Vec<(String, Option<String>, Option<String>)> = listed
        .iter()
        .map(|s| {
            let title = source.read_title_blocking(s.id()).unwrap();
            (s.id().to_string(), s.cwd().map(str::to_string), title)
        })
        .collect();
    rows.sort();
    let mut expected = vec![
        (
            QA.to_string(),
            Some("/tmp/qwen-cap/work/alpha".to_string()),
            Some("QA-T1 please run a TOOL and tell me".to_string()),
        ),
        (
            QB.to_string(),
            Some("/tmp/qwen-cap/work/beta".to_string()),
            Some("QB-T1 plain question 🚀".to_string()),
        ),
        (
            QC.to_string(),
            Some("/tmp/qwen-cap/work/beta".to_string()),
            // The name given with /rename beats the first prompt.
            Some("QN Renamed Session ✓".to_string()),
        ),
    ];
    expected.sort();
    assert_eq!(rows, expected);

    // QA: the typed prompts and the answers, across the resumed turn; no thinking, no tool.
    let qa = conversation(&source, QA);
    assert_eq!(
        qa,
        [
            "user: QA-T1 please run a TOOL and tell me",
            "assistant: QA-T1-ANSWER reply to your words, é ✓ 🚀.",
            "user: QA-T2 second question é ✓",
            "assistant: QA-T2-ANSWER reply to your words, é ✓ 🚀.",
        ]
    );
    // QC: the compression's summary stands in for the two turns before it.
    let qc = conversation(&source, QC);
    assert_eq!(
        qc,
        [
            "summary: <state_snapshot>QC-SUMMARY the user asked two questions before compression.</state_snapshot>",
            "user: QC-T3 after compression",
            "assistant: QC-T3-ANSWER reply to your words, é ✓ 🚀.",
        ]
    );
    for text in qa.iter().chain(&qc) {
        for hidden in [
            "THINK",
            "QC-TOOL-OUT-7",
            "Got it.",
            "Resume the prior task",
            "QC-T1",
        ] {
            assert!(!text.contains(hidden), "{hidden:?} leaked: {text}");
        }
    }

    // prepare through the service, a reference to each.
    let query: Arc<dyn SessionQuery> = Arc::new(source.clone());
    let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
    let prepared = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(service.prepare(
            &AgentIdentity::new("me", Some("/w".into())),
            vec![ContentBlock::text("compare these")],
            vec![ReferenceInput::new(QA, None), ReferenceInput::new(QC, None)],
            &CancellationToken::new(),
        ))
        .unwrap();
    let context = serde_json::to_string(&prepared.additional_context.unwrap()).unwrap();
    assert!(
        context.contains("QA-T2-ANSWER") && context.contains("QC-SUMMARY"),
        "{context}"
    );
    assert!(
        context.contains(r#"\"source\":\"qwen\""#) || context.contains(r#""source":"qwen""#),
        "{context}"
    );

    assert_eq!(
        tree(&home),
        before,
        "no byte, mode or mtime under the home changed"
    );
}

#[test]
fn a_session_that_vanishes_after_listing_is_not_found() {
    let (_dir, home) = home();
    let source = ExternalSessions::new(ExternalAgent::Qwen, &home);
    source.list_sessions_blocking().unwrap();
    fs::remove_file(
        home.join(
            "projects/-tmp-qwen-cap-work-beta/chats/a43ffa41-25bc-488d-8355-24a08019947b.jsonl",
        ),
    )
    .unwrap();
    let err = source
        .read_conversation_blocking(QB)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a43ffa41-25bc-488d-8355-24a08019947b"),
        "{err}"
    );
}

/// Drift guard: every record type and `system` subtype in the fixtures is one the reader uses or
/// deliberately ignores, and those it uses are still written by the CLI.
#[test]
fn the_record_kinds_the_reader_relies_on_are_still_written() {
    let (_dir, home) = home();
    let mut kinds = std::collections::BTreeSet::new();
    let mut subtypes = std::collections::BTreeSet::new();
    for (path, (_, _, _, bytes)) in tree(&home) {
        let Some(bytes) = bytes else { continue };
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        for line in String::from_utf8(bytes).unwrap().lines() {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            kinds.insert(record["type"].as_str().unwrap_or_default().to_string());
            if let Some(subtype) = record["subtype"].as_str() {
                subtypes.insert(subtype.to_string());
            }
        }
    }
    for kind in &kinds {
        assert!(
            qwen::USED_RECORD_TYPES.contains(&kind.as_str())
                || qwen::IGNORED_RECORD_TYPES.contains(&kind.as_str()),
            "Qwen Code wrote a record type the reader does not know: {kind:?}"
        );
    }
    for used in qwen::USED_RECORD_TYPES
        .iter()
        .chain(qwen::USED_SYSTEM_SUBTYPES)
    {
        assert!(
            kinds.contains(*used) || subtypes.contains(*used),
            "no fixture record is of kind {used:?}: did Qwen Code stop writing it?"
        );
    }
}

/// The command line lists them with `--sources qwen --qwen-home` and prepares a mention.
#[test]
fn the_cli_lists_and_prepares_qwen_sessions() {
    let (dir, home) = home();
    let before = tree(&home);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
            .arg("--home")
            .arg(dir.path().join("dsh"))
            .args(["--sources", "qwen", "--qwen-home"])
            .arg(&home)
            .args(args)
            .env("HOME", dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let listed: serde_json::Value = serde_json::from_str(&run(&["sessions", "--json"])).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.contains(&QC));
    let mention = dsh_session_references::reference::format_session_reference_mention(QC, None);
    let prepared: serde_json::Value =
        serde_json::from_str(&run(&["prepare", "--as", "me", &mention])).unwrap();
    assert_eq!(
        prepared["additionalContext"]["source"]["references"][0]["source"],
        "qwen"
    );
    assert_eq!(tree(&home), before);
}

/// Issue 34: Qwen Code writes `projects/` under `$QWEN_RUNTIME_DIR` when it is set (before
/// `$QWEN_HOME`, as its `Storage.getRuntimeBaseDir` resolves it); so does the default here.
#[test]
fn the_runtime_directory_is_the_default_home_before_qwen_home() {
    let (dir, home) = home();
    let before = tree(&home);
    let elsewhere = dir.path().join("config-only");
    fs::create_dir_all(&elsewhere).unwrap();
    let count = |envs: &[(&str, &Path)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"));
        command
            .arg("--home")
            .arg(dir.path().join("dsh"))
            .args(["--sources", "qwen", "sessions", "--json"])
            .env("HOME", dir.path())
            .env_remove("QWEN_HOME")
            .env_remove("QWEN_RUNTIME_DIR");
        for (key, value) in envs {
            command.env(key, value);
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        listed.as_array().unwrap().len()
    };
    assert_eq!(count(&[("QWEN_HOME", &elsewhere)]), 0);
    assert_eq!(
        count(&[("QWEN_HOME", &elsewhere), ("QWEN_RUNTIME_DIR", &home)]),
        3,
        "QWEN_RUNTIME_DIR wins over QWEN_HOME"
    );
    assert_eq!(count(&[("QWEN_RUNTIME_DIR", &home)]), 3);
    assert_eq!(tree(&home), before);
}
