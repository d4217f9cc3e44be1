//! Issue 32 (trust, round three): every JSON-RPC request that names an id gets its answer by
//! that id, with the right code, and nothing a host prints carries a raw control. Raw lines
//! against the real binary, as a hostile or broken client would send them.

use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_dsh-refs");

struct Server {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Server {
    fn start() -> (tempfile::TempDir, Server) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        dsh_session_references::demo::install_into(&home).unwrap();
        let mut child = Command::new(BIN)
            .arg("--home")
            .arg(&home)
            .args(["--sources", "dsh", "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                let _ = tx.send(line);
            }
        });
        let mut server = Server {
            child,
            stdin,
            lines,
        };
        server.send(&json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}).to_string());
        assert_eq!(
            server.answer(&json!("init"))["result"]["serverInfo"]["name"],
            "dsh-refs"
        );
        server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        (dir, server)
    }

    fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The answer to `id`, within 20 s (a dropped request fails here, naming the id).
    fn answer(&self, id: &Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("no answer to request {id}"));
            let value: Value = serde_json::from_str(&line).expect("stdout holds JSON only");
            if &value["id"] == id {
                return value;
            }
        }
    }
}

fn assert_shown_safely(answer: &Value) {
    fn walk(value: &Value, path: &str) {
        match value {
            Value::String(text) => {
                let raw = text.chars().find(|&c| {
                    c != '\n'
                        && dsh_session_references::escape::needs_escape(
                            c,
                            dsh_session_references::escape::EscapeMode::SingleLine,
                        )
                });
                assert!(raw.is_none(), "{path} carries {raw:?}: {text:?}");
            }
            Value::Array(items) => {
                for (n, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}[{n}]"));
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    walk(item, &format!("{path}.{key}"));
                }
            }
            _ => {}
        }
    }
    walk(&answer["error"], "error");
}

#[test]
fn every_malformed_request_is_answered_by_its_id_and_serving_goes_on() {
    let (_dir, mut server) = Server::start();
    let cases: Vec<(Value, String, i64)> = vec![
        (json!(1), r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":5}}"#.into(), -32602),
        (json!(2), r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":null}}"#.into(), -32602),
        (json!(3), r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{}}"#.into(), -32602),
        (json!(4), r#"{"jsonrpc":"2.0","id":4,"method":"resources/read"}"#.into(), -32602),
        (json!(5), r#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":["a"]}}"#.into(), -32602),
        (json!("s"), r#"{"jsonrpc":"2.0","id":"s","method":"resources/read","params":{"uri":"dsh-session:\ud800"}}"#.into(), -32602),
        (json!(7), r#"{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"reference","arguments":{"session":"\udfff"}}}"#.into(), -32602),
        (json!(8), r#"{"jsonrpc":"2.0","id":8,"method":"prompts/get","params":{"name":["reference"]}}"#.into(), -32602),
        (json!(9), r#"{"jsonrpc":"2.0","id":9,"method":"completion/complete","params":{"ref":{"type":"ref/prompt"},"argument":3}}"#.into(), -32602),
        (json!(10), format!(r#"{{"jsonrpc":"2.0","id":10,"method":"prompts/get","params":{}0{}}}"#, "[".repeat(3000), "]".repeat(3000)), -32600),
        (json!(11), format!(r#"{{"jsonrpc":"2.0","id":11,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(17 << 20)), -32600),
        (json!(12), r#"{"jsonrpc":"2.0","id":12,"method":"ping","#.into(), -32700),
        (json!(13), "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"resources/read\",\"params\":{\"uri\":\"dsh-session:\\u001b]0;owned\\u0007\\u202e\\u009b31m\"}}".into(), -32602),
        (json!(14), "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"prompts/get\",\"params\":{\"name\":\"reference\",\"arguments\":{\"session\":\"\\u001b[2J\\u202egone\"}}}".into(), -32602),
    ];
    for (id, line, code) in &cases {
        server.send(line);
        let answer = server.answer(id);
        assert_eq!(
            answer["error"]["code"],
            *code,
            "{}: {answer}",
            &line[..line.len().min(120)]
        );
        assert_shown_safely(&answer);
        // Still serving.
        server.send(r#"{"jsonrpc":"2.0","id":"alive","method":"ping"}"#);
        assert!(server.answer(&json!("alive"))["result"].is_object());
    }
    drop(server.stdin);
    let ended = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0));
            break;
        }
        assert!(ended.elapsed() < Duration::from_secs(5), "exits at EOF");
        std::thread::sleep(Duration::from_millis(20));
    }
}
