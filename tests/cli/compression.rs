//! A home has one encoding (SPEC §1.2): `--compression` asking for the other one is a clear
//! error from the binary, and nothing is written.

use dsh_session_references::session::reader::Encoding;
use dsh_session_references::session::{SessionHeader, SessionWriter};
use std::path::Path;
use std::process::{Command, Stdio};

fn home_with(encoding: Encoding) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    SessionWriter::create(
        home.path(),
        SessionHeader::new("existing", 1, Some("/w".into())),
        encoding,
    )
    .unwrap();
    home
}

/// Every log file under the home's sessions directory.
fn logs(home: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for project in std::fs::read_dir(home.join("sessions")).unwrap() {
        for session in std::fs::read_dir(project.unwrap().path()).unwrap() {
            for file in std::fs::read_dir(session.unwrap().path()).unwrap() {
                found.push(file.unwrap().file_name().to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

fn run(home: &Path, compression: &str) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .arg("--home")
        .arg(home)
        .args(["--compression", compression])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        output.status.code().expect("exit code"),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn compression_none_in_a_zstd_home_is_refused() {
    let home = home_with(Encoding::Zstd);
    let (code, stderr) = run(home.path(), "none");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("uncompressed (session.jsonl) logs")
            && stderr.contains("already holds zstd logs"),
        "{stderr}"
    );
    assert_eq!(logs(home.path()), vec!["session.jsonl.zstd"]);
}

#[test]
fn compression_zstd_in_a_plain_home_is_refused() {
    let home = home_with(Encoding::Plain);
    let (code, stderr) = run(home.path(), "zstd");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("zstd (session.jsonl.zstd) logs")
            && stderr.contains("already holds uncompressed logs"),
        "{stderr}"
    );
    assert_eq!(logs(home.path()), vec!["session.jsonl"]);
}
