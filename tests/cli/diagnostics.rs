//! What the binary prints about a hostile home reaches the terminal inert (SPEC §5.2).
//!
//! A home someone else wrote can name directories and records with terminal escapes. Every
//! subcommand's stdout and stderr, and the error the TUI prints when a resumed log is corrupt,
//! must hold no raw ESC (0x1b), BEL (0x07) or C1 CSI (U+009B, whose UTF-8 spelling holds byte
//! 0x9b): such bytes are spelled `\xNN` in diagnostics and `\uXXXX` inside JSON, which keeps the
//! JSON value unchanged.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A directory name that tries to retitle the terminal and clear the screen.
const HOSTILE_NAME: &str = "proj\u{1b}]0;pwned\u{7}\u{9b}2J";

struct Run {
    code: i32,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

fn dsh_refs(home: &Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .arg("--home")
        .arg(home)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("spawn dsh-refs");
    Run {
        code: output.status.code().expect("exit code"),
        stdout: output.stdout,
        stderr: output.stderr,
    }
}

/// No byte that could drive the terminal, in either stream.
fn assert_inert(run: &Run, what: &str) {
    for (stream, bytes) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        for bad in [0x1b_u8, 0x07, 0x9b] {
            assert!(
                !bytes.contains(&bad),
                "{what}: raw byte {bad:#04x} on {stream}: {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

/// Writes `lines` as the plain log of session `id` under a project directory named
/// [`HOSTILE_NAME`] (the reader never trusts directory names, so any name works).
fn place(home: &Path, id: &str, lines: &[String]) -> PathBuf {
    let dir = home
        .join("sessions")
        .join(format!("--{HOSTILE_NAME}--"))
        .join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("session.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn header(id: &str, cwd: &str) -> String {
    serde_json::json!({
        "type": "session", "version": 0, "id": id, "createdAt": 1_000,
        "cwd": cwd, "delegationDepth": 0
    })
    .to_string()
}

fn title(seq: u64, title: &str) -> String {
    serde_json::json!({
        "type": "session/title", "seq": seq, "time": 1_000,
        "data": {"title": title, "messageSeqs": [], "source": {"kind": "plugin", "plugin": "title"}}
    })
    .to_string()
}

/// A home holding one readable session whose cwd and title are hostile, and one whose second
/// record names an unknown `surfaceOp` full of escapes (corruption, since a `turn/end` follows).
fn hostile_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    place(
        home.path(),
        "good",
        &[
            header("good", &format!("/work/{HOSTILE_NAME}")),
            title(0, &format!("title {HOSTILE_NAME}")),
        ],
    );
    place(
        home.path(),
        "corrupt",
        &[
            header("corrupt", "/work"),
            serde_json::json!({
                "type": format!("user/message{HOSTILE_NAME}"), "seq": 0, "time": 1_000,
                "data": {}, "surfaceOp": format!("op{HOSTILE_NAME}")
            })
            .to_string(),
            r#"{"type":"turn/end","seq":1,"time":1000,"data":{}}"#.to_string(),
        ],
    );
    home
}

#[test]
fn sessions_table_and_json_are_inert() {
    let home = hostile_home();
    let table = dsh_refs(home.path(), &["sessions"]);
    assert_eq!(
        table.code,
        0,
        "{:?}",
        String::from_utf8_lossy(&table.stderr)
    );
    assert_inert(&table, "sessions");
    let text = String::from_utf8(table.stdout.clone()).unwrap();
    assert!(text.contains("\\x1B]0;pwned\\x07\\x9B2J"), "{text}");

    let json = dsh_refs(home.path(), &["sessions", "--json"]);
    assert_eq!(json.code, 0);
    assert_inert(&json, "sessions --json");
    // Escaped, the value is still the raw one.
    let rows: Value = serde_json::from_slice(&json.stdout).unwrap();
    let good = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["sessionId"] == "good")
        .expect("the good session is listed");
    assert_eq!(good["cwd"], format!("/work/{HOSTILE_NAME}"));
    assert_eq!(good["title"], format!("title {HOSTILE_NAME}"));
}

#[test]
fn sessions_diagnostics_name_a_hostile_home_inert() {
    let parent = tempfile::tempdir().unwrap();
    let home = parent.path().join(HOSTILE_NAME);
    std::fs::create_dir_all(&home).unwrap();
    // An empty home: the listing names where it looked.
    let empty = dsh_refs(&home, &["sessions"]);
    assert_eq!(empty.code, 0);
    assert_inert(&empty, "empty home");
    assert!(String::from_utf8_lossy(&empty.stdout).contains("proj\\x1B]0;pwned"));
    // `sessions` is a file: the error names the path.
    std::fs::write(home.join("sessions"), "not a directory").unwrap();
    let broken = dsh_refs(&home, &["sessions"]);
    assert_eq!(broken.code, 1);
    assert_inert(&broken, "unreadable sessions directory");
    let stderr = String::from_utf8(broken.stderr).unwrap();
    assert!(stderr.contains("proj\\x1B]0;pwned\\x07\\x9B2J"), "{stderr}");
}

#[test]
fn resume_of_a_corrupt_log_prints_an_inert_error() {
    let home = hostile_home();
    let run = dsh_refs(home.path(), &["--resume", "corrupt"]);
    assert_eq!(run.code, 1);
    assert_inert(&run, "--resume of a corrupt log");
    let stderr = String::from_utf8(run.stderr).unwrap();
    // The error still says where and what: the directory and the quoted record field.
    assert!(stderr.contains("line 2"), "{stderr}");
    assert!(
        stderr.contains(r#"unknown surfaceOp "opproj\x1B]0;pwned\x07\x9B2J""#),
        "{stderr}"
    );
    assert!(
        stderr.contains("--proj\\x1B]0;pwned\\x07\\x9B2J--"),
        "{stderr}"
    );
}

#[test]
fn candidates_and_prepare_print_inert_json() {
    let home = hostile_home();
    let candidates = dsh_refs(home.path(), &["candidates", "--as", "me"]);
    assert_eq!(candidates.code, 0);
    assert_inert(&candidates, "candidates");
    let rows: Value = serde_json::from_slice(&candidates.stdout).unwrap();
    assert!(rows
        .as_array()
        .unwrap()
        .iter()
        .any(|row| row["cwd"] == format!("/work/{HOSTILE_NAME}")));

    // A reference to the corrupt log: the contract error quotes its path and record.
    let failed = dsh_refs(
        home.path(),
        &[
            "prepare",
            "--as",
            "me",
            "see @[c](dsh-session:ImNvcnJ1cHQi)",
        ],
    );
    assert_eq!(failed.code, 1);
    assert_inert(&failed, "prepare of a corrupt log");
    let error: Value = serde_json::from_slice(&failed.stdout).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(HOSTILE_NAME),
        "the value is unchanged: {message:?}"
    );

    let prepared = dsh_refs(
        home.path(),
        &["prepare", "--as", "me", "see @[g](dsh-session:Imdvb2Qi)"],
    );
    assert_eq!(
        prepared.code,
        0,
        "{:?}",
        String::from_utf8_lossy(&prepared.stderr)
    );
    assert_inert(&prepared, "prepare");
}
