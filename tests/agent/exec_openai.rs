//! `dsh-refs exec` end to end through the binary, against a loopback OpenAI-compatible server
//! (SPEC §7): mentions are prepared, the answer streams to stdout, the log is what the TUI
//! writes, failures exit 1 with a clear message, and the API key never leaves the header.

use crate::support::model::{answer, chunked, Reply, Server};
use dsh_session_references::reference::format_session_reference_mention;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const KEY: &str = "sk-exec-Zq81-very-distinctive-key";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn dsh_refs(home: &Path, cwd: &Path, args: &[&str], key: Option<&str>, stdin: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsh-refs"));
    cmd.arg("--home").arg(home).args(args).current_dir(cwd);
    for var in [
        "DEEPSEEK_API_KEY",
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "DSH_PROVIDER",
        "DSH_MODEL",
        "DSH_BASE_URL",
        "DSH_HOME",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("RUST_LOG", "trace");
    if let Some(key) = key {
        cmd.env("DEEPSEEK_API_KEY", key);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
    }
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_answers_with_a_referenced_session_and_logs_what_the_tui_would() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = Server::start(vec![
        Reply::sse(chunked(&answer(&["thinking"], &["We chose ", "SQLite."]))),
        Reply::sse(chunked(&answer(&["hm"], &["You ", "chose SQLite."]))),
        Reply::sse(chunked(&answer(&[], &["Still SQLite."]))),
    ])
    .await;
    let base = server.base_url();
    let flags = [
        "--provider",
        "deepseek",
        "--base-url",
        base.as_str(),
        "--compression",
        "none",
    ];

    let mut args = vec!["exec"];
    args.extend(flags);
    args.extend(["--json", "Which database did we pick?"]);
    let first = {
        let home = home.path().to_path_buf();
        let work = work.path().to_path_buf();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            dsh_refs(&home, &work, &args, Some(KEY), None)
        })
        .await
        .unwrap()
    };
    assert_eq!(first.code, 0, "{}", first.stderr);
    let events = json_lines(&first.stdout);
    assert_eq!(events[0]["type"], "session");
    assert_eq!(events[0]["provider"], "deepseek");
    assert_eq!(events[0]["model"], "deepseek-v4-flash");
    let source_id = events[0]["sessionId"].as_str().unwrap().to_string();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(
        types.contains(&"reasoning") && types.contains(&"usage"),
        "{types:?}"
    );
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "We chose SQLite.");
    assert_eq!(events.last().unwrap()["type"], "done");
    assert_eq!(events.last().unwrap()["reason"]["kind"], "completed");

    // A new session that mentions the first one, prompt from stdin, plain output.
    let mention = format_session_reference_mention(&source_id, Some("db talk"));
    let prompt = format!("{mention} what did we choose?");
    let mut args: Vec<String> = vec!["exec".into()];
    args.extend(flags.iter().map(|s| s.to_string()));
    args.push("-".into());
    let second = {
        let home = home.path().to_path_buf();
        let work = work.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            dsh_refs(&home, &work, &args, Some(KEY), Some(&prompt))
        })
        .await
        .unwrap()
    };
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(second.stdout, "You chose SQLite.\n");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0]["role"], "system");
    let snapshot = messages[1]["content"].as_str().unwrap();
    assert_eq!(messages[1]["role"], "user");
    assert!(snapshot.starts_with("## Referenced sessions"), "{snapshot}");
    assert!(snapshot.contains("We chose SQLite."), "{snapshot}");
    assert!(
        !snapshot.contains("thinking"),
        "reasoning leaked into the snapshot"
    );
    assert_eq!(
        messages[2],
        serde_json::json!({"role": "user", "content": "@db talk what did we choose?"})
    );

    // The second log: context first, then the prompt, then the model's answer with usage.
    let logs: Vec<PathBuf> = files(&home.path().join("sessions"))
        .into_iter()
        .filter(|p| p.ends_with("session.jsonl"))
        .collect();
    assert_eq!(logs.len(), 2);
    let second_log = logs
        .iter()
        .find(|p| !p.to_string_lossy().contains(&source_id))
        .unwrap();
    let lines: Vec<Value> = std::fs::read_to_string(second_log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l["type"].as_str().unwrap())
        .collect();
    let first_user = kinds.iter().position(|k| *k == "user/message").unwrap();
    assert_eq!(
        lines[first_user + 1]["data"]["source"]["kind"],
        "session-reference"
    );
    assert_eq!(lines[first_user + 2]["data"]["source"]["kind"], "user");
    assert!(kinds.contains(&"request/header"), "{kinds:?}");
    let assistant = lines
        .iter()
        .find(|l| l["type"] == "assistant/message")
        .unwrap();
    assert_eq!(assistant["data"]["usage"]["inputTokens"], 20);

    // `--resume` continues the first session with another model: a `change` header.
    let mut args: Vec<String> = vec!["exec".into(), "--resume".into(), source_id.clone()];
    args.extend(flags.iter().map(|s| s.to_string()));
    args.extend(["--model".into(), "deepseek-v4-pro".into(), "sure?".into()]);
    let third = {
        let home = home.path().to_path_buf();
        let work = work.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            dsh_refs(&home, &work, &args, Some(KEY), None)
        })
        .await
        .unwrap()
    };
    assert_eq!(third.code, 0, "{}", third.stderr);
    assert_eq!(third.stdout, "Still SQLite.\n");
    let requests = server.requests();
    assert_eq!(requests[2].body["model"], "deepseek-v4-pro");
    let resumed: Vec<String> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        resumed[1..],
        ["Which database did we pick?", "We chose SQLite.", "sure?"]
    );
    let source_log = logs
        .iter()
        .find(|p| p.to_string_lossy().contains(&source_id))
        .unwrap();
    let headers: Vec<Value> = std::fs::read_to_string(source_log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == "request/header")
        .map(|l| l["data"].clone())
        .collect();
    assert_eq!(headers.len(), 2);
    assert_eq!(headers[0]["reason"], "initial");
    assert_eq!(headers[1]["reason"], "change");
    assert_eq!(headers[1]["header"]["config"]["model"], "deepseek-v4-pro");

    // The key is nowhere but in the Authorization header.
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    for run in [&first, &second, &third] {
        assert!(!run.stdout.contains(KEY) && !run.stderr.contains(KEY));
    }
    let written = files(home.path());
    assert!(written.iter().any(|p| p.ends_with("logs/dsh-refs.log")));
    for path in written {
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(KEY),
            "the key leaked into {}",
            path.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_failures_exit_1_with_a_clear_message() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = Server::start(vec![Reply::status(
        401,
        &format!(
            r#"{{"error":{{"message":"Authentication Fails, your api key: {KEY} is invalid"}}}}"#
        ),
    )])
    .await;
    let base = server.base_url();
    let (h, w) = (home.path().to_path_buf(), work.path().to_path_buf());
    let rejected = tokio::task::spawn_blocking(move || {
        dsh_refs(
            &h,
            &w,
            &[
                "exec",
                "--provider",
                "deepseek",
                "--base-url",
                &base,
                "--compression",
                "none",
                "hello",
            ],
            Some(KEY),
            None,
        )
    })
    .await
    .unwrap();
    assert_eq!(rejected.code, 1);
    assert!(
        rejected.stderr.contains("DEEPSEEK_API_KEY") && rejected.stderr.contains("HTTP 401"),
        "{}",
        rejected.stderr
    );
    assert!(!rejected.stderr.contains(KEY) && !rejected.stdout.contains(KEY));
    for path in files(home.path()) {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(
            !text.contains(KEY),
            "the key leaked into {}",
            path.display()
        );
    }

    // A configured provider without its key: a start-up error naming the variable.
    let (h, w) = (home.path().to_path_buf(), work.path().to_path_buf());
    let no_key = tokio::task::spawn_blocking(move || {
        dsh_refs(
            &h,
            &w,
            &["exec", "--provider", "deepseek", "hello"],
            None,
            None,
        )
    })
    .await
    .unwrap();
    assert_eq!(no_key.code, 1);
    assert!(
        no_key.stderr.contains("DEEPSEEK_API_KEY is not set"),
        "{}",
        no_key.stderr
    );

    // The same from config.toml, and the TUI refuses to start the same way.
    std::fs::write(
        home.path().join("config.toml"),
        "[provider]\nkind = \"openai\"\n",
    )
    .unwrap();
    let (h, w) = (home.path().to_path_buf(), work.path().to_path_buf());
    let tui = tokio::task::spawn_blocking(move || dsh_refs(&h, &w, &[], None, None))
        .await
        .unwrap();
    assert_eq!(tui.code, 1);
    assert!(
        tui.stderr.contains("OPENAI_API_KEY is not set"),
        "{}",
        tui.stderr
    );
    std::fs::remove_file(home.path().join("config.toml")).unwrap();

    // A mention of a session that does not exist: refused before anything is sent or logged.
    let before = files(&home.path().join("sessions")).len();
    let prompt = format!(
        "{} hi",
        format_session_reference_mention("no-such-session", None)
    );
    let (h, w) = (home.path().to_path_buf(), work.path().to_path_buf());
    let missing =
        tokio::task::spawn_blocking(move || dsh_refs(&h, &w, &["exec", &prompt], None, None))
            .await
            .unwrap();
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("Session reference failed")
            && missing.stderr.contains("no-such-session"),
        "{}",
        missing.stderr
    );
    assert_eq!(
        files(&home.path().join("sessions")).len(),
        before,
        "nothing was logged"
    );

    // Nothing configured: the offline model answers.
    let (h, w) = (home.path().to_path_buf(), work.path().to_path_buf());
    let offline =
        tokio::task::spawn_blocking(move || dsh_refs(&h, &w, &["exec", "hello there"], None, None))
            .await
            .unwrap();
    assert_eq!(offline.code, 0, "{}", offline.stderr);
    assert!(
        offline.stdout.starts_with("Offline model here."),
        "{}",
        offline.stdout
    );
}
