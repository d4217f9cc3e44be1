//! End to end: one message in the real TUI references a Claude Code session and a Codex session
//! (SPEC §9); the log carries both references, and neither agent's home changes by a byte.

use crate::support::copied_agent_homes;
use crate::support::tmux::Tmux;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every path under `root` with its bytes and modification time (directories: no bytes).
fn tree(root: &Path) -> BTreeMap<PathBuf, (Option<Vec<u8>>, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let modified = meta.modified().unwrap();
            if meta.is_dir() {
                out.insert(path.clone(), (None, modified));
                stack.push(path);
            } else {
                out.insert(path.clone(), (Some(fs::read(&path).unwrap()), modified));
            }
        }
    }
    out
}

/// The one log the TUI wrote under `home`, once `pred` holds for its records.
fn wait_for_log(home: &Path, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let logs: Vec<PathBuf> = fs::read_dir(home.join("sessions"))
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|project| fs::read_dir(project.path()).into_iter().flatten().flatten())
            .map(|session| session.path().join("session.jsonl"))
            .filter(|log| log.exists())
            .collect();
        if let [log] = logs.as_slice() {
            let records: Vec<Value> = fs::read_to_string(log)
                .unwrap()
                .lines()
                .skip(1)
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            if pred(&records) {
                return records;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for the log"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn one_message_references_a_claude_and_a_codex_session() {
    let scratch = tempfile::tempdir().unwrap();
    let (claude, codex) = copied_agent_homes(scratch.path());
    let home = scratch.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let before = (tree(&claude), tree(&codex));

    let command = format!(
        "cd {} && {} --home {} --claude-home {} --codex-home {} --compression none",
        scratch.path().display(),
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.display(),
        claude.display(),
        codex.display()
    );
    let tmux = Tmux::start("external", &command, 120, 34);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));

    tmux.type_text("compare @claude:d6e0");
    tmux.wait_for_screen("the Claude candidate", |s| {
        s.contains("start phoenix in background") && s.contains("claude")
    });
    tmux.keys(&["Tab"]);
    tmux.wait_for_screen("the Claude mention", |s| {
        s.contains("@start phoenix in background")
    });
    tmux.type_text("with @codex:019e1625");
    tmux.wait_for_screen("the Codex candidate", |s| s.contains("show tools"));
    tmux.keys(&["Tab"]);
    tmux.wait_for_screen("the Codex mention", |s| s.contains("@show tools"));
    tmux.keys(&["Enter"]);

    let records = wait_for_log(&home, |r| r.iter().any(|r| r["type"] == "turn/end"));
    let context = records
        .iter()
        .find(|r| r["type"] == "user/message" && r["data"]["source"]["kind"] == "session-reference")
        .expect("a session-reference context message");
    let references = context["data"]["source"]["references"].as_array().unwrap();
    let ids: Vec<&str> = references
        .iter()
        .map(|r| r["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "claude:d6e0bada-1959-4eec-a9d2-0bfade768d8f",
            "codex:019e1625-789d-76c0-80ab-3724b5ddb799"
        ]
    );
    for reference in references {
        assert!(reference["retainedMessages"].as_u64().unwrap() > 0);
    }
    let text = context["data"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("## Referenced sessions\n\n"), "{text}");
    let prompt = records
        .iter()
        .find(|r| r["type"] == "user/message" && r["data"]["source"]["kind"] == "user")
        .unwrap();
    assert_eq!(
        prompt["data"]["content"][0]["text"],
        "compare @start phoenix in background with @show tools"
    );

    tmux.keys(&["C-c"]);
    tmux.keys(&["C-c"]);
    tmux.wait_for_screen("the shell", |s| !s.contains("type @ to reference"));
    drop(tmux);
    assert!(
        before == (tree(&claude), tree(&codex)),
        "another agent's home changed"
    );
}
