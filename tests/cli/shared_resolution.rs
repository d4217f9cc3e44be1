//! Issue 24, item 1: every subcommand (`sessions`, `search`, `candidates`, `prepare`, `exec`,
//! `mcp`) honours the same `--home`/`--demo`/`--sources`/`--claude-home` through one
//! resolution: with `--demo` each reads the demo home and none touches `$HOME/.dsh`; with a
//! Claude Code home each finds and references its sessions (`exec` ignored both before).
//! (The TUI takes the same resolution; `tests/e2e/tmux_external.rs` drives it with the flags.)

use dsh_session_references::reference::{
    encode_session_reference_uri, format_session_reference_mention,
};
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_dsh-refs");
const DEMO_SESSION: &str = "f382e8f5-9f34-4706-bea8-95f943fbcb40";
const CLAUDE_SESSION: &str = "claude:d6e0bada-1959-4eec-a9d2-0bfade768d8f";

struct Env {
    _dir: tempfile::TempDir,
    user_home: std::path::PathBuf,
    cache: std::path::PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let user_home = dir.path().join("user");
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&user_home).unwrap();
    Env {
        user_home,
        cache,
        _dir: dir,
    }
}

fn run(env: &Env, flags: &[&str], args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(flags)
        .args(args)
        .env("HOME", &env.user_home)
        .env("XDG_CACHE_HOME", &env.cache)
        .env_remove("DSH_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .env_remove("DSH_PROVIDER")
        .env_remove("DSH_MODEL")
        .env_remove("DSH_BASE_URL")
        .current_dir(&env.user_home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// initialize, resources/list, then end of input: the listing's URIs.
fn mcp_uris(env: &Env, flags: &[&str]) -> Vec<String> {
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#,
    ]
    .join("\n")
        + "\n";
    // Keep stdin open until the answer came: a child closing at once could race the list.
    let mut child = Command::new(BIN)
        .args(flags)
        .arg("mcp")
        .env("HOME", &env.user_home)
        .env("XDG_CACHE_HOME", &env.cache)
        .env_remove("DSH_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    use std::io::BufRead;
    let mut uris = Vec::new();
    for line in stdout.lines() {
        let value: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if value["id"] == 2 {
            for r in value["result"]["resources"].as_array().unwrap() {
                uris.push(r["uri"].as_str().unwrap().to_string());
            }
            break;
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    uris
}

/// Each subcommand reaches `id` through `flags`.
fn every_subcommand_finds(env: &Env, flags: &[&str], id: &str, word: &str) {
    let sessions = ok(&run(env, flags, &["sessions", "--json"], None), "sessions");
    assert!(sessions.contains(id), "sessions: {sessions}");
    let search = ok(
        &run(env, flags, &["search", word, "--json"], None),
        "search",
    );
    assert!(search.contains(id), "search: {search}");
    let candidates = ok(
        &run(
            env,
            flags,
            &["candidates", "--as", "me", "--limit", "500"],
            None,
        ),
        "candidates",
    );
    assert!(candidates.contains(id), "candidates: {candidates}");
    let mention = format_session_reference_mention(id, Some("that session"));
    let prepared = ok(
        &run(env, flags, &["prepare", "--as", "me", &mention], None),
        "prepare",
    );
    let doc: Value = serde_json::from_str(&prepared).unwrap();
    assert_eq!(
        doc["additionalContext"]["source"]["references"][0]["sessionId"],
        id
    );
    let exec = run(
        env,
        flags,
        &["exec", "--json", &format!("what happened in {mention}?")],
        None,
    );
    let stdout = ok(&exec, "exec");
    assert!(stdout.contains("\"type\":\"done\""), "exec: {stdout}");
    let answer: String = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "text")
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect();
    assert!(
        answer.contains("that session"),
        "the offline model saw the reference: {answer}"
    );
    assert!(
        mcp_uris(env, flags).contains(&encode_session_reference_uri(id)),
        "mcp"
    );
}

#[test]
fn demo_is_honoured_by_every_subcommand_and_the_real_home_is_untouched() {
    let env = env();
    every_subcommand_finds(&env, &["--demo"], DEMO_SESSION, "tokenizer");
    assert!(
        !env.user_home.join(".dsh").exists(),
        "nothing written to the real ~/.dsh"
    );
    // exec wrote its session into the demo home.
    let demo = env.cache.join("dsh-refs/demo-home/sessions");
    let logs = walk_count(&demo);
    assert!(logs > 8, "{logs} logs in the demo home");
}

fn walk_count(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            n += walk_count(&entry.path());
        } else {
            n += 1;
        }
    }
    n
}

#[test]
fn claude_sessions_are_reached_by_every_subcommand() {
    let env = env();
    let home = env.user_home.join("dsh-home");
    let claude = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures/claude-code");
    let home_arg = home.to_string_lossy().into_owned();
    let claude_arg = claude.to_string_lossy().into_owned();
    let flags = [
        "--home",
        home_arg.as_str(),
        "--sources",
        "dsh,claude",
        "--claude-home",
        claude_arg.as_str(),
    ];
    every_subcommand_finds(&env, &flags, CLAUDE_SESSION, "phoenix");
}
