//! opencode sessions as a read-only source (SPEC §9), over a data directory the real opencode
//! 1.18.33 wrote against our mock model on loopback (`tests/data/gen/opencode/`, the sessions in
//! `tests/data/fixtures/opencode/README.md`): OA (`opencode run` with a tool call and reasoning,
//! then `--continue` with `é ✓`), ON (`--title`), OB (`🚀`), OK (a `task` sub-agent, whose child
//! session is never listed), OC (the TUI: `/compact`, a prompt typed in quotes, `/rename`), and
//! OW, written after the log was folded into the database, so it lives only in
//! `opencode.db-wal` and keeps opencode's default title.
//!
//! Every test compares the whole data directory (database, `-wal`, `-shm`, README: bytes, mode,
//! mtime) before and after what it does.

use crate::support::{agent_home, projected_lines, tree_with_stamps, TreeEntry};
use dsh_session_references::reference::{
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::external::{opencode, ExternalAgent, ExternalSessions};
use dsh_session_references::session::{ContentBlock, SessionQuery};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const OA: &str = "opencode:ses_dc0c1121effeAsHevdvV0tInHf";
const ON: &str = "opencode:ses_dc0c0ea92ffekEikisrX4YqOTP";
const OB: &str = "opencode:ses_dc0c0db19ffeaY8c3HEu5ZQvfU";
const OK: &str = "opencode:ses_dc0c0c9e0ffessNdtAOy7fKTEB";
const CHILD: &str = "opencode:ses_dc0c0c1f0ffel4PJ364UWr2mlZ";
const OC: &str = "opencode:ses_dc0c0a4c0ffe2C7JiPzjeGfRKn";
const OW: &str = "opencode:ses_dc0c06fbaffeWB6ZANFwgZznmX";

const ALPHA: &str = "/tmp/oc-fixture/work/alpha";
const BETA: &str = "/tmp/oc-fixture/work/beta";

fn tree(root: &Path) -> BTreeMap<PathBuf, TreeEntry> {
    tree_with_stamps(root)
}

fn home() -> (tempfile::TempDir, PathBuf) {
    agent_home("opencode", "opencode")
}

fn conversation(source: &ExternalSessions, id: &str) -> Vec<String> {
    projected_lines(source, id)
}

fn answer(marker: &str) -> String {
    format!("assistant: {marker}-ANSWER reply to your words, é ✓ 🚀.")
}

#[test]
fn the_real_clis_sessions_list_with_titles_cwd_and_times_even_from_the_log() {
    let (_dir, home) = home();
    let before = tree(&home);
    let source = ExternalSessions::new(ExternalAgent::Opencode, &home);
    let listed = source.list_sessions_blocking().unwrap();
    let rows: Vec<(String, Option<String>, i64, Option<String>)> = listed
        .iter()
        .map(|s| {
            (
                s.id().to_string(),
                s.cwd().map(str::to_string),
                s.created_at(),
                source.read_title_blocking(s.id()).unwrap(),
            )
        })
        .collect();
    let row = |id: &str, cwd: &str, created: i64, title: &str| {
        (
            id.to_string(),
            Some(cwd.to_string()),
            created,
            Some(title.to_string()),
        )
    };
    assert_eq!(
        rows,
        [
            // Only in the log; its default title falls back to the first prompt, unquoted.
            row(
                OW,
                ALPHA,
                1796357460037,
                r#"OW-T1 only in the log, NOTITLE, say "hi" ✓"#
            ),
            row(OC, BETA, 1796357446464, "OC Renamed Session ✓"),
            row(OK, BETA, 1796357436960, "OK generated title 🚀"),
            row(OB, BETA, 1796357432551, "OB generated title 🚀"),
            row(ON, BETA, 1796357428589, "ON named by flag ✓"),
            row(OA, ALPHA, 1796357418465, "OA generated title 🚀"),
        ],
        "newest first; the sub-agent's child session is not listed"
    );
    let child = source.read_conversation_blocking(CHILD);
    assert!(
        child
            .unwrap_err()
            .to_string()
            .contains("ses_dc0c0c1f0ffel4PJ364UWr2mlZ"),
        "a child session is not served on its own"
    );
    assert_eq!(
        tree(&home),
        before,
        "no byte, mode or mtime changed (-wal and -shm included)"
    );
}

#[test]
fn the_projection_of_every_session_is_the_typed_prompts_and_the_answers() {
    let (_dir, home) = home();
    let before = tree(&home);
    let source = ExternalSessions::new(ExternalAgent::Opencode, &home);
    let expected: [(&str, Vec<String>); 6] = [
        (
            OA,
            vec![
                "user: OA-T1 please run a TOOL and tell me".into(),
                answer("OA-T1"),
                "user: OA-T2 second question é ✓".into(),
                answer("OA-T2"),
            ],
        ),
        (
            ON,
            vec!["user: ON-T1 named session question".into(), answer("ON-T1")],
        ),
        (
            OB,
            vec!["user: OB-T1 plain question 🚀".into(), answer("OB-T1")],
        ),
        // The sub-agent's work stays in its child session.
        (
            OK,
            vec!["user: OK-T1 ask an AGENT please".into(), answer("OK-T1")],
        ),
        // The compaction's summary stands in for the two turns before it; quotes typed in the
        // TUI that are not of run's shape (the whole prompt, inner quotes escaped) stay.
        (
            OC,
            vec![
                "summary: OC-SUMMARY the user asked two questions before compaction, é ✓.".into(),
                "user: \"OC-T3 typed in quotes\" after compaction".into(),
                answer("OC-T3"),
            ],
        ),
        (
            OW,
            vec![
                r#"user: OW-T1 only in the log, NOTITLE, say "hi" ✓"#.into(),
                answer("OW-T1"),
            ],
        ),
    ];
    for (id, items) in &expected {
        let got = conversation(&source, id);
        assert_eq!(&got, items, "{id}");
        for text in &got {
            for hidden in ["THINK", "OC-TOOL-OUT-7", "OS-T1", "OC-T1", "OC-T2", "echo "] {
                assert!(
                    !text.contains(hidden),
                    "{hidden:?} leaked into {id}: {text}"
                );
            }
        }
    }
    assert_eq!(tree(&home), before);
}

#[test]
fn prepare_through_the_service_references_opencode_sessions() {
    let (_dir, home) = home();
    let before = tree(&home);
    let source = ExternalSessions::new(ExternalAgent::Opencode, &home);
    let query: Arc<dyn SessionQuery> = Arc::new(source.clone());
    let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
    let prepared = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(service.prepare(
            &AgentIdentity::new("me", Some("/w".into())),
            vec![ContentBlock::text("compare these")],
            vec![ReferenceInput::new(OA, None), ReferenceInput::new(OW, None)],
            &CancellationToken::new(),
        ))
        .unwrap();
    let context = serde_json::to_string(&prepared.additional_context.unwrap()).unwrap();
    assert!(
        context.contains("OA-T2-ANSWER") && context.contains("OW-T1-ANSWER"),
        "{context}"
    );
    assert!(
        context.contains(r#"\"source\":\"opencode\""#)
            || context.contains(r#""source":"opencode""#),
        "{context}"
    );
    assert!(!context.contains("THINK") && !context.contains("OC-TOOL-OUT-7"));
    assert_eq!(tree(&home), before);
}

/// A session deleted by opencode after the listing (its rows gone from the log) is "not
/// found", never a crash; one that never existed likewise.
#[test]
fn a_session_that_vanishes_after_listing_is_not_found() {
    let (_dir, home) = home();
    let source = ExternalSessions::new(ExternalAgent::Opencode, &home);
    assert_eq!(source.list_sessions_blocking().unwrap().len(), 6);
    assert!(source.read_conversation_blocking(OW).is_ok());
    // opencode deletes a session (here: as a writer on this copy of its directory would).
    let own = OW.strip_prefix("opencode:").unwrap();
    let writer = rusqlite::Connection::open(home.join("opencode.db")).unwrap();
    writer
        .execute_batch(&format!(
            "DELETE FROM part WHERE session_id = '{own}'; DELETE FROM message WHERE session_id = '{own}';
             DELETE FROM session WHERE id = '{own}';"
        ))
        .unwrap();
    let err = source
        .read_conversation_blocking(OW)
        .unwrap_err()
        .to_string();
    assert!(err.contains(own), "{err}");
    assert_eq!(source.list_sessions_blocking().unwrap().len(), 5);
    let err = source
        .read_conversation_blocking("opencode:ses_not_there")
        .unwrap_err()
        .to_string();
    assert!(err.contains("ses_not_there"), "{err}");
    drop(writer);
}

/// The fixture holds both cases the reader must handle: sessions in `opencode.db` and one only
/// in `opencode.db-wal` (read alone, the database does not know OW).
#[test]
fn the_fixture_has_sessions_in_the_database_and_one_only_in_the_log() {
    let (dir, home) = home();
    let alone = dir.path().join("alone");
    std::fs::create_dir(&alone).unwrap();
    std::fs::copy(home.join("opencode.db"), alone.join("opencode.db")).unwrap();
    let conn = rusqlite::Connection::open(alone.join("opencode.db")).unwrap();
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM session")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert!(!ids.iter().any(|id| OW.ends_with(id.as_str())), "{ids:?}");
    assert!(ids.iter().any(|id| OC.ends_with(id.as_str())), "{ids:?}");
}

/// Drift guard: the tables, columns, part types and message fields the reader relies on are
/// still what opencode writes (read from a private copy of the fixture, as the reader does).
#[test]
fn the_schema_and_record_kinds_the_reader_relies_on_are_still_written() {
    let (dir, home) = home();
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    for name in ["opencode.db", "opencode.db-wal"] {
        std::fs::copy(home.join(name), copy.join(name)).unwrap();
    }
    let conn = rusqlite::Connection::open(copy.join("opencode.db")).unwrap();
    for (table, columns) in [
        (
            "session",
            &[
                "id",
                "parent_id",
                "directory",
                "title",
                "time_created",
                "time_updated",
                "time_archived",
            ][..],
        ),
        (
            "message",
            &["id", "session_id", "time_created", "time_updated", "data"][..],
        ),
        ("part", &["id", "message_id", "session_id", "data"][..]),
    ] {
        let have: Vec<String> = conn
            .prepare(&format!("PRAGMA table_info({table})"))
            .unwrap()
            .query_map([], |r| r.get::<_, String>(1))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for column in columns {
            assert!(
                have.iter().any(|c| c == column),
                "opencode's {table} table lost {column:?}: {have:?}"
            );
        }
    }
    let kinds: Vec<String> = conn
        .prepare("SELECT DISTINCT json_extract(data, '$.type') FROM part")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for kind in &kinds {
        assert!(
            opencode::USED_PART_TYPES.contains(&kind.as_str())
                || opencode::IGNORED_PART_TYPES.contains(&kind.as_str()),
            "opencode wrote a part type the reader does not know: {kind:?}"
        );
    }
    for used in opencode::USED_PART_TYPES {
        assert!(
            kinds.iter().any(|k| k == used),
            "no part of type {used:?}: did opencode stop writing it? {kinds:?}"
        );
    }
    let one = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        one("SELECT count(DISTINCT json_extract(data, '$.role')) FROM message WHERE json_extract(data, '$.role') IN ('user', 'assistant')"),
        2,
        "messages carry role user and assistant"
    );
    assert_eq!(
        one("SELECT count(*) FROM message WHERE json_extract(data, '$.role') = 'assistant' AND json_extract(data, '$.summary') IS 1"),
        1,
        "a compaction's summary is an assistant message with summary: true"
    );
    assert_eq!(
        one("SELECT count(*) FROM session WHERE parent_id IS NOT NULL"),
        1,
        "a sub-agent's session names its parent"
    );
    let default: String = conn
        .query_row(
            "SELECT title FROM session WHERE title LIKE 'New session - %'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(opencode::is_default_title(&default), "{default}");
    let run_prompt: String = conn
        .query_row(
            "SELECT json_extract(data, '$.text') FROM part WHERE json_extract(data, '$.text') LIKE '\"OB-T1%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        run_prompt, "\"OB-T1 plain question 🚀\"",
        "opencode run still wraps a prompt in quotes"
    );
}

/// The command line lists them with `--sources opencode --opencode-home` and prepares a
/// mention of one that lives only in the log.
#[test]
fn the_cli_lists_and_prepares_opencode_sessions() {
    let (dir, home) = home();
    let before = tree(&home);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
            .arg("--home")
            .arg(dir.path().join("dsh"))
            .args(["--sources", "opencode", "--opencode-home"])
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
    assert_eq!(ids, [OW, OC, OK, OB, ON, OA], "{listed}");
    let mention = dsh_session_references::reference::format_session_reference_mention(OW, None);
    let prepared: serde_json::Value =
        serde_json::from_str(&run(&["prepare", "--as", "me", &mention])).unwrap();
    let reference = &prepared["additionalContext"]["source"]["references"][0];
    assert_eq!(reference["source"], "opencode", "{prepared}");
    assert!(prepared.to_string().contains("OW-T1-ANSWER"), "{prepared}");
    assert_eq!(tree(&home), before);
}
