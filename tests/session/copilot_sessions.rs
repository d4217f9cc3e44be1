//! GitHub Copilot CLI sessions as a read-only source (SPEC §9), over a home the real Copilot CLI
//! 1.0.102 wrote offline against a mock model on loopback (`tests/data/gen/copilot/`): a tool
//! call and a resumed, non-ASCII turn (CA), one turn in a session named with `-n` (CB), and an
//! interactive session with two turns, a `/compact` and a turn after it (CC), and one with two
//! turns, a `/rename`, an `/undo` of the second turn and a turn after it (CR).
//!
//! Every test compares the whole home (bytes, modes, mtimes) before and after what it does.

use crate::support::{agent_home, projected_lines, tree_with_stamps, TreeEntry};
use dsh_session_references::reference::{
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::session::external::{copilot, ExternalAgent, ExternalSessions};
use dsh_session_references::session::{ContentBlock, SessionQuery};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const CA_OWN: &str = "1a407890-5b06-411b-b403-da15069727d9";
const CA: &str = "copilot:1a407890-5b06-411b-b403-da15069727d9";
const CB: &str = "copilot:e7fa7a44-b9e8-448d-b670-d5065891c0c4";
const CB_OWN: &str = "e7fa7a44-b9e8-448d-b670-d5065891c0c4";
const CC: &str = "copilot:5e85b0fb-9def-4aad-a973-8f931405f325";
const CR: &str = "copilot:600bb7fd-f36a-40f8-88a8-36e67bfd64bd";

fn tree(root: &Path) -> BTreeMap<PathBuf, TreeEntry> {
    tree_with_stamps(root)
}

fn home() -> (tempfile::TempDir, PathBuf) {
    agent_home("copilot-cli", ".copilot")
}

fn conversation(source: &ExternalSessions, id: &str) -> Vec<String> {
    projected_lines(source, id)
}

fn titles(source: &ExternalSessions) -> Vec<(String, Option<String>, Option<String>)> {
    let listed = source.list_sessions_blocking().unwrap();
    let mut rows: Vec<_> = listed
        .iter()
        .map(|s| {
            let title = source.read_title_blocking(s.id()).unwrap();
            (s.id().to_string(), s.cwd().map(str::to_string), title)
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn the_real_clis_sessions_list_title_and_project_without_writing() {
    let (_dir, home) = home();
    let before = tree(&home);
    let source = ExternalSessions::new(ExternalAgent::Copilot, &home);
    let mut expected = vec![
        (
            CA.to_string(),
            Some("/tmp/copilot-cap/work/alpha".to_string()),
            Some("CA-T1 please run a TOOL and tell me".to_string()),
        ),
        (
            CB.to_string(),
            Some("/tmp/copilot-cap/work/beta".to_string()),
            // The name given with -n lives only in workspace.yaml.
            Some("CB Named Session ✓".to_string()),
        ),
        (
            CC.to_string(),
            Some("/tmp/copilot-cap/work/beta".to_string()),
            Some("CC-T1 first question before compaction".to_string()),
        ),
        (
            CR.to_string(),
            Some("/tmp/copilot-cap/work/alpha".to_string()),
            // The TUI's /rename also lives only in workspace.yaml.
            Some("CR Renamed in the TUI ✓".to_string()),
        ),
    ];
    expected.sort();
    assert_eq!(titles(&source), expected);

    // CA: the typed prompts and the answers across the resumed turn; no tool, no injected time.
    let ca = conversation(&source, CA);
    assert_eq!(
        ca,
        [
            "user: CA-T1 please run a TOOL and tell me",
            "assistant: CA-T1-ANSWER reply to your words, é ✓ 🚀.",
            "user: CA-T2 second question é ✓ 日本語",
            "assistant: CA-T2-ANSWER reply to your words, é ✓ 🚀.",
        ]
    );
    // CC: the compaction's summary stands in for the two turns before it.
    let cc = conversation(&source, CC);
    assert_eq!(
        cc,
        [
            "summary: <overview>CP-SUMMARY the user asked two questions before compaction, é ✓.</overview>",
            "user: CC-T3 after compaction",
            "assistant: CC-T3-ANSWER reply to your words, é ✓ 🚀.",
        ]
    );
    // CR: the rewound turn is gone (Copilot rewrote the log without it).
    let cr = conversation(&source, CR);
    assert_eq!(
        cr,
        [
            "user: CR-T1 first turn to keep",
            "assistant: CR-T1-ANSWER reply to your words, é ✓ 🚀.",
            "user: CR-T3 after the rewind",
            "assistant: CR-T3-ANSWER reply to your words, é ✓ 🚀.",
        ]
    );
    for text in ca.iter().chain(&cc).chain(&cr) {
        for hidden in [
            "CP-TOOL-OUT-7",
            "current_datetime",
            "You are the GitHub Copilot CLI",
            "CC-T1",
            "Please create a detailed summary",
            "CR-T2",
            "Rewound the conversation",
        ] {
            assert!(!text.contains(hidden), "{hidden:?} leaked: {text}");
        }
    }

    let query: Arc<dyn SessionQuery> = Arc::new(source.clone());
    let service = SessionReferences::new(query, SessionReferenceConfig::default()).unwrap();
    let prepared = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(service.prepare(
            &AgentIdentity::new("me", Some("/w".into())),
            vec![ContentBlock::text("compare these")],
            vec![ReferenceInput::new(CA, None), ReferenceInput::new(CC, None)],
            &CancellationToken::new(),
        ))
        .unwrap();
    let context = serde_json::to_string(&prepared.additional_context.unwrap()).unwrap();
    assert!(
        context.contains("CA-T2-ANSWER") && context.contains("CP-SUMMARY"),
        "{context}"
    );
    assert!(
        context.contains(r#"\"source\":\"copilot\""#) || context.contains(r#""source":"copilot""#),
        "{context}"
    );
    assert_eq!(
        tree(&home),
        before,
        "no byte, mode or mtime under the home changed"
    );
}

/// The title follows `workspace.yaml`: a name the person gives wins at the next listing, a
/// derived name stands when nobody gave one, and without the file the first prompt does.
#[test]
fn titles_follow_the_workspace_file() {
    let (_dir, home) = home();
    let source = ExternalSessions::new(ExternalAgent::Copilot, &home);
    source.list_sessions_blocking().unwrap();
    let yaml = |own: &str| home.join("session-state").join(own).join("workspace.yaml");
    let text = fs::read_to_string(yaml(CA_OWN)).unwrap();
    fs::write(
        yaml(CA_OWN),
        text.replace(
            "name: CA-T1 please run a TOOL and tell me\nuser_named: false",
            "name: 'Renamed: by me ✓'\nuser_named: true",
        ),
    )
    .unwrap();
    assert_eq!(
        source.read_title_blocking(CA).unwrap().as_deref(),
        Some("Renamed: by me ✓")
    );
    let text = fs::read_to_string(yaml(CB_OWN)).unwrap();
    fs::write(
        yaml(CB_OWN),
        text.replace(
            "name: CB Named Session ✓\nuser_named: true",
            "name: |-\n  Cb derived title\n  second line\nuser_named: false",
        ),
    )
    .unwrap();
    assert_eq!(
        source.read_title_blocking(CB).unwrap().as_deref(),
        Some("Cb derived title")
    );
    fs::remove_file(yaml(CB_OWN)).unwrap();
    assert_eq!(
        source.read_title_blocking(CB).unwrap().as_deref(),
        Some("CB-T1 plain question 🚀")
    );
}

#[test]
fn a_session_that_vanishes_after_listing_is_not_found() {
    let (_dir, home) = home();
    let source = ExternalSessions::new(ExternalAgent::Copilot, &home);
    source.list_sessions_blocking().unwrap();
    fs::remove_dir_all(home.join("session-state").join(CB_OWN)).unwrap();
    let err = source
        .read_conversation_blocking(CB)
        .unwrap_err()
        .to_string();
    assert!(err.contains(CB_OWN), "{err}");
    let err = source.read_title_blocking(CB).unwrap_err().to_string();
    assert!(err.contains(CB_OWN), "{err}");
}

/// Drift guard: every record type in the fixture is one the reader uses or deliberately
/// ignores, those it uses are still written by the CLI, and `workspace.yaml` still has the
/// keys the title comes from.
#[test]
fn the_record_kinds_the_reader_relies_on_are_still_written() {
    let (_dir, home) = home();
    let mut kinds = std::collections::BTreeSet::new();
    let mut yaml_keys = std::collections::BTreeSet::new();
    for (path, (_, _, _, bytes)) in tree(&home) {
        let Some(bytes) = bytes else { continue };
        let text = String::from_utf8(bytes).unwrap();
        match path.file_name().and_then(|n| n.to_str()) {
            Some("events.jsonl") => {
                for line in text.lines() {
                    let record: serde_json::Value = serde_json::from_str(line).unwrap();
                    kinds.insert(record["type"].as_str().unwrap_or_default().to_string());
                }
            }
            Some("workspace.yaml") => {
                yaml_keys.extend(
                    text.lines()
                        .filter_map(|l| l.split_once(':'))
                        .map(|(k, _)| k.to_string()),
                );
            }
            _ => {}
        }
    }
    for kind in &kinds {
        assert!(
            copilot::USED_RECORD_TYPES.contains(&kind.as_str())
                || copilot::IGNORED_RECORD_TYPES.contains(&kind.as_str()),
            "GitHub Copilot CLI wrote a record type the reader does not know: {kind:?}"
        );
    }
    for used in copilot::USED_RECORD_TYPES {
        assert!(
            kinds.contains(*used),
            "no fixture record is of type {used:?}: did GitHub Copilot CLI stop writing it?"
        );
    }
    for key in ["name", "user_named"] {
        assert!(
            yaml_keys.contains(key),
            "no workspace.yaml has {key:?}: did GitHub Copilot CLI stop writing it?"
        );
    }
}

/// The persistent listing keeps Copilot's title scans: a new process takes the remembered scan
/// instead of reading the log again (a rewrite that keeps the stamp is not seen), and writes
/// its listing under the dsh home only.
#[test]
fn the_listing_cache_keeps_copilot_title_scans_between_processes() {
    let (dir, home) = home();
    let dsh = dir.path().join("dsh");
    fs::create_dir_all(&dsh).unwrap();
    // Without a workspace.yaml the title is the first prompt, from the log's title scan.
    fs::remove_file(
        home.join("session-state")
            .join(CA_OWN)
            .join("workspace.yaml"),
    )
    .unwrap();
    let before = tree(&home);
    let process = || ExternalSessions::with_listing_cache(ExternalAgent::Copilot, &home, &dsh);
    let first = process();
    let listed = titles(&first);
    first.flush();
    let cache = first.listing_cache_path().unwrap().to_path_buf();
    assert!(cache.starts_with(&dsh) && cache.is_file(), "{cache:?}");
    let events = home.join("session-state").join(CA_OWN).join("events.jsonl");
    let bytes = fs::read(&events).unwrap();
    let changed = String::from_utf8(bytes.clone())
        .unwrap()
        .replace("\"content\":\"CA-T1 please", "\"content\":\"ZZ-T1 please");
    assert_ne!(changed.as_bytes(), &bytes[..]);
    let modified = fs::metadata(&events).unwrap().modified().unwrap();
    let mut file = fs::File::options().write(true).open(&events).unwrap();
    file.write_all(changed.as_bytes()).unwrap();
    file.set_modified(modified).unwrap();
    drop(file);
    assert_eq!(titles(&process()), listed, "the cache was not used");
    let uncached = ExternalSessions::new(ExternalAgent::Copilot, &home);
    uncached.list_sessions_blocking().unwrap();
    assert_eq!(
        uncached.read_title_blocking(CA).unwrap().as_deref(),
        Some("ZZ-T1 please run a TOOL and tell me")
    );
    fs::write(&events, &bytes).unwrap();
    let file = fs::File::options().write(true).open(&events).unwrap();
    file.set_modified(modified).unwrap();
    drop(file);
    assert_eq!(tree(&home), before);
}

fn run(dir: &Path, args: &[&str], envs: &[(&str, &Path)]) -> String {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"));
    command
        .arg("--home")
        .arg(dir.join("dsh"))
        .args(args)
        .env("HOME", dir)
        .env_remove("COPILOT_HOME");
    for (key, value) in envs {
        command.env(key, value);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn ids(listing: &str) -> Vec<String> {
    let listed: serde_json::Value = serde_json::from_str(listing).unwrap();
    let mut ids: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// The command line lists them with `--sources copilot --copilot-home` (and from
/// `$COPILOT_HOME`, and among every source named) and prepares a mention.
#[test]
fn the_cli_lists_and_prepares_copilot_sessions() {
    let (dir, home) = home();
    let before = tree(&home);
    let home_flag = home.to_str().unwrap();
    let mut all = [CA, CB, CC, CR].map(str::to_string);
    all.sort();
    let flagged = ["--sources", "copilot", "--copilot-home", home_flag];
    assert_eq!(
        ids(&run(
            dir.path(),
            &[&flagged[..], &["sessions", "--json"]].concat(),
            &[]
        )),
        all
    );
    assert_eq!(tree(&home), before);
    assert_eq!(
        ids(&run(
            dir.path(),
            &["--sources", "copilot", "sessions", "--json"],
            &[("COPILOT_HOME", &home)]
        )),
        all,
        "$COPILOT_HOME names the home"
    );
    assert_eq!(tree(&home), before);
    let every = [
        "--sources",
        "dsh,claude,codex,gemini,opencode,qwen,copilot",
        "--copilot-home",
        home_flag,
        "sessions",
        "--json",
    ];
    assert_eq!(ids(&run(dir.path(), &every, &[])), all);
    assert_eq!(tree(&home), before);
    let mention = dsh_session_references::reference::format_session_reference_mention(CB, None);
    let prepared: serde_json::Value = serde_json::from_str(&run(
        dir.path(),
        &[&flagged[..], &["prepare", "--as", "me", &mention]].concat(),
        &[],
    ))
    .unwrap();
    let reference = &prepared["additionalContext"]["source"]["references"][0];
    assert_eq!(reference["source"], "copilot");
    let text = prepared.to_string();
    assert!(text.contains("CB-T1-ANSWER"), "{text}");
    assert_eq!(tree(&home), before);
}

/// Search (over the index) finds a Copilot session by a word of its title and conversation,
/// and `exec --ref WORD` brings one into a turn of the offline model; neither writes under the
/// home.
#[test]
fn search_and_exec_ref_reach_copilot_sessions() {
    let (dir, home) = home();
    let before = tree(&home);
    let flags = [
        "--sources",
        "copilot",
        "--copilot-home",
        home.to_str().unwrap(),
    ];
    let found: serde_json::Value = serde_json::from_str(&run(
        dir.path(),
        &[&flags[..], &["search", "--json", "compaction"]].concat(),
        &[],
    ))
    .unwrap();
    assert_eq!(found["hits"][0]["sessionId"], CC, "{found}");
    assert_eq!(found["hits"][0]["source"], "copilot", "{found}");
    assert_eq!(tree(&home), before);
    let out = run(
        dir.path(),
        &[
            &flags[..],
            &["exec", "--json", "--ref", "CB Named", "what was it?"],
        ]
        .concat(),
        &[],
    );
    let references = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "references")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(references["references"][0]["sessionId"], CB, "{out}");
    assert_eq!(
        references["references"][0]["label"], "CB Named Session ✓",
        "{out}"
    );
    assert_eq!(tree(&home), before);
}

/// Hostile session directories cost their own session, never the listing and never a hang: a
/// FIFO in a log's place, a log that is not JSON, a log whose id names another directory, a
/// log with no `session.start` yet (not listed until it has one) and a FIFO in place of a
/// `workspace.yaml` (the session keeps its first prompt as its title).
#[cfg(unix)]
#[test]
fn hostile_session_directories_cost_only_themselves() {
    let (_dir, home) = home();
    let state = home.join("session-state");
    let dir = |name: &str| {
        let path = state.join(name);
        fs::create_dir_all(&path).unwrap();
        path
    };
    let mkfifo = |path: &Path| {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    };
    mkfifo(&dir("fifo").join("events.jsonl"));
    fs::write(dir("garbage").join("events.jsonl"), "not json\n").unwrap();
    let ca_log = fs::read_to_string(state.join(CA_OWN).join("events.jsonl")).unwrap();
    fs::write(dir("other-id").join("events.jsonl"), &ca_log).unwrap();
    fs::write(
        dir("no-start").join("events.jsonl"),
        r#"{"type":"user.message","data":{"content":"early"},"id":"u","timestamp":"2026-12-04T08:03:16.230Z","parentId":null}
"#,
    )
    .unwrap();
    fs::remove_file(state.join(CA_OWN).join("workspace.yaml")).unwrap();
    mkfifo(&state.join(CA_OWN).join("workspace.yaml"));
    let before = tree(&home);

    let source = ExternalSessions::new(ExternalAgent::Copilot, &home);
    let started = std::time::Instant::now();
    let rows = titles(&source);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let ids: Vec<&str> = rows.iter().map(|(id, _, _)| id.as_str()).collect();
    let mut expected = [CA, CB, CC, CR];
    expected.sort();
    assert_eq!(ids, expected);
    let ca = rows.iter().find(|(id, _, _)| id == CA).unwrap();
    assert_eq!(ca.2.as_deref(), Some("CA-T1 please run a TOOL and tell me"));
    let errors = source.unreadable_files().join("\n");
    for named in ["fifo", "garbage", "not the name of its directory"] {
        assert!(errors.contains(named), "{named:?} not named in:\n{errors}");
    }
    assert!(!errors.contains("no-start"), "{errors}");
    assert_eq!(tree(&home), before);
}
