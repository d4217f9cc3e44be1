//! Issue 36 item 1: both protocol eras on one server. Raw JSON-RPC lines against the real
//! `dsh-refs mcp` over stdio, as a 2026-07-28 host (no `initialize`; every request carries its
//! version and capabilities in `_meta`) and as a 2025-11-25 host (the session model) send them.

use super::server::{demo_home, new_session};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_dsh-refs");
const MODERN: &str = "2026-07-28";
const REFERENCED: &str = "f382e8f5-9f34-4706-bea8-95f943fbcb40";

/// `_meta` of a 2026-07-28 request.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "era-test", "version": "1"},
    })
}

/// A 2026-07-28 request: `params` with the `_meta` above.
fn modern(id: impl Into<Value>, method: &str, params: Value) -> String {
    let mut params = params;
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params}).to_string()
}

/// The server as a raw line peer.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Lines read while waiting for something else (notifications, other answers).
    seen: Vec<Value>,
}

impl Raw {
    fn start(home: &Path) -> Raw {
        let mut child = Command::new(BIN)
            .arg("--home")
            .arg(home)
            .args(["--sources", "dsh", "mcp"])
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                let _ = tx.send(line);
            }
        });
        Raw {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line within `wait`, as JSON (stdout holds JSON-RPC only).
    fn next(&mut self, wait: Duration) -> Option<Value> {
        match self.lines.recv_timeout(wait) {
            Ok(line) => {
                let value: Value = serde_json::from_str(&line).expect("stdout holds JSON only");
                assert_eq!(value["jsonrpc"], "2.0", "{line}");
                Some(value)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The first line (already seen or read within 30 s) that `wanted` accepts.
    fn until(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.seen.iter().position(&wanted) {
            return self.seen.remove(at);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let value = self
                .next(left)
                .unwrap_or_else(|| panic!("no {what} within 30 s; saw {:?}", self.seen));
            if wanted(&value) {
                return value;
            }
            self.seen.push(value);
        }
    }

    fn answer(&mut self, id: impl Into<Value>) -> Value {
        let id = id.into();
        self.until(&format!("answer to {id}"), |v| {
            v["id"] == id && v.get("method").is_none()
        })
    }

    fn ask(&mut self, id: impl Into<Value> + Clone, method: &str, params: Value) -> Value {
        self.send(&modern(id.clone(), method, params));
        self.answer(id)
    }

    /// Every line read in the next `wait` (and those already seen).
    fn drain(&mut self, wait: Duration) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        let mut all = std::mem::take(&mut self.seen);
        while let Some(value) = self.next(deadline.saturating_duration_since(Instant::now())) {
            all.push(value);
        }
        all
    }

    /// Closes stdin and returns the exit code (within 5 s).
    fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let ended = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(ended.elapsed() < Duration::from_secs(5), "exits at EOF");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_list_changed(v: &Value) -> bool {
    v["method"] == "notifications/resources/list_changed"
}

fn subscription_of(v: &Value) -> &Value {
    &v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
}

/// A 2026-07-28 host reaches everything without `initialize`: discovery, the listing with a
/// brief caching hint, a read that may not be cached, the prompt and its completion, each
/// `resultType: "complete"`.
#[test]
fn a_stateless_client_lists_reads_and_prompts_without_initialize() {
    let (_dir, home) = demo_home();
    let mut server = Raw::start(&home);
    let found = server.ask("d", "server/discover", json!({}));
    let result = &found["result"];
    assert_eq!(result["resultType"], "complete", "{found}");
    let versions = result["supportedVersions"].as_array().unwrap();
    for version in ["2025-06-18", "2025-11-25", MODERN] {
        assert!(versions.contains(&json!(version)), "{found}");
    }
    assert_eq!(result["capabilities"]["resources"]["listChanged"], true);
    assert!(result["capabilities"]["prompts"].is_object());
    assert!(result["capabilities"]["completions"].is_object());
    assert!(result["capabilities"].get("tools").is_none(), "no tools");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "dsh-refs"
    );

    let listed = server.ask(1, "resources/list", json!({}));
    let result = &listed["result"];
    assert_eq!(result["resultType"], "complete", "{listed}");
    assert_eq!(result["ttlMs"], 1000, "a listing may be reused briefly");
    assert_eq!(result["cacheScope"], "private");
    let resources = result["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 8, "{listed}");
    let uri = resources[0]["uri"].as_str().unwrap().to_string();

    let read = server.ask(2, "resources/read", json!({"uri": uri}));
    let result = &read["result"];
    assert_eq!(result["resultType"], "complete", "{read}");
    assert_eq!(result["ttlMs"], 0, "a read is never reused");
    assert_eq!(result["cacheScope"], "private");
    assert!(result["contents"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("## Referenced sessions"));

    let prompts = server.ask(3, "prompts/list", json!({}));
    assert_eq!(prompts["result"]["prompts"][0]["name"], "reference");
    assert_eq!(prompts["result"]["resultType"], "complete");
    assert!(prompts["result"]["ttlMs"].as_u64().unwrap() > 0);
    let got = server.ask(
        4,
        "prompts/get",
        json!({"name": "reference", "arguments": {"session": &REFERENCED[..8]}}),
    );
    assert_eq!(got["result"]["resultType"], "complete", "{got}");
    assert!(got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .starts_with("## Referenced sessions"));
    let completed = server.ask(
        5,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "reference"},
               "argument": {"name": "session", "value": "f3"}}),
    );
    assert!(
        completed["result"]["completion"]["values"]
            .as_array()
            .unwrap()
            .contains(&json!(&REFERENCED[..8])),
        "{completed}"
    );
    assert_eq!(server.close(), Some(0));
}

/// Without the required `_meta` fields a request is invalid params; an unknown version is
/// -32022 naming the supported ones; an unknown session is -32602 with `data.uri` at 2026-07-28.
#[test]
fn stateless_errors_have_the_codes_of_their_revision() {
    let (_dir, home) = demo_home();
    let mut server = Raw::start(&home);
    let version = "io.modelcontextprotocol/protocolVersion";
    let capabilities = "io.modelcontextprotocol/clientCapabilities";
    let partial = [
        json!({}),
        json!({ version: MODERN }),
        json!({ capabilities: {} }),
        json!({ version: 5, capabilities: {} }),
    ];
    for (n, meta) in partial.into_iter().enumerate() {
        for method in ["resources/list", "server/discover"] {
            let id = format!("{method}-{n}");
            server.send(
                &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"_meta": meta}})
                    .to_string(),
            );
            let answer = server.answer(id.as_str());
            assert_eq!(answer["error"]["code"], -32602, "{meta}: {answer}");
        }
    }
    server.send(r#"{"jsonrpc":"2.0","id":"bare","method":"resources/list"}"#);
    assert_eq!(server.answer("bare")["error"]["code"], -32602);

    server.send(
        &json!({"jsonrpc": "2.0", "id": "v", "method": "resources/list",
                "params": {"_meta": { version: "2099-01-01", capabilities: {} }}})
        .to_string(),
    );
    let answer = server.answer("v");
    assert_eq!(answer["error"]["code"], -32022, "{answer}");
    let supported = answer["error"]["data"]["supported"].as_array().unwrap();
    assert!(supported.contains(&json!(MODERN)) && supported.contains(&json!("2025-11-25")));

    let uri = dsh_session_references::reference::encode_session_reference_uri("no-such-session");
    let answer = server.ask("nf", "resources/read", json!({ "uri": uri }));
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["uri"], uri.as_str());
    assert_eq!(
        answer["error"]["data"]["code"],
        "SESSION_REFERENCE_READ_FAILED"
    );
    let answer = server.ask("bad", "resources/read", json!({"uri": "dsh-session:%%"}));
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // Malformed params of the new methods are invalid params too, by id.
    let answer = server.ask("l", "subscriptions/listen", json!({"notifications": 5}));
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(server.close(), Some(0));
}

/// A 2025-11-25 host (and Gemini CLI's 2025-06-18) sees the server as before: its version
/// echoed, no `resultType` or caching hints, -32002 for an unknown session (no `data.uri`), no
/// `subscriptions/listen`; a 2026-07-28 `initialize` is answered with 2025-11-25.
#[test]
fn an_initialized_client_sees_the_session_model_unchanged() {
    let (_dir, home) = demo_home();
    for asked in ["2025-11-25", "2025-06-18", MODERN] {
        let mut server = Raw::start(&home);
        server.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion": asked,"capabilities":{},"clientInfo":{"name":"old","version":"1"}}}).to_string());
        let init = server.answer(0);
        let expected = if asked == MODERN { "2025-11-25" } else { asked };
        assert_eq!(init["result"]["protocolVersion"], expected, "{init}");
        assert!(init["result"].get("resultType").is_none());
        server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        server.send(r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#);
        let listed = server.answer(1);
        for absent in ["resultType", "ttlMs", "cacheScope"] {
            assert!(listed["result"].get(absent).is_none(), "{absent}: {listed}");
        }
        let uri = listed["result"]["resources"][0]["uri"].clone();
        server.send(
            &json!({"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri": uri}})
                .to_string(),
        );
        let read = server.answer(2);
        for absent in ["resultType", "ttlMs", "cacheScope"] {
            assert!(read["result"].get(absent).is_none(), "{absent}: {read}");
        }
        let uri = dsh_session_references::reference::encode_session_reference_uri("no-such");
        server.send(
            &json!({"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri": uri}})
                .to_string(),
        );
        let answer = server.answer(3);
        assert_eq!(answer["error"]["code"], -32002, "{answer}");
        assert!(answer["error"]["data"].get("uri").is_none(), "{answer}");
        server.send(&json!({"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{"resourcesListChanged":true}}}).to_string());
        assert_eq!(server.answer(4)["error"]["code"], -32601);
        server.send(r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#);
        assert!(server.answer(5)["result"].is_object());
        assert_eq!(server.close(), Some(0));
    }
}

/// `subscriptions/listen` is acknowledged before anything else on it, with only the kinds this
/// server sends of those asked for; each `list_changed` carries the subscription's id and goes
/// only to subscriptions that asked for it; a stateless client gets none unsolicited; a
/// cancelled subscription gets no more.
#[test]
fn subscriptions_are_acknowledged_first_tagged_and_only_what_was_asked() {
    let (_dir, home) = demo_home();
    let mut server = Raw::start(&home);
    let listed = server.ask(1, "resources/list", json!({}));
    assert_eq!(listed["result"]["resources"].as_array().unwrap().len(), 8);
    server.send(&modern(
        "all",
        "subscriptions/listen",
        json!({"notifications": {"resourcesListChanged": true, "promptsListChanged": true,
                                 "toolsListChanged": true}}),
    ));
    server.send(&modern(
        "prompts-only",
        "subscriptions/listen",
        json!({"notifications": {"promptsListChanged": true}}),
    ));
    for id in ["all", "prompts-only"] {
        let first = server.until("a first message on the subscription", |v| {
            subscription_of(v) == id || v["id"] == id
        });
        assert_eq!(
            first["method"], "notifications/subscriptions/acknowledged",
            "{first}"
        );
        let accepted = &first["params"]["notifications"];
        if id == "all" {
            assert_eq!(accepted, &json!({"resourcesListChanged": true}), "{first}");
        } else {
            assert_eq!(accepted, &json!({}), "{first}");
        }
    }
    new_session(&home, "fresh-stateless", "/p", "a question for the new era");
    let changed = server.until("list_changed on the subscription", is_list_changed);
    assert_eq!(subscription_of(&changed), "all", "{changed}");
    // The change was seen; nothing went out untagged or to the other subscription.
    let rest = server.drain(Duration::from_secs(3));
    for line in &rest {
        if is_list_changed(line) {
            assert_eq!(subscription_of(line), "all", "{line}");
        }
    }
    let listed = server.ask(2, "resources/list", json!({}));
    let uri = dsh_session_references::reference::encode_session_reference_uri("fresh-stateless");
    assert!(listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["uri"] == uri.as_str()));
    // Cancelled: no more on it.
    server.send(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"all"}}"#,
    );
    std::thread::sleep(Duration::from_millis(300));
    new_session(&home, "after-cancel", "/p", "nobody listens now");
    let rest = server.drain(Duration::from_secs(4));
    assert!(
        !rest.iter().any(is_list_changed),
        "no list_changed after the cancel: {rest:?}"
    );
    assert_eq!(server.close(), Some(0));
}

/// A host that only probes with `server/discover` (or sends nothing) and closes stdin ends the
/// server with exit code 0.
#[test]
fn the_end_of_stdin_after_a_discover_probe_exits_0() {
    let (_dir, home) = demo_home();
    let mut server = Raw::start(&home);
    assert!(server.ask(1, "server/discover", json!({}))["result"].is_object());
    assert!(server.ask(2, "server/discover", json!({}))["result"].is_object());
    assert_eq!(server.close(), Some(0));
    let server = Raw::start(&home);
    assert_eq!(server.close(), Some(0));
}
