//! Gemini CLI sessions as a read-only source (SPEC §9), over a home the real Gemini CLI 0.61.0
//! wrote against a mock Gemini API on loopback (`tests/data/gen/gemini/`): a tool call and a
//! `--resume latest` a minute later, which leaves a stub second file with the same session id
//! (GA); one turn with non-ASCII text (GB); an interactive session with two prompts, `/compress`,
//! a prompt after it and `/chat save` (GC). Each interactive start appends a generated summary to
//! the newest other session of its project: GC's start to GB, the start after it to GC.
//!
//! Every test compares the whole home (bytes, modes, mtimes) before and after what it does.

use crate::support::{agent_home, projected_lines, tree_with_stamps, TreeEntry};
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn tree(root: &Path) -> BTreeMap<PathBuf, TreeEntry> {
    tree_with_stamps(root)
}

fn home() -> (tempfile::TempDir, PathBuf) {
    agent_home("gemini-cli", ".gemini")
}

fn conversation(source: &ExternalSessions, id: &str) -> Vec<String> {
    projected_lines(source, id)
}

#[test]
fn the_real_clis_sessions_list_title_and_project_without_writing() {
    let (_dir, home) = home();
    let before = tree(&home);
    let source = ExternalSessions::new(ExternalAgent::Gemini, &home);
    let listed = source.list_sessions_blocking().unwrap();
    // Three sessions: the resume's stub and the second start's empty session are no sessions.
    assert_eq!(
        listed.len(),
        3,
        "{:?}",
        listed.iter().map(|s| s.id()).collect::<Vec<_>>()
    );
    let mut by_marker = BTreeMap::new();
    for summary in listed.iter() {
        assert!(summary.id().starts_with("gemini:"), "{}", summary.id());
        let items = conversation(&source, summary.id());
        let title = source.read_title_blocking(summary.id()).unwrap();
        let marker = items
            .iter()
            .find_map(|i| ["GA-", "GB-", "GC-"].into_iter().find(|m| i.contains(m)))
            .unwrap_or_else(|| panic!("{items:?}"));
        by_marker.insert(marker, (summary.cwd().map(str::to_string), title, items));
    }
    let (cwd, title, ga) = &by_marker["GA-"];
    assert!(cwd.as_deref().unwrap().ends_with("/work/alpha"), "{cwd:?}");
    assert_eq!(
        title.as_deref(),
        Some("GA-T1 please read notes.txt with a TOOL and tell me")
    );
    assert_eq!(
        ga,
        &[
            "user: GA-T1 please read notes.txt with a TOOL and tell me",
            "assistant: GA-T1-ANSWER reply to your words, é ✓ 🚀.",
            "user: GA-T2 second question é ✓",
            "assistant: GA-T2-ANSWER reply to your words, é ✓ 🚀.",
        ]
    );
    let (cwd, title, gb) = &by_marker["GB-"];
    assert!(cwd.as_deref().unwrap().ends_with("/work/beta"), "{cwd:?}");
    // The interactive start that made GC summarized GB (the newest other session then).
    assert_eq!(title.as_deref(), Some("GA generated summary"));
    assert_eq!(gb[0], "user: GB-T1 plain question 🚀");
    let (_, title, gc) = &by_marker["GC-"];
    // The summary a later start generated is the title.
    assert_eq!(title.as_deref(), Some("GA generated summary"));
    assert_eq!(
        gc.first().map(String::as_str),
        Some("summary: <state_snapshot>GC-SUMMARY the user asked two questions before compression.</state_snapshot>")
    );
    assert_eq!(
        gc.last().map(String::as_str),
        Some("assistant: GC-T3-ANSWER reply to your words, é ✓ 🚀.")
    );
    for items in [ga, gb, gc] {
        for text in items {
            for hidden in [
                "THINK",
                "NOTES-FILE-CONTENT",
                "session_context",
                "Got it.",
                "GC-T1",
                "checkpoint saved",
            ] {
                assert!(!text.contains(hidden), "{hidden:?} leaked: {text}");
            }
        }
    }
    assert_eq!(
        tree(&home),
        before,
        "no byte, mode or mtime under the home changed"
    );
}

#[test]
fn the_cli_lists_gemini_sessions_with_the_home_flag() {
    let (dir, home) = home();
    let before = tree(&home);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .arg("--home")
        .arg(dir.path().join("dsh"))
        .args(["--sources", "gemini", "--gemini-home"])
        .arg(&home)
        .args(["sessions", "--json"])
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    assert_eq!(tree(&home), before);
}

/// Drift guard: every line of the fixtures is one of the four kinds the reader replays
/// (metadata, a message of a known type, `$set`, `$rewindTo`), and the kinds it relies on are
/// still written (user and model messages, a `$set.messages` list, a generated `summary`, a
/// `<state_snapshot>` compression).
#[test]
fn the_record_kinds_the_reader_relies_on_are_still_written() {
    let (_dir, home) = home();
    let mut seen = std::collections::BTreeSet::new();
    for (path, (_, _, _, bytes)) in tree(&home) {
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        for line in String::from_utf8(bytes.unwrap()).unwrap().lines() {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let kind = if record.get("sessionId").is_some() && record.get("id").is_none() {
                "metadata".to_string()
            } else if let Some(set) = record.get("$set") {
                if set.get("messages").is_some() {
                    seen.insert("$set.messages".to_string());
                }
                if set.get("summary").is_some() {
                    seen.insert("$set.summary".to_string());
                }
                "$set".to_string()
            } else if record.get("$rewindTo").is_some() {
                "$rewindTo".to_string()
            } else {
                let kind = record["type"].as_str().unwrap_or("?").to_string();
                assert!(
                    ["user", "gemini", "info", "error", "warning"].contains(&kind.as_str()),
                    "Gemini CLI wrote a message type the reader does not know: {line}"
                );
                kind
            };
            if line.contains("<state_snapshot>") {
                seen.insert("state_snapshot".to_string());
            }
            seen.insert(kind);
        }
    }
    for needed in [
        "metadata",
        "user",
        "gemini",
        "$set",
        "$set.messages",
        "$set.summary",
        "state_snapshot",
    ] {
        assert!(
            seen.contains(needed),
            "no fixture line of kind {needed:?}: did Gemini CLI change its format?"
        );
    }
}

/// Issue 34, item 3: a project folder without its `.project_root` takes its cwd from
/// `projects.json`: by slug (alpha), and, for a folder named by the SHA-256 of its root as older
/// versions named them, by that hash (beta); a folder the registry does not name by slug takes
/// the root whose hash is the session's `projectHash`.
#[test]
fn a_missing_project_marker_falls_back_to_the_project_registry() {
    let cwds = |home: &Path| {
        let source = ExternalSessions::new(ExternalAgent::Gemini, home);
        let mut cwds: Vec<Option<String>> = source
            .list_sessions_blocking()
            .unwrap()
            .iter()
            .map(|s| s.cwd().map(str::to_string))
            .collect();
        cwds.sort();
        cwds
    };
    let alpha = Some("/tmp/gcap2/work/alpha".to_string());
    let beta = Some("/tmp/gcap2/work/beta".to_string());
    let beta_hash = "2d6ac24e96b02dd851b31ef7083c217eccb68fde1e3e69b86d4bbeb7651ada86";

    let (_dir, home) = home();
    let expected = cwds(&home);
    assert_eq!(expected, [alpha.clone(), beta.clone(), beta.clone()]);
    for project in ["alpha", "beta"] {
        std::fs::remove_file(home.join("tmp").join(project).join(".project_root")).unwrap();
    }
    std::fs::rename(home.join("tmp/beta"), home.join("tmp").join(beta_hash)).unwrap();
    let before = tree(&home);
    assert_eq!(cwds(&home), expected, "by slug and by the folder's hash");
    assert_eq!(tree(&home), before);

    // A folder named neither by slug nor by hash: the sessions' projectHash names the root.
    std::fs::rename(home.join("tmp").join(beta_hash), home.join("tmp/renamed")).unwrap();
    assert_eq!(cwds(&home), expected, "by the sessions' projectHash");

    // Without the registry, nothing names the root.
    std::fs::remove_file(home.join("projects.json")).unwrap();
    assert_eq!(cwds(&home), [None, None, None]);
}
