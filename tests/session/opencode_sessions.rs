//! opencode sessions as a read-only source (SPEC §9), over a data directory the real opencode
//! 1.18.33 wrote against our mock model on loopback (`tests/data/gen/opencode/capture.sh`): OA
//! (`opencode run` with a tool call and reasoning, then `--continue` with `é ✓`), ON (`--title`),
//! OB (`🚀`), and OW, written after the log was folded into the database, so it lives only in
//! `opencode.db-wal`. The generated titles are the mock's `Oc generated title`.
//!
//! Every test compares every file (database, `-wal`, `-shm`: bytes, mode, mtime) before and after.

use crate::support::{agent_fixtures, copy_tree};
use dsh_session_references::reference::{project, Role};
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

type Entry = (u32, i64, i64, Vec<u8>);

fn files(root: &Path) -> BTreeMap<PathBuf, Entry> {
    fs::read_dir(root)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let bytes = fs::read(&path).unwrap();
            (path, (meta.mode(), meta.mtime(), meta.mtime_nsec(), bytes))
        })
        .collect()
}

fn home() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("opencode");
    copy_tree(&agent_fixtures().join("opencode"), &home);
    (dir, home)
}

#[test]
fn the_real_clis_sessions_list_title_and_project_without_writing_even_from_the_log() {
    let (_dir, home) = home();
    let before = files(&home);
    let source = ExternalSessions::new(ExternalAgent::Opencode, &home);
    let listed = source.list_sessions_blocking().unwrap();
    let mut seen = BTreeMap::new();
    for summary in listed.iter() {
        assert!(
            summary.id().starts_with("opencode:ses_"),
            "{}",
            summary.id()
        );
        let (snapshot, _) = source.read_conversation_blocking(summary.id()).unwrap();
        let items: Vec<String> = project(&snapshot)
            .into_iter()
            .map(|i| {
                let role = if i.role == Role::User {
                    "user"
                } else {
                    "assistant"
                };
                format!("{role}: {}", i.text)
            })
            .collect();
        let title = source.read_title_blocking(summary.id()).unwrap();
        let marker = items[0].split_whitespace().nth(1).unwrap()[..2].to_string();
        seen.insert(marker, (summary.cwd().map(str::to_string), title, items));
    }
    assert_eq!(
        seen.keys().cloned().collect::<Vec<_>>(),
        ["OA", "OB", "ON", "OW"],
        "OW lives only in the log"
    );
    let (cwd, title, oa) = &seen["OA"];
    assert_eq!(cwd.as_deref(), Some("/tmp/oc-cap/work/alpha"));
    assert_eq!(title.as_deref(), Some("Oc generated title"));
    assert_eq!(
        oa,
        &[
            "user: OA-T1 please run a TOOL and tell me",
            "assistant: OA-T1-ANSWER reply to your words, é ✓ 🚀.",
            "user: OA-T2 second question é ✓",
            "assistant: OA-T2-ANSWER reply to your words, é ✓ 🚀.",
        ],
        "the quotes `opencode run` added are gone; no reasoning, no tool output"
    );
    assert_eq!(seen["ON"].1.as_deref(), Some("ON named by flag ✓"));
    assert_eq!(seen["OB"].2[0], "user: OB-T1 plain question 🚀");
    assert_eq!(seen["OW"].0.as_deref(), Some("/tmp/oc-cap/work/alpha"));
    for (_, _, items) in seen.values() {
        for text in items {
            assert!(
                !text.contains("THINK") && !text.contains("QC-TOOL-OUT"),
                "{text}"
            );
        }
    }
    assert_eq!(
        files(&home),
        before,
        "no byte, mode or mtime changed (-wal and -shm included)"
    );
    let gone = source.read_conversation_blocking("opencode:ses_not_there");
    assert!(gone.unwrap_err().to_string().contains("ses_not_there"));
}

#[test]
fn the_cli_lists_opencode_sessions_with_the_home_flag() {
    let (dir, home) = home();
    let before = files(&home);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .arg("--home")
        .arg(dir.path().join("dsh"))
        .args(["--sources", "opencode", "--opencode-home"])
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
    assert_eq!(listed.as_array().unwrap().len(), 4, "{listed}");
    assert_eq!(files(&home), before);
}
