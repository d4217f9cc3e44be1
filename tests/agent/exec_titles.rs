//! Titles are the person's own words (issue 24 item 5): a session that mentions another is titled
//! by what was typed, the referenced label named after it, and a search for the label finds the
//! referenced session first, through the real binary against a loopback model server.

use crate::support::model::{answer, chunked, Reply, Server};
use dsh_session_references::reference::format_session_reference_mention;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn run(home: &Path, cwd: &Path, args: &[String]) -> (i32, String, String) {
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
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("DEEPSEEK_API_KEY", "sk-title-test");
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn title_of_log(home: &Path, id: &str) -> Option<String> {
    let dir = home.join("sessions");
    let mut stack = vec![dir];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.ends_with("session.jsonl") && path.to_string_lossy().contains(id) {
                return std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .rfind(|l| l["type"] == "session/title")
                    .map(|l| l["data"]["title"].as_str().unwrap().to_string());
            }
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_is_named_after_the_persons_words_and_ranks_below_its_source() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = Server::start(vec![
        Reply::sse(chunked(&answer(&[], &["Pinned the seed."]))),
        Reply::sse(chunked(&answer(&[], &["The seed was pinned."]))),
    ])
    .await;
    let base = server.base_url();
    let flags: Vec<String> = [
        "--provider",
        "deepseek",
        "--base-url",
        base.as_str(),
        "--compression",
        "none",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (h, w) = (home.path().to_path_buf(), work.path().to_path_buf());
    let exec = move |extra: Vec<String>| {
        let (h, w, flags) = (h.clone(), w.clone(), flags.clone());
        tokio::task::spawn_blocking(move || {
            let mut args = vec!["exec".to_string(), "--json".to_string()];
            args.extend(flags);
            args.extend(extra);
            run(&h, &w, &args)
        })
    };
    let (code, out, err) = exec(vec!["Fix the flaky tokenizer test".into()])
        .await
        .unwrap();
    assert_eq!(code, 0, "{err}");
    let first: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let source = first["sessionId"].as_str().unwrap().to_string();

    let mention = format_session_reference_mention(&source, Some("Fix the flaky tokenizer test"));
    let (code, out, err) = exec(vec![format!("{mention} what was the fix?")])
        .await
        .unwrap();
    assert_eq!(code, 0, "{err}");
    let second: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let copy = second["sessionId"].as_str().unwrap().to_string();

    assert_eq!(
        title_of_log(home.path(), &source).as_deref(),
        Some("Fix the flaky tokenizer test")
    );
    assert_eq!(
        title_of_log(home.path(), &copy).as_deref(),
        Some("what was the fix? (re: Fix the flaky tokenizer test)")
    );

    // `search` (which builds the index) finds the referenced session first, and the copy's
    // first prompt is the person's own words.
    let (h, w) = (home.path().to_path_buf(), work.path().to_path_buf());
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        run(
            &h,
            &w,
            &[
                "search".into(),
                "--json".into(),
                "--sources".into(),
                "dsh".into(),
                "flaky tokenizer".into(),
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{err}");
    let found: Value = serde_json::from_str(&out).unwrap();
    let hits = found["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("{found}"));
    let ids: Vec<&str> = hits
        .iter()
        .map(|h| h["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.first().copied(), Some(source.as_str()), "{found:#}");
    // The copy matches too (its conversation holds the words), below its source.
    let hit = hits
        .iter()
        .find(|h| h["sessionId"] == copy.as_str())
        .unwrap_or_else(|| panic!("{found:#}"));
    assert_eq!(hit["firstPrompt"], "what was the fix?", "{found:#}");
}
