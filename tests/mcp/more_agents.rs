//! Issue 34: the MCP server lists and reads Gemini CLI, opencode, Qwen Code and GitHub Copilot
//! CLI sessions (the homes their real CLIs wrote), each described with its agent's name and
//! labelled by its title, and writes nothing under those homes.

use super::support::{agent_fixtures, copy_tree, tree_with_stamps};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn the_server_lists_and_reads_every_new_agents_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let homes = [
        ("qwen", "qwen-code"),
        ("gemini", "gemini-cli"),
        ("opencode", "opencode"),
        ("copilot", "copilot-cli"),
    ];
    for (name, fixture) in homes {
        copy_tree(&agent_fixtures().join(fixture), &dir.path().join(name));
    }
    let before: Vec<_> = homes
        .iter()
        .map(|(name, _)| tree_with_stamps(&dir.path().join(name)))
        .collect();
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh-refs"));
    command
        .arg("--home")
        .arg(dir.path().join("dsh"))
        .args(["--sources", "qwen,gemini,opencode,copilot"]);
    for (name, _) in homes {
        command
            .arg(format!("--{name}-home"))
            .arg(dir.path().join(name));
    }
    let mut child = command
        .arg("mcp")
        .env("HOME", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut send = |v: Value| writeln!(stdin, "{v}").and_then(|_| stdin.flush()).unwrap();
    let answer = |id: i64| loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("an answer");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == id {
            return v;
        }
    };
    send(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    answer(1);
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    send(json!({"jsonrpc":"2.0","id":2,"method":"resources/list"}));
    let listed = answer(2);
    let resources = listed["result"]["resources"].as_array().unwrap().clone();
    assert_eq!(
        resources.len(),
        16,
        "3 Qwen Code, 3 Gemini CLI, 6 opencode, 4 GitHub Copilot CLI: {listed}"
    );
    for product in ["Qwen Code", "Gemini CLI", "opencode", "GitHub Copilot CLI"] {
        assert!(
            resources.iter().any(|r| r["description"]
                .as_str()
                .unwrap()
                .contains(&format!(" · {product} · "))),
            "no {product} session described: {listed}"
        );
    }
    for title in [
        "QN Renamed Session ✓",
        "GA generated summary",
        "ON named by flag ✓",
        "CB Named Session ✓",
    ] {
        assert!(
            resources.iter().any(|r| r["name"] == title),
            "no resource named {title:?}: {listed}"
        );
    }
    for (n, resource) in resources.iter().enumerate() {
        let id = 10 + n as i64;
        send(
            json!({"jsonrpc":"2.0","id":id,"method":"resources/read","params":{"uri":resource["uri"]}}),
        );
        let read = answer(id);
        let text = read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{read}"));
        assert!(text.starts_with("## Referenced sessions"), "{text}");
        assert!(!text.contains("THINK"), "thinking leaked: {text}");
        assert!(
            !text.contains("CP-TOOL-OUT-7") && !text.contains("<current_datetime>"),
            "a tool result or injected context leaked: {text}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    for ((name, _), before) in homes.iter().zip(before) {
        assert_eq!(
            tree_with_stamps(&dir.path().join(name)),
            before,
            "{name}'s home changed"
        );
    }
}
